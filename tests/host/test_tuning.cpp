// Host tests of the tuning tables keyed by compute capability (linear/policy/tuning.hpp) and
// of the plan-time choices (linear/policy/automatic.hpp) under each table: the lookup takes the
// newest measured architecture not newer than the GPU (sm_90 for 9.x and for the newer
// 10.0 / 12.0 parts) and the conservative default below sm_90; the choices are the ones
// the tables document.
#include "sdnn_catch.hpp"

#include <sdnn/core/arch.hpp>
#include <sdnn/linear/policy/automatic.hpp>
#include <sdnn/linear/policy/tuning.hpp>

#include <string>

using namespace sdnn;

namespace {
// 5000 x 1000 with 10 % of every row set, no empty rows, tiles too sparse for tiled-dense.
matrix_stats band_stats() {
  matrix_stats s;
  s.rows = 5000, s.cols = 1000, s.nnz = 500000, s.mean_row_nnz = 100, s.row_nnz_stddev = 10, s.max_row_nnz = 130;
  s.tile_rows = s.tile_cols = 32, s.tiles = 157 * 32, s.occupied_tiles = 5000;
  return s;
}
}  // namespace

TEST_CASE("arch: sm number and ordering", "[tuning]") {
  STATIC_REQUIRE(arch{9, 0}.sm() == 90);
  STATIC_REQUIRE(arch{12, 0}.sm() == 120);
  STATIC_REQUIRE(arch{8, 6} < arch{9, 0});
  STATIC_REQUIRE(arch{9, 0} < arch{10, 0});
  STATIC_REQUIRE(arch{9, 0} <= arch{9, 0});
  STATIC_REQUIRE(!(arch{9, 0} < arch{8, 9}));
  STATIC_REQUIRE(arch{9, 0} == arch{9, 0});
  STATIC_REQUIRE(arch{9, 0} != arch{9, 1});
}

TEST_CASE("tuning lookup: sm_90 for 9.x and newer, the conservative default for older GPUs", "[tuning]") {
  using policy::tuning_table;
  using policy::tuning_table_for;
  CHECK(tuning_table_for(arch{9, 0}) == tuning_table::sm90);   // H100, H200
  CHECK(tuning_table_for(arch{10, 0}) == tuning_table::sm90);  // B200: not measured, nearest older = sm_90
  CHECK(tuning_table_for(arch{12, 0}) == tuning_table::sm90);  // RTX 50xx: same
  CHECK(tuning_table_for(arch{7, 0}) == tuning_table::conservative_default);  // V100
  CHECK(tuning_table_for(arch{8, 0}) == tuning_table::conservative_default);  // A100
  CHECK(tuning_table_for(arch{8, 9}) == tuning_table::conservative_default);  // L40
  CHECK(tuning_table_for(arch{}) == tuning_table::conservative_default);
  CHECK(std::string(policy::table_name(tuning_table::sm90)) == "tuning_sm90");

  // sm_90's thresholds are the ones a default-constructed automatic_thresholds holds (the
  // numbers every plan used before the tables existed).
  auto const t90 = policy::tuning_for(arch{9, 0});
  policy::automatic_thresholds const d;
  CHECK(t90.csr_empty_row_fraction == d.csr_empty_row_fraction);
  CHECK(t90.skew_max_over_mean == d.skew_max_over_mean);
  CHECK(t90.skew_cv == d.skew_cv);
  CHECK(t90.tile_fill == d.tile_fill);
  CHECK(t90.staged_b_density == d.staged_b_density);
  CHECK(t90.rows_in_x_min_rows == d.rows_in_x_min_rows);
  CHECK(t90.rows_in_x_density == d.rows_in_x_density);
  CHECK(t90.panels_min_rows == d.panels_min_rows);
  CHECK(t90.panels_density == d.panels_density);
  CHECK(t90.panels_max_density == d.panels_max_density);
  CHECK(t90.gemm_empty_row_fraction == d.gemm_empty_row_fraction);
  CHECK(t90.gemm_small_tiles_below_per_sm == d.gemm_small_tiles_below_per_sm);
  CHECK(t90.csr_empty_row_fraction == 0.9);
  CHECK(t90.rows_in_x_min_rows == 2048);
  CHECK(t90.panels_min_rows == 4096);
  CHECK(t90.gemm_empty_row_fraction == 0.25);
  CHECK(t90.gemm_small_tiles_below_per_sm == 4);
  auto const t120 = policy::tuning_for(arch{12, 0});
  CHECK(t120.panels_min_rows == t90.panels_min_rows);
  CHECK(t120.rows_in_x_min_rows == t90.rows_in_x_min_rows);
}

TEST_CASE("choose_spmm / choose_gemm under each tuning table", "[tuning][automatic]") {
  arch const h200{9, 0}, b200{10, 0}, v100{7, 0}, a100{8, 0};
  using C = policy::spmm_choice;

  // 10 % dense rows, 5000 rows: sm_90 takes panels (the measured band 4..30 %); the default
  // has panels off and no rows_in_x, so the slab-major row-split.
  auto const band = band_stats();
  CHECK(policy::choose_spmm(band, h200) == C::csr_panels);
  CHECK(policy::choose_spmm(band, b200) == C::csr_panels);
  CHECK(policy::choose_spmm(band, v100) == C::csr_row_split);
  CHECK(policy::choose_spmm(band, a100) == C::csr_row_split);

  // 50 % dense rows, 5000 rows: above the panels band, rows_in_x on sm_90 only.
  auto dense50 = band;
  dense50.nnz = 2500000, dense50.mean_row_nnz = 500, dense50.max_row_nnz = 560, dense50.row_nnz_stddev = 20;
  CHECK(policy::choose_spmm(dense50, h200) == C::csr_row_split_rows_in_x);
  CHECK(policy::choose_spmm(dense50, v100) == C::csr_row_split);

  // 1000 rows: below both row thresholds, the same on every table.
  auto small = band;
  small.rows = 1000, small.nnz = 100000, small.occupied_tiles = 1000;
  CHECK(policy::choose_spmm(small, h200) == C::csr_row_split);
  CHECK(policy::choose_spmm(small, v100) == C::csr_row_split);

  // The choices kept by the default table: skew, empty rows, full tiles, nothing to do.
  matrix_stats s;
  s.rows = 1000, s.cols = 1000, s.nnz = 10000, s.mean_row_nnz = 10, s.row_nnz_stddev = 3, s.max_row_nnz = 20;
  s.tile_rows = s.tile_cols = 32, s.tiles = 1024, s.occupied_tiles = 1000;
  auto skew = s;
  skew.max_row_nnz = 2000, skew.row_nnz_stddev = 60;
  auto empty = s;
  empty.empty_rows = 950;
  auto blocks = s;
  blocks.occupied_tiles = 12;  // 10000 / (12 * 1024) = 0.81 full
  for (arch a : {h200, b200, v100, a100}) {
    INFO("arch " << a.major << "." << a.minor);
    CHECK(policy::choose_spmm(s, a) == C::csr_row_split);
    CHECK(policy::choose_spmm(skew, a) == C::csr_nnz_balanced);
    CHECK(policy::choose_spmm(empty, a) == C::csr_skip_empty_compact);
    CHECK(policy::choose_spmm(blocks, a) == C::tiled_dense);
    CHECK(policy::choose_spmm(matrix_stats{}, a) == C::csr_row_split);
    CHECK(policy::choose_gemm(0.0, a) == policy::gemm_choice::tiled);
    CHECK(policy::choose_gemm(0.2, a) == policy::gemm_choice::tiled);
    CHECK(policy::choose_gemm(0.25, a) == policy::gemm_choice::tiled_skip_empty_compact);
    CHECK(policy::choose_gemm(0.9, a) == policy::gemm_choice::tiled_skip_empty_compact);
  }
  // staged_b is off on every table (> 1): even a fully dense A does not take it.
  auto full = band;
  full.nnz = 5000000, full.mean_row_nnz = 1000, full.max_row_nnz = 1000, full.row_nnz_stddev = 0;
  full.occupied_tiles = 0;  // tiles not counted: keep tiled-dense out of the way
  CHECK(policy::choose_spmm(full, h200) == C::csr_row_split_rows_in_x);
  CHECK(policy::choose_spmm(full, v100) == C::csr_row_split);
}
