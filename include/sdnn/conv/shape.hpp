// sdnn/conv/shape.hpp - the geometry of one convolution layer (2-D or 1-D).
//
// Input NCHW (batch x C x H x W), weights K x C x R x S, output NKOHOW (batch x K x OH x OW):
//   OH = (H + 2*pad_h - dil_h*(R-1) - 1) / stride_h + 1      (likewise OW)
// A 1-D convolution (K x C x R weights over length L) is the 2-D one with H = 1, R = 1,
// pad_h = 0 and the 1-D kernel along the width (S = R_1d, W = L): see conv_shape::conv1d.
// The padded input map is Hp x Wp = (H + 2*pad_h) x (W + 2*pad_w) per channel.
#pragma once

#include <cstdint>

#include "sdnn/core/error.hpp"

namespace sdnn::conv {

struct conv_shape {
  int C = 1, H = 1, W = 1;  // input channels and spatial size
  int K = 1, R = 1, S = 1;  // output channels and kernel size
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  int dil_h = 1, dil_w = 1;

  static conv_shape conv2d(int C, int H, int W, int K, int R, int S, int stride = 1, int pad = 0, int dil = 1) {
    conv_shape s;
    s.C = C; s.H = H; s.W = W; s.K = K; s.R = R; s.S = S;
    s.stride_h = s.stride_w = stride;
    s.pad_h = s.pad_w = pad;
    s.dil_h = s.dil_w = dil;
    s.check();
    return s;
  }
  // 1-D: input C x L, kernel of width R (weights K x C x R), along the sequence.
  static conv_shape conv1d(int C, int L, int K, int R, int stride = 1, int pad = 0, int dil = 1) {
    conv_shape s;
    s.C = C; s.H = 1; s.W = L; s.K = K; s.R = 1; s.S = R;
    s.stride_w = stride; s.pad_w = pad; s.dil_w = dil;
    s.check();
    return s;
  }

  int OH() const { return (H + 2 * pad_h - dil_h * (R - 1) - 1) / stride_h + 1; }
  int OW() const { return (W + 2 * pad_w - dil_w * (S - 1) - 1) / stride_w + 1; }
  int Hp() const { return H + 2 * pad_h; }
  int Wp() const { return W + 2 * pad_w; }
  std::int64_t in_features() const { return std::int64_t(C) * H * W; }
  std::int64_t out_features() const { return std::int64_t(K) * OH() * OW(); }
  std::int64_t filter_size() const { return std::int64_t(C) * R * S; }  // entries per output channel
  std::int64_t weight_count() const { return std::int64_t(K) * filter_size(); }

  void check() const {
    SDNN_EXPECTS(C >= 1 && H >= 1 && W >= 1 && K >= 1 && R >= 1 && S >= 1,
                 "conv_shape: C, H, W, K, R, S must be >= 1, got C=", C, " H=", H, " W=", W, " K=", K, " R=", R,
                 " S=", S);
    SDNN_EXPECTS(stride_h >= 1 && stride_w >= 1 && dil_h >= 1 && dil_w >= 1 && pad_h >= 0 && pad_w >= 0,
                 "conv_shape: stride and dilation must be >= 1 and padding >= 0, got stride ", stride_h, "x",
                 stride_w, ", dilation ", dil_h, "x", dil_w, ", padding ", pad_h, "x", pad_w);
    // In 64 bits: every int member may be near INT_MAX here (the int accessors above are used
    // only after this check, which bounds C * Hp * Wp, hence each of them, below 2^31).
    std::int64_t const hp = std::int64_t(H) + 2 * std::int64_t(pad_h), wp = std::int64_t(W) + 2 * std::int64_t(pad_w);
    std::int64_t const kh = std::int64_t(dil_h) * (R - 1) + 1, kw = std::int64_t(dil_w) * (S - 1) + 1;
    SDNN_EXPECTS(hp >= kh && wp >= kw, "conv_shape: the dilated kernel (", kh, " x ", kw,
                 ") is larger than the padded input (", hp, " x ", wp, ")");
    SDNN_EXPECTS(hp < (std::int64_t(1) << 31) && wp < (std::int64_t(1) << 31) &&
                     std::int64_t(C) * hp < (std::int64_t(1) << 31) &&
                     std::int64_t(C) * hp * wp < (std::int64_t(1) << 31),
                 "conv_shape: C*Hp*Wp must fit int32 offsets, got ", C, " x ", hp, " x ", wp);
  }
};

inline bool operator==(conv_shape const& a, conv_shape const& b) {
  return a.C == b.C && a.H == b.H && a.W == b.W && a.K == b.K && a.R == b.R && a.S == b.S &&
         a.stride_h == b.stride_h && a.stride_w == b.stride_w && a.pad_h == b.pad_h && a.pad_w == b.pad_w &&
         a.dil_h == b.dil_h && a.dil_w == b.dil_w;
}

}  // namespace sdnn::conv
