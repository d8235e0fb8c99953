// sdnn/kernels/row_skip.cuh - empty-row detection and compaction for products C = epi(A * B).
//
// Two forms, both built at plan time from A (static inference weights / a given input):
//  - mask form: counts[i] = number of nonzeros of row i of A (CSR: row_ptr differences;
//    dense: cub::DeviceSegmentedReduce over a 0/1 transform of A). Kernels skip rows (and
//    whole tiles) whose count is 0.
//  - list form: cub::DeviceSelect::If over the row indices, once with counts[i] != 0
//    (live rows, ascending, count num_live) and once with counts[i] == 0 (empty rows,
//    count num_empty); both counts stay on the device, so launches are sized by M (an
//    upper bound) and blocks past the count exit at once.
// Contract: empty rows are not read nor multiplied, but their outputs are written:
// fill_empty_rows() stores epi(0, col) there (zero for a zero_preserving() epilogue).
#pragma once

#include <cub/device/device_select.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cstddef>
#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/memory.cuh"
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
void csr_row_counts(csr_view<T, Index> a, Index* counts, cudaStream_t stream) {
  if (a.rows <= 0) return;
  int const blocks = static_cast<int>((static_cast<std::int64_t>(a.rows) + 255) / 256);
  detail::csr_row_counts_kernel<<<blocks < 65535 ? blocks : 65535, 256, 0, stream>>>(a.row_ptr, a.rows, counts);
  SDNN_CUDA_CHECK_LAUNCH();
}

// Per-row nonzero counts and the live/empty row partition of a device matrix, with the
// CUB temporary storage they need (sized on construction, reused by refresh()).
template <class Index>
class row_skip_plan {
 public:
  row_skip_plan() = default;

  // From a device CSR.
  template <class T>
  row_skip_plan(csr_view<T, Index> a, cuda_exec exec) : rows_(a.rows) {
    allocate(exec);
    csr_row_counts(a, counts_.data(), exec.stream);
    partition(exec);
  }
  // From a device dense matrix (counts through cub::DeviceSegmentedReduce::Sum).
  template <class T>
  row_skip_plan(dense_view<T const> a, cuda_exec exec) : rows_(a.rows) {
    allocate(exec);
    if (rows_ > 0) {
      if (a.cols == 0) {
        SDNN_CUDA_CHECK(cudaMemsetAsync(counts_.data(), 0, sizeof(Index) * rows_, exec.stream));
      } else {
        auto in = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                                  detail::dense_nonzero<T, Index>{a.data, a.cols, a.ld});
        auto begin = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                                     detail::scale_by{a.cols});
        auto end = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(1),
                                                   detail::scale_by{a.cols});
        std::size_t bytes = 0;
        SDNN_CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(nullptr, bytes, in, counts_.data(),
                                                        static_cast<int>(rows_), begin, end, exec.stream));
        buffer<unsigned char, device_space> tmp(bytes, exec);
        SDNN_CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(tmp.data(), bytes, in, counts_.data(),
                                                        static_cast<int>(rows_), begin, end, exec.stream));
      }
    }
    partition(exec);
  }

  std::int64_t rows() const noexcept { return rows_; }
  Index const* counts() const noexcept { return counts_.data(); }    // [rows], device
  Index const* row_list() const noexcept { return list_.data(); }      // [rows], device: live rows first
  Index const* num_live() const noexcept { return num_live_.data(); }    // device scalar
  Index const* empty_list() const noexcept { return empty_.data(); }     // [rows], device: empty rows first
  Index const* num_empty() const noexcept { return num_empty_.data(); }  // device scalar

  // Copies the live-row count to the host (synchronises exec.stream).
  Index num_live_host(cuda_exec exec) const {
    Index n = 0;
    SDNN_CUDA_CHECK(cudaMemcpyAsync(&n, num_live_.data(), sizeof(Index), cudaMemcpyDeviceToHost, exec.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    return n;
  }

  // Writes epi(0, col) into every empty row of c.
  template <class T, class Acc>
  void fill_empty_rows(dense_view<T> c, basic_epilogue<Acc> const& epi, cudaStream_t stream) const {
    if (rows_ <= 0 || c.cols <= 0) return;
    std::int64_t const blocks = rows_ < 4096 ? rows_ : 4096;
    detail::fill_empty_rows_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(c, epi, empty_.data(),
                                                                                   num_empty_.data());
    SDNN_CUDA_CHECK_LAUNCH();
  }

 private:
  void allocate(cuda_exec exec) {
    SDNN_EXPECTS(rows_ >= 0, "row_skip_plan: rows must be >= 0, got ", rows_);
    counts_ = buffer<Index, device_space>(static_cast<std::size_t>(rows_), exec);
    list_ = buffer<Index, device_space>(static_cast<std::size_t>(rows_), exec);
    empty_ = buffer<Index, device_space>(static_cast<std::size_t>(rows_), exec);
    num_live_ = buffer<Index, device_space>(1, exec);
    num_empty_ = buffer<Index, device_space>(1, exec);
  }
  void partition(cuda_exec exec) {
    if (rows_ == 0) {
      SDNN_CUDA_CHECK(cudaMemsetAsync(num_live_.data(), 0, sizeof(Index), exec.stream));
      SDNN_CUDA_CHECK(cudaMemsetAsync(num_empty_.data(), 0, sizeof(Index), exec.stream));
      return;
    }
    thrust::counting_iterator<Index> idx(0);
    detail::count_is<Index> live{counts_.data(), true}, empty{counts_.data(), false};
    std::size_t bytes = 0, bytes2 = 0;
    SDNN_CUDA_CHECK(cub::DeviceSelect::If(nullptr, bytes, idx, list_.data(), num_live_.data(),
                                          static_cast<std::int64_t>(rows_), live, exec.stream));
    SDNN_CUDA_CHECK(cub::DeviceSelect::If(nullptr, bytes2, idx, empty_.data(), num_empty_.data(),
                                          static_cast<std::int64_t>(rows_), empty, exec.stream));
    buffer<unsigned char, device_space> tmp(bytes > bytes2 ? bytes : bytes2, exec);
    SDNN_CUDA_CHECK(cub::DeviceSelect::If(tmp.data(), bytes, idx, list_.data(), num_live_.data(),
                                          static_cast<std::int64_t>(rows_), live, exec.stream));
    SDNN_CUDA_CHECK(cub::DeviceSelect::If(tmp.data(), bytes2, idx, empty_.data(), num_empty_.data(),
                                          static_cast<std::int64_t>(rows_), empty, exec.stream));
  }

  std::int64_t rows_ = 0;
  buffer<Index, device_space> counts_, list_, empty_, num_live_, num_empty_;
};

}  // namespace sdnn::kernels
