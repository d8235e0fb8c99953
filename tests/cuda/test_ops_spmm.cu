// Device tests of every sparse-product policy against the host reference
// (linear/reference/spmm.hpp): CSR (row-split, nnz-balanced, empty-row mask/compact, automatic,
// cuSPARSE), COO (nnz-split, cuSPARSE), ELL, tiled-dense, and dense x sparse (csc_gather,
// cuSPARSE) on seeded random inputs and edge cases; the nnz-split paths (rows cut by
// chunk boundaries, a row of 100k entries, empty rows, nnz = 0, determinism) at the end.
// Data are small integers: float results are exact (every partial sum is an integer far
// below 2^24), so float compares with ==. __half inputs are exact too and accumulate in
// float; only the final store rounds to half, so __half compares within one half ulp
// relative (|d - r| <= 2^-10 |r|).
#include "sdnn_gpu_test.cuh"
#include "sdnn_spmm_fixtures.hpp"

#include <sdnn/sdnn.hpp>
#include <sdnn/linear/op/spmm.cuh>
#include <sdnn/linear/op/dense_sparse.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace sdnn_ops_spmm_test {
using namespace sdnn;
// Generators, device copies and the exact comparison: tests/common/sdnn_spmm_fixtures.hpp.
using namespace sdnn_test;

namespace {

std::vector<csr_case> cases() { return csr_edge_cases(); }

// Each forced policy, then the reference.
template <class T, class Policy>
void run_csr_policy(char const* pname, csr_case const& cs, std::uint32_t seed, cuda_exec e) {
  auto const a = random_csr(cs, seed);
  auto const b = random_dense(cs.k, cs.n, seed + 1);
  epilogue_set const eps(cs.n, e);
  for (int ep = 0; ep < epilogue_set::count; ++ep) {
    auto const he = eps.get(ep, false), de = eps.get(ep, true);
    dense_matrix<float> ref(cs.m, cs.n);
    ops::spmm(host_exec{}, Policy{}, a.view(), b.view(), ref.view(), he);
    device_csr<T> da(a, e);
    device_dense<T> db(b, cs.n + cs.ld_pad, e);
    device_dense<T> dc(dense_matrix<float>(cs.m, cs.n), cs.n + cs.ld_pad, e);
    ops::spmm(e, Policy{}, da.view(), db.cview(), dc.view(), de);
    check_against(ref, dc, e, std::string(pname) + " / " + cs.name + " / epilogue " + std::to_string(ep));
  }
}

}  // namespace

TEMPLATE_TEST_CASE("CSR spmm policies match the reference", "[cuda][ops][spmm][ops_small]", float, __half) {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  cuda_exec e{s};
  std::uint32_t seed = 1234;
  for (auto const& cs : cases()) {
    ++seed;
    run_csr_policy<TestType, policy::csr_row_split<1, 4>>("row_split<1,4>", cs, seed, e);
    run_csr_policy<TestType, policy::csr_row_split<2, 4>>("row_split<2,4>", cs, seed, e);
    run_csr_policy<TestType, policy::csr_row_split<4, 8>>("row_split<4,8>", cs, seed, e);
    run_csr_policy<TestType, policy::csr_nnz_balanced<>>("nnz_balanced", cs, seed, e);
    run_csr_policy<TestType, policy::csr_row_split<2, 4, true>>("row_split<2,4,rows_in_x>", cs, seed, e);
    run_csr_policy<TestType, policy::csr_row_split<1, 8, true>>("row_split<1,8,rows_in_x>", cs, seed, e);
    run_csr_policy<TestType, policy::csr_row_split<1, 4, true>>("row_split<1,4,rows_in_x>", cs, seed, e);
    run_csr_policy<TestType, policy::csr_staged_b<32, 64>>("staged_b<32,64>", cs, seed, e);
    run_csr_policy<TestType, policy::csr_staged_b<64, 32>>("staged_b<64,32>", cs, seed, e);
    run_csr_policy<TestType, policy::skip_empty_rows_mask<policy::csr_row_split<>>>("skip_mask", cs, seed, e);
    run_csr_policy<TestType, policy::skip_empty_rows_compact<policy::csr_row_split<>>>("skip_compact", cs, seed, e);
    run_csr_policy<TestType, policy::automatic>("automatic", cs, seed, e);
  }
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

TEST_CASE("cuSPARSE CSR/COO baselines match the reference", "[cuda][ops][spmm][vendor]") {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  cuda_exec e{s};
  for (auto const& cs : cases()) {
    if (cs.ld_pad) continue;
    run_csr_policy<float, policy::cusparse_spmm<policy::cusparse_alg::default_alg>>("cusparse default", cs, 77, e);
    run_csr_policy<float, policy::cusparse_spmm<policy::cusparse_alg::csr_alg2>>("cusparse csr_alg2", cs, 78, e);
  }
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

TEMPLATE_TEST_CASE("COO, ELL and tiled-dense spmm match the reference", "[cuda][ops][spmm][ops_small]", float, __half) {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  cuda_exec e{s};
  std::uint32_t seed = 99;
  for (auto const& cs : cases()) {
    ++seed;
    auto const a = random_csr(cs, seed);
    auto const b = random_dense(cs.k, cs.n, seed + 1);
    auto const epi = epilogue_capped_relu<float>(-1.f, 16.f);
    dense_matrix<float> ref(cs.m, cs.n);
    ops::spmm(host_exec{}, policy::csr_row_split<>{}, a.view(), b.view(), ref.view(), epi);
    device_dense<TestType> db(b, cs.n + cs.ld_pad, e);
    std::string const tag = " / " + cs.name;
    {  // COO: same entries in the same (canonical) order.
      auto const h = to_coo(a);
      auto ri = upload(std::vector<int>(h.row_idx().begin(), h.row_idx().end()), e);
      auto ci = upload(std::vector<int>(h.col_idx().begin(), h.col_idx().end()), e);
      auto v = upload(convert<TestType>(h.values().data(), h.values().size()), e);
      coo_view<TestType, int> dv{h.rows(), h.cols(), h.nnz(), ri.data(), ci.data(), v.data()};
      coo_view<float, int> hv = h.view();
      dense_matrix<float> ref2(cs.m, cs.n);
      ops::spmm(host_exec{}, policy::coo_nnz_split<>{}, hv, b.view(), ref2.view(), epi);
      device_dense<TestType> dc(dense_matrix<float>(cs.m, cs.n), cs.n + cs.ld_pad, e);
      ops::spmm(e, policy::coo_nnz_split<>{}, dv, db.cview(), dc.view(), epi);
      check_against(ref2, dc, e, "coo_nnz_split" + tag);
      device_dense<TestType> dc2(dense_matrix<float>(cs.m, cs.n), cs.n + cs.ld_pad, e);
      ops::spmm(e, policy::coo_nnz_split<32, 1>{}, dv, db.cview(), dc2.view(), epi);
      check_against(ref, dc2, e, "coo_nnz_split<32,1>" + tag);
    }
    {  // ELL (column-major slots, width = longest row).
      auto const h = to_ell(a);
      auto ci = upload(std::vector<int>(h.col_idx().begin(), h.col_idx().end()), e);
      auto v = upload(convert<TestType>(h.values().data(), h.values().size()), e);
      ell_view<TestType, int> dv{h.rows(), h.cols(), h.width(), h.nnz(), ci.data(), v.data()};
      dense_matrix<float> ref2(cs.m, cs.n);
      ops::spmm(host_exec{}, policy::ell_row_split<>{}, h.view(), b.view(), ref2.view(), epi);
      check_against(ref, device_dense<TestType>(ref2, cs.n, e), e, "ell host reference" + tag);
      device_dense<TestType> dc(dense_matrix<float>(cs.m, cs.n), cs.n + cs.ld_pad, e);
      ops::spmm(e, policy::ell_row_split<>{}, dv, db.cview(), dc.view(), epi);
      check_against(ref, dc, e, "ell_row_split" + tag);
    }
    {  // Tiled-dense, 32 x 32 tiles.
      auto const h = to_tiled_dense(a, 32, 32);
      auto vals = upload(convert<TestType>(h.values().data(), h.values().size()), e);
      auto occ = upload(std::vector<std::uint8_t>(h.occupied().begin(), h.occupied().end()), e);
      auto trp = upload(std::vector<std::int64_t>(h.tile_row_ptr().begin(), h.tile_row_ptr().end()), e);
      auto tc = upload(std::vector<std::int64_t>(h.tile_col().begin(), h.tile_col().end()), e);
      auto hv = h.view();
      tiled_dense_view<TestType const> dv{hv.rows,      hv.cols,        hv.tile_rows, hv.tile_cols,
                                          hv.grid_rows, hv.grid_cols,   hv.occupied_tiles, vals.data(),
                                          occ.data(),   trp.data(),     tc.data()};
      dense_matrix<float> ref2(cs.m, cs.n);
      ops::spmm(host_exec{}, policy::tiled_dense_spmm{}, hv, b.view(), ref2.view(), epi);
      check_against(ref, device_dense<TestType>(ref2, cs.n, e), e, "tiled host reference" + tag);
      device_dense<TestType> dc(dense_matrix<float>(cs.m, cs.n), cs.n + cs.ld_pad, e);
      ops::spmm(e, policy::tiled_dense_spmm{}, dv, db.cview(), dc.view(), epi);
      check_against(ref, dc, e, "tiled_dense_spmm" + tag);
    }
  }
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

TEMPLATE_TEST_CASE("dense x sparse (Y * W) matches the reference", "[cuda][ops][spmm][ops_small]", float, __half) {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  cuda_exec e{s};
  std::uint32_t seed = 555;
  for (auto const& cs : cases()) {
    ++seed;
    if (cs.ld_pad) continue;
    // W is k x n sparse (rows of W = inputs), Y is m x k dense.
    csr_case wc{cs.name, cs.k, cs.n, 0, cs.density, cs.empty_rows};
    auto const w = random_csr(wc, seed);
    auto const y = random_dense(cs.m, cs.k, seed + 1);
    auto const epi = epilogue_capped_relu<float>(-1.f, 16.f);
    dense_matrix<float> ref(cs.m, cs.n);
    ops::spmm_dense_sparse(host_exec{}, policy::csc_gather<>{}, y.view(), w.view(), ref.view(), epi);
    device_csr<TestType> dw(w, e);
    device_dense<TestType> dy(y, cs.k, e);
    device_dense<TestType> dc(dense_matrix<float>(cs.m, cs.n), cs.n, e);
    ops::spmm_dense_sparse(e, policy::csc_gather<>{}, dy.cview(), dw.view(), dc.view(), epi);
    check_against(ref, dc, e, "csc_gather / " + cs.name);
    if constexpr (std::is_same_v<TestType, float>) {
      if (cs.m > 0 && cs.n > 0 && cs.k > 0) {
        device_dense<TestType> dc2(dense_matrix<float>(cs.m, cs.n), cs.n, e);
        ops::spmm_dense_sparse(e, policy::cusparse_spmm<>{}, dy.cview(), dw.view(), dc2.view(), epi);
        check_against(ref, dc2, e, "cusparse dense x sparse / " + cs.name);
      }
    }
  }
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

TEST_CASE("spmm rejects mismatched shapes", "[cuda][ops][spmm]") {
  SDNN_REQUIRE_DEVICE();
  cuda_exec e{};
  csr_view<float, int> a{4, 5, 0, nullptr, nullptr, nullptr};
  dense_view<float const> b{6, 3, 3, nullptr};
  dense_view<float> c{4, 3, 3, nullptr};
  REQUIRE_THROWS_AS(ops::spmm(e, policy::csr_row_split<>{}, a, b, c, epilogue_none<float>()), sdnn::error);
  try {
    ops::spmm(host_exec{}, policy::csr_row_split<>{}, a, b, c, epilogue_none<float>());
    FAIL("no throw");
  } catch (sdnn::error const& err) {
    REQUIRE(std::string(err.what()).find("B has 6 rows") != std::string::npos);
  }
}

TEST_CASE("automatic picks by matrix statistics and matches the reference", "[cuda][ops][spmm][ops_small]") {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  cuda_exec e{s};
  auto check = [&](csr_matrix<float, int> const& a, policy::spmm_choice expected, char const* what) {
    auto const b = random_dense(a.cols(), 70, 5);
    dense_matrix<float> ref(a.rows(), 70);
    auto const epi = epilogue_capped_relu<float>(-1.f, 16.f);
    reference::spmm(a.view(), b.view(), ref.view(), epi);
    device_csr<float> da(a, e);
    device_dense<float> db(b, 70, e), dc(dense_matrix<float>(a.rows(), 70), 70, e);
    ops::csr_spmm_plan<policy::automatic, float, int> plan(da.view(), db.cview(), dc.view(), e);
    CHECK(plan.choice() == expected);
    plan.run(e, db.cview(), dc.view(), epi);
    check_against(ref, dc, e, what);
  };
  // Dense 32 x 32 blocks on the diagonal: occupied tiles are full -> tiled-dense.
  {
    std::vector<int> rp{0}, ci;
    std::vector<float> v;
    for (int i = 0; i < 128; ++i) {
      for (int j = (i / 32) * 32; j < (i / 32) * 32 + 32; ++j) ci.push_back(j), v.push_back(float(1 + (i + j) % 3));
      rp.push_back(static_cast<int>(ci.size()));
    }
    check(make_csr<float, int>(128, 128, rp, ci, v), policy::spmm_choice::tiled_dense, "automatic: block diagonal");
  }
  // 95 % empty rows -> compacted live rows.
  check(random_csr({"", 400, 300, 0, 0.05, 0.95}, 3), policy::spmm_choice::csr_skip_empty_compact,
        "automatic: 95% empty rows");
  // One row of 3000 among rows of ~10 -> nnz-balanced.
  check(random_csr({"", 300, 4000, 0, 0.0025, 0.0, 5}, 4), policy::spmm_choice::csr_nnz_balanced,
        "automatic: skewed rows");
  // Few uniform sparse rows -> row-split at any density.
  check(random_csr({"", 300, 300, 0, 0.02, 0.0}, 6), policy::spmm_choice::csr_row_split, "automatic: uniform");
  check(random_csr({"", 300, 300, 0, 0.1, 0.0}, 8), policy::spmm_choice::csr_row_split, "automatic: 10% dense");
  // Many rows: at 10 % density the panel order, at 1 % the (row groups, slabs) grid.
  check(random_csr({"", 4100, 300, 0, 0.1, 0.0}, 9), policy::spmm_choice::csr_panels,
        "automatic: 4100 rows, 10% dense");
  check(random_csr({"", 4100, 300, 0, 0.01, 0.0}, 10), policy::spmm_choice::csr_row_split_rows_in_x,
        "automatic: 4100 rows, 1% dense");
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

// ---------------------------------------------------------------------------------------
// nnz-split paths (coo_nnz_split, csr_nnz_balanced): rows cut by chunk boundaries (carry +
// fix-up), a row spread over thousands of warps, empty rows anywhere, nnz = 0. C starts
// filled with -777, so a row nobody writes fails the comparison.
namespace {

// Host CSR with lengths[i] entries in row i (distinct sorted random columns < k); values
// small nonzero integers in [-3, 3], or reals in [-1, 1] when `real`.
csr_matrix<float, int> rows_of_lengths(std::int64_t k, std::vector<std::int64_t> const& lengths, std::uint32_t seed,
                                       bool real = false) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> v(1, 3), sign(0, 1), pick(0, static_cast<int>(k) - 1);
  std::uniform_real_distribution<float> r(-1.f, 1.f);
  std::vector<int> rp{0}, ci, all;
  std::vector<float> vals;
  for (std::int64_t len : lengths) {
    REQUIRE(len <= k);
    std::vector<int> cols;
    if (len * 4 < k) {
      std::set<int> s;
      while (static_cast<std::int64_t>(s.size()) < len) s.insert(pick(rng));
      cols.assign(s.begin(), s.end());
    } else {
      if (all.empty()) {
        all.resize(static_cast<std::size_t>(k));
        std::iota(all.begin(), all.end(), 0);
      }
      std::sample(all.begin(), all.end(), std::back_inserter(cols), len, rng);
      std::sort(cols.begin(), cols.end());
    }
    for (int c : cols) {
      ci.push_back(c);
      float const x = real ? r(rng) : static_cast<float>(v(rng));
      vals.push_back(sign(rng) ? -x : x);
    }
    rp.push_back(static_cast<int>(ci.size()));
  }
  return make_csr<float, int>(static_cast<int>(lengths.size()), static_cast<int>(k), rp, ci, vals);
}

dense_matrix<float> random_real_dense(std::int64_t r, std::int64_t c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> v(-1.f, 1.f);
  dense_matrix<float> d(r, c);
  for (std::size_t i = 0; i < d.size(); ++i) d.values()[i] = v(rng);
  return d;
}

// A device copy of the canonical COO of a host CSR, values converted to T.

// C initialised to -777 (padding 99).
template <class T>
device_dense<T> sentinel_c(std::int64_t m, std::int64_t n, std::int64_t ld, cuda_exec e) {
  dense_matrix<float> h(m, n);
  for (std::size_t i = 0; i < h.size(); ++i) h.values()[i] = -777.f;
  return device_dense<T>(h, ld, e);
}

struct split_case {
  std::string name;
  std::int64_t k;
  std::vector<std::int64_t> lengths;  // entries per row
  std::vector<std::int64_t> ns;       // columns of B to try
};

std::vector<split_case> split_cases() {
  std::vector<split_case> out;
  {  // One row of 100k entries among rows of 0..4.
    split_case c{"one row of 100k among short rows", 120000, std::vector<std::int64_t>(300), {8, 130}};
    for (std::int64_t i = 0; i < 300; ++i) c.lengths[i] = i == 137 ? 100000 : (i * 7) % 5;
    out.push_back(c);
  }
  {  // Row lengths around the chunk sizes: every row spans 1 .. hundreds of chunks.
    std::vector<std::int64_t> const cycle{0, 1, 31, 32, 33, 64, 65, 200, 1000, 4999, 0, 3, 257, 513};
    split_case c{"rows over 2..many chunks", 5000, {}, {1, 3, 130}};
    for (std::int64_t i = 0; i < 70; ++i) c.lengths.push_back(cycle[i % cycle.size()]);
    out.push_back(c);
  }
  {
    split_case c{"leading, trailing and interior empty rows", 300, std::vector<std::int64_t>(90), {5, 517}};
    for (std::int64_t i = 10; i < 80; ++i) c.lengths[i] = i % 4 == 0 ? 0 : 1 + (i * 13) % 50;
    for (std::int64_t i = 40; i < 47; ++i) c.lengths[i] = 0;  // a longer interior gap
    out.push_back(c);
  }
  out.push_back({"all rows empty (nnz 0)", 30, std::vector<std::int64_t>(40, 0), {20}});
  {
    split_case c{"single entry", 30, std::vector<std::int64_t>(40, 0), {7}};
    c.lengths[17] = 1;
    out.push_back(c);
  }
  {
    split_case c{"one entry in the first and one in the last row", 30, std::vector<std::int64_t>(40, 0), {4}};
    c.lengths[0] = c.lengths[39] = 1;
    out.push_back(c);
  }
  out.push_back({"one row of 3000", 3000, {3000}, {33}});
  out.push_back({"dense 50 x 64", 64, std::vector<std::int64_t>(50, 64), {260}});
  return out;
}

// Runs `run(b, c, epi)` for each epilogue and compares with the host reference.
template <class T, class Run>
void check_split(split_case const& cs, csr_matrix<float, int> const& a, dense_matrix<float> const& b,
                 device_dense<T> const& db, std::int64_t ld, cuda_exec e, std::string const& what, Run run) {
  std::int64_t const m = a.rows(), n = b.cols();
  epilogue_set const eps(n, e);
  for (int ep = 0; ep < epilogue_set::count; ++ep) {
    dense_matrix<float> ref(m, n);
    ops::spmm(host_exec{}, policy::csr_nnz_balanced<>{}, a.view(), b.view(), ref.view(), eps.get(ep, false));
    auto dc = sentinel_c<T>(m, n, ld, e);
    run(db.cview(), dc.view(), eps.get(ep, true));
    check_against(ref, dc, e, what + " / " + cs.name + " / N " + std::to_string(n) + " / epilogue " + std::to_string(ep));
  }
}

template <class T, class Policy>
void split_plan_csr(char const* pname, split_case const& cs, csr_matrix<float, int> const& a,
                    dense_matrix<float> const& b, device_dense<T> const& db, std::int64_t ld, cuda_exec e) {
  device_csr<T> da(a, e);
  ops::csr_spmm_plan<Policy, T, int> plan(da.view(), db.cview(), dense_view<T>{a.rows(), b.cols(), ld, nullptr}, e);
  check_split<T>(cs, a, b, db, ld, e, pname, [&](auto bv, auto cv, auto const& epi) { plan.run(e, bv, cv, epi); });
}

template <class T, class Policy>
void split_plan_coo(char const* pname, split_case const& cs, csr_matrix<float, int> const& a,
                    dense_matrix<float> const& b, device_dense<T> const& db, std::int64_t ld, cuda_exec e) {
  device_coo<T> da(to_coo(a), e);
  ops::coo_spmm_plan<Policy, T, int> plan(da.view(), db.cview(), dense_view<T>{a.rows(), b.cols(), ld, nullptr}, e);
  check_split<T>(cs, a, b, db, ld, e, pname, [&](auto bv, auto cv, auto const& epi) { plan.run(e, bv, cv, epi); });
}

// The kernels with a forced chunk size (the plans never go below 32 for CSR), carry
// filled with NaN so a read of a slot nobody wrote shows.
template <class T, int U>
void split_kernels(std::int64_t chunk, split_case const& cs, csr_matrix<float, int> const& a,
                   dense_matrix<float> const& b, device_dense<T> const& db, std::int64_t ld, cuda_exec e) {
  kernels::nnz_split_shape const cut{chunk, (a.nnz() + chunk - 1) / chunk};
  buffer<float, device_space> carry(kernels::nnz_split_carry_elements(cut.chunks, b.cols()), e);
  auto poison = [&] {  // before every run: slots are never carried over from an earlier one
    if (carry.size()) SDNN_CUDA_CHECK(cudaMemsetAsync(carry.data(), 0xff, carry.size() * sizeof(float), e.stream));
  };
  std::string const tag = " (chunk " + std::to_string(chunk) + ", U " + std::to_string(U) + ")";
  {
    device_csr<T> da(a, e);
    buffer<int, device_space> bounds(static_cast<std::size_t>(cut.chunks + 1), e);
    if (cut.chunks > 0) kernels::csr_nnz_bounds(da.view(), cut.chunk, cut.chunks, bounds.data(), e);
    check_split<T>(cs, a, b, db, ld, e, "kernels::spmm_csr_nnz_balanced" + tag, [&](auto bv, auto cv, auto const& epi) {
      poison();
      kernels::spmm_csr_nnz_balanced<U, 4>(da.view(), bv, cv, epi, bounds.data(), cut.chunk, cut.chunks, carry.data(),
                                           e);
    });
  }
  {
    device_coo<T> da(to_coo(a), e);
    check_split<T>(cs, a, b, db, ld, e, "kernels::spmm_coo_nnz_split" + tag, [&](auto bv, auto cv, auto const& epi) {
      poison();
      kernels::spmm_coo_nnz_split<U>(da.view(), bv, cv, epi, cut, carry.data(), e);
    });
  }
}

}  // namespace

TEMPLATE_TEST_CASE("nnz-split COO and nnz-balanced CSR split rows across warps and match the reference",
                   "[cuda][ops][spmm][nnz_split]", float, __half) {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  cuda_exec e{s};
  std::uint32_t seed = 4321;
  for (auto const& cs : split_cases()) {
    auto const a = rows_of_lengths(cs.k, cs.lengths, ++seed);
    bool const huge = a.nnz() > 50000;
    for (std::int64_t n : cs.ns) {
      std::int64_t const ld = n % 2 ? n + 3 : n;  // odd N: padded, unaligned rows (scalar path)
      auto const b = random_dense(cs.k, n, seed + 7);
      device_dense<TestType> db(b, ld, e);
      split_plan_csr<TestType, policy::csr_nnz_balanced<>>("csr_nnz_balanced<2,4>", cs, a, b, db, ld, e);
      split_plan_csr<TestType, policy::csr_nnz_balanced<1, 8>>("csr_nnz_balanced<1,8>", cs, a, b, db, ld, e);
      split_plan_coo<TestType, policy::coo_nnz_split<>>("coo_nnz_split<256,2>", cs, a, b, db, ld, e);
      split_plan_coo<TestType, policy::coo_nnz_split<32, 1>>("coo_nnz_split<32,1>", cs, a, b, db, ld, e);
      split_plan_coo<TestType, policy::coo_nnz_split<7, 2>>("coo_nnz_split<7,2>", cs, a, b, db, ld, e);
      if (!huge) split_plan_coo<TestType, policy::coo_nnz_split<1, 1>>("coo_nnz_split<1,1>", cs, a, b, db, ld, e);
      for (std::int64_t chunk : huge ? std::vector<std::int64_t>{97, 4096} : std::vector<std::int64_t>{1, 2, 5, 33, 1000}) {
        split_kernels<TestType, 1>(chunk, cs, a, b, db, ld, e);
        if (chunk == 5 || chunk == 97) split_kernels<TestType, 2>(chunk, cs, a, b, db, ld, e);
      }
    }
  }
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

TEMPLATE_TEST_CASE("nnz-split COO and nnz-balanced CSR are deterministic on real-valued data",
                   "[cuda][ops][spmm][nnz_split]", float, __half) {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  cuda_exec e{s};
  // One row of 100k entries (split over thousands of warps, long fix-up chains) and rows
  // of 0..300 (short chains), real values: summation order matters to the last bit.
  std::vector<std::int64_t> lengths(400);
  for (std::int64_t i = 0; i < 400; ++i) lengths[i] = i == 211 ? 100000 : (i * 37) % 301;
  auto const a = rows_of_lengths(120000, lengths, 99, /*real=*/true);
  for (std::int64_t n : {8, 130}) {
    auto const b = random_real_dense(120000, n, 100);
    device_dense<TestType> db(b, n, e);
    device_csr<TestType> dcsr(a, e);
    device_coo<TestType> dcoo(to_coo(a), e);
    auto const epi = epilogue_capped_relu<float>(-0.25f, 16.f);
    auto bits = [&](auto& plan) {
      auto dc = sentinel_c<TestType>(a.rows(), n, n, e);
      plan.run(e, db.cview(), dc.view(), epi);
      return download(dc.d.data(), dc.d.size(), e);
    };
    auto same = [](std::vector<TestType> const& x, std::vector<TestType> const& y) {
      return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(TestType)) == 0;
    };
    dense_view<TestType> const out{a.rows(), n, n, nullptr};  // plans only read C's shape
    {
      ops::csr_spmm_plan<policy::csr_nnz_balanced<>, TestType, int> p1(dcsr.view(), db.cview(), out, e);
      ops::csr_spmm_plan<policy::csr_nnz_balanced<>, TestType, int> p2(dcsr.view(), db.cview(), out, e);
      auto const r1 = bits(p1), r2 = bits(p1), r3 = bits(p2);
      CHECK(same(r1, r2));
      CHECK(same(r1, r3));
    }
    {
      ops::coo_spmm_plan<policy::coo_nnz_split<32, 1>, TestType, int> p1(dcoo.view(), db.cview(), out, e);
      ops::coo_spmm_plan<policy::coo_nnz_split<32, 1>, TestType, int> p2(dcoo.view(), db.cview(), out, e);
      auto const r1 = bits(p1), r2 = bits(p1), r3 = bits(p2);
      CHECK(same(r1, r2));
      CHECK(same(r1, r3));
    }
  }
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

}  // namespace sdnn_ops_spmm_test
