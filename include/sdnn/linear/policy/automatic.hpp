// sdnn/linear/policy/automatic.hpp - plan-time choice among the compiled product policies
// from matrix statistics (formats/stats.hpp). Pure host functions, so the rules are
// unit-tested without a GPU; ops with policy::automatic call them once per plan, with the
// tuning table of the GPU the plan runs on (linear/policy/tuning.hpp; tuning_for(arch)), and
// keep the choice. A user can always force a policy instead. What the rules weigh:
// docs/linear.md#automatic-choice.
#pragma once

#include <cstdint>

#include "sdnn/core/arch.hpp"
#include "sdnn/formats/stats.hpp"
#include "sdnn/linear/policy/tuning.hpp"

namespace sdnn::policy {

enum class spmm_choice {
  csr_row_split,
  csr_row_split_rows_in_x,
  csr_nnz_balanced,
  csr_skip_empty_compact,
  tiled_dense,
  csr_staged_b,
  csr_panels
};
enum class gemm_choice { tiled, tiled_skip_empty_compact };

inline char const* choice_name(spmm_choice c) {
  switch (c) {
    case spmm_choice::csr_row_split: return "csr_row_split<1,4>";
    case spmm_choice::csr_row_split_rows_in_x: return "csr_row_split<1,4,rows_in_x>";
    case spmm_choice::csr_nnz_balanced: return "csr_nnz_balanced";
    case spmm_choice::csr_skip_empty_compact: return "skip_empty_rows_compact<csr_row_split>";
    case spmm_choice::tiled_dense: return "tiled_dense_spmm";
    case spmm_choice::csr_staged_b: return "csr_staged_b";
    case spmm_choice::csr_panels: return "csr_panels<16,64,1>";
  }
  return "?";
}
inline char const* choice_name(gemm_choice c) {
  return c == gemm_choice::tiled ? "tiled_gemm" : "skip_empty_rows_compact<tiled_gemm>";
}

// The thresholds choose_spmm / choose_gemm apply; the values of one tuning table
// (linear/policy/tuning.hpp, where each entry cites the GPU and benchmark that chose it).
// A default-constructed automatic_thresholds holds the sm_90 table; plans take
// tuning_for(the arch of the GPU they run on) instead.
struct automatic_thresholds {
  // CSR: compact the live rows when at least this fraction of rows is empty (the row-split
  // kernel already costs an empty row only one store, so only when most rows are empty).
  double csr_empty_row_fraction = tuning_sm90::csr_empty_row_fraction;
  // CSR: nnz-balanced when max row length > skew_max_over_mean * mean and the
  // coefficient of variation of the row lengths exceeds skew_cv.
  double skew_max_over_mean = tuning_sm90::skew_max_over_mean;
  double skew_cv = tuning_sm90::skew_cv;
  // Tiled-dense when the occupied tiles are at least this full (nnz / stored elements)
  // and tiles were counted at the compiled 32 x 32 shape. H200: 2.5x the fastest cuSPARSE
  // algorithm on a fully dense 1024^2 / 2048^2 A and on 4096^2 with 10 % of the tiles dense;
  // 1.36x at 50 % uniform sparsity, where every tile is half full.
  double tile_fill = tuning_sm90::tile_fill;
  // CSR: B staged in shared memory by K-chunks when the live rows are at least this dense
  // (nnz / (live rows * cols)); > 1 disables it. On an H200 (bench_spmm, 2026-11-21) the
  // staged kernel ran 0.2-0.7x of the row-split one at every density from 50 to 99 %.
  double staged_b_density = tuning_sm90::staged_b_density;
  // CSR: row-split with the (row groups, slabs) grid order (csr_row_split<1, 4, true>)
  // when A has at least this many rows and its live rows are at least this dense; else
  // csr_row_split<1, 4>. bench_spmm, H200, N = 1024, float (ms, slab-major -> row-major):
  // 4096^2 at 80/90/95/99 % sparsity 1.246/0.683/0.368/0.091 -> 0.945/0.498/0.315/0.084,
  // 8192^2 at 90/99 % 2.754/0.325 -> 1.861/0.299, 2048^2 at 90 % 0.164 -> 0.147; at
  // 1024^2 the slab-major order was equal or faster (0.056 vs 0.061 ms at 90 %).
  std::int64_t rows_in_x_min_rows = tuning_sm90::rows_in_x_min_rows;
  // CSR: panel order (csr_panels<16, 64, 1>) when A has at least this many rows and the
  // density of its live rows lies in [panels_density, panels_max_density]. bench_spmm, H200,
  // 2026-11-22, N = 1024, float, ms (panels vs csr_row_split<1,4,rows_in_x>; CSR_ALG3):
  // 4096^2 at 50/80/90/95/99 %: 3.610/0.701/0.415/0.271/0.150 vs 2.348/0.944/0.499/0.314/0.084
  // (ALG3 2.087/0.912/0.528/0.237/0.071); 8192^2 at 90/95/99 %: 1.627/1.040/0.559 vs
  // 1.869/1.273/0.297; 2048^2 at 80/90 %: 0.294/0.180 vs 0.254/0.146 (128 blocks: under
  // one wave of the 132 SMs x 2).
  std::int64_t panels_min_rows = tuning_sm90::panels_min_rows;
  double panels_density = tuning_sm90::panels_density;
  double panels_max_density = tuning_sm90::panels_max_density;
  double rows_in_x_density = tuning_sm90::rows_in_x_density;
  // GEMM: compact when at least this fraction of A's rows is empty (the work then scales
  // with the live rows; compaction costs a cub::DeviceSelect partition and one epi(0) fill).
  double gemm_empty_row_fraction = tuning_sm90::gemm_empty_row_fraction;
  // GEMM, compacted: 64 x 64 tiles when the live rows give fewer than this many 128 x 128
  // tiles per SM (linear/op/gemm.cuh, policy::automatic).
  std::int64_t gemm_small_tiles_below_per_sm = tuning_sm90::gemm_small_tiles_below_per_sm;
};

// A tuning table (linear/policy/tuning.hpp) as thresholds.
template <class Table>
constexpr automatic_thresholds thresholds_of() {
  automatic_thresholds t;
  t.csr_empty_row_fraction = Table::csr_empty_row_fraction;
  t.skew_max_over_mean = Table::skew_max_over_mean;
  t.skew_cv = Table::skew_cv;
  t.tile_fill = Table::tile_fill;
  t.staged_b_density = Table::staged_b_density;
  t.rows_in_x_min_rows = Table::rows_in_x_min_rows;
  t.panels_min_rows = Table::panels_min_rows;
  t.panels_density = Table::panels_density;
  t.panels_max_density = Table::panels_max_density;
  t.rows_in_x_density = Table::rows_in_x_density;
  t.gemm_empty_row_fraction = Table::gemm_empty_row_fraction;
  t.gemm_small_tiles_below_per_sm = Table::gemm_small_tiles_below_per_sm;
  return t;
}

// The thresholds of the table a GPU of compute capability `a` uses (tuning_table_for).
constexpr automatic_thresholds tuning_for(arch a) {
  return tuning_table_for(a) == tuning_table::sm90 ? thresholds_of<tuning_sm90>() : thresholds_of<tuning_default>();
}

// The CSR-operand choice for C = A * B from A's statistics.
inline spmm_choice choose_spmm(matrix_stats const& s, automatic_thresholds const& t = {}) {
  if (s.rows == 0 || s.nnz == 0) return spmm_choice::csr_row_split;
  if (s.tile_rows == 32 && s.tile_cols == 32 && s.occupied_tiles > 0) {
    double const fill = static_cast<double>(s.nnz) / (static_cast<double>(s.occupied_tiles) * 32.0 * 32.0);
    if (fill >= t.tile_fill) return spmm_choice::tiled_dense;
  }
  if (s.empty_row_fraction() >= t.csr_empty_row_fraction) return spmm_choice::csr_skip_empty_compact;
  double const mean = s.mean_row_nnz;
  double const cv = mean > 0 ? s.row_nnz_stddev / mean : 0.0;
  if (mean > 0 && static_cast<double>(s.max_row_nnz) > t.skew_max_over_mean * mean && cv > t.skew_cv)
    return spmm_choice::csr_nnz_balanced;
  std::int64_t const live = s.rows - s.empty_rows;
  double const live_density =
      live > 0 && s.cols > 0 ? static_cast<double>(s.nnz) / (static_cast<double>(live) * static_cast<double>(s.cols)) : 0;
  if (live_density >= t.staged_b_density) return spmm_choice::csr_staged_b;
  if (s.rows >= t.panels_min_rows && live_density >= t.panels_density && live_density <= t.panels_max_density)
    return spmm_choice::csr_panels;
  if (s.rows >= t.rows_in_x_min_rows && live_density >= t.rows_in_x_density)
    return spmm_choice::csr_row_split_rows_in_x;
  return spmm_choice::csr_row_split;
}

// The same with the table of a GPU of compute capability `a`.
inline spmm_choice choose_spmm(matrix_stats const& s, arch a) { return choose_spmm(s, tuning_for(a)); }

// The dense-GEMM choice from the empty-row fraction of A.
inline gemm_choice choose_gemm(double empty_row_fraction, automatic_thresholds const& t = {}) {
  return empty_row_fraction >= t.gemm_empty_row_fraction ? gemm_choice::tiled_skip_empty_compact : gemm_choice::tiled;
}
inline gemm_choice choose_gemm(double empty_row_fraction, arch a) {
  return choose_gemm(empty_row_fraction, tuning_for(a));
}

}  // namespace sdnn::policy
