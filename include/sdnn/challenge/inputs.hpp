// sdnn/challenge/inputs.hpp - Graph-Challenge-like input images from MNIST digits (host):
// challenge_inputs_from_mnist resizes each digit from 28 x 28 to sqrt(N) x sqrt(N) (MATLAB-style
// bicubic), thresholds it to 0/1 and flattens it column-major into a row of a count x N CSR. The
// exact official resize recipe is unknown; this one matches about 99.3% of the official pixels
// at a threshold near 0.7 (docs/challenge.md#inputs).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/io/mnist_idx.hpp"

namespace sdnn::data {

namespace detail {

// Keys' cubic convolution kernel with a = -0.5 (MATLAB imresize 'bicubic'). The resize: output
// sample x maps to input u = (x + 0.5) / scale - 0.5, symmetric-mirror borders, weights
// normalised to sum 1, rows resized first, then columns, in double precision, no intermediate
// rounding.
inline double cubic_kernel(double x) {
  double const ax = std::fabs(x), ax2 = ax * ax, ax3 = ax2 * ax;
  if (ax <= 1) return 1.5 * ax3 - 2.5 * ax2 + 1;
  if (ax <= 2) return -0.5 * ax3 + 2.5 * ax2 - 4 * ax + 2;
  return 0;
}

// Resampling weights from in_len to out_len samples: for output o, weight[o][t] applies to
// input index[o][t] (t < taps), borders mirrored symmetrically.
struct resample_weights {
  int taps = 0;
  std::vector<int> index;      // [out_len * taps]
  std::vector<double> weight;  // [out_len * taps]
};

inline resample_weights bicubic_weights(int in_len, int out_len) {
  double const scale = double(out_len) / double(in_len);
  resample_weights r;
  // imresize takes ceil(4) + 2 = 6 taps from floor(u - 2) and drops those of weight 0; when
  // upscaling (no kernel stretching) only the 4 taps floor(u) - 1 .. floor(u) + 2 can be
  // nonzero (|u - j| < 2), so those are the taps used. Downscaling needs antialiasing,
  // which this generator does not do: it requires out_len >= in_len.
  SDNN_EXPECTS(out_len >= in_len, "bicubic_weights: only upscaling is supported (", in_len, " -> ", out_len, ")");
  r.taps = 4;
  r.index.resize(std::size_t(out_len) * r.taps);
  r.weight.resize(std::size_t(out_len) * r.taps);
  for (int o = 0; o < out_len; ++o) {
    double const u = (o + 0.5) / scale - 0.5;  // 0-based input coordinate of output sample o
    int const left = static_cast<int>(std::floor(u)) - 1;
    double sum = 0;
    for (int t = 0; t < r.taps; ++t) {
      int const j = left + t;
      double const w = cubic_kernel(u - j);
      // Symmetric mirror: ... 1 0 | 0 1 ... n-1 | n-1 n-2 ...
      int m = j;
      int const period = 2 * in_len;
      m = ((m % period) + period) % period;
      if (m >= in_len) m = period - 1 - m;
      r.index[std::size_t(o) * r.taps + t] = m;
      r.weight[std::size_t(o) * r.taps + t] = w;
      sum += w;
    }
    for (int t = 0; t < r.taps; ++t) r.weight[std::size_t(o) * r.taps + t] /= sum;
  }
  return r;
}

}  // namespace detail

// Resizes one rows x cols uint8 image to s x s (values still on the 0..255 scale, unclamped).
// out is row-major: out[y * s + x].
inline std::vector<double> bicubic_resize(std::uint8_t const* img, int rows, int cols, int s) {
  auto const wr = detail::bicubic_weights(rows, s);
  auto const wc = detail::bicubic_weights(cols, s);
  std::vector<double> tmp(std::size_t(s) * cols, 0.0);  // rows resized: s x cols
  for (int y = 0; y < s; ++y)
    for (int c = 0; c < cols; ++c) {
      double v = 0;
      for (int t = 0; t < wr.taps; ++t)
        v += wr.weight[std::size_t(y) * wr.taps + t] * img[std::size_t(wr.index[std::size_t(y) * wr.taps + t]) * cols + c];
      tmp[std::size_t(y) * cols + c] = v;
    }
  std::vector<double> out(std::size_t(s) * s, 0.0);
  for (int y = 0; y < s; ++y)
    for (int x = 0; x < s; ++x) {
      double v = 0;
      for (int t = 0; t < wc.taps; ++t)
        v += wc.weight[std::size_t(x) * wc.taps + t] * tmp[std::size_t(y) * cols + wc.index[std::size_t(x) * wc.taps + t]];
      out[std::size_t(y) * s + x] = v;
    }
  return out;
}

namespace detail {
// sqrt(N), checking that N is a perfect square and that `mnist` holds what it says; `who` names
// the caller in the messages.
inline std::int32_t challenge_image_side(io::idx_images const& mnist, std::int32_t neurons, std::int32_t count,
                                         char const* who) {
  std::int32_t s = 0;
  while (static_cast<std::int64_t>(s + 1) * (s + 1) <= neurons) ++s;
  SDNN_EXPECTS(neurons > 0 && s * s == neurons, who, ": neurons must be a perfect square "
               "(the image is sqrt(N) x sqrt(N)), got ", neurons);
  SDNN_EXPECTS(count >= 0, who, ": count must be >= 0, got ", count);
  SDNN_EXPECTS(count == 0 || mnist.count > 0, who, ": no source images");
  SDNN_EXPECTS(mnist.rows > 0 && mnist.cols > 0 &&
                   mnist.pixels.size() == std::size_t(mnist.count) * mnist.rows * mnist.cols,
               who, ": idx_images holds ", mnist.pixels.size(), " pixels, expected ", mnist.count, " x ", mnist.rows,
               " x ", mnist.cols);
  return s;
}

// The column-major pixel ids (x * s + y) of one rows x cols image resized to s x s and
// thresholded (pixel / 255 > threshold).
inline std::vector<std::int32_t> challenge_image_pixels(std::uint8_t const* img, int rows, int cols, int s,
                                                        float threshold) {
  auto const big = bicubic_resize(img, rows, cols, s);
  std::vector<std::int32_t> p;
  for (std::int32_t x = 0; x < s; ++x)
    for (std::int32_t y = 0; y < s; ++y)
      if (big[std::size_t(y) * s + x] / 255.0 > threshold) p.push_back(x * s + y);
  return p;
}

// count x neurons CSR, values 1, row n = pix[n % pix.size()].
inline csr_matrix<float, std::int32_t> challenge_rows_from_pixels(std::vector<std::vector<std::int32_t>> const& pix,
                                                                  std::int32_t count, std::int32_t neurons,
                                                                  char const* who) {
  std::int64_t total = 0;
  for (std::int32_t n = 0; n < count; ++n) total += static_cast<std::int64_t>(pix[n % pix.size()].size());
  SDNN_EXPECTS(total <= 0x7fffffff, who, ": ", total, " nonzeros overflow int32 indices");
  csr_matrix<float, std::int32_t> y(count, neurons, static_cast<std::int32_t>(total));
  std::int32_t* rp = y.row_ptr().data();
  std::int32_t* ci = y.col_idx().data();
  float* v = y.values().data();
  std::int32_t at = 0;
  rp[0] = 0;
  for (std::int32_t n = 0; n < count; ++n) {
    for (std::int32_t c : pix[n % pix.size()]) {
      ci[at] = c;
      v[at] = 1.0f;
      ++at;
    }
    rp[n + 1] = at;
  }
  return y;
}
}  // namespace detail

// Output: count x N CSR, values 1.0f, columns ascending; pixel = x * S + y (0-based, S = sqrt(N),
// x = column, y = row), the whole frame resized (no cropping), then pixel / 255 > threshold.
// Image n (0-based) is MNIST image n mod mnist.count, so a batch larger than the source repeats
// it cyclically and deterministically. N must be a perfect square with sqrt(N) >= the source's
// rows and cols (upscaling only: 784 = 28 x 28 and every challenge size qualify).
inline csr_matrix<float, std::int32_t> challenge_inputs_from_mnist(io::idx_images const& mnist, std::int32_t neurons,
                                                                   std::int32_t count, float threshold = 0.7f) {
  char const* who = "challenge_inputs_from_mnist";
  std::int32_t const s = detail::challenge_image_side(mnist, neurons, count, who);
  // Each distinct source image is resized once: its column-major pixel list.
  std::int32_t const distinct = count < mnist.count ? count : mnist.count;
  std::size_t const frame = std::size_t(mnist.rows) * mnist.cols;
  std::vector<std::vector<std::int32_t>> pix(static_cast<std::size_t>(distinct));
  for (std::int32_t n = 0; n < distinct; ++n)
    pix[static_cast<std::size_t>(n)] =
        detail::challenge_image_pixels(mnist.pixels.data() + frame * n, mnist.rows, mnist.cols, s, threshold);
  if (count == 0) return csr_matrix<float, std::int32_t>(0, neurons, 0);
  return detail::challenge_rows_from_pixels(pix, count, neurons, who);
}

}  // namespace sdnn::data
