// sdnn/conv/nhwc.hpp - the NHWC implicit-GEMM view of a convolution (host): activation layout
// conversions (NCHW <-> NHWC), the GEMM view of a K x C x R x S filter and back, the explicit
// im2col matrix the implicit GEMM stands for, and the extent check of the int32 index arithmetic
// a kernel does. The view, for an output of batch x OH x OW x K (NHWC):
//   Y[N x K] = X[N x RSC] Wg^T,  N = batch*OH*OW (row n = (b*OH + oh)*OW + ow),
//   reduction index k = (r*S + s)*C + c (channel fastest),  Wg[ko][(r*S + s)*C + c] = filter[ko][c][r][s],
//   X(n, k) = x[b][oh*stride_h - pad_h + r*dil_h][ow*stride_w - pad_w + s*dil_w][c], 0 outside the input.
// Wg is the KRSC (NHWC) filter layout cuDNN calls CUDNN_TENSOR_NHWC for filters.
#pragma once

#include <cstdint>
#include <vector>

#include "sdnn/conv/shape.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn::conv {

// Rows of the GEMM view (output pixels, batch*OH*OW) and its reduction length (R*S*C).
inline std::int64_t gemm_rows(conv_shape const& s, std::int64_t batch) { return batch * s.OH() * s.OW(); }
inline std::int64_t gemm_reduction(conv_shape const& s) { return std::int64_t(s.R) * s.S * s.C; }

// The extents of a 2x2, stride-2 max-pool of an e-long side (floor: an odd last row / column is dropped).
inline int pooled_extent(int e) { return e / 2; }

// Refuses (sdnn::error naming the numbers) a layer whose implicit GEMM a kernel with int32 index
// arithmetic cannot address: the output pixels batch*OH*OW (GEMM rows), the reduction R*S*C, the
// NHWC input batch*H*W*C and the NHWC output batch*OH*OW*K elements must each be <= INT32_MAX.
// (Products of a row or column index with a leading dimension are the kernel's to form in 64 bits
// where they can exceed that: e.g. n*K for n < N with N*K <= INT32_MAX cannot.) Also shape.check().
inline void check_implicit_gemm_extents(conv_shape const& s, std::int64_t batch) {
  s.check();
  SDNN_EXPECTS(batch >= 1, "conv implicit GEMM: batch must be >= 1, got ", batch);
  constexpr std::int64_t lim = INT32_MAX;
  std::int64_t const OH = s.OH(), OW = s.OW();
  // Each product is formed only after its factors are known to keep it below 2^62.
  auto fits = [&](std::int64_t a, std::int64_t b) { return a <= lim && b <= lim && a * b <= lim; };
  SDNN_EXPECTS(fits(batch, OH * OW), "conv implicit GEMM: batch*OH*OW = ", batch, "*", OH, "*", OW,
               " output pixels (GEMM rows) exceed INT32_MAX = ", lim);
  SDNN_EXPECTS(fits(std::int64_t(s.R) * s.S, s.C), "conv implicit GEMM: R*S*C = ", s.R, "*", s.S, "*", s.C,
               " (GEMM reduction) exceeds INT32_MAX = ", lim);
  std::int64_t const HW = std::int64_t(s.H) * s.W;  // <= C*Hp*Wp < 2^31 (shape.check)
  SDNN_EXPECTS(fits(batch, HW * s.C), "conv implicit GEMM: the NHWC input batch*H*W*C = ", batch, "*", s.H, "*", s.W,
               "*", s.C, " elements exceeds INT32_MAX = ", lim);
  SDNN_EXPECTS(fits(batch * OH * OW, s.K), "conv implicit GEMM: the NHWC output batch*OH*OW*K = ", batch, "*", OH,
               "*", OW, "*", s.K, " elements exceeds INT32_MAX = ", lim);
}

// NCHW [batch][C][H][W] -> NHWC [batch][H][W][C] (any element type).
template <class T>
std::vector<T> nchw_to_nhwc(T const* x, std::int64_t batch, std::int64_t C, std::int64_t H, std::int64_t W) {
  SDNN_EXPECTS(batch >= 0 && C >= 0 && H >= 0 && W >= 0, "nchw_to_nhwc: extents must be >= 0, got ", batch, " x ", C,
               " x ", H, " x ", W);
  std::vector<T> y(::sdnn::detail::checked_extent(batch * C, H * W, "nchw_to_nhwc"));
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t w = 0; w < W; ++w)
          y[static_cast<std::size_t>(((b * H + h) * W + w) * C + c)] = x[((b * C + c) * H + h) * W + w];
  return y;
}

// NHWC [batch][H][W][C] -> NCHW [batch][C][H][W].
template <class T>
std::vector<T> nhwc_to_nchw(T const* x, std::int64_t batch, std::int64_t C, std::int64_t H, std::int64_t W) {
  SDNN_EXPECTS(batch >= 0 && C >= 0 && H >= 0 && W >= 0, "nhwc_to_nchw: extents must be >= 0, got ", batch, " x ", C,
               " x ", H, " x ", W);
  std::vector<T> y(::sdnn::detail::checked_extent(batch * C, H * W, "nhwc_to_nchw"));
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t w = 0; w < W; ++w)
        for (std::int64_t c = 0; c < C; ++c)
          y[static_cast<std::size_t>(((b * C + c) * H + h) * W + w)] = x[((b * H + h) * W + w) * C + c];
  return y;
}

// The GEMM view Wg (K x R*S*C, row-major; = the KRSC filter) of a K x C x R x S filter, each
// value converted to T once (value_cast; TF = T copies bits).
template <class T, class TF>
dense_matrix<T> filter_to_gemm(conv_shape const& s, TF const* filter_kcrs) {
  s.check();
  std::int64_t const RSC = gemm_reduction(s);
  dense_matrix<T> wg(s.K, RSC);
  for (std::int64_t ko = 0; ko < s.K; ++ko)
    for (std::int64_t c = 0; c < s.C; ++c)
      for (std::int64_t r = 0; r < s.R; ++r)
        for (std::int64_t q = 0; q < s.S; ++q)
          wg(ko, (r * s.S + q) * s.C + c) = value_cast<T>(filter_kcrs[((ko * s.C + c) * s.R + r) * s.S + q]);
  return wg;
}

// Back: the K x C x R x S filter of a GEMM view (K x R*S*C).
template <class T>
std::vector<T> gemm_to_filter(conv_shape const& s, dense_view<T const> wg) {
  s.check();
  SDNN_EXPECTS_DIMS(wg.rows == s.K && wg.cols == gemm_reduction(s) && wg.ld >= wg.cols, "gemm_to_filter: the GEMM view is ",
                    wg.rows, " x ", wg.cols, " (ld ", wg.ld, "), the shape needs K x R*S*C = ", s.K, " x ",
                    gemm_reduction(s));
  std::vector<T> f(static_cast<std::size_t>(s.weight_count()));
  for (std::int64_t ko = 0; ko < s.K; ++ko)
    for (std::int64_t c = 0; c < s.C; ++c)
      for (std::int64_t r = 0; r < s.R; ++r)
        for (std::int64_t q = 0; q < s.S; ++q)
          f[static_cast<std::size_t>(((ko * s.C + c) * s.R + r) * s.S + q)] = wg(ko, (r * s.S + q) * s.C + c);
  return f;
}

// The explicit im2col matrix X (batch*OH*OW x R*S*C) of an NHWC input: what the implicit GEMM
// reads without materialising it (zeros where the window leaves the input). For tests and small layers.
template <class T>
dense_matrix<T> im2col_nhwc(conv_shape const& s, std::int64_t batch, T const* x_nhwc) {
  check_implicit_gemm_extents(s, batch);
  std::int64_t const OH = s.OH(), OW = s.OW(), RSC = gemm_reduction(s);
  dense_matrix<T> X(batch * OH * OW, RSC);
  T const zero = value_cast<T>(0.0f);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t oh = 0; oh < OH; ++oh)
      for (std::int64_t ow = 0; ow < OW; ++ow) {
        std::int64_t const n = (b * OH + oh) * OW + ow;
        for (std::int64_t r = 0; r < s.R; ++r)
          for (std::int64_t q = 0; q < s.S; ++q) {
            std::int64_t const ih = oh * s.stride_h - s.pad_h + r * s.dil_h, iw = ow * s.stride_w - s.pad_w + q * s.dil_w;
            bool const inside = ih >= 0 && ih < s.H && iw >= 0 && iw < s.W;
            for (std::int64_t c = 0; c < s.C; ++c)
              X(n, (r * s.S + q) * s.C + c) = inside ? x_nhwc[((b * s.H + ih) * s.W + iw) * s.C + c] : zero;
          }
      }
  return X;
}

}  // namespace sdnn::conv
