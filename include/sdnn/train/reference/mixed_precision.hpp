// sdnn/train/reference/mixed_precision.hpp - host references of the mixed-precision layer kernels
// (train/kernel/mixed_precision.cuh): the forward bias + activation, the activation backward with
// the bias gradient, and the block weight gradient. The step rules they share with the device are
// in train/mixed_precision.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/core/numeric.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/train/mixed_precision.hpp"

namespace sdnn::train::reference {


// y(r, j) = Out(act(p(r, j) + bias[j])) (bias may be nullptr; relu: max(0, .), a NaN stays NaN so
// that a broken model shows in its loss).
template <class Out>
void bias_act_forward(dense_view<float const> p, float const* bias, bool relu, dense_view<Out> y) {
  SDNN_EXPECTS_DIMS(p.rows == y.rows && p.cols == y.cols, "bias_act_forward: P is ", p.rows, " x ", p.cols,
                    " but Y is ", y.rows, " x ", y.cols);
  for (std::int64_t r = 0; r < p.rows; ++r)
    for (std::int64_t j = 0; j < p.cols; ++j) {
      float a = p(r, j);
      if (bias) a = add_rn(a, bias[j]);
      if (relu && a <= 0.0f) a = 0.0f;
      y(r, j) = value_cast<Out>(a);
    }
}

// g = dy(r, j) * scale (scale nullptr: 1), zero where y (the stored activation; nullptr: none)
// is not > 0; dp(r, j) = T(g); dbias[j] = the float sum of g: per chunk of 256 rows ascending,
// then the chunks' sums in order (the device kernel's order).
template <class Y, class T>
void act_backward(dense_view<float const> dy, Y const* y, std::int64_t ldy, float const* scale, dense_view<T> dp,
                  float* dbias) {
  SDNN_EXPECTS_DIMS(dp.rows == dy.rows && dp.cols == dy.cols, "act_backward: dY is ", dy.rows, " x ", dy.cols,
                    " but dP is ", dp.rows, " x ", dp.cols);
  constexpr std::int64_t chunk = 256;
  for (std::int64_t j = 0; j < dy.cols; ++j) {
    float total = 0.0f;
    for (std::int64_t r0 = 0; r0 < dy.rows; r0 += chunk) {
      float sum = 0.0f;
      for (std::int64_t r = r0; r < std::min(dy.rows, r0 + chunk); ++r) {
        float g = scale ? mul_rn(dy(r, j), *scale) : dy(r, j);
        if (y && !(value_cast<float>(y[r * ldy + j]) > 0.0f)) g = 0.0f;
        dp(r, j) = value_cast<T>(g);
        sum = add_rn(sum, g);
      }
      total = r0 == 0 ? sum : add_rn(total, sum);
    }
    if (dbias) dbias[j] = total;
  }
}

// The weight gradient of Y = X W^T on the kept br x bc blocks: dW(o, i) = sum_r dP(r, o) X(r, i)
// (in double, the exact products of the 16-bit inputs) for every (o, i) in a block listed in
// `blocks` (block_row * block_cols + block_col); other entries of dw are left as they are.
template <class T>
void block_weight_grad(dense_view<T const> x, dense_view<T const> dp, std::vector<std::int32_t> const& blocks,
                       std::int32_t br, std::int32_t bc, dense_view<double> dw) {
  std::int32_t const block_cols = static_cast<std::int32_t>((dw.cols + bc - 1) / bc);
  for (std::int32_t b : blocks) {
    std::int64_t const o0 = std::int64_t(b / block_cols) * br, i0 = std::int64_t(b % block_cols) * bc;
    for (std::int64_t o = o0; o < o0 + br && o < dw.rows; ++o)
      for (std::int64_t i = i0; i < i0 + bc && i < dw.cols; ++i) {
        double s = 0.0;
        for (std::int64_t r = 0; r < x.rows; ++r) s += value_cast<double>(dp(r, o)) * value_cast<double>(x(r, i));
        dw(o, i) = s;
      }
  }
}

}  // namespace sdnn::train::reference
