// sdnn/linear/kernel/spmm_dense_csc.cuh - dense x sparse product with a fused epilogue:
//
//   c[r, j] = epi( sum_k a[r, k] * B[k, j], j )      for the listed rows r, every column j
//
// B (k x n) is given as its transpose bt (n x k, CSR), i.e. B in CSC: row j of bt lists the
// inputs of output column j. The gather kernel and the footprint-tiled kernel, with their
// launchers; how they lay out the work: docs/linear.md#dense-x-sparse.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/csc_tiles.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn::kernels {
namespace detail {

// Shared memory for staged activation rows. 96 KB keeps two 256-thread blocks per SM on
// Hopper (228 KB per SM); larger stages fall back to global gathers.
inline constexpr std::size_t csc_stage_bytes_limit = 96 * 1024;

// Floats per staged input in shared memory: Rows, padded so that the stride in 16-byte
// units is odd. Lanes then read their 16-byte pieces from different bank quads; with an
// even stride (e.g. 64 B for 16 rows) only two distinct quads are hit and a warp's read
// takes 16 wavefronts instead of 4.
template <int Rows>
inline constexpr int stage_stride = (Rows / 4) % 2 == 1 ? Rows : Rows + 4;

// Each thread owns one output column and accumulates it for `Rows` activation rows at once,
// so each (index, value) of B is read once per `Rows` rows (register blocking). Staged: the
// `Rows` rows of `a` are staged in shared memory interleaved ([k][Rows], so the `Rows` values
// of one input sit in consecutive words and are read with 16-byte loads); otherwise `a` is
// gathered straight from global memory (L1/L2).
// Work is a list of row groups (`Rows` consecutive entries of the live-row list) times
// column tiles. The row count may live on the device (num_live): the grid is sized for the
// upper bound (max_live) but capped at what the GPU holds at once, and blocks loop over the
// work items the device count implies, so a shrinking live set costs no host round trip and
// no empty blocks.
// Optional output for row compaction: live_flags[i] is set to 1 when any output of the i-th
// listed row is nonzero (never cleared here: the caller zeroes it).
template <int Rows, int Threads, bool Staged, class T, class Index, class Acc>
__global__ void __launch_bounds__(Threads)
    dense_csc_spmm_kernel(dense_view<T const> a, csr_view<T, Index> bt, dense_view<T> c, basic_epilogue<Acc> epi,
                          Index const* __restrict__ live_rows, Index const* __restrict__ num_live, Index max_live,
                          int* __restrict__ live_flags) {
  extern __shared__ float4 dense_csc_stage4[];
  float* stage = reinterpret_cast<float*>(dense_csc_stage4);  // Staged: [k][stage_stride<Rows>]
  constexpr int SR = stage_stride<Rows>;
  __shared__ Index rid[Rows];
  __shared__ int nonzero[Rows];

  Index count = num_live ? *num_live : max_live;
  if (count > max_live) count = max_live;
  Index const n = bt.rows, k = bt.cols;
  std::int64_t const groups = (static_cast<std::int64_t>(count) + Rows - 1) / Rows;
  // Column tiles of `Threads * per_thread` columns. Staged: one tile (the whole row) while row
  // groups fill the grid; when few rows are live, the columns are split so every resident
  // block has work (each tile re-stages its rows).
  std::int64_t const max_tiles = (static_cast<std::int64_t>(n) + Threads - 1) / Threads;
  std::int64_t col_tiles = max_tiles;
  if (Staged) {
    std::int64_t const want = groups > 0 ? (static_cast<std::int64_t>(gridDim.x) + groups - 1) / groups : 1;
    col_tiles = want < 1 ? 1 : (want > max_tiles ? max_tiles : want);
  }
  Index const cols_per_tile = static_cast<Index>(((max_tiles + col_tiles - 1) / col_tiles) * Threads);
  std::int64_t const items = groups * col_tiles;

  for (std::int64_t w = blockIdx.x; w < items; w += gridDim.x) {
    std::int64_t const g = w / col_tiles;
    Index const tile = static_cast<Index>(w % col_tiles);
    Index const first = static_cast<Index>(g * Rows);
    int const here = static_cast<int>(min(static_cast<std::int64_t>(Rows), static_cast<std::int64_t>(count) - first));
    if (threadIdx.x < Rows) {
      int const t = threadIdx.x;
      rid[t] = t < here ? (live_rows ? live_rows[first + t] : first + t) : Index(-1);
      nonzero[t] = 0;
    }
    __syncthreads();

    if constexpr (Staged) {
      // Rows beyond `here` are staged as zeros so the 16-byte reads below stay uniform.
      for (int r = 0; r < Rows; ++r) {
        Index const row = rid[r];
        T const* src = row >= 0 ? a.data + static_cast<std::int64_t>(row) * a.ld : nullptr;
        for (Index kk = threadIdx.x; kk < k; kk += Threads)
          stage[static_cast<std::int64_t>(kk) * SR + r] = src ? value_cast<float>(src[kk]) : 0.f;
      }
      __syncthreads();
    }

    T const* src[Rows];
    if constexpr (!Staged) {
#pragma unroll
      for (int r = 0; r < Rows; ++r) {
        Index const row = rid[r] >= 0 ? rid[r] : rid[0];  // dead slots read row 0 of the group, discarded
        src[r] = a.data + static_cast<std::int64_t>(row) * a.ld;
      }
    }

    Index const j0 = tile * cols_per_tile + static_cast<Index>(threadIdx.x);
    Index const j1 = min(n, static_cast<Index>(tile * cols_per_tile + cols_per_tile));
    for (Index j = j0; j < j1; j += Threads) {
      Acc acc[Rows];
#pragma unroll
      for (int r = 0; r < Rows; ++r) acc[r] = Acc(0);
      Index const pb = bt.row_ptr[j], pe = bt.row_ptr[j + 1];
      if constexpr (Staged) {
#pragma unroll 4
        for (Index p = pb; p < pe; ++p) {
          Index const kk = bt.col_idx[p];
          Acc const wv = value_cast<Acc>(bt.values[p]);
          float4 const* s = reinterpret_cast<float4 const*>(stage + static_cast<std::int64_t>(kk) * SR);
#pragma unroll
          for (int q = 0; q < Rows / 4; ++q) {
            float4 const v = s[q];
            acc[4 * q + 0] += wv * Acc(v.x);
            acc[4 * q + 1] += wv * Acc(v.y);
            acc[4 * q + 2] += wv * Acc(v.z);
            acc[4 * q + 3] += wv * Acc(v.w);
          }
        }
      } else {
#pragma unroll 4
        for (Index p = pb; p < pe; ++p) {
          Index const kk = bt.col_idx[p];
          Acc const wv = value_cast<Acc>(bt.values[p]);
#pragma unroll
          for (int r = 0; r < Rows; ++r) acc[r] += wv * value_cast<Acc>(src[r][kk]);
        }
      }
#pragma unroll
      for (int r = 0; r < Rows; ++r) {
        if (r < here) {
          Acc const v = epi(acc[r], j);
          c.data[static_cast<std::int64_t>(rid[r]) * c.ld + j] = value_cast<T>(v);
          if (v != Acc(0)) nonzero[r] = 1;  // benign race: every writer stores 1
        }
      }
    }
    __syncthreads();
    if (live_flags && static_cast<int>(threadIdx.x) < here && nonzero[threadIdx.x]) live_flags[first + threadIdx.x] = 1;
    // The next item rewrites rid/nonzero/stage only after its own first barrier; this
    // barrier keeps the reads above ahead of those writes.
    __syncthreads();
  }
}

template <int Rows, int Threads, bool Staged, class T, class Index, class Acc>
void launch_dense_csc(dense_view<T const> a, csr_view<T, Index> bt, dense_view<T> c, basic_epilogue<Acc> epi,
                      Index const* live_rows, Index const* num_live, Index max_live, int* live_flags,
                      cuda_exec exec) {
  auto kernel = dense_csc_spmm_kernel<Rows, Threads, Staged, T, Index, Acc>;
  std::size_t const smem = Staged ? static_cast<std::size_t>(bt.cols) * stage_stride<Rows> * sizeof(float) : 0;
  ::sdnn::detail::allow_dynamic_smem(kernel, smem);  // here, by the launch: see core/cuda.cuh
  int per_sm = 0;
  SDNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Threads, smem));
  per_sm = std::max(per_sm, 1);
  std::int64_t const groups = (static_cast<std::int64_t>(max_live) + Rows - 1) / Rows;
  std::int64_t const tiles = (static_cast<std::int64_t>(bt.rows) + Threads - 1) / Threads;
  std::int64_t const grid = std::min<std::int64_t>(groups * tiles, static_cast<std::int64_t>(sdnn::detail::sm_count()) * per_sm);
  if (grid <= 0) return;
  kernel<<<static_cast<unsigned>(grid), Threads, smem, exec.stream>>>(a, bt, c, epi, live_rows, num_live, max_live,
                                                                 live_flags);
  SDNN_CUDA_CHECK_LAUNCH();
}

// Chooses staging from the shapes: the largest staged row count <= Rows whose stage fits,
// else global gathers with Rows rows per thread.
template <int Rows, int Threads, class T, class Index, class Acc>
void dense_csc_dispatch(dense_view<T const> a, csr_view<T, Index> bt, dense_view<T> c, basic_epilogue<Acc> epi,
                        Index const* live_rows, Index const* num_live, Index max_live, int* live_flags,
                        cuda_exec exec) {
  SDNN_EXPECTS(a.cols == static_cast<std::int64_t>(bt.cols), "dense_csc_spmm: a has ", a.cols,
               " columns but B (given as bt, n x k) has k = ", bt.cols, " rows");
  SDNN_EXPECTS(c.cols == static_cast<std::int64_t>(bt.rows), "dense_csc_spmm: c has ", c.cols,
               " columns but B has n = ", bt.rows, " columns");
  if (max_live < 0) max_live = static_cast<Index>(a.rows);
  SDNN_EXPECTS(live_rows != nullptr || static_cast<std::int64_t>(max_live) <= a.rows,
               "dense_csc_spmm: without a row list max_live (", max_live, ") must not exceed a.rows (", a.rows, ")");
  SDNN_EXPECTS(c.rows >= a.rows, "dense_csc_spmm: c has ", c.rows, " rows, a has ", a.rows);
  if (max_live == 0 || bt.rows == 0) return;
  std::size_t const row_bytes = static_cast<std::size_t>(bt.cols) * sizeof(float);
  if (row_bytes * stage_stride<Rows> <= csc_stage_bytes_limit)
    return launch_dense_csc<Rows, Threads, true>(a, bt, c, epi, live_rows, num_live, max_live, live_flags, exec);
  if constexpr (Rows > 4) {
    if (row_bytes * stage_stride<Rows / 2> <= csc_stage_bytes_limit)
      return launch_dense_csc<Rows / 2, Threads, true>(a, bt, c, epi, live_rows, num_live, max_live, live_flags,
                                                      exec);
  }
  if constexpr (Rows > 8) {
    if (row_bytes * stage_stride<Rows / 4> <= csc_stage_bytes_limit)
      return launch_dense_csc<Rows / 4, Threads, true>(a, bt, c, epi, live_rows, num_live, max_live, live_flags,
                                                      exec);
  }
  launch_dense_csc<Rows, Threads, false>(a, bt, c, epi, live_rows, num_live, max_live, live_flags, exec);
}

}  // namespace detail

// c[r, :] = epi(a[r, :] * B) for the listed rows; B (k x n) is given as its transpose bt (n x k, CSR), i.e. B in CSC.
// live_rows: device array of row ids (nullptr = all rows 0..a.rows-1); num_live: device scalar with the count
// (nullptr = a.rows or the static count). Rows not listed are not written. No synchronisation.
// max_live: an upper bound of the count (the count itself when num_live is nullptr); a negative value means a.rows.
// All pointers (a, bt, c, epi.bias, live_rows, num_live) are device pointers. T: float or __half (float
// accumulation) or double.
template <class T, class Index, class Acc>
void dense_csc_spmm(dense_view<T const> a, csr_view<T, Index> bt, dense_view<T> c, basic_epilogue<Acc> epi,
                    Index const* live_rows, Index const* num_live, Index max_live, cuda_exec exec) {
  detail::dense_csc_dispatch<16, 256>(a, bt, c, epi, live_rows, num_live, max_live, static_cast<int*>(nullptr),
                                      exec);
}

// The same with an explicit register blocking (Rows rows per thread, 4/8/16/32) and the
// optional live flags (see dense_csc_spmm_kernel). Used by the sparse_linear policies.
template <int Rows, int Threads, class T, class Index, class Acc>
void dense_csc_spmm_flagged(dense_view<T const> a, csr_view<T, Index> bt, dense_view<T> c, basic_epilogue<Acc> epi,
                            Index const* live_rows, Index const* num_live, Index max_live, int* live_flags,
                            cuda_exec exec) {
  detail::dense_csc_dispatch<Rows, Threads>(a, bt, c, epi, live_rows, num_live, max_live, live_flags, exec);
}


// ---------------------------------------------------------------------------------------
// Footprint tiles: the same product with B's columns grouped at plan time.
//
// Output columns with identical input lists are grouped, and groups are packed into tiles
// of at most `tile_cols` columns whose union of inputs (the footprint) has at most
// `max_footprint` entries. A block stages the footprint of its tile for `Rows` activation
// rows in shared memory (one gather per footprint entry instead of one per nonzero: 16x
// fewer in a layer whose output columns share each list of 32 inputs 16 at a time) and
// computes the tile's columns from shared memory, with the inputs re-indexed into the
// footprint (16-bit local indices). Works for any CSR: without shared input lists a tile
// simply holds fewer columns.
// The tiles (csc_tiles_host, csc_tiles_view) and their host build (build_csc_tiles) are in
// formats/csc_tiles.hpp.

namespace detail {

template <int Rows, int Threads, class T, class Index, class Acc>
__global__ void __launch_bounds__(Threads)
    tiled_csc_spmm_kernel(dense_view<T const> a, csc_tiles_view<T> tv, dense_view<T> c, basic_epilogue<Acc> epi,
                          Index const* __restrict__ live_rows, Index const* __restrict__ num_live, Index max_live,
                          int* __restrict__ live_flags) {
  extern __shared__ float4 tiled_stage4[];
  float* stage = reinterpret_cast<float*>(tiled_stage4);  // [footprint][stage_stride<Rows>]
  constexpr int SR = stage_stride<Rows>;
  __shared__ Index rid[Rows];
  __shared__ int nonzero[Rows];
  Index count = num_live ? *num_live : max_live;
  if (count > max_live) count = max_live;
  std::int64_t const groups = (static_cast<std::int64_t>(count) + Rows - 1) / Rows;
  std::int64_t const items = groups * tv.tiles;
  for (std::int64_t w = blockIdx.x; w < items; w += gridDim.x) {
    std::int64_t const g = w / tv.tiles;
    std::int32_t const t = static_cast<std::int32_t>(w % tv.tiles);
    Index const first = static_cast<Index>(g * Rows);
    int const here = static_cast<int>(min(static_cast<std::int64_t>(Rows), static_cast<std::int64_t>(count) - first));
    if (threadIdx.x < Rows) {
      int const r = threadIdx.x;
      rid[r] = r < here ? (live_rows ? live_rows[first + r] : first + r) : Index(-1);
      nonzero[r] = 0;
    }
    __syncthreads();
    // Stage the footprint: thread f gathers input fp[f] of every row (Rows loads in flight).
    std::int32_t const f0 = tv.fp_ptr[t], f1 = tv.fp_ptr[t + 1];
    for (std::int32_t f = f0 + static_cast<std::int32_t>(threadIdx.x); f < f1; f += Threads) {
      std::int64_t const kk = tv.fp[f];
      float v[Rows];
#pragma unroll
      for (int r = 0; r < Rows; ++r) {
        Index const row = rid[r];
        v[r] = row >= 0 ? value_cast<float>(a.data[static_cast<std::int64_t>(row) * a.ld + kk]) : 0.f;
      }
      float4* dst = reinterpret_cast<float4*>(stage + static_cast<std::int64_t>(f - f0) * SR);
#pragma unroll
      for (int q = 0; q < Rows / 4; ++q) dst[q] = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
    }
    __syncthreads();
    std::int32_t const c0 = tv.col_ptr[t], c1 = tv.col_ptr[t + 1];
    for (std::int32_t ci = c0 + static_cast<std::int32_t>(threadIdx.x); ci < c1; ci += Threads) {
      Index const j = tv.cols[ci];
      Acc acc[Rows];
#pragma unroll
      for (int r = 0; r < Rows; ++r) acc[r] = Acc(0);
      std::int32_t const pb = tv.nnz_ptr[ci], pe = tv.nnz_ptr[ci + 1];
#pragma unroll 4
      for (std::int32_t p = pb; p < pe; ++p) {
        Acc const wv = value_cast<Acc>(tv.vals[p]);
        float4 const* s = reinterpret_cast<float4 const*>(stage + static_cast<std::int32_t>(tv.lidx[p]) * SR);
#pragma unroll
        for (int q = 0; q < Rows / 4; ++q) {
          float4 const v = s[q];
          acc[4 * q + 0] += wv * Acc(v.x);
          acc[4 * q + 1] += wv * Acc(v.y);
          acc[4 * q + 2] += wv * Acc(v.z);
          acc[4 * q + 3] += wv * Acc(v.w);
        }
      }
#pragma unroll
      for (int r = 0; r < Rows; ++r) {
        if (r < here) {
          Acc const v = epi(acc[r], j);
          c.data[static_cast<std::int64_t>(rid[r]) * c.ld + j] = value_cast<T>(v);
          if (v != Acc(0)) nonzero[r] = 1;
        }
      }
    }
    __syncthreads();
    if (live_flags && static_cast<int>(threadIdx.x) < here && nonzero[threadIdx.x]) live_flags[first + threadIdx.x] = 1;
    __syncthreads();
  }
}

}  // namespace detail

// The footprint-tiled product: c[r, :] = epi(a[r, :] * B) for the listed rows, B given by
// its tiles (built by build_csc_tiles from B^T and uploaded; a view of device arrays).
// Row list, count and flags as for dense_csc_spmm_flagged. No synchronisation.
template <int Rows, int Threads, class T, class Index, class Acc>
void tiled_csc_spmm(dense_view<T const> a, csc_tiles_view<T> tv, dense_view<T> c, basic_epilogue<Acc> epi,
                    Index const* live_rows, Index const* num_live, Index max_live, int* live_flags, cuda_exec exec) {
  static_assert(Rows % 4 == 0, "tiled_csc_spmm: Rows must be a multiple of 4");
  SDNN_EXPECTS(a.cols == tv.k && c.cols == tv.n, "tiled_csc_spmm: a has ", a.cols, " columns, c ", c.cols,
               "; the tiles are for ", tv.k, " -> ", tv.n);
  if (max_live < 0) max_live = static_cast<Index>(a.rows);
  // as dense_csc_dispatch: a row (listed or not) indexes both a and c
  SDNN_EXPECTS(live_rows != nullptr || static_cast<std::int64_t>(max_live) <= a.rows,
               "tiled_csc_spmm: without a row list max_live (", max_live, ") must not exceed a.rows (", a.rows, ")");
  SDNN_EXPECTS(c.rows >= a.rows, "tiled_csc_spmm: c has ", c.rows, " rows, a has ", a.rows);
  if (max_live == 0 || tv.tiles == 0) return;
  auto kernel = detail::tiled_csc_spmm_kernel<Rows, Threads, T, Index, Acc>;
  std::size_t const smem = static_cast<std::size_t>(tv.max_footprint) * detail::stage_stride<Rows> * sizeof(float);
  SDNN_EXPECTS(smem <= 200 * 1024, "tiled_csc_spmm: footprint of ", tv.max_footprint, " inputs x ", Rows,
               " rows does not fit shared memory");
  ::sdnn::detail::allow_dynamic_smem(kernel, smem);
  int per_sm = 0;
  SDNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Threads, smem));
  per_sm = std::max(per_sm, 1);
  std::int64_t const groups = (static_cast<std::int64_t>(max_live) + Rows - 1) / Rows;
  std::int64_t const grid =
      std::min<std::int64_t>(groups * tv.tiles, static_cast<std::int64_t>(sdnn::detail::sm_count()) * per_sm);
  kernel<<<static_cast<unsigned>(grid), Threads, smem, exec.stream>>>(a, tv, c, epi, live_rows, num_live, max_live,
                                                                 live_flags);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace sdnn::kernels
