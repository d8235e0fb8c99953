// sdnn/linear/kernel/row_skip.cuh - empty-row detection and compaction for products C = epi(A * B):
// the kernels and their launchers (per-row counts, the functors of the CUB passes, the fill
// of empty rows); the plan that owns the counts and lists is ops::row_skip_plan
// (linear/op/row_skip.cuh). The mask and list forms and their contract:
// docs/linear.md#empty-rows.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn::kernels {

namespace detail {
template <class Index>
__global__ void csr_row_counts_kernel(Index const* row_ptr, Index rows, Index* counts) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < rows;
       i += std::int64_t(gridDim.x) * blockDim.x)
    counts[i] = row_ptr[i + 1] - row_ptr[i];
}

// 1 where element (i / cols, i % cols) of a dense matrix is nonzero.
template <class T, class Index>
struct dense_nonzero {
  T const* data;
  std::int64_t cols, ld;
  __host__ __device__ Index operator()(std::int64_t i) const {
    std::int64_t const r = i / cols, c = i % cols;
    return value_cast<float>(data[r * ld + c]) != 0.f ? Index(1) : Index(0);
  }
};
struct scale_by {
  std::int64_t s;
  __host__ __device__ std::int64_t operator()(std::int64_t i) const { return i * s; }
};
template <class Index>
struct count_is {
  Index const* counts;
  bool nonzero;
  __host__ __device__ bool operator()(Index i) const { return (counts[i] != 0) == nonzero; }
};

// Blocks stride over the empty rows rows[0 .. *num_empty); columns by threads.
template <class T, class Index, class Acc>
__global__ void fill_empty_rows_kernel(dense_view<T> c, basic_epilogue<Acc> epi, Index const* rows,
                                       Index const* num_empty) {
  std::int64_t const count = *num_empty;
  for (std::int64_t d = blockIdx.x; d < count; d += gridDim.x) {
    T* crow = c.data + static_cast<std::int64_t>(rows[d]) * c.ld;
    for (std::int64_t j = threadIdx.x; j < c.cols; j += blockDim.x)
      crow[j] = value_cast<T>(epi(Acc(0), j));
  }
}
}  // namespace detail

// counts[i] = row_ptr[i + 1] - row_ptr[i] for a device CSR.
template <class T, class Index>
void csr_row_counts(csr_view<T, Index> a, Index* counts, cuda_exec exec) {
  if (a.rows <= 0) return;
  int const blocks = static_cast<int>((static_cast<std::int64_t>(a.rows) + 255) / 256);
  detail::csr_row_counts_kernel<<<blocks < 65535 ? blocks : 65535, 256, 0, exec.stream>>>(a.row_ptr, a.rows, counts);
  SDNN_CUDA_CHECK_LAUNCH();
}

// Writes epi(0, col) into the rows rows[0 .. *num_empty) of c (device list and count);
// max_rows bounds the count and sizes the grid (at most 4096 blocks, grid-stride). The
// contract of empty-row skipping: empty rows are neither read nor multiplied, but their
// outputs are written here (zero for a zero_preserving() epilogue).
template <class T, class Index, class Acc>
void fill_empty_rows(dense_view<T> c, basic_epilogue<Acc> const& epi, Index const* rows, Index const* num_empty,
                     std::int64_t max_rows, cuda_exec exec) {
  if (max_rows <= 0 || c.cols <= 0) return;
  std::int64_t const blocks = max_rows < 4096 ? max_rows : 4096;
  detail::fill_empty_rows_kernel<<<static_cast<unsigned>(blocks), 256, 0, exec.stream>>>(c, epi, rows, num_empty);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace sdnn::kernels
