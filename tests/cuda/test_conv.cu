// Direct sparse convolution on the device against the host reference (and cuDNN).
// Small-integer data: float results are exact (==). __half results are exact too while
// every partial sum stays an integer of magnitude <= 2048 (the shapes below keep
// |sum| <= 4*3*C*R*S*... well under that); real-valued __half runs use the stated
// tolerances: |y - ref| <= tol * (sum |w||x| + |bias|), tol = 1e-3 (float accumulation),
// 2e-2 (half accumulation). Outputs are poisoned (all bits set = NaN) before each run.
// __half with float accumulation over several channel chunks is checked against ONE half
// rounding of the exact result (the old kernel rounded once per chunk; the host test
// "... catches per-chunk rounding" shows that this data would expose it). The device
// pruning (train/op/prune_uniform.cuh) must equal the host prune_uniform field for field.
#include "sdnn_gpu_test.cuh"
#include "sdnn_conv_fixtures.hpp"

#include <sdnn/conv/weights.hpp>
#include <sdnn/conv/op/direct_sparse.cuh>
#include <sdnn/train/op/prune_uniform.cuh>
#include <sdnn/train/op/prune_uniform.hpp>
#include <sdnn/conv/reference/convolution.hpp>
#include <sdnn/conv/sparse_conv.cuh>
#if defined(SDNN_HAS_CUDNN)
#include <sdnn/conv/cudnn_conv.cuh>
#endif

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

using namespace sdnn;
using namespace sdnn::conv;

namespace {
using sdnn_test::small_ints;  // tests/common/sdnn_conv_fixtures.hpp
using sdnn_test::to_t;
using sdnn_test::to_f;
using sdnn_test::reals;
using sdnn_test::upload;  // tests/common/sdnn_gpu_test.cuh

// Runs the kernel for one forced config (through its direct_conv_plan); returns the output as floats.
template <class T, class Acc>
std::vector<float> run_direct(sparse_conv_weights<T> const& w, int N, std::vector<T> const& in,
                              std::vector<float> const& bias, bool relu, direct_conv_config const& c) {
  cuda_exec ex;
  direct_conv_plan<T, Acc> const plan(w, c, ex);  // throws what can_implement says
  auto const din = upload(in, ex);
  auto const db = upload(bias, ex);
  device_buffer<T> dout(static_cast<std::size_t>(N) * w.shape.out_features(), ex);
  if (dout.size()) SDNN_CUDA_CHECK(cudaMemsetAsync(dout.data(), 0xFF, dout.size() * sizeof(T), ex.stream));
  plan.run(ex, N, din.data(), bias.empty() ? nullptr : db.data(), relu, dout.data());
  return to_f(sdnn_test::to_vector(dout));
}

struct conv_case {
  conv_shape s;
  int N;
  double sparsity;
};
std::vector<conv_case> edge_cases() {
  return {
      {conv_shape::conv2d(3, 17, 19, 9, 3, 3, 1, 1), 5, 0.9},         // odd sizes, K not a multiple of 8
      {conv_shape::conv2d(8, 33, 35, 16, 3, 3, 2, 1), 3, 0.8},        // stride 2
      {conv_shape::conv2d(5, 21, 18, 4, 3, 3, 1, 2, 2), 7, 0.5},      // dilation 2
      {conv_shape::conv2d(1, 40, 37, 5, 5, 5, 1, 2), 2, 0.6},         // C = 1, 5x5
      {conv_shape::conv2d(7, 9, 11, 1, 3, 3, 1, 1), 9, 0.7},          // K = 1, batch 9
      {conv_shape::conv2d(24, 14, 14, 12, 1, 1), 6, 0.875},           // 1x1
      {conv_shape::conv2d(16, 15, 13, 10, 1, 1, 2, 0), 3, 0.5},       // 1x1 stride 2
      {conv_shape::conv2d(4, 8, 8, 6, 3, 3, 1, 1), 4, 0.0},           // dense
      {conv_shape::conv2d(4, 8, 8, 6, 3, 3, 1, 1), 4, 1.0},           // every channel 100 % sparse
      {conv_shape::conv1d(12, 77, 10, 2), 5, 0.8},                    // 1-D kernel 2
      {conv_shape::conv1d(9, 300, 17, 3, 1, 1), 3, 0.9},              // 1-D kernel 3, padding
      {conv_shape::conv1d(6, 50, 4, 3, 2, 0, 2), 11, 0.5},            // 1-D stride 2, dilation 2
  };
}

// Every candidate config of every variant, plus odd shapes (partial warps, small chunks),
// each forced one with both ways sums cross chunks (sums_in_registers 1 and 0).
std::vector<direct_conv_config> all_configs(conv_shape const& s, std::size_t elem) {
  auto v = direct_conv_candidates(s, elem);
  for (int var = 0; var < 4; ++var)
    for (int regs : {1, 0}) {
      direct_conv_config c;
      c.variant = var;
      c.sums_in_registers = regs;
      c.rows_mode = s.OH() > 1 ? 1 : 0;
      c.tw = c.rows_mode ? 5 : 40;
      c.th = c.rows_mode ? 3 : 1;
      c.cc = 2;
      v.push_back(c);
      c.kw = 3;       // k-group slots in parallel, a partial last warp
      c.ksplit = 2;   // output channels split over blocks
      c.cc = 3;
      v.push_back(c);
      c.kw = 1;       // one slot: one pass per k-group (odd passes walk the chunks backwards)
      c.ksplit = 1;
      v.push_back(c);
    }
  return v;
}
// __half data with float accumulation refuses partial sums through the output.
bool facc_refuses(conv_shape const& s, direct_conv_config const& c) {
  return !c.sums_in_registers && geometry_of(s, c).nchunks > 1;
}
}  // namespace

TEST_CASE("direct_sparse_conv float == host reference on edge-case shapes, every variant and block shape",
          "[cuda][conv]") {
  SDNN_REQUIRE_DEVICE();
  std::uint32_t seed = 7;
  for (auto const& cs : edge_cases()) {
    auto const in = small_ints(static_cast<std::size_t>(cs.N * cs.s.in_features()), -3, 3, seed++);
    auto const wd = small_ints(static_cast<std::size_t>(cs.s.weight_count()), -4, 4, seed++);
    std::vector<float> bias(static_cast<std::size_t>(cs.s.K));
    for (int k = 0; k < cs.s.K; ++k) bias[static_cast<std::size_t>(k)] = float(k % 5) - 2.0f;
    auto const p = prune_uniform(wd.data(), cs.s.K, cs.s.filter_size(), cs.sparsity);
    auto const w = make_conv_weights<float>(cs.s, p);
    for (bool relu : {false, true}) {
      auto const ref = conv_reference(cs.s, cs.N, in.data(), p.pruned.data(), bias.data(), relu);
      for (auto const& c : all_configs(cs.s, sizeof(float))) {
        auto const y = run_direct<float, float>(w, cs.N, in, bias, relu, c);
        REQUIRE(y.size() == ref.size());
        std::size_t bad = 0;
        for (std::size_t i = 0; i < y.size(); ++i) bad += double(y[i]) != ref[i];
        INFO("C=" << cs.s.C << " H=" << cs.s.H << " W=" << cs.s.W << " K=" << cs.s.K << " R=" << cs.s.R << " S="
                  << cs.s.S << " variant " << c.variant << " tw " << c.tw << " th " << c.th << " cc " << c.cc
                  << " kw " << c.kw << " ksplit " << c.ksplit << " sums_in_registers " << c.sums_in_registers);
        REQUIRE(bad == 0);
      }
    }
  }
}

TEST_CASE("direct_sparse_conv __half (half and float accumulation) == host reference on small integers",
          "[cuda][conv][half]") {
  SDNN_REQUIRE_DEVICE();
  std::uint32_t seed = 99;
  for (auto const& cs : edge_cases()) {
    auto const in = small_ints(static_cast<std::size_t>(cs.N * cs.s.in_features()), -2, 2, seed++);
    auto const wd = small_ints(static_cast<std::size_t>(cs.s.weight_count()), -2, 2, seed++);
    std::vector<float> bias(static_cast<std::size_t>(cs.s.K), 1.0f);
    auto const p = prune_uniform(wd.data(), cs.s.K, cs.s.filter_size(), cs.sparsity);
    auto const w = make_conv_weights<__half>(cs.s, p);
    auto const ref = conv_reference(cs.s, cs.N, in.data(), p.pruned.data(), bias.data(), true);
    auto const hin = to_t<__half>(in);
    for (auto const& c : all_configs(cs.s, sizeof(__half))) {
      INFO("C=" << cs.s.C << " K=" << cs.s.K << " variant " << c.variant << " cc " << c.cc << " kw " << c.kw
                << " sums_in_registers " << c.sums_in_registers);
      auto const y2 = run_direct<__half, __half>(w, cs.N, hin, bias, true, c);
      std::size_t bad = 0;
      for (std::size_t i = 0; i < ref.size(); ++i) bad += double(y2[i]) != ref[i];
      if (facc_refuses(cs.s, c)) {
        REQUIRE_THROWS_AS((run_direct<__half, float>(w, cs.N, hin, bias, true, c)), sdnn::error);
      } else {
        auto const y1 = run_direct<__half, float>(w, cs.N, hin, bias, true, c);
        for (std::size_t i = 0; i < ref.size(); ++i) bad += double(y1[i]) != ref[i];
      }
      REQUIRE(bad == 0);
    }
  }
}

TEST_CASE("direct_sparse_conv on real-valued data within the stated tolerance", "[cuda][conv][half]") {
  SDNN_REQUIRE_DEVICE();
  auto const s = conv_shape::conv2d(64, 20, 23, 24, 3, 3, 1, 1);
  int const N = 6;
  auto const in = reals(static_cast<std::size_t>(N * s.in_features()), 1);
  auto const wd = reals(static_cast<std::size_t>(s.weight_count()), 2);
  auto const p = prune_uniform(wd.data(), s.K, s.filter_size(), 0.9);
  std::vector<float> bias(static_cast<std::size_t>(s.K), 0.25f);
  // reference on the half-rounded inputs and weights, and the |w||x| scale per output
  auto const hin = to_t<__half>(in);
  auto const in_r = to_f(hin);
  auto const pr = to_f(to_t<__half>(p.pruned));
  auto const ref = conv_reference(s, N, in_r.data(), pr.data(), bias.data(), false);
  auto const ref_f = conv_reference(s, N, in_r.data(), p.pruned.data(), bias.data(), false);  // float weights
  std::vector<float> ain(in_r.size()), apr(pr.size());
  for (std::size_t i = 0; i < ain.size(); ++i) ain[i] = std::fabs(in_r[i]);
  for (std::size_t i = 0; i < apr.size(); ++i) apr[i] = std::fabs(pr[i]);
  auto const scale = conv_reference(s, N, ain.data(), apr.data());
  auto const wf = make_conv_weights<float>(s, p);
  auto const wh = make_conv_weights<__half>(s, p);
  for (auto const& c : direct_conv_candidates(s, 2)) {
    auto const yf = run_direct<float, float>(wf, N, in_r, bias, false, c);
    auto const y1 = facc_refuses(s, c) ? std::vector<float>{} : run_direct<__half, float>(wh, N, hin, bias, false, c);
    auto const y2 = run_direct<__half, __half>(wh, N, hin, bias, false, c);
    double e0 = 0, e1 = 0, e2 = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      double const sc = scale[i] + 0.25;
      e0 = std::max(e0, std::fabs(yf[i] - ref_f[i]) / sc);
      if (!y1.empty()) e1 = std::max(e1, std::fabs(y1[i] - ref[i]) / sc);
      e2 = std::max(e2, std::fabs(y2[i] - ref[i]) / sc);
    }
    INFO("variant " << c.variant << " cc " << c.cc << " sums_in_registers " << c.sums_in_registers << " errors " << e0
                    << " " << e1 << " " << e2);
    REQUIRE(e0 <= 1e-5);
    REQUIRE(e1 <= 1e-3);
    REQUIRE(e2 <= 2e-2);
  }
}

TEST_CASE("sparse_conv2d / sparse_conv1d layers: tuned plan, device pipeline == host forward", "[cuda][conv][layer]") {
  SDNN_REQUIRE_DEVICE();
  cuda_exec ex;
  int const N = 5;
  // conv2d (3 -> 8, 13x11, stride 1 pad 1) then conv2d (8 -> 6, stride 2) composed on the device
  auto const s1 = conv_shape::conv2d(3, 13, 11, 8, 3, 3, 1, 1);
  auto const s2 = conv_shape::conv2d(8, s1.OH(), s1.OW(), 6, 3, 3, 2, 1);
  auto const w1 = small_ints(static_cast<std::size_t>(s1.weight_count()), -2, 2, 5);
  auto const w2 = small_ints(static_cast<std::size_t>(s2.weight_count()), -2, 2, 6);
  auto const p1 = prune_uniform(w1.data(), s1.K, s1.filter_size(), 0.8);
  auto const p2 = prune_uniform(w2.data(), s2.K, s2.filter_size(), 0.9);
  std::vector<float> b1(8, -1.0f), b2(6, 2.0f);
  layers::sparse_conv2d<float> l1(make_conv_weights<float>(s1, p1), b1);
  layers::sparse_conv2d<float> l2(make_conv_weights<float>(s2, p2), b2);
  std::vector<layer<float>*> net{&l1, &l2};
  auto const in = small_ints(static_cast<std::size_t>(N * s1.in_features()), 0, 3, 8);
  // host
  std::vector<float> h = in;
  std::int64_t f = s1.in_features();
  for (auto* l : net) {
    std::vector<float> o(static_cast<std::size_t>(N * l->out_features(f)));
    l->forward(host_exec{}, dense_view<float const>{N, f, f, h.data()},
               dense_view<float>{N, l->out_features(f), l->out_features(f), o.data()});
    f = l->out_features(f);
    h = std::move(o);
  }
  // device
  f = s1.in_features();
  auto cur = upload(in, ex);
  for (auto* l : net) {
    l->plan(N, f, ex);
    std::int64_t const of = l->out_features(f);
    device_buffer<float> o(static_cast<std::size_t>(N * of), ex);
    l->forward(ex, dense_view<float const>{N, f, f, cur.data()}, dense_view<float>{N, of, of, o.data()});
    cur = std::move(o);
    f = of;
  }
  REQUIRE(!l1.tuning_log().empty());
  auto const d = sdnn_test::to_vector(cur);
  REQUIRE(d == h);
  // 1-D layer, half with half accumulation
  auto const s3 = conv_shape::conv1d(10, 90, 7, 3);
  auto const w3 = small_ints(static_cast<std::size_t>(s3.weight_count()), -2, 2, 9);
  auto const p3 = prune_uniform(w3.data(), s3.K, s3.filter_size(), 0.8);
  layers::sparse_conv1d<__half, __half> l3(make_conv_weights<__half>(s3, p3));
  REQUIRE(l3.name() == "sparse_conv1d");
  auto const in3 = small_ints(static_cast<std::size_t>(N * s3.in_features()), -2, 2, 10);
  auto const ref3 = conv_reference(s3, N, in3.data(), p3.pruned.data(), nullptr, true);
  l3.plan(N, s3.in_features(), ex);
  auto const din3 = upload(to_t<__half>(in3), ex);
  device_buffer<__half> dout3(static_cast<std::size_t>(N * s3.out_features()), ex);
  l3.forward(ex, dense_view<__half const>{N, s3.in_features(), s3.in_features(), din3.data()},
             dense_view<__half>{N, s3.out_features(), s3.out_features(), dout3.data()});
  auto const y3 = to_f(sdnn_test::to_vector(dout3));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < ref3.size(); ++i) bad += double(y3[i]) != ref3[i];
  REQUIRE(bad == 0);
  REQUIRE_THROWS_AS(layers::sparse_conv1d<float>(make_conv_weights<float>(s1, p1)), sdnn::error);
}

TEST_CASE("direct_sparse_conv __half with float accumulation over several channel chunks is rounded to half once",
          "[cuda][conv][half][chunks]") {
  SDNN_REQUIRE_DEVICE();
  // Same case as the host test "... catches per-chunk rounding": non-negative small
  // integers, so every partial sum is an exact float integer (+ 0.25 bias) up to ~3e4,
  // where half steps are 8-32: the one correct rounding is __float2half(ref) exactly.
  auto const s = conv_shape::conv2d(256, 12, 20, 16, 3, 3, 1, 1);
  int const N = 4;
  auto const in = small_ints(static_cast<std::size_t>(N * s.in_features()), 0, 6, 4242);
  auto const wd = small_ints(static_cast<std::size_t>(s.weight_count()), 0, 6, 4243);
  auto const p = prune_uniform(wd.data(), s.K, s.filter_size(), 0.6);
  std::vector<float> bias(static_cast<std::size_t>(s.K), 0.25f);
  auto const ref = conv_reference(s, N, in.data(), p.pruned.data(), bias.data(), true);
  auto const w = make_conv_weights<__half>(s, p);
  auto const hin = to_t<__half>(in);
  auto configs = direct_conv_candidates(s, 2, N, direct_conv_window_budget, false);
  for (int v = 0; v < sdnn::conv::detail::direct_conv_variant_count; ++v)
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
    multi += g.nchunks > 1;
    INFO("variant " << c.variant << " tw " << c.tw << " th " << c.th << " cc " << g.cc << " chunks " << g.nchunks
                    << " passes " << g.passes << " sums_in_registers " << c.sums_in_registers);
    REQUIRE((c.sums_in_registers == 1 || g.nchunks == 1));
    auto const y = run_direct<__half, float>(w, N, hin, bias, true, c);
    std::size_t bad = 0, outside = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      float const once = value_cast<float>(value_cast<__half>(float(ref[i])));  // float(ref) is exact
      bad += y[i] != once;
      outside += std::fabs(double(y[i]) - ref[i]) > std::ldexp(std::fabs(ref[i]), -11);
    }
    REQUIRE(outside == 0);  // within one half rounding
    REQUIRE(bad == 0);      // and it is the correctly rounded one
  }
  REQUIRE(multi >= 8);
  // the output round trip is refused for this (T, Acc)
  direct_conv_config c0;
  c0.cc = 50;
  c0.sums_in_registers = 0;
  REQUIRE_THROWS_AS((run_direct<__half, float>(w, N, hin, bias, true, c0)), sdnn::error);

  // Real-valued, non-negative (no cancellation): |y - ref| <= 2^-11 |ref| (one half rounding)
  // + (1 + 2^-11) * the float accumulation's own error bound gamma_m * (sum |w||x| + |bias|),
  // gamma_m = m u / (1 - m u), u = 2^-24, m = nnz + 1 roundings (the products are exact).
  std::mt19937 gen(77);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> rin(static_cast<std::size_t>(N * s.in_features())), rw(static_cast<std::size_t>(s.weight_count()));
  for (auto& x : rin) x = value_cast<float>(value_cast<__half>(u(gen)));  // half-exact inputs
  for (auto& x : rw) x = value_cast<float>(value_cast<__half>(u(gen) * 0.05f));
  auto const pr = prune_uniform(rw.data(), s.K, s.filter_size(), 0.6);
  auto const rref = conv_reference(s, N, rin.data(), pr.pruned.data(), bias.data(), true);
  auto const wr = make_conv_weights<__half>(s, pr);
  double const mu = (double(pr.nnz_per_channel) + 1) * std::ldexp(1.0, -24), gamma = mu / (1 - mu);
  for (auto const& c : configs) {
    auto const y = run_direct<__half, float>(wr, N, to_t<__half>(rin), bias, true, c);
    double worst = 0;
    for (std::size_t i = 0; i < rref.size(); ++i) {
      double const r = rref[i];  // all terms >= 0: r is also sum |w||x| + |bias|
      double const bound = std::ldexp(r, -11) + (1 + std::ldexp(1.0, -11)) * gamma * r + 1e-30;
      worst = std::max(worst, std::fabs(double(y[i]) - r) / bound);
    }
    INFO("variant " << c.variant << " cc " << c.cc << " worst error / bound " << worst);
    REQUIRE(worst <= 1.0);
  }
}

namespace {
using sdnn_test::tie_heavy;  // tests/common/sdnn_conv_fixtures.hpp
// The device result equals the host one field for field (pruned bit for bit), and
// values[e] is the pruned weight of stored entry e.
void require_same_pruning(device_pruning_result const& d, pruning_result const& h, cuda_exec ex) {
  auto const a = to_host(d, ex);
  REQUIRE(a.K == h.K);
  REQUIRE(a.filter_size == h.filter_size);
  REQUIRE(a.nnz_per_channel == h.nnz_per_channel);
  REQUIRE(a.kept_per_channel == h.kept_per_channel);
  REQUIRE(a.kept == h.kept);
  REQUIRE(a.padding == h.padding);
  REQUIRE(a.target_sparsity == h.target_sparsity);
  REQUIRE(a.achieved_sparsity == h.achieved_sparsity);
  REQUIRE(a.stored_density == h.stored_density);
  REQUIRE(a.padding_overhead == h.padding_overhead);
  REQUIRE(a.index == h.index);
  REQUIRE(a.pruned.size() == h.pruned.size());
  REQUIRE(std::memcmp(a.pruned.data(), h.pruned.data(), a.pruned.size() * sizeof(float)) == 0);
  std::vector<float> values(d.values.size());
  if (!values.empty())
    SDNN_CUDA_CHECK(cudaMemcpyAsync(values.data(), d.values.data(), values.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                    ex.stream));
  SDNN_CUDA_CHECK(cudaStreamSynchronize(ex.stream));
  REQUIRE(values.size() == h.index.size());
  std::size_t bad = 0;
  for (std::size_t e = 0; e < values.size(); ++e) {
    std::int64_t const k = std::int64_t(e) / h.nnz_per_channel;
    float const want = h.pruned[static_cast<std::size_t>(k * h.filter_size + h.index[e])];
    bad += std::memcmp(&values[e], &want, sizeof(float)) != 0;
  }
  REQUIRE(bad == 0);
}
}  // namespace

TEST_CASE("device prune_uniform == host prune_uniform (ties, zero channels, both rules, uniform_nnz, async)",
          "[cuda][conv][prune]") {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t st = nullptr;
  SDNN_CUDA_CHECK(cudaStreamCreate(&st));
  {
    cuda_exec ex(st);
    struct kf {
      std::int64_t K, F;
    };
    std::uint32_t seed = 31;
    for (auto const [K, F] : {kf{1, 1}, kf{1, 9}, kf{6, 1}, kf{7, 45}, kf{16, 576}, kf{3, 1000}, kf{40, 27}, kf{64, 4608},
                              kf{1, 70000}})
      for (double s : {0.0, 0.3, 0.5, 0.9, 0.95, 1.0})
        for (auto rule : {prune_rule::global, prune_rule::per_channel}) {
          auto const w = tie_heavy(K, F, seed++);
          auto const dw = upload(w, ex);
          auto const host = prune_uniform(w.data(), K, F, s, rule);
          INFO("K=" << K << " F=" << F << " sparsity " << s << " rule " << int(rule));
          require_same_pruning(prune_uniform(dw.data(), K, F, s, rule, ex), host, ex);
          if (rule == prune_rule::per_channel) {
            require_same_pruning(prune_uniform_async(dw.data(), K, F, s, rule, -1, ex).get(), host, ex);
            continue;
          }
          for (std::int64_t un : {host.nnz_per_channel, (host.nnz_per_channel + F + 1) / 2, F}) {
            INFO("uniform_nnz " << un);
            auto const hu = prune_uniform(w.data(), K, F, s, rule, un);
            require_same_pruning(prune_uniform(dw.data(), K, F, s, rule, un, ex), hu, ex);
            require_same_pruning(prune_uniform_async(dw.data(), K, F, s, rule, un, ex).get(), hu, ex);
          }
        }
  }
  SDNN_CUDA_CHECK(cudaStreamDestroy(st));
}

TEST_CASE("device prune_uniform: errors, and its weights drive the convolution like the host ones",
          "[cuda][conv][prune]") {
  SDNN_REQUIRE_DEVICE();
  cuda_exec ex;
  std::int64_t const K = 8, F = 36;
  auto w = tie_heavy(K, F, 5);
  for (std::int64_t f = 0; f < 18; ++f) w[static_cast<std::size_t>(f)] = 3.0f;  // channel 0: >= 18 kept at 50 %
  auto const dw = upload(w, ex);
  auto const host = prune_uniform(w.data(), K, F, 0.5);
  REQUIRE(host.nnz_per_channel > 10);
  // uniform_nnz below the densest channel: the synchronous call throws, the async get() too
  REQUIRE_THROWS_AS(prune_uniform(dw.data(), K, F, 0.5, prune_rule::global, 10, ex), sdnn::error);
  {
    auto pending = prune_uniform_async(dw.data(), K, F, 0.5, prune_rule::global, 10, ex);
    REQUIRE_THROWS_AS(pending.get(), sdnn::error);
  }
  REQUIRE_THROWS_AS(prune_uniform_async(dw.data(), K, F, 0.5, prune_rule::global, -1, ex), sdnn::error);
  REQUIRE_THROWS_AS(prune_uniform(dw.data(), K, F, 1.5, ex), sdnn::error);
  REQUIRE_THROWS_AS(prune_uniform(dw.data(), K, F, 0.5, prune_rule::per_channel, 4, ex), sdnn::error);
  {
    auto pending = prune_uniform_async(dw.data(), K, F, 0.5, prune_rule::per_channel, -1, ex);
    auto r = pending.get();
    REQUIRE_THROWS_AS(pending.get(), sdnn::error);  // taken
  }
  // NaN weights are reported
  std::vector<float> wn = w;
  wn[17] = std::nanf("");
  auto const dn = upload(wn, ex);
  REQUIRE_THROWS_AS(prune_uniform(dn.data(), K, F, 0.5, ex), sdnn::error);
  REQUIRE_THROWS_AS(prune_uniform_async(dn.data(), K, F, 0.5, prune_rule::per_channel, -1, ex).get(), sdnn::error);
  // device-pruned weights through make_conv_weights run the convolution exactly as the host ones
  auto const s = conv_shape::conv2d(4, 10, 9, int(K), 3, 3, 1, 1);
  REQUIRE(s.filter_size() == F);
  auto const dev = to_host(prune_uniform(dw.data(), K, F, 0.7, prune_rule::per_channel, ex), ex);
  auto const in = small_ints(static_cast<std::size_t>(3 * s.in_features()), -2, 2, 6);
  std::vector<float> bias(static_cast<std::size_t>(K), 0.5f);
  auto const ref = conv_reference(s, 3, in.data(), prune_uniform(w.data(), K, F, 0.7, prune_rule::per_channel).pruned.data(),
                                  bias.data(), true);
  auto const y = run_direct<float, float>(make_conv_weights<float>(s, dev), 3, in, bias, true, direct_conv_config{});
  std::size_t bad = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) bad += double(y[i]) != ref[i];
  REQUIRE(bad == 0);
}

#if defined(SDNN_HAS_CUDNN)
TEST_CASE("sparse_conv2d matches cudnn_conv2d on the same pruned weights", "[cuda][conv][cudnn]") {
  SDNN_REQUIRE_DEVICE();
  cuda_exec ex;
  std::uint32_t seed = 500;
  for (auto const& cs : edge_cases()) {
    int const N = cs.N;
    auto const in = small_ints(static_cast<std::size_t>(N * cs.s.in_features()), -3, 3, seed++);
    auto const wd = small_ints(static_cast<std::size_t>(cs.s.weight_count()), -3, 3, seed++);
    auto const p = prune_uniform(wd.data(), cs.s.K, cs.s.filter_size(), cs.sparsity);
    std::vector<float> bias(static_cast<std::size_t>(cs.s.K), 0.5f);
    layers::sparse_conv2d<float> sp(make_conv_weights<float>(cs.s, p), bias);
    layers::cudnn_conv2d<float> dn(cs.s, p.pruned, bias, true);
    std::int64_t const fi = cs.s.in_features(), fo = cs.s.out_features();
    sp.plan(N, fi, ex);
    dn.plan(N, fi, ex);
    auto const din = upload(in, ex);
    device_buffer<float> y1(static_cast<std::size_t>(N * fo), ex), y2(static_cast<std::size_t>(N * fo), ex);
    sp.forward(ex, dense_view<float const>{N, fi, fi, din.data()}, dense_view<float>{N, fo, fo, y1.data()});
    dn.forward(ex, dense_view<float const>{N, fi, fi, din.data()}, dense_view<float>{N, fo, fo, y2.data()});
    auto const a = sdnn_test::to_vector(y1), b = sdnn_test::to_vector(y2);
    auto const ref = conv_reference(cs.s, N, in.data(), p.pruned.data(), bias.data(), true);
    double worst = 0, refmax = 1;
    for (std::size_t i = 0; i < ref.size(); ++i) refmax = std::max(refmax, std::fabs(ref[i]));
    for (std::size_t i = 0; i < ref.size(); ++i) {
      REQUIRE(double(a[i]) == ref[i]);
      worst = std::max(worst, std::fabs(double(b[i]) - ref[i]) / refmax);
    }
    INFO("cuDNN algo " << int(dn.algorithm()) << " max rel error " << worst);
    REQUIRE(worst <= 1e-5);  // cuDNN may use Winograd/FFT: not exact, but close
  }
}
#endif

// ---------------------------------------------------------------------------------------
// The real kernel where tests/host/test_conv.cpp used to run host copies of it
// (emulate_tiled, emulate_kernel): the same shapes, seeds and configs, now launched.
// What the host copies also asserted and a launch cannot see: "no window index outside
// [0, cc*sh*sw*NB)" is what compute-sanitizer (memcheck on shared memory) checks on the GPU
// machine; "a block stages geometry_of(s, c).stagings windows" has no observable on the
// device without a counter in direct_sparse_conv.cuh, so the formula stays checked on the
// host ("tuning candidates: both chunk orders ..."), and here every multi-chunk,
// multi-pass config (the one whose chunk order alternates) must give the exact result.
namespace {
// Runs every config on (w, in) and requires the exact reference; returns how many of the
// configs had several chunks and several passes (alternating chunk order).
std::size_t require_every_config(sparse_conv_weights<float> const& w, int N, std::vector<float> const& in,
                                 std::vector<float> const& bias, bool relu, std::vector<double> const& ref,
                                 std::vector<direct_conv_config> const& cfgs) {
  std::size_t alternating = 0;
  for (auto const& c : cfgs) {
    auto const g = geometry_of(w.shape, c);
    alternating += c.sums_in_registers && g.nchunks > 1 && g.passes > 1;
    auto const y = run_direct<float, float>(w, N, in, bias, relu, c);
    REQUIRE(y.size() == ref.size());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < y.size(); ++i) bad += double(y[i]) != ref[i];
    INFO("C=" << w.shape.C << " H=" << w.shape.H << " W=" << w.shape.W << " K=" << w.shape.K << " variant " << c.variant
              << " tw " << c.tw << " th " << c.th << " cc " << c.cc << " kw " << c.kw << " ksplit " << c.ksplit
              << " sums_in_registers " << c.sums_in_registers << " chunks " << g.nchunks << " passes " << g.passes
              << " bias " << !bias.empty() << " relu " << relu);
    REQUIRE(bad == 0);
  }
  return alternating;
}
}  // namespace

// Was the host test "sparse format, dense reference and the kernel's tiled algorithm agree
// on random shapes" (emulate_tiled): the host part (sparse reference == dense reference)
// stays there; the kernel's tiled algorithm is now the kernel, with the block shapes the
// emulation used (sub-batch / k-group / pixels are the compiled variants) in both chunk
// modes, against the plain sparse reference (no bias, no ReLU) and with bias + ReLU.
TEST_CASE("direct_sparse_conv == sparse reference on the random shapes of the host format test",
          "[cuda][conv][tiled]") {
  SDNN_REQUIRE_DEVICE();
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
  std::uint32_t seed = 100;  // the host test's seeds
  for (auto const& c : cases) {
    auto const in = small_ints(static_cast<std::size_t>(c.N * c.s.in_features()), -3, 3, seed++);
    auto const wd = small_ints(static_cast<std::size_t>(c.s.weight_count()), -4, 4, seed++);
    std::vector<float> bias(static_cast<std::size_t>(c.s.K));
    for (int k = 0; k < c.s.K; ++k) bias[static_cast<std::size_t>(k)] = float(k % 3) - 1.0f;
    auto const p = prune_uniform(wd.data(), c.s.K, c.s.filter_size(), c.sparsity);
    auto const w = make_conv_weights<float>(c.s, p);
    auto const plain = conv_reference(w, c.N, in.data());
    auto const with_bias = conv_reference(c.s, c.N, in.data(), p.pruned.data(), bias.data(), true);
    bool const is1d = c.s.H == 1;
    struct shape {
      int tw, th, cc;
    };
    std::vector<shape> const shapes = is1d ? std::vector<shape>{{8, 1, 2}, {32, 1, 3}, {16, 1, 64}}
                                           : std::vector<shape>{{4, 2, 2}, {3, 4, 3}, {8, 8, 64}};
    std::vector<direct_conv_config> cfgs;
    for (int v = 0; v < sdnn::conv::detail::direct_conv_variant_count; ++v)
      for (auto const& sh : shapes)
        for (int regs : {1, 0}) {
          direct_conv_config x;
          x.variant = v;
          x.rows_mode = is1d ? 0 : 1;
          x.tw = sh.tw;
          x.th = sh.th;
          x.cc = sh.cc;
          x.sums_in_registers = regs;
          cfgs.push_back(x);
        }
    require_every_config(w, c.N, in, {}, false, plain, cfgs);
    require_every_config(w, c.N, in, bias, true, with_bias, cfgs);
  }
}

// Was the host test "the device kernel's loops (host port) == reference on every tuning
// candidate, both chunk orders" (emulate_kernel): the same cases, seeds and candidates
// (the tuning candidates, small-window candidates with many chunks, and forced odd block
// shapes in both ways sums cross chunks), launched.
TEST_CASE("direct_sparse_conv == reference on every tuning candidate, both chunk orders", "[cuda][conv][tiled][plan]") {
  SDNN_REQUIRE_DEVICE();
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
  std::uint32_t seed = 900;  // the host test's seeds
  std::size_t alternating = 0;
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
    for (int v = 0; v < sdnn::conv::detail::direct_conv_variant_count; ++v)
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
    alternating += require_every_config(w, c.N, in, bias, true, ref, cands);
  }
  REQUIRE(alternating > 0);  // the alternating chunk order did run
}
