// sdnn/conv/kernel/nhwc_epilogue.cuh - the elementwise passes after an NHWC convolution whose
// epilogue was not fused (the cuDNN baseline, conv/vendor/cudnn16.cuh): y = relu?(y + bias[k]) in
// place, and the 2x2 stride-2 max-pool, each a grid-stride kernel (the pool 8 channels a thread
// where it can), and their launchers (stream-ordered, never synchronising).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/fast_divmod.hpp"
#include "sdnn/core/numeric.cuh"
#include "sdnn/core/types.hpp"

namespace sdnn::conv::detail {

// y[p][k] = relu?(float(y[p][k]) + bias[k]) rounded to T, over n = pixels*K elements; bias: [K] or nullptr.
template <class T>
__global__ void nhwc_bias_relu_kernel(T* y, std::int64_t n, int K, float const* bias, int relu) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    float v = value_cast<float>(y[i]);
    if (bias) v += bias[i % K];
    if (relu && v < 0.0f) v = 0.0f;
    y[i] = value_cast<T>(v);
  }
}

// out[b][ph][pw][k] = max of in[b][2ph + {0,1}][2pw + {0,1}][k]; in: batch x H x W x K,
// out: batch x H/2 x W/2 x K (an odd last row / column is dropped).
template <class T>
__global__ void nhwc_max_pool2x2_kernel(T const* in, T* out, std::int64_t batch, int H, int W, int K) {
  int const PH = H / 2, PW = W / 2;
  std::int64_t const n = batch * PH * PW * K;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t const k = i % K, q = i / K;
    std::int64_t const pw = q % PW, ph = (q / PW) % PH, b = q / (std::int64_t(PW) * PH);
    T const* p = in + ((b * H + 2 * ph) * W + 2 * pw) * K + k;
    std::int64_t const row = std::int64_t(W) * K;
    float const m = fmaxf(fmaxf(value_cast<float>(p[0]), value_cast<float>(p[K])),
                          fmaxf(value_cast<float>(p[row]), value_cast<float>(p[row + K])));
    out[i] = value_cast<T>(m);  // exact: m is one of the four T values
  }
}

// The same for 16-bit T, 8 channels a thread (16-byte loads and stores: K % 8 == 0, in and out
// 16-byte aligned), with 32-bit index arithmetic (n8 = batch * H/2 * W/2 * K/8 < 2^31): the scalar
// kernel spends more time dividing 64-bit indices than moving its bytes. The same fmaxf tree per
// channel.
template <class T>
__global__ void nhwc_max_pool2x2_vec8_kernel(T const* in, T* out, int n8, fast_divmod k8, fast_divmod pw_div,
                                             fast_divmod ph_div, int H, int W, int K) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += gridDim.x * blockDim.x) {
    int q, c8, pw, ph, b;
    k8.divmod(i, q, c8);
    pw_div.divmod(q, q, pw);
    ph_div.divmod(q, b, ph);
    T const* p = in + ((std::int64_t(b) * H + 2 * ph) * W + 2 * pw) * K + 8 * c8;
    std::int64_t const row = std::int64_t(W) * K;
    uint4 const v[4] = {*reinterpret_cast<uint4 const*>(p), *reinterpret_cast<uint4 const*>(p + K),
                        *reinterpret_cast<uint4 const*>(p + row), *reinterpret_cast<uint4 const*>(p + row + K)};
    unsigned r[4];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      auto word = [&](uint4 const& u) { return w == 0 ? u.x : w == 1 ? u.y : w == 2 ? u.z : u.w; };
      float2 const a = unpack2_float<T>(word(v[0])), b2 = unpack2_float<T>(word(v[1])),
                   c = unpack2_float<T>(word(v[2])), d = unpack2_float<T>(word(v[3]));
      r[w] = pack2_float<T>(fmaxf(fmaxf(a.x, b2.x), fmaxf(c.x, d.x)), fmaxf(fmaxf(a.y, b2.y), fmaxf(c.y, d.y)));
    }
    *reinterpret_cast<uint4*>(out + std::int64_t(i) * 8) = make_uint4(r[0], r[1], r[2], r[3]);  // exact: T values
  }
}

inline unsigned elementwise_grid(std::int64_t n) {
  return static_cast<unsigned>(std::min<std::int64_t>((n + 255) / 256, 4096));
}

// Enqueues y = relu?(y + bias[k]) on exec.stream for y = pixels x K (NHWC); bias: device [K] or nullptr.
template <class T>
void nhwc_bias_relu(T* y, std::int64_t pixels, int K, float const* bias, bool relu, cuda_exec const& exec) {
  std::int64_t const n = pixels * K;
  if (n == 0 || (!bias && !relu)) return;
  nhwc_bias_relu_kernel<native_t<T>><<<elementwise_grid(n), 256, 0, exec.stream>>>(to_native(y), n, K, bias,
                                                                                       relu ? 1 : 0);
  SDNN_CUDA_CHECK_LAUNCH();
}

// Enqueues the 2x2 stride-2 max-pool of in (batch x H x W x K) into out (batch x H/2 x W/2 x K).
template <class T>
void nhwc_max_pool2x2(T const* in, T* out, std::int64_t batch, int H, int W, int K, cuda_exec const& exec) {
  std::int64_t const n = batch * (H / 2) * (W / 2) * K;
  if (n == 0) return;
  if constexpr (is_16bit_float_v<T>) {
    if (K % 8 == 0 && n / 8 < (std::int64_t(1) << 31) && reinterpret_cast<std::uintptr_t>(in) % 16 == 0 &&
        reinterpret_cast<std::uintptr_t>(out) % 16 == 0) {
      nhwc_max_pool2x2_vec8_kernel<native_t<T>><<<elementwise_grid(n / 8), 256, 0, exec.stream>>>(
          to_native(in), to_native(out), int(n / 8), fast_divmod(K / 8), fast_divmod(W / 2), fast_divmod(H / 2), H,
          W, K);
      SDNN_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  nhwc_max_pool2x2_kernel<native_t<T>><<<elementwise_grid(n), 256, 0, exec.stream>>>(to_native(in), to_native(out),
                                                                                         batch, H, W, K);
  SDNN_CUDA_CHECK_LAUNCH();
}
}  // namespace sdnn::conv::detail
