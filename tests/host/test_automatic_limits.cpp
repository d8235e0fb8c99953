// policy::automatic (linear/policy/automatic.hpp) chooses only what the chosen plan's
// can_implement accepts and what fits a memory budget, and says why it passed over a
// faster-looking path: decide_spmm on the statistics of shapes too large to allocate here
// (a 65536^2 block-diagonal matrix, 10M x 50, 3M x 32), with the plans' grid limits given as
// can_implement (the device plan asks linear/op/spmm.cuh's own).
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/core/plan.hpp>
#include <sdnn/formats/csr.hpp>
#include <sdnn/formats/stats.hpp>
#include <sdnn/linear/policy/automatic.hpp>

#include <cstdint>
#include <string>
#include <vector>

using namespace sdnn;
using sdnn_test::error_text;
using sdnn_test::has;

namespace {
// Statistics of a block-diagonal n x n matrix of dense b x b blocks (what compute_stats gives).
matrix_stats block_diagonal(std::int64_t n, std::int64_t b) {
  matrix_stats s;
  s.rows = s.cols = n;
  s.nnz = n * b;
  s.min_row_nnz = s.max_row_nnz = b;
  s.mean_row_nnz = static_cast<double>(b);
  s.tiles = (n / 32) * (n / 32);
  s.occupied_tiles = n / 32;
  s.tile_occupancy = static_cast<double>(s.occupied_tiles) / static_cast<double>(s.tiles);
  return s;
}
// The grid limits of the plans in linear/op/spmm.cuh (their can_implement), for host tests:
// tiled_dense <= 65535 tile rows, csr_panels<16, 64, 1> <= 65535 blocks of 128 rows and
// csr_staged_b<> <= 65535 blocks of 32 rows.
plan_status grid_limits(policy::spmm_choice c, matrix_stats const& s) {
  using P = policy::spmm_choice;
  auto over = [](std::int64_t blocks, char const* what) {
    return blocks > 65535 ? plan_status::failure(sdnn::detail::concat(what, ": ", blocks, " blocks exceed 65535"))
                          : plan_status{};
  };
  if (c == P::tiled_dense) return over((s.rows + 31) / 32, "spmm(tiled_dense)");
  if (c == P::csr_panels) return over((s.rows + 127) / 128, "spmm(csr_panels)");
  if (c == P::csr_staged_b) return over((s.rows + 31) / 32, "spmm(csr_staged_b)");
  return {};
}
}  // namespace

TEST_CASE("automatic: the estimate of each plan's memory", "[ops][automatic]") {
  using P = policy::spmm_choice;
  auto const s = block_diagonal(65536, 32);  // 2.1M nonzeros
  REQUIRE(s.nnz == 2097152);
  policy::spmm_resources r;
  r.n = 1024;
  // Every tile of the 2048 x 2048 grid: 4M tiles of 4 KB + an occupancy byte each.
  double const tiled = policy::spmm_plan_bytes(P::tiled_dense, s, r);
  REQUIRE(tiled >= 65536.0 * 65536 * 4);
  REQUIRE(tiled < 65536.0 * 65536 * 4 * 1.01);
  REQUIRE(policy::bytes_text(tiled) == "17.2 GB");
  REQUIRE(policy::spmm_plan_bytes(P::csr_row_split, s, r) == 0);
  REQUIRE(policy::spmm_plan_bytes(P::csr_row_split_rows_in_x, s, r) == 0);
  REQUIRE(policy::spmm_plan_bytes(P::csr_panels, s, r) > 48.0 * s.nnz);
  REQUIRE(policy::spmm_plan_bytes(P::csr_skip_empty_compact, s, r) >= 3.0 * 4 * s.rows);
  REQUIRE(policy::spmm_plan_bytes(P::csr_nnz_balanced, s, r) > 0);
  // A 2^40 x 2^40 grid does not wrap.
  matrix_stats huge;
  huge.rows = huge.cols = std::int64_t(1) << 40;
  REQUIRE(policy::spmm_plan_bytes(P::tiled_dense, huge, r) > 4e24);  // 2^70 tiles
}

TEST_CASE("automatic: a block-diagonal 65536^2 is not copied into 17 GB of tiles", "[ops][automatic]") {
  using P = policy::spmm_choice;
  auto const s = block_diagonal(65536, 32);
  REQUIRE(policy::choose_spmm(s) == P::tiled_dense);  // the speed rules alone: every occupied tile is full
  policy::spmm_resources r;
  r.n = 1024;
  r.budget_bytes = 48e9;  // fits the budget, but stores 4M empty tiles for 2048 full ones
  auto const any = [](P) { return plan_status{}; };
  auto const d = policy::decide_spmm(s, r, policy::automatic_thresholds{}, any);
  REQUIRE(d.choice != P::tiled_dense);
  REQUIRE(d.choice == P::csr_row_split_rows_in_x);
  INFO(d.reason);
  REQUIRE(has(d.reason, "csr_row_split<1,4,rows_in_x>: tiled_dense_spmm rejected: its tiled copy needs 17.2 GB, more "
                        "than 16x the 17.0 MB of A in CSR (4192256 of its 4194304 tiles are empty)"));
  // Over the budget: rejected for the budget.
  r.budget_bytes = 8e9;
  auto const d2 = policy::decide_spmm(s, r, policy::automatic_thresholds{}, any);
  REQUIRE(d2.choice == P::csr_row_split_rows_in_x);
  REQUIRE(has(d2.reason, "tiled_dense_spmm rejected: its tiled copy needs 17.2 GB, budget 8.0 GB"));
  // The same blocks on a 512^2 matrix: a copy 8x the CSR, taken.
  auto const small = block_diagonal(512, 32);
  auto const d3 = policy::decide_spmm(small, r, policy::automatic_thresholds{}, any);
  REQUIRE(d3.choice == P::tiled_dense);
  REQUIRE(d3.reason == "tiled_dense_spmm: the rules' first choice");
  // From a real host matrix (compute_stats), smaller: 4096^2 of 32 x 32 blocks, ratio 64x.
  std::int64_t const n = 4096;
  std::vector<std::int32_t> rp{0}, ci;
  std::vector<float> v;
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) ci.push_back(static_cast<std::int32_t>(j));
    rp.push_back(static_cast<std::int32_t>(ci.size()));
  }
  v.assign(ci.size(), 1.0f);
  auto const a = make_csr<float, std::int32_t>(static_cast<std::int32_t>(n), static_cast<std::int32_t>(n), rp, ci, v);
  auto const st = compute_stats(a);
  REQUIRE(policy::choose_spmm(st) == P::tiled_dense);
  auto const d4 = policy::decide_spmm(st, r, policy::automatic_thresholds{}, any);
  REQUIRE(d4.choice != P::tiled_dense);
  REQUIRE(has(d4.reason, "tiled_dense_spmm rejected: its tiled copy needs 67.1 MB, more than 16x"));
}

TEST_CASE("automatic: a 10M x 50 matrix of 2 nonzeros per row does not get csr_panels", "[ops][automatic]") {
  using P = policy::spmm_choice;
  matrix_stats s;
  s.rows = 10000000, s.cols = 50, s.nnz = 20000000;
  s.min_row_nnz = s.max_row_nnz = 2, s.mean_row_nnz = 2;
  s.tiles = (s.rows / 32) * 2, s.occupied_tiles = s.rows / 32 * 2;  // spread: 2 / (32 * 32) full
  REQUIRE(policy::choose_spmm(s) == P::csr_panels);  // 4 % dense, 10M rows: the panel band
  policy::spmm_resources r;
  r.n = 64;
  r.budget_bytes = 40e9;
  auto const d = policy::decide_spmm(s, r, policy::automatic_thresholds{}, [&](P c) { return grid_limits(c, s); });
  INFO(d.reason);
  REQUIRE(d.choice == P::csr_row_split_rows_in_x);
  REQUIRE(has(d.reason, "csr_row_split<1,4,rows_in_x>: csr_panels<16,64,1> rejected: spmm(csr_panels): 78125 blocks "
                        "exceed 65535"));
  // Its memory alone would also refuse it on a small budget (48 bytes per entry to build).
  r.budget_bytes = 0.5e9;
  auto const d2 = policy::decide_spmm(s, r, policy::automatic_thresholds{}, [](P) { return plan_status{}; });
  REQUIRE(d2.choice == P::csr_row_split_rows_in_x);
  REQUIRE(has(d2.reason, "csr_panels<16,64,1> rejected: its panel-ordered copy needs"));
}

TEST_CASE("automatic: a 3M x 32 dense matrix does not get tiled_dense", "[ops][automatic]") {
  using P = policy::spmm_choice;
  matrix_stats s;
  s.rows = 3000000, s.cols = 32, s.nnz = s.rows * 32;
  s.min_row_nnz = s.max_row_nnz = 32, s.mean_row_nnz = 32;
  s.tiles = s.occupied_tiles = s.rows / 32;  // 93750 full tiles
  REQUIRE(policy::choose_spmm(s) == P::tiled_dense);
  policy::spmm_resources r;
  r.n = 256;
  r.budget_bytes = 40e9;
  auto const d = policy::decide_spmm(s, r, policy::automatic_thresholds{}, [&](P c) { return grid_limits(c, s); });
  INFO(d.reason);
  REQUIRE(d.choice == P::csr_row_split_rows_in_x);
  REQUIRE(has(d.reason, "tiled_dense_spmm rejected: spmm(tiled_dense): 93750 blocks exceed 65535"));
  // Rejections accumulate, in the rules' order; csr_row_split is the last resort.
  policy::automatic_thresholds staged;
  staged.staged_b_density = 0.5;
  auto const d2 = policy::decide_spmm(s, r, staged, [&](P c) {
    return c == P::csr_row_split_rows_in_x ? plan_status::failure("no grid") : grid_limits(c, s);
  });
  REQUIRE(d2.choice == P::csr_row_split);
  REQUIRE(d2.reason == "csr_row_split<1,4>: tiled_dense_spmm rejected: spmm(tiled_dense): 93750 blocks exceed 65535; "
                       "csr_staged_b rejected: spmm(csr_staged_b): 93750 blocks exceed 65535; "
                       "csr_row_split<1,4,rows_in_x> rejected: no grid");
  // Nothing takes A: an error with every reason.
  REQUIRE(has(error_text([&] {
                policy::decide_spmm(s, r, policy::automatic_thresholds{},
                                    [](P) { return plan_status::failure("refused"); });
              }),
              "spmm(automatic): no CSR plan takes A (3000000 x 32, 96000000 nonzeros): tiled_dense_spmm rejected: "
              "refused"));
}
