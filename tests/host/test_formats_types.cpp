// Formats: COO, ELL and tiled-dense containers on hand-computed cases, and every kind
// of invalid input for each validate() / make_coo().
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/sdnn.hpp>
#include <sdnn/formats/coo.hpp>
#include <sdnn/formats/ell.hpp>
#include <sdnn/formats/tiled_dense.hpp>

#include <cstdint>
#include <string>
#include <vector>

using namespace sdnn;
using sdnn_test::error_text;
using sdnn_test::has;

// The running example:
//   [1 0 2 0]
//   [0 0 0 0]
//   [0 3 0 4]

TEMPLATE_TEST_CASE("make_coo sorts raw triplets into canonical order", "[formats][coo]", std::int32_t, std::int64_t) {
  using I = TestType;
  auto a = make_coo<float, I>(3, 4, {2, 0, 2, 0}, {3, 2, 1, 0}, {4, 2, 3, 1});
  validate(a);
  REQUIRE(a.rows() == 3);
  REQUIRE(a.cols() == 4);
  REQUIRE(a.nnz() == 4);
  REQUIRE(std::vector<I>(a.row_idx().begin(), a.row_idx().end()) == std::vector<I>{0, 0, 2, 2});
  REQUIRE(std::vector<I>(a.col_idx().begin(), a.col_idx().end()) == std::vector<I>{0, 2, 1, 3});
  REQUIRE(std::vector<float>(a.values().begin(), a.values().end()) == std::vector<float>{1, 2, 3, 4});
  auto v = a.view();
  REQUIRE(v.nnz == 4);
  REQUIRE(v.row_idx[3] == 2);
  REQUIRE(make_coo<double, I>(0, 0, {}, {}, {}).nnz() == 0);
  REQUIRE(make_coo<double, I>(5, 1, {4}, {0}, {7}).values()[0] == 7.0);
}

TEST_CASE("make_coo rejects out-of-range, duplicate and mismatched input", "[formats][coo]") {
  auto mk = [](int rows, int cols, std::vector<int> r, std::vector<int> c, std::vector<float> v) {
    return error_text([&] { make_coo<float, int>(rows, cols, r, c, v); });
  };
  CHECK(has(mk(3, 8, {0, 1, 2}, {0, 1, 9}, {1, 1, 1}), "coo: entry 2 (row 2, col 9): col 9 is out of range for 8 columns"));
  CHECK(has(mk(3, 8, {0, 3}, {0, 1}, {1, 1}), "coo: entry 1 (row 3, col 1): row 3 is out of range for 3 rows"));
  CHECK(has(mk(3, 8, {-1}, {0}, {1}), "row -1 is out of range"));
  CHECK(has(mk(3, 8, {0}, {-4}, {1}), "col -4 is out of range"));
  CHECK(has(mk(3, 8, {1, 0, 1}, {2, 0, 2}, {1, 1, 1}), "coo: entries 0 and 2 are duplicates (row 1, col 2)"));
  CHECK(has(mk(3, 8, {0, 1}, {0}, {1, 1}), "must have the same length, got 2, 1, 2"));
  CHECK(has(mk(-1, 8, {}, {}, {}), "rows and cols must be >= 0"));
  CHECK(has(mk(3, 8, {2, 1, 0}, {0, 0, 0}, {1, 2, 3}), "no throw"));
}

TEST_CASE("validate(coo) names the first bad entry", "[formats][coo]") {
  auto check = [](std::vector<int> r, std::vector<int> c, int rows = 3, int cols = 8) {
    coo_matrix<float, int> a(rows, cols, static_cast<int>(r.size()));
    std::copy(r.begin(), r.end(), a.row_idx().begin());
    std::copy(c.begin(), c.end(), a.col_idx().begin());
    return error_text([&] { validate(a); });
  };
  CHECK(check({0, 1, 2}, {0, 0, 7}) == "no throw");
  CHECK(has(check({0, 1, 1, 2, 2, 2}, {0, 0, 1, 0, 1, 9}), "coo: entry 5 (row 2, col 9): col 9 is out of range for 8 columns"));
  CHECK(has(check({0, 5}, {0, 0}), "coo: entry 1 (row 5, col 0): row 5 is out of range for 3 rows"));
  CHECK(has(check({1, 0}, {0, 0}), "coo: entry 1 (row 0, col 0): comes after entry 0 (row 1, col 0); entries must be sorted by (row, col)"));
  CHECK(has(check({1, 1}, {3, 2}), "coo: entry 1 (row 1, col 2): comes after entry 0 (row 1, col 3)"));
  CHECK(has(check({1, 1}, {3, 3}), "coo: entry 1 (row 1, col 3): duplicates entry 0"));
  {
    coo_matrix<float, int> a(3, 8, 2);
    a.row_idx()[1] = 1;
    a.values() = host_buffer<float>(1);
    CHECK(has(error_text([&] { validate(a); }), "coo: values must have nnz = 2 entries, got 1"));
    a.values() = host_buffer<float>(2);
    a.row_idx() = host_buffer<int>(3);
    CHECK(has(error_text([&] { validate(a); }), "coo: row_idx must have nnz = 2 entries, got 3"));
  }
  CHECK(has(error_text([] { coo_matrix<float, int>(2, -1, 0); }), "coo_matrix: rows, cols and nnz must be >= 0"));
  CHECK(has(error_text([] { validate(coo_view<float, int>{-1, 2, 0, nullptr, nullptr, nullptr}, 0, 0, 0); }),
            "coo: rows, cols and nnz must be >= 0, got -1, 2, 0"));
}

TEMPLATE_TEST_CASE("ell_matrix stores slots column-major with -1 padding", "[formats][ell]", std::int32_t, std::int64_t) {
  using I = TestType;
  ell_matrix<float, I> a(3, 4, 2, 4);
  // A fresh host ELL is all padding.
  for (auto c : a.col_idx()) REQUIRE(c == -1);
  auto v = a.view();
  REQUIRE(v.slot(2, 1) == 5);  // k * rows + i
  // Fill the running example: row 0 = {0:1, 2:2}, row 1 empty, row 2 = {1:3, 3:4}.
  std::vector<I> cols{0, -1, 1, 2, -1, 3};
  std::vector<float> vals{1, 0, 3, 2, 0, 4};
  std::copy(cols.begin(), cols.end(), a.col_idx().begin());
  std::copy(vals.begin(), vals.end(), a.values().begin());
  validate(a);
  REQUIRE(a.width() == 2);
  REQUIRE(a.nnz() == 4);
  ell_matrix<double, I> empty(0, 0, 0, 0);
  validate(empty);
  ell_matrix<double, I> padded(5, 3, 4, 0);
  validate(padded);
}

TEST_CASE("validate(ell) rejects every kind of invalid input", "[formats][ell]") {
  // 3 x 4, width 2; slots column-major: [row0 k0, row1 k0, row2 k0, row0 k1, row1 k1, row2 k1]
  auto check = [](std::vector<int> c, std::vector<float> v, int nnz = 4) {
    ell_matrix<float, int> a(3, 4, 2, nnz);
    std::copy(c.begin(), c.end(), a.col_idx().begin());
    std::copy(v.begin(), v.end(), a.values().begin());
    return error_text([&] { validate(a); });
  };
  CHECK(check({0, -1, 1, 2, -1, 3}, {1, 0, 3, 2, 0, 4}) == "no throw");
  CHECK(has(check({0, -1, 1, 9, -1, 3}, {1, 0, 3, 2, 0, 4}),
            "ell: row 0, slot 1 (col_idx[3]): col 9 is out of range for 4 columns"));
  CHECK(has(check({0, -1, -2, 2, -1, 3}, {1, 0, 3, 2, 0, 4}), "ell: row 2, slot 0 (col_idx[2]): col -2 is out of range"));
  CHECK(has(check({0, -1, 1, 2, -1, 3}, {1, 5, 3, 2, 0, 4}),
            "ell: row 1, slot 0 (values[1]): padding slot must hold value 0, got 5"));
  CHECK(has(check({0, -1, 1, 2, 0, 3}, {1, 0, 3, 2, 1, 4}, 5),
            "ell: row 1, slot 1 (col_idx[4]): col 0 follows a padding slot"));
  CHECK(has(check({2, -1, 1, 0, -1, 3}, {1, 0, 3, 2, 0, 4}),
            "ell: row 0, slot 1 (col_idx[3]): col 0 must be greater than slot 0's col 2"));
  CHECK(has(check({2, -1, 1, 2, -1, 3}, {1, 0, 3, 2, 0, 4}), "(columns sorted and unique within a row)"));
  CHECK(has(check({0, -1, 1, 2, -1, 3}, {1, 0, 3, 2, 0, 4}, 3), "ell: nnz = 3 but 4 slots hold entries"));
  {
    ell_matrix<float, int> a(3, 4, 2, 0);
    a.values() = host_buffer<float>(5);
    CHECK(has(error_text([&] { validate(a); }), "ell: values must have width * rows = 6 entries, got 5"));
    a.col_idx() = host_buffer<int>(7);
    std::fill(a.col_idx().begin(), a.col_idx().end(), -1);
    CHECK(has(error_text([&] { validate(a); }), "ell: col_idx must have width * rows = 6 entries, got 7"));
  }
  CHECK(has(error_text([] { ell_matrix<float, int>(3, 4, 1, 4); }), "nnz = 4 does not fit in rows * width = 3 * 1"));
  CHECK(has(error_text([] { ell_matrix<float, int>(3, 4, -1, 0); }), "rows, cols, width and nnz must be >= 0"));
}

TEST_CASE("tiled_dense_matrix lays out tiles, occupancy and the tile list", "[formats][tiled]") {
  // The running example with 2 x 3 tiles: grid 2 x 2, tile (0, 1) is all zero.
  tiled_dense_matrix<float> a(3, 4, 2, 3);
  validate(a);  // all zero, empty index
  REQUIRE(a.grid_rows() == 2);
  REQUIRE(a.grid_cols() == 2);
  REQUIRE(a.values().size() == 24);
  a(0, 0) = 1;
  a(0, 2) = 2;
  a(2, 1) = 3;
  a(2, 3) = 4;
  update_tile_index(a);
  validate(a);
  std::vector<float> expect{1, 0, 2, 0, 0, 0,  // tile (0, 0)
                            0, 0, 0, 0, 0, 0,  // tile (0, 1): col 3 + padding
                            0, 3, 0, 0, 0, 0,  // tile (1, 0): row 2 + padding row
                            4, 0, 0, 0, 0, 0};
  REQUIRE(std::vector<float>(a.values().begin(), a.values().end()) == expect);
  REQUIRE(std::vector<std::uint8_t>(a.occupied().begin(), a.occupied().end()) == std::vector<std::uint8_t>{1, 0, 1, 1});
  REQUIRE(std::vector<std::int64_t>(a.tile_row_ptr().begin(), a.tile_row_ptr().end()) == std::vector<std::int64_t>{0, 1, 3});
  REQUIRE(std::vector<std::int64_t>(a.tile_col().begin(), a.tile_col().end()) == std::vector<std::int64_t>{0, 0, 1});
  auto v = a.view();
  REQUIRE(v.occupied_tiles == 3);
  REQUIRE(v.offset(2, 3) == 18);
  REQUIRE(v.tile(1, 0)[1] == 3.0f);
  REQUIRE(a(2, 3) == 4.0f);
  tiled_dense_matrix<float> def;
  validate(def);
  REQUIRE(def.tile_rows() == 32);
}

TEST_CASE("validate(tiled_dense) rejects every kind of invalid input", "[formats][tiled]") {
  auto example = [] {
    tiled_dense_matrix<float> a(3, 4, 2, 3);
    a(0, 0) = 1;
    a(0, 2) = 2;
    a(2, 1) = 3;
    a(2, 3) = 4;
    update_tile_index(a);
    return a;
  };
  {
    auto a = example();
    a.occupied()[1] = 1;
    CHECK(has(error_text([&] { validate(a); }), "tiled_dense: tile (0, 1): occupied = 1 but the tile is all zero"));
  }
  {
    auto a = example();
    a.occupied()[3] = 0;
    CHECK(has(error_text([&] { validate(a); }), "tiled_dense: tile (1, 1): occupied = 0 but element (2, 3) is nonzero"));
  }
  {
    auto a = example();
    a.occupied()[0] = 2;
    CHECK(has(error_text([&] { validate(a); }), "tiled_dense: tile (0, 0): occupied must be 0 or 1, got 2"));
  }
  {
    auto a = example();
    a.values()[15] = 5;  // tile (1, 0) local (1, 0) = element (3, 0): outside 3 rows
    CHECK(has(error_text([&] { validate(a); }), "tiled_dense: tile (1, 0): padding element (3, 0) outside the 3 x 4 matrix must be 0"));
  }
  {
    auto a = example();
    a.tile_col()[1] = 1;
    CHECK(has(error_text([&] { validate(a); }), "tiled_dense: tile_col[1] must be 0 (the next occupied tile of tile row 1), got 1"));
  }
  {
    auto a = example();
    a.tile_row_ptr()[1] = 2;
    CHECK(has(error_text([&] { validate(a); }), "tiled_dense: tile_row_ptr[1] must be 1 (occupied tiles before tile row 1), got 2"));
  }
  {
    auto a = example();
    a.tile_row_ptr()[0] = 1;
    CHECK(has(error_text([&] { validate(a); }), "tiled_dense: tile_row_ptr[0] must be 0, got 1"));
  }
  {
    auto a = example();
    a.tile_col() = host_buffer<std::int64_t>(2);
    a.tile_row_ptr()[2] = 2;
    CHECK(has(error_text([&] { validate(a); }), "tiled_dense: tile (1, 1) is occupied but tile_col has only 2 entries"));
  }
  {
    auto a = example();
    host_buffer<std::int64_t> longer(4);
    longer[2] = 1;  // {0, 0, 1, 0}: the three right entries and one extra
    a.tile_col() = std::move(longer);
    CHECK(has(error_text([&] { validate(a); }), "must equal the 3 occupied tiles, got 3 and 4"));
  }
  {
    auto a = example();
    a.values() = host_buffer<float>(23);
    CHECK(has(error_text([&] { validate(a); }), "tiled_dense: data must have 24 entries (4 tiles of 6), got 23"));
  }
  {
    auto a = example();
    a.occupied() = host_buffer<std::uint8_t>(3);
    CHECK(has(error_text([&] { validate(a); }), "tiled_dense: occupied must have one entry per tile = 4, got 3"));
  }
  {
    auto a = example();
    a.tile_row_ptr() = host_buffer<std::int64_t>(2);
    CHECK(has(error_text([&] { validate(a); }), "tiled_dense: tile_row_ptr must have grid_rows + 1 = 3 entries, got 2"));
  }
  {
    auto a = example();
    auto v = static_cast<tiled_dense_view<float const>>(a.view());
    v.grid_cols = 3;
    CHECK(has(error_text([&] { validate<float>(v, 24, 4, 3, 3); }), "tiled_dense: tile grid must be 2 x 2"));
    v.grid_cols = 2;
    v.tile_rows = 0;
    CHECK(has(error_text([&] { validate<float>(v, 24, 4, 3, 3); }), "tiled_dense: tile shape must be positive, got 0 x 3"));
  }
  CHECK(has(error_text([] { tiled_dense_matrix<float>(3, 4, 0, 3); }), "tiled_dense_matrix: tile shape must be positive"));
  CHECK(has(error_text([] { tiled_dense_matrix<float>(-3, 4, 2, 3); }), "tiled_dense_matrix: shape must be non-negative"));
}
