// sdnn/formats/quantized.hpp - quantized value encodings of CSR weights (host containers and the
// host conversions to and from float CSR). quantized_csr<Encoding> keeps the float CSR's
// row_ptr/col_idx and stores each value as an int8 with a scale (and zero point) per layer or per
// output channel (int8_encoding), or as a 4-bit index into a 16-entry half-precision codebook per
// layer (codebook4_encoding). decode(p) gives the float a stored value stands for; dequantize()
// builds the float CSR of decoded values, so a product that decodes on the fly equals the product
// of dequantize(q) bit for bit when both sum in the same order (linear/op/quantized_spmm.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "sdnn/core/config.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/formats/csr.hpp"

namespace sdnn {

// ---- half precision on the host --------------------------------------------------------------
// float_to_half_bits / half_bits_to_float: IEEE binary16, round to nearest even, plain C++ (no
// CUDA headers); bit-compatible with __half.

SDNN_HOST_DEVICE inline std::uint16_t float_to_half_bits(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  std::uint16_t const sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  std::uint32_t const ax = x & 0x7FFFFFFFu;
  if (ax >= 0x7F800000u) return static_cast<std::uint16_t>(sign | (ax > 0x7F800000u ? 0x7E00u : 0x7C00u));
  if (ax >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520: infinity
  if (ax < 0x38800000u) {  // below 2^-14: a subnormal half (or zero), units of 2^-24
    float af;
    std::memcpy(&af, &ax, sizeof af);
    float const scaled = af * 16777216.0f;  // exact (power of two)
    auto u = static_cast<std::uint32_t>(scaled);
    float const rest = scaled - static_cast<float>(u);
    if (rest > 0.5f || (rest == 0.5f && (u & 1u))) ++u;  // to nearest even; 1024 = the smallest normal
    return static_cast<std::uint16_t>(sign | u);
  }
  std::uint32_t const mant = ax & 0x7FFFFFu;
  std::uint32_t const exp = (ax >> 23) - 127u + 15u;
  std::uint32_t h = (exp << 10) | (mant >> 13);
  std::uint32_t const rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry rolls into the exponent
  return static_cast<std::uint16_t>(sign | h);
}

SDNN_HOST_DEVICE inline float half_bits_to_float(std::uint16_t h) {
  std::uint32_t const sign = std::uint32_t(h & 0x8000u) << 16;
  std::uint32_t const exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  std::uint32_t x;
  if (exp == 0x1Fu) {
    x = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    x = sign | ((exp - 15u + 127u) << 23) | (mant << 13);
  } else {
    float const v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24, exact
    std::memcpy(&x, &v, sizeof x);
    x |= sign;
  }
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

// float -> half -> float.
inline float round_to_half(float f) { return half_bits_to_float(float_to_half_bits(f)); }

// ---- encodings --------------------------------------------------------------------------------

enum class quant_granularity { per_layer, per_channel };  // channel = output column j of W (in x out)
enum class int8_clip { none, percentile, mse };           // how the clip range is chosen (int8_clip_range)

struct int8_options {
  quant_granularity granularity = quant_granularity::per_layer;
  bool symmetric = true;
  int8_clip clip = int8_clip::none;
  double percentile = 0.999;  // int8_clip::percentile: share of the values inside the range
};

struct int8_encoding {
  quant_granularity granularity = quant_granularity::per_layer;
  bool symmetric = true;
  std::vector<std::int8_t> q;        // [nnz]
  std::vector<float> scale;          // [1] or [cols]
  std::vector<std::int32_t> zero;    // [1] or [cols]; 0 when symmetric
  std::vector<float> clip_lo, clip_hi;  // the clip range chosen per group (for reports and tests)

  std::size_t group(std::int64_t col) const {
    return granularity == quant_granularity::per_layer ? 0 : static_cast<std::size_t>(col);
  }
  float decode(std::int64_t p, std::int64_t col) const {
    std::size_t const g = group(col);
    return scale[g] * static_cast<float>(static_cast<std::int32_t>(q[static_cast<std::size_t>(p)]) - zero[g]);
  }
  std::size_t value_bytes() const { return q.size(); }
  std::size_t param_bytes() const { return scale.size() * sizeof(float) + (symmetric ? 0 : zero.size() * sizeof(std::int32_t)); }
};

struct codebook4_options {
  int max_iter = 100;
};

// The 16 centroids of a codebook4_encoding: half bits and a power-of-two exponent, centroid c =
// half(bits[c]) * 2^exp. exp is 0 unless a centroid is beyond the half range (quantize_codebook4);
// it travels with the bits wherever the codebook is copied.
struct half_codebook : std::array<std::uint16_t, 16> {
  std::int32_t exp = 0;
};

struct codebook4_encoding {
  half_codebook codebook{};                  // half bits (and the exponent)
  std::vector<std::uint8_t> packed;          // [(nnz + 1) / 2]; entry p: byte p/2, low nibble if p even
  std::vector<double> kmeans_sse;            // SSE after each Lloyd iteration (float centroids)
  int kmeans_iterations = 0;

  unsigned index(std::int64_t p) const {
    std::uint8_t const b = packed[static_cast<std::size_t>(p >> 1)];
    return (p & 1) ? (b >> 4) : (b & 0x0Fu);
  }
  float centroid(unsigned c) const {
    float const h = half_bits_to_float(codebook[c]);
    return codebook.exp == 0 ? h : std::ldexp(h, codebook.exp);  // exact: a power of two
  }
  float decode(std::int64_t p, std::int64_t /*col*/) const { return centroid(index(p)); }
  std::size_t value_bytes() const { return packed.size(); }
  std::size_t param_bytes() const { return codebook.size() * sizeof(std::uint16_t); }  // the 16 halves
};

// A CSR whose values are stored through an encoding; indices as csr_matrix<., int32_t>.
template <class Encoding>
struct quantized_csr {
  std::int32_t rows = 0, cols = 0;
  std::vector<std::int32_t> row_ptr{0};  // [rows + 1]
  std::vector<std::int32_t> col_idx;     // [nnz]
  Encoding enc;

  std::int32_t nnz() const { return static_cast<std::int32_t>(col_idx.size()); }
  float decode(std::int64_t p) const { return enc.decode(p, col_idx[static_cast<std::size_t>(p)]); }
};

// ---- footprint --------------------------------------------------------------------------------

// Bytes of weight memory: indices (row_ptr + col_idx), values, and parameters (scales, zero
// points, codebook).
struct weight_footprint {
  std::size_t index_bytes = 0, value_bytes = 0, param_bytes = 0;
  std::size_t total() const { return index_bytes + value_bytes + param_bytes; }
};

template <class T, class Index>
weight_footprint footprint(csr_matrix<T, Index> const& w) {
  return {(w.row_ptr().size() + w.col_idx().size()) * sizeof(Index), w.values().size() * sizeof(T), 0};
}
template <class Encoding>
weight_footprint footprint(quantized_csr<Encoding> const& w) {
  return {(w.row_ptr.size() + w.col_idx.size()) * sizeof(std::int32_t), w.enc.value_bytes(), w.enc.param_bytes()};
}
// A dense rows x cols float matrix, for comparison.
inline weight_footprint dense_footprint(std::int64_t rows, std::int64_t cols, std::size_t value_size = sizeof(float)) {
  return {0, static_cast<std::size_t>(rows * cols) * value_size, 0};
}

// ---- conversions ------------------------------------------------------------------------------

namespace detail {
template <class Encoding>
quantized_csr<Encoding> copy_pattern(csr_matrix<float, std::int32_t> const& w) {
  quantized_csr<Encoding> q;
  q.rows = w.rows();
  q.cols = w.cols();
  q.row_ptr.assign(w.row_ptr().begin(), w.row_ptr().end());
  q.col_idx.assign(w.col_idx().begin(), w.col_idx().end());
  return q;
}

// The quantization parameters of one group for a clip range [lo, hi] (lo <= 0 <= hi).
struct int8_params {
  float scale = 1.0f;
  std::int32_t zero = 0;
};
// Extreme finite ranges: a scale that would round to 0 (|lo|, |hi| near the smallest
// subnormal) is the smallest positive float instead; a scale whose largest code would decode
// past the float range (|lo| or |hi| near FLT_MAX) is lowered until scale * code is finite.
inline int8_params int8_params_for(double lo, double hi, bool symmetric) {
  int8_params p;
  if (symmetric) {
    double const t = std::max(std::fabs(lo), std::fabs(hi));
    p.scale = t > 0 ? static_cast<float>(t / 127.0) : 1.0f;
  } else {
    lo = std::min(lo, 0.0);
    hi = std::max(hi, 0.0);
    p.scale = hi > lo ? static_cast<float>((hi - lo) / 255.0) : 1.0f;
  }
  if (p.scale == 0.0f) p.scale = std::numeric_limits<float>::denorm_min();
  if (!symmetric) {
    p.zero = static_cast<std::int32_t>(std::lround(-lo / double(p.scale))) - 128;
    p.zero = std::clamp<std::int32_t>(p.zero, -128, 127);
  }
  // The largest |q - zero| of a code q in [-128, 127] ([-127, 127] symmetric).
  float const m = symmetric ? 127.0f : static_cast<float>(std::max(127 - p.zero, 128 + p.zero));
  if (std::isinf(p.scale * m)) {
    p.scale = static_cast<float>(double(std::numeric_limits<float>::max()) / m);
    while (std::isinf(p.scale * m)) p.scale = std::nextafter(p.scale, 0.0f);
  }
  return p;
}
inline std::int8_t int8_quantize(float w, int8_params const& p, bool symmetric) {
  long const lo = symmetric ? -127 : -128;
  // Bounded before rounding so that lround never overflows; any bound beyond +-383 clamps alike.
  long const v = std::lround(std::clamp(double(w) / double(p.scale), -1e9, 1e9)) + p.zero;
  return static_cast<std::int8_t>(std::clamp<long>(v, lo, 127));
}
inline float int8_dequantize(std::int8_t q, int8_params const& p) {
  return p.scale * static_cast<float>(static_cast<std::int32_t>(q) - p.zero);
}

// Refuses a value of w that is not finite (NaN, +-Inf: no code stands for it), naming its row,
// column, storage position and value. `what` opens the message.
inline void check_finite_values(csr_matrix<float, std::int32_t> const& w, char const* what) {
  for (std::int32_t p = 0; p < w.nnz(); ++p) {
    float const x = w.values()[p];
    if (std::isfinite(x)) continue;
    auto const& rp = w.row_ptr();
    auto const row = std::upper_bound(rp.begin(), rp.end(), p) - rp.begin() - 1;
    SDNN_FAIL(what, ": entry ", p, " (row ", row, ", column ", w.col_idx()[p], ") is ", x,
              "; only finite weights can be quantized");
  }
}

// The clip range [lo, hi] of one group of values (layer or channel), from a 2048-bin histogram
// of the group's values, by o.clip:
//   none:       the full range (max |w|, or [min, max]);
//   percentile: symmetric: the smallest bin edge with >= `percentile` of |w| at or below it;
//               asymmetric: the (1-p)/2 and (1+p)/2 quantiles of w (bin edges);
//   mse:        64 candidates (the full range scaled by k/64, k = 1..64, both ends together
//               when asymmetric); each candidate quantizes and dequantizes every bin's centre,
//               its error weighted by the bin's count; the smallest estimated MSE wins (ties:
//               the wider range). Not KL: for weights MSE is the criterion that matters.
inline std::pair<double, double> int8_clip_range(std::vector<float> const& v, int8_options const& o) {
  if (v.empty()) return {0.0, 0.0};
  double mn = 0, mx = 0;  // the range always holds 0
  for (float x : v) {
    mn = std::min(mn, double(x));
    mx = std::max(mx, double(x));
  }
  double const amax = std::max(-mn, mx);
  if (o.clip == int8_clip::none || amax == 0.0) return o.symmetric ? std::pair{-amax, amax} : std::pair{mn, mx};
  constexpr int bins = 2048;
  // Histogram over [-amax, amax] (asymmetric) or of |w| over [0, amax] (symmetric).
  double const lo0 = o.symmetric ? 0.0 : -amax, width = (amax - lo0) / bins;
  std::vector<double> hist(bins, 0.0);
  for (float x : v) {
    double const a = o.symmetric ? std::fabs(double(x)) : double(x);
    int b = static_cast<int>((a - lo0) / width);
    hist[static_cast<std::size_t>(std::clamp(b, 0, bins - 1))] += 1.0;
  }
  double const n = double(v.size());
  if (o.clip == int8_clip::percentile) {
    SDNN_EXPECTS(o.percentile > 0.0 && o.percentile <= 1.0, "int8 quantization: percentile must be in (0, 1], got ",
                 o.percentile);
    auto edge_at = [&](double share) {  // the smallest bin edge with >= share of the mass below
      double c = 0;
      for (int b = 0; b < bins; ++b) {
        c += hist[static_cast<std::size_t>(b)];
        if (c >= share * n) return lo0 + (b + 1) * width;
      }
      return lo0 + bins * width;
    };
    if (o.symmetric) {
      double const t = edge_at(o.percentile);
      return {-t, t};
    }
    double const lo = std::min(0.0, std::max(mn, edge_at((1.0 - o.percentile) / 2) - width));
    double const hi = std::max(0.0, std::min(mx, edge_at((1.0 + o.percentile) / 2)));
    return {lo, hi};
  }
  // mse: candidates shrink the full range by k / 64.
  double best = std::numeric_limits<double>::infinity();
  std::pair<double, double> range{mn, mx};
  for (int k = 64; k >= 1; --k) {
    double const f = k / 64.0;
    double const lo = o.symmetric ? -amax * f : mn * f, hi = o.symmetric ? amax * f : mx * f;
    int8_params const p = int8_params_for(lo, hi, o.symmetric);
    double err = 0;
    for (int b = 0; b < bins; ++b) {
      double const c = hist[static_cast<std::size_t>(b)];
      if (c == 0) continue;
      float const x = static_cast<float>(lo0 + (b + 0.5) * width);
      double const d = double(x) - double(int8_dequantize(int8_quantize(x, p, o.symmetric), p));
      err += c * d * d;
    }
    if (err < best) {
      best = err;
      range = {lo, hi};
    }
  }
  return range;
}
}  // namespace detail

// int8 linear quantization of a float CSR ("fake-quant" convention), per group (layer or channel):
//   symmetric:  s = T / 127, z = 0, q = clamp(round(w / s), -127, 127), w' = s * q
//   asymmetric: [lo, hi] (always containing 0, so 0 stays exact), s = (hi - lo) / 255,
//               z = round(-lo / s) - 128, q = clamp(round(w / s) + z, -128, 127), w' = s * (q - z)
// Inside the clip range ([-T, T] or [lo, hi], detail::int8_clip_range) |w - w'| <= s / 2 (up to
// float rounding). A group of zeros (or an empty one) gets s = 1 (z = -128 asymmetric), so its
// zeros decode to 0. Ranges near the float limits keep s and every code's w' finite: s is
// lowered until s * 127 (asymmetric: s * max |q - z|) is finite, so a value at the end of such
// a range may clamp to the end code (within s instead of s / 2).
// Throws sdnn::error naming the entry (row, column, position, value) if w holds NaN or +-Inf.
inline quantized_csr<int8_encoding> quantize_int8(csr_matrix<float, std::int32_t> const& w, int8_options const& o = {}) {
  detail::check_finite_values(w, "quantize_int8");
  auto q = detail::copy_pattern<int8_encoding>(w);
  auto& e = q.enc;
  e.granularity = o.granularity;
  e.symmetric = o.symmetric;
  std::size_t const groups = o.granularity == quant_granularity::per_layer ? 1 : static_cast<std::size_t>(w.cols());
  std::vector<std::vector<float>> vals(groups);
  for (std::int32_t p = 0; p < w.nnz(); ++p) vals[e.group(w.col_idx()[p])].push_back(w.values()[p]);
  std::vector<detail::int8_params> params(groups);
  e.scale.resize(groups);
  e.zero.resize(groups);
  e.clip_lo.resize(groups);
  e.clip_hi.resize(groups);
  for (std::size_t g = 0; g < groups; ++g) {
    auto const [lo, hi] = detail::int8_clip_range(vals[g], o);
    params[g] = detail::int8_params_for(lo, hi, o.symmetric);
    e.scale[g] = params[g].scale;
    e.zero[g] = params[g].zero;
    e.clip_lo[g] = static_cast<float>(lo);
    e.clip_hi[g] = static_cast<float>(hi);
  }
  e.q.resize(static_cast<std::size_t>(w.nnz()));
  for (std::int32_t p = 0; p < w.nnz(); ++p)
    e.q[static_cast<std::size_t>(p)] = detail::int8_quantize(w.values()[p], params[e.group(w.col_idx()[p])], o.symmetric);
  return q;
}

namespace detail {
// Nearest of the 16 centroids (ties: the lower index).
inline unsigned nearest_centroid(float x, float const* c) {
  unsigned best = 0;
  double bd = std::fabs(double(x) - double(c[0]));
  for (unsigned k = 1; k < 16; ++k) {
    double const d = std::fabs(double(x) - double(c[k]));
    if (d < bd) {
      bd = d;
      best = k;
    }
  }
  return best;
}
}  // namespace detail

// 4-bit codebook quantization of a float CSR (non-linear, Deep Compression style): 1-D k-means
// (Lloyd) with 16 centroids over the layer's stored values, deterministic linear init (centroid c
// at min + (c + 0.5) * (max - min) / 16), nearest centroid with ties to the lower index, an empty
// cluster keeps its centroid; stops when no assignment changes or after max_iter. The centroids
// are then rounded to half and the values reassigned to their nearest half centroid, so every
// stored index names the nearest entry of the codebook actually stored. kmeans_sse records the
// sum of squared errors after each iteration (non-increasing: the Lloyd property).
// Centroids beyond the half range (|c| >= 65520, e.g. weights near +-3e38) are stored as
// half(c * 2^-exp) with the smallest exp >= 0 that keeps every one finite (codebook.exp; 0 for
// any layer whose centroids fit half); a centroid that would round past FLT_MAX takes the
// largest finite value of its sign instead. Small centroids then may round to 0.
// Throws sdnn::error naming the entry (row, column, position, value) if w holds NaN or +-Inf.
inline quantized_csr<codebook4_encoding> quantize_codebook4(csr_matrix<float, std::int32_t> const& w,
                                                             codebook4_options const& o = {}) {
  detail::check_finite_values(w, "quantize_codebook4");
  auto q = detail::copy_pattern<codebook4_encoding>(w);
  auto& e = q.enc;
  std::size_t const n = static_cast<std::size_t>(w.nnz());
  float const* v = w.values().data();
  std::array<float, 16> c{};
  if (n > 0) {
    float mn = v[0], mx = v[0];
    for (std::size_t p = 0; p < n; ++p) {
      mn = std::min(mn, v[p]);
      mx = std::max(mx, v[p]);
    }
    for (int k = 0; k < 16; ++k) c[k] = static_cast<float>(double(mn) + (k + 0.5) * (double(mx) - double(mn)) / 16.0);
  }
  std::vector<std::uint8_t> assign(n, 0xFF);
  for (int it = 0; it < o.max_iter && n > 0; ++it) {
    bool changed = false;
    for (std::size_t p = 0; p < n; ++p) {
      auto const a = static_cast<std::uint8_t>(detail::nearest_centroid(v[p], c.data()));
      changed |= a != assign[p];
      assign[p] = a;
    }
    if (!changed) break;
    std::array<double, 16> sum{};
    std::array<std::size_t, 16> cnt{};
    for (std::size_t p = 0; p < n; ++p) {
      sum[assign[p]] += v[p];
      ++cnt[assign[p]];
    }
    for (int k = 0; k < 16; ++k)
      if (cnt[k]) c[k] = static_cast<float>(sum[k] / double(cnt[k]));
    double sse = 0;
    for (std::size_t p = 0; p < n; ++p) {
      double const d = double(v[p]) - double(c[assign[p]]);
      sse += d * d;
    }
    e.kmeans_sse.push_back(sse);
    e.kmeans_iterations = it + 1;
  }
  auto const half_inf = [](std::uint16_t h) { return (h & 0x7FFFu) == 0x7C00u; };
  std::int32_t x = 0;  // the exponent: no centroid may round to a half infinity
  for (int k = 0; k < 16; ++k)
    while (half_inf(float_to_half_bits(std::ldexp(c[k], -x)))) ++x;
  e.codebook.exp = x;
  std::array<float, 16> ch{};
  for (int k = 0; k < 16; ++k) {
    e.codebook[k] = float_to_half_bits(x == 0 ? c[k] : std::ldexp(c[k], -x));
    while (std::isinf(e.centroid(static_cast<unsigned>(k)))) --e.codebook[k];  // one half step towards 0
    ch[k] = e.centroid(static_cast<unsigned>(k));
  }
  e.packed.assign((n + 1) / 2, 0);
  for (std::size_t p = 0; p < n; ++p) {
    unsigned const a = detail::nearest_centroid(v[p], ch.data());
    e.packed[p >> 1] |= static_cast<std::uint8_t>((p & 1) ? (a << 4) : a);
  }
  return q;
}

// The float CSR of the decoded values (same pattern).
template <class Encoding>
csr_matrix<float, std::int32_t> dequantize(quantized_csr<Encoding> const& q) {
  csr_matrix<float, std::int32_t> w(q.rows, q.cols, q.nnz());
  std::copy(q.row_ptr.begin(), q.row_ptr.end(), w.row_ptr().begin());
  std::copy(q.col_idx.begin(), q.col_idx.end(), w.col_idx().begin());
  for (std::int32_t p = 0; p < q.nnz(); ++p) w.values()[p] = q.decode(p);
  return w;
}

// A copy of w with every value rounded to half and back (the "half weights" of a model).
inline csr_matrix<float, std::int32_t> round_values_to_half(csr_matrix<float, std::int32_t> const& w) {
  csr_matrix<float, std::int32_t> r(w.rows(), w.cols(), w.nnz());
  std::copy(w.row_ptr().begin(), w.row_ptr().end(), r.row_ptr().begin());
  std::copy(w.col_idx().begin(), w.col_idx().end(), r.col_idx().begin());
  for (std::int32_t p = 0; p < w.nnz(); ++p) r.values()[p] = round_to_half(w.values()[p]);
  return r;
}

}  // namespace sdnn
