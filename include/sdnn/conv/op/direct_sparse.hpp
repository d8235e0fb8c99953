// sdnn/conv/op/direct_sparse.hpp - host-side planning of direct_sparse_conv (no CUDA):
// the compiled variants, the run-time block shape (direct_conv_config), the geometry it
// implies on a layer (tile, input window, channel chunks, k-split) and the candidates the
// plan-time tuning run tries. The kernel is in
// conv/kernel/direct_sparse.cuh, the device weights and the call in conv/op/direct_sparse.cuh.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "sdnn/conv/shape.hpp"
#include "sdnn/conv/policy/direct_sparse.hpp"
#include "sdnn/core/error.hpp"

namespace sdnn::conv {

// The run-time block shape of the kernel (chosen by tuning or forced by the user).
struct direct_conv_config {
  int variant = 0;      // index into the compiled variants (sub-batch / k-group / pixels)
  int tw = 32, th = 4;  // pixel threads along the output row / column
  int rows_mode = 1;    // 1: a thread's pixels step down the column; 0: along the row (1-D)
  int cc = 64;          // input channels per staged chunk
  int kw = 1;           // k-group slots working in parallel on one tile (block = kw*tw*th threads)
  int ksplit = 1;       // blocks sharing one tile's output channels (grid z)
  // How partial sums cross channel chunks (matters only when cc < C):
  //   1: chunk loop inside each k-group pass; sums stay in registers and are stored (and,
  //      for __half, rounded) once; the window is restaged for every pass (passes after
  //      the first walk the chunks in alternating order and reuse the chunk left in the
  //      window, so a block stages nchunks + (passes-1)*(nchunks-1) windows);
  //   0: chunks outer; each window is staged once and partial sums round-trip through the
  //      output (one extra output read + write per extra chunk). Rejected for __half data
  //      with float accumulation (the round trip would round to half once per chunk).
  int sums_in_registers = 1;
};

namespace detail {

// The compiled variants tuning chooses from (accumulators KG*P*NB = 64 in each).
// Tuning winners over the 20 bench_conv layers x 5 sparsities, H200, 2026-11-21
// (benchmarks/results/conv_H200_2026-11-21_bench.log): float (2,8,4) 79, (4,8,2) 20,
// (8,8,1) 1, (2,4,8) 0; half (4,8,2) 55, (2,8,4) 25, (2,4,8) 15, (8,8,1) 5.
template <int I>
struct direct_conv_variant;
template <>
struct direct_conv_variant<0> {
  using type = policy::direct_sparse_conv<2, 8, 4>;
};
template <>
struct direct_conv_variant<1> {
  using type = policy::direct_sparse_conv<4, 8, 2>;
};
template <>
struct direct_conv_variant<2> {
  using type = policy::direct_sparse_conv<8, 8, 1>;
};
template <>
struct direct_conv_variant<3> {
  using type = policy::direct_sparse_conv<2, 4, 8>;  // 16 FMAs per entry load
};
inline constexpr int direct_conv_variant_count = 4;

template <int I, class F>
void with_variant(int v, F&& f) {
  if constexpr (I < direct_conv_variant_count) {
    if (v == I) f(typename direct_conv_variant<I>::type{});
    else with_variant<I + 1>(v, f);
  } else {
    SDNN_FAIL("direct_sparse_conv: variant must be in [0, ", direct_conv_variant_count, "), got ", v);
  }
}

}  // namespace detail

// Geometry of one (variant, config) on a shape: tile, window, chunking.
struct direct_conv_geometry {
  int sub_batch, k_group, pixels;
  int toh, tow, sh, sw;
  int cc, nchunks, tiles_x, tiles_y;
  int threads, kper;  // block threads; output channels per k-split
  int passes;         // k-group passes of a block's slots over its kper channels
  int stagings;       // input windows a block stages (sums_in_registers: see direct_conv_config)
};

inline direct_conv_geometry geometry_of(conv_shape const& s, direct_conv_config const& c) {
  direct_conv_geometry g{};
  detail::with_variant<0>(c.variant, [&](auto pol) {
    using P = decltype(pol);
    g.sub_batch = P::sub_batch;
    g.k_group = P::k_group;
    g.pixels = P::pixels;
  });
  SDNN_EXPECTS(c.tw >= 1 && c.th >= 1 && c.kw >= 1 && c.tw <= 256 && c.th <= 256 && c.kw <= 256 &&
                   c.kw * c.tw * c.th <= 256,
               "direct_conv_config: kw*tw*th must be in [1, 256], got ", c.kw, " x ", c.tw, " x ", c.th);
  SDNN_EXPECTS(c.cc >= 1 && c.ksplit >= 1, "direct_conv_config: cc and ksplit must be >= 1, got ", c.cc, ", ",
               c.ksplit);
  g.toh = c.rows_mode ? c.th * g.pixels : c.th;
  g.tow = c.rows_mode ? c.tw : c.tw * g.pixels;
  // The window in 64 bits: a stride near 2^31 times the tile's extent overflows int.
  std::int64_t const sh = std::int64_t(g.toh - 1) * s.stride_h + std::int64_t(s.R - 1) * s.dil_h + 1;
  std::int64_t const sw = std::int64_t(g.tow - 1) * s.stride_w + std::int64_t(s.S - 1) * s.dil_w + 1;
  constexpr std::int64_t int_limit = std::int64_t(1) << 31;
  SDNN_EXPECTS(sh < int_limit && sw < int_limit && sh * sw < int_limit, "direct_conv_config: the input window of a ",
               g.toh, " x ", g.tow, " output tile at stride ", s.stride_h, " x ", s.stride_w, " is ", sh, " x ", sw,
               " elements, expected fewer than 2^31 (use a smaller tile)");
  g.sh = static_cast<int>(sh);
  g.sw = static_cast<int>(sw);
  // ceil(a / b) in 64 bits (C, K, OW near 2^31 are valid shapes); every quotient here fits int.
  auto ceil_div = [](std::int64_t a, std::int64_t b) { return static_cast<int>((a + b - 1) / b); };
  g.cc = std::min(c.cc, s.C);
  g.nchunks = ceil_div(s.C, g.cc);
  g.tiles_x = ceil_div(s.OW(), g.tow);
  g.tiles_y = ceil_div(s.OH(), g.toh);
  g.threads = (c.kw * c.tw * c.th + 31) / 32 * 32;
  int const kgroups = ceil_div(s.K, g.k_group);
  int const split = std::min(c.ksplit, kgroups);
  std::int64_t const kper = std::int64_t(ceil_div(kgroups, split)) * g.k_group;
  SDNN_EXPECTS(kper < int_limit, "direct_conv_config: K = ", s.K, " in k-groups of ", g.k_group, " gives ", kper,
               " output channels per k-split, expected fewer than 2^31");
  g.kper = static_cast<int>(kper);
  g.passes = (g.kper / g.k_group + c.kw - 1) / c.kw;
  std::int64_t const stagings =
      c.sums_in_registers ? g.nchunks + std::int64_t(g.passes - 1) * (g.nchunks - 1) : std::int64_t(g.nchunks);
  SDNN_EXPECTS(stagings < int_limit, "direct_conv_config: ", g.passes, " passes over ", g.nchunks,
               " channel chunks stage ", stagings, " windows per block, expected fewer than 2^31 (raise cc or kw)");
  g.stagings = static_cast<int>(stagings);
  return g;
}

// Default shared-memory budget of one block's input window (see direct_conv_candidates).
inline constexpr std::size_t direct_conv_window_budget = 100 * 1024;

// Candidate block shapes for a shape (tuning tries each). For every variant and pixel
// tile, cc is the largest channel count whose window fits window_budget (one chunk when
// the whole C fits: 100 KB leaves room for two blocks per SM on Hopper's 228 KB), kw
// fills the block to ~256 threads with k-group slots, and ksplit gives the grid at least
// ~2 blocks per SM (assumed 132 SMs) for batch `batch`. With one chunk the candidate has
// sums_in_registers = 0 (the window is staged once either way; that kernel is the one
// measured in benchmarks/results/conv_notes_H200_2026-11-21.md). With several chunks it
// comes with sums_in_registers = 1 (no output round trip, windows restaged per pass) and,
// if allow_output_round_trip (false for __half data with float accumulation), also with
// 0 (windows staged once, partial sums through the output): which is faster depends on
// the passes and chunks, so tuning decides.
inline std::vector<direct_conv_config> direct_conv_candidates(conv_shape const& s, std::size_t elem_bytes,
                                                              std::int64_t batch = 128,
                                                              std::size_t window_budget = direct_conv_window_budget,
                                                              bool allow_output_round_trip = true) {
  std::vector<direct_conv_config> out;
  int const rows_mode = s.OH() > 1 ? 1 : 0;
  for (int v = 0; v < detail::direct_conv_variant_count; ++v) {
    int P = 1, NB = 2, KG = 8;
    detail::with_variant<0>(v, [&](auto pol) {
      P = decltype(pol)::pixels;
      NB = decltype(pol)::sub_batch;
      KG = decltype(pol)::k_group;
    });
    std::vector<std::pair<int, int>> shapes;  // (tw, th)
    auto add = [&](int tw, int th) {
      if (std::find(shapes.begin(), shapes.end(), std::make_pair(tw, th)) == shapes.end()) shapes.push_back({tw, th});
    };
    if (rows_mode) {
      for (int tw : {32, 16}) {
        tw = std::min(tw, s.OW());
        for (int toh : {4, 8, 16})
          add(tw, std::max(1, std::min({(toh + P - 1) / P, (s.OH() + P - 1) / P, 256 / tw})));
      }
    } else {
      for (int tw : {32, 64, 128}) add(std::min(tw, ((s.OW() + P - 1) / P + 31) / 32 * 32), 1);
    }
    for (auto [tw, th] : shapes) {
      direct_conv_config c;
      c.variant = v;
      c.tw = tw;
      c.th = th;
      c.rows_mode = rows_mode;
      c.cc = 1;
      auto const g = geometry_of(s, c);
      std::size_t const per_channel = std::size_t(g.sh) * g.sw * NB * elem_bytes;
      int const cc_max = static_cast<int>(std::max<std::size_t>(1, window_budget / per_channel));
      int const chunks = (s.C + cc_max - 1) / cc_max;
      c.cc = (s.C + chunks - 1) / chunks;
      int const kgroups = (s.K + KG - 1) / KG;
      c.kw = std::max(1, std::min(256 / (tw * th), kgroups));
      std::int64_t const blocks = std::int64_t(g.tiles_x) * g.tiles_y * ((batch + NB - 1) / NB);
      std::int64_t const want = 2 * 132;
      if (blocks < want)
        c.ksplit = static_cast<int>(std::min<std::int64_t>((kgroups + c.kw - 1) / c.kw, (want + blocks - 1) / blocks));
      c.sums_in_registers = chunks > 1 ? 1 : 0;
      out.push_back(c);
      if (chunks > 1 && allow_output_round_trip) {
        c.sums_in_registers = 0;
        out.push_back(c);
      }
    }
  }
  return out;
}

}  // namespace sdnn::conv
