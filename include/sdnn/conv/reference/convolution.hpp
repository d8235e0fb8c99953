// sdnn/conv/reference/convolution.hpp - plain host direct convolution (the oracle), double accumulation.
//
//   out[n][k][oy][ox] = act( bias[k] + sum_{c,r,s} w[k][c][r][s] *
//                            in[n][c][oy*stride_h - pad_h + r*dil_h][ox*stride_w - pad_w + s*dil_w] )
// with out-of-range input reading 0 and act = ReLU when relu is set. Input NCHW [N*C*H*W],
// weights KCRS [K*C*R*S], output NKOHOW [N*K*OH*OW]. T/TW may be float, double or __half
// (converted through value_cast).
#pragma once

#include <cstdint>
#include <vector>

#include "sdnn/conv/shape.hpp"
#include "sdnn/conv/weights.hpp"
#include "sdnn/core/types.hpp"

namespace sdnn::conv {

// Dense weights.
template <class TI, class TW>
std::vector<double> conv_reference(conv_shape const& sh, std::int64_t N, TI const* in, TW const* w,
                                   float const* bias = nullptr, bool relu = false) {
  sh.check();
  int const OH = sh.OH(), OW = sh.OW();
  std::vector<double> out(static_cast<std::size_t>(N * sh.out_features()), 0.0);
  for (std::int64_t n = 0; n < N; ++n)
    for (int k = 0; k < sh.K; ++k)
      for (int oy = 0; oy < OH; ++oy)
        for (int ox = 0; ox < OW; ++ox) {
          double acc = 0;
          for (int c = 0; c < sh.C; ++c)
            for (int r = 0; r < sh.R; ++r) {
              int const iy = oy * sh.stride_h - sh.pad_h + r * sh.dil_h;
              if (iy < 0 || iy >= sh.H) continue;
              for (int s = 0; s < sh.S; ++s) {
                int const ix = ox * sh.stride_w - sh.pad_w + s * sh.dil_w;
                if (ix < 0 || ix >= sh.W) continue;
                acc += value_cast<double>(w[((std::int64_t(k) * sh.C + c) * sh.R + r) * sh.S + s]) *
                       value_cast<double>(in[((n * sh.C + c) * sh.H + iy) * sh.W + ix]);
              }
            }
          if (bias) acc += bias[k];
          if (relu && acc < 0) acc = 0;
          out[static_cast<std::size_t>(((n * sh.K + k) * OH + oy) * OW + ox)] = acc;
        }
  return out;
}

// Copies NCHW input into the zero-padded map [N][C][Hp][Wp] the offsets address.
template <class TI>
std::vector<double> pad_input(conv_shape const& sh, std::int64_t N, TI const* in) {
  int const Hp = sh.Hp(), Wp = sh.Wp();
  std::vector<double> p(static_cast<std::size_t>(N * sh.C * Hp * Wp), 0.0);
  for (std::int64_t n = 0; n < N; ++n)
    for (int c = 0; c < sh.C; ++c)
      for (int y = 0; y < sh.H; ++y)
        for (int x = 0; x < sh.W; ++x)
          p[static_cast<std::size_t>(((n * sh.C + c) * Hp + y + sh.pad_h) * Wp + x + sh.pad_w)] =
              value_cast<double>(in[((n * sh.C + c) * sh.H + y) * sh.W + x]);
  return p;
}

// Sparse weights in the padded-offset format: evaluates exactly what the format says
// (out = sum_e values[e] * in_padded[offset[e] + oy*stride_h*Wp + ox*stride_w]).
template <class TI, class T>
std::vector<double> conv_reference(sparse_conv_weights<T> const& w, std::int64_t N, TI const* in,
                                   float const* bias = nullptr, bool relu = false) {
  validate(w);  // every offset a filter position, so base + offset stays inside the padded map
  conv_shape const& sh = w.shape;
  int const OH = sh.OH(), OW = sh.OW(), Hp = sh.Hp(), Wp = sh.Wp();
  std::vector<double> const p = pad_input(sh, N, in);
  std::vector<double> out(static_cast<std::size_t>(N * sh.out_features()), 0.0);
  std::int64_t const img = std::int64_t(sh.C) * Hp * Wp;
  for (std::int64_t n = 0; n < N; ++n)
    for (int k = 0; k < sh.K; ++k)
      for (int oy = 0; oy < OH; ++oy)
        for (int ox = 0; ox < OW; ++ox) {
          std::int64_t const base = n * img + std::int64_t(oy) * sh.stride_h * Wp + std::int64_t(ox) * sh.stride_w;
          double acc = 0;
          for (std::int64_t e = std::int64_t(k) * w.nnz_per_channel; e < std::int64_t(k + 1) * w.nnz_per_channel; ++e)
            acc += value_cast<double>(w.values[static_cast<std::size_t>(e)]) *
                   p[static_cast<std::size_t>(base + w.offsets[static_cast<std::size_t>(e)])];
          if (bias) acc += bias[k];
          if (relu && acc < 0) acc = 0;
          out[static_cast<std::size_t>(((n * sh.K + k) * OH + oy) * OW + ox)] = acc;
        }
  return out;
}

}  // namespace sdnn::conv
