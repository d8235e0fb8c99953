// sdnn/core/kernel/for_each.cuh - the one-thread-per-index kernel behind the element-wise copy,
// scatter and mark steps of the device conversions (formats/convert.cuh) and statistics
// (formats/stats.cuh): f(i) for every i in [0, n), f a __device__ functor or extended lambda.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/exec.hpp"

namespace sdnn {
namespace detail {

inline constexpr int convert_block_threads = 256;

template <class F>
__global__ void for_each_index_kernel(std::int64_t n, F f) {
  std::int64_t const stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) f(i);
}

// Runs f(i) for every i in [0, n) on exec.stream: one thread per index, grid-stride
// (at most 2^20 blocks), for the element-wise copy / scatter steps.
template <class F>
void for_each_index(std::int64_t n, F f, cuda_exec exec) {
  if (n <= 0) return;
  auto const blocks = static_cast<unsigned>(
      std::min<std::int64_t>((n + convert_block_threads - 1) / convert_block_threads, std::int64_t(1) << 20));
  for_each_index_kernel<<<blocks, convert_block_threads, 0, exec.stream>>>(n, f);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace detail
}  // namespace sdnn
