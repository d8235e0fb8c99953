// sdnn/linear/policy/tuning.hpp - plan-time tuning tables keyed by compute capability, in the
// manner of CUB's per-architecture policies (Policy600, Policy800, ...): one plain struct
// per measured architecture, every entry with the GPU and the benchmark result (under
// benchmarks/results/) that justified it, and a conservative table for GPUs older than any
// measured one. A number measured on one GPU applies to that GPU and its successors only,
// never silently to an older GPU (tuning_table_for); linear/policy/automatic.hpp turns a
// table into automatic_thresholds.
#pragma once

#include <cstdint>

#include "sdnn/core/arch.hpp"

namespace sdnn::policy {

// sm_90: measured on an NVIDIA H200 (141 GB HBM3e, 132 SMs), CUDA 13.0; the H100 (also
// 9.0) uses it too.
struct tuning_sm90 {
  static constexpr arch measured{9, 0};
  static constexpr char const* gpu = "NVIDIA H200";
  // CSR: compact the live rows when >= 90 % of the rows are empty. The row-split kernel
  // costs an empty row one epilogue store; compaction pays a cub::DeviceSelect partition and
  // a fill. kernels_row_skip_NVIDIA_H200_2026-11-21.jsonl (NOTES_..._2026-11-21.md, "compacted
  // live rows (CSR) at >= 90 % empty rows").
  static constexpr double csr_empty_row_fraction = 0.9;
  // CSR: nnz-balanced when max row > 8 x mean and the row lengths' CV > 1: skewed rows only;
  // on uniform rows nnz-balanced ran 0.71x of row-split. kernels_spmm_NVIDIA_H200_2026-11-21.jsonl
  // and _2026-11-22.jsonl (kernels_NOTES_NVIDIA_H200_2026-11-21.md / -22.md).
  static constexpr double skew_max_over_mean = 8.0;
  static constexpr double skew_cv = 1.0;
  // Tiled-dense when the occupied 32 x 32 tiles are >= 50 % full: 2.5x the fastest cuSPARSE
  // algorithm on full tiles, 1.36x at half-full tiles. kernels_spmm_NVIDIA_H200_2026-11-21.jsonl.
  static constexpr double tile_fill = 0.5;
  // csr_staged_b disabled (> 1): it ran 0.2-0.7x of row-split at every density from 50 to
  // 99 %. kernels_spmm_NVIDIA_H200_2026-11-21.jsonl.
  static constexpr double staged_b_density = 2.0;
  // csr_row_split<1, 4, rows_in_x> from 2048 rows (4096^2 at 90 %: 0.683 -> 0.498 ms; at
  // 1024^2 slab-major was equal or faster). kernels_spmm_NVIDIA_H200_2026-11-21.jsonl.
  static constexpr std::int64_t rows_in_x_min_rows = 2048;
  static constexpr double rows_in_x_density = 0.0;
  // csr_panels<16, 64, 1> from 4096 rows at live density 4..30 % (4096^2 at 90 %: 0.415 vs
  // 0.499 ms; loses at 50 % and 99 %, and at 2048^2, under one wave of 132 SMs x 2).
  // kernels_spmm_NVIDIA_H200_2026-11-22.jsonl (kernels_NOTES_NVIDIA_H200_2026-11-22.md).
  static constexpr std::int64_t panels_min_rows = 4096;
  static constexpr double panels_density = 0.04;
  static constexpr double panels_max_density = 0.3;
  // GEMM: compact the live rows when >= 25 % of A's rows are empty (4096^3: 1.31x, 8192^3:
  // 1.97x at 50 %). kernels_row_skip_NVIDIA_H200_2026-11-21.jsonl.
  static constexpr double gemm_empty_row_fraction = 0.25;
  // GEMM, compacted: 64 x 64 tiles instead of 128 x 128 when the live rows give fewer than
  // 4 tiles of 128 x 128 per SM (4096^3: 50 % empty 2.15 vs 2.51 ms, 90 % 0.79 vs 0.91 ms;
  // 8192^3: 128 x 128 wins). kernels_row_skip_NVIDIA_H200_2026-11-21.jsonl and _2026-11-22.jsonl.
  static constexpr std::int64_t gemm_small_tiles_below_per_sm = 4;
};

// GPUs older than every measured architecture (compute capability < 9.0): nothing here was
// measured on them, so the table keeps only the choices that follow from the algorithms'
// work counts and turns off every choice that won narrowly on the H200 through its grid
// order, shared-memory staging or wave count:
//  - kept: compaction of mostly empty rows, nnz-balanced for skewed rows, tiled-dense for
//    full tiles, GEMM compaction and its small tiles for few live rows (each removes work or
//    idle SMs rather than trading one memory pattern for another);
//  - off: csr_panels (cp.async double buffering; wins depend on SM count and L2),
//    csr_row_split rows_in_x (an L2 reuse order), csr_staged_b (already off on sm_90).
// With those off the plan is the slab-major csr_row_split<1, 4>, the baseline of every
// measurement.
struct tuning_default {
  static constexpr arch measured{0, 0};
  static constexpr char const* gpu = "none (conservative default for GPUs older than sm_90)";
  static constexpr double csr_empty_row_fraction = tuning_sm90::csr_empty_row_fraction;
  static constexpr double skew_max_over_mean = tuning_sm90::skew_max_over_mean;
  static constexpr double skew_cv = tuning_sm90::skew_cv;
  static constexpr double tile_fill = tuning_sm90::tile_fill;
  static constexpr double staged_b_density = 2.0;                     // off
  static constexpr std::int64_t rows_in_x_min_rows = INT64_MAX;       // off
  static constexpr double rows_in_x_density = 0.0;
  static constexpr std::int64_t panels_min_rows = INT64_MAX;          // off
  static constexpr double panels_density = 2.0;                       // off
  static constexpr double panels_max_density = 0.0;                  // off
  static constexpr double gemm_empty_row_fraction = tuning_sm90::gemm_empty_row_fraction;
  static constexpr std::int64_t gemm_small_tiles_below_per_sm = tuning_sm90::gemm_small_tiles_below_per_sm;
};

// Which table a GPU uses.
enum class tuning_table { sm90, conservative_default };

inline char const* table_name(tuning_table t) {
  return t == tuning_table::sm90 ? "tuning_sm90" : "tuning_default";
}

// The newest measured architecture not newer than `a` (a 10.0 or 12.0 part uses the sm_90
// numbers until it is measured); tuning_default below all of them.
// To add an architecture: measure (benchmarks/bench_spmm.cu, bench_row_skip.cu), commit the
// results, add tuning_smXY with comments citing them, and add it here and to tuning_for
// (linear/policy/automatic.hpp).
constexpr tuning_table tuning_table_for(arch a) {
  return tuning_sm90::measured <= a ? tuning_table::sm90 : tuning_table::conservative_default;
}

}  // namespace sdnn::policy
