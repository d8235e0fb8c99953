// Device tests of policy::csr_panels (linear/kernel/spmm_csr_panels.cuh) against the host
// reference: the panel build (every nonzero lands in its segment once, sentinels, offsets)
// is checked through the product on seeded random small-integer data, so float compares
// exactly. The cases hit the kernel's separate paths: chunks whose entries exceed the
// shared-memory capacity (read from global memory), chunks a block has no entry in (no B
// tile loaded), K not a multiple of the chunk, N not a multiple of the column slab,
// leading dimensions that rule out 16-byte copies, row blocks cut by M, empty matrices.
#include "sdnn_gpu_test.cuh"
#include "sdnn_spmm_fixtures.hpp"

#include <sdnn/sdnn.hpp>
#include <sdnn/linear/op/spmm.cuh>

#include <cstdint>
#include <string>
#include <vector>

namespace sdnn_spmm_panels_test {
using namespace sdnn;
using namespace sdnn_test;

namespace {

// The shared edge cases, plus the ones that reach the panel kernel's own paths.
std::vector<csr_case> panel_cases() {
  auto cs = csr_edge_cases();
  cs.insert(cs.end(), {
                          {"no columns of A", 9, 0, 12, 0.5, 0},
                          {"long rows among short (dense chunks: global-memory path)", 300, 4000, 40, 0.01, 0.3, 7},
                          {"dense rows (every chunk over capacity)", 150, 200, 130, 0.95, 0.0},
                          {"several row blocks, K % chunk != 0", 1000, 1000, 260, 0.05, 0.1},
                          {"very sparse (most chunks without entries)", 256, 3000, 64, 0.0005, 0.0},
                      });
  return cs;
}

template <class T, class Policy>
void run_panels(std::string const& pname, csr_case const& cs, std::uint32_t seed, cuda_exec e) {
  auto const a = random_csr(cs, seed);
  auto const b = random_dense(cs.k, cs.n, seed + 1);
  epilogue_set const eps(cs.n, e);
  device_csr<T> da(a, e);
  device_dense<T> db(b, cs.n + cs.ld_pad, e);
  // One plan, run with three epilogues: the panel copy of A is reused by every run.
  ops::csr_spmm_plan<Policy, T, int> plan(da.view(), db.cview(),
                                          dense_view<T>{cs.m, cs.n, cs.n + cs.ld_pad, nullptr}, e);
  for (int ep = 0; ep < epilogue_set::count; ++ep) {
    auto const he = eps.get(ep, false), de = eps.get(ep, true);
    dense_matrix<float> ref(cs.m, cs.n);
    ops::spmm(host_exec{}, policy::csr_row_split<>{}, a.view(), b.view(), ref.view(), he);
    device_dense<T> dc(dense_matrix<float>(cs.m, cs.n), cs.n + cs.ld_pad, e);
    plan.run(e, db.cview(), dc.view(), de);
    check_against(ref, dc, e, pname + " / " + cs.name + " / epilogue " + std::to_string(ep));
  }
}

}  // namespace

TEMPLATE_TEST_CASE("csr_panels matches the reference on edge cases and random inputs",
                   "[cuda][ops][spmm][panels]", float, __half) {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  {
    cuda_exec e{s};
    std::uint32_t seed = 777;
    for (auto const& cs : panel_cases()) {
      ++seed;
      run_panels<TestType, policy::csr_panels<8, 32, 1>>("panels<8,32,1>", cs, seed, e);
      run_panels<TestType, policy::csr_panels<8, 64, 1>>("panels<8,64,1>", cs, seed, e);
      run_panels<TestType, policy::csr_panels<1, 8, 2>>("panels<1,8,2>", cs, seed, e);
      run_panels<TestType, policy::csr_panels<3, 16, 1>>("panels<3,16,1>", cs, seed, e);
      if constexpr (std::is_same_v<TestType, float>) {
        run_panels<TestType, policy::csr_panels<16, 32, 1>>("panels<16,32,1>", cs, seed, e);
        run_panels<TestType, policy::csr_panels<16, 64, 1>>("panels<16,64,1>", cs, seed, e);
        run_panels<TestType, policy::csr_panels<8, 64, 2>>("panels<8,64,2>", cs, seed, e);
        run_panels<TestType, policy::csr_panels<8, 32, 2>>("panels<8,32,2>", cs, seed, e);
      }
    }
  }
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

// A few cases that still reach every path (several chunks through both buffers, a chunk
// over the staging capacity, the scalar copy for a padded ld), small enough for
// compute-sanitizer racecheck (benchmarks/gpu_check.sh runs it on [panels_race]).
TEST_CASE("csr_panels on small cases (for racecheck)", "[cuda][ops][spmm][panels_race]") {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  {
    cuda_exec e{s};
    std::vector<csr_case> const cases{
        {"several chunks", 100, 300, 130, 0.1, 0.1},
        {"padded ld", 40, 90, 40, 0.2, 0.0, -1, 3},
        {"dense rows", 24, 100, 20, 0.95, 0.0},
    };
    std::uint32_t seed = 99;
    for (auto const& cs : cases) {
      run_panels<float, policy::csr_panels<2, 16, 1>>("panels<2,16,1>", cs, ++seed, e);
      run_panels<float, policy::csr_panels<16, 64, 1>>("panels<16,64,1>", cs, seed, e);
      run_panels<__half, policy::csr_panels<2, 8, 2>>("panels<2,8,2>", cs, seed, e);
    }
  }
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

TEST_CASE("csr_panels is deterministic and rejects mismatched shapes", "[cuda][ops][spmm][panels]") {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  {
    cuda_exec e{s};
    // Real-valued data: the summation order is fixed by the panel order, so two runs agree
    // to the bit.
    csr_case const cs{"real values", 700, 900, 300, 0.08, 0.1};
    auto a = random_csr(cs, 5);
    for (auto& v : a.values()) v *= 0.37f;
    auto b = random_dense(cs.k, cs.n, 6);
    for (auto& v : b.values()) v = v * 0.113f + 0.01f;
    device_csr<float> da(a, e);
    device_dense<float> db(b, cs.n, e);
    device_dense<float> c1(dense_matrix<float>(cs.m, cs.n), cs.n, e), c2(dense_matrix<float>(cs.m, cs.n), cs.n, e);
    ops::csr_spmm_plan<policy::csr_panels<16, 64, 1>, float, int> plan(da.view(), db.cview(), c1.view(), e);
    plan.run(e, db.cview(), c1.view(), epilogue_none<float>());
    plan.run(e, db.cview(), c2.view(), epilogue_none<float>());
    auto h1 = download(c1.d.data(), c1.d.size(), e), h2 = download(c2.d.data(), c2.d.size(), e);
    CHECK(h1 == h2);
    // And they agree with the reference within float rounding.
    dense_matrix<float> ref(cs.m, cs.n);
    ops::spmm(host_exec{}, policy::csr_row_split<>{}, a.view(), b.view(), ref.view(), epilogue_none<float>());
    double worst = 0;
    for (std::int64_t i = 0; i < cs.m; ++i)
      for (std::int64_t j = 0; j < cs.n; ++j)
        worst = std::max(worst, std::abs(static_cast<double>(h1[static_cast<std::size_t>(i * cs.n + j)]) - ref(i, j)));
    CHECK(worst < 1e-3);

    device_dense<float> wrong(dense_matrix<float>(cs.m + 1, cs.n), cs.n, e);
    CHECK_THROWS_AS(plan.run(e, db.cview(), wrong.view(), epilogue_none<float>()), sdnn::error);
  }
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

}  // namespace sdnn_spmm_panels_test
