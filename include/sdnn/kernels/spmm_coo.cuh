// sdnn/kernels/spmm_coo.cuh - sparse x dense products with a canonical (row-sorted) COO
// left operand, nnz-split.
//
//   C[M x N] = epi(A_coo[M x K] * B[K x N])
// Pass 1 (coo_nnz_split_kernel): one warp per (chunk of E entries, column slab). The warp
// walks its chunk 32 entries at a time (row, col, value staged by one coalesced load and
// broadcast by shuffle), accumulates a run of equal rows in registers and adds the run
// once into a zeroed float workspace W[M x N] with atomicAdd (a row split between chunks
// gets one add per chunk). Balanced by construction: every warp does E entries.
// Pass 2 (epilogue_kernel): C = epi(W), converting to T; rows without entries get epi(0).
// Cost beyond CSR: zeroing, one read and one write of the M x N float workspace.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/formats/coo.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/kernels/spmm_csr.cuh"

namespace sdnn::kernels {

namespace detail {
template <int U, int V>
__device__ SDNN_FORCEINLINE void flush_run(float* w_row, std::int64_t n, std::int64_t n0, int lane,
                                           float (&acc)[U][V]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    std::int64_t const j = n0 + (static_cast<std::int64_t>(u) * 32 + lane) * V;
#pragma unroll
    for (int e = 0; e < V; ++e) {
      if (j + e < n) atomicAdd(w_row + j + e, acc[u][e]);
      acc[u][e] = 0.f;
    }
  }
}

template <class T, class Index, int U, int E>
__global__ void __launch_bounds__(128)
    coo_nnz_split_kernel(coo_view<T, Index> a, dense_view<T const> b, float* w, std::int64_t ldw, bool vec) {
  constexpr int V = vec_width<T>;
  int const lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  std::int64_t const n0 = static_cast<std::int64_t>(blockIdx.x) * (32 * U * V);
  std::int64_t const chunks = (static_cast<std::int64_t>(a.nnz) + E - 1) / E;
  for (std::int64_t ch = static_cast<std::int64_t>(blockIdx.y) * 4 + warp; ch < chunks;
       ch += static_cast<std::int64_t>(gridDim.y) * 4) {
    std::int64_t const begin = ch * E, end = begin + E < a.nnz ? begin + E : a.nnz;
    float acc[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int e = 0; e < V; ++e) acc[u][e] = 0.f;
    std::int64_t cur = -1;
    for (std::int64_t base = begin; base < end; base += 32) {
      std::int64_t const p = base + lane;
      std::int64_t my_row = 0, my_col = 0;
      float my_val = 0.f;
      if (p < end) {
        my_row = a.row_idx[p];
        my_col = a.col_idx[p];
        my_val = value_cast<float>(a.values[p]);
      }
      int const cnt = end - base < 32 ? static_cast<int>(end - base) : 32;
      for (int j = 0; j < cnt; ++j) {
        std::int64_t const row = __shfl_sync(0xffffffffu, my_row, j);
        std::int64_t const col = __shfl_sync(0xffffffffu, my_col, j);
        float const val = __shfl_sync(0xffffffffu, my_val, j);
        if (row != cur) {  // warp-uniform
          if (cur >= 0) flush_run<U, V>(w + cur * ldw, b.cols, n0, lane, acc);
          cur = row;
        }
        axpy_slab<T, U, V>(b, col, val, n0, lane, acc, vec);
      }
    }
    if (cur >= 0) flush_run<U, V>(w + cur * ldw, b.cols, n0, lane, acc);
  }
}

template <class T, class Acc>
__global__ void epilogue_kernel(float const* w, std::int64_t ldw, dense_view<T> c, basic_epilogue<Acc> epi) {
  for (std::int64_t i = blockIdx.x; i < c.rows; i += gridDim.x)
    for (std::int64_t j = threadIdx.x; j < c.cols; j += blockDim.x)
      c.data[i * c.ld + j] = value_cast<T>(epi(static_cast<Acc>(w[i * ldw + j]), j));
}
}  // namespace detail

// Workspace the COO kernel needs: a.rows x b.cols floats.
template <class T, class Index>
std::size_t spmm_coo_workspace_elements(coo_view<T, Index> a, std::int64_t n) {
  return static_cast<std::size_t>(a.rows) * static_cast<std::size_t>(n);
}

// w: device workspace of spmm_coo_workspace_elements() floats (zeroed here, on `stream`).
template <int E, int U, class T, class Index, class Acc>
void spmm_coo_nnz_split(coo_view<T, Index> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
                        float* w, cudaStream_t stream) {
  if (a.rows <= 0 || b.cols <= 0) return;
  std::int64_t const ldw = b.cols;
  SDNN_CUDA_CHECK(cudaMemsetAsync(w, 0, sizeof(float) * static_cast<std::size_t>(a.rows) * ldw, stream));
  if (a.nnz > 0) {
    constexpr int slab = spmm_slab_columns<T, U>;
    bool const vec = detail::slab_vectorisable(b.ld, c.ld, b.data, c.data, detail::vec_width<T>);
    std::int64_t const chunks = (static_cast<std::int64_t>(a.nnz) + E - 1) / E;
    dim3 const grid(static_cast<unsigned>((b.cols + slab - 1) / slab), detail::row_groups(chunks, 4));
    detail::coo_nnz_split_kernel<T, Index, U, E><<<grid, 128, 0, stream>>>(a, b, w, ldw, vec);
    SDNN_CUDA_CHECK_LAUNCH();
  }
  std::int64_t const blocks = a.rows < 65535 ? a.rows : 65535;
  detail::epilogue_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(w, ldw, c, epi);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace sdnn::kernels
