// The 2:4 sparse linear plan (linear/op/sparse24_linear.cuh) against the host reference on the same
// rounded inputs: small integers (every sum exact: Y equals the reference bit for bit) and random reals
// within a bound derived from K (require_within_bound); odd shapes, every tile configuration, K splits,
// repeat determinism, poisoned outputs, NaN/Inf, extreme normals, unaligned views, refusals before any
// launch; cuSPARSELt against the reference, and as the automatic layer's path, when built with
// SDNN_HAS_CUSPARSELT.
#include "sdnn_gpu_test.cuh"
#include "sdnn_test_util.hpp"

#include <sdnn/core/numeric.cuh>
#include <sdnn/linear/op/sparse24_linear.cuh>
#include <sdnn/linear/reference/sparse24.hpp>
#include <sdnn/train/op/prune_sparse24.hpp>
#if SDNN_HAS_CUSPARSELT
#include <sdnn/linear/op/tc_auto.cuh>
#include <sdnn/linear/vendor/cusparselt.cuh>

#include <sstream>
#endif

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

using namespace sdnn;
using sdnn_test::error_text;
using sdnn_test::has;

namespace {

// W (m x k) pruned to 2:4 from random values: small integers in [-3, 3] (exact sums) or reals in
// [-1, 1]; `density` of the entries are drawn nonzero before pruning.
template <class T>
sparse24_matrix<T> random_w(std::int64_t m, std::int64_t k, unsigned seed, bool ints, double density = 1.0) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> iv(-3, 3);
  std::uniform_real_distribution<float> rv(-1.0f, 1.0f), keep(0.0f, 1.0f);
  dense_matrix<T> d(m, k);
  for (std::int64_t i = 0; i < m * k; ++i) {
    float const v = ints ? float(iv(rng)) : rv(rng);
    d.data()[i] = T(keep(rng) < density ? v : 0.0f);
  }
  return ops::prune_sparse24(d.view());
}
// X (n x k, leading dimension ld >= k), same distributions; the padding of each row is NaN, which
// the kernel must never read.
template <class T>
std::vector<T> random_x(std::int64_t n, std::int64_t k, std::int64_t ld, unsigned seed, bool ints) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> iv(-3, 3);
  std::uniform_real_distribution<float> rv(-1.0f, 1.0f);
  std::vector<T> x(static_cast<std::size_t>(std::max<std::int64_t>(n * ld, 1)), T(std::nanf("")));
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < k; ++c) x[static_cast<std::size_t>(r * ld + c)] = T(ints ? float(iv(rng)) : rv(rng));
  return x;
}

template <class T>
float as_float(T v) {
  return static_cast<float>(v);
}
template <class T>
bool is_poison(T v) {  // the 0xFF.. bytes written before every run
  T p;
  std::memset(&p, 0xFF, sizeof p);
  return std::memcmp(&p, &v, sizeof p) == 0;
}

// Y from the plan (N x M with leading dimension y_ld), poisoned before the run.
template <class Plan, class T, class Out = typename Plan::output_type>
std::vector<Out> run_plan(Plan const& plan, std::vector<T> const& x, std::int64_t n, std::int64_t k, std::int64_t x_ld,
                          std::int64_t m, std::int64_t y_ld, basic_epilogue<float> epi, cuda_exec ex,
                          std::int64_t x_offset = 0, workspace ws = {}) {
  auto dx = sdnn_test::upload(x, ex);
  buffer<Out, device_space> dy(static_cast<std::size_t>(std::max<std::int64_t>(n * y_ld, 1)), ex);
  SDNN_CUDA_CHECK(cudaMemsetAsync(dy.data(), 0xFF, dy.size() * sizeof(Out), ex.stream));
  plan.run(ex, dense_view<T const>{n, k, x_ld, dx.data() + x_offset}, dense_view<Out>{n, m, y_ld, dy.data()}, epi, ws);
  return sdnn_test::download(dy.data(), dy.size(), ex);
}

// The reference on the same inputs (X rows [0, n), every row of W).
template <class T, class Out>
std::vector<Out> reference_y(sparse24_matrix<T> const& w, std::vector<T> const& x, std::int64_t n, std::int64_t x_ld,
                             std::int64_t y_ld, basic_epilogue<float> epi, std::int64_t x_offset = 0) {
  std::vector<Out> y(static_cast<std::size_t>(std::max<std::int64_t>(n * y_ld, 1)));
  reference::sparse24_linear(dense_view<T const>{n, w.cols(), x_ld, x.data() + x_offset}, w,
                             dense_view<Out>{n, w.rows(), y_ld, y.data()}, epi);
  return y;
}

// Every element of got equals ref (NaN where ref is NaN, the same infinities); nothing left poisoned.
template <class Out>
void require_exact(std::vector<Out> const& got, std::vector<Out> const& ref, std::int64_t n, std::int64_t m,
                   std::int64_t ld) {
  std::int64_t bad = 0, first = -1;
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < m; ++c) {
      auto const i = static_cast<std::size_t>(r * ld + c);
      float const a = as_float(got[i]), b = as_float(ref[i]);
      bool const ok = !is_poison(got[i]) && ((std::isnan(a) && std::isnan(b)) || a == b);
      if (!ok && bad++ == 0) first = r * m + c;
    }
  if (bad) {
    auto const r = first / m, c = first % m;
    auto const i = static_cast<std::size_t>(r * ld + c);
    FAIL_CHECK(bad << " of " << n * m << " outputs differ; first at (" << r << ", " << c << "): got "
                   << as_float(got[i]) << ", reference " << as_float(ref[i]));
  }
  REQUIRE(bad == 0);
}

// Runs plan on X (n x K, packed) into a packed Y, no epilogue, and requires exactly the reference,
// which it returns.
template <class Plan, class T, class Out = typename Plan::output_type>
std::vector<Out> require_plan_exact(Plan const& plan, sparse24_matrix<T> const& w, std::vector<T> const& x,
                                    std::int64_t n, cuda_exec ex) {
  std::int64_t const m = w.rows(), k = w.cols();
  auto got = run_plan(plan, x, n, k, k, m, m, epilogue_none(), ex);
  auto ref = reference_y<T, Out>(w, x, n, k, m, epilogue_none());
  require_exact(got, ref, n, m, m);
  return ref;
}

// The bias i -> 0.01 (i % 21 - 10) of M outputs.
std::vector<float> small_bias(std::int64_t m) {
  std::vector<float> bias(static_cast<std::size_t>(m));
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = 0.01f * float(int(i % 21) - 10);
  return bias;
}
// An epilogue `e` with a bias, twice: `device` reads the bias uploaded on ex, `host` (for the
// reference) the host copy.
struct bias_epilogue {
  std::vector<float> bias;
  buffer<float, device_space> dbias;
  basic_epilogue<float> device, host;
  bias_epilogue(std::vector<float> b, basic_epilogue<float> e, cuda_exec ex)
      : bias(std::move(b)), dbias(sdnn_test::upload(bias, ex)), device(e), host(e) {
    device.bias = dbias.data();
    host.bias = bias.data();
  }
  bias_epilogue(bias_epilogue const&) = delete;
  bias_epilogue& operator=(bias_epilogue const&) = delete;
};

// |got - ref| within the bound; returns the largest error / bound. The kernel adds the same products as
// the reference (each exact in float: two 16-bit floats give at most 22 significant bits), t = K_pad/2
// of them per output, in another order and with the tensor core's float accumulation, which may
// truncate instead of rounding: |y - ref| <= t * 2^-23 * S, S = sum |x w| over the stored terms, plus
// 2^-23 (|ref| + |bias|) for the epilogue's adds, plus one ulp of Out at |ref| + that (both round once).
template <class T, class Out>
double require_within_bound(std::vector<Out> const& got, std::vector<Out> const& ref, sparse24_matrix<T> const& w,
                            std::vector<T> const& x, std::int64_t n, std::int64_t x_ld, std::int64_t y_ld,
                            std::vector<float> const& bias) {
  double const t = double((w.cols() + 127) / 128 * 128) / 2;  // terms the kernel adds (padded K / 2)
  double const out_ulp = std::is_same_v<Out, float> ? std::ldexp(1.0, -23)
                         : std::is_same_v<Out, bf16> ? std::ldexp(1.0, -7)
                                                     : std::ldexp(1.0, -10);
  double worst = 0;
  std::int64_t bad = 0;
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < w.rows(); ++c) {
      double s = 0;
      for (std::int64_t j = 0; j < w.kept_per_row(); ++j) {
        std::int64_t const col = w.column(c, j);
        if (col < w.cols())
          s += std::fabs(double(as_float(x[static_cast<std::size_t>(r * x_ld + col)])) * as_float(w.value(c, j)));
      }
      auto const i = static_cast<std::size_t>(r * y_ld + c);
      double const b = bias.empty() ? 0.0 : std::fabs(bias[static_cast<std::size_t>(c)]);
      double const fb = t * std::ldexp(s, -23) + std::ldexp(std::fabs(as_float(ref[i])) + b, -23);
      double const bound = fb + out_ulp * (std::fabs(as_float(ref[i])) + fb) + 1e-30;
      double const err = std::fabs(double(as_float(got[i])) - as_float(ref[i]));
      if (!(err <= bound) || is_poison(got[i])) ++bad;
      worst = std::max(worst, err / bound);
    }
  INFO("largest error / bound: " << worst);
  REQUIRE(bad == 0);
  return worst;
}

template <class T>
struct value_name;
template <>
struct value_name<bf16> {
  static constexpr char const* s = "bf16";
};
template <>
struct value_name<fp16> {
  static constexpr char const* s = "fp16";
};

// The exact (small-integer) check of one shape through plan type P.
template <class T, class Out, class P = policy::sparse24_auto>
void exact_case(std::int64_t m, std::int64_t k, std::int64_t n, unsigned seed, cuda_exec ex, double density = 1.0) {
  INFO(value_name<T>::s << " -> " << (std::is_same_v<Out, float> ? "float" : value_name<T>::s) << ", M " << m
                        << " K " << k << " N " << n);
  auto w = random_w<T>(m, k, seed, true, density);
  auto x = random_x<T>(n, k, k, seed + 1, true);
  ops::sparse24_linear_plan<T, Out, P> plan(w, ex);
  INFO(plan.describe_run(n));
  require_plan_exact(plan, w, x, n, ex);
}

// Tile P's plan on X rows that start one element into their buffer (no 16-byte copies: the
// element-wise staging), checked exactly.
template <class T, class P>
void unaligned_case(std::int64_t m, std::int64_t k, std::int64_t n, unsigned seed, cuda_exec ex) {
  std::int64_t const x_ld = k + 3;
  auto w = random_w<T>(m, k, seed, true);
  auto x = random_x<T>(n + 1, k + 1, x_ld, seed + 1, true);
  ops::sparse24_linear_plan<T, T, P> plan(w, ex);
  INFO(plan.describe_run(n));
  auto got = run_plan(plan, x, n, k, x_ld, m, m, epilogue_none(), ex, 1);
  require_exact(got, reference_y<T, T>(w, x, n, x_ld, m, epilogue_none(), 1), n, m, m);
}

}  // namespace

TEST_CASE("sparse24 linear: small integers give exactly the reference", "[cuda][sparse24]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard sg;
  auto ex = sg.exec();
  struct shape {
    std::int64_t m, k, n;
  };
  for (auto s : {shape{16, 64, 8}, shape{128, 128, 1}, shape{130, 200, 3}, shape{33, 70, 17}, shape{300, 1000, 77},
                 shape{257, 513, 130}, shape{1, 1, 1}, shape{5, 3, 2}, shape{64, 4096, 40}}) {
    exact_case<bf16, bf16>(s.m, s.k, s.n, 11, ex);
    exact_case<fp16, fp16>(s.m, s.k, s.n, 12, ex);
    exact_case<bf16, float>(s.m, s.k, s.n, 13, ex);
    exact_case<fp16, float>(s.m, s.k, s.n, 14, ex);
  }
}

TEST_CASE("sparse24 linear: 4000 x 3000 with N = 1, 3, 17 and 65", "[cuda][sparse24]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard sg;
  auto ex = sg.exec();
  std::int64_t const m = 4000, k = 3000;
  auto w = random_w<bf16>(m, k, 21, true);
  ops::sparse24_linear_plan<bf16, bf16> plan(w, ex);
  INFO(plan.describe());
  for (std::int64_t n : {1, 3, 17, 65}) {
    INFO("N " << n << ": " << plan.describe_run(n));
    require_plan_exact(plan, w, random_x<bf16>(n, k, k, 22 + unsigned(n), true), n, ex);
  }
  auto wf = random_w<fp16>(m, k, 23, true);
  ops::sparse24_linear_plan<fp16, float> pf(wf, ex);
  require_plan_exact(pf, wf, random_x<fp16>(17, k, k, 24, true), 17, ex);
}

TEST_CASE("sparse24 linear: random reals within the K-derived bound, with bias, ReLU and cap", "[cuda][sparse24]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard sg;
  auto ex = sg.exec();
  struct shape {
    std::int64_t m, k, n;
  };
  for (auto s : {shape{4000, 3000, 1}, shape{4000, 3000, 3}, shape{4000, 3000, 17}, shape{777, 1234, 129},
                 shape{96, 8192, 9}}) {
    auto check = [&](auto tag_t, auto tag_out) {
      using T = decltype(tag_t);
      using Out = decltype(tag_out);
      INFO(value_name<T>::s << (std::is_same_v<Out, float> ? " -> float" : "") << ", M " << s.m << " K " << s.k
                            << " N " << s.n);
      auto w = random_w<T>(s.m, s.k, 31, false);
      auto x = random_x<T>(s.n, s.k, s.k, 32, false);
      basic_epilogue<float> relu_cap;
      relu_cap.relu = true;
      relu_cap.has_cap = true;
      relu_cap.cap = 4.0f;
      bias_epilogue const epi(small_bias(s.m), relu_cap, ex);
      ops::sparse24_linear_plan<T, Out> plan(w, ex);
      auto got = run_plan(plan, x, s.n, s.k, s.k, s.m, s.m, epi.device, ex);
      auto ref = reference_y<T, Out>(w, x, s.n, s.k, s.m, epi.host);
      double const worst = require_within_bound(got, ref, w, x, s.n, s.k, s.m, epi.bias);
      WARN(value_name<T>::s << " M " << s.m << " K " << s.k << " N " << s.n << ": largest error / bound " << worst);
    };
    check(bf16{}, bf16{});
    check(fp16{}, float{});
  }
}

TEST_CASE("sparse24 linear: every tile configuration, odd shapes", "[cuda][sparse24][memcheck]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard sg;
  auto ex = sg.exec();
  for (std::int64_t n : {1, 19, 150}) {
    exact_case<bf16, bf16, policy::sparse24_tile_n8>(300, 700, n, 41, ex);
    exact_case<bf16, bf16, policy::sparse24_tile_n32>(300, 700, n, 42, ex);
    exact_case<fp16, float, policy::sparse24_tile_n64>(300, 700, n, 43, ex);
    exact_case<bf16, float, policy::sparse24_tile_n128>(300, 700, n, 44, ex);
    exact_case<fp16, fp16, policy::sparse24_tile<64, 16, 64, 4, 1, 3>>(300, 700, n, 45, ex);
    exact_case<bf16, bf16, policy::sparse24_tile<32, 8, 128, 2, 1, 2>>(300, 700, n, 46, ex);
  }
}

TEST_CASE("sparse24 linear: the candidate tiles of the sm_90 sweep, odd shapes", "[cuda][sparse24][memcheck]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard sg;
  auto ex = sg.exec();
  // M past one 256-row tile and not a multiple of 16; K not a multiple of 64; N from 1 past one tile.
  for (std::int64_t n : {1, 19, 150, 300}) {
    exact_case<bf16, bf16, policy::sparse24_tile_n128_w8>(600, 700, n, 47, ex);
    exact_case<fp16, float, policy::sparse24_tile_m256_n64>(600, 700, n, 48, ex);
    exact_case<bf16, float, policy::sparse24_tile_m256_n128>(600, 700, n, 49, ex);
    exact_case<fp16, fp16, policy::sparse24_tile_m256_n128_k128>(600, 700, n, 50, ex);
  }
  exact_case<fp16, fp16, policy::sparse24_tile_m256_n128>(257, 4096, 33, 56, ex);  // few tiles: K split
  exact_case<bf16, bf16, policy::sparse24_tile_m256_n128_k128>(257, 4096, 129, 57, ex);
}

#if SDNN_SPARSE24_WGMMA
// The wgmma.sp tiles (a build for sm_90a): the same exact checks, split K, unaligned X (2-byte
// staging into the swizzled tile) and random reals within the bound.
TEST_CASE("sparse24 linear: wgmma.sp tiles, odd shapes, splits, unaligned X", "[cuda][sparse24][memcheck]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard sg;
  auto ex = sg.exec();
  REQUIRE(::sdnn::detail::current_arch() == arch{9, 0});
  for (std::int64_t n : {1, 19, 150, 300}) {
    exact_case<bf16, bf16, policy::sparse24_tile_w_n32>(600, 700, n, 147, ex);
    exact_case<fp16, float, policy::sparse24_tile_w_n64>(600, 700, n, 148, ex);
    exact_case<bf16, float, policy::sparse24_tile_w_n128>(600, 700, n, 149, ex);
    exact_case<fp16, fp16, policy::sparse24_tile_w_m256_n128>(600, 700, n, 150, ex);
    exact_case<bf16, bf16, policy::sparse24_tile_ws_n64>(600, 700, n, 163, ex);
    exact_case<fp16, float, policy::sparse24_tile_ws_n128>(600, 700, n, 164, ex);
    exact_case<bf16, bf16, policy::sparse24_tile_ws_m256_n128>(600, 700, n, 165, ex);
  }
  // Warp-specialized tiles: K longer than the pipeline (the stages wrap several times), K split.
  exact_case<bf16, bf16, policy::sparse24_tile_ws_n128>(300, 4096, 200, 166, ex);
  exact_case<fp16, fp16, policy::sparse24_tile_ws_n128>(257, 4096, 33, 167, ex);
  exact_case<bf16, float, policy::sparse24_tile_ws_n64>(257, 8192, 129, 168, ex);
  exact_case<fp16, float, policy::sparse24_tile_ws_m256_n128>(513, 4096, 300, 169, ex);
  exact_case<fp16, fp16, policy::sparse24_tile_w_n128>(257, 4096, 33, 156, ex);  // few tiles: K split
  exact_case<bf16, bf16, policy::sparse24_tile_w_m256_n128>(257, 4096, 129, 157, ex);
  exact_case<bf16, float, policy::sparse24_tile_w_n64>(130, 8192, 70, 158, ex, 0.3);
  // Unaligned X (a base 2 bytes off); on the warp-specialized tile the loading warpgroup's plain
  // shared stores are handed over the same way.
  unaligned_case<fp16, policy::sparse24_tile_w_n64>(250, 301, 37, 159, ex);
  unaligned_case<fp16, policy::sparse24_tile_ws_n128>(250, 301, 37, 159, ex);
  {  // random reals, bias, ReLU
    std::int64_t const m = 777, k = 1234, n = 129;
    auto w = random_w<bf16>(m, k, 161, false);
    auto x = random_x<bf16>(n, k, k, 162, false);
    bias_epilogue const epi(small_bias(m), epilogue_relu<float>(), ex);
    ops::sparse24_linear_plan<bf16, float, policy::sparse24_tile_w_m256_n128> plan(w, ex);
    auto got = run_plan(plan, x, n, k, k, m, m, epi.device, ex);
    require_within_bound(got, reference_y<bf16, float>(w, x, n, k, m, epi.host), w, x, n, k, m, epi.bias);
    ops::sparse24_linear_plan<bf16, float, policy::sparse24_tile_ws_n128> ws_plan(w, ex);
    auto got_ws = run_plan(ws_plan, x, n, k, k, m, m, epi.device, ex);
    require_within_bound(got_ws, reference_y<bf16, float>(w, x, n, k, m, epi.host), w, x, n, k, m, epi.bias);
    // The same bits on a repeat run.
    auto again = run_plan(ws_plan, x, n, k, k, m, m, epi.device, ex);
    REQUIRE(std::memcmp(got_ws.data(), again.data(), got_ws.size() * sizeof(float)) == 0);
  }
}

// The warp-specialized tiles on shapes small enough for racecheck: K of 18 stages (the 8-deep
// pipeline wraps twice), a partial N tile, and unaligned X (the cp.async loaders).
TEST_CASE("sparse24 linear: warp-specialized tiles, small shapes", "[cuda][sparse24][ws]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard sg;
  auto ex = sg.exec();
  REQUIRE(::sdnn::detail::current_arch() == arch{9, 0});
  for (std::int64_t n : {3, 70}) {
    exact_case<bf16, bf16, policy::sparse24_tile_ws_n32>(200, 1100, n, 171, ex);
    exact_case<fp16, float, policy::sparse24_tile_ws_n64>(200, 1100, n, 172, ex);
    exact_case<bf16, float, policy::sparse24_tile_ws_n128>(200, 1100, n, 173, ex);
    exact_case<fp16, fp16, policy::sparse24_tile_ws_m256_n128>(300, 1100, n, 174, ex);
  }
  unaligned_case<bf16, policy::sparse24_tile_ws_m256_n128>(300, 301, 21, 175, ex);
}
#endif

TEST_CASE("sparse24 linear: K splits are exact and bitwise repeatable", "[cuda][sparse24][memcheck]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard sg;
  auto ex = sg.exec();
  // Few M tiles and a long K: the schedule splits K (checked through describe_run).
  {
    std::int64_t const m = 200, k = 8192, n = 5;
    auto w = random_w<bf16>(m, k, 51, true);
    ops::sparse24_linear_plan<bf16, float> plan(w, ex);
    INFO(plan.describe_run(n));
    REQUIRE(!has(plan.describe_run(n), "splits 1 "));
    require_plan_exact(plan, w, random_x<bf16>(n, k, k, 52, true), n, ex);
  }
  // Random reals: the same bits on every run, split or not.
  for (std::int64_t n : {4, 64, 600}) {
    std::int64_t const m = 1100, k = 4096;
    auto w = random_w<fp16>(m, k, 53, false);
    auto x = random_x<fp16>(n, k, k, 54, false);
    ops::sparse24_linear_plan<fp16, float> plan(w, ex);
    INFO("N " << n << ": " << plan.describe_run(n));
    auto y1 = run_plan(plan, x, n, k, k, m, m, epilogue_none(), ex);
    for (int rep = 0; rep < 3; ++rep) {
      auto y2 = run_plan(plan, x, n, k, k, m, m, epilogue_none(), ex);
      REQUIRE(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("sparse24 linear: whole tiles then split tiles (more tiles than resident CTAs)", "[cuda][sparse24]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard sg;
  auto ex = sg.exec();
  // The schedule itself (host).
  auto s = ops::detail::sparse24_make_schedule(11008, 512, 4096, 128, 128, 64, 264);
  REQUIRE(s.tiles == 344);
  REQUIRE(s.full_tiles == 264);
  REQUIRE(s.splits == 3);
  REQUIRE(s.units == 264 + 80 * 3);
  REQUIRE(s.k_tiles_per_split == 22);
  auto s1 = ops::detail::sparse24_make_schedule(11008, 8, 4096, 128, 8, 128, 264);
  REQUIRE(s1.full_tiles == 0);
  REQUIRE(s1.splits == 3);
  auto s2 = ops::detail::sparse24_make_schedule(11008, 4096, 4096, 128, 128, 64, 344);
  REQUIRE(s2.splits == 1);  // whole waves: nothing to split
  REQUIRE(s2.units == s2.tiles);
  auto s3 = ops::detail::sparse24_make_schedule(100, 1, 0, 128, 8, 128, 264);  // K = 0
  REQUIRE(s3.splits == 1);
  // A split target below the slots (the n8 tile's one CTA an SM): 86 tiles fill 132 SMs unsplit,
  // 64 take 2 splits, 32 take 4.
  REQUIRE(ops::detail::sparse24_make_schedule(11008, 8, 4096, 128, 8, 128, 264, 132).splits == 1);
  REQUIRE(ops::detail::sparse24_make_schedule(8192, 8, 8192, 128, 8, 128, 264, 132).splits == 2);
  auto s4 = ops::detail::sparse24_make_schedule(4096, 1, 4096, 128, 8, 128, 264, 132);
  REQUIRE(s4.splits == 4);
  REQUIRE(s4.units == 128);
  // Steps of the real K, not the padded one: K = 192 is 3 steps of 64 (padded to 256: 4), K = 576
  // (a 3x3 convolution over 64 channels) 9, split 5 + 4 over 25 tiles.
  REQUIRE(ops::detail::sparse24_make_schedule(128, 8, 192, 128, 8, 64, 264).k_tiles_per_split == 3);
  auto s5 = ops::detail::sparse24_make_schedule(72, 3136, 576, 128, 128, 64, 132);
  REQUIRE(s5.splits == 2);
  REQUIRE(s5.k_tiles_per_split == 5);
  // On the device: 2100 x 2100 outputs, more tiles than one wave holds (auto, then two tiles forced);
  // every m tile is checked on every 8th row of Y (the reference on all rows would take seconds).
  std::int64_t const m = 2100, k = 1024, n = 2100;
  auto w = random_w<bf16>(m, k, 61, true);
  auto x = random_x<bf16>(n, k, k, 62, true);
  auto check = [&](auto const& plan) {
    INFO(plan.describe_run(n));
    auto got = run_plan(plan, x, n, k, k, m, m, epilogue_none(), ex);
    for (std::int64_t r0 = 0; r0 < n; r0 += 8) {
      auto ref = reference_y<bf16, bf16>(w, x, 1, k, m, epilogue_none(), r0 * k);
      std::vector<bf16> row(got.begin() + r0 * m, got.begin() + (r0 + 1) * m);
      INFO("row " << r0);
      require_exact(row, ref, 1, m, m);
    }
  };
  check(ops::sparse24_linear_plan<bf16, bf16>(w, ex));
  check(ops::sparse24_linear_plan<bf16, bf16, policy::sparse24_tile_m256_n128>(w, ex));
  check(ops::sparse24_linear_plan<bf16, bf16, policy::sparse24_tile_m256_n64>(w, ex));
#if SDNN_SPARSE24_WGMMA
  check(ops::sparse24_linear_plan<bf16, bf16, policy::sparse24_tile_w_m256_n128>(w, ex));
  check(ops::sparse24_linear_plan<bf16, bf16, policy::sparse24_tile_w_n128>(w, ex));
  check(ops::sparse24_linear_plan<bf16, bf16, policy::sparse24_tile_ws_n128>(w, ex));
  check(ops::sparse24_linear_plan<bf16, bf16, policy::sparse24_tile_ws_n64>(w, ex));
  check(ops::sparse24_linear_plan<bf16, bf16, policy::sparse24_tile_ws_m256_n128>(w, ex));
#endif
}

TEST_CASE("sparse24 linear: all-zero weights and sparse groups", "[cuda][sparse24]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard sg;
  auto ex = sg.exec();
  std::int64_t const m = 300, k = 517, n = 21;
  sparse24_matrix<bf16> zero(m, k);
  auto x = random_x<bf16>(n, k, k, 71, true);
  std::vector<float> bias(static_cast<std::size_t>(m));
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = float(int(i % 7) - 3);
  bias_epilogue const epi(std::move(bias), {}, ex);
  ops::sparse24_linear_plan<bf16, float> pz(zero, ex);
  auto got = run_plan(pz, x, n, k, k, m, m, epi.device, ex);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < m; ++c) REQUIRE(got[static_cast<std::size_t>(r * m + c)] == epi.bias[std::size_t(c)]);
  // Rows with 0 or 1 nonzeros in most groups (stored zeros at the free positions).
  for (double density : {0.1, 0.3}) {
    exact_case<bf16, bf16>(m, k, n, 72, ex, density);
    exact_case<fp16, float>(m, k, n, 73, ex, density);
  }
}

TEST_CASE("sparse24 linear: largest and smallest normal values", "[cuda][sparse24]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard sg;
  auto ex = sg.exec();
  auto run = [&](auto tag, std::uint16_t max_bits, std::uint16_t min_bits) {
    using T = decltype(tag);
    std::int64_t const m = 64, k = 128, n = 9;
    // Row r of W has one nonzero, at column (5 r) % k: the largest normal (even r) or the
    // smallest (odd r), with alternating signs; X is +-1, so every output is exactly representable.
    dense_matrix<T> d(m, k);
    for (std::int64_t r = 0; r < m; ++r) {
      T v = T::from_bits(r % 2 ? min_bits : max_bits);
      if (r % 4 >= 2) v.bits = static_cast<std::uint16_t>(v.bits | 0x8000u);
      d(r, (5 * r) % k) = v;
    }
    auto w = sparse24_from_dense(d.view());
    std::vector<T> x(static_cast<std::size_t>(n * k));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = T(i % 3 ? 1.0f : -1.0f);
    ops::sparse24_linear_plan<T, T> plan(w, ex);
    auto const ref = require_plan_exact(plan, w, x, n, ex);
    REQUIRE(std::fabs(as_float(ref[0])) == as_float(T::from_bits(max_bits)));
  };
  run(bf16{}, 0x7F7F, 0x0080);  // 3.39e38, 1.18e-38
  run(fp16{}, 0x7BFF, 0x0400);  // 65504, 6.10e-5
}

TEST_CASE("sparse24 linear: NaN and Inf in X propagate as in the reference", "[cuda][sparse24][memcheck]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard sg;
  auto ex = sg.exec();
  std::int64_t const m = 200, k = 300, n = 12;
  auto w = random_w<bf16>(m, k, 81, true, 0.5);
  auto x = random_x<bf16>(n, k, k, 82, true);
  float const inf = std::numeric_limits<float>::infinity();
  x[static_cast<std::size_t>(1 * k + 10)] = bf16(std::nanf(""));
  x[static_cast<std::size_t>(4 * k + 77)] = bf16(inf);
  x[static_cast<std::size_t>(7 * k + 5)] = bf16(-inf);
  x[static_cast<std::size_t>(7 * k + 6)] = bf16(inf);
  ops::sparse24_linear_plan<bf16, float> plan(w, ex);
  auto got = run_plan(plan, x, n, k, k, m, m, epilogue_none(), ex);
  auto ref = reference_y<bf16, float>(w, x, n, k, m, epilogue_none());
  std::int64_t nans = 0, infs = 0;
  for (auto v : ref) nans += std::isnan(v), infs += std::isinf(v);
  INFO(nans << " NaN and " << infs << " infinite outputs in the reference");
  REQUIRE(nans > 0);
  REQUIRE(infs > 0);
  require_exact(got, ref, n, m, m);
}

TEST_CASE("sparse24 linear: unaligned X and Y views, caller workspace, another stream", "[cuda][sparse24][memcheck]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_pair sp;
  cuda_exec home{sp.a}, other{sp.b};
  std::int64_t const m = 250, k = 301, n = 37;
  auto w = random_w<fp16>(m, k, 91, true);
  ops::sparse24_linear_plan<fp16, fp16> plan(w, home);
  SDNN_CUDA_CHECK(cudaStreamSynchronize(sp.a));
  // X rows of odd length (ld = k = 301): the 2-byte staging path; Y with ld = m + 3.
  auto x = random_x<fp16>(n, k, k, 92, true);
  auto got = run_plan(plan, x, n, k, k, m, m + 3, epilogue_none(), other);
  require_exact(got, reference_y<fp16, fp16>(w, x, n, k, m + 3, epilogue_none()), n, m, m + 3);
  // A 16-byte-aligned ld but a base 2 bytes off.
  auto x2 = random_x<fp16>(n + 1, k + 1, 304, 93, true);  // the view starts one element in
  auto got2 = run_plan(plan, x2, n, k, 304, m, m, epilogue_none(), other, 1);
  require_exact(got2, reference_y<fp16, fp16>(w, x2, n, 304, m, epilogue_none(), 1), n, m, m);
  // Caller-supplied workspace, on a shape that splits K.
  std::int64_t const m3 = 64, k3 = 8192, n3 = 3;
  auto w3 = random_w<fp16>(m3, k3, 94, true);
  auto x3 = random_x<fp16>(n3, k3, k3, 95, true);
  plan_options opt;
  opt.own_workspace = false;
  ops::sparse24_linear_plan<fp16, float> p3(w3, home, opt);
  INFO(p3.describe_run(n3));
  REQUIRE(!has(p3.describe_run(n3), "splits 1 "));
  auto msg = error_text([&] { run_plan(p3, x3, n3, k3, k3, m3, m3, epilogue_none(), other); });
  REQUIRE(has(msg, "made without its own workspace"));
  buffer<unsigned char, device_space> ws(p3.workspace_bytes(), other);
  SDNN_CUDA_CHECK(cudaMemsetAsync(ws.data(), 0x5A, ws.size(), sp.b));  // garbage counters: run() zeroes them
  for (int rep = 0; rep < 2; ++rep) {
    auto got3 = run_plan(p3, x3, n3, k3, k3, m3, m3, epilogue_none(), other, 0, workspace{ws.data(), ws.size()});
    require_exact(got3, reference_y<fp16, float>(w3, x3, n3, k3, m3, epilogue_none()), n3, m3, m3);
  }
}

TEST_CASE("sparse24 linear: refusals come before any launch and write nothing", "[cuda][sparse24][memcheck]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard sg;
  auto ex = sg.exec();
  std::int64_t const m = 40, k = 64, n = 5;
  buffer<bf16, device_space> dy(static_cast<std::size_t>(n * m), ex);
  SDNN_CUDA_CHECK(cudaMemsetAsync(dy.data(), 0xFF, dy.size() * sizeof(bf16), ex.stream));
  auto untouched = [&] {
    auto h = sdnn_test::download(dy.data(), dy.size(), ex);
    for (auto v : h)
      if (!is_poison(v)) return false;
    return true;
  };
  // Not 2:4: refused from the dense matrix, naming the row and group.
  dense_matrix<bf16> d(m, k);
  d(3, 8) = bf16(1.0f), d(3, 9) = bf16(2.0f), d(3, 11) = bf16(3.0f);
  using plan_t = ops::sparse24_linear_plan<bf16, bf16>;
  auto msg = error_text([&] { plan_t p(dense_view<bf16 const>(d.view()), ex); });
  INFO(msg);
  REQUIRE(has(msg, "row 3, group 2"));
  // A corrupted 2:4 matrix: can_implement says why, construction throws the same.
  auto w = random_w<bf16>(m, k, 101, true);
  w.meta()[static_cast<std::size_t>(2 * w.meta_ld() + 1)] = 0x55;  // row 2, groups 2 and 3: positions (1, 1)
  REQUIRE(has(plan_t::can_implement(w).why(), "row 2, group 2"));
  REQUIRE(has(error_text([&] { plan_t p(w, ex); }), "row 2, group 2"));
  // Shapes: X with the wrong K, Y with the wrong M or N.
  auto good = random_w<bf16>(m, k, 102, true);
  plan_t p(good, ex);
  REQUIRE(p.can_implement(m, k));
  auto x = sdnn_test::upload(random_x<bf16>(n, k + 1, k + 1, 103, true), ex);
  REQUIRE_THROWS_AS(p.run(ex, dense_view<bf16 const>{n, k + 1, k + 1, x.data()}, dense_view<bf16>{n, m, m, dy.data()},
                          epilogue_none()),
                    dimension_mismatch);
  REQUIRE_THROWS_AS(p.run(ex, dense_view<bf16 const>{n, k, k, x.data()}, dense_view<bf16>{n, m - 1, m, dy.data()},
                          epilogue_none()),
                    dimension_mismatch);
  REQUIRE_THROWS_AS(p.run(ex, dense_view<bf16 const>{n, k, k, x.data()}, dense_view<bf16>{n - 1, m, m, dy.data()},
                          epilogue_none()),
                    dimension_mismatch);
  REQUIRE(has(error_text([&] {
                p.run(ex, dense_view<bf16 const>{n, k, k - 1, x.data()}, dense_view<bf16>{n, m, m, dy.data()},
                      epilogue_none());
              }),
              "leading dimensions"));
  REQUIRE(untouched());
  // Empty batches and empty W launch nothing either.
  p.run(ex, dense_view<bf16 const>{0, k, k, x.data()}, dense_view<bf16>{0, m, m, dy.data()}, epilogue_none());
  REQUIRE(untouched());
  INFO(p.describe());
  REQUIRE(has(p.describe(), "2:4"));
}

#if SDNN_HAS_CUSPARSELT
TEST_CASE("cuSPARSELt baseline against the reference", "[cuda][sparse24][cusparselt]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard sg;
  auto ex = sg.exec();
  for (std::int64_t n : {16, 64, 256}) {
    std::int64_t const m = 512, k = 1024;
    auto w = random_w<bf16>(m, k, 111, false);
    auto wd = to_dense(w);
    auto dw = sdnn_test::upload(std::vector<bf16>(wd.data(), wd.data() + m * k), ex);
    auto x = random_x<bf16>(n, k, k, 112, false);
    auto dx = sdnn_test::upload(x, ex);
    buffer<bf16, device_space> dy(static_cast<std::size_t>(n * m), ex);
    SDNN_CUDA_CHECK(cudaMemsetAsync(dy.data(), 0xFF, dy.size() * sizeof(bf16), ex.stream));
    vendor::cusparselt_linear<bf16> lt(dense_view<bf16 const>{m, k, k, dw.data()}, n, ex);
    lt.run(ex, dense_view<bf16 const>{n, k, k, dx.data()}, dense_view<bf16>{n, m, m, dy.data()});
    auto got = sdnn_test::download(dy.data(), dy.size(), ex);
    auto ref = reference_y<bf16, bf16>(w, x, n, k, m, epilogue_none());
    INFO("N " << n);
    require_within_bound(got, ref, w, x, n, k, m, {});
  }
  // A W that is not 2:4 is refused by the prune check.
  std::int64_t const m = 64, k = 64;
  std::vector<bf16> dense(static_cast<std::size_t>(m * k), bf16(1.0f));
  auto dd = sdnn_test::upload(dense, ex);
  REQUIRE(has(error_text([&] { vendor::cusparselt_linear<bf16> lt(dense_view<bf16 const>{m, k, k, dd.data()}, 16, ex); }),
              "not 2:4"));
}

// The automatic layer takes cuSPARSELt where it wins, only at the batch sizes planned for it. The
// choice is set through a loaded tuning entry (the model picks it only for large W at 512+ rows,
// too slow for the host reference here). Small integers: every sum is exact, so each path gives
// the reference's bits.
TEST_CASE("tc_auto with cuSPARSELt: planned batch sizes, other sizes, strided views, epilogue",
          "[cuda][sparse24][cusparselt]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard sg;
  auto ex = sg.exec();
  std::int64_t const m = 512, k = 1024, n = 64;
  auto w = random_w<bf16>(m, k, 121, true);
  auto wd = to_dense(w);
  auto const st = ops::analyze_weights(std::as_const(wd).view());
  REQUIRE(st.is_24);
  int dev = 0;
  cudaDeviceProp prop{};
  SDNN_CUDA_CHECK(cudaGetDevice(&dev));
  SDNN_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  std::ostringstream line;
  line << "sdnn-tc-auto-tuning 1\n"
       << prop.name << '\t' << m << '\t' << k << '\t' << st.nnz << '\t' << st.tiles64 << '\t' << st.blocks32
       << "\t1\t2\t" << n << "\tcusparselt\n";
  std::istringstream in(line.str());
  ops::tc_tuning_clear();
  REQUIRE(ops::tc_tuning_load(in) == 1);
  ops::tc_auto_options opt;
  opt.max_rows = 256;
  ops::tc_auto_linear_plan<bf16> plan(std::as_const(wd).view(), ex, opt);
  ops::tc_tuning_clear();
  INFO(plan.describe());
  REQUIRE(plan.path(n) == policy::tc_path::cusparselt);
  REQUIRE(plan.path(n - 1) != policy::tc_path::cusparselt);
  // The tuned entry is the nearest for every size, so every size planned takes cuSPARSELt where it
  // accepts the size (it may refuse some, e.g. one row; describe() lists the refusals).
  REQUIRE(has(plan.describe(), "cusparselt at N ="));
  auto run = [&](std::int64_t rows, std::int64_t x_ld, basic_epilogue<float> epi, std::vector<float> const& bias) {
    auto x = random_x<bf16>(rows, k, x_ld, 122, true);
    auto dx = sdnn_test::upload(x, ex);
    buffer<float, device_space> db;
    if (!bias.empty()) {
      db = sdnn_test::upload(bias, ex);
      epi.bias = db.data();
    }
    buffer<bf16, device_space> dy(static_cast<std::size_t>(rows * m), ex);
    SDNN_CUDA_CHECK(cudaMemsetAsync(dy.data(), 0xFF, dy.size() * sizeof(bf16), ex.stream));
    plan.run(ex, dense_view<bf16 const>{rows, k, x_ld, dx.data()}, dense_view<bf16>{rows, m, m, dy.data()}, epi);
    return std::make_pair(sdnn_test::download(dy.data(), dy.size(), ex), x);
  };
  auto every_size = [&] {
    for (auto [rows, x_ld] : {std::pair<std::int64_t, std::int64_t>{n, k}, {n - 1, k}, {n, k + 8}, {1, k}, {256, k}}) {
      INFO("rows " << rows << ", X ld " << x_ld << " (path " << policy::tc_path_name(plan.path(rows)) << ")");
      auto [got, x] = run(rows, x_ld, epilogue_none(), {});
      require_exact(got, reference_y<bf16, bf16>(w, x, rows, x_ld, m, epilogue_none()), rows, m, m);
    }
  };
  every_size();
  // With bias and ReLU the cuSPARSELt path applies the epilogue to its 16-bit product: exactly
  // round(relu(y + b)) of the identity run's y.
  std::vector<float> bias(static_cast<std::size_t>(m));
  for (std::int64_t j = 0; j < m; ++j) bias[std::size_t(j)] = 0.375f * float(j % 7) - 1.0f;
  basic_epilogue<float> relu;
  relu.relu = true;
  auto [plain, x0] = run(n, k, epilogue_none(), {});
  auto [with_epi, x1] = run(n, k, relu, bias);
  std::vector<bf16> expect(plain.size());
  for (std::size_t i = 0; i < plain.size(); ++i)
    expect[i] = bf16(std::max(float(plain[i]) + bias[i % std::size_t(m)], 0.0f));
  require_exact(with_epi, expect, n, m, m);
  // tune() measures every path (cuSPARSELt included) and keeps the winners and a path for the
  // sizes cuSPARSELt has no plan for: every size still runs, exactly.
  plan.tune(ex, {n, 256});
  ops::tc_tuning_clear();
  INFO(plan.describe() << "; " << plan.reason(n));
  every_size();
}
#endif
