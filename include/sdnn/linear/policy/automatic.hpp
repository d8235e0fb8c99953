// sdnn/linear/policy/automatic.hpp - plan-time choice among the compiled product policies
// from matrix statistics (formats/stats.hpp). Pure host functions, so the rules are
// unit-tested without a GPU; ops with policy::automatic call them once per plan, with the
// tuning table of the GPU the plan runs on (linear/policy/tuning.hpp; tuning_for(arch)), and
// keep the choice. decide_spmm takes the rules' choice only when its plan can run it
// (can_implement) and its memory fits a budget, else the next one, and says why in a reason.
// A user can always force a policy instead. What the rules weigh:
// docs/linear.md#automatic-choice.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "sdnn/core/arch.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/plan.hpp"
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
  // Memory, not speed (the same on every GPU, so not in the tuning tables): a plan's device
  // bytes (spmm_plan_bytes) may take at most this fraction of the free device memory, and
  // the tiled-dense copy, which stores every tile of the grid occupied or not, at most this
  // many times A's CSR bytes (a block-diagonal 65536^2 of dense 32 x 32 blocks: 17.2 GB of
  // tiles for 16.8 MB of CSR).
  double plan_memory_fraction = 0.5;
  double tiled_copy_max_over_csr = 16.0;
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

// (Not `detail`: sdnn::policy::detail would hide sdnn::detail from the other policy headers.)
namespace automatic_detail {
inline unsigned choice_bit(spmm_choice c) { return 1u << static_cast<unsigned>(c); }

// The rules in order of preference, skipping the choices in `excluded` (choice_bit);
// csr_row_split is the last resort and never skipped.
inline spmm_choice rule_choice(matrix_stats const& s, automatic_thresholds const& t, unsigned excluded) {
  auto ok = [excluded](spmm_choice c) { return (excluded & choice_bit(c)) == 0; };
  if (s.rows == 0 || s.nnz == 0) return spmm_choice::csr_row_split;
  if (s.tile_rows == 32 && s.tile_cols == 32 && s.occupied_tiles > 0 && ok(spmm_choice::tiled_dense)) {
    double const fill = static_cast<double>(s.nnz) / (static_cast<double>(s.occupied_tiles) * 32.0 * 32.0);
    if (fill >= t.tile_fill) return spmm_choice::tiled_dense;
  }
  if (s.empty_row_fraction() >= t.csr_empty_row_fraction && ok(spmm_choice::csr_skip_empty_compact))
    return spmm_choice::csr_skip_empty_compact;
  double const mean = s.mean_row_nnz;
  double const cv = mean > 0 ? s.row_nnz_stddev / mean : 0.0;
  if (mean > 0 && static_cast<double>(s.max_row_nnz) > t.skew_max_over_mean * mean && cv > t.skew_cv &&
      ok(spmm_choice::csr_nnz_balanced))
    return spmm_choice::csr_nnz_balanced;
  std::int64_t const live = s.rows - s.empty_rows;
  double const live_density =
      live > 0 && s.cols > 0 ? static_cast<double>(s.nnz) / (static_cast<double>(live) * static_cast<double>(s.cols)) : 0;
  if (live_density >= t.staged_b_density && ok(spmm_choice::csr_staged_b)) return spmm_choice::csr_staged_b;
  if (s.rows >= t.panels_min_rows && live_density >= t.panels_density && live_density <= t.panels_max_density &&
      ok(spmm_choice::csr_panels))
    return spmm_choice::csr_panels;
  if (s.rows >= t.rows_in_x_min_rows && live_density >= t.rows_in_x_density &&
      ok(spmm_choice::csr_row_split_rows_in_x))
    return spmm_choice::csr_row_split_rows_in_x;
  return spmm_choice::csr_row_split;
}
}  // namespace automatic_detail

// The CSR-operand choice for C = A * B from A's statistics: the speed rules alone (what looks
// fastest). Plans use decide_spmm, which also checks that the choice can run and fits.
inline spmm_choice choose_spmm(matrix_stats const& s, automatic_thresholds const& t = {}) {
  return automatic_detail::rule_choice(s, t, 0);
}

// The same with the table of a GPU of compute capability `a`.
inline spmm_choice choose_spmm(matrix_stats const& s, arch a) { return choose_spmm(s, tuning_for(a)); }

// What the memory estimate of a choice needs besides A's statistics, and the budget.
struct spmm_resources {
  std::int64_t n = 0;                 // columns of B and C
  std::size_t value_bytes = 4;        // sizeof(T)
  std::size_t index_bytes = 4;        // sizeof(Index)
  int panel_rows_per_warp = 16;       // RowsPerWarp of the csr_panels the plan builds (8 for __half)
  int sms = 132;                      // SMs of the device (the nnz-balanced carry grows with them)
  double budget_bytes = std::numeric_limits<double>::infinity();  // device bytes a plan may take
};

// Device bytes the plan of choice c allocates for A (statistics s), at its peak: what it
// keeps plus its plan-time temporaries (in double: a 2^40 x 2^40 tile grid does not wrap).
// An estimate from the plans' allocations in linear/op/spmm.cuh, not a measurement.
inline double spmm_plan_bytes(spmm_choice c, matrix_stats const& s, spmm_resources const& r) {
  double const rows = static_cast<double>(s.rows), cols = static_cast<double>(s.cols);
  double const nnz = static_cast<double>(s.nnz), vb = static_cast<double>(r.value_bytes),
               ib = static_cast<double>(r.index_bytes);
  switch (c) {
    case spmm_choice::csr_row_split:
    case spmm_choice::csr_row_split_rows_in_x:
    case spmm_choice::csr_staged_b: return 0;  // A in place
    case spmm_choice::csr_skip_empty_compact:
      return 3 * rows * ib + rows * 4;  // counts, live and empty lists; CUB select scratch (bounded)
    case spmm_choice::csr_nnz_balanced: {
      // Shares: about 64 warps per SM over the column slabs (kernels::nnz_split_target_chunks),
      // at most nnz / 32; carry: 2 rows of N floats per share; bounds: one Index per share.
      double const slab = 32.0 * 2 * (16.0 / vb), slabs = std::max(1.0, std::ceil(static_cast<double>(r.n) / slab));
      double const shares = std::min(std::ceil(nnz / 32), std::max<double>(r.sms, r.sms * 64.0 / slabs));
      return shares * (2 * (std::ceil(static_cast<double>(r.n) / 4) * 4) * 4 + ib) + ib;
    }
    case spmm_choice::csr_panels: {
      // Entries (8 bytes each, nnz + one sentinel per segment) and segment offsets kept; the
      // build sorts with two key arrays, a value array and CUB's alternate key/value buffers.
      double const rb = std::ceil(rows / (8.0 * r.panel_rows_per_warp)), segments = rb * std::ceil(cols / 64) * 8;
      double const entries = nnz + segments;
      return 48 * entries + 4 * (segments + 1);
    }
    case spmm_choice::tiled_dense: {
      // Every tile of the grid (32 x 32 values and an occupancy byte), the tile row pointer and
      // the occupied tiles' columns; the plan stages the same copy on the host first.
      double const tiles = std::ceil(rows / 32) * std::ceil(cols / 32);
      return tiles * (1024 * vb + 1) + (std::ceil(rows / 32) + 1) * 8 + static_cast<double>(s.occupied_tiles) * 8;
    }
  }
  return 0;
}

// Bytes as text: "17.2 GB", "16.8 MB", "512 bytes" (powers of 1000).
inline std::string bytes_text(double b) {
  char buf[64];
  if (b >= 1e9) std::snprintf(buf, sizeof(buf), "%.1f GB", b / 1e9);
  else if (b >= 1e6) std::snprintf(buf, sizeof(buf), "%.1f MB", b / 1e6);
  else if (b >= 1e3) std::snprintf(buf, sizeof(buf), "%.1f KB", b / 1e3);
  else std::snprintf(buf, sizeof(buf), "%.0f bytes", b);
  return buf;
}

// Why the plan of choice c does not fit (empty when it does): its bytes against r.budget_bytes,
// and a tiled-dense copy against t.tiled_copy_max_over_csr times A's CSR.
inline std::string spmm_memory_refusal(spmm_choice c, matrix_stats const& s, spmm_resources const& r,
                                       automatic_thresholds const& t) {
  double const need = spmm_plan_bytes(c, s, r);
  char const* what = c == spmm_choice::tiled_dense  ? "its tiled copy"
                     : c == spmm_choice::csr_panels ? "its panel-ordered copy"
                                                    : "its plan data";
  if (need > r.budget_bytes)
    return sdnn::detail::concat(what, " needs ", bytes_text(need), ", budget ", bytes_text(r.budget_bytes));
  if (c == spmm_choice::tiled_dense) {
    double const csr = (static_cast<double>(s.rows) + 1) * static_cast<double>(r.index_bytes) +
                       static_cast<double>(s.nnz) * static_cast<double>(r.index_bytes + r.value_bytes);
    if (need > t.tiled_copy_max_over_csr * csr)
      return sdnn::detail::concat(what, " needs ", bytes_text(need), ", more than ", t.tiled_copy_max_over_csr,
                                  "x the ", bytes_text(csr), " of A in CSR (", s.tiles - s.occupied_tiles, " of its ",
                                  s.tiles, " tiles are empty)");
  }
  return {};
}

// The choice and why: "<chosen>: <first choice of the rules>" or "<chosen>: <name> rejected:
// <why>; ..." for each faster-looking choice that was passed over.
struct spmm_decision {
  spmm_choice choice = spmm_choice::csr_row_split;
  std::string reason;
};

// The rules' choice when its plan accepts the problem (can_implement(choice) -> plan_status,
// the plan's own can_implement) and fits (spmm_memory_refusal); else the next choice of the
// rules without it, down to csr_row_split, which needs no memory. Throws sdnn::error when even
// csr_row_split is refused (a problem no CSR plan takes).
template <class CanImplement>
spmm_decision decide_spmm(matrix_stats const& s, spmm_resources const& r, automatic_thresholds const& t,
                          CanImplement&& can_implement) {
  unsigned excluded = 0;
  std::string rejected;
  for (;;) {
    spmm_choice const c = automatic_detail::rule_choice(s, t, excluded);
    plan_status const st = can_implement(c);
    std::string why = st ? spmm_memory_refusal(c, s, r, t) : st.why();
    if (why.empty())
      return {c, sdnn::detail::concat(choice_name(c), ": ", rejected.empty() ? "the rules' first choice" : rejected)};
    rejected += sdnn::detail::concat(rejected.empty() ? "" : "; ", choice_name(c), " rejected: ", why);
    SDNN_EXPECTS(c != spmm_choice::csr_row_split, "spmm(automatic): no CSR plan takes A (", s.rows, " x ", s.cols,
                 ", ", s.nnz, " nonzeros): ", rejected);
    excluded |= automatic_detail::choice_bit(c);
  }
}

// The dense-GEMM choice from the empty-row fraction of A.
inline gemm_choice choose_gemm(double empty_row_fraction, automatic_thresholds const& t = {}) {
  return empty_row_fraction >= t.gemm_empty_row_fraction ? gemm_choice::tiled_skip_empty_compact : gemm_choice::tiled;
}
inline gemm_choice choose_gemm(double empty_row_fraction, arch a) {
  return choose_gemm(empty_row_fraction, tuning_for(a));
}

}  // namespace sdnn::policy
