// sdnn/conv/weights.hpp - the uniform-row sparse weight format of direct sparse convolution
// (sparse_conv_weights: one CSR row per output channel, every row with the same number of
// entries, each entry's column its offset into the padded input map), and the per-tile layout
// the device kernel derives from it at plan time (tiled_conv_entries). Both layouts:
// docs/conv.md#weight-format.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sdnn/conv/shape.hpp"
#include "sdnn/conv/pruned_weights.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/csr.hpp"

namespace sdnn::conv {

// One CSR row per output channel k, every row with the same nnz_per_channel entries, so the
// row pointer is implicit:
//     row k = entries [k * nnz_per_channel, (k + 1) * nnz_per_channel)
// The column index of entry (c, r, s) is its precomputed offset into one image's PADDED input
// map (C x Hp x Wp):
//     offset = c*Hp*Wp + r*dil_h*Wp + s*dil_w
// so output (oy, ox) of image n is sum_e values[e] * in_padded[n][offset[e] + oy*stride_h*Wp
// + ox*stride_w]: no index arithmetic per entry. Offsets are strictly increasing in a row.
template <class T>
struct sparse_conv_weights {
  conv_shape shape;
  std::int32_t nnz_per_channel = 0;
  std::vector<std::int32_t> offsets;  // [K * nnz_per_channel], padded-map offsets, increasing per row
  std::vector<T> values;              // [K * nnz_per_channel]; padding entries are 0

  std::int64_t nnz() const { return std::int64_t(shape.K) * nnz_per_channel; }
  // The implicit row pointer, materialised: [K + 1], row_ptr[k] = k * nnz_per_channel.
  std::vector<std::int32_t> csr_row_ptr() const {
    std::vector<std::int32_t> rp(static_cast<std::size_t>(shape.K) + 1);
    for (int k = 0; k <= shape.K; ++k) rp[static_cast<std::size_t>(k)] = k * nnz_per_channel;
    return rp;
  }
  // A csr_view over the given materialised row pointer (cols = C*Hp*Wp offsets).
  csr_view<T, std::int32_t> view(std::vector<std::int32_t> const& row_ptr) const {
    return {shape.K, shape.C * shape.Hp() * shape.Wp(), static_cast<std::int32_t>(nnz()), row_ptr.data(),
            offsets.data(), values.data()};
  }
};

// Builds the format from a pruning result of the K x (C*R*S) tensor of `shape`.
template <class T>
sparse_conv_weights<T> make_conv_weights(conv_shape const& shape, pruning_result const& p) {
  shape.check();
  SDNN_EXPECTS(p.K == shape.K && p.filter_size == shape.filter_size(), "make_conv_weights: pruning result is ", p.K,
               " x ", p.filter_size, ", the shape needs ", shape.K, " x ", shape.filter_size());
  sparse_conv_weights<T> w;
  w.shape = shape;
  w.nnz_per_channel = static_cast<std::int32_t>(p.nnz_per_channel);
  w.offsets.resize(static_cast<std::size_t>(w.nnz()));
  w.values.resize(static_cast<std::size_t>(w.nnz()));
  std::int64_t const RS = std::int64_t(shape.R) * shape.S, HpWp = std::int64_t(shape.Hp()) * shape.Wp();
  for (std::int64_t k = 0; k < shape.K; ++k)
    for (std::int64_t e = k * w.nnz_per_channel; e < (k + 1) * w.nnz_per_channel; ++e) {
      std::int64_t const f = p.index[static_cast<std::size_t>(e)];
      std::int64_t const c = f / RS, r = (f / shape.S) % shape.R, s = f % shape.S;
      w.offsets[static_cast<std::size_t>(e)] =
          static_cast<std::int32_t>(c * HpWp + r * shape.dil_h * shape.Wp() + s * shape.dil_w);
      w.values[static_cast<std::size_t>(e)] = value_cast<T>(p.pruned[static_cast<std::size_t>(k * shape.filter_size() + f)]);
    }
  return w;
}

namespace detail {
// Checks that offset o (entry e) is c*Hp*Wp + r*dil_h*Wp + s*dil_w for some c < C, r < R, s < S:
// the only offsets a dense filter has, so every read of the window stays inside the padded map.
// The decomposition is unique: check() bounds (R-1)*dil_h < Hp and (S-1)*dil_w < Wp.
inline void check_filter_offset(conv_shape const& sh, std::int64_t e, std::int32_t o, char const* what) {
  std::int64_t const Hp = sh.Hp(), Wp = sh.Wp(), limit = std::int64_t(sh.C) * Hp * Wp;
  SDNN_EXPECTS(o >= 0 && o < limit, what, ": offsets[", e, "] = ", o, " is out of range for C*Hp*Wp = ", limit);
  std::int64_t const rem = o % (Hp * Wp), y = rem / Wp, x = rem % Wp;
  SDNN_EXPECTS(y % sh.dil_h == 0 && y / sh.dil_h < sh.R && x % sh.dil_w == 0 && x / sh.dil_w < sh.S, what,
               ": offsets[", e, "] = ", o, " is not a filter position: it is row ", y, ", column ", x, " of channel ",
               o / (Hp * Wp), "'s ", Hp, " x ", Wp, " padded map, expected a row r*", sh.dil_h, " (r < ", sh.R,
               ") and a column s*", sh.dil_w, " (s < ", sh.S, ")");
}
}  // namespace detail

// Checks the format's invariants (sizes; every offset a real (c, r, s) position of the filter,
// increasing per row).
template <class T>
void validate(sparse_conv_weights<T> const& w) {
  w.shape.check();
  SDNN_EXPECTS(w.nnz_per_channel >= 0 && w.nnz_per_channel <= w.shape.filter_size(),
               "sparse_conv_weights: nnz_per_channel must be in [0, ", w.shape.filter_size(), "], got ",
               w.nnz_per_channel);
  SDNN_EXPECTS(w.offsets.size() == static_cast<std::size_t>(w.nnz()) && w.values.size() == w.offsets.size(),
               "sparse_conv_weights: expected ", w.nnz(), " offsets and values, got ", w.offsets.size(), " and ",
               w.values.size());
  for (std::int64_t e = 0; e < w.nnz(); ++e) {
    std::int32_t const o = w.offsets[static_cast<std::size_t>(e)];
    detail::check_filter_offset(w.shape, e, o, "sparse_conv_weights");
    SDNN_EXPECTS(e % w.nnz_per_channel == 0 || w.offsets[static_cast<std::size_t>(e - 1)] < o,
                 "sparse_conv_weights: offsets must increase within a row, offsets[", e, "] = ", o);
  }
}

// The weights re-addressed for a shared-memory tile of the input (cc channels x sh rows x sw
// columns, the window of conv/kernel/direct_sparse.cuh), split by channel chunk (chunk j =
// channels [j*cc, (j+1)*cc)) and stored chunk-major:
//     entries of (chunk j, channel k) = [ptr[j*K + k], ptr[j*K + k + 1]),  ptr has nchunks*K + 1 entries
//     tile offset = ((c - j*cc)*sh + r*dil_h)*sw + s*dil_w
template <class T>
struct tiled_conv_entries {
  int cc = 0, sh = 0, sw = 0, nchunks = 0;
  std::vector<std::int32_t> tile_offset;  // [nnz] chunk-major
  std::vector<T> values;                  // [nnz]
  std::vector<std::int32_t> ptr;          // [nchunks * K + 1]
  // Largest entry count of one (chunk, group of kg consecutive channels).
  std::int64_t max_group_entries(int K, int kg) const {
    std::int64_t m = 0;
    for (int j = 0; j < nchunks; ++j)
      for (int k0 = 0; k0 < K; k0 += kg) {
        int const k1 = std::min(K, k0 + kg);
        m = std::max<std::int64_t>(m, ptr[static_cast<std::size_t>(j) * K + k1] - ptr[static_cast<std::size_t>(j) * K + k0]);
      }
    return m;
  }
};

// Re-addresses w for a tile of cc channels x sh rows x sw columns (see tiled_conv_entries). The
// tile offsets are derived from the padded-map offsets: c, r*dil_h and s*dil_w are recovered
// exactly because r*dil_h < Hp and s*dil_w < Wp.
template <class T>
tiled_conv_entries<T> make_tiled_entries(sparse_conv_weights<T> const& w, int cc, int sh, int sw) {
  validate(w);  // an offset off the filter would land outside the device kernel's window
  conv_shape const& s = w.shape;
  SDNN_EXPECTS(cc >= 1 && sh >= (s.R - 1) * s.dil_h + 1 && sw >= (s.S - 1) * s.dil_w + 1,
               "make_tiled_entries: tile ", cc, " x ", sh, " x ", sw, " cannot hold the ", s.R, " x ", s.S,
               " kernel with dilation ", s.dil_h, " x ", s.dil_w);
  std::int64_t const plane = std::int64_t(sh) * sw, limit = std::int64_t(1) << 31;  // sh, sw >= 1 here
  SDNN_EXPECTS(plane < limit && cc * plane < limit, "make_tiled_entries: tile ", cc, " x ", sh, " x ", sw,
               " has more than 2^31 - 1 elements (tile offsets are int32)");
  tiled_conv_entries<T> t;
  t.cc = cc;
  t.sh = sh;
  t.sw = sw;
  t.nchunks = (s.C + cc - 1) / cc;
  std::int64_t const HpWp = std::int64_t(s.Hp()) * s.Wp();
  std::vector<std::int64_t> count(static_cast<std::size_t>(t.nchunks) * s.K + 1, 0);
  for (int k = 0; k < s.K; ++k)
    for (std::int64_t e = std::int64_t(k) * w.nnz_per_channel; e < std::int64_t(k + 1) * w.nnz_per_channel; ++e) {
      int const c = static_cast<int>(w.offsets[static_cast<std::size_t>(e)] / HpWp);
      ++count[static_cast<std::size_t>(c / cc) * s.K + k + 1];
    }
  t.ptr.resize(count.size());
  for (std::size_t i = 1; i < count.size(); ++i) count[i] += count[i - 1];
  for (std::size_t i = 0; i < count.size(); ++i) t.ptr[i] = static_cast<std::int32_t>(count[i]);
  t.tile_offset.resize(static_cast<std::size_t>(w.nnz()));
  t.values.resize(static_cast<std::size_t>(w.nnz()));
  std::vector<std::int64_t> fill(count.begin(), count.end() - 1);
  for (int k = 0; k < s.K; ++k)
    for (std::int64_t e = std::int64_t(k) * w.nnz_per_channel; e < std::int64_t(k + 1) * w.nnz_per_channel; ++e) {
      std::int64_t const o = w.offsets[static_cast<std::size_t>(e)];
      int const c = static_cast<int>(o / HpWp);
      std::int64_t const rem = o % HpWp, rr = rem / s.Wp(), ss = rem % s.Wp();
      int const j = c / cc;
      std::int64_t const dst = fill[static_cast<std::size_t>(j) * s.K + k]++;
      t.tile_offset[static_cast<std::size_t>(dst)] = static_cast<std::int32_t>(((c - j * cc) * sh + rr) * sw + ss);
      t.values[static_cast<std::size_t>(dst)] = w.values[static_cast<std::size_t>(e)];
    }
  return t;
}

}  // namespace sdnn::conv
