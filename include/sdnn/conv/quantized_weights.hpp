// sdnn/conv/quantized_weights.hpp - the uniform-nnz sparse convolution weights of
// conv/weights.hpp with their values stored through a quantized encoding of
// formats/quantized.hpp (int8 linear, per layer or per output channel, symmetric or
// asymmetric; or the 4-bit codebook with 16 half-precision centroids): the format, its
// quantizers and dequantize. An int8 "channel" is an OUTPUT channel; a convolution that decodes
// on the fly equals the float convolution of dequantize(q) bit for bit when both sum in the
// same order (docs/conv.md#quantized-weights).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/conv/shape.hpp"
#include "sdnn/conv/weights.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/quantized.hpp"

namespace sdnn::conv {

// Shape, nnz_per_channel and offsets exactly as sparse_conv_weights (row k = entries
// [k * nnz_per_channel, (k + 1) * nnz_per_channel), padded-map offsets); the value of entry e
// is enc.decode(e, k) with k = e / nnz_per_channel the output channel of the entry, so an int8
// "channel" (per_channel granularity) is an OUTPUT channel k and the codebook4 index of entry e
// is nibble e of enc.packed.
template <class Encoding>
struct quantized_conv_weights {
  conv_shape shape;
  std::int32_t nnz_per_channel = 0;
  std::vector<std::int32_t> offsets;  // [K * nnz_per_channel] as sparse_conv_weights::offsets
  Encoding enc;                       // values of the entries, in storage order

  std::int64_t nnz() const { return std::int64_t(shape.K) * nnz_per_channel; }
  std::int64_t channel_of(std::int64_t e) const { return nnz_per_channel > 0 ? e / nnz_per_channel : 0; }
  float decode(std::int64_t e) const { return enc.decode(e, channel_of(e)); }
};

// Checks the format's invariants: those of sparse_conv_weights (sizes, offsets at filter
// positions) and the encoding's array sizes (int8: nnz codes, 1 or K scales and zero points;
// codebook4: (nnz + 1) / 2 packed bytes).
template <class Encoding>
void validate(quantized_conv_weights<Encoding> const& w) {
  w.shape.check();
  SDNN_EXPECTS(w.nnz_per_channel >= 0 && w.nnz_per_channel <= w.shape.filter_size(),
               "quantized_conv_weights: nnz_per_channel must be in [0, ", w.shape.filter_size(), "], got ",
               w.nnz_per_channel);
  SDNN_EXPECTS(w.offsets.size() == static_cast<std::size_t>(w.nnz()), "quantized_conv_weights: expected ", w.nnz(),
               " offsets, got ", w.offsets.size());
  for (std::int64_t e = 0; e < w.nnz(); ++e) {
    std::int32_t const o = w.offsets[static_cast<std::size_t>(e)];
    detail::check_filter_offset(w.shape, e, o, "quantized_conv_weights");
    SDNN_EXPECTS(e % w.nnz_per_channel == 0 || w.offsets[static_cast<std::size_t>(e - 1)] < o,
                 "quantized_conv_weights: offsets must increase within a row, offsets[", e, "] = ", o);
  }
  if constexpr (std::is_same_v<Encoding, int8_encoding>) {
    std::size_t const groups =
        w.enc.granularity == quant_granularity::per_layer ? 1 : static_cast<std::size_t>(w.shape.K);
    SDNN_EXPECTS(w.enc.q.size() == static_cast<std::size_t>(w.nnz()), "quantized_conv_weights: expected ", w.nnz(),
                 " int8 codes, got ", w.enc.q.size());
    SDNN_EXPECTS(w.enc.scale.size() == groups && w.enc.zero.size() == groups, "quantized_conv_weights: expected ",
                 groups, " scales and zero points, got ", w.enc.scale.size(), " and ", w.enc.zero.size());
    for (std::size_t g = 0; g < groups; ++g)
      SDNN_EXPECTS(std::isfinite(w.enc.scale[g]) && w.enc.scale[g] > 0.0f && w.enc.zero[g] >= -128 &&
                       w.enc.zero[g] <= 127 && (!w.enc.symmetric || w.enc.zero[g] == 0),
                   "quantized_conv_weights: group ", g, " has scale ", w.enc.scale[g], " and zero point ",
                   w.enc.zero[g]);
  } else {
    static_assert(std::is_same_v<Encoding, codebook4_encoding>, "quantized_conv_weights: int8 or codebook4");
    SDNN_EXPECTS(w.enc.packed.size() == static_cast<std::size_t>((w.nnz() + 1) / 2),
                 "quantized_conv_weights: expected ", (w.nnz() + 1) / 2, " packed bytes, got ", w.enc.packed.size());
  }
}

namespace detail {
// The entries of w as a CSR the quantizers of formats/quantized.hpp accept, with the output
// channel as the column (their int8 group): one entry per row, row e = entry e, column k.
inline csr_matrix<float, std::int32_t> entries_by_channel(sparse_conv_weights<float> const& w) {
  validate(w);
  SDNN_EXPECTS(w.nnz() < (std::int64_t(1) << 31) - 1, "quantize: more than 2^31 - 2 entries (", w.nnz(), ")");
  auto const n = static_cast<std::int32_t>(w.nnz());
  for (std::int32_t e = 0; e < n; ++e) {
    float const v = w.values[static_cast<std::size_t>(e)];
    SDNN_EXPECTS(std::isfinite(v), "quantize: entry ", e, " (output channel ", e / w.nnz_per_channel,
                 ", offset ", w.offsets[static_cast<std::size_t>(e)], ") is ", v,
                 "; only finite weights can be quantized");
  }
  csr_matrix<float, std::int32_t> c(n, w.shape.K, n);
  for (std::int32_t e = 0; e < n; ++e) {
    c.row_ptr()[e + 1] = e + 1;
    c.col_idx()[e] = static_cast<std::int32_t>(e / w.nnz_per_channel);
    c.values()[e] = w.values[static_cast<std::size_t>(e)];
  }
  return c;
}
template <class Encoding>
quantized_conv_weights<Encoding> with_encoding(sparse_conv_weights<float> const& w, Encoding enc) {
  quantized_conv_weights<Encoding> q;
  q.shape = w.shape;
  q.nnz_per_channel = w.nnz_per_channel;
  q.offsets = w.offsets;
  q.enc = std::move(enc);
  return q;
}
}  // namespace detail

// int8 linear quantization of float conv weights; o.granularity per_channel = one scale (and
// zero point) per output channel. Rules as ::sdnn::quantize_int8. Throws sdnn::error on
// weights that fail validate() or on bad options.
// Both quantizers apply the CSR quantizers of formats/quantized.hpp (same rules, same options)
// to the entries in storage order, with output channel k as the group (entries_by_channel).
// Padding entries (value 0) are quantized like any other value: 0 stays exact for int8 (the
// clip range always holds 0), for codebook4 it is whatever centroid is nearest to 0.
// A NaN or +-Inf weight is refused (sdnn::error naming the entry, its output channel and offset).
inline quantized_conv_weights<int8_encoding> quantize_int8(sparse_conv_weights<float> const& w,
                                                           int8_options const& o = {}) {
  auto q = ::sdnn::quantize_int8(detail::entries_by_channel(w), o);
  return detail::with_encoding(w, std::move(q.enc));
}

// 4-bit codebook quantization (16 half centroids by k-means over all entries of the layer).
inline quantized_conv_weights<codebook4_encoding> quantize_codebook4(sparse_conv_weights<float> const& w,
                                                                     codebook4_options const& o = {}) {
  auto q = ::sdnn::quantize_codebook4(detail::entries_by_channel(w), o);
  return detail::with_encoding(w, std::move(q.enc));
}

// The float conv weights of the decoded values (same shape and offsets), so a convolution
// that decodes on the fly equals the float convolution of dequantize(q) bit for bit when both
// sum in the same order (conv/reference/quantized.hpp, conv/kernel/direct_sparse_quantized.cuh).
template <class Encoding>
sparse_conv_weights<float> dequantize(quantized_conv_weights<Encoding> const& q) {
  validate(q);
  sparse_conv_weights<float> w;
  w.shape = q.shape;
  w.nnz_per_channel = q.nnz_per_channel;
  w.offsets = q.offsets;
  w.values.resize(static_cast<std::size_t>(q.nnz()));
  for (std::int64_t e = 0; e < q.nnz(); ++e) w.values[static_cast<std::size_t>(e)] = q.decode(e);
  return w;
}

// Bytes of weight memory of the format (as footprint() of formats/quantized.hpp): the offsets
// (the row pointer is implicit), the values, the parameters.
template <class T>
weight_footprint footprint(sparse_conv_weights<T> const& w) {
  return {w.offsets.size() * sizeof(std::int32_t), w.values.size() * sizeof(T), 0};
}
template <class Encoding>
weight_footprint footprint(quantized_conv_weights<Encoding> const& w) {
  return {w.offsets.size() * sizeof(std::int32_t), w.enc.value_bytes(), w.enc.param_bytes()};
}

}  // namespace sdnn::conv
