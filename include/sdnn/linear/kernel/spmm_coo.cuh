// sdnn/linear/kernel/spmm_coo.cuh - sparse x dense products with a canonical (row-sorted) COO
// left operand, nnz-split, epilogue fused, deterministic; the kernel and its launcher.
//
//   C[M x N] = epi(A_coo[M x K] * B[K x N])
//
// The carry and fix-up machinery is the nnz-balanced CSR kernel's (the nnz-split notes in
// linear/kernel/spmm_csr.cuh; docs/linear.md#nnz-split).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/formats/coo.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/linear/kernel/spmm_csr.cuh"

namespace sdnn::kernels {

namespace detail {

// COO crossing: the row of the first entry of chunk c + 1, when the entry before it (the
// last of chunk c) has the same row.
template <class Index>
struct coo_crossing {
  Index const* row_idx;
  std::int64_t nnz, chunk;
  __device__ std::int64_t operator()(std::int64_t c) const {
    std::int64_t const q = (c + 1) * chunk;
    if (q >= nnz) return -1;
    std::int64_t const r = row_idx[q];
    return static_cast<std::int64_t>(row_idx[q - 1]) == r ? r : -1;
  }
};

// One warp per (chunk of `chunk` entries, column slab); balanced by construction, every warp
// does the same number of entries. The warp walks its chunk 32 entries at a time (row, col,
// value staged by one coalesced load and broadcast by shuffle) and accumulates each run of
// equal rows in registers. A run that is a whole row gets the epilogue and is stored into C
// directly; only the chunk's first and last run can be parts of a row that crosses into a
// neighbouring chunk: their float partial sums go to the carry (2 rows per chunk, O(chunks *
// N), not O(M * N)), and nnz_split_fixup_kernel sums each crossing row's partials in chunk
// order, applies the epilogue and stores. Rows without entries get epi(0) from the warp that
// sees the gap (or from chunk 0 / the last chunk for rows before the first / after the last
// entry). Every element of C is written exactly once and every sum has a fixed order, so
// results are bitwise reproducible.
template <class T, class Index, class Acc, int U>
__global__ void __launch_bounds__(128)
    coo_nnz_split_kernel(coo_view<T, Index> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> epi,
                         std::int64_t chunk, std::int64_t chunks, float* carry, std::int64_t ldk, bool vec) {
  constexpr int V = vec_width<T>;
  int const lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  std::int64_t const n0 = static_cast<std::int64_t>(blockIdx.x) * (32 * U * V);
  std::int64_t const nnz = a.nnz;
  for (std::int64_t ch = static_cast<std::int64_t>(blockIdx.y) * 4 + warp; ch < chunks;
       ch += static_cast<std::int64_t>(gridDim.y) * 4) {
    std::int64_t const begin = ch * chunk, end = begin + chunk < nnz ? begin + chunk : nnz;
    float* const slots = carry + 2 * ch * ldk;
    // Row of the entry before the chunk (-1 before the first); all loads here are
    // warp-uniform broadcasts.
    std::int64_t const prev = begin > 0 ? static_cast<std::int64_t>(a.row_idx[begin - 1]) : -1;
    std::int64_t cur = a.row_idx[begin];
    bool began_before = prev == cur;  // the first run continues a row of an earlier chunk
    bool const goes_on = end < nnz && a.row_idx[end] == a.row_idx[end - 1];
    if (!began_before) warp_fill_rows<T, U, V>(c, prev + 1, cur, n0, lane, epi, vec);
    float acc[U][V];
    zero_acc<U, V>(acc);
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
        if (row != cur) {  // warp-uniform: the run of `cur` ended inside the chunk
          nnz_split_end_run<T, U, V>(c, cur, began_before, false, slots, ldk, n0, lane, acc, epi, vec);
          warp_fill_rows<T, U, V>(c, cur + 1, row, n0, lane, epi, vec);
          cur = row;
          began_before = false;
        }
        axpy_slab<T, U, V>(b, col, val, n0, lane, acc, vec);
      }
    }
    nnz_split_end_run<T, U, V>(c, cur, began_before, goes_on, slots, ldk, n0, lane, acc, epi, vec);
    if (ch == chunks - 1) warp_fill_rows<T, U, V>(c, cur + 1, a.rows, n0, lane, epi, vec);
  }
}
}  // namespace detail

// COO SpMM, nnz-split into `cut` (nnz_split_cut(a.nnz, ...)); carry: device workspace of
// nnz_split_carry_elements(cut.chunks, b.cols) floats (contents need no initialisation;
// runs sharing a carry must not overlap). Enqueued on exec.stream.
template <int U, class T, class Index, class Acc>
void spmm_coo_nnz_split(coo_view<T, Index> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
                        nnz_split_shape cut, float* carry, cuda_exec exec) {
  if (a.rows <= 0 || b.cols <= 0) return;
  if (a.nnz == 0) return detail::fill_epilogue_zero(c, epi, exec);
  SDNN_EXPECTS(cut.chunk >= 1 && cut.chunks == (static_cast<std::int64_t>(a.nnz) + cut.chunk - 1) / cut.chunk,
               "spmm(coo_nnz_split): ", cut.chunks, " chunks of ", cut.chunk, " do not cut ", a.nnz, " entries");
  constexpr int slab = spmm_slab_columns<T, U>;
  bool const vec = detail::slab_vectorisable(b.ld, c.ld, b.data, c.data, detail::vec_width<T>);
  std::int64_t const ldk = detail::nnz_split_carry_ld(b.cols);
  dim3 const grid(static_cast<unsigned>((b.cols + slab - 1) / slab), detail::row_groups(cut.chunks, 4));
  detail::coo_nnz_split_kernel<T, Index, Acc, U>
      <<<grid, 128, 0, exec.stream>>>(a, b, c, epi, cut.chunk, cut.chunks, carry, ldk, vec);
  SDNN_CUDA_CHECK_LAUNCH();
  detail::nnz_split_fixup(detail::coo_crossing<Index>{a.row_idx, a.nnz, cut.chunk}, cut.chunks, carry, c, epi,
                          exec);
}

}  // namespace sdnn::kernels
