// sdnn/train/kernel/conv_training.cuh - the data movement of a convolution trained as a GEMM
// (train/op/mixed_cnn.cuh): im2col of an NHWC batch into the GEMM's rows, its adjoint col2im
// (a gather, so every input gradient is one fixed-order float sum: deterministic, no atomics)
// and the backward of the 2x2 max-pool. Host oracle: train/reference/conv_training.hpp.
// Nothing here synchronises.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "sdnn/conv/shape.hpp"
#include "sdnn/core/cuda.cuh"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/numeric.cuh"
#include "sdnn/core/numeric.hpp"
#include "sdnn/core/types.hpp"

namespace sdnn::kernels {

namespace conv_train_detail {
inline unsigned grid_for(std::int64_t n) {
  std::int64_t const b = (n + 255) / 256;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 8192 ? 8192 : b));
}
// conv_shape's numbers with the output extents worked out on the host (its members are host code).
struct geometry {
  int C, H, W, R, S, sh, sw, ph, pw, dh, dw, OH, OW;
  explicit geometry(conv::conv_shape const& s)
      : C(s.C), H(s.H), W(s.W), R(s.R), S(s.S), sh(s.stride_h), sw(s.stride_w), ph(s.pad_h), pw(s.pad_w),
        dh(s.dil_h), dw(s.dil_w), OH(s.OH()), OW(s.OW()) {}
};
}  // namespace conv_train_detail

// col(row, (r*S + s)*C + c) = x[b][oh*sh - ph + r*dh][ow*sw - pw + s*dw][c] (0 outside the
// image), row = (b*OH + oh)*OW + ow: conv::im2col_nhwc's matrix, batch*OH*OW x R*S*C row-major.
template <class T>
__global__ void im2col_nhwc_kernel(T const* x, conv_train_detail::geometry s, std::int64_t batch, T* col) {
  int const OH = s.OH, OW = s.OW;
  std::int64_t const K = std::int64_t(s.R) * s.S * s.C;
  std::int64_t const n = batch * OH * OW * K;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < n;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t const row = e / K;
    int const k = static_cast<int>(e % K);
    int const c = k % s.C, tap = k / s.C, r = tap / s.S, sc = tap % s.S;
    int const ow = static_cast<int>(row % OW), oh = static_cast<int>((row / OW) % OH);
    std::int64_t const b = row / (std::int64_t(OW) * OH);
    int const ih = oh * s.sh - s.ph + r * s.dh, iw = ow * s.sw - s.pw + sc * s.dw;
    col[e] = (ih >= 0 && ih < s.H && iw >= 0 && iw < s.W) ? x[((b * s.H + ih) * s.W + iw) * s.C + c]
                                                         : value_cast<T>(0.0f);
  }
}

template <class T>
void im2col_nhwc(T const* x, conv::conv_shape const& s, std::int64_t batch, T* col, cuda_exec exec) {
  std::int64_t const n = batch * s.OH() * s.OW() * s.filter_size();
  if (n <= 0) return;
  im2col_nhwc_kernel<native_t<T>><<<conv_train_detail::grid_for(n), 256, 0, exec.stream>>>(
      to_native(x), conv_train_detail::geometry(s), batch, to_native(col));
  SDNN_CUDA_CHECK_LAUNCH();
}

// The adjoint of im2col: dx[b][h][w][c] = the float sum, over the taps (r, s) ascending (r
// outer), of dcol(row, (r*S + s)*C + c) for the output pixel whose tap reads (h, w); dx is
// written whole (0 where no tap reads a pixel).
template <class F>  // float; a template so that every translation unit may define it
__global__ void col2im_nhwc_kernel(F const* dcol, conv_train_detail::geometry s, std::int64_t batch, F* dx) {
  int const OH = s.OH, OW = s.OW;
  std::int64_t const K = std::int64_t(s.R) * s.S * s.C;
  std::int64_t const n = batch * s.H * s.W * s.C;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < n;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    int const c = static_cast<int>(e % s.C);
    std::int64_t const pix = e / s.C;
    int const w = static_cast<int>(pix % s.W), h = static_cast<int>((pix / s.W) % s.H);
    std::int64_t const b = pix / (std::int64_t(s.W) * s.H);
    F acc = 0.0f;
    for (int r = 0; r < s.R; ++r) {
      int const th = h + s.ph - r * s.dh;
      if (th < 0 || th % s.sh) continue;
      int const oh = th / s.sh;
      if (oh >= OH) continue;
      for (int sc = 0; sc < s.S; ++sc) {
        int const tw = w + s.pw - sc * s.dw;
        if (tw < 0 || tw % s.sw) continue;
        int const ow = tw / s.sw;
        if (ow >= OW) continue;
        acc = __fadd_rn(acc, dcol[((b * OH + oh) * OW + ow) * K + (r * s.S + sc) * s.C + c]);
      }
    }
    dx[e] = acc;
  }
}

inline void col2im_nhwc(float const* dcol, conv::conv_shape const& s, std::int64_t batch, float* dx, cuda_exec exec) {
  std::int64_t const n = batch * s.H * s.W * s.C;
  if (n <= 0) return;
  col2im_nhwc_kernel<float><<<conv_train_detail::grid_for(n), 256, 0, exec.stream>>>(dcol, conv_train_detail::geometry(s),
                                                                               batch, dx);
  SDNN_CUDA_CHECK_LAUNCH();
}

// The backward of the 2x2 stride-2 max-pool of y (batch x H x W x K, NHWC): dy[b][h][w][k] =
// dout[b][h/2][w/2][k] at the first position of its window (order (0,0), (0,1), (1,0), (1,1))
// that holds the window's maximum, 0 elsewhere and in an odd last row / column, which the pool
// drops. dy is written whole.
template <class T>
__global__ void max_pool2x2_backward_kernel(T const* y, float const* dout, std::int64_t batch, int H, int W, int K,
                                            float* dy) {
  int const PH = H / 2, PW = W / 2;
  std::int64_t const n = batch * H * W * K;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < n;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    int const k = static_cast<int>(e % K);
    std::int64_t const pix = e / K;
    int const w = static_cast<int>(pix % W), h = static_cast<int>((pix / W) % H);
    std::int64_t const b = pix / (std::int64_t(W) * H);
    int const ph = h / 2, pw = w / 2;
    float g = 0.0f;
    if (ph < PH && pw < PW) {
      T const* p = y + ((b * H + 2 * ph) * W + 2 * pw) * K + k;
      std::int64_t const row = std::int64_t(W) * K;
      float const v[4] = {value_cast<float>(p[0]), value_cast<float>(p[K]), value_cast<float>(p[row]),
                          value_cast<float>(p[row + K])};
      int first = 0;
      for (int i = 1; i < 4; ++i)
        if (v[i] > v[first]) first = i;
      if ((h - 2 * ph) * 2 + (w - 2 * pw) == first) g = dout[((b * PH + ph) * PW + pw) * K + k];
    }
    dy[e] = g;
  }
}

template <class T>
void max_pool2x2_backward(T const* y, float const* dout, std::int64_t batch, int H, int W, int K, float* dy,
                          cuda_exec exec) {
  std::int64_t const n = batch * H * W * K;
  if (n <= 0) return;
  max_pool2x2_backward_kernel<native_t<T>><<<conv_train_detail::grid_for(n), 256, 0, exec.stream>>>(
      to_native(y), dout, batch, H, W, K, dy);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace sdnn::kernels
