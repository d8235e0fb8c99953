// sdnn/ops/live_rows.cuh - live_row_compactor: compacts the Graph Challenge live-row list
// with cub::DeviceSelect::Flagged, the count staying on the device. A host plan (it owns
// the CUB temporary storage), so it lives in ops/, not kernels/.
#pragma once

#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/memory.cuh"

namespace sdnn::ops {

// Compacts a list under flags with cub::DeviceSelect::Flagged, entirely on the device:
//   out[0..*out_count) = { in[i] : flags[i] != 0, i < max_items }, order kept.
// `in == nullptr` selects from 0, 1, 2, ... (a counting sequence). Entries of flags at or
// beyond the true count must be 0 (callers zero the whole flag array before the layer).
// Two-phase temporary storage: reserve(max_items) once (plan time), then select() any
// number of times without allocation.
template <class Index>
class live_row_compactor {
 public:
  live_row_compactor() = default;
  void reserve(Index max_items, cuda_exec exec) {
    std::size_t a = 0, b = 0;
    SDNN_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, a, static_cast<Index const*>(nullptr),
                                               static_cast<int const*>(nullptr), static_cast<Index*>(nullptr),
                                               static_cast<Index*>(nullptr), static_cast<std::int64_t>(max_items),
                                               exec.stream));
    SDNN_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, b, thrust::counting_iterator<Index>(0),
                                               static_cast<int const*>(nullptr), static_cast<Index*>(nullptr),
                                               static_cast<Index*>(nullptr), static_cast<std::int64_t>(max_items),
                                               exec.stream));
    std::size_t const need = std::max(a, b);
    if (need > temp_.size()) temp_ = buffer<unsigned char, device_space>(need, exec);
    max_items_ = max_items;
  }
  void select(Index const* in, int const* flags, Index* out, Index* out_count, Index max_items, cuda_exec exec) {
    SDNN_EXPECTS(max_items <= max_items_, "live_row_compactor: reserved for ", max_items_, " items, asked for ",
                 max_items);
    std::size_t bytes = temp_.size();
    if (in)
      SDNN_CUDA_CHECK(cub::DeviceSelect::Flagged(temp_.data(), bytes, in, flags, out, out_count,
                                                 static_cast<std::int64_t>(max_items), exec.stream));
    else
      SDNN_CUDA_CHECK(cub::DeviceSelect::Flagged(temp_.data(), bytes, thrust::counting_iterator<Index>(0), flags, out,
                                                 out_count, static_cast<std::int64_t>(max_items), exec.stream));
  }

 private:
  buffer<unsigned char, device_space> temp_;
  Index max_items_ = 0;
};

}  // namespace sdnn::ops

// The name layers/sparse_linear.cuh and pipeline/challenge.hpp still use (they move to
// ops::live_row_compactor when they are rewritten on the ops plans, issue 9).
namespace sdnn::kernels {
using ops::live_row_compactor;
}  // namespace sdnn::kernels
