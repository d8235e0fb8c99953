// The automatic 16-bit linear layer (ops::tc_auto_linear_plan) on the device: every path it can
// take (each forced through the `allowed` mask, and the model's own choice) against the host
// reference on the same rounded inputs, both value types and both output types, at sizes that
// are multiples of no tile; the cuBLAS path's epilogue staged in chunks; tune() and the
// process-wide cache; refusals before any launch; the tc_linear layer alone and in a
// sequential<bf16>.
#include "sdnn_gpu_test.cuh"
#include "sdnn_tc_fixtures.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/linear/op/tc_auto.cuh>
#include <sdnn/linear/tc_linear_layer.cuh>
#include <sdnn/pipeline/sequential.cuh>
#include <sdnn/train/op/prune_sparse24.hpp>
#include <sdnn/train/op/prune_structured.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

using namespace sdnn;
using sdnn_test::download;
using sdnn_test::error_text;
using sdnn_test::has;
using sdnn_test::out_bits;
using sdnn_test::random_matrix;
using sdnn_test::stream_guard;
using sdnn_test::upload;

namespace {

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

template <class T>
dense_matrix<T> clone(dense_matrix<T> const& a) {
  dense_matrix<T> c(a.rows(), a.cols());
  std::copy(a.values().begin(), a.values().end(), c.values().begin());
  return c;
}

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
                 cas{kind::unstructured, policy::tc_path::cublas_dense},
                 cas{kind::unstructured, policy::tc_path::cusparse_csr},
                 cas{kind::unstructured, policy::tc_path::tc_bitmap},
                 cas{kind::unstructured, policy::tc_path::csr_gather}}) {
    auto const w = make_w<T>(c.w, m, k, 11u + unsigned(c.w));
    stream_guard sg;
    bool const one_row = c.p == policy::tc_path::cusparse_csr;  // that path runs one row only
    bool const gather = c.p == policy::tc_path::csr_gather;    // and that one up to 16
    ops::tc_auto_options opt;
    opt.max_rows = one_row ? 1 : gather ? 16 : 64;
    opt.allowed = only(c.p);
    ops::tc_auto_linear_plan<T> p16(w.view(), sg.exec(), opt);
    ops::tc_auto_linear_plan<T, float> p32(w.view(), sg.exec(), opt);
    REQUIRE(p16.path(1) == c.p);
    REQUIRE(p16.built() == only(c.p));
    for (std::int64_t n : {1, 3, 16, 17, 64}) {
      if (n > opt.max_rows) break;
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
  // Between the tuned sizes: the nearest tuned N whose winner can run it.
  CHECK(p.path(100) == p.path(128));
  // No rows: nothing runs, nothing fails.
  p.run(sg.exec(), dense_view<bf16 const>{0, 512, 512, nullptr}, dense_view<bf16>{0, 256, 256, nullptr});
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
  opt.allowed = only(policy::tc_path::cusparse_csr);  // one row only, and max_rows is 16
  CHECK(has(error_text([&] { ops::tc_auto_linear_plan<bf16> p(w.view(), ex, opt); }), "runs one row only"));
  opt.allowed = only(policy::tc_path::csr_gather);  // up to 16 rows
  ops::tc_auto_linear_plan<bf16> g16(w.view(), ex, opt);
  CHECK(g16.path(16) == policy::tc_path::csr_gather);
  opt.max_rows = 17;
  CHECK(has(error_text([&] { ops::tc_auto_linear_plan<bf16> p(w.view(), ex, opt); }), "csr_gather up to 16"));
  opt.max_rows = 16;
  opt.allowed = policy::tc_all_paths;
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

TEST_CASE("tc_linear layer: device forward against its host forward, and in a sequential<bf16>", "[cuda][tc_auto]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  auto ex = sg.exec();
  std::int64_t const n = 24, k = 160, h = 96, m = 40;
  auto w1 = make_w<bf16>(kind::blocks, h, k, 61u), w2 = make_w<bf16>(kind::unstructured, m, h, 62u);
  std::vector<float> b1(static_cast<std::size_t>(h)), b2(static_cast<std::size_t>(m));
  for (std::size_t i = 0; i < b1.size(); ++i) b1[i] = 0.01f * float(int(i % 9) - 4);
  for (std::size_t i = 0; i < b2.size(); ++i) b2[i] = 0.02f * float(int(i % 5) - 2);
  auto x = random_matrix<bf16>(n, k, 63u);
  auto dx = upload(std::vector<bf16>(x.values().begin(), x.values().end()), ex);

  // One layer: the device result against the host forward (the reference) with the bound of
  // check_plan, here with a float output's reference recomputed from the same rounded inputs.
  layers::tc_linear<bf16> l1(clone(w1), epilogue_relu(b1));
  CHECK(l1.name() == "tc_linear<bf16>");
  l1.plan(n, k, ex);
  INFO(l1.reason(n));
  CHECK(has(l1.reason(n), "N = 24"));
  buffer<bf16, device_space> y1(std::size_t(n * h), ex);
  l1.forward(ex, dense_view<bf16 const>{n, k, k, dx.data()}, dense_view<bf16>{n, h, h, y1.data()});
  auto got = download(y1.data(), y1.size(), ex);
  dense_matrix<float> ref(n, h);
  ops::tc_auto_linear(host_exec{}, std::as_const(x).view(), std::as_const(w1).view(), ref.view(), l1.host_epilogue());
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < h; ++j) {
      double s = 0;
      for (std::int64_t q = 0; q < k; ++q) s += std::fabs(double(float(x(i, q))) * double(float(w1(j, q))));
      double const acc = 4.0 * double(k) * std::ldexp(1.0, -24) * s, r = ref(i, j);
      bad += !(std::fabs(double(float(got[std::size_t(i * h + j)])) - r) <= acc + std::ldexp(1.0, -8) * (std::fabs(r) + acc));
    }
  CHECK(bad == 0);

  // A sequential of two: the same bits as the two layers run one after the other.
  layers::tc_linear<bf16> l2(clone(w2), epilogue_relu(b2));
  l2.plan(n, h, ex);
  buffer<bf16, device_space> y2(std::size_t(n * m), ex);
  l2.forward(ex, dense_view<bf16 const>{n, h, h, y1.data()}, dense_view<bf16>{n, m, m, y2.data()});
  auto two = download(y2.data(), y2.size(), ex);
  sequential<bf16> net;
  net.add(std::make_unique<layers::tc_linear<bf16>>(clone(w1), epilogue_relu(b1)));
  net.add(std::make_unique<layers::tc_linear<bf16>>(clone(w2), epilogue_relu(b2)));
  net.plan(n, k, ex);
  buffer<bf16, device_space> ys(std::size_t(n * m), ex);
  net.forward(ex, dense_view<bf16 const>{n, k, k, dx.data()}, dense_view<bf16>{n, m, m, ys.data()});
  auto seq = download(ys.data(), ys.size(), ex);
  CHECK(std::memcmp(seq.data(), two.data(), seq.size() * sizeof(bf16)) == 0);
  // The host pipeline (the references): layer 1's outputs on both sides are roundings of sums
  // within the bound above, so at most 2^-7 |y1| + acc1 apart (one bf16 ulp and the sum's
  // error); through layer 2 that is sum_q |w2| (2^-7 |y1| + acc1), plus layer 2's own bound.
  dense_matrix<bf16> yh(n, m);
  net.forward(host_exec{}, std::as_const(x).view(), yh.view());
  bad = 0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < m; ++j) {
      double prop = 0, s = 0;
      for (std::int64_t q = 0; q < h; ++q) {
        double const y1q = std::fabs(double(float(got[std::size_t(i * h + q)])));
        double s1 = 0;
        for (std::int64_t r = 0; r < k; ++r) s1 += std::fabs(double(float(x(i, r))) * double(float(w1(q, r))));
        double const w = std::fabs(double(float(w2(j, q))));
        prop += w * (std::ldexp(1.0, -7) * (y1q + 1e-30) + 4.0 * double(k) * std::ldexp(1.0, -24) * s1 * 2);
        s += w * y1q;
      }
      double const r = double(float(yh(i, j))), acc = 4.0 * double(h) * std::ldexp(1.0, -24) * s + prop;
      bad += !(std::fabs(double(float(seq[std::size_t(i * m + j)])) - r) <= acc + std::ldexp(1.0, -7) * (std::fabs(r) + acc));
    }
  CHECK(bad == 0);
  // Refusals: the bias length, the input width.
  std::vector<float> short_bias(3);
  CHECK(has(error_text([&] { layers::tc_linear<bf16> bad_l(clone(w1), epilogue_relu(short_bias)); }), "the bias has 3 values"));
  CHECK(has(error_text([&] { l1.plan(n, k + 1, ex); }), "expected 160 input features"));
}
