// sdnn/conv/reference/conv2d_nhwc.hpp - the host oracle of the 16-bit NHWC convolution (the
// implicit GEMM and the cuDNN baseline): float arithmetic on the given, already rounded inputs,
// with the weights as the GEMM view Wg (K x R*S*C, conv/nhwc.hpp), bias, ReLU, an optional 2x2
// stride-2 max-pool, and one rounding to Out at the end.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "sdnn/conv/nhwc.hpp"
#include "sdnn/conv/shape.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/numeric.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn::conv::reference {

// y = pool?(relu?(conv(x, Wg) + bias)) as NHWC [batch][OH'][OW'][K], OH' = OH (or OH/2 pooled,
// the odd last row / column dropped), each value rounded once from float to Out.
//   acc(b, oh, ow, ko) = 0.0f; for r, then s (taps whose input lies outside are skipped), then
//   c ascending: acc += float(Wg(ko, (r*S+s)*C + c)) * float(x[b][ih][iw][c]); then acc += bias[ko].
// This is the order of a row of im2col_nhwc(...) times a row of Wg with k ascending, zero
// columns skipped (adding a +-0 product leaves a float sum unchanged), so a plain GEMM over the
// explicit im2col gives the same floats. The pool takes the max of 4 floats (before rounding;
// rounding is monotonic, so it equals the max of the rounded values).
// T: float, sdnn::bf16 or sdnn::fp16; Out: T or float. bias: K floats or empty.
template <class T, class Out = T>
std::vector<Out> conv2d_nhwc(conv_shape const& s, std::int64_t batch, T const* x_nhwc, dense_view<T const> w_gemm,
                             std::vector<float> const& bias, bool relu, bool pool2x2) {
  static_assert(std::is_same_v<T, float> || is_16bit_float_v<T>, "conv2d_nhwc: T must be float, bf16 or fp16");
  static_assert(std::is_same_v<Out, T> || std::is_same_v<Out, float>, "conv2d_nhwc: Out must be T or float");
  check_implicit_gemm_extents(s, batch);
  std::int64_t const RSC = gemm_reduction(s), OH = s.OH(), OW = s.OW(), K = s.K;
  SDNN_EXPECTS_DIMS(w_gemm.rows == K && w_gemm.cols == RSC && w_gemm.ld >= w_gemm.cols,
                    "conv2d_nhwc: the GEMM-view weights are ", w_gemm.rows, " x ", w_gemm.cols, " (ld ", w_gemm.ld,
                    "), the shape needs K x R*S*C = ", K, " x ", RSC);
  SDNN_EXPECTS_DIMS(bias.empty() || bias.size() == static_cast<std::size_t>(K), "conv2d_nhwc: bias must have K = ", K,
                    " entries (or none), got ", bias.size());
  SDNN_EXPECTS(!pool2x2 || (OH >= 2 && OW >= 2), "conv2d_nhwc: a 2x2 pool needs an output of at least 2 x 2, got ",
               OH, " x ", OW);
  std::vector<float> acc(static_cast<std::size_t>(batch * OH * OW * K));
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t oh = 0; oh < OH; ++oh)
      for (std::int64_t ow = 0; ow < OW; ++ow)
        for (std::int64_t ko = 0; ko < K; ++ko) {
          float a = 0.0f;
          for (std::int64_t r = 0; r < s.R; ++r) {
            std::int64_t const ih = oh * s.stride_h - s.pad_h + r * s.dil_h;
            if (ih < 0 || ih >= s.H) continue;
            for (std::int64_t q = 0; q < s.S; ++q) {
              std::int64_t const iw = ow * s.stride_w - s.pad_w + q * s.dil_w;
              if (iw < 0 || iw >= s.W) continue;
              T const* xp = x_nhwc + ((b * s.H + ih) * s.W + iw) * s.C;
              T const* wp = w_gemm.data + ko * w_gemm.ld + (r * s.S + q) * s.C;
              for (std::int64_t c = 0; c < s.C; ++c) a += static_cast<float>(wp[c]) * static_cast<float>(xp[c]);
            }
          }
          if (!bias.empty()) a += bias[static_cast<std::size_t>(ko)];
          if (relu && a < 0.0f) a = 0.0f;
          acc[static_cast<std::size_t>(((b * OH + oh) * OW + ow) * K + ko)] = a;
        }
  if (!pool2x2) {
    std::vector<Out> y(acc.size());
    for (std::size_t i = 0; i < acc.size(); ++i) y[i] = value_cast<Out>(acc[i]);
    return y;
  }
  std::int64_t const PH = pooled_extent(static_cast<int>(OH)), PW = pooled_extent(static_cast<int>(OW));
  std::vector<Out> y(static_cast<std::size_t>(batch * PH * PW * K));
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t ph = 0; ph < PH; ++ph)
      for (std::int64_t pw = 0; pw < PW; ++pw)
        for (std::int64_t ko = 0; ko < K; ++ko) {
          auto at = [&](std::int64_t oh, std::int64_t ow) {
            return acc[static_cast<std::size_t>(((b * OH + oh) * OW + ow) * K + ko)];
          };
          float const m = std::max(std::max(at(2 * ph, 2 * pw), at(2 * ph, 2 * pw + 1)),
                                   std::max(at(2 * ph + 1, 2 * pw), at(2 * ph + 1, 2 * pw + 1)));
          y[static_cast<std::size_t>(((b * PH + ph) * PW + pw) * K + ko)] = value_cast<Out>(m);
        }
  return y;
}

}  // namespace sdnn::conv::reference
