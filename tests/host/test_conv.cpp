// Direct sparse convolution, host side: uniform-nnz magnitude pruning, the padded-offset
// weight format, the tile re-addressing the device kernel uses (emulated here with the
// kernel's exact index arithmetic), and the host reference convolution.
// All data are small integers, so every float comparison is exact (==).
#include "sdnn_catch.hpp"

#include <sdnn/conv/conv_shape.hpp>
#include <sdnn/conv/conv_weights.hpp>
#include <sdnn/conv/direct_conv_plan.hpp>
#include <sdnn/conv/pruning.hpp>
#include <sdnn/conv/reference.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

using namespace sdnn::conv;

namespace {
std::vector<float> small_ints(std::size_t n, int lo, int hi, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = float(d(g));
  return v;
}
// Distinct magnitudes (no ties): a permutation of +-1..n.
std::vector<float> distinct(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = float(i + 1) * ((i * 7 + seed) % 3 == 0 ? -1.f : 1.f);
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  return v;
}

void check_pruning_invariants(pruning_result const& p, std::vector<float> const& w) {
  std::int64_t const K = p.K, F = p.filter_size, nnz = p.nnz_per_channel;
  REQUIRE(p.index.size() == static_cast<std::size_t>(K * nnz));
  std::int64_t kept = 0, pad = 0;
  for (std::int64_t k = 0; k < K; ++k) {
    std::int64_t kept_k = 0;
    for (std::int64_t e = k * nnz; e < (k + 1) * nnz; ++e) {
      auto const f = p.index[static_cast<std::size_t>(e)];
      REQUIRE(f >= 0);
      REQUIRE(f < F);
      if (e > k * nnz) REQUIRE(p.index[static_cast<std::size_t>(e - 1)] < f);  // sorted, unique
      if (p.pruned[static_cast<std::size_t>(k * F + f)] != 0.0f) ++kept_k;
      else ++pad;  // padding entries are zeros
    }
    REQUIRE(kept_k == p.kept_per_channel[static_cast<std::size_t>(k)]);
    kept += kept_k;
  }
  REQUIRE(kept == p.kept);
  REQUIRE(pad == p.padding);
  // pruned == original on kept entries, 0 elsewhere; every nonzero of pruned is stored
  std::int64_t nonzero = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (p.pruned[i] != 0.0f) {
      REQUIRE(p.pruned[i] == w[i]);
      ++nonzero;
    }
  }
  REQUIRE(nonzero == p.kept);
  REQUIRE(p.achieved_sparsity == sdnn_test::Approx(1.0 - double(p.kept) / double(K * F)));
  REQUIRE(p.padding_overhead == sdnn_test::Approx(nnz ? double(p.padding) / double(K * nnz) : 0.0));
}
using sdnn_test::Approx;
}  // namespace

TEST_CASE("prune_uniform global rule: exact sparsity, uniform rows, zero padding", "[conv][prune]") {
  std::int64_t const K = 7, F = 3 * 3 * 5;
  auto const w = distinct(static_cast<std::size_t>(K * F), 3);
  for (double s : {0.0, 0.5, 0.8, 0.9, 0.95, 1.0}) {
    auto const p = prune_uniform(w.data(), K, F, s);
    check_pruning_invariants(p, w);
    REQUIRE(p.kept == std::llround((1.0 - s) * double(K * F)));  // exact global sparsity
    std::int64_t densest = 0;
    for (auto c : p.kept_per_channel) densest = std::max(densest, c);
    REQUIRE(p.nnz_per_channel == densest);
    // magnitude property: every kept |w| >= every dropped |w|
    float min_kept = 1e30f, max_dropped = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
      if (p.pruned[i] != 0.0f) min_kept = std::min(min_kept, std::fabs(w[i]));
      else max_dropped = std::max(max_dropped, std::fabs(w[i]));
    }
    if (p.kept > 0 && p.kept < K * F) REQUIRE(min_kept > max_dropped);
  }
}

TEST_CASE("prune_uniform per-channel rule and forced uniform nnz", "[conv][prune]") {
  std::int64_t const K = 5, F = 64;
  auto const w = distinct(static_cast<std::size_t>(K * F), 11);
  auto const p = prune_uniform(w.data(), K, F, 0.875, prune_rule::per_channel);
  check_pruning_invariants(p, w);
  REQUIRE(p.nnz_per_channel == 8);
  for (auto c : p.kept_per_channel) REQUIRE(c == 8);
  REQUIRE(p.padding == 0);
  auto const q = prune_uniform(w.data(), K, F, 0.9, prune_rule::global, 20);
  check_pruning_invariants(q, w);
  REQUIRE(q.nnz_per_channel == 20);
  REQUIRE(q.padding == K * 20 - q.kept);
  REQUIRE_THROWS_AS(prune_uniform(w.data(), K, F, 0.5, prune_rule::global, 1), sdnn::error);
  REQUIRE_THROWS_AS(prune_uniform(w.data(), K, F, 1.5), sdnn::error);
}

TEST_CASE("prune_uniform: all-zero and dense channels, padding next to kept entries", "[conv][prune]") {
  std::int64_t const K = 3, F = 10;
  std::vector<float> w(static_cast<std::size_t>(K * F), 0.0f);
  for (int f = 0; f < F; ++f) w[static_cast<std::size_t>(1 * F + f)] = float(f + 1);  // channel 1 dense
  w[2 * F + 4] = 100.0f;                                                              // channel 2: one weight
  auto const p = prune_uniform(w.data(), K, F, 0.0);  // keep every nonzero
  check_pruning_invariants(p, w);
  REQUIRE(p.nnz_per_channel == F);  // channel 1 is 0 % sparse
  REQUIRE(p.kept_per_channel[0] == 0);
  REQUIRE(p.kept_per_channel[1] == F);
  REQUIRE(p.kept_per_channel[2] == 1);
  REQUIRE(p.padding == 2 * F - 1);
  REQUIRE_THROWS_AS(prune_uniform(w.data(), K, F, 0.0, prune_rule::global, 3), sdnn::error);
  // padding sits next to kept entries; an all-zero channel gets a contiguous run of zeros
  std::vector<float> v(static_cast<std::size_t>(3 * F), 0.0f);
  v[4] = 5.0f;
  v[F + 0] = 1.0f;
  v[F + 5] = -2.0f;
  v[F + 9] = 3.0f;
  auto const q = prune_uniform(v.data(), 3, F, 0.0);
  check_pruning_invariants(q, v);
  REQUIRE(q.nnz_per_channel == 3);
  REQUIRE(q.index == std::vector<std::int32_t>{3, 4, 5, 0, 5, 9, 0, 1, 2});
  REQUIRE(q.padding == 5);
}

TEST_CASE("make_conv_weights: padded-map offsets, implicit row pointer", "[conv][format]") {
  // C=2, H=4, W=5, pad 1 -> Hp=6, Wp=7; 3x3 kernel with dilation 2 needs 5x5 <= 6x7
  auto const sh = conv_shape::conv2d(2, 4, 5, 2, 3, 3, 1, 1, 2);
  std::vector<float> w(static_cast<std::size_t>(sh.weight_count()), 0.0f);
  w[0 * 18 + 0] = 1;           // k0 (c0, r0, s0)
  w[0 * 18 + 9 + 5] = 2;       // k0 (c1, r1, s2)
  w[1 * 18 + 8] = 3;           // k1 (c0, r2, s2)
  auto const p = prune_uniform(w.data(), sh.K, sh.filter_size(), 0.0);
  auto const cw = make_conv_weights<float>(sh, p);
  validate(cw);
  REQUIRE(cw.nnz_per_channel == 2);
  REQUIRE(cw.offsets[0] == 0);
  REQUIRE(cw.offsets[1] == 1 * 42 + 1 * 2 * 7 + 2 * 2);
  REQUIRE(cw.values[0] == 1.0f);
  REQUIRE(cw.values[1] == 2.0f);
  // k1: kept (c0,r2,s2) at offset 2*2*7 + 2*2 = 32, padded by a neighbour (flat index 9 = c1 r0 s0 -> 42)
  REQUIRE(cw.offsets[2] == 32);
  REQUIRE(cw.values[2] == 3.0f);
  REQUIRE(cw.values[3] == 0.0f);
  REQUIRE(cw.offsets[3] == 42);
  auto const rp = cw.csr_row_ptr();
  REQUIRE(rp == std::vector<std::int32_t>{0, 2, 4});
  auto const v = cw.view(rp);
  REQUIRE(v.cols == 2 * 6 * 7);
  sdnn::validate(v, rp.size(), cw.offsets.size(), cw.values.size());
}

TEST_CASE("conv_reference on a hand-computed case", "[conv][reference]") {
  // 1 image, C=1, 3x3 input 1..9, K=1, 2x2 kernel [[1,0],[0,-1]], stride 1, no padding
  auto const sh = conv_shape::conv2d(1, 3, 3, 1, 2, 2);
  std::vector<float> in{1, 2, 3, 4, 5, 6, 7, 8, 9}, w{1, 0, 0, -1};
  auto const y = conv_reference(sh, 1, in.data(), w.data());
  REQUIRE(y == std::vector<double>{-4, -4, -4, -4});
  float const bias = 3.0f;
  auto const z = conv_reference(sh, 1, in.data(), w.data(), &bias, true);
  REQUIRE(z == std::vector<double>{0, 0, 0, 0});
  // padding 1, stride 2: output 2x2, corners see one weight each
  auto const sp = conv_shape::conv2d(1, 3, 3, 1, 2, 2, 2, 1);
  auto const u = conv_reference(sp, 1, in.data(), w.data());
  REQUIRE(u == std::vector<double>{-1, -3, -7, -9 + 5});
  // 1-D: C=1, L=5, kernel 2 [1, 2]
  auto const s1 = conv_shape::conv1d(1, 5, 1, 2);
  std::vector<float> x{1, 2, 3, 4, 5}, k2{1, 2};
  REQUIRE(conv_reference(s1, 1, x.data(), k2.data()) == std::vector<double>{5, 8, 11, 14});
}

namespace {
// The device kernel's algorithm on the host, with its exact index arithmetic: staging of
// the [cc][sh][sw][NB] window and the tile offsets of make_tiled_entries.
std::vector<double> emulate_tiled(sparse_conv_weights<float> const& w, int N, std::vector<float> const& in, int NB,
                                  int KG, int P, int tw, int th, int rows_mode, int cc_req) {
  conv_shape const& s = w.shape;
  int const OH = s.OH(), OW = s.OW();
  int const toh = rows_mode ? th * P : th, tow = rows_mode ? tw : tw * P;
  int const sh = (toh - 1) * s.stride_h + (s.R - 1) * s.dil_h + 1, sw = (tow - 1) * s.stride_w + (s.S - 1) * s.dil_w + 1;
  int const cc = std::min(cc_req, s.C);
  auto const t = make_tiled_entries(w, cc, sh, sw);
  std::vector<double> out(static_cast<std::size_t>(N) * s.out_features(), -12345.0);
  std::vector<float> win(static_cast<std::size_t>(cc) * sh * sw * NB);
  for (int n0 = 0; n0 < N; n0 += NB)
    for (int oy0 = 0; oy0 < OH; oy0 += toh)
      for (int ox0 = 0; ox0 < OW; ox0 += tow)
        for (int k0 = 0; k0 < s.K; k0 += KG) {
          int const iy0 = oy0 * s.stride_h - s.pad_h, ix0 = ox0 * s.stride_w - s.pad_w;
          std::vector<double> acc(static_cast<std::size_t>(tw * th * KG * P * NB), 0.0);
          for (int j = 0; j < t.nchunks; ++j) {
            for (int img = 0; img < NB; ++img)
              for (int c = 0; c < cc; ++c)
                for (int r = 0; r < sh; ++r)
                  for (int col = 0; col < sw; ++col) {
                    int const n = n0 + img, cg = j * cc + c, gy = iy0 + r, gx = ix0 + col;
                    bool const ok = n < N && cg < s.C && gy >= 0 && gy < s.H && gx >= 0 && gx < s.W;
                    win[static_cast<std::size_t>(((c * sh + r) * sw + col) * NB + img)] =
                        ok ? in[((std::size_t(n) * s.C + cg) * s.H + gy) * s.W + gx] : 0.0f;
                  }
            for (int tid = 0; tid < tw * th; ++tid) {
              int const tx = tid % tw, ty = tid / tw;
              for (int kk = 0; kk < KG && k0 + kk < s.K; ++kk)
                for (int e = t.ptr[std::size_t(j) * s.K + k0 + kk]; e < t.ptr[std::size_t(j) * s.K + k0 + kk + 1]; ++e)
                  for (int q = 0; q < P; ++q) {
                    int const ly = rows_mode ? ty + q * th : ty, lx = rows_mode ? tx : tx + q * tw;
                    int const pbase = (ly * s.stride_h * sw + lx * s.stride_w) * NB;
                    int const idx = t.tile_offset[static_cast<std::size_t>(e)] * NB + pbase;
                    REQUIRE(idx >= 0);
                    REQUIRE(idx + NB <= static_cast<int>(win.size()));
                    for (int b = 0; b < NB; ++b)
                      acc[static_cast<std::size_t>(((tid * KG + kk) * P + q) * NB + b)] +=
                          double(t.values[static_cast<std::size_t>(e)]) * win[static_cast<std::size_t>(idx + b)];
                  }
            }
          }
          for (int tid = 0; tid < tw * th; ++tid) {
            int const tx = tid % tw, ty = tid / tw;
            for (int kk = 0; kk < KG && k0 + kk < s.K; ++kk)
              for (int q = 0; q < P; ++q) {
                int const oy = oy0 + (rows_mode ? ty + q * th : ty), ox = ox0 + (rows_mode ? tx : tx + q * tw);
                if (oy >= OH || ox >= OW) continue;
                for (int b = 0; b < NB && n0 + b < N; ++b)
                  out[((std::size_t(n0 + b) * s.K + k0 + kk) * OH + oy) * OW + ox] =
                      acc[static_cast<std::size_t>(((tid * KG + kk) * P + q) * NB + b)];
              }
          }
        }
  return out;
}
}  // namespace

TEST_CASE("sparse format, dense reference and the kernel's tiled algorithm agree on random shapes",
          "[conv][reference][tiled]") {
  struct cs {
    conv_shape s;
    int N;
    double sparsity;
  };
  std::vector<cs> cases = {
      {conv_shape::conv2d(3, 7, 9, 5, 3, 3, 1, 1), 3, 0.6},
      {conv_shape::conv2d(4, 9, 11, 3, 3, 3, 2, 1), 5, 0.9},
      {conv_shape::conv2d(5, 11, 8, 4, 3, 3, 1, 2, 2), 2, 0.5},
      {conv_shape::conv2d(1, 6, 6, 1, 5, 5, 1, 2), 3, 0.0},
      {conv_shape::conv2d(6, 5, 7, 9, 1, 1), 4, 0.8},
      {conv_shape::conv2d(2, 13, 5, 3, 1, 1, 2, 0), 1, 0.3},
      {conv_shape::conv1d(5, 37, 6, 2), 5, 0.7},
      {conv_shape::conv1d(4, 29, 3, 3, 1, 1, 2), 3, 0.5},
      {conv_shape::conv2d(3, 4, 4, 2, 3, 3, 1, 1), 2, 1.0},
  };
  std::uint32_t seed = 100;
  for (auto const& c : cases) {
    auto const in = small_ints(static_cast<std::size_t>(c.N * c.s.in_features()), -3, 3, seed++);
    auto const w = small_ints(static_cast<std::size_t>(c.s.weight_count()), -4, 4, seed++);
    std::vector<float> bias(static_cast<std::size_t>(c.s.K));
    for (int k = 0; k < c.s.K; ++k) bias[static_cast<std::size_t>(k)] = float(k % 3) - 1.0f;
    auto const p = prune_uniform(w.data(), c.s.K, c.s.filter_size(), c.sparsity);
    auto const cw = make_conv_weights<float>(c.s, p);
    validate(cw);
    auto const dense = conv_reference(c.s, c.N, in.data(), p.pruned.data(), bias.data(), true);
    auto const sparse = conv_reference(cw, c.N, in.data(), bias.data(), true);
    REQUIRE(dense == sparse);
    auto const plain = conv_reference(cw, c.N, in.data());
    bool const is1d = c.s.H == 1;
    struct cfg {
      int NB, KG, P, tw, th, cc;
    };
    std::vector<cfg> cfgs = is1d ? std::vector<cfg>{{2, 8, 4, 8, 1, 2}, {4, 8, 2, 32, 1, 3}, {8, 8, 1, 16, 1, 64}}
                                 : std::vector<cfg>{{2, 8, 4, 4, 2, 2}, {4, 8, 2, 3, 4, 3}, {8, 8, 1, 8, 8, 64}};
    for (auto const& g : cfgs) {
      auto const e = emulate_tiled(cw, c.N, in, g.NB, g.KG, g.P, g.tw, g.th, is1d ? 0 : 1, g.cc);
      REQUIRE(e == plain);
    }
  }
}

namespace {
// Host port of direct_sparse_conv_kernel (direct_sparse_conv.cuh) for float: the same
// block / warp / lane loops, the same float-reciprocal divmod, the window poisoned with
// NaN so a read of an unstaged position shows, chunked partial sums through the output.
void kdivmod(int n, int d, float inv, int& q, int& r) {
  q = static_cast<int>(float(n) * inv);
  r = n - q * d;
  if (r >= d) { ++q; r -= d; }
  else if (r < 0) { --q; r += d; }
}
std::vector<double> emulate_kernel(sparse_conv_weights<float> const& w, int N, std::vector<float> const& in,
                                   std::vector<float> const& bias, bool relu, direct_conv_config const& cfg) {
  conv_shape const& s = w.shape;
  auto const g = geometry_of(s, cfg);
  auto const t = make_tiled_entries(w, g.cc, g.sh, g.sw);
  int const NB = g.sub_batch, KG = g.k_group, P = g.pixels, K = s.K, OH = s.OH(), OW = s.OW();
  std::vector<float> out(static_cast<std::size_t>(N) * s.out_features(), std::nanf(""));
  int const tiles = g.tiles_x * g.tiles_y, groups = (N + NB - 1) / NB, splits = (K + g.kper - 1) / g.kper;
  int const nthreads = g.threads, nwarps = nthreads / 32, npx = cfg.tw * cfg.th;
  std::size_t const win_elems = std::size_t(g.cc) * g.sh * g.sw * NB;
  float const inv_tiles_x = 1.0f / float(g.tiles_x);
  std::size_t out_of_window = 0;  // window indices outside [0, cc*sh*sw*NB)
  int const COLS = 32 / NB, spr = (g.sw + COLS - 1) / COLS, nsegs = g.cc * g.sh * spr;
  float const inv_spr = 1.0f / float(spr), inv_sh = 1.0f / float(g.sh);
  for (int bx = 0; bx < tiles; ++bx)
    for (int by = 0; by < groups; ++by)
      for (int bz = 0; bz < splits; ++bz) {
        std::vector<float> win(win_elems, std::nanf(""));
        int tile_y, tile_x;
        kdivmod(bx, g.tiles_x, inv_tiles_x, tile_y, tile_x);
        int const n0 = by * NB, kbeg = bz * g.kper, kend = std::min(K, kbeg + g.kper);
        int const oy0 = tile_y * g.toh, ox0 = tile_x * g.tow;
        int const iy0 = oy0 * s.stride_h - s.pad_h, ix0 = ox0 * s.stride_w - s.pad_w;
        for (int j = 0; j < g.nchunks; ++j) {
          for (int tid = 0; tid < nthreads; ++tid) {  // staging
            int const lane = tid & 31, warp = tid >> 5, img = lane % NB, colo = lane / NB, n = n0 + img;
            for (int s0 = warp; s0 < nsegs; s0 += 4 * nwarps)
              for (int u = 0; u < 4; ++u) {
                int const seg = s0 + u * nwarps;
                if (seg >= nsegs) continue;
                int row, cs, c, r;
                kdivmod(seg, spr, inv_spr, row, cs);
                kdivmod(row, g.sh, inv_sh, c, r);
                int const col = cs * COLS + colo, cg = j * g.cc + c, gy = iy0 + r, gx = ix0 + col;
                if (col >= g.sw) continue;
                int const dst = ((c * g.sh + r) * g.sw + col) * NB + img;
                if (dst < 0 || std::size_t(dst) >= win_elems) { ++out_of_window; continue; }
                bool const ok = n < N && cg < s.C && gy >= 0 && gy < s.H && gx >= 0 && gx < s.W;
                win[static_cast<std::size_t>(dst)] = ok ? in[(std::size_t(n) * s.C + cg) * s.H * s.W + std::size_t(gy) * s.W + gx] : 0.0f;
              }
          }
          bool const last = j + 1 == g.nchunks;
          for (int tid = 0; tid < nthreads; ++tid) {  // compute + store
            int const ptid = tid % npx, kslot = tid / npx;
            if (kslot >= cfg.kw) continue;
            int const tx = ptid % cfg.tw, ty = ptid / cfg.tw;
            for (int kg = kbeg + kslot * KG; kg < kend; kg += cfg.kw * KG)
              for (int kk = 0; kk < KG && kg + kk < kend; ++kk) {
                int const k = kg + kk;
                for (int q = 0; q < P; ++q) {
                  int const ly = cfg.rows_mode ? ty + q * cfg.th : ty, lx = cfg.rows_mode ? tx : tx + q * cfg.tw;
                  int const pbase = (ly * s.stride_h * g.sw + lx * s.stride_w) * NB;
                  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                  for (int i = t.ptr[std::size_t(j) * K + k]; i < t.ptr[std::size_t(j) * K + k + 1]; ++i) {
                    int const idx = t.tile_offset[static_cast<std::size_t>(i)] * NB + pbase;
                    if (idx < 0 || std::size_t(idx + NB) > win_elems) { ++out_of_window; continue; }
                    for (int b = 0; b < NB; ++b)
                      acc[b] = std::fma(t.values[static_cast<std::size_t>(i)], win[static_cast<std::size_t>(idx + b)], acc[b]);
                  }
                  int const oy = oy0 + ly, ox = ox0 + lx;
                  if (oy >= OH || ox >= OW) continue;
                  for (int b = 0; b < NB && n0 + b < N; ++b) {
                    float& o = out[((std::size_t(n0 + b) * K + k) * OH + oy) * OW + ox];
                    float v = acc[b] + (j > 0 ? o : 0.0f);
                    if (last) {
                      v += bias[static_cast<std::size_t>(k)];
                      if (relu && v < 0) v = 0;
                    }
                    o = v;
                  }
                }
              }
          }
        }
      }
  REQUIRE(out_of_window == 0);
  return std::vector<double>(out.begin(), out.end());
}
}  // namespace

TEST_CASE("the device kernel's loops (host port) == reference on every tuning candidate", "[conv][tiled][plan]") {
  struct cs {
    conv_shape s;
    int N;
    double sparsity;
  };
  std::vector<cs> cases = {
      {conv_shape::conv2d(3, 17, 19, 9, 3, 3, 1, 1), 5, 0.9},   {conv_shape::conv2d(8, 33, 35, 16, 3, 3, 2, 1), 3, 0.8},
      {conv_shape::conv2d(5, 21, 18, 4, 3, 3, 1, 2, 2), 7, 0.5}, {conv_shape::conv2d(1, 40, 37, 5, 5, 5, 1, 2), 2, 0.6},
      {conv_shape::conv2d(7, 9, 11, 1, 3, 3, 1, 1), 9, 0.7},     {conv_shape::conv2d(24, 14, 14, 12, 1, 1), 6, 0.875},
      {conv_shape::conv2d(16, 15, 13, 10, 1, 1, 2, 0), 3, 0.5},  {conv_shape::conv2d(4, 8, 8, 6, 3, 3, 1, 1), 4, 1.0},
      {conv_shape::conv1d(12, 77, 10, 2), 5, 0.8},               {conv_shape::conv1d(6, 50, 4, 3, 2, 0, 2), 11, 0.5},
      {conv_shape::conv2d(64, 18, 18, 24, 3, 3, 1, 1), 3, 0.9},  // several chunks at fp32 window budgets
  };
  std::uint32_t seed = 900;
  for (auto const& c : cases) {
    auto const in = small_ints(static_cast<std::size_t>(c.N * c.s.in_features()), -3, 3, seed++);
    auto const wd = small_ints(static_cast<std::size_t>(c.s.weight_count()), -3, 3, seed++);
    auto const bias = small_ints(static_cast<std::size_t>(c.s.K), -2, 2, seed++);
    auto const p = prune_uniform(wd.data(), c.s.K, c.s.filter_size(), c.sparsity);
    auto const w = make_conv_weights<float>(c.s, p);
    auto const ref = conv_reference(c.s, c.N, in.data(), p.pruned.data(), bias.data(), true);
    auto cands = direct_conv_candidates(c.s, 4, c.N);
    auto const more = direct_conv_candidates(c.s, 2, 128, 8 * 1024);  // small windows: many chunks
    cands.insert(cands.end(), more.begin(), more.end());
    for (int v = 0; v < detail::direct_conv_variant_count; ++v) {
      direct_conv_config x;
      x.variant = v;
      x.rows_mode = c.s.OH() > 1;
      x.tw = x.rows_mode ? 5 : 40;
      x.th = x.rows_mode ? 3 : 1;
      x.cc = 3;
      x.kw = 3;
      x.ksplit = 2;
      cands.push_back(x);
    }
    for (auto const& cf : cands) {
      INFO("C=" << c.s.C << " K=" << c.s.K << " variant " << cf.variant << " tw " << cf.tw << " th " << cf.th << " cc "
                << cf.cc << " kw " << cf.kw << " ksplit " << cf.ksplit);
      REQUIRE(emulate_kernel(w, c.N, in, bias, true, cf) == ref);
    }
  }
}

TEST_CASE("tuning candidates of the benchmark layers are launchable", "[conv][plan]") {
  std::vector<conv_shape> shapes;
  int const vgg[9][3] = {{3, 224, 64},   {64, 224, 64},  {64, 112, 128}, {128, 112, 128}, {128, 56, 256},
                         {256, 56, 256}, {256, 28, 512}, {512, 28, 512}, {512, 14, 512}};
  for (auto const& l : vgg) shapes.push_back(conv_shape::conv2d(l[0], l[1], l[1], l[2], 3, 3, 1, 1));
  shapes.push_back(conv_shape::conv2d(1024, 14, 14, 256, 1, 1));
  shapes.push_back(conv_shape::conv2d(64, 56, 56, 256, 1, 1));
  shapes.push_back(conv_shape::conv1d(256, 1024, 256, 3));
  for (auto const& s : shapes)
    for (std::size_t eb : {std::size_t(4), std::size_t(2)})
      for (std::int64_t batch : {1, 9, 128}) {
        auto const cands = direct_conv_candidates(s, eb, batch);
        REQUIRE(cands.size() >= std::size_t(detail::direct_conv_variant_count));
        for (auto const& c : cands) {
          auto const g = geometry_of(s, c);
          REQUIRE(c.kw * c.tw * c.th <= 256);
          REQUIRE(g.threads % 32 == 0);
          REQUIRE(std::size_t(g.cc) * g.sh * g.sw * g.sub_batch * eb <= 227 * 1024);  // Hopper opt-in limit
          REQUIRE(std::int64_t(g.tiles_x) * g.tiles_y < (std::int64_t(1) << 22));
          REQUIRE(g.kper % g.k_group == 0);
        }
      }
}
