// The plan protocol of core/plan.hpp on the SpMM and row-skip plans (linear/op/spmm.cuh,
// linear/op/row_skip.cuh): can_implement says why and the constructor throws the same reason; a plan
// destroyed right after a run on a stream other than its own still gives the right result
// (compute-sanitizer memcheck would report a use after free); caller-supplied workspace for
// the plans whose scratch is not plan data (nnz-split carries, the row-skip CUB scratch).
#include "sdnn_gpu_test.cuh"
#include "sdnn_test_util.hpp"

#include <sdnn/sdnn.hpp>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

using namespace sdnn;

namespace {

using sdnn_test::stream_pair;

// Small integers: every summation order gives the same bits, so results compare with ==.
csr_matrix<float, std::int32_t> random_a(std::int32_t m, std::int32_t k, double density, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::int32_t> rp{0}, ci;
  std::vector<float> v;
  for (std::int32_t i = 0; i < m; ++i) {
    if (u(g) < 0.3) {  // empty rows for the row-skip plans
      rp.push_back(static_cast<std::int32_t>(ci.size()));
      continue;
    }
    for (std::int32_t j = 0; j < k; ++j)
      if (u(g) < density) {
        ci.push_back(j);
        v.push_back(static_cast<float>(static_cast<int>(g() % 5) - 2));
      }
    rp.push_back(static_cast<std::int32_t>(ci.size()));
  }
  return make_csr<float, std::int32_t>(m, k, rp, ci, v);
}
dense_matrix<float> random_b(std::int64_t k, std::int64_t n, std::uint32_t seed) {
  std::mt19937 g(seed);
  dense_matrix<float> b(k, n);
  for (std::int64_t i = 0; i < k; ++i)
    for (std::int64_t j = 0; j < n; ++j) b(i, j) = static_cast<float>(static_cast<int>(g() % 7) - 3);
  return b;
}

void require_equal(dense_matrix<float> const& got, dense_matrix<float> const& want) {
  REQUIRE(got.rows() == want.rows());
  REQUIRE(got.cols() == want.cols());
  for (std::int64_t i = 0; i < want.rows(); ++i)
    for (std::int64_t j = 0; j < want.cols(); ++j) REQUIRE(got(i, j) == want(i, j));
}

}  // namespace

TEST_CASE("spmm plans: can_implement says why, the constructor throws the same reason", "[cuda][plan]") {
  SDNN_REQUIRE_DEVICE();
  csr_view<float, std::int32_t> const a{100, 64, 0, nullptr, nullptr, nullptr};
  dense_view<float const> const b_ok{64, 8, 8, nullptr}, b_bad{63, 8, 8, nullptr};
  dense_view<float> const c_ok{100, 8, 8, nullptr}, c_bad{99, 8, 8, nullptr};

  using row_split = ops::csr_spmm_plan<policy::csr_row_split<>, float, std::int32_t>;
  REQUIRE(row_split::can_implement(a, b_ok, c_ok).ok());
  auto const st = row_split::can_implement(a, b_bad, c_ok);
  REQUIRE_FALSE(st.ok());
  REQUIRE(sdnn_test::has(st.why(), "but B has 63 rows"));
  REQUIRE(sdnn_test::has(st.why(), "csr_row_split"));
  REQUIRE(sdnn_test::has(sdnn_test::error_text([&] { row_split(a, b_bad, c_ok, cuda_exec{}); }), st.why()));

  using balanced = ops::csr_spmm_plan<policy::csr_nnz_balanced<>, float, std::int32_t>;
  auto const st2 = balanced::can_implement(a, b_ok, c_bad);
  REQUIRE_FALSE(st2.ok());
  REQUIRE(sdnn_test::has(st2.why(), "C must be 100 x 8"));

  // Blocked-ELL: tiles must divide A (the vendor's rule, said before cuSPARSE is called).
  tiled_dense_view<float const> t{};
  t.rows = 48;
  t.cols = 64;
  t.tile_rows = t.tile_cols = 32;
  using blocked = ops::tiled_spmm_plan<policy::cusparse_spmm<policy::cusparse_alg::blocked_ell_alg1>, float>;
  auto const st3 = blocked::can_implement(t, b_ok, dense_view<float>{48, 8, 8, nullptr});
  REQUIRE_FALSE(st3.ok());
  REQUIRE(sdnn_test::has(st3.why(), "multiples of the tile size 32"));

  // The staged-B grid limit, from shapes alone.
  using staged = ops::csr_spmm_plan<policy::csr_staged_b<>, float, std::int32_t>;
  csr_view<float, std::int32_t> const tall{std::int32_t{1} << 30, 64, 0, nullptr, nullptr, nullptr};
  auto const st4 = staged::can_implement(tall, b_ok, dense_view<float>{tall.rows, 8, 8, nullptr});
  REQUIRE_FALSE(st4.ok());
  REQUIRE(sdnn_test::has(st4.why(), "65535"));

  REQUIRE_FALSE(ops::row_skip_plan<std::int32_t>::can_implement(-1).ok());
  REQUIRE(ops::row_skip_plan<std::int32_t>::can_implement(1000).ok());
}

TEST_CASE("spmm plans: a plan destroyed right after a run on another stream", "[cuda][plan]") {
  SDNN_REQUIRE_DEVICE();
  stream_pair sp;
  cuda_exec ea{sp.a}, eb{sp.b};
  std::int32_t const m = 900, k = 300;
  std::int64_t const n = 96;
  auto const a = random_a(m, k, 0.05, 21u);
  auto const b = random_b(k, n, 22u);
  auto const epi = epilogue_capped_relu<float>(-1.f, 8.f);
  dense_matrix<float> ref(m, n);
  ops::spmm(host_exec{}, policy::csr_row_split<>{}, a.view(), b.view(), ref.view(), epi);
  auto da = to_device(a, ea);
  auto db = to_device(b, ea);
  auto coo = to_device(to_coo(a), ea);
  dense_matrix<float, device_space> c(m, n, eb);
  SDNN_CUDA_CHECK(cudaStreamSynchronize(sp.a));
  SDNN_CUDA_CHECK(cudaStreamSynchronize(sp.b));
  dense_view<float const> bv(db.view());

  auto round = [&](auto make) {
    for (int r = 0; r < 3; ++r) {
      auto p = make();  // home stream a
      SDNN_CUDA_CHECK(cudaStreamSynchronize(sp.a));
      SDNN_CUDA_CHECK(cudaMemsetAsync(c.view().data, 0xff, sizeof(float) * m * n, sp.b));
      p->run(eb, bv, c.view(), epi);  // enqueued on b: the plan's own workspace and arrays
      p.reset();                       // no host sync: the release waits for stream b
    }
    require_equal(to_host(c, eb), ref);
  };
  SECTION("csr_nnz_balanced (own carry)") {
    round([&] {
      return std::make_unique<ops::csr_spmm_plan<policy::csr_nnz_balanced<>, float, std::int32_t>>(da.view(), bv,
                                                                                                    c.view(), ea);
    });
  }
  SECTION("coo_nnz_split (own carry)") {
    round([&] {
      return std::make_unique<ops::coo_spmm_plan<policy::coo_nnz_split<>, float, std::int32_t>>(coo.view(), bv,
                                                                                                c.view(), ea);
    });
  }
  SECTION("skip_empty_rows_compact (the partition of A)") {
    round([&] {
      return std::make_unique<
          ops::csr_spmm_plan<policy::skip_empty_rows_compact<policy::csr_row_split<>>, float, std::int32_t>>(
          da.view(), bv, c.view(), ea);
    });
  }
  SECTION("csr_panels (A re-sorted)") {
    round([&] {
      return std::make_unique<ops::csr_spmm_plan<policy::csr_panels<16, 64, 1>, float, std::int32_t>>(da.view(), bv,
                                                                                                      c.view(), ea);
    });
  }
  SDNN_CUDA_CHECK(cudaDeviceSynchronize());
}

TEST_CASE("spmm and row-skip plans: caller-supplied workspace", "[cuda][plan]") {
  SDNN_REQUIRE_DEVICE();
  stream_pair sp;
  cuda_exec ea{sp.a}, eb{sp.b};
  std::int32_t const m = 700, k = 256;
  std::int64_t const n = 64;
  auto const a = random_a(m, k, 0.06, 31u);
  auto const b = random_b(k, n, 32u);
  auto const epi = epilogue_capped_relu<float>(-1.f, 8.f);
  dense_matrix<float> ref(m, n);
  ops::spmm(host_exec{}, policy::csr_row_split<>{}, a.view(), b.view(), ref.view(), epi);
  auto da = to_device(a, ea);
  auto db = to_device(b, ea);
  auto coo = to_device(to_coo(a), ea);
  dense_view<float const> bv(db.view());
  dense_matrix<float, device_space> c1(m, n, ea), c2(m, n, ea);
  SDNN_CUDA_CHECK(cudaStreamSynchronize(sp.a));

  auto check = [&](auto const& p) {
    REQUIRE(p.workspace_bytes() > 0);
    REQUIRE(sdnn_test::has(sdnn_test::error_text([&] { p.run(ea, bv, c1.view(), epi); }), "needs a workspace"));
    buffer<unsigned char, device_space> small(p.workspace_bytes() / 2, ea);
    REQUIRE(sdnn_test::has(
        sdnn_test::error_text([&] { p.run(ea, bv, c1.view(), epi, workspace{small.data(), small.size()}); }),
        "workspace of"));
    // One workspace per stream: the two runs may overlap.
    buffer<unsigned char, device_space> w1(p.workspace_bytes(), ea), w2(p.workspace_bytes(), ea);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(sp.a));
    p.run(ea, bv, c1.view(), epi, workspace{w1.data(), w1.size()});
    p.run(eb, bv, c2.view(), epi, workspace{w2.data(), w2.size()});
    require_equal(to_host(c1, ea), ref);
    require_equal(to_host(c2, eb), ref);
  };
  plan_options const no_ws{0, /*own_workspace=*/false};
  SECTION("csr_nnz_balanced") {
    ops::csr_spmm_plan<policy::csr_nnz_balanced<>, float, std::int32_t> p(da.view(), bv, c1.view(), ea, no_ws);
    check(p);
  }
  SECTION("coo_nnz_split") {
    ops::coo_spmm_plan<policy::coo_nnz_split<>, float, std::int32_t> p(coo.view(), bv, c1.view(), ea, no_ws);
    check(p);
  }
  SECTION("automatic passes the options on to the plan it picks") {
    ops::csr_spmm_plan<policy::automatic, float, std::int32_t> p(da.view(), bv, c1.view(), ea, no_ws);
    if (p.workspace_bytes() > 0) {
      check(p);
    } else {
      p.run(ea, bv, c1.view(), epi);
      require_equal(to_host(c1, ea), ref);
    }
  }
  SECTION("row_skip_plan") {
    ops::row_skip_plan<std::int32_t> p(m, ea, no_ws);
    REQUIRE(p.workspace_bytes() > 0);
    REQUIRE(sdnn_test::has(sdnn_test::error_text([&] { p.run(ea, da.view()); }), "needs a workspace"));
    buffer<unsigned char, device_space> w(p.workspace_bytes(), ea);
    p.run(ea, da.view(), workspace{w.data(), w.size()});
    std::int32_t live = 0;
    for (std::int32_t i = 0; i < m; ++i) live += a.row_ptr()[i + 1] != a.row_ptr()[i];
    REQUIRE(p.num_live_host(ea) == live);
  }
  SDNN_CUDA_CHECK(cudaDeviceSynchronize());
}
