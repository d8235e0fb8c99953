// sdnn/linear/op/row_skip.cuh - row_skip_plan: the per-row nonzero counts and the live / empty
// row partition of a device matrix (CSR or dense), which the empty-row forms of the products
// read (gemm with skip_empty_rows_*, csr_spmm_plan<skip_empty_rows_compact<...>>). A host plan
// owning device arrays (protocol of core/plan.hpp); its kernels are in
// linear/kernel/row_skip.cuh. The two forms and the contract on empty rows:
// docs/linear.md#empty-rows.
#pragma once

#include <cub/device/device_select.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/linear/kernel/row_skip.cuh"

namespace sdnn::ops {

// run() writes the plan's result arrays, which the products read afterwards: like the plan's
// own workspace, they are shared by every run, so runs on different streams race on them.
// Only num_live_host() synchronises (the automatic GEMM reads the live count back).
template <class Index>
class row_skip_plan {
 public:
  row_skip_plan() = default;

  // rows in [0, 2^31) and representable in Index.
  static plan_status can_implement(std::int64_t rows) {
    if (rows < 0) return plan_status::failure("row_skip_plan: rows must be >= 0, got " + std::to_string(rows));
    if (rows > INT32_MAX || rows > static_cast<std::int64_t>(std::numeric_limits<Index>::max()))
      return plan_status::failure("row_skip_plan: " + std::to_string(rows) +
                                  " rows do not fit the index type or CUB's 32-bit segment count");
    return {};
  }

  // Plans for matrices of `rows` rows: allocates the result arrays (counts, live and empty
  // lists, two counts) and, unless opt.own_workspace is false, the CUB scratch.
  row_skip_plan(std::int64_t rows, cuda_exec exec, plan_options opt = {})
      : runs_(exec), rows_(checked(rows)), own_workspace_(opt.own_workspace) {
    cuda_exec const owned = runs_.owned(exec);
    counts_ = buffer<Index, device_space>(static_cast<std::size_t>(rows_), owned);
    list_ = buffer<Index, device_space>(static_cast<std::size_t>(rows_), owned);
    empty_ = buffer<Index, device_space>(static_cast<std::size_t>(rows_), owned);
    num_live_ = buffer<Index, device_space>(1, owned);
    num_empty_ = buffer<Index, device_space>(1, owned);
    if (rows_ > 0) {
      thrust::counting_iterator<Index> idx(0);
      kernels::detail::count_is<Index> live{nullptr, true};
      std::size_t b1 = 0, b2 = 0;
      SDNN_CUDA_CHECK(cub::DeviceSelect::If(nullptr, b1, idx, static_cast<Index*>(nullptr),
                                            static_cast<Index*>(nullptr), static_cast<std::int64_t>(rows_), live,
                                            exec.stream));
      // DeviceSegmentedReduce needs (next to) no scratch; its size for float data is kept
      // here and checked against the real value type in run().
      SDNN_CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(nullptr, b2, dense_counts_in<float>(nullptr, 1, 1),
                                                      static_cast<Index*>(nullptr), static_cast<int>(rows_),
                                                      segment_begin(1), segment_end(1), exec.stream));
      cub_bytes_ = std::max(b1, b2);
    }
    if (own_workspace_ && cub_bytes_ > 0) own_ = buffer<unsigned char, device_space>(cub_bytes_, owned);
  }
  // Plan and run at once, from a device CSR or dense matrix (plan for a.rows, then run(a)).
  template <class T>
  row_skip_plan(csr_view<T, Index> a, cuda_exec exec, plan_options opt = {}) : row_skip_plan(a.rows, exec, opt) {
    run(exec, a);
  }
  template <class T>
  row_skip_plan(dense_view<T const> a, cuda_exec exec, plan_options opt = {}) : row_skip_plan(a.rows, exec, opt) {
    run(exec, a);
  }
  row_skip_plan(row_skip_plan&&) noexcept = default;
  row_skip_plan& operator=(row_skip_plan&&) noexcept = default;

  // The CUB scratch of run() (not plan data).
  std::size_t workspace_bytes() const noexcept { return cub_bytes_; }

  // Counts and partitions the rows of a device CSR (counts from row_ptr); a.rows == rows().
  // const; enqueues only.
  template <class T>
  void run(cuda_exec exec, csr_view<T, Index> a, workspace ws = {}) const {
    check_rows(a.rows);
    runs_.note(exec);
    kernels::csr_row_counts(a, const_cast<Index*>(counts_.data()), exec);
    partition(exec, ws);
  }
  // Counts and partitions the rows of a device dense matrix (cub::DeviceSegmentedReduce::Sum).
  template <class T>
  void run(cuda_exec exec, dense_view<T const> a, workspace ws = {}) const {
    check_rows(a.rows);
    runs_.note(exec);
    Index* counts = const_cast<Index*>(counts_.data());
    if (rows_ > 0) {
      if (a.cols == 0) {
        SDNN_CUDA_CHECK(cudaMemsetAsync(counts, 0, sizeof(Index) * rows_, exec.stream));
      } else {
        auto in = dense_counts_in<T>(a.data, a.cols, a.ld);
        std::size_t bytes = 0;
        SDNN_CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(nullptr, bytes, in, counts, static_cast<int>(rows_),
                                                        segment_begin(a.cols), segment_end(a.cols), exec.stream));
        workspace const w = scratch(ws);
        SDNN_EXPECTS(bytes <= w.bytes, "row_skip_plan: cub::DeviceSegmentedReduce needs ", bytes,
                     " bytes of scratch, the plan sized ", w.bytes);
        SDNN_CUDA_CHECK(cub::DeviceSegmentedReduce::Sum(w.data, bytes, in, counts, static_cast<int>(rows_),
                                                        segment_begin(a.cols), segment_end(a.cols), exec.stream));
      }
    }
    partition(exec, ws);
  }

  std::int64_t rows() const noexcept { return rows_; }
  Index const* counts() const noexcept { return counts_.data(); }    // [rows], device
  Index const* row_list() const noexcept { return list_.data(); }      // [rows], device: live rows first
  Index const* num_live() const noexcept { return num_live_.data(); }    // device scalar
  Index const* empty_list() const noexcept { return empty_.data(); }     // [rows], device: empty rows first
  Index const* num_empty() const noexcept { return num_empty_.data(); }  // device scalar

  // Copies the live-row count to the host (SYNCHRONISES exec.stream).
  Index num_live_host(cuda_exec exec) const {
    Index n = 0;
    SDNN_CUDA_CHECK(cudaMemcpyAsync(&n, num_live_.data(), sizeof(Index), cudaMemcpyDeviceToHost, exec.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    return n;
  }

  // Writes epi(0, col) into every empty row of c (enqueued on exec.stream).
  template <class T, class Acc>
  void fill_empty_rows(dense_view<T> c, basic_epilogue<Acc> const& epi, cuda_exec exec) const {
    if (rows_ <= 0 || c.cols <= 0) return;
    runs_.note(exec);
    kernels::fill_empty_rows(c, epi, empty_.data(), num_empty_.data(), rows_, exec);
  }

 private:
  static std::int64_t checked(std::int64_t rows) {
    auto const st = can_implement(rows);
    if (!st) SDNN_FAIL(st.why());
    return rows;
  }
  template <class T>
  static auto dense_counts_in(T const* data, std::int64_t cols, std::int64_t ld) {
    return thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                           kernels::detail::dense_nonzero<T, Index>{data, cols, ld});
  }
  static auto segment_begin(std::int64_t cols) {
    return thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0), kernels::detail::scale_by{cols});
  }
  static auto segment_end(std::int64_t cols) {
    return thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(1), kernels::detail::scale_by{cols});
  }
  void check_rows(std::int64_t rows) const {
    SDNN_EXPECTS_DIMS(rows == rows_, "row_skip_plan: made for ", rows_, " rows, run on a matrix of ", rows);
  }
  workspace scratch(workspace ws) const {
    if (ws.data == nullptr) {
      SDNN_EXPECTS(own_.size() > 0 || cub_bytes_ == 0,
                   "row_skip_plan: made without its own workspace (plan_options::own_workspace = false), so run() "
                   "needs a workspace of ", cub_bytes_, " bytes");
      return workspace{const_cast<unsigned char*>(own_.data()), own_.size()};
    }
    SDNN_EXPECTS(ws.bytes >= cub_bytes_, "row_skip_plan: workspace of ", ws.bytes, " bytes, need ", cub_bytes_);
    return ws;
  }
  void partition(cuda_exec exec, workspace ws) const {
    Index* nl = const_cast<Index*>(num_live_.data());
    Index* ne = const_cast<Index*>(num_empty_.data());
    if (rows_ == 0) {
      SDNN_CUDA_CHECK(cudaMemsetAsync(nl, 0, sizeof(Index), exec.stream));
      SDNN_CUDA_CHECK(cudaMemsetAsync(ne, 0, sizeof(Index), exec.stream));
      return;
    }
    workspace const w = scratch(ws);
    thrust::counting_iterator<Index> idx(0);
    kernels::detail::count_is<Index> live{counts_.data(), true}, empty{counts_.data(), false};
    std::size_t bytes = 0, bytes2 = 0;
    SDNN_CUDA_CHECK(cub::DeviceSelect::If(nullptr, bytes, idx, const_cast<Index*>(list_.data()), nl,
                                          static_cast<std::int64_t>(rows_), live, exec.stream));
    SDNN_CUDA_CHECK(cub::DeviceSelect::If(nullptr, bytes2, idx, const_cast<Index*>(empty_.data()), ne,
                                          static_cast<std::int64_t>(rows_), empty, exec.stream));
    SDNN_EXPECTS(bytes <= w.bytes && bytes2 <= w.bytes, "row_skip_plan: cub::DeviceSelect needs ",
                 std::max(bytes, bytes2), " bytes of scratch, the plan sized ", w.bytes);
    SDNN_CUDA_CHECK(cub::DeviceSelect::If(w.data, bytes, idx, const_cast<Index*>(list_.data()), nl,
                                          static_cast<std::int64_t>(rows_), live, exec.stream));
    SDNN_CUDA_CHECK(cub::DeviceSelect::If(w.data, bytes2, idx, const_cast<Index*>(empty_.data()), ne,
                                          static_cast<std::int64_t>(rows_), empty, exec.stream));
  }

  sdnn::detail::run_streams runs_;  // first: the buffers are allocated through runs_.owned() (core/plan.cuh)
  std::int64_t rows_ = 0;
  bool own_workspace_ = true;
  std::size_t cub_bytes_ = 0;
  buffer<Index, device_space> counts_, list_, empty_, num_live_, num_empty_;  // the results (plan data)
  buffer<unsigned char, device_space> own_;  // the plan's own workspace (plan_options::own_workspace)
};

}  // namespace sdnn::ops
