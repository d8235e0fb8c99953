// Direct sparse convolution, host side: uniform-nnz magnitude pruning, the padded-offset
// weight format, the tuning candidates' geometry, and the host reference convolution.
// The device kernel and the device pruning are tested as themselves (launched) in
// tests/cuda/test_conv.cu, not through host copies.
// All data are small integers, so every float comparison is exact (==).
#include "sdnn_catch.hpp"
#include "sdnn_conv_fixtures.hpp"

#include <sdnn/conv/shape.hpp>
#include <sdnn/conv/weights.hpp>
#include <sdnn/conv/op/direct_sparse.hpp>
#include <sdnn/train/op/prune_uniform.hpp>
#include <sdnn/conv/reference/convolution.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

using namespace sdnn::conv;

namespace {
using sdnn_test::small_ints;  // tests/common/sdnn_conv_fixtures.hpp
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

TEST_CASE("pad_order_key orders the non-kept indices exactly as pad_channel adds them", "[conv][prune]") {
  auto check = [](std::int64_t F, std::vector<std::int32_t> const& kept) {
    std::vector<char> is_kept(static_cast<std::size_t>(F), 0);
    for (auto i : kept) is_kept[static_cast<std::size_t>(i)] = 1;
    std::vector<std::pair<std::int64_t, std::int32_t>> keyed;  // (key, j) of the non-kept j
    for (std::int64_t j = 0; j < F; ++j) {
      if (is_kept[static_cast<std::size_t>(j)]) continue;
      std::int64_t prev = -1, next = F;
      for (auto i : kept) {
        if (i < j) prev = i;
        if (i > j && next == F) next = i;
      }
      std::int64_t const key = detail::pad_order_key(j, prev, next, F);
      REQUIRE(key >= 0);
      REQUIRE(key < 2 * F * F + 2 * F);  // the padding kernel's search bound
      keyed.push_back({key, static_cast<std::int32_t>(j)});
    }
    std::sort(keyed.begin(), keyed.end());
    for (std::size_t i = 1; i < keyed.size(); ++i) REQUIRE(keyed[i - 1].first < keyed[i].first);  // distinct
    for (std::size_t need = 0; need <= keyed.size(); ++need) {
      std::vector<std::int32_t> by_key = kept;
      for (std::size_t i = 0; i < need; ++i) by_key.push_back(keyed[i].second);
      std::sort(by_key.begin(), by_key.end());
      INFO("F=" << F << " kept " << kept.size() << " need " << need);
      REQUIRE(detail::pad_channel(kept, F, static_cast<std::int64_t>(need)) == by_key);
    }
  };
  for (std::int64_t F = 1; F <= 10; ++F)  // every kept set
    for (std::uint32_t mask = 0; mask < (1u << F); ++mask) {
      std::vector<std::int32_t> kept;
      for (std::int32_t i = 0; i < F; ++i)
        if (mask >> i & 1u) kept.push_back(i);
      check(F, kept);
    }
  std::mt19937 g(17);
  for (int t = 0; t < 300; ++t) {
    std::int64_t const F = std::uniform_int_distribution<std::int64_t>(11, 90)(g);
    double const density = std::uniform_real_distribution<double>(0.0, 0.5)(g);
    std::vector<std::int32_t> kept;
    for (std::int32_t i = 0; i < F; ++i)
      if (std::uniform_real_distribution<double>(0.0, 1.0)(g) < density) kept.push_back(i);
    check(F, kept);
  }
}

TEST_CASE("prune_uniform rejects NaN weights and uniform_nnz outside [-1, F]", "[conv][prune]") {
  std::vector<float> w(12, 1.0f);
  w[7] = std::nanf("");
  REQUIRE_THROWS_AS(prune_uniform(w.data(), 3, 4, 0.5), sdnn::error);
  w[7] = 1.0f;
  REQUIRE_NOTHROW(prune_uniform(w.data(), 3, 4, 0.5));
  REQUIRE_THROWS_AS(prune_uniform(w.data(), 3, 4, 0.5, prune_rule::global, 5), sdnn::error);
  REQUIRE_THROWS_AS(prune_uniform(w.data(), 3, 4, 0.5, prune_rule::global, -2), sdnn::error);
  REQUIRE_THROWS_AS(prune_uniform(w.data(), 3, 4, 0.5, prune_rule::per_channel, 4), sdnn::error);
  REQUIRE(detail::is_nan_bits(std::nanf("")));
  REQUIRE(!detail::is_nan_bits(std::numeric_limits<float>::infinity()));
  // the magnitude key: descending |w|, both zeros last
  REQUIRE(detail::magnitude_key(-3.0f) == detail::magnitude_key(3.0f));
  REQUIRE(detail::magnitude_key(3.0f) < detail::magnitude_key(2.5f));
  REQUIRE(detail::magnitude_key(std::numeric_limits<float>::denorm_min()) < detail::magnitude_key(-0.0f));
  REQUIRE(detail::magnitude_key(-0.0f) == 0xFFFFFFFFu);
  REQUIRE(detail::magnitude_key(0.0f) == 0xFFFFFFFFu);
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

// The kernel's tiled algorithm on these shapes and seeds is tested on the device
// (tests/cuda/test_conv.cu, "direct_sparse_conv == sparse reference on the random shapes of
// the host format test"); here the host formats.
TEST_CASE("sparse format and dense reference agree on random shapes", "[conv][reference]") {
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
    // without bias / ReLU: the sparse reference is the dense one with zero bias
    std::vector<float> const zero(static_cast<std::size_t>(c.s.K), 0.0f);
    REQUIRE(conv_reference(cw, c.N, in.data()) == conv_reference(c.s, c.N, in.data(), p.pruned.data(), zero.data(), false));
  }
}

// The kernel on every tuning candidate, both chunk orders, is tested on the device
// (tests/cuda/test_conv.cu, "direct_sparse_conv == reference on every tuning candidate,
// both chunk orders"); the staging count the host port used to check is the formula below.
TEST_CASE("tuning candidates: both chunk orders where there are several chunks, none that rounds __half per chunk",
          "[conv][plan]") {
  for (auto const& s : {conv_shape::conv2d(256, 56, 56, 256, 3, 3, 1, 1), conv_shape::conv2d(64, 224, 224, 64, 3, 3, 1, 1),
                        conv_shape::conv2d(3, 224, 224, 64, 3, 3, 1, 1), conv_shape::conv1d(256, 1024, 256, 3)})
    for (std::size_t eb : {std::size_t(4), std::size_t(2)})
      for (bool allow : {true, false}) {
        auto const cands = direct_conv_candidates(s, eb, 128, direct_conv_window_budget, allow);
        std::size_t multi = 0;
        for (std::size_t i = 0; i < cands.size(); ++i) {
          auto const& c = cands[i];
          auto const g = geometry_of(s, c);
          INFO("C=" << s.C << " elem " << eb << " allow " << allow << " candidate " << i);
          if (g.nchunks == 1) {
            REQUIRE(c.sums_in_registers == 0);  // the measured single-chunk kernel
            REQUIRE(g.stagings == 1);
            continue;
          }
          if (c.sums_in_registers == 0) {
            REQUIRE(allow);
            // right after its sums_in_registers = 1 twin (same block shape)
            REQUIRE(i > 0);
            auto const& t = cands[i - 1];
            REQUIRE(t.sums_in_registers == 1);
            REQUIRE((t.variant == c.variant && t.tw == c.tw && t.th == c.th && t.cc == c.cc && t.kw == c.kw &&
                     t.ksplit == c.ksplit));
            continue;
          }
          ++multi;
          REQUIRE(g.stagings == g.nchunks + (g.passes - 1) * (g.nchunks - 1));
          if (allow) {
            REQUIRE(i + 1 < cands.size());
            REQUIRE(cands[i + 1].sums_in_registers == 0);
          }
        }
        if (s.C >= 64) REQUIRE(multi > 0);  // these layers do need several chunks at 100 KB
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

namespace {
// x rounded to the nearest __half (ties to even), for |x| <= 65504.
double round_to_half(double x) {
  if (x == 0.0) return x;
  int e = 0;
  std::frexp(x, &e);                             // |x| = m * 2^e, m in [0.5, 1)
  double const q = std::ldexp(1.0, std::max(e - 11, -24));  // 11 significant bits; subnormal step 2^-24
  return std::nearbyint(x / q) * q;
}
}  // namespace

// The case of tests/cuda/test_conv.cu "direct_sparse_conv __half with float accumulation
// over several channel chunks is rounded to half once" (same generator, seeds, pruning and
// configs): exact integer sums + 0.25 below 2^24, so float accumulation is exact and a
// single rounding gives round_to_half(ref) everywhere, while rounding the partial sums to
// half after every chunk (what a round trip through the __half output did) misses it on
// many outputs for every multi-chunk config. So the device test fails on the old kernel.
TEST_CASE("the device test of __half with float accumulation over several chunks catches per-chunk rounding",
          "[conv][half][plan]") {
  auto const s = conv_shape::conv2d(256, 12, 20, 16, 3, 3, 1, 1);
  int const N = 4;
  auto const in = small_ints(static_cast<std::size_t>(N * s.in_features()), 0, 6, 4242);
  auto const wd = small_ints(static_cast<std::size_t>(s.weight_count()), 0, 6, 4243);
  auto const p = prune_uniform(wd.data(), s.K, s.filter_size(), 0.6);
  float const bias = 0.25f;
  // per-channel sums of every output, then chunk sums for each config's cc
  int const OH = s.OH(), OW = s.OW();
  std::size_t const nout = static_cast<std::size_t>(N) * s.out_features();
  std::vector<double> per_c(nout * static_cast<std::size_t>(s.C), 0.0);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < s.K; ++k)
      for (int oy = 0; oy < OH; ++oy)
        for (int ox = 0; ox < OW; ++ox) {
          std::size_t const o = ((std::size_t(n) * s.K + k) * OH + oy) * OW + ox;
          for (int c = 0; c < s.C; ++c) {
            double acc = 0;
            for (int r = 0; r < 3; ++r)
              for (int q = 0; q < 3; ++q) {
                int const iy = oy - 1 + r, ix = ox - 1 + q;
                if (iy < 0 || iy >= s.H || ix < 0 || ix >= s.W) continue;
                acc += double(p.pruned[((std::size_t(k) * s.C + c) * 3 + r) * 3 + q]) *
                       in[((std::size_t(n) * s.C + c) * s.H + iy) * s.W + ix];
              }
            per_c[o * s.C + c] = acc;
          }
        }
  double maxref = 0;
  std::vector<double> ref(nout);
  for (std::size_t o = 0; o < nout; ++o) {
    double t = bias;
    for (int c = 0; c < s.C; ++c) t += per_c[o * s.C + c];
    ref[o] = t;
    maxref = std::max(maxref, t);
    REQUIRE(t >= 0);  // ReLU is the identity here
  }
  REQUIRE(maxref < 65504);            // no overflow to inf
  REQUIRE(maxref < double(1 << 22));  // float sums (integers + 0.25) are exact
  REQUIRE(maxref > 8192);             // several half steps of 8 and more: rounding matters
  auto configs = direct_conv_candidates(s, 2, N, direct_conv_window_budget, false);
  for (int v = 0; v < detail::direct_conv_variant_count; ++v)
    for (int cc : {16, 50, 100}) {
      direct_conv_config c;
      c.variant = v;
      c.tw = 8;
      c.th = 2;
      c.cc = cc;
      c.kw = 2;
      configs.push_back(c);
    }
  std::size_t multi = 0;
  for (auto const& c : configs) {
    auto const g = geometry_of(s, c);
    if (g.nchunks == 1) continue;
    ++multi;
    std::size_t mismatches = 0;
    for (std::size_t o = 0; o < nout; ++o) {
      double stored = 0;
      for (int j = 0; j < g.nchunks; ++j) {
        double part = 0;
        for (int ch = j * g.cc; ch < std::min(s.C, (j + 1) * g.cc); ++ch) part += per_c[o * s.C + ch];
        stored = round_to_half(stored + part + (j + 1 == g.nchunks ? bias : 0.0));
      }
      mismatches += stored != round_to_half(ref[o]);
      REQUIRE(std::fabs(round_to_half(ref[o]) - ref[o]) <= std::ldexp(std::fabs(ref[o]), -11));  // one rounding
    }
    INFO("variant " << c.variant << " cc " << g.cc << " chunks " << g.nchunks);
    REQUIRE(mismatches > nout / 100);
  }
  REQUIRE(multi >= 8);
}
