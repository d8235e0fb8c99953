// sdnn/linear/kernel/live_rows.cuh - small kernels for layer loops that keep a list of live
// rows on the device: densifying sparse input rows, flagging rows with a nonzero, and
// copying, packing or unpacking listed rows. The live-row list is compacted by
// ops::row_compaction (linear/op/rows.cuh).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn::kernels {
namespace detail {

// y[r - first, col] = x(r, col) for rows [first, first + rows) of the CSR x; y must be zeroed.
// One warp per row.
template <class T, class Index>
__global__ void scatter_csr_rows_kernel(csr_view<T, Index> x, Index first, Index rows, dense_view<T> y) {
  std::int64_t const warp = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  int const lane = threadIdx.x % 32;
  if (warp >= rows) return;
  Index const r = first + static_cast<Index>(warp);
  for (Index p = x.row_ptr[r] + lane; p < x.row_ptr[r + 1]; p += 32) y(warp, x.col_idx[p]) = x.values[p];
}

// flags[i] = 1 when row `first + i` of the CSR x holds a stored nonzero value.
template <class T, class Index>
__global__ void csr_nonempty_flags_kernel(csr_view<T, Index> x, Index first, Index rows, int* flags) {
  std::int64_t const warp = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  int const lane = threadIdx.x % 32;
  if (warp >= rows) return;
  Index const r = first + static_cast<Index>(warp);
  int any = 0;
  for (Index p = x.row_ptr[r] + lane; p < x.row_ptr[r + 1]; p += 32) any |= value_cast<float>(x.values[p]) != 0.f;
  any = __any_sync(0xffffffffu, any);
  if (lane == 0) flags[warp] = any;
}

// flags[i] = 1 when dense row i of y has a nonzero. One warp per row.
template <class T>
__global__ void dense_nonzero_rows_kernel(dense_view<T const> y, int* flags) {
  std::int64_t const warp = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  int const lane = threadIdx.x % 32;
  if (warp >= y.rows) return;
  int any = 0;
  for (std::int64_t j = lane; j < y.cols && !any; j += 32) any = value_cast<float>(y(warp, j)) != 0.f;
  any = __any_sync(0xffffffffu, any);
  if (lane == 0) flags[warp] = any;
}

// out[rows[i], :] = in[rows[i], :] for i < *count (out zeroed by the caller). One block per listed row.
template <class T, class Index>
__global__ void copy_listed_rows_kernel(dense_view<T const> in, Index const* rows, Index const* count, Index max_count,
                                        dense_view<T> out) {
  Index const n = count ? min(*count, max_count) : max_count;
  for (Index i = blockIdx.x; i < n; i += gridDim.x) {
    Index const r = rows ? rows[i] : i;
    for (std::int64_t j = threadIdx.x; j < in.cols; j += blockDim.x) out(r, j) = in(r, j);
  }
}

// out[i, :] = in[rows[i], :] (Gather) or out[rows[i], :] = in[i, :] (scatter), i < *count.
template <bool Gather, class T, class Index>
__global__ void move_listed_rows_kernel(dense_view<T const> in, Index const* rows, Index const* count, Index max_count,
                                        dense_view<T> out) {
  Index const n = count ? min(*count, max_count) : max_count;
  for (Index i = blockIdx.x; i < n; i += gridDim.x) {
    Index const src = Gather ? rows[i] : i, dst = Gather ? i : rows[i];
    for (std::int64_t j = threadIdx.x; j < in.cols; j += blockDim.x) out(dst, j) = in(src, j);
  }
}

}  // namespace detail

// y (rows x x.cols, device) = rows [first, first + rows) of the device CSR x; zero elsewhere.
template <class T, class Index>
void densify_csr_rows(csr_view<T, Index> x, Index first, Index rows, dense_view<T> y, cuda_exec exec) {
  SDNN_EXPECTS(y.rows >= rows && y.cols == x.cols, "densify_csr_rows: output is ", y.rows, " x ", y.cols,
               ", need at least ", rows, " x ", x.cols);
  if (rows == 0) return;
  SDNN_CUDA_CHECK(cudaMemset2DAsync(y.data, y.ld * sizeof(T), 0, y.cols * sizeof(T), rows, exec.stream));
  unsigned const blocks = static_cast<unsigned>((static_cast<std::int64_t>(rows) * 32 + 255) / 256);
  detail::scatter_csr_rows_kernel<<<blocks, 256, 0, exec.stream>>>(x, first, rows, y);
  SDNN_CUDA_CHECK_LAUNCH();
}

// flags[i] = row first + i of the device CSR x holds a stored nonzero value, for i < rows.
template <class T, class Index>
void csr_nonempty_flags(csr_view<T, Index> x, Index first, Index rows, int* flags, cuda_exec exec) {
  if (rows == 0) return;
  unsigned const blocks = static_cast<unsigned>((static_cast<std::int64_t>(rows) * 32 + 255) / 256);
  detail::csr_nonempty_flags_kernel<<<blocks, 256, 0, exec.stream>>>(x, first, rows, flags);
  SDNN_CUDA_CHECK_LAUNCH();
}

// flags[i] = dense row i of y has a nonzero, for i < y.rows.
template <class T>
void dense_nonzero_rows(dense_view<T const> y, int* flags, cuda_exec exec) {
  if (y.rows == 0) return;
  unsigned const blocks = static_cast<unsigned>((y.rows * 32 + 255) / 256);
  detail::dense_nonzero_rows_kernel<<<blocks, 256, 0, exec.stream>>>(y, flags);
  SDNN_CUDA_CHECK_LAUNCH();
}

// out = 0, then out[r, :] = in[r, :] for the listed rows (rows == nullptr: rows 0..count-1).
template <class T, class Index>
void copy_listed_rows(dense_view<T const> in, Index const* rows, Index const* count, Index max_count, dense_view<T> out,
                      cuda_exec exec) {
  if (out.rows == 0 || out.cols == 0) return;
  SDNN_CUDA_CHECK(cudaMemset2DAsync(out.data, out.ld * sizeof(T), 0, out.cols * sizeof(T), out.rows, exec.stream));
  if (max_count == 0) return;
  unsigned const blocks = static_cast<unsigned>(std::min<std::int64_t>(max_count, 65535));
  detail::copy_listed_rows_kernel<<<blocks, 256, 0, exec.stream>>>(in, rows, count, max_count, out);
  SDNN_CUDA_CHECK_LAUNCH();
}

// Packs listed rows into a contiguous block (Gather = true: out[i] = in[rows[i]]) or unpacks
// them (Gather = false: out[rows[i]] = in[i]), for i < *count (device) <= max_count.
template <bool Gather, class T, class Index>
void move_listed_rows(dense_view<T const> in, Index const* rows, Index const* count, Index max_count, dense_view<T> out,
                      cuda_exec exec) {
  SDNN_EXPECTS(in.cols == out.cols, "move_listed_rows: ", in.cols, " columns in, ", out.cols, " out");
  if (max_count == 0 || in.cols == 0) return;
  unsigned const blocks = static_cast<unsigned>(std::min<std::int64_t>(max_count, 65535));
  detail::move_listed_rows_kernel<Gather><<<blocks, 256, 0, exec.stream>>>(in, rows, count, max_count, out);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace sdnn::kernels
