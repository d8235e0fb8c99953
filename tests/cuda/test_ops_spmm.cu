// Device tests of every sparse-product policy against the host reference
// (reference/spmm.hpp): CSR (row-split, nnz-balanced, empty-row mask/compact, automatic,
// cuSPARSE), COO (nnz-split, cuSPARSE), ELL, tiled-dense, and dense x sparse (dense_csc,
// cuSPARSE) on seeded random inputs and edge cases.
// Data are small integers: float results are exact (every partial sum is an integer far
// below 2^24), so float compares with ==. __half inputs are exact too and accumulate in
// float; only the final store rounds to half, so __half compares within one half ulp
// relative (|d - r| <= 2^-10 |r|).
#include "sdnn_gpu_test.cuh"

#include <sdnn/sdnn.hpp>
#include <sdnn/ops/spmm.cuh>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace sdnn_ops_spmm_test {
using namespace sdnn;

namespace {

struct csr_case {
  std::string name;
  std::int64_t m, k, n;
  double density;      // of the non-empty rows
  double empty_rows;   // fraction of rows forced empty
  std::int64_t long_row = -1;  // this row gets min(k, 3000) entries
  std::int64_t ld_pad = 0;     // B and C leading dimension = cols + ld_pad
};

// Host CSR with small nonzero integer values in [-3, 3].
csr_matrix<float, int> random_csr(csr_case const& c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::uniform_int_distribution<int> v(1, 3);
  std::vector<int> rp{0}, ci;
  std::vector<float> vals;
  for (std::int64_t i = 0; i < c.m; ++i) {
    bool const empty = u(rng) < c.empty_rows;
    for (std::int64_t j = 0; j < c.k && !empty; ++j) {
      bool take = i == c.long_row ? j < 3000 : u(rng) < c.density;
      if (take) {
        ci.push_back(static_cast<int>(j));
        vals.push_back(static_cast<float>(v(rng) * (u(rng) < 0.5 ? -1 : 1)));
      }
    }
    rp.push_back(static_cast<int>(ci.size()));
  }
  return make_csr<float, int>(static_cast<int>(c.m), static_cast<int>(c.k), rp, ci, vals);
}

dense_matrix<float> random_dense(std::int64_t r, std::int64_t c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> v(-4, 4);
  dense_matrix<float> d(r, c);
  for (std::size_t i = 0; i < d.size(); ++i) d.values()[i] = static_cast<float>(v(rng));
  return d;
}

template <class T>
std::vector<T> convert(float const* p, std::size_t n) {
  std::vector<T> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = value_cast<T>(p[i]);
  return out;
}

template <class T>
buffer<T, device_space> upload(std::vector<T> const& h, cuda_exec e) {
  buffer<T, device_space> d(h.size(), e);
  if (!h.empty()) SDNN_CUDA_CHECK(cudaMemcpyAsync(d.data(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice, e.stream));
  return d;
}
template <class T>
std::vector<T> download(T const* d, std::size_t n, cuda_exec e) {
  std::vector<T> h(n);
  if (n) SDNN_CUDA_CHECK(cudaMemcpyAsync(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost, e.stream));
  SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));
  return h;
}

// A device copy of a host float CSR, values converted to T.
template <class T>
struct device_csr {
  buffer<int, device_space> rp, ci;
  buffer<T, device_space> v;
  int rows, cols, nnz;
  device_csr(csr_matrix<float, int> const& h, cuda_exec e)
      : rp(upload(std::vector<int>(h.row_ptr().begin(), h.row_ptr().end()), e)),
        ci(upload(std::vector<int>(h.col_idx().begin(), h.col_idx().end()), e)),
        v(upload(convert<T>(h.values().data(), h.values().size()), e)), rows(h.rows()), cols(h.cols()), nnz(h.nnz()) {}
  csr_view<T, int> view() const { return {rows, cols, nnz, rp.data(), ci.data(), v.data()}; }
};

// A device dense matrix with leading dimension ld >= cols (padding filled with 99).
template <class T>
struct device_dense {
  buffer<T, device_space> d;
  std::int64_t rows, cols, ld;
  device_dense(dense_matrix<float> const& h, std::int64_t ld_, cuda_exec e) : rows(h.rows()), cols(h.cols()), ld(ld_) {
    std::vector<float> p(static_cast<std::size_t>(rows * ld), 99.f);
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) p[i * ld + j] = h(i, j);
    d = upload(convert<T>(p.data(), p.size()), e);
  }
  dense_view<T const> cview() const { return {rows, cols, ld, d.data()}; }
  dense_view<T> view() { return {rows, cols, ld, d.data()}; }
};

// Compares a device result (rows x cols, ld) against the float reference.
template <class T>
void check_against(dense_matrix<float> const& ref, device_dense<T> const& out, cuda_exec e, std::string const& what) {
  auto h = download(out.d.data(), out.d.size(), e);
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < ref.rows(); ++i)
    for (std::int64_t j = 0; j < ref.cols(); ++j) {
      double const d = value_cast<double>(h[i * out.ld + j]), r = ref(i, j);
      bool ok = std::is_same_v<T, float> ? d == r : std::abs(d - r) <= std::ldexp(std::abs(r), -10);
      if (!ok && bad++ < 3) UNSCOPED_INFO(what << ": C(" << i << ", " << j << ") = " << d << ", expected " << r);
    }
  // Padding beyond cols must be untouched.
  for (std::int64_t i = 0; i < ref.rows(); ++i)
    for (std::int64_t j = ref.cols(); j < out.ld; ++j)
      if (value_cast<double>(h[i * out.ld + j]) != 99.0 && bad++ < 3) UNSCOPED_INFO(what << ": padding overwritten");
  CHECK(bad == 0);
}

std::vector<csr_case> cases() {
  return {
      {"empty matrix", 0, 5, 7, 0.5, 0},
      {"no columns of B", 9, 5, 0, 0.5, 0},
      {"1x1x1", 1, 1, 1, 1.0, 0},
      {"one column", 37, 53, 1, 0.3, 0.1},
      {"all rows empty", 40, 30, 20, 0.5, 1.0},
      {"odd sizes", 131, 77, 133, 0.2, 0.2},
      {"wide B, padded ld", 70, 90, 300, 0.1, 0.3, -1, 3},
      {"90% empty rows", 500, 200, 96, 0.1, 0.9},
      {"row lengths 0..3000", 120, 4000, 40, 0.01, 0.3, 7},
      {"half-slab columns", 64, 64, 517, 0.15, 0.0},
  };
}

// Each forced policy, then the reference.
template <class T, class Policy>
void run_csr_policy(char const* pname, csr_case const& cs, std::uint32_t seed, cuda_exec e) {
  auto const a = random_csr(cs, seed);
  auto const b = random_dense(cs.k, cs.n, seed + 1);
  std::vector<float> bias(static_cast<std::size_t>(cs.n));
  for (std::int64_t j = 0; j < cs.n; ++j) bias[j] = static_cast<float>(j % 5) - 2.f;
  auto dbias = upload(bias, e);
  for (int ep = 0; ep < 3; ++ep) {
    basic_epilogue<float> he, de;
    if (ep == 1) {  // bias per column + ReLU + cap
      he.bias = bias.data(), de.bias = dbias.data();
      he.relu = de.relu = true;
      he.has_cap = de.has_cap = true;
      he.cap = de.cap = 20.f;
    } else if (ep == 2) {
      he = de = epilogue_challenge<float>(-1.f, 16.f);
    }
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
    auto const epi = epilogue_challenge<float>(-1.f, 16.f);
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
    auto const epi = epilogue_challenge<float>(-1.f, 16.f);
    dense_matrix<float> ref(cs.m, cs.n);
    ops::spmm_dense_sparse(host_exec{}, policy::dense_csc{}, y.view(), w.view(), ref.view(), epi);
    device_csr<TestType> dw(w, e);
    device_dense<TestType> dy(y, cs.k, e);
    device_dense<TestType> dc(dense_matrix<float>(cs.m, cs.n), cs.n, e);
    ops::spmm_dense_sparse(e, policy::dense_csc{}, dy.cview(), dw.view(), dc.view(), epi);
    check_against(ref, dc, e, "dense_csc / " + cs.name);
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
    auto const epi = epilogue_challenge<float>(-1.f, 16.f);
    reference::spmm(a.view(), b.view(), ref.view(), epi);
    device_csr<float> da(a, e);
    device_dense<float> db(b, 70, e), dc(dense_matrix<float>(a.rows(), 70), 70, e);
    ops::csr_spmm_plan<policy::automatic, float, int> plan(da.view(), db.cview(), dc.view(), e);
    CHECK(plan.choice() == expected);
    plan.run(db.cview(), dc.view(), epi, e);
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
  // Uniform sparse rows -> row-split; uniform rows at 10 % density -> staged B.
  check(random_csr({"", 300, 300, 0, 0.02, 0.0}, 6), policy::spmm_choice::csr_row_split, "automatic: uniform");
  check(random_csr({"", 300, 300, 0, 0.1, 0.0}, 8), policy::spmm_choice::csr_row_split, "automatic: 10% dense");
  // Many rows at 10 % density -> the (row groups, slabs) grid.
  check(random_csr({"", 4100, 300, 0, 0.1, 0.0}, 9), policy::spmm_choice::csr_row_split_rows_in_x,
        "automatic: 4100 rows, 10% dense");
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

}  // namespace sdnn_ops_spmm_test
