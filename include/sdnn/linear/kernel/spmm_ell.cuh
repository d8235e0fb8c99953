// sdnn/linear/kernel/spmm_ell.cuh - sparse x dense products with an ELL left operand.
//
//   C[M x N] = epi(A_ell[M x K] * B[K x N]); A's slots are column-major (slot k of row i
//   at k * rows + i) and padding (col -1) only follows a row's entries.
// Same work unit as the CSR row-split kernel (linear/kernel/spmm_csr.cuh): one warp per (row,
// column slab), 32 slots staged per load and broadcast by shuffle. The row's length is
// found by the warp as the first padding slot (ballot over each 32-slot batch), so the
// loop stops there instead of walking the full width.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/formats/ell.hpp"
#include "sdnn/linear/kernel/spmm_csr.cuh"

namespace sdnn::kernels {

namespace detail {
template <class T, class Index, class Acc, int U, int Warps>
__global__ void __launch_bounds__(Warps * 32)
    ell_row_split_kernel(ell_view<T, Index> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> epi,
                         bool vec) {
  constexpr int V = vec_width<T>;
  int const lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  std::int64_t const n0 = static_cast<std::int64_t>(blockIdx.x) * (32 * U * V);
  for (std::int64_t row = static_cast<std::int64_t>(blockIdx.y) * Warps + warp; row < a.rows;
       row += static_cast<std::int64_t>(gridDim.y) * Warps) {
    float acc[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int e = 0; e < V; ++e) acc[u][e] = 0.f;
    for (std::int64_t base = 0; base < a.width; base += 32) {
      std::int64_t const k = base + lane;
      std::int64_t my_col = -1;
      float my_val = 0.f;
      if (k < a.width) {
        std::size_t const s = a.slot(static_cast<Index>(row), static_cast<Index>(k));
        my_col = static_cast<std::int64_t>(a.col_idx[s]);
        if (my_col >= 0) my_val = value_cast<float>(a.values[s]);
      }
      // Entries come first, padding after: the stored count is the number of set bits.
      unsigned const stored = __ballot_sync(0xffffffffu, my_col >= 0);
      int const cnt = __popc(stored);
#pragma unroll 4
      for (int j = 0; j < cnt; ++j) {
        std::int64_t const col = __shfl_sync(0xffffffffu, my_col, j);
        float const val = __shfl_sync(0xffffffffu, my_val, j);
        axpy_slab<T, U, V>(b, col, val, n0, lane, acc, vec);
      }
      if (cnt < 32) break;  // padding reached
    }
    warp_store_row<T, U, V>(c, row, n0, lane, acc, epi, vec);
  }
}
}  // namespace detail

template <int U, int Warps, class T, class Index, class Acc>
void spmm_ell_row_split(ell_view<T, Index> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
                        cuda_exec exec) {
  if (a.rows <= 0 || b.cols <= 0) return;
  constexpr int slab = spmm_slab_columns<T, U>;
  bool const vec = detail::slab_vectorisable(b.ld, c.ld, b.data, c.data, detail::vec_width<T>);
  dim3 const grid(static_cast<unsigned>((b.cols + slab - 1) / slab), detail::row_groups(a.rows, Warps));
  detail::ell_row_split_kernel<T, Index, Acc, U, Warps><<<grid, Warps * 32, 0, exec.stream>>>(a, b, c, epi, vec);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace sdnn::kernels
