// sdnn/linear/op/rows.cuh - row bookkeeping for pipelines that keep a list of live rows on the
// device from layer to layer: densify sparse input rows, flag nonempty / nonzero
// rows, compact a list by flags (CUB), and materialise listed rows. Each call checks its
// arguments and enqueues on exec.stream; none allocates (row_compaction allocates at plan
// time) and none synchronises.
#pragma once

#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/linear/kernel/live_rows.cuh"

namespace sdnn::ops {

// y[0 .. rows) = rows [first, first + rows) of the device CSR x, dense (zero elsewhere).
template <class T>
void densify_rows(csr_view<T, std::int32_t> x, std::int32_t first, std::int32_t rows, dense_view<T> y, cuda_exec exec) {
  SDNN_EXPECTS(first >= 0 && rows >= 0 && static_cast<std::int64_t>(first) + rows <= x.rows,
               "densify_rows: rows [", first, ", ", static_cast<std::int64_t>(first) + rows, ") of a ", x.rows,
               "-row matrix");
  kernels::densify_csr_rows(x, first, rows, y, exec);
}
// flags[i] = 1 when row first + i of the device CSR x holds a stored nonzero value (i < rows).
template <class T>
void nonempty_row_flags(csr_view<T, std::int32_t> x, std::int32_t first, std::int32_t rows, int* flags,
                        cuda_exec exec) {
  SDNN_EXPECTS(first >= 0 && rows >= 0 && static_cast<std::int64_t>(first) + rows <= x.rows,
               "nonempty_row_flags: rows [", first, ", ", static_cast<std::int64_t>(first) + rows, ") of a ", x.rows,
               "-row matrix");
  kernels::csr_nonempty_flags(x, first, rows, flags, exec);
}
// flags[i] = 1 when dense row i of y has a nonzero (i < y.rows).
template <class T>
void nonzero_row_flags(dense_view<T const> y, int* flags, cuda_exec exec) {
  kernels::dense_nonzero_rows(y, flags, exec);
}
// out = 0, then out[r] = in[r] for the listed rows (list == nullptr: rows 0..count-1).
template <class T>
void copy_listed_rows(dense_view<T const> in, std::int32_t const* list, std::int32_t const* count,
                      std::int32_t max_count, dense_view<T> out, cuda_exec exec) {
  SDNN_EXPECTS(in.cols == out.cols && max_count <= in.rows, "copy_listed_rows: ", in.rows, " x ", in.cols, " -> ",
               out.rows, " x ", out.cols, ", ", max_count, " rows listed");
  kernels::copy_listed_rows(in, list, count, max_count, out, exec);
}

// out[0 .. *count) = the entries in[i] (in == nullptr: i itself) with flags[i] != 0, i < items,
// in order; *count on the device (cub::DeviceSelect::Flagged).
//   select_flagged_bytes(max_items): the temporary storage it needs for up to max_items;
//   select_flagged(temp, bytes, ...): enqueues it on exec.stream with that storage.
inline std::size_t select_flagged_bytes(std::int32_t max_items, cuda_exec exec) {
  std::size_t a = 0, b = 0;
  SDNN_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, a, static_cast<std::int32_t const*>(nullptr),
                                             static_cast<int const*>(nullptr), static_cast<std::int32_t*>(nullptr),
                                             static_cast<std::int32_t*>(nullptr), max_items, exec.stream));
  SDNN_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, b, thrust::counting_iterator<std::int32_t>(0),
                                             static_cast<int const*>(nullptr), static_cast<std::int32_t*>(nullptr),
                                             static_cast<std::int32_t*>(nullptr), max_items, exec.stream));
  return std::max<std::size_t>(std::max(a, b), 1);
}
inline void select_flagged(void* temp, std::size_t bytes, std::int32_t const* in, int const* flags, std::int32_t* out,
                           std::int32_t* count, std::int32_t items, cuda_exec exec) {
  if (in)
    SDNN_CUDA_CHECK(cub::DeviceSelect::Flagged(temp, bytes, in, flags, out, count, items, exec.stream));
  else
    SDNN_CUDA_CHECK(cub::DeviceSelect::Flagged(temp, bytes, thrust::counting_iterator<std::int32_t>(0), flags, out,
                                               count, items, exec.stream));
}

// select_flagged as a plan (core/plan.hpp): made for up to max_items, run() const, the
// temporary storage owned by the plan.
class row_compaction {
 public:
  row_compaction(std::int32_t max_items, cuda_exec exec) : runs_(exec), max_items_(max_items) {
    SDNN_EXPECTS(max_items >= 0, "row_compaction: max_items must be >= 0, got ", max_items);
    temp_ = buffer<unsigned char, device_space>(select_flagged_bytes(max_items, exec), runs_.owned(exec));
  }
  std::size_t workspace_bytes() const noexcept { return temp_.size(); }
  void run(cuda_exec exec, std::int32_t const* in, int const* flags, std::int32_t* out, std::int32_t* count,
           std::int32_t items) const {
    SDNN_EXPECTS(items >= 0 && items <= max_items_, "row_compaction: made for ", max_items_, " items, asked for ",
                 items);
    runs_.note(exec);
    select_flagged(const_cast<unsigned char*>(temp_.data()), temp_.size(), in, flags, out, count, items, exec);
  }

 private:
  sdnn::detail::run_streams runs_;  // first: temp_ is allocated through runs_.owned() (core/plan.cuh)
  std::int32_t max_items_ = 0;
  buffer<unsigned char, device_space> temp_;
};

}  // namespace sdnn::ops
