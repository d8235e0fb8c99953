// sdnn/linear/kernel/spmm_tiled.cuh - sparse x dense products with a tiled-dense (block-sparse,
// dense tiles) left operand.
//
//   C[M x N] = epi(A_tiled[M x K] * B[K x N]); A is stored as 32 x 32 dense tiles with a
//   CSR index over the occupied tiles (formats/tiled_dense.hpp). Only 32 x 32 tiles are
//   compiled (the format's default); other tile shapes are rejected on the host.
// The kernel and its launcher; docs/linear.md#tiled-dense-and-tiled-gemm.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/formats/tiled_dense.hpp"
#include "sdnn/linear/kernel/gemm_tiled.cuh"

namespace sdnn::kernels {

namespace detail {
inline constexpr int tiled_spmm_tile = 32, tiled_spmm_slab = 128;

// One block of 256 threads per (tile row, 128-column slab of B): for each occupied tile
// (ti, tj) of the tile row, the tile (transposed, as float) and the 32 x 128 slab of B
// rows tj*32 .. tj*32+31 go through shared memory and are multiplied densely; each
// thread owns a 4 x 4 register tile (rows 4*ty.., columns 4*tx..). All-zero tiles are
// never read; a tile row without occupied tiles writes epi(0).
template <class T, class Acc>
__global__ void __launch_bounds__(256)
    tiled_dense_spmm_kernel(tiled_dense_view<T const> a, dense_view<T const> b, dense_view<T> c,
                            basic_epilogue<Acc> epi) {
  constexpr int TS = tiled_spmm_tile, SL = tiled_spmm_slab;
  __shared__ __align__(16) float at[TS][TS + 4];  // at[k][row]: the tile transposed
  __shared__ __align__(16) float bs[TS][SL];
  int const tid = threadIdx.x, tx = tid % 32, ty = tid / 32;  // ty: 8 groups of 4 rows
  std::int64_t const ti = blockIdx.y, n0 = static_cast<std::int64_t>(blockIdx.x) * SL;
  float acc[4][4] = {};
  for (std::int64_t p = a.tile_row_ptr[ti]; p < a.tile_row_ptr[ti + 1]; ++p) {
    std::int64_t const tj = a.tile_col[p];
    T const* tile = a.tile(ti, tj);
    // The 32 x 32 tile: 4 elements per thread.
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int const idx = tid * 4 + e, r = idx / TS, k = idx % TS;
      at[k][r] = value_cast<float>(tile[idx]);
    }
    // B rows tj*32 .. +31, columns n0 .. n0+127: 16 elements per thread (zero outside B).
#pragma unroll
    for (int e = 0; e < 16; ++e) {
      int const idx = tid + e * 256, k = idx / SL, j = idx % SL;
      std::int64_t const gk = tj * TS + k, gj = n0 + j;
      bs[k][j] = (gk < b.rows && gj < b.cols) ? value_cast<float>(b.data[gk * b.ld + gj]) : 0.f;
    }
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < TS; ++k) {
      float4 const av = *reinterpret_cast<float4 const*>(&at[k][ty * 4]);
      float4 const bv = *reinterpret_cast<float4 const*>(&bs[k][tx * 4]);
      float const ar[4] = {av.x, av.y, av.z, av.w}, br[4] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(ar[i], br[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    std::int64_t const row = ti * TS + ty * 4 + i;
    if (row >= c.rows) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      std::int64_t const col = n0 + tx * 4 + j;
      if (col < c.cols) c.data[row * c.ld + col] = value_cast<T>(epi(static_cast<Acc>(acc[i][j]), col));
    }
  }
}
}  // namespace detail

template <class T, class Acc>
void spmm_tiled_dense(tiled_dense_view<T const> a, dense_view<T const> b, dense_view<T> c,
                      basic_epilogue<Acc> const& epi, cuda_exec exec) {
  SDNN_EXPECTS(a.tile_rows == detail::tiled_spmm_tile && a.tile_cols == detail::tiled_spmm_tile,
               "spmm(tiled_dense): only 32 x 32 tiles are compiled, got ", a.tile_rows, " x ", a.tile_cols);
  if (a.rows <= 0 || b.cols <= 0) return;
  SDNN_EXPECTS(a.grid_rows <= 65535, "spmm(tiled_dense): ", a.grid_rows, " tile rows exceed the grid limit 65535");
  dim3 const grid(static_cast<unsigned>((b.cols + detail::tiled_spmm_slab - 1) / detail::tiled_spmm_slab),
                  static_cast<unsigned>(a.grid_rows));
  detail::tiled_dense_spmm_kernel<<<grid, 256, 0, exec.stream>>>(a, b, c, epi);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace sdnn::kernels
