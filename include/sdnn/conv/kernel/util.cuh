// sdnn/conv/kernel/util.cuh - the small elementwise kernels of the convolution stack and
// their launchers: the NCHW bias + ReLU pass after a cuDNN convolution (conv/vendor/cudnn.cuh)
// and the deterministic hash fill of tuning inputs (conv/sparse_conv.cuh, benchmarks).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/types.hpp"

namespace sdnn::conv::detail {
// Deterministic non-zero fill for tuning inputs (values in [-1, 1)).
template <class T>
__global__ void fill_hash_kernel(T* p, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = value_cast<T>(float(h & 0xffff) / 32768.0f - 1.0f);
  }
}
template <class T>
void fill_hash(T* p, std::size_t n, std::uint32_t seed, cuda_exec exec) {
  if (n == 0) return;
  fill_hash_kernel<<<1024, 256, 0, exec.stream>>>(p, n, seed);
  SDNN_CUDA_CHECK_LAUNCH();
}

// y[n][k][..] = relu?(y + bias[k]) over N*K*HW elements.
template <class T>
__global__ void bias_relu_kernel(T* y, std::size_t n, int K, std::int64_t hw, float const* bias, int relu) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    float v = value_cast<float>(y[i]);
    if (bias) v += bias[(i / hw) % K];
    if (relu && v < 0.0f) v = 0.0f;
    y[i] = value_cast<T>(v);
  }
}

// Enqueues y = relu?(y + bias[k]) on exec.stream for y = N x K x hw (NCHW); bias: [K] or
// nullptr. Grid-stride, 2048 x 256 threads. Never synchronises.
template <class T>
void bias_relu(T* y, std::size_t n, int K, std::int64_t hw, float const* bias, bool relu, cuda_exec exec) {
  bias_relu_kernel<<<2048, 256, 0, exec.stream>>>(y, n, K, hw, bias, relu ? 1 : 0);
  SDNN_CUDA_CHECK_LAUNCH();
}
}  // namespace sdnn::conv::detail
