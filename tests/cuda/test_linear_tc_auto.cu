// The automatic 16-bit linear layer (ops::tc_auto_linear_plan) on the device: every path it can
// take (each forced through the `allowed` mask, and the model's own choice) against the host
// reference on the same rounded inputs, both value types and both output types, at sizes that
// are multiples of no tile; the cuBLAS path's epilogue staged in chunks; tune() and the
// process-wide cache; refusals before any launch.
#include "sdnn_gpu_test.cuh"
#include "sdnn_test_util.hpp"

#include <sdnn/linear/op/tc_auto.cuh>
#include <sdnn/train/op/prune_sparse24.hpp>
#include <sdnn/train/op/prune_structured.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace sdnn;
using sdnn_test::download;
using sdnn_test::error_text;
using sdnn_test::has;
using sdnn_test::stream_guard;
using sdnn_test::upload;

namespace {

template <class T>
dense_matrix<T> random_matrix(std::int64_t rows, std::int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  dense_matrix<T> a(rows, cols);
  for (auto& v : a.values()) v = T(u(rng));
  return a;
}

enum class kind { dense, unstructured, blocks, s24 };

template <class T>
dense_matrix<T> make_w(kind k, std::int64_t m, std::int64_t kk, unsigned seed) {
  auto w = random_matrix<T>(m, kk, seed);
  switch (k) {
    case kind::dense: return w;
    case kind::unstructured: return train::prune_magnitude(std::as_const(w).view(), 0.9);
    case kind::blocks: return train::prune_blocks_l2(std::as_const(w).view(), 32, 32, 0.8);
    case kind::s24: {
      auto s = ops::prune_sparse24(std::as_const(w).view());
      return to_dense(s);
    }
  }
  return w;
}

template <class Out>
constexpr int out_bits() {
  if constexpr (std::is_same_v<Out, float>) return 24;
  else if constexpr (std::is_same_v<Out, bf16>) return 8;
  else return 11;
}

// Runs plan on X and checks every output against the reference (bound as in test_linear_tc.cu:
// |y - ref| <= 4 K u S + 2^-p (|ref| + 4 K u S) + tiny, S = sum |x w|, u = 2^-24), then the same
// bits on a repeat run. The stream ex must outlive the plan (the plan waits for it when released).
template <class T, class Out>
void check_plan(cuda_exec ex, ops::tc_auto_linear_plan<T, Out> const& plan, dense_matrix<T> const& w, std::int64_t n,
                unsigned seed, bool epilogue, std::string const& what) {
  std::int64_t const m = w.rows(), k = w.cols();
  INFO(what << " N=" << n << " path " << policy::tc_path_name(plan.path(n)) << "; " << plan.describe());
  auto x = random_matrix<T>(n, k, seed);
  auto dx = upload(std::vector<T>(x.values().begin(), x.values().end()), ex);
  std::vector<float> hb(static_cast<std::size_t>(m));
  for (std::int64_t i = 0; i < m; ++i) hb[std::size_t(i)] = float(i % 7) - 3.f;
  auto db = upload(hb, ex);
  basic_epilogue<float> epi, epi_host;
  if (epilogue) {
    epi = epilogue_relu<float>(db.data(), m);
    epi.has_cap = true;
    epi.cap = 2.5f;
    epi_host = epi;
    epi_host.bias = hb.data();
  }
  buffer<Out, device_space> dy(std::size_t(n * m), ex);
  SDNN_CUDA_CHECK(cudaMemsetAsync(dy.data(), 0xff, dy.size() * sizeof(Out), ex.stream));
  dense_view<T const> xv{n, k, k, dx.data()};
  dense_view<Out> yv{n, m, m, dy.data()};
  plan.run(ex, xv, yv, epi);
  auto y = download(dy.data(), std::size_t(n * m), ex);
  dense_matrix<float> ref(n, m);
  ops::tc_auto_linear(host_exec{}, std::as_const(x).view(), w.view(), ref.view(), epi_host);
  double const u = std::ldexp(1.0, -24), rel = std::ldexp(1.0, -out_bits<Out>());
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < n && bad < 5; ++i)
    for (std::int64_t j = 0; j < m && bad < 5; ++j) {
      double s = 0;
      for (std::int64_t q = 0; q < k; ++q) s += std::fabs(double(float(x(i, q))) * double(float(w(j, q))));
      double const r = ref(i, j), got = double(static_cast<float>(y[std::size_t(i * m + j)]));
      double const acc = 4.0 * double(k) * u * s;
      if (!(std::fabs(got - r) <= acc + rel * (std::fabs(r) + acc) + 1e-30)) {
        ++bad;
        UNSCOPED_INFO("y(" << i << ", " << j << ") = " << got << ", reference " << r);
      }
    }
  CHECK(bad == 0);
  plan.run(ex, xv, yv, epi);
  auto y2 = download(dy.data(), std::size_t(n * m), ex);
  CHECK(std::memcmp(y.data(), y2.data(), y.size() * sizeof(Out)) == 0);
}

unsigned only(policy::tc_path p) { return 1u << int(p); }

}  // namespace

TEMPLATE_TEST_CASE("tc_auto: every path against the reference at odd sizes, both output types", "[cuda][tc_auto]", bf16,
                   fp16) {
  using T = TestType;
  SDNN_REQUIRE_DEVICE();
  std::int64_t const m = 200, k = 328;  // no multiple of 64 (tiles) or 128 (2:4 padding)
  struct cas {
    kind w;
    policy::tc_path p;
  };
  for (auto c : {cas{kind::dense, policy::tc_path::cublas_dense}, cas{kind::unstructured, policy::tc_path::tc_tile_offsets},
                 cas{kind::blocks, policy::tc_path::tc_block32}, cas{kind::s24, policy::tc_path::sparse24},
                 cas{kind::unstructured, policy::tc_path::cublas_dense}}) {
    auto const w = make_w<T>(c.w, m, k, 11u + unsigned(c.w));
    stream_guard sg;
    ops::tc_auto_options opt;
    opt.max_rows = 64;
    opt.allowed = only(c.p);
    ops::tc_auto_linear_plan<T> p16(w.view(), sg.exec(), opt);
    ops::tc_auto_linear_plan<T, float> p32(w.view(), sg.exec(), opt);
    REQUIRE(p16.path(1) == c.p);
    REQUIRE(p16.built() == only(c.p));
    for (std::int64_t n : {1, 3, 17, 64}) {
      std::string const what = std::string(policy::tc_path_name(c.p));
      check_plan(sg.exec(), p16, w, n, 100u + unsigned(n), false, what);
      check_plan(sg.exec(), p32, w, n, 200u + unsigned(n), true, what);
    }
  }
}

TEST_CASE("tc_auto: the model's own choice, the cuBLAS epilogue staged in chunks", "[cuda][tc_auto]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  for (kind kd : {kind::dense, kind::unstructured, kind::blocks, kind::s24}) {
    auto const w = make_w<bf16>(kd, 136, 264, 31u + unsigned(kd));
    ops::tc_auto_options opt;
    opt.max_rows = 40;
    opt.epilogue_workspace_bytes = 3 * 136 * sizeof(float);  // 3 rows a chunk
    ops::tc_auto_linear_plan<bf16> p(w.view(), sg.exec(), opt);
    INFO(p.reason(8));
    CHECK(has(p.reason(8), "N = 8"));
    for (std::int64_t n : {1, 8, 40}) {
      CHECK((p.built() & only(p.path(n))) != 0);
      check_plan(sg.exec(), p, w, n, 7u + unsigned(n), true, "model");
    }
  }
  // The cuBLAS path with a 16-bit Y and an epilogue runs in chunks of 3 rows.
  auto const w = make_w<fp16>(kind::dense, 136, 264, 5u);
  ops::tc_auto_options opt;
  opt.max_rows = 10;
  opt.allowed = only(policy::tc_path::cublas_dense);
  opt.epilogue_workspace_bytes = 3 * 136 * sizeof(float);
  ops::tc_auto_linear_plan<fp16> p(w.view(), sg.exec(), opt);
  for (std::int64_t n : {1, 3, 10}) check_plan(sg.exec(), p, w, n, 50u + unsigned(n), true, "chunks");
}

TEST_CASE("tc_auto: tune() measures, keeps the winners, and later plans of the structure read them",
          "[cuda][tc_auto]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  auto const w = make_w<bf16>(kind::blocks, 256, 512, 77u);
  ops::tc_auto_options opt;
  opt.max_rows = 128;
  ops::tc_auto_linear_plan<bf16> p(w.view(), sg.exec(), opt);
  p.tune(sg.exec(), {1, 128});
  for (std::int64_t n : {1, 128}) {
    INFO(p.reason(n));
    CHECK(has(p.reason(n), "measured by tune() at N = " + std::to_string(n)));
    CHECK(has(p.reason(n), "cublas_dense"));  // every candidate was timed
    check_plan(sg.exec(), p, w, n, 3u, false, "tuned");
  }
  unsigned const used = only(p.path(1)) | only(p.path(128));
  CHECK((p.built() & used) == used);
  ops::tc_auto_linear_plan<bf16> q(w.view(), sg.exec(), opt);  // same structure: the cache
  CHECK(q.path(1) == p.path(1));
  CHECK(q.path(128) == p.path(128));
  CHECK(has(q.reason(128), "measured by tune()"));
}

TEST_CASE("tc_auto: refusals before any launch", "[cuda][tc_auto]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  auto ex = sg.exec();
  auto const w = make_w<bf16>(kind::unstructured, 64, 96, 9u);
  ops::tc_auto_options opt;
  opt.max_rows = 16;
  opt.allowed = only(policy::tc_path::sparse24);  // W is not 2:4
  CHECK(has(error_text([&] { ops::tc_auto_linear_plan<bf16> p(w.view(), ex, opt); }), "no path left"));
  opt.allowed = 0xfu;
  opt.max_rows = 0;
  CHECK(has(error_text([&] { ops::tc_auto_linear_plan<bf16> p(w.view(), ex, opt); }), "max_rows"));
  opt.max_rows = 16;
  ops::tc_auto_linear_plan<bf16> p(w.view(), ex, opt);
  buffer<bf16, device_space> x(std::size_t(32 * 96), ex), y(std::size_t(32 * 64), ex);
  CHECK(has(error_text([&] { p.run(ex, dense_view<bf16 const>{32, 96, 96, x.data()}, dense_view<bf16>{32, 64, 64, y.data()}); }),
            "max_rows"));
  CHECK(has(error_text([&] { p.run(ex, dense_view<bf16 const>{8, 95, 96, x.data()}, dense_view<bf16>{8, 64, 64, y.data()}); }),
            "need X N x 96"));
  CHECK(has(error_text([&] { p.tune(ex, {17}); }), "outside [1, max_rows = 16]"));
}
