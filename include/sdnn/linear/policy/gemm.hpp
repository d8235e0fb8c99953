// sdnn/linear/policy/gemm.hpp - policy tags for dense products C = epilogue(A * B).
//
// Every tag is an empty type; ops::gemm dispatches on (executor, policy). The host
// executor runs the reference for every policy.
#pragma once

#include "sdnn/core/config.hpp"

namespace sdnn::policy {

// Tiled shared-memory GEMM (linear/kernel/gemm_tiled.cuh). A block computes a TileM x TileN
// tile of C with Threads threads, each holding an 8x8 register tile (two 4x4 quadrants
// TileM/2 resp. TileN/2 apart, so shared-memory fragment reads are 16-byte vectors); the
// K loop walks TileK-deep slices through double-buffered shared memory, the next slice
// prefetched into registers with 16-byte loads while the current one is multiplied.
// Defaults: 128x128x8 for float (one float4 of A and one of B per thread per slice);
// __half wants TileK = 16 (8 halves = 16 bytes per thread per slice).
template <int TileM = 128, int TileN = 128, int TileK = 8>
struct tiled_gemm {
  static constexpr int tile_m = TileM, tile_n = TileN, tile_k = TileK;
  static constexpr int thread_m = 8, thread_n = 8;
  static constexpr int threads = (TileM / thread_m) * (TileN / thread_n);
  static_assert(TileM % 16 == 0 && TileN % 16 == 0, "tiled_gemm: TileM and TileN must be multiples of 16");
  static_assert(threads % 32 == 0 && threads <= 1024, "tiled_gemm: blocks are 32..1024 whole warps");
  static_assert(TileK >= 4 && TileK % 4 == 0, "tiled_gemm: TileK must be a multiple of 4");
};

// cuBLAS (linear/vendor/cublas.cuh): SGEMM for float with CUBLAS_DEFAULT_MATH (TF32 off
// unless NVIDIA_TF32_OVERRIDE is set: the strict float baseline), HGEMM-style cublasGemmEx
// for __half with float compute.
struct cublas_gemm {};

// Empty-row skipping wrapped around an inner product policy: one wrapper for every product
// (GEMM, sparse x dense, dense x sparse) whose A operand may have empty rows.
//  - skip_empty_rows<Inner> (skip_by::compact, the default): the live (nonzero) rows of A
//    are listed on the device (cub::DeviceSelect); Inner runs over the listed rows only.
//    For dense x sparse (ops::dense_sparse_plan, layers::sparse_linear) the list can also be
//    carried from layer to layer by a pipeline: Inner flags which outputs stayed nonzero and
//    the list is compacted on the device, without a host round trip.
//  - skip_empty_rows<Inner, skip_by::mask>: per-row nonzero counts; the inner kernel does not
//    read A rows whose count is 0 (and skips a whole tile when all its rows are empty).
// Contract for both: every output row is written; an empty row's output is epi(0, col)
// (all zero when the epilogue is zero_preserving()).
enum class skip_by { compact, mask };
template <class Inner, skip_by By = skip_by::compact>
struct skip_empty_rows {
  using inner = Inner;
  static constexpr skip_by by = By;
};
// The two spellings used by the GEMM and SpMM benchmarks and tables.
template <class Inner>
using skip_empty_rows_mask = skip_empty_rows<Inner, skip_by::mask>;
template <class Inner>
using skip_empty_rows_compact = skip_empty_rows<Inner, skip_by::compact>;

template <class P>
inline constexpr bool is_skip_empty_rows_v = false;
template <class I, skip_by B>
inline constexpr bool is_skip_empty_rows_v<skip_empty_rows<I, B>> = true;

// Chooses among the compiled policies at plan time from matrix statistics
// (linear/policy/automatic.hpp), with the tuning table of the GPU the plan runs on
// (linear/policy/tuning.hpp); the choice is kept for the plan's lifetime.
struct automatic {};

}  // namespace sdnn::policy
