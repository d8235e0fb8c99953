// sdnn/train/reference/conv_training.hpp - host oracle of train/kernel/conv_training.cuh: the
// adjoint of im2col (col2im) and the 2x2 max-pool's backward, in the device's summation order,
// so the kernels match bit for bit. (im2col itself: conv::im2col_nhwc in conv/nhwc.hpp.)
#pragma once

#include <cstdint>
#include <vector>

#include "sdnn/conv/shape.hpp"
#include "sdnn/core/numeric.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/train/mixed_precision.hpp"

namespace sdnn::train::reference {

// dx (batch x H x W x C) from dcol (batch*OH*OW x R*S*C): per input element the float sum over
// the taps that read it, r then s ascending.
inline std::vector<float> col2im_nhwc(std::vector<float> const& dcol, conv::conv_shape const& s, std::int64_t batch) {
  int const OH = s.OH(), OW = s.OW();
  std::int64_t const K = s.filter_size();
  std::vector<float> dx(static_cast<std::size_t>(batch * s.H * s.W * s.C));
  for (std::int64_t b = 0; b < batch; ++b)
    for (int h = 0; h < s.H; ++h)
      for (int w = 0; w < s.W; ++w)
        for (int c = 0; c < s.C; ++c) {
          float acc = 0.0f;
          for (int r = 0; r < s.R; ++r)
            for (int q = 0; q < s.S; ++q) {
              int const th = h + s.pad_h - r * s.dil_h, tw = w + s.pad_w - q * s.dil_w;
              if (th < 0 || tw < 0 || th % s.stride_h || tw % s.stride_w) continue;
              int const oh = th / s.stride_h, ow = tw / s.stride_w;
              if (oh >= OH || ow >= OW) continue;
              acc = add_rn(acc, dcol[static_cast<std::size_t>(((b * OH + oh) * OW + ow) * K + (r * s.S + q) * s.C + c)]);
            }
          dx[static_cast<std::size_t>(((b * s.H + h) * s.W + w) * s.C + c)] = acc;
        }
  return dx;
}

// dy (batch x H x W x K) from dout (batch x H/2 x W/2 x K): the gradient goes to the first
// position of each window, in the order (0,0), (0,1), (1,0), (1,1), holding its maximum.
template <class T>
std::vector<float> max_pool2x2_backward(std::vector<T> const& y, std::vector<float> const& dout, std::int64_t batch,
                                        int H, int W, int K) {
  int const PH = H / 2, PW = W / 2;
  std::vector<float> dy(static_cast<std::size_t>(batch * H * W * K), 0.0f);
  auto at = [&](std::int64_t b, int h, int w, int k) { return static_cast<std::size_t>(((b * H + h) * W + w) * K + k); };
  for (std::int64_t b = 0; b < batch; ++b)
    for (int ph = 0; ph < PH; ++ph)
      for (int pw = 0; pw < PW; ++pw)
        for (int k = 0; k < K; ++k) {
          std::size_t const pos[4] = {at(b, 2 * ph, 2 * pw, k), at(b, 2 * ph, 2 * pw + 1, k),
                                      at(b, 2 * ph + 1, 2 * pw, k), at(b, 2 * ph + 1, 2 * pw + 1, k)};
          int first = 0;
          for (int i = 1; i < 4; ++i)
            if (value_cast<float>(y[pos[i]]) > value_cast<float>(y[pos[first]])) first = i;
          dy[pos[first]] = dout[static_cast<std::size_t>(((b * PH + ph) * PW + pw) * K + k)];
        }
  return dy;
}

}  // namespace sdnn::train::reference
