// Formats: host conversions (hand-computed cases and round trips on seeded random
// matrices of every edge shape) and matrix statistics.
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/sdnn.hpp>
#include <sdnn/formats/convert.hpp>
#include <sdnn/formats/stats.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

using namespace sdnn;
using sdnn_test::error_text;
using sdnn_test::has;

namespace {
template <class B>
auto vec(B const& b) {
  return std::vector<typename B::value_type>(b.begin(), b.end());
}

// The running example:
//   [1 0 2 0]
//   [0 0 0 0]
//   [0 3 0 4]
template <class T, class I>
csr_matrix<T, I> example() {
  return make_csr<T, I>(3, 4, {0, 2, 2, 4}, {0, 2, 1, 3}, {1, 2, 3, 4});
}

// Seeded random CSR: each row is empty with probability empty_frac, else each entry is
// stored with probability density; values are small nonzero integers so every
// conversion (through dense too) is exact.
template <class T, class I>
csr_matrix<T, I> random_csr(I rows, I cols, double density, unsigned seed, double empty_frac = 0.2) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::uniform_int_distribution<int> val(1, 8);
  std::vector<I> rp{0}, ci;
  std::vector<T> v;
  for (I i = 0; i < rows; ++i) {
    bool const empty = u(gen) < empty_frac;
    for (I j = 0; j < cols && !empty; ++j)
      if (u(gen) < density) {
        ci.push_back(j);
        v.push_back(static_cast<T>(u(gen) < 0.5 ? -val(gen) : val(gen)));
      }
    rp.push_back(static_cast<I>(ci.size()));
  }
  return make_csr<T, I>(rows, cols, rp, ci, v);
}

template <class T, class I>
void require_equal(csr_matrix<T, I> const& a, csr_matrix<T, I> const& b) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  REQUIRE(a.nnz() == b.nnz());
  REQUIRE(vec(a.row_ptr()) == vec(b.row_ptr()));
  REQUIRE(vec(a.col_idx()) == vec(b.col_idx()));
  REQUIRE(vec(a.values()) == vec(b.values()));
}
template <class T>
void require_equal(dense_matrix<T> const& a, dense_matrix<T> const& b) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  REQUIRE(vec(a.values()) == vec(b.values()));
}

struct shape {
  std::int64_t rows, cols;
  double density;
};
// 0 rows, 0 cols, one column, one row, nnz 0, sizes not multiple of the tile sizes, dense.
std::vector<shape> const shapes{{0, 0, 0.5}, {0, 7, 0.5}, {6, 0, 0.5}, {1, 1, 1.0}, {9, 1, 0.6}, {1, 40, 0.3},
                                {20, 20, 0.0}, {33, 65, 0.1}, {64, 64, 0.05}, {100, 37, 0.3}, {31, 70, 1.0}};
}  // namespace

TEMPLATE_TEST_CASE("host conversions on the hand-computed example", "[formats][convert]", std::int32_t, std::int64_t) {
  using I = TestType;
  auto a = example<float, I>();

  auto coo = to_coo(a);
  validate(coo);
  REQUIRE(vec(coo.row_idx()) == std::vector<I>{0, 0, 2, 2});
  REQUIRE(vec(coo.col_idx()) == std::vector<I>{0, 2, 1, 3});
  require_equal(to_csr(coo), a);

  auto ell = to_ell(a);
  validate(ell);
  REQUIRE(ell.width() == 2);
  REQUIRE(vec(ell.col_idx()) == std::vector<I>{0, -1, 1, 2, -1, 3});
  REQUIRE(vec(ell.values()) == std::vector<float>{1, 0, 3, 2, 0, 4});
  auto ell3 = to_ell(a, 3, host_exec{});
  validate(ell3);
  REQUIRE(vec(ell3.col_idx()) == std::vector<I>{0, -1, 1, 2, -1, 3, -1, -1, -1});
  require_equal(to_csr(ell3), a);
  REQUIRE(has(error_text([&] { to_ell(a, 1); }), "to_ell: requested width 1 is smaller than the longest row (row 0 has 2 entries)"));

  auto d = to_dense(a);
  REQUIRE(vec(d.values()) == std::vector<float>{1, 0, 2, 0, 0, 0, 0, 0, 0, 3, 0, 4});
  require_equal(to_csr<I>(d), a);
  require_equal(to_dense(coo), d);
  auto coo2 = to_coo<I>(d);
  REQUIRE(vec(coo2.row_idx()) == vec(coo.row_idx()));
  REQUIRE(vec(coo2.values()) == vec(coo.values()));

  auto t = to_tiled_dense(a, 2, 3);
  validate(t);
  REQUIRE(vec(t.values()) == std::vector<float>{1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0});
  REQUIRE(vec(t.occupied()) == std::vector<std::uint8_t>{1, 0, 1, 1});
  REQUIRE(vec(t.tile_row_ptr()) == std::vector<std::int64_t>{0, 1, 3});
  REQUIRE(vec(t.tile_col()) == std::vector<std::int64_t>{0, 0, 1});
  require_equal(to_csr<I>(t), a);
  require_equal(to_dense(t), d);
  auto t32 = to_tiled_dense(a);
  REQUIRE(t32.values().size() == 32 * 32);
  REQUIRE(t32.occupied_tiles() == 1);

  // A^T = [1 0 0; 0 0 3; 2 0 0; 0 0 4]
  auto at = transpose(a);
  validate(at);
  REQUIRE(at.rows() == 4);
  REQUIRE(at.cols() == 3);
  REQUIRE(vec(at.row_ptr()) == std::vector<I>{0, 1, 2, 3, 4});
  REQUIRE(vec(at.col_idx()) == std::vector<I>{0, 2, 0, 2});
  REQUIRE(vec(at.values()) == std::vector<float>{1, 3, 2, 4});
}

TEST_CASE("host conversions keep stored zeros in sparse formats and drop them from dense", "[formats][convert]") {
  auto a = make_csr<double, int>(2, 2, {0, 1, 2}, {1, 0}, {0.0, 5.0});
  require_equal(to_csr(to_coo(a)), a);
  require_equal(to_csr(to_ell(a)), a);
  auto t = to_tiled_dense(a, 1, 1);
  validate(t);
  REQUIRE(vec(t.occupied()) == std::vector<std::uint8_t>{0, 0, 1, 0});
  auto back = to_csr(t);
  REQUIRE(back.nnz() == 1);
  REQUIRE(vec(back.row_ptr()) == std::vector<int>{0, 0, 1});
  REQUIRE(to_csr(to_dense(a)).nnz() == 1);
}

TEMPLATE_TEST_CASE("host conversions round-trip seeded random matrices", "[formats][convert]", std::int32_t,
                   std::int64_t) {
  using I = TestType;
  unsigned seed = 1;
  for (auto const& s : shapes) {
    for (double empty_frac : {0.0, 0.3}) {
      INFO("shape " << s.rows << " x " << s.cols << ", density " << s.density << ", empty rows " << empty_frac);
      auto a = random_csr<double, I>(static_cast<I>(s.rows), static_cast<I>(s.cols), s.density, seed++, empty_frac);

      auto coo = to_coo(a);
      validate(coo);
      require_equal(to_csr(coo), a);

      auto ell = to_ell(a);
      validate(ell);
      require_equal(to_csr(ell), a);
      auto wide = to_ell(a, ell.width() + 3);
      validate(wide);
      REQUIRE(wide.width() == ell.width() + 3);
      require_equal(to_csr(wide), a);

      auto d = to_dense(a);
      require_equal(to_csr<I>(d), a);
      require_equal(to_dense(coo), d);
      auto coo_d = to_coo<I>(d);
      validate(coo_d);
      require_equal(to_csr(coo_d), a);
      require_equal(to_dense(ell), d);

      for (auto [tr, tc] : {std::pair<std::int64_t, std::int64_t>{32, 32}, {3, 5}, {1, 1}, {7, 64}}) {
        INFO("tile " << tr << " x " << tc);
        auto t = to_tiled_dense(a, tr, tc);
        validate(t);
        require_equal(to_csr<I>(t), a);
        require_equal(to_dense(t), d);
        auto td = to_tiled_dense(d, tr, tc);
        REQUIRE(vec(td.values()) == vec(t.values()));
        REQUIRE(vec(td.tile_col()) == vec(t.tile_col()));
        // Stats count the same occupied tiles (all stored values are nonzero here).
        auto st = compute_stats(a, tr, tc);
        REQUIRE(st.occupied_tiles == t.occupied_tiles());
        REQUIRE(st.tiles == t.num_tiles());
      }

      auto at = transpose(a);
      validate(at);
      require_equal(transpose(at), a);
      // Reference: the transpose of the dense matrix.
      dense_matrix<double> dt(d.cols(), d.rows());
      for (std::int64_t i = 0; i < d.rows(); ++i)
        for (std::int64_t j = 0; j < d.cols(); ++j) dt(j, i) = d(i, j);
      require_equal(to_csr<I>(dt), at);
    }
  }
}

TEST_CASE("to_csr(dense_view) honours the leading dimension", "[formats][convert]") {
  std::vector<float> storage{1, 0, 9, 9, 0, 2, 9, 9};  // 2 x 2 with ld 4
  dense_view<float const> v{2, 2, 4, storage.data()};
  auto a = to_csr(v, host_exec{});
  REQUIRE(vec(a.row_ptr()) == std::vector<int>{0, 1, 2});
  REQUIRE(vec(a.col_idx()) == std::vector<int>{0, 1});
  REQUIRE(vec(a.values()) == std::vector<float>{1, 2});
}

TEST_CASE("compute_stats on the hand-computed example", "[formats][stats]") {
  auto a = example<float, int>();
  auto s = compute_stats(a, 2, 3);
  REQUIRE(s.rows == 3);
  REQUIRE(s.cols == 4);
  REQUIRE(s.nnz == 4);
  REQUIRE(s.min_row_nnz == 0);
  REQUIRE(s.max_row_nnz == 2);
  REQUIRE(s.mean_row_nnz == sdnn_test::Approx(4.0 / 3.0));
  REQUIRE(s.row_nnz_stddev == sdnn_test::Approx(std::sqrt(8.0) / 3.0));  // var = 8/3 - 16/9
  REQUIRE(s.empty_rows == 1);
  REQUIRE(s.tiles == 4);
  REQUIRE(s.occupied_tiles == 3);
  REQUIRE(s.tile_occupancy == 0.75);
  REQUIRE(s.density() == sdnn_test::Approx(4.0 / 12.0));
  REQUIRE(s.empty_row_fraction() == sdnn_test::Approx(1.0 / 3.0));
  auto d = compute_stats(a);  // 32 x 32 tiles
  REQUIRE(d.tile_rows == 32);
  REQUIRE(d.tiles == 1);
  REQUIRE(d.tile_occupancy == 1.0);

  auto e = compute_stats(make_csr<float, int>(0, 5, {0}, {}, {}));
  REQUIRE(e.rows == 0);
  REQUIRE(e.min_row_nnz == 0);
  REQUIRE(e.mean_row_nnz == 0.0);
  REQUIRE(e.tiles == 0);
  REQUIRE(e.tile_occupancy == 0.0);
  auto z = compute_stats(make_csr<float, int>(4, 5, {0, 0, 0, 0, 0}, {}, {}), host_exec{});
  REQUIRE(z.empty_rows == 4);
  REQUIRE(z.max_row_nnz == 0);
  REQUIRE(z.row_nnz_stddev == 0.0);
  REQUIRE(z.occupied_tiles == 0);
  REQUIRE(has(error_text([&] { compute_stats(a, 0, 3); }), "compute_stats: tile shape must be positive"));
}

TEST_CASE("compute_stats matches a brute-force count on random matrices", "[formats][stats]") {
  unsigned seed = 100;
  for (auto const& s : shapes) {
    auto a = random_csr<float, std::int64_t>(s.rows, s.cols, s.density, seed++);
    auto st = compute_stats(a, 5, 7);
    auto d = to_dense(a);
    std::int64_t mn = s.rows ? s.cols + 1 : 0, mx = 0, empty = 0;
    double sum = 0, sum_sq = 0;
    for (std::int64_t i = 0; i < d.rows(); ++i) {
      std::int64_t len = 0;
      for (std::int64_t j = 0; j < d.cols(); ++j) len += d(i, j) != 0;
      mn = std::min(mn, len);
      mx = std::max(mx, len);
      empty += len == 0;
      sum += static_cast<double>(len);
      sum_sq += static_cast<double>(len * len);
    }
    REQUIRE(st.nnz == a.nnz());
    REQUIRE(st.min_row_nnz == mn);
    REQUIRE(st.max_row_nnz == mx);
    REQUIRE(st.empty_rows == empty);
    if (s.rows) {
      double const mean = sum / static_cast<double>(s.rows);
      REQUIRE(st.mean_row_nnz == sdnn_test::Approx(mean));
      // Two-pass variance as the reference; tolerance 1e-9 absolute (sums reorder).
      double var = 0;
      for (std::int64_t i = 0; i < d.rows(); ++i) {
        std::int64_t len = 0;
        for (std::int64_t j = 0; j < d.cols(); ++j) len += d(i, j) != 0;
        var += (static_cast<double>(len) - mean) * (static_cast<double>(len) - mean);
      }
      REQUIRE(st.row_nnz_stddev == sdnn_test::Approx(std::sqrt(var / static_cast<double>(s.rows))).margin(1e-9));
    }
    REQUIRE(st.occupied_tiles == to_tiled_dense(a, 5, 7).occupied_tiles());
  }
}
