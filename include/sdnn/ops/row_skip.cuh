// sdnn/ops/row_skip.cuh - row_skip_plan: the per-row nonzero counts and the live / empty
// row partition of a device matrix, built at plan time (see kernels/row_skip.cuh for the
// two forms and the contract on empty rows). A host plan owning device arrays, so it
// lives in ops/.
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
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/kernels/row_skip.cuh"

namespace sdnn::ops {

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
    kernels::csr_row_counts(a, counts_.data(), exec);
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
                                                  kernels::detail::dense_nonzero<T, Index>{a.data, a.cols, a.ld});
        auto begin = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                                     kernels::detail::scale_by{a.cols});
        auto end = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(1),
                                                   kernels::detail::scale_by{a.cols});
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
    kernels::fill_empty_rows(c, epi, empty_.data(), num_empty_.data(), rows_, cuda_exec{stream});
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
    kernels::detail::count_is<Index> live{counts_.data(), true}, empty{counts_.data(), false};
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

}  // namespace sdnn::ops
