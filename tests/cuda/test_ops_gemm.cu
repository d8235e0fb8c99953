// Device tests of the dense-product policies (tiled GEMM at two tile shapes, cuBLAS,
// empty-row mask and compaction, automatic) and of the row-skip building blocks against
// the host reference, on seeded random small-integer data (float exact with ==; __half
// within one half ulp relative: inputs and float accumulation are exact, only the final
// store rounds).
#include "sdnn_gpu_test.cuh"

#include <sdnn/sdnn.hpp>
#include <sdnn/linear/op/gemm.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace sdnn_ops_gemm_test {
using namespace sdnn;

namespace {

// rows x cols small integers in [-4, 4]; a fraction `empty` of the rows all zero.
std::vector<float> random_matrix(std::int64_t rows, std::int64_t cols, std::int64_t ld, double empty,
                                 std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> v(-4, 4);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<float> m(static_cast<std::size_t>(std::max<std::int64_t>(rows * ld, 0)), 0.f);
  for (std::int64_t i = 0; i < rows; ++i) {
    bool const dead = u(rng) < empty;
    for (std::int64_t j = 0; j < cols; ++j) m[i * ld + j] = dead ? 0.f : static_cast<float>(v(rng));
  }
  return m;
}

template <class T>
struct dev {
  buffer<T, device_space> d;
  std::int64_t rows, cols, ld;
  dev(std::vector<float> const& h, std::int64_t r, std::int64_t c, std::int64_t l, cuda_exec e)
      : d(h.size(), e), rows(r), cols(c), ld(l) {
    std::vector<T> t(h.size());
    for (std::size_t i = 0; i < h.size(); ++i) t[i] = value_cast<T>(h[i]);
    if (!t.empty())
      SDNN_CUDA_CHECK(cudaMemcpyAsync(d.data(), t.data(), t.size() * sizeof(T), cudaMemcpyHostToDevice, e.stream));
  }
  dense_view<T const> cview() const { return {rows, cols, ld, d.data()}; }
  dense_view<T> view() { return {rows, cols, ld, d.data()}; }
  std::vector<float> host(cuda_exec e) const {
    std::vector<T> t(d.size());
    if (!t.empty())
      SDNN_CUDA_CHECK(cudaMemcpyAsync(t.data(), d.data(), t.size() * sizeof(T), cudaMemcpyDeviceToHost, e.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));
    std::vector<float> f(t.size());
    for (std::size_t i = 0; i < t.size(); ++i) f[i] = value_cast<float>(t[i]);
    return f;
  }
};

struct gemm_case {
  std::string name;
  std::int64_t m, k, n;
  double empty;
  std::int64_t pad = 0;  // leading dimensions = cols + pad
};

std::vector<gemm_case> gemm_cases() {
  return {{"empty M", 0, 8, 8, 0},           {"K = 0", 5, 0, 9, 0},
          {"1x1x1", 1, 1, 1, 0},             {"one column", 70, 33, 1, 0},
          {"one row", 1, 300, 129, 0},       {"tile multiples", 128, 64, 128, 0},
          {"odd sizes", 129, 65, 131, 0.2},  {"odd ld (scalar path)", 100, 37, 75, 0.1, 1},
          {"larger", 257, 513, 250, 0.5},    {"all rows empty", 70, 40, 50, 1.0},
          {"90% empty rows", 600, 96, 200, 0.9}};
}

template <class T, class Policy>
void run_gemm_case(char const* pname, gemm_case const& g, std::uint32_t seed, cuda_exec e) {
  std::int64_t const lda = g.k + g.pad, ldb = g.n + g.pad, ldc = g.n + g.pad;
  auto const a = random_matrix(g.m, g.k, lda, g.empty, seed);
  auto const b = random_matrix(g.k, g.n, ldb, 0.0, seed + 1);
  std::vector<float> bias(static_cast<std::size_t>(g.n));
  for (std::int64_t j = 0; j < g.n; ++j) bias[j] = static_cast<float>(j % 7) - 3.f;
  buffer<float, device_space> dbias(bias.size(), e);
  if (!bias.empty())
    SDNN_CUDA_CHECK(cudaMemcpyAsync(dbias.data(), bias.data(), bias.size() * 4, cudaMemcpyHostToDevice, e.stream));
  for (int ep = 0; ep < 3; ++ep) {
    basic_epilogue<float> he, de;
    if (ep == 1) {
      he.bias = bias.data(), de.bias = dbias.data();
      he.relu = de.relu = true;
      he.has_cap = de.has_cap = true;
      he.cap = de.cap = 40.f;
    } else if (ep == 2) {
      he = de = epilogue_capped_relu<float>(-2.f, 32.f);
    }
    std::vector<float> ref(static_cast<std::size_t>(g.m * ldc), 99.f);
    ops::gemm(host_exec{}, Policy{}, dense_view<float const>{g.m, g.k, lda, a.data()},
              dense_view<float const>{g.k, g.n, ldb, b.data()}, dense_view<float>{g.m, g.n, ldc, ref.data()}, he);
    dev<T> da(a, g.m, g.k, lda, e), db(b, g.k, g.n, ldb, e);
    dev<T> dc(std::vector<float>(ref.size(), 99.f), g.m, g.n, ldc, e);
    ops::gemm(e, Policy{}, da.cview(), db.cview(), dc.view(), de);
    auto const out = dc.host(e);
    std::int64_t bad = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      double const d = out[i], r = ref[i];
      bool const ok = std::is_same_v<T, float> ? d == r : std::abs(d - r) <= std::ldexp(std::abs(r), -10);
      if (!ok && bad++ < 3)
        UNSCOPED_INFO(pname << " / " << g.name << " / epilogue " << ep << ": C[" << i << "] = " << d << ", expected "
                            << r);
    }
    CHECK(bad == 0);
  }
}

}  // namespace

TEST_CASE("tiled GEMM (float) matches the reference for every size", "[cuda][ops][gemm][ops_small]") {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  cuda_exec e{s};
  std::uint32_t seed = 7;
  for (auto const& g : gemm_cases()) {
    ++seed;
    run_gemm_case<float, policy::tiled_gemm<128, 128, 8>>("tiled<128,128,8>", g, seed, e);
    run_gemm_case<float, policy::tiled_gemm<64, 64, 8>>("tiled<64,64,8>", g, seed, e);
    run_gemm_case<float, policy::tiled_gemm<128, 128, 16>>("tiled<128,128,16>", g, seed, e);
    run_gemm_case<float, policy::skip_empty_rows_mask<policy::tiled_gemm<>>>("mask", g, seed, e);
    run_gemm_case<float, policy::skip_empty_rows_compact<policy::tiled_gemm<>>>("compact", g, seed, e);
    run_gemm_case<float, policy::skip_empty_rows_compact<policy::tiled_gemm<64, 64, 8>>>("compact64", g, seed, e);
    run_gemm_case<float, policy::automatic>("automatic", g, seed, e);
    run_gemm_case<float, policy::cublas_gemm>("cublas", g, seed, e);
  }
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

TEST_CASE("tiled GEMM (__half) matches the reference within half rounding", "[cuda][ops][gemm][ops_small]") {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  cuda_exec e{s};
  std::uint32_t seed = 70;
  for (auto const& g : gemm_cases()) {
    ++seed;
    run_gemm_case<__half, policy::tiled_gemm<128, 128, 16>>("half tiled<128,128,16>", g, seed, e);
    run_gemm_case<__half, policy::skip_empty_rows_compact<policy::tiled_gemm<128, 128, 16>>>("half compact", g, seed,
                                                                                            e);
    run_gemm_case<__half, policy::skip_empty_rows_mask<policy::tiled_gemm<128, 128, 16>>>("half mask", g, seed, e);
    run_gemm_case<__half, policy::automatic>("half automatic", g, seed, e);
    run_gemm_case<__half, policy::cublas_gemm>("half cublas", g, seed, e);
  }
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

TEST_CASE("row_skip_plan counts, partitions and fills empty rows", "[cuda][ops][row_skip][ops_small]") {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  cuda_exec e{s};
  for (double empty : {0.0, 0.5, 0.9, 0.99, 1.0}) {
    std::int64_t const m = 1000, k = 77, ld = 80;
    auto const a = random_matrix(m, k, ld, empty, 11);
    std::vector<int> counts(static_cast<std::size_t>(m));
    reference::row_nonzero_counts(dense_view<float const>{m, k, ld, a.data()}, counts.data());
    dev<float> da(a, m, k, ld, e);
    ops::row_skip_plan<int> plan(da.cview(), e);
    std::vector<int> dcounts(static_cast<std::size_t>(m)), list(static_cast<std::size_t>(m)),
        empties(static_cast<std::size_t>(m));
    int n_empty = -1;
    SDNN_CUDA_CHECK(cudaMemcpyAsync(dcounts.data(), plan.counts(), m * 4, cudaMemcpyDeviceToHost, s));
    SDNN_CUDA_CHECK(cudaMemcpyAsync(list.data(), plan.row_list(), m * 4, cudaMemcpyDeviceToHost, s));
    SDNN_CUDA_CHECK(cudaMemcpyAsync(empties.data(), plan.empty_list(), m * 4, cudaMemcpyDeviceToHost, s));
    SDNN_CUDA_CHECK(cudaMemcpyAsync(&n_empty, plan.num_empty(), 4, cudaMemcpyDeviceToHost, s));
    int const live = plan.num_live_host(e);
    REQUIRE(dcounts == counts);
    int expected_live = 0;
    for (int c : counts) expected_live += c != 0;
    REQUIRE(live == expected_live);
    REQUIRE(n_empty == m - live);
    // Live rows ascending, empty rows ascending, together every row once.
    REQUIRE(std::is_sorted(list.begin(), list.begin() + live));
    std::vector<int> all(list.begin(), list.begin() + live);
    for (int i = 0; i < live; ++i) REQUIRE((list[i] >= 0 && list[i] < m && counts[list[i]] != 0));
    for (int i = 0; i < n_empty; ++i) {
      REQUIRE((empties[i] >= 0 && empties[i] < m && counts[empties[i]] == 0));
      all.push_back(empties[i]);
    }
    std::sort(all.begin(), all.end());
    REQUIRE(all.size() == static_cast<std::size_t>(m));
    for (int i = 0; i < m; ++i) REQUIRE(all[i] == i);
    // fill_empty_rows writes epi(0) = bias into empty rows only.
    basic_epilogue<float> epi;
    epi.bias_scalar = 3.f;
    dev<float> dc(std::vector<float>(static_cast<std::size_t>(m * 5), -1.f), m, 5, 5, e);
    plan.fill_empty_rows(dc.view(), epi, e);
    auto const c = dc.host(e);
    for (std::int64_t i = 0; i < m; ++i)
      for (int j = 0; j < 5; ++j) REQUIRE(c[i * 5 + j] == (counts[i] ? -1.f : 3.f));
  }
  {  // CSR counts. Scoped: device buffers free on s, so they must go before s is destroyed.
    auto const h = make_csr<float, int>(4, 3, {0, 2, 2, 3, 3}, {0, 2, 1}, {1.f, 2.f, 3.f});
    buffer<int, device_space> rp(5, e), ci(3, e);
    buffer<float, device_space> v(3, e);
    SDNN_CUDA_CHECK(cudaMemcpyAsync(rp.data(), h.row_ptr().data(), 20, cudaMemcpyHostToDevice, s));
    ops::row_skip_plan<int> plan(csr_view<float, int>{4, 3, 3, rp.data(), ci.data(), v.data()}, e);
    std::vector<int> counts(4), list(4);
    SDNN_CUDA_CHECK(cudaMemcpyAsync(counts.data(), plan.counts(), 16, cudaMemcpyDeviceToHost, s));
    SDNN_CUDA_CHECK(cudaMemcpyAsync(list.data(), plan.row_list(), 16, cudaMemcpyDeviceToHost, s));
    REQUIRE(plan.num_live_host(e) == 2);
    REQUIRE(counts == std::vector<int>{2, 0, 1, 0});
    REQUIRE(list[0] == 0);
    REQUIRE(list[1] == 2);
  }
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

TEST_CASE("gemm rejects mismatched shapes", "[cuda][ops][gemm]") {
  SDNN_REQUIRE_DEVICE();
  dense_view<float const> a{4, 5, 5, nullptr}, b{6, 3, 3, nullptr};
  dense_view<float> c{4, 3, 3, nullptr};
  REQUIRE_THROWS_AS(ops::gemm(cuda_exec{}, policy::tiled_gemm<>{}, a, b, c, epilogue_none<float>()), sdnn::error);
}

}  // namespace sdnn_ops_gemm_test
