// The plan protocol of core/plan.hpp on ops::dense_sparse_plan (the one dense x sparse path):
// can_implement, caller-supplied workspace, runs on two streams, a plan destroyed right after
// a run on a stream other than its own (compute-sanitizer memcheck would report a use after
// free), host and device weights giving the same plan, and one test body run on the host and
// the device executor.
#include "sdnn_gpu_test.cuh"
#include "sdnn_test_util.hpp"

#include <sdnn/sdnn.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

using namespace sdnn;

namespace {

using sdnn_test::stream_pair;

// Small integers: every summation order gives the same bits, so results compare with ==.
csr_matrix<float, std::int32_t> random_w(std::int32_t k, std::int32_t n, double density, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::int32_t> rp{0}, ci;
  std::vector<float> v;
  for (std::int32_t i = 0; i < k; ++i) {
    for (std::int32_t j = 0; j < n; ++j)
      if (u(g) < density) {
        ci.push_back(j);
        v.push_back(static_cast<float>(static_cast<int>(g() % 5) - 2));
      }
    rp.push_back(static_cast<std::int32_t>(ci.size()));
  }
  return make_csr<float, std::int32_t>(k, n, rp, ci, v);
}
dense_matrix<float> random_a(std::int64_t m, std::int64_t k, std::uint32_t seed, double empty_rows = 0.3) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(0, 1);
  dense_matrix<float> a(m, k);
  for (std::int64_t i = 0; i < m; ++i) {
    if (u(g) < empty_rows) continue;
    for (std::int64_t j = 0; j < k; ++j) a(i, j) = u(g) < 0.3 ? static_cast<float>(g() % 4) : 0.f;
  }
  return a;
}

// One body for both executors: out = epi(a * w) through the executor's path.
dense_matrix<float> product(host_exec, dense_matrix<float> const& a, csr_matrix<float, std::int32_t> const& w,
                            basic_epilogue<float> const& epi) {
  dense_matrix<float> c(a.rows(), w.cols());
  ops::spmm_dense_sparse(host_exec{}, policy::sparse_linear_default{}, a.view(), w.view(), c.view(), epi);
  return c;
}
dense_matrix<float> product(cuda_exec e, dense_matrix<float> const& a, csr_matrix<float, std::int32_t> const& w,
                            basic_epilogue<float> const& epi) {
  auto da = to_device(a, e);
  auto dw = to_device(w, e);
  dense_matrix<float, device_space> dc(a.rows(), w.cols(), e);
  ops::spmm_dense_sparse(e, policy::sparse_linear_default{}, dense_view<float const>(da.view()), dw.view(), dc.view(),
                         epi);
  return to_host(dc, e);
}

template <class Exec>
void check_product(Exec exec) {
  auto const w = random_w(300, 170, 0.05, 17u);
  auto const a = random_a(61, 300, 18u);
  auto const epi = epilogue_capped_relu<float>(-1.f, 6.f);
  auto const c = product(exec, a, w, epi);
  // The reference loop, written out: k ascending, epilogue per element.
  for (std::int64_t i = 0; i < a.rows(); ++i)
    for (std::int64_t j = 0; j < w.cols(); ++j) {
      float acc = 0;
      for (std::int32_t k = 0; k < w.rows(); ++k)
        for (std::int32_t p = w.row_ptr()[k]; p < w.row_ptr()[k + 1]; ++p)
          if (w.col_idx()[p] == j) acc += a(i, k) * w.values()[p];
      REQUIRE(c(i, j) == epi(acc, j));
    }
}

}  // namespace

TEST_CASE("dense x sparse: one test body on the host and the device executor", "[cuda][plan]") {
  check_product(host_exec{});
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s = nullptr;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  check_product(cuda_exec{s});
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

TEST_CASE("dense_sparse_plan: can_implement says why, the constructor throws the same reason", "[cuda][plan]") {
  using plan_t = ops::dense_sparse_plan<policy::csc_gather<>, float>;
  REQUIRE(plan_t::can_implement(10, 10, 5).ok());
  auto const st = plan_t::can_implement(std::int64_t{1} << 33, 4, 8);
  REQUIRE_FALSE(st.ok());
  REQUIRE(sdnn_test::has(st.why(), "int32"));
  REQUIRE_FALSE(plan_t::can_implement(-1, 4, 0).ok());
}

TEST_CASE("dense_sparse_plan: caller-supplied workspace, two streams, destroyed after a run elsewhere",
          "[cuda][plan]") {
  SDNN_REQUIRE_DEVICE();
  stream_pair sp;
  cuda_exec ea{sp.a}, eb{sp.b};
  std::int64_t const m = 700, k = 512, n = 384;
  auto const w = random_w(static_cast<std::int32_t>(k), static_cast<std::int32_t>(n), 0.04, 5u);
  auto const a = random_a(m, k, 6u, 0.5);
  auto const epi = epilogue_capped_relu<float>(-1.f, 8.f);
  dense_matrix<float> ref(m, n);
  ops::spmm_dense_sparse(host_exec{}, policy::csc_gather<>{}, a.view(), w.view(), ref.view(), epi);
  auto da = to_device(a, ea);
  dense_view<float const> av(da.view());

  using skip_plan = ops::dense_sparse_plan<policy::skip_empty_rows<policy::csc_tiled<16>>, float>;
  SECTION("a plan without its own workspace refuses a run without one, and runs with one per stream") {
    skip_plan p(w, ea, plan_options{m, /*own_workspace=*/false});
    REQUIRE(p.workspace_bytes() > 0);
    dense_matrix<float, device_space> c1(m, n, ea), c2(m, n, ea);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(sp.a));
    REQUIRE(sdnn_test::has(sdnn_test::error_text([&] { p.run(ea, av, c1.view(), epi); }), "needs a workspace"));
    buffer<unsigned char, device_space> small(p.workspace_bytes() / 2, ea);
    REQUIRE(sdnn_test::has(
        sdnn_test::error_text([&] { p.run(ea, av, c1.view(), epi, workspace{small.data(), small.size()}); }),
        "workspace of"));
    buffer<unsigned char, device_space> w1(p.workspace_bytes(), ea), w2(p.workspace_bytes(), ea);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(sp.a));
    p.run(ea, av, c1.view(), epi, workspace{w1.data(), w1.size()});
    p.run(eb, av, c2.view(), epi, workspace{w2.data(), w2.size()});
    auto h1 = to_host(c1, ea);
    auto h2 = to_host(c2, eb);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        REQUIRE(h1(i, j) == ref(i, j));
        REQUIRE(h2(i, j) == ref(i, j));
      }
  }
  SECTION("destroying a plan right after a run on another stream keeps that run's memory alive") {
    dense_matrix<float, device_space> c(m, n, eb);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(sp.b));
    for (int round = 0; round < 4; ++round) {
      auto p = std::make_unique<skip_plan>(w, ea, plan_options{m, true});  // home stream a
      SDNN_CUDA_CHECK(cudaStreamSynchronize(sp.a));
      p->run(eb, av, c.view(), epi);  // enqueued on b, uses the plan's own workspace and weights
      p.reset();                      // no host sync: the release waits for stream b
    }
    auto h = to_host(c, eb);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) REQUIRE(h(i, j) == ref(i, j));
  }
  SECTION("host and device weights make the same plan") {
    auto dw = to_device(w, ea);
    skip_plan from_host(w, ea, plan_options{m, true});
    skip_plan from_device(dw, ea, plan_options{m, true});
    REQUIRE(from_host.tiles_ok() == from_device.tiles_ok());
    dense_matrix<float, device_space> c1(m, n, ea), c2(m, n, ea);
    from_host.run(ea, av, c1.view(), epi);
    from_device.run(ea, av, c2.view(), epi);
    auto h1 = to_host(c1, ea);
    auto h2 = to_host(c2, ea);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        REQUIRE(h1(i, j) == ref(i, j));
        REQUIRE(h2(i, j) == ref(i, j));
      }
  }
  SDNN_CUDA_CHECK(cudaDeviceSynchronize());
}

TEST_CASE("dense_sparse_plan: every policy, every row or listed rows, against the reference", "[cuda][plan]") {
  SDNN_REQUIRE_DEVICE();
  stream_pair sp;
  cuda_exec e{sp.a};
  std::int64_t const m = 45, k = 200, n = 130;
  auto const w = random_w(static_cast<std::int32_t>(k), static_cast<std::int32_t>(n), 0.08, 9u);
  auto const a = random_a(m, k, 10u, 0.4);
  auto const epi = epilogue_capped_relu<float>(-1.f, 8.f);
  dense_matrix<float> ref(m, n);
  ops::spmm_dense_sparse(host_exec{}, policy::csc_gather<>{}, a.view(), w.view(), ref.view(), epi);
  auto da = to_device(a, e);
  dense_view<float const> av(da.view());
  // rows listed in a scrambled order: 44, 0, 7, 3 (the rest must stay untouched)
  std::vector<std::int32_t> list = {44, 0, 7, 3};
  auto dl = copy_to<device_space>(host_buffer<std::int32_t>(list.begin(), list.end()), e);
  auto run_one = [&](auto policy_tag) {
    using P = decltype(policy_tag);
    INFO("policy " << policy::name<P>());
    ops::dense_sparse_plan<P, float> p(w, e, plan_options{m, true});
    dense_matrix<float, device_space> c(m, n, e);
    p.run(e, av, c.view(), epi);
    auto h = to_host(c, e);
    bool const exact = !policy::is_cusparse_v<P>;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        REQUIRE((exact ? h(i, j) == ref(i, j) : std::abs(h(i, j) - ref(i, j)) <= 1e-4f));
    if constexpr (!policy::is_cusparse_v<P>) {
      host_buffer<float> poison(static_cast<std::size_t>(m * n), -7.f);
      auto dc = copy_to<device_space>(poison, e);
      p.run_rows(e, av, dense_view<float>{m, n, n, dc.data()}, epi,
                 ops::listed_rows{dl.data(), nullptr, static_cast<std::int32_t>(list.size())}, nullptr);
      auto hv = sdnn_test::to_vector(dc, sp.a);
      for (std::int64_t i = 0; i < m; ++i) {
        bool const listed = std::find(list.begin(), list.end(), static_cast<std::int32_t>(i)) != list.end();
        for (std::int64_t j = 0; j < n; ++j)
          REQUIRE(hv[static_cast<std::size_t>(i * n + j)] == (listed ? ref(i, j) : -7.f));
      }
    }
  };
  run_one(policy::csc_gather<4>{});
  run_one(policy::csc_gather<32>{});
  run_one(policy::csc_tiled<8>{});
  run_one(policy::skip_empty_rows<policy::csc_gather<16>>{});
  run_one(policy::sparse_linear_default{});
  run_one(policy::cusparse_reuse_buffer{});
  run_one(policy::cusparse_buffer_per_call{});
  run_one(policy::cusparse_filter_rows{});
}
