// Host tier of the kernel families: the reference products on hand-computed cases, the
// host executor's dispatch for every policy tag, argument checks, and the
// policy::automatic rules on synthetic statistics.
#include "sdnn_catch.hpp"

#include <sdnn/formats/convert.hpp>
#include <sdnn/linear/op/gemm.hpp>
#include <sdnn/linear/op/spmm.hpp>
#include <sdnn/linear/op/dense_sparse.hpp>
#include <sdnn/linear/policy/automatic.hpp>
#include <sdnn/sdnn.hpp>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

using namespace sdnn;

namespace {
// A = [[1, 0, 2], [0, 0, 0], [0, 3, 0]] (3 x 3), B = [[1, 2], [3, 4], [5, 6]] (3 x 2)
// A * B = [[11, 14], [0, 0], [9, 12]]
csr_matrix<float, int> small_a() { return make_csr<float, int>(3, 3, {0, 2, 2, 3}, {0, 2, 1}, {1.f, 2.f, 3.f}); }
dense_matrix<float> small_b() {
  dense_matrix<float> b(3, 2);
  float const v[] = {1, 2, 3, 4, 5, 6};
  for (int i = 0; i < 6; ++i) b.values()[i] = v[i];
  return b;
}
std::vector<float> values(dense_matrix<float> const& m) { return {m.values().begin(), m.values().end()}; }
}  // namespace

TEST_CASE("reference spmm on a hand-computed case, every format", "[ops][reference]") {
  auto const a = small_a();
  auto const b = small_b();
  std::vector<float> const expected{11, 14, 0, 0, 9, 12};
  dense_matrix<float> c(3, 2);
  ops::spmm(host_exec{}, policy::csr_row_split<>{}, a.view(), b.view(), c.view(), epilogue_none<float>());
  REQUIRE(values(c) == expected);
  auto const coo = to_coo(a);
  dense_matrix<float> c2(3, 2);
  ops::spmm(host_exec{}, policy::coo_nnz_split<>{}, coo.view(), b.view(), c2.view(), epilogue_none<float>());
  REQUIRE(values(c2) == expected);
  auto const ell = to_ell(a);
  dense_matrix<float> c3(3, 2);
  ops::spmm(host_exec{}, policy::ell_row_split<>{}, ell.view(), b.view(), c3.view(), epilogue_none<float>());
  REQUIRE(values(c3) == expected);
  auto const tiled = to_tiled_dense(a, 2, 2);
  dense_matrix<float> c4(3, 2);
  ops::spmm(host_exec{}, policy::tiled_dense_spmm{}, tiled.view(), b.view(), c4.view(), epilogue_none<float>());
  REQUIRE(values(c4) == expected);
}

TEST_CASE("reference epilogues: bias per column, ReLU, cap, Graph Challenge rule", "[ops][reference]") {
  auto const a = small_a();
  auto const b = small_b();
  float bias[2] = {-12.f, 1.f};
  basic_epilogue<float> e;
  e.bias = bias;
  e.relu = true;
  e.has_cap = true;
  e.cap = 13.f;
  dense_matrix<float> c(3, 2);
  ops::spmm(host_exec{}, policy::automatic{}, a.view(), b.view(), c.view(), e);
  // [[11-12, 14+1], [0-12, 0+1], [9-12, 12+1]] -> relu, cap 13
  REQUIRE(values(c) == std::vector<float>{0, 13, 0, 1, 0, 13});
  dense_matrix<float> g(3, 2);
  ops::spmm(host_exec{}, policy::csr_row_split<>{}, a.view(), b.view(), g.view(), epilogue_capped_relu<float>(-10.f, 3.f));
  // bias only on nonzero products: row 1 stays 0.
  REQUIRE(values(g) == std::vector<float>{1, 3, 0, 0, 0, 2});
}

// Kernels that read a column's bias once (the TMA block kernel) call bias_at and apply; the result
// must be the one-step call's, bit for bit, in every configuration and on zeros, NaN and infinities.
TEST_CASE("the epilogue in two steps (bias_at, apply) gives the one-step call's bits", "[ops][reference][epilogue]") {
  float const inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  float const bias[3] = {-0.0f, 1.5f, -3e38f};
  float const accs[] = {0.0f, -0.0f, 1.0f, -2.5f, 3e38f, -3e38f, inf, -inf, nan, 1e-45f};
  int checked = 0;
  for (float const* b : {static_cast<float const*>(nullptr), bias})
    for (float scalar : {0.0f, -0.0f, 2.0f})
      for (bool on_zero : {true, false})
        for (bool relu : {false, true})
          for (bool has_cap : {false, true}) {
            basic_epilogue<float> e;
            e.bias = b, e.bias_scalar = scalar, e.bias_on_zero = on_zero, e.relu = relu, e.has_cap = has_cap;
            e.cap = 2.5f;
            for (std::int64_t col = 0; col < 3; ++col)
              for (float acc : accs) {
                float const one = e(acc, col), two = e.apply(acc, e.bias_at(col));
                INFO("bias " << (b ? "set" : "none") << " scalar " << scalar << " on_zero " << on_zero << " relu " << relu
                             << " cap " << has_cap << " col " << col << " acc " << acc);
                CHECK(std::memcmp(&one, &two, sizeof(float)) == 0);
                ++checked;
              }
          }
  REQUIRE(checked == 2 * 3 * 2 * 2 * 2 * 3 * 10);
}

TEST_CASE("reference gemm and dense x sparse agree with spmm", "[ops][reference]") {
  auto const a = small_a();
  auto const b = small_b();
  auto const ad = to_dense(a);
  dense_matrix<float> c(3, 2);
  ops::gemm(host_exec{}, policy::tiled_gemm<>{}, ad.view(), b.view(), c.view(), epilogue_none<float>());
  REQUIRE(values(c) == std::vector<float>{11, 14, 0, 0, 9, 12});
  dense_matrix<float> c2(3, 2);
  ops::gemm(host_exec{}, policy::skip_empty_rows_compact<policy::tiled_gemm<>>{}, ad.view(), b.view(), c2.view(),
            epilogue_relu<float>());
  REQUIRE(values(c2) == values(c));
  // (A * B) as dense x sparse: rows of B^T... use W = A (3 x 3) and Y = B^T (2 x 3).
  dense_matrix<float> y(2, 3);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) y(i, j) = b(j, i);
  dense_matrix<float> yw(2, 3);
  ops::spmm_dense_sparse(host_exec{}, policy::csc_gather<>{}, y.view(), a.view(), yw.view(), epilogue_none<float>());
  // Y * A = [[1, 15, 2], [2, 18, 4]]
  REQUIRE(values(yw) == std::vector<float>{1, 15, 2, 2, 18, 4});
  std::vector<int> counts(3);
  reference::row_nonzero_counts(ad.view(), counts.data());
  REQUIRE(counts == std::vector<int>{2, 0, 1});
}

TEST_CASE("ops check shapes and say what was expected", "[ops][reference]") {
  auto const a = small_a();
  dense_matrix<float> b(4, 2), c(3, 2), bad_c(2, 2);
  try {
    ops::spmm(host_exec{}, policy::csr_row_split<>{}, a.view(), b.view(), c.view(), epilogue_none<float>());
    FAIL("no throw");
  } catch (sdnn::error const& e) {
    REQUIRE(std::string(e.what()).find("B has 4 rows (expected 3)") != std::string::npos);
  }
  auto const b3 = small_b();
  REQUIRE_THROWS_AS(
      ops::spmm(host_exec{}, policy::csr_row_split<>{}, a.view(), b3.view(), bad_c.view(), epilogue_none<float>()),
      sdnn::error);
  dense_matrix<float> ga(3, 5);
  REQUIRE_THROWS_AS(ops::gemm(host_exec{}, policy::cublas_gemm{}, ga.view(), b3.view(), c.view(), epilogue_none<float>()),
                    sdnn::error);
}

TEST_CASE("empty operands give the epilogue of zero", "[ops][reference]") {
  auto const a = make_csr<float, int>(2, 0, {0, 0, 0}, {}, {});
  dense_matrix<float> b(0, 3), c(2, 3);
  basic_epilogue<float> e;
  e.bias_scalar = 2.f;
  ops::spmm(host_exec{}, policy::csr_row_split<>{}, a.view(), b.view(), c.view(), e);
  REQUIRE(values(c) == std::vector<float>(6, 2.f));
}

TEST_CASE("policy::automatic rules", "[ops][automatic]") {
  matrix_stats s;
  s.rows = 1000, s.cols = 1000, s.nnz = 10000, s.mean_row_nnz = 10, s.row_nnz_stddev = 3, s.max_row_nnz = 20;
  s.tile_rows = s.tile_cols = 32, s.tiles = 1024, s.occupied_tiles = 1000;
  REQUIRE(policy::choose_spmm(s) == policy::spmm_choice::csr_row_split);  // density 1 %
  auto dense10 = s;
  dense10.nnz = 100000, dense10.mean_row_nnz = 100, dense10.row_nnz_stddev = 10, dense10.max_row_nnz = 130;
  REQUIRE(policy::choose_spmm(dense10) == policy::spmm_choice::csr_row_split);  // 1000 rows: slab-major grid
  dense10.rows = 5000, dense10.nnz = 500000, dense10.occupied_tiles = 5000;
  REQUIRE(policy::choose_spmm(dense10) == policy::spmm_choice::csr_panels);  // 10 %, 5000 rows
  auto dense50 = dense10;
  dense50.nnz = 2500000, dense50.mean_row_nnz = 500, dense50.max_row_nnz = 560, dense50.row_nnz_stddev = 20;
  REQUIRE(policy::choose_spmm(dense50) == policy::spmm_choice::csr_row_split_rows_in_x);  // 50 %: above the band
  auto small = dense10;
  small.rows = 3000, small.nnz = 300000;
  REQUIRE(policy::choose_spmm(small) == policy::spmm_choice::csr_row_split_rows_in_x);  // 3000 rows: < 1 wave
  auto dense1 = dense10;
  dense1.nnz = 50000, dense1.mean_row_nnz = 10, dense1.row_nnz_stddev = 3, dense1.max_row_nnz = 20;
  REQUIRE(policy::choose_spmm(dense1) == policy::spmm_choice::csr_row_split_rows_in_x);  // 1 %, 5000 rows
  policy::automatic_thresholds staged;
  staged.staged_b_density = 0.05;
  REQUIRE(policy::choose_spmm(dense10, staged) == policy::spmm_choice::csr_staged_b);
  auto skew = s;
  skew.max_row_nnz = 2000, skew.row_nnz_stddev = 60;
  REQUIRE(policy::choose_spmm(skew) == policy::spmm_choice::csr_nnz_balanced);
  auto empty = s;
  empty.empty_rows = 950;
  REQUIRE(policy::choose_spmm(empty) == policy::spmm_choice::csr_skip_empty_compact);
  auto blocks = s;
  blocks.occupied_tiles = 12;  // 10000 / (12 * 1024) = 0.81 full
  REQUIRE(policy::choose_spmm(blocks) == policy::spmm_choice::tiled_dense);
  matrix_stats none;
  REQUIRE(policy::choose_spmm(none) == policy::spmm_choice::csr_row_split);
  REQUIRE(policy::choose_gemm(0.0) == policy::gemm_choice::tiled);
  REQUIRE(policy::choose_gemm(0.9) == policy::gemm_choice::tiled_skip_empty_compact);
  REQUIRE(std::string(policy::choice_name(policy::spmm_choice::csr_nnz_balanced)) == "csr_nnz_balanced");
  REQUIRE(policy::choose_gemm(0.2) == policy::gemm_choice::tiled);
}
