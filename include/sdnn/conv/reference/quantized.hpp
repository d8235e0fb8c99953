// sdnn/conv/reference/quantized.hpp - the host reference of direct sparse convolution with
// quantized weights (conv/quantized_weights.hpp): decode every entry (dequantize), then the
// sparse conv_reference of conv/reference/convolution.hpp on the decoded weights, so the result is that
// reference on dequantize(w) bit for bit (same decode, same summation order: double sums over
// the entries of a channel in storage order, then bias, then ReLU).
#pragma once

#include <cstdint>
#include <vector>

#include "sdnn/conv/quantized_weights.hpp"
#include "sdnn/conv/reference/convolution.hpp"

namespace sdnn::conv {

// out (N x K x OH x OW, doubles) = relu?(conv(in, decode(w)) + bias); in: N x C x H x W.
template <class TI, class Encoding>
std::vector<double> conv_reference(quantized_conv_weights<Encoding> const& w, std::int64_t N, TI const* in,
                                   float const* bias = nullptr, bool relu = false) {
  return conv_reference(dequantize(w), N, in, bias, relu);
}

}  // namespace sdnn::conv
