// MatrixMarket coordinate I/O: round trips, field/symmetry variants, rejected headers and entries.
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/io/matrix_market.hpp>

#include <random>
#include <string>
#include <vector>

using namespace sdnn;
using sdnn_test::error_text;
using sdnn_test::has;
using sdnn_test::temp_dir;

namespace {
template <class T, class I>
void require_same(csr_matrix<T, I> const& a, csr_matrix<T, I> const& b) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  REQUIRE(a.nnz() == b.nnz());
  REQUIRE(std::equal(a.row_ptr().begin(), a.row_ptr().end(), b.row_ptr().begin()));
  REQUIRE(std::equal(a.col_idx().begin(), a.col_idx().end(), b.col_idx().begin()));
  REQUIRE(std::equal(a.values().begin(), a.values().end(), b.values().begin()));
}

template <class T, class I>
csr_matrix<T, I> random_csr(I rows, I cols, double density, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<I> rp{0}, ci;
  std::vector<T> v;
  for (I i = 0; i < rows; ++i) {
    for (I j = 0; j < cols; ++j)
      if (u(rng) < density) {
        ci.push_back(j);
        v.push_back(static_cast<T>(std::is_floating_point_v<T> ? u(rng) * 200 - 100 : std::floor(u(rng) * 19) - 9));
      }
    rp.push_back(static_cast<I>(ci.size()));
  }
  return make_csr<T, I>(rows, cols, rp, ci, v);
}
}  // namespace

TEMPLATE_TEST_CASE("MatrixMarket round trip is exact", "[io]", float, double, int) {
  temp_dir dir;
  auto const a = random_csr<TestType, std::int32_t>(37, 23, 0.2, 3);
  io::write_matrix_market(dir.file("a.mtx"), a.view());
  require_same(io::read_matrix_market<TestType, std::int32_t>(dir.file("a.mtx")), a);
  auto const b = random_csr<TestType, std::int64_t>(5, 40, 0.3, 4);
  io::write_matrix_market(dir.file("b.mtx"), b.view());
  require_same(io::read_matrix_market<TestType, std::int64_t>(dir.file("b.mtx")), b);
  // Empty shapes.
  csr_matrix<TestType, std::int32_t> e(4, 0, 0);
  io::write_matrix_market(dir.file("e.mtx"), e.view());
  auto const e2 = io::read_matrix_market<TestType, std::int32_t>(dir.file("e.mtx"));
  REQUIRE(e2.rows() == 4);
  REQUIRE(e2.cols() == 0);
  if (io::has_zlib()) {
    io::write_matrix_market(dir.file("a.mtx.gz"), a.view(), true);
    require_same(io::read_matrix_market<TestType, std::int32_t>(dir.file("a.mtx.gz")), a);
  }
}

TEST_CASE("MatrixMarket: pattern, integer, symmetric, skew-symmetric, comments, duplicates summed", "[io]") {
  temp_dir dir;
  io::matrix_market_header h;
  auto const sym = io::read_matrix_market<double, std::int32_t>(
      dir.write("s.mtx", "%%MatrixMarket matrix coordinate real symmetric\n% a comment\n\n3 3 3\n1 1 2.5\n3 1 -1\n3 2 4e1\n"),
      &h);
  REQUIRE(h.field == "real");
  REQUIRE(h.symmetry == "symmetric");
  // [2.5 0 -1; 0 0 40; -1 40 0]
  REQUIRE(sym.nnz() == 5);
  REQUIRE(std::vector<std::int32_t>(sym.row_ptr().begin(), sym.row_ptr().end()) == std::vector<std::int32_t>{0, 2, 3, 5});
  REQUIRE(std::vector<std::int32_t>(sym.col_idx().begin(), sym.col_idx().end()) == std::vector<std::int32_t>{0, 2, 2, 0, 1});
  REQUIRE(std::vector<double>(sym.values().begin(), sym.values().end()) == std::vector<double>{2.5, -1, 40, -1, 40});

  auto const skew = io::read_matrix_market<float, std::int32_t>(
      dir.write("k.mtx", "%%MatrixMarket matrix coordinate integer skew-symmetric\n2 2 1\n2 1 3\n"));
  REQUIRE(std::vector<float>(skew.values().begin(), skew.values().end()) == std::vector<float>{-3, 3});

  auto const pat = io::read_matrix_market<float, std::int32_t>(
      dir.write("p.mtx", "%%MatrixMarket Matrix Coordinate Pattern General\n2 3 3\n2 3\n1 2\n2 1\n"));
  REQUIRE(pat.nnz() == 3);
  REQUIRE(std::vector<std::int32_t>(pat.col_idx().begin(), pat.col_idx().end()) == std::vector<std::int32_t>{1, 0, 2});
  for (float v : pat.values()) REQUIRE(v == 1.f);

  auto const dup = io::read_matrix_market<int, std::int32_t>(
      dir.write("d.mtx", "%%MatrixMarket matrix coordinate integer general\n1 2 3\n1 2 5\n1 1 1\n1 2 -2\n"));
  REQUIRE(dup.nnz() == 2);
  REQUIRE(dup.values()[1] == 3);
}

TEST_CASE("MatrixMarket: bad headers and entries are rejected with the line", "[io]") {
  temp_dir dir;
  auto bad = [&](std::string const& text) {
    auto const p = dir.write("bad.mtx", text);
    return error_text([&] { io::read_matrix_market<double, std::int32_t>(p); });
  };
  CHECK(has(bad(""), "is empty"));
  CHECK(has(bad("%MatrixMarket matrix coordinate real general\n1 1 0\n"), "line 1: expected '%%MatrixMarket matrix"));
  CHECK(has(bad("%%MatrixMarket matrix array real general\n1 1\n1\n"), "only the coordinate format"));
  CHECK(has(bad("%%MatrixMarket matrix coordinate complex general\n1 1 0\n"), "field must be real, integer or pattern"));
  CHECK(has(bad("%%MatrixMarket matrix coordinate real hermitian\n1 1 0\n"), "symmetry must be general"));
  CHECK(has(bad("%%MatrixMarket matrix coordinate real general\n% only comments\n"), "no size line"));
  CHECK(has(bad("%%MatrixMarket matrix coordinate real general\n2 x 1\n"), "line 2: expected the size line"));
  CHECK(has(bad("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n"), "announced 2 entries, the file has 1"));
  CHECK(has(bad("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n2 2 2\n"), "line 4: more entries than the 1"));
  CHECK(has(bad("%%MatrixMarket matrix coordinate real general\n2 2 1\n0 1 1\n"), "line 3: entry (0, 1) is out of range for 2 x 2"));
  CHECK(has(bad("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 3 1\n"), "entry (1, 3) is out of range"));
  CHECK(has(bad("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 abc\n"), "line 3: value 'abc' is not a valid real"));
  CHECK(has(bad("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1\n"), "line 3: expected 3 fields for a real entry, got 2"));
  CHECK(has(bad("%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 1.5\n"), "is not a valid integer"));
  CHECK(has(bad("%%MatrixMarket matrix coordinate real symmetric\n2 3 0\n"), "must be square"));
  CHECK(has(bad("%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n1 2 1\n"), "only the lower triangle"));
  CHECK(has(error_text([&] { io::read_matrix_market<double, std::int32_t>(dir.file("missing.mtx")); }), "cannot open"));
}
