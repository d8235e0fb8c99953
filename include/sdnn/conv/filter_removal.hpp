// sdnn/conv/filter_removal.hpp - pruning whole filters (output channels) and whole input channels
// of a convolution by L2 norm (host), which leaves a smaller dense layer: the compact K' x C' x R x S
// filter, the kept channel indices, the gather of an NHWC activation's kept channels and the
// scatter of a compact output back to K channels. In a stack, layer l's removed filters are layer
// l+1's removed input channels (prune_filter_stack), so the compact network is a smaller dense one.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "sdnn/conv/shape.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/types.hpp"

namespace sdnn::conv {

// A layer with some filters and input channels removed.
template <class T>
struct compact_filter {
  conv_shape full;                       // the layer before removal (K x C)
  conv_shape shape;                      // the compact layer: K' = kept_out.size(), C' = kept_in.size()
  std::vector<T> filter;                 // K' x C' x R x S
  std::vector<std::int32_t> kept_out;    // [K'] kept output channels of the full layer, ascending
  std::vector<std::int32_t> kept_in;     // [C'] kept input channels of the full layer, ascending
};

namespace detail {
// max(1, round(fraction * n)) of n items, fraction in (0, 1].
inline std::int64_t kept_count(double fraction, std::int64_t n, char const* what) {
  SDNN_EXPECTS(fraction > 0.0 && fraction <= 1.0, what, ": a keep fraction must be in (0, 1], got ", fraction);
  return std::clamp<std::int64_t>(std::llround(fraction * static_cast<double>(n)), std::int64_t(1), n);
}
// The `keep` indices of largest norm (ties: the lower index), ascending.
inline std::vector<std::int32_t> top_by_norm(std::vector<double> const& norm, std::int64_t keep) {
  std::vector<std::int32_t> order(norm.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return norm[static_cast<std::size_t>(a)] > norm[static_cast<std::size_t>(b)];
  });
  order.resize(static_cast<std::size_t>(keep));
  std::sort(order.begin(), order.end());
  return order;
}
template <class T>
double sq(T const& v) {
  double const d = static_cast<double>(static_cast<float>(v));
  SDNN_EXPECTS(!std::isnan(d), "prune_filters: a weight is NaN (it has no magnitude order)");
  return d * d;
}
inline void check_indices(std::vector<std::int32_t> const& idx, std::int64_t n, char const* what) {
  for (std::size_t i = 0; i < idx.size(); ++i)
    SDNN_EXPECTS(idx[i] >= 0 && idx[i] < n && (i == 0 || idx[i - 1] < idx[i]), what, ": index ", i, " = ", idx[i],
                 " must be in [0, ", n, ") and greater than the one before (ascending, unique)");
}
}  // namespace detail

// The compact layer of `filter` (K x C x R x S of `shape`) keeping the input channels kept_in
// (ascending) and the max(1, round(keep_out_fraction * K)) filters of largest L2 norm over those
// input channels (ties: the lower index).
template <class T>
compact_filter<T> prune_filters_given_inputs(T const* filter, conv_shape const& shape,
                                             std::vector<std::int32_t> const& kept_in, double keep_out_fraction) {
  shape.check();
  SDNN_EXPECTS(!kept_in.empty(), "prune_filters: at least one input channel must be kept");
  detail::check_indices(kept_in, shape.C, "prune_filters: kept input channels");
  std::int64_t const RS = std::int64_t(shape.R) * shape.S;
  std::vector<double> out_norm(static_cast<std::size_t>(shape.K), 0.0);
  for (std::int64_t k = 0; k < shape.K; ++k)
    for (auto c : kept_in)
      for (std::int64_t t = 0; t < RS; ++t)
        out_norm[static_cast<std::size_t>(k)] += detail::sq(filter[(k * shape.C + c) * RS + t]);
  compact_filter<T> cf;
  cf.full = shape;
  cf.kept_in = kept_in;
  cf.kept_out = detail::top_by_norm(out_norm, detail::kept_count(keep_out_fraction, shape.K, "prune_filters"));
  cf.shape = shape;
  cf.shape.K = static_cast<int>(cf.kept_out.size());
  cf.shape.C = static_cast<int>(cf.kept_in.size());
  cf.filter.resize(static_cast<std::size_t>(cf.shape.weight_count()));
  for (std::size_t ko = 0; ko < cf.kept_out.size(); ++ko)
    for (std::size_t ci = 0; ci < cf.kept_in.size(); ++ci)
      for (std::int64_t t = 0; t < RS; ++t)
        cf.filter[(ko * cf.kept_in.size() + ci) * static_cast<std::size_t>(RS) + static_cast<std::size_t>(t)] =
            filter[(std::int64_t(cf.kept_out[ko]) * shape.C + cf.kept_in[ci]) * RS + t];
  return cf;
}

// Removes whole filters and whole input channels of a K x C x R x S filter: keeps the
// max(1, round(keep_in_fraction * C)) input channels of largest L2 norm over all K filters, then
// the max(1, round(keep_out_fraction * K)) filters of largest L2 norm over the kept input channels
// (ties: the lower index). Fractions in (0, 1].
template <class T>
compact_filter<T> prune_filters(T const* filter, conv_shape const& shape, double keep_out_fraction,
                                double keep_in_fraction) {
  shape.check();
  std::int64_t const RS = std::int64_t(shape.R) * shape.S;
  std::vector<double> in_norm(static_cast<std::size_t>(shape.C), 0.0);
  for (std::int64_t k = 0; k < shape.K; ++k)
    for (std::int64_t c = 0; c < shape.C; ++c)
      for (std::int64_t t = 0; t < RS; ++t)
        in_norm[static_cast<std::size_t>(c)] += detail::sq(filter[(k * shape.C + c) * RS + t]);
  auto const kept_in = detail::top_by_norm(in_norm, detail::kept_count(keep_in_fraction, shape.C, "prune_filters"));
  return prune_filters_given_inputs(filter, shape, kept_in, keep_out_fraction);
}

// The full K x C x R x S filter of a compact layer: the kept entries in place, zeros elsewhere.
template <class T>
std::vector<T> expand_filter(compact_filter<T> const& cf) {
  std::int64_t const RS = std::int64_t(cf.full.R) * cf.full.S;
  std::vector<T> f(static_cast<std::size_t>(cf.full.weight_count()), value_cast<T>(0.0f));
  for (std::size_t ko = 0; ko < cf.kept_out.size(); ++ko)
    for (std::size_t ci = 0; ci < cf.kept_in.size(); ++ci)
      for (std::int64_t t = 0; t < RS; ++t)
        f[static_cast<std::size_t>((std::int64_t(cf.kept_out[ko]) * cf.full.C + cf.kept_in[ci]) * RS + t)] =
            cf.filter[(ko * cf.kept_in.size() + ci) * static_cast<std::size_t>(RS) + static_cast<std::size_t>(t)];
  return f;
}

// v[idx[0]], v[idx[1]], ...: e.g. the bias of the kept filters.
template <class T>
std::vector<T> gather(std::vector<T> const& v, std::vector<std::int32_t> const& idx) {
  detail::check_indices(idx, static_cast<std::int64_t>(v.size()), "gather");
  std::vector<T> r(idx.size());
  for (std::size_t i = 0; i < idx.size(); ++i) r[i] = v[static_cast<std::size_t>(idx[i])];
  return r;
}

// The kept channels of an NHWC activation: [pixels][C] -> [pixels][C'], pixels = batch*H*W.
template <class T>
std::vector<T> gather_channels_nhwc(T const* x, std::int64_t pixels, std::int64_t C, std::vector<std::int32_t> const& kept) {
  SDNN_EXPECTS(pixels >= 0 && C >= 0, "gather_channels_nhwc: extents must be >= 0, got ", pixels, " x ", C);
  detail::check_indices(kept, C, "gather_channels_nhwc");
  std::size_t const Cp = kept.size();
  std::vector<T> y(::sdnn::detail::checked_extent(pixels, static_cast<std::int64_t>(Cp), "gather_channels_nhwc"));
  for (std::int64_t p = 0; p < pixels; ++p)
    for (std::size_t i = 0; i < Cp; ++i) y[static_cast<std::size_t>(p) * Cp + i] = x[p * C + kept[i]];
  return y;
}

// A compact NHWC output back to K channels: [pixels][K'] -> [pixels][K], zero in removed channels.
template <class T>
std::vector<T> scatter_channels_nhwc(T const* y, std::int64_t pixels, std::int64_t K, std::vector<std::int32_t> const& kept) {
  SDNN_EXPECTS(pixels >= 0 && K >= 0, "scatter_channels_nhwc: extents must be >= 0, got ", pixels, " x ", K);
  detail::check_indices(kept, K, "scatter_channels_nhwc");
  std::size_t const Kp = kept.size();
  std::vector<T> out(::sdnn::detail::checked_extent(pixels, K, "scatter_channels_nhwc"), value_cast<T>(0.0f));
  for (std::int64_t p = 0; p < pixels; ++p)
    for (std::size_t i = 0; i < Kp; ++i) out[static_cast<std::size_t>(p * K + kept[i])] = y[static_cast<std::size_t>(p) * Kp + i];
  return out;
}

// Filter removal over a stack of layers (layer l's output channels are layer l+1's input channels,
// checked: shapes[l+1].C == shapes[l].K). Layer 0 keeps the max(1, round(keep_in_first * C))
// input channels of largest norm (1.0: the network input whole); every layer l keeps
// max(1, round(keep_out[l] * K)) filters ranked over its kept inputs, and layer l+1's kept inputs
// are exactly layer l's kept filters. Give the last layer keep_out 1.0 to keep the network's output
// channels. The compact stack computes, in its kept channels, what the full stack computes with the
// removed filters AND their biases set to zero (gather each bias with kept_out); the removed output
// channels of the full stack are then 0 after ReLU and pooling, which is what scatter_channels_nhwc puts there.
template <class T>
std::vector<compact_filter<T>> prune_filter_stack(std::vector<conv_shape> const& shapes,
                                                  std::vector<std::vector<T>> const& filters,
                                                  std::vector<double> const& keep_out, double keep_in_first = 1.0) {
  SDNN_EXPECTS(!shapes.empty() && filters.size() == shapes.size() && keep_out.size() == shapes.size(),
               "prune_filter_stack: ", shapes.size(), " shapes, ", filters.size(), " filters and ", keep_out.size(),
               " keep fractions: expected the same nonzero count");
  std::vector<compact_filter<T>> out;
  for (std::size_t l = 0; l < shapes.size(); ++l) {
    shapes[l].check();
    SDNN_EXPECTS(filters[l].size() == static_cast<std::size_t>(shapes[l].weight_count()), "prune_filter_stack: layer ",
                 l, " has ", filters[l].size(), " weights, its shape needs K*C*R*S = ", shapes[l].weight_count());
    if (l == 0) {
      out.push_back(prune_filters(filters[0].data(), shapes[0], keep_out[0], keep_in_first));
      continue;
    }
    SDNN_EXPECTS_DIMS(shapes[l].C == shapes[l - 1].K, "prune_filter_stack: layer ", l, " has C = ", shapes[l].C,
                      " input channels but layer ", l - 1, " has K = ", shapes[l - 1].K, " outputs");
    out.push_back(prune_filters_given_inputs(filters[l].data(), shapes[l], out.back().kept_out, keep_out[l]));
  }
  return out;
}

// A convolution layer of a trained network in its GEMM view (K x R*S*C, columns (r, s, c)), with
// its bias, a ReLU or none after it and an optional 2x2 max-pool.
struct gemm_conv_layer {
  conv_shape shape;
  std::vector<float> w;     // K x R*S*C row-major
  std::vector<float> bias;  // K (empty: none)
  bool pool = false;
};

// The network without the channels that cannot change its output: channel k of layer l goes when
// its filter and bias are all zero (it is 0 after the ReLU or none and after the pool, and a zero
// input channel adds nothing to the next layer, padding included) or when nothing reads it (the
// next layer's weights on it, or the classifier's columns of it, are all zero). The classifier
// (classes x flat, flat = PH*PW*K of the last layer's NHWC output, column (h*PW + w)*K + k) loses
// the columns of the removed channels of the last layer. Layer 0 keeps its input channels. The
// result computes exactly the logits of the input network, in float or any type, since no product
// with a nonzero value is dropped.
struct compacted_network {
  std::vector<gemm_conv_layer> convs;
  std::vector<float> classifier;  // classes x flat'
  std::int64_t flat = 0;
  std::vector<std::vector<std::int32_t>> kept;  // per layer, the kept output channels of the input network
};

inline compacted_network drop_dead_channels(std::vector<gemm_conv_layer> const& convs,
                                            std::vector<float> const& classifier, std::int64_t classes) {
  SDNN_EXPECTS(!convs.empty() && classes >= 1, "drop_dead_channels: need a convolution layer and a class");
  std::size_t const L = convs.size();
  for (std::size_t l = 0; l < L; ++l) {
    auto const& c = convs[l];
    c.shape.check();
    SDNN_EXPECTS(c.w.size() == static_cast<std::size_t>(c.shape.weight_count()) &&
                     (c.bias.empty() || c.bias.size() == static_cast<std::size_t>(c.shape.K)),
                 "drop_dead_channels: layer ", l, " has ", c.w.size(), " weights and ", c.bias.size(),
                 " biases, its shape needs ", c.shape.weight_count(), " and ", c.shape.K, " (or none)");
    if (l > 0)
      SDNN_EXPECTS_DIMS(c.shape.C == convs[l - 1].shape.K, "drop_dead_channels: layer ", l, " reads ", c.shape.C,
                        " channels, layer ", l - 1, " makes ", convs[l - 1].shape.K);
  }
  auto out_hw = [](gemm_conv_layer const& c) {
    int const h = c.pool ? c.shape.OH() / 2 : c.shape.OH(), w = c.pool ? c.shape.OW() / 2 : c.shape.OW();
    return std::int64_t(h) * w;
  };
  std::int64_t const flat = out_hw(convs.back()) * convs.back().shape.K;
  SDNN_EXPECTS(classifier.size() == static_cast<std::size_t>(classes * flat), "drop_dead_channels: the classifier has ",
               classifier.size(), " weights, ", classes, " x ", flat, " expected");
  // Which channels each layer's output keeps.
  std::vector<std::vector<char>> keep(L);
  for (std::size_t l = 0; l < L; ++l) {
    auto const& c = convs[l];
    std::int64_t const cols = c.shape.filter_size();
    keep[l].assign(static_cast<std::size_t>(c.shape.K), 0);
    for (std::int64_t k = 0; k < c.shape.K; ++k) {
      bool live = !c.bias.empty() && c.bias[static_cast<std::size_t>(k)] != 0.0f;
      for (std::int64_t j = 0; j < cols && !live; ++j) live = c.w[static_cast<std::size_t>(k * cols + j)] != 0.0f;
      bool read = false;
      if (l + 1 < L) {
        auto const& n = convs[l + 1];
        std::int64_t const ncols = n.shape.filter_size(), taps = std::int64_t(n.shape.R) * n.shape.S;
        for (std::int64_t o = 0; o < n.shape.K && !read; ++o)
          for (std::int64_t t = 0; t < taps && !read; ++t)
            read = n.w[static_cast<std::size_t>(o * ncols + t * n.shape.C + k)] != 0.0f;
      } else {
        std::int64_t const pix = out_hw(c);
        for (std::int64_t o = 0; o < classes && !read; ++o)
          for (std::int64_t p = 0; p < pix && !read; ++p)
            read = classifier[static_cast<std::size_t>(o * flat + p * c.shape.K + k)] != 0.0f;
      }
      keep[l][static_cast<std::size_t>(k)] = live && read;
    }
    if (std::count(keep[l].begin(), keep[l].end(), 1) == 0) keep[l][0] = 1;  // the shapes need a channel
  }
  compacted_network r;
  std::vector<std::int32_t> in_kept;  // layer l's kept input channels
  for (int c = 0; c < convs[0].shape.C; ++c) in_kept.push_back(c);
  for (std::size_t l = 0; l < L; ++l) {
    auto const& c = convs[l];
    std::vector<std::int32_t> out_kept;
    for (std::int32_t k = 0; k < c.shape.K; ++k)
      if (keep[l][static_cast<std::size_t>(k)]) out_kept.push_back(k);
    gemm_conv_layer n;
    n.shape = c.shape;
    n.shape.K = static_cast<int>(out_kept.size());
    n.shape.C = static_cast<int>(in_kept.size());
    n.pool = c.pool;
    std::int64_t const taps = std::int64_t(c.shape.R) * c.shape.S, cols = c.shape.filter_size();
    for (std::int32_t k : out_kept) {
      for (std::int64_t t = 0; t < taps; ++t)
        for (std::int32_t ci : in_kept) n.w.push_back(c.w[static_cast<std::size_t>(k * cols + t * c.shape.C + ci)]);
      if (!c.bias.empty()) n.bias.push_back(c.bias[static_cast<std::size_t>(k)]);
    }
    r.convs.push_back(std::move(n));
    r.kept.push_back(out_kept);
    in_kept = std::move(out_kept);
  }
  std::int64_t const pix = out_hw(convs.back()), K = convs.back().shape.K;
  r.flat = pix * static_cast<std::int64_t>(in_kept.size());
  for (std::int64_t o = 0; o < classes; ++o)
    for (std::int64_t p = 0; p < pix; ++p)
      for (std::int32_t k : in_kept) r.classifier.push_back(classifier[static_cast<std::size_t>(o * flat + p * K + k)]);
  return r;
}

}  // namespace sdnn::conv
