// Direct sparse convolution, host side: uniform-nnz magnitude pruning, the padded-offset
// weight format, the tile re-addressing the device kernel uses (emulated here with the
// kernel's exact index arithmetic), and the host reference convolution.
// All data are small integers, so every float comparison is exact (==).
#include "sdnn_catch.hpp"
#include "sdnn_conv_fixtures.hpp"

#include <sdnn/formats/conv_shape.hpp>
#include <sdnn/formats/conv_weights.hpp>
#include <sdnn/ops/conv.hpp>
#include <sdnn/ops/prune.hpp>
#include <sdnn/reference/conv.hpp>

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

namespace {
using sdnn_test::tie_heavy;  // tests/common/sdnn_conv_fixtures.hpp

// The device pruning algorithm of ops/prune.cuh (kernels/prune.cuh), step by step on the host with the same
// helpers (magnitude_key, keep_target, finish_report, pad_order_key): a stable sort by
// (segment, magnitude key) as cub::DeviceRadixSort does, rank selection, and the padding
// kernel's prev / next scans and binary search for the threshold key.
pruning_result device_algorithm_on_host(std::vector<float> const& w, std::int64_t K, std::int64_t F, double sparsity,
                                        prune_rule rule, std::int64_t uniform_nnz) {
  detail::check_prune_args(K, F, sparsity, rule, uniform_nnz);
  std::int64_t const KF = K * F;
  bool const per_channel = rule == prune_rule::per_channel;
  std::vector<std::uint64_t> key(static_cast<std::size_t>(KF));
  for (std::int64_t g = 0; g < KF; ++g)
    key[static_cast<std::size_t>(g)] =
        (std::uint64_t(per_channel ? g / F : 0) << 32) | detail::magnitude_key(w[static_cast<std::size_t>(g)]);
  std::vector<std::int64_t> order(static_cast<std::size_t>(KF));
  std::iota(order.begin(), order.end(), std::int64_t(0));
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return key[static_cast<std::size_t>(a)] < key[static_cast<std::size_t>(b)];
  });
  std::int64_t const target = detail::keep_target(rule, sparsity, K, F);
  std::vector<char> kept(static_cast<std::size_t>(KF), 0);
  for (std::int64_t p = 0; p < KF; ++p) {
    std::int64_t const g = order[static_cast<std::size_t>(p)], rank = per_channel ? p % F : p;
    kept[static_cast<std::size_t>(g)] = rank < target && std::uint32_t(key[static_cast<std::size_t>(g)]) != 0xFFFFFFFFu;
  }
  pruning_result r;
  r.K = K;
  r.filter_size = F;
  r.target_sparsity = sparsity;
  r.pruned.assign(static_cast<std::size_t>(KF), 0.0f);
  r.kept_per_channel.assign(static_cast<std::size_t>(K), 0);
  for (std::int64_t g = 0; g < KF; ++g)
    if (kept[static_cast<std::size_t>(g)]) {
      r.pruned[static_cast<std::size_t>(g)] = w[static_cast<std::size_t>(g)];
      ++r.kept_per_channel[static_cast<std::size_t>(g / F)];
    }
  detail::finish_report(r, rule, uniform_nnz);
  std::int64_t const nnz = r.nnz_per_channel;
  for (std::int64_t k = 0; k < K; ++k) {
    char const* kf = kept.data() + k * F;
    std::int64_t const need = nnz - r.kept_per_channel[static_cast<std::size_t>(k)];
    std::vector<std::int64_t> pk(static_cast<std::size_t>(F), -1);
    if (need > 0) {
      std::int64_t prev = -1;
      for (std::int64_t j = 0; j < F; ++j) {
        if (kf[j]) prev = j;
        pk[static_cast<std::size_t>(j)] = prev;
      }
      std::int64_t next = F;
      for (std::int64_t j = F - 1; j >= 0; --j) {
        if (kf[j]) next = j;
        pk[static_cast<std::size_t>(j)] = kf[j] ? -1 : detail::pad_order_key(j, pk[static_cast<std::size_t>(j)], next, F);
      }
    }
    std::int64_t lo = -1, hi = 2 * F * F + 2 * F;
    if (need <= 0) hi = -1;
    while (hi - lo > 1) {
      std::int64_t const mid = lo + (hi - lo) / 2, c = std::count_if(pk.begin(), pk.end(), [&](std::int64_t x) {
        return x >= 0 && x <= mid;
      });
      (c >= need ? hi : lo) = mid;
    }
    for (std::int64_t j = 0; j < F; ++j)
      if (kf[j] || (pk[static_cast<std::size_t>(j)] >= 0 && pk[static_cast<std::size_t>(j)] <= hi))
        r.index.push_back(static_cast<std::int32_t>(j));
  }
  return r;
}

// Every field equal; pruned compared bit for bit (no -0 for +0).
void require_same_pruning(pruning_result const& a, pruning_result const& b) {
  REQUIRE(a.K == b.K);
  REQUIRE(a.filter_size == b.filter_size);
  REQUIRE(a.nnz_per_channel == b.nnz_per_channel);
  REQUIRE(a.kept_per_channel == b.kept_per_channel);
  REQUIRE(a.kept == b.kept);
  REQUIRE(a.padding == b.padding);
  REQUIRE(a.target_sparsity == b.target_sparsity);
  REQUIRE(a.achieved_sparsity == b.achieved_sparsity);
  REQUIRE(a.stored_density == b.stored_density);
  REQUIRE(a.padding_overhead == b.padding_overhead);
  REQUIRE(a.index == b.index);
  REQUIRE(a.pruned.size() == b.pruned.size());
  REQUIRE(std::memcmp(a.pruned.data(), b.pruned.data(), a.pruned.size() * sizeof(float)) == 0);
}
}  // namespace

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

TEST_CASE("the device pruning algorithm (host port of ops/prune.cuh) == prune_uniform on tie-heavy tensors",
          "[conv][prune]") {
  struct kf {
    std::int64_t K, F;
  };
  std::uint32_t seed = 31;
  for (auto const [K, F] : {kf{1, 1}, kf{1, 9}, kf{6, 1}, kf{7, 45}, kf{16, 576}, kf{3, 1000}, kf{40, 27}})
    for (double s : {0.0, 0.3, 0.5, 0.9, 0.95, 1.0})
      for (auto rule : {prune_rule::global, prune_rule::per_channel}) {
        auto const w = tie_heavy(K, F, seed++);
        auto const host = prune_uniform(w.data(), K, F, s, rule);
        INFO("K=" << K << " F=" << F << " sparsity " << s << " rule " << int(rule));
        check_pruning_invariants(host, w);
        require_same_pruning(device_algorithm_on_host(w, K, F, s, rule, -1), host);
        if (rule == prune_rule::global)
          for (std::int64_t u : {host.nnz_per_channel, (host.nnz_per_channel + F + 1) / 2, F}) {
            INFO("uniform_nnz " << u);
            auto const hu = prune_uniform(w.data(), K, F, s, rule, u);
            check_pruning_invariants(hu, w);
            require_same_pruning(device_algorithm_on_host(w, K, F, s, rule, u), hu);
          }
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
// NaN at the start of every block so a read of an unstaged position shows, and both ways
// sums cross channel chunks (config.sums_in_registers): partial sums through the output,
// or the per-pass chunk loop whose odd passes walk the chunks backwards and reuse the
// chunk left in the window (a wrong reuse reads the wrong channels and shows).
void kdivmod(int n, int d, float inv, int& q, int& r) {
  q = static_cast<int>(float(n) * inv);
  r = n - q * d;
  if (r >= d) { ++q; r -= d; }
  else if (r < 0) { --q; r += d; }
}
struct emulated {
  std::vector<double> out;
  int max_stagings = 0;  // windows staged by one block, the most over the grid
};
emulated emulate_kernel(sparse_conv_weights<float> const& w, int N, std::vector<float> const& in,
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
  // as direct_sparse_conv computes them into direct_conv_params
  int const COLS = 32 / NB, spr = (g.sw + COLS - 1) / COLS, nsegs = g.cc * g.sh * spr;
  float const inv_spr = 1.0f / float(spr), inv_sh = 1.0f / float(g.sh);
  int max_stagings = 0;
  for (int bx = 0; bx < tiles; ++bx)
    for (int by = 0; by < groups; ++by)
      for (int bz = 0; bz < splits; ++bz) {
        std::vector<float> win(win_elems, std::nanf(""));
        int stagings = 0;
        int tile_y, tile_x;
        kdivmod(bx, g.tiles_x, inv_tiles_x, tile_y, tile_x);
        int const n0 = by * NB, kbeg = bz * g.kper, kend = std::min(K, kbeg + g.kper);
        int const oy0 = tile_y * g.toh, ox0 = tile_x * g.tow;
        int const iy0 = oy0 * s.stride_h - s.pad_h, ix0 = ox0 * s.stride_w - s.pad_w;
        auto stage = [&](int j) {
          ++stagings;
          for (int tid = 0; tid < nthreads; ++tid) {
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
        };
        // acc[((ptid * KG + kk) * P + q) * NB + b] += chunk j of k-group kg, for one slot
        auto accumulate = [&](int j, int kg, std::vector<float>& acc) {
          for (int ptid = 0; ptid < npx; ++ptid) {
            int const tx = ptid % cfg.tw, ty = ptid / cfg.tw;
            for (int kk = 0; kk < KG && kg + kk < kend; ++kk)
              for (int q = 0; q < P; ++q) {
                int const ly = cfg.rows_mode ? ty + q * cfg.th : ty, lx = cfg.rows_mode ? tx : tx + q * cfg.tw;
                int const pbase = (ly * s.stride_h * g.sw + lx * s.stride_w) * NB;
                for (int i = t.ptr[std::size_t(j) * K + kg + kk]; i < t.ptr[std::size_t(j) * K + kg + kk + 1]; ++i) {
                  int const idx = t.tile_offset[static_cast<std::size_t>(i)] * NB + pbase;
                  if (idx < 0 || std::size_t(idx + NB) > win_elems) { ++out_of_window; continue; }
                  for (int b = 0; b < NB; ++b) {
                    float& a = acc[static_cast<std::size_t>(((ptid * KG + kk) * P + q) * NB + b)];
                    a = std::fma(t.values[static_cast<std::size_t>(i)], win[static_cast<std::size_t>(idx + b)], a);
                  }
                }
              }
          }
        };
        auto store = [&](int kg, std::vector<float> const& acc, bool add_previous, bool last) {
          for (int ptid = 0; ptid < npx; ++ptid) {
            int const tx = ptid % cfg.tw, ty = ptid / cfg.tw;
            for (int kk = 0; kk < KG && kg + kk < kend; ++kk)
              for (int q = 0; q < P; ++q) {
                int const ly = cfg.rows_mode ? ty + q * cfg.th : ty, lx = cfg.rows_mode ? tx : tx + q * cfg.tw;
                int const oy = oy0 + ly, ox = ox0 + lx;
                if (oy >= OH || ox >= OW || ly >= g.toh || lx >= g.tow) continue;
                for (int b = 0; b < NB && n0 + b < N; ++b) {
                  float& o = out[((std::size_t(n0 + b) * K + kg + kk) * OH + oy) * OW + ox];
                  float v = acc[static_cast<std::size_t>(((ptid * KG + kk) * P + q) * NB + b)] + (add_previous ? o : 0.0f);
                  if (last) {
                    v += bias[static_cast<std::size_t>(kg + kk)];
                    if (relu && v < 0) v = 0;
                  }
                  o = v;
                }
              }
          }
        };
        std::size_t const acc_size = static_cast<std::size_t>(npx) * KG * P * NB;
        if (cfg.sums_in_registers) {
          int const npasses = ((kend - kbeg + KG - 1) / KG + cfg.kw - 1) / cfg.kw;
          for (int pass = 0; pass < npasses; ++pass) {
            std::vector<std::vector<float>> acc(static_cast<std::size_t>(cfg.kw), std::vector<float>(acc_size, 0.0f));
            for (int jj = 0; jj < g.nchunks; ++jj) {
              int const j = (pass & 1) ? g.nchunks - 1 - jj : jj;
              if (pass == 0 || jj > 0) stage(j);
              for (int kslot = 0; kslot < cfg.kw; ++kslot) {
                int const kg = kbeg + (pass * cfg.kw + kslot) * KG;
                if (kg < kend) accumulate(j, kg, acc[static_cast<std::size_t>(kslot)]);
              }
            }
            for (int kslot = 0; kslot < cfg.kw; ++kslot) {
              int const kg = kbeg + (pass * cfg.kw + kslot) * KG;
              if (kg < kend) store(kg, acc[static_cast<std::size_t>(kslot)], false, true);
            }
          }
        } else {
          for (int j = 0; j < g.nchunks; ++j) {
            stage(j);
            for (int kslot = 0; kslot < cfg.kw; ++kslot)
              for (int kg = kbeg + kslot * KG; kg < kend; kg += cfg.kw * KG) {
                std::vector<float> acc(acc_size, 0.0f);
                accumulate(j, kg, acc);
                store(kg, acc, j > 0, j + 1 == g.nchunks);
              }
          }
        }
        max_stagings = std::max(max_stagings, stagings);
      }
  REQUIRE(out_of_window == 0);
  return {std::vector<double>(out.begin(), out.end()), max_stagings};
}
}  // namespace

TEST_CASE("the device kernel's loops (host port) == reference on every tuning candidate, both chunk orders",
          "[conv][tiled][plan]") {
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
      {conv_shape::conv2d(64, 18, 18, 24, 3, 3, 1, 1), 2, 0.9},  // several chunks at fp32 window budgets
      {conv_shape::conv2d(40, 9, 10, 70, 3, 3, 1, 1), 3, 0.8},   // several chunks and several passes
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
    for (int v = 0; v < detail::direct_conv_variant_count; ++v)
      for (int regs : {0, 1}) {
        direct_conv_config x;
        x.variant = v;
        x.rows_mode = c.s.OH() > 1;
        x.tw = x.rows_mode ? 5 : 40;
        x.th = x.rows_mode ? 3 : 1;
        x.cc = 3;
        x.kw = 3;
        x.ksplit = 2;
        x.sums_in_registers = regs;
        cands.push_back(x);
        if (!regs) continue;
        x.kw = 1;  // one slot: a pass per k-group
        x.ksplit = 1;
        x.cc = 2;
        cands.push_back(x);
      }
    for (auto const& cf : cands) {
      INFO("C=" << c.s.C << " K=" << c.s.K << " variant " << cf.variant << " tw " << cf.tw << " th " << cf.th << " cc "
                << cf.cc << " kw " << cf.kw << " ksplit " << cf.ksplit << " sums_in_registers " << cf.sums_in_registers);
      auto const e = emulate_kernel(w, c.N, in, bias, true, cf);
      REQUIRE(e.out == ref);
      REQUIRE(e.max_stagings == geometry_of(c.s, cf).stagings);
    }
  }
}

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
