// Index types and maximum indices for every sparse-product policy, on the device against
// the host reference (linear/reference/spmm.hpp), exactly (small-integer data; see
// tests/common/sdnn_spmm_fixtures.hpp for why float compares with == and __half within
// one half ulp).
//
// Every matrix has nonzeros at the four corners, so the last row (rows - 1) and the last
// column (cols - 1) are always read, and each product runs with Index = int32_t and
// Index = int64_t where the policy takes it. Shapes, and why they are the honest ones:
//  - 37 x 53, N = 33: corners plus random entries; N not a multiple of any column slab.
//  - 9 x (2^20 + 1), N = 8: a column index past 2^20 (a 20-bit field would wrap), few
//    nonzeros; B is (2^20 + 1) x 8 (34 MB float), materialised in full.
//  - (2^20 + 1) x 65, N = 4: a row index past 2^20 with nearly every row empty (the
//    empty-row paths, an nnz-split gap of a million rows written by one warp).
//  - 3 x (2^31 - 1) (int32: the largest column count it can hold) and 3 x (2^31 + 5)
//    (int64: column indices past 2^31), N = 1, float: B is a dense K x 1 matrix of 8.6 GB,
//    on the device and on the host (the reference reads it), zero except the rows A
//    touches. Only the policies whose work scales with nnz run here: csr_staged_b and
//    csr_panels walk every K-chunk of every row block (2^25 chunks) and the tiled format
//    stores whole tile rows, so they are covered by the 2^20 + 1 shapes instead. Rows or
//    nnz past 2^31 are not tested: C (M x N) and row_ptr (8 bytes a row) would need
//    >= 26 GB for N = 1, and nnz > 2^31 needs > 25 GB of A; this tier stays a unit test.
//
// Which policies take Index = int64_t (all tested with both index types below):
//   CSR: csr_row_split (both grid orders), csr_staged_b, csr_panels, csr_nnz_balanced,
//        skip_empty_rows_mask / _compact<csr_row_split>, automatic, cusparse_spmm (default,
//        csr_alg2);  COO: coo_nnz_split, cusparse_spmm (default);  ELL: ell_row_split.
//   Tiled-dense (tiled_dense_spmm) has no Index parameter: its tile indices are int64_t.
//   The cuSPARSE Blocked-ELL baseline needs M and K multiples of the tile (tested in
//   test_vendor_cusparse.cu); it takes no Index either.
// Which refuse int64: dense x sparse (ops::spmm_dense_sparse / ops::dense_sparse_plan on
// cuda_exec, every policy) takes W with 32-bit indices only; an int64 W stops compilation with
// a static_assert in linear/op/dense_sparse.cuh ("W must have 32-bit indices"), so it cannot be a
// run-time test here; its maximum-index cases run with int32 below.
#include "sdnn_gpu_test.cuh"
#include "sdnn_spmm_fixtures.hpp"

#include <sdnn/sdnn.hpp>
#include <sdnn/linear/op/spmm.cuh>
#include <sdnn/linear/op/dense_sparse.cuh>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace sdnn_spmm_indices_test {
using namespace sdnn;
using namespace sdnn_test;

namespace {

// A host CSR (float values, index type Index) with nonzeros at the four corners and
// `extra` random positions; values in [-3, 3] \ {0}.
template <class Index>
csr_matrix<float, Index> corner_csr(std::int64_t m, std::int64_t k, std::int64_t extra, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> v(1, 3);
  std::map<std::pair<std::int64_t, std::int64_t>, float> e;
  auto value = [&] { return static_cast<float>(v(rng) * (rng() & 1 ? -1 : 1)); };
  for (auto rc : {std::pair<std::int64_t, std::int64_t>{0, 0}, {0, k - 1}, {m - 1, 0}, {m - 1, k - 1}}) e[rc] = value();
  std::uniform_int_distribution<std::int64_t> ri(0, m - 1), ci(0, k - 1);
  for (std::int64_t t = 0; t < extra; ++t) e[{ri(rng), ci(rng)}] = value();
  std::vector<Index> rp(static_cast<std::size_t>(m + 1), 0), col;
  std::vector<float> vals;
  for (auto const& [rc, x] : e) {  // std::map: sorted by (row, col)
    ++rp[static_cast<std::size_t>(rc.first + 1)];
    col.push_back(static_cast<Index>(rc.second));
    vals.push_back(x);
  }
  for (std::int64_t i = 0; i < m; ++i) rp[static_cast<std::size_t>(i + 1)] += rp[static_cast<std::size_t>(i)];
  return make_csr<float, Index>(static_cast<Index>(m), static_cast<Index>(k), rp, col, vals);
}

template <class T, class Index>
struct dev_csr {
  buffer<Index, device_space> rp, ci;
  buffer<T, device_space> v;
  Index rows, cols, nnz;
  dev_csr(csr_matrix<float, Index> const& h, cuda_exec e)
      : rp(upload(std::vector<Index>(h.row_ptr().begin(), h.row_ptr().end()), e)),
        ci(upload(std::vector<Index>(h.col_idx().begin(), h.col_idx().end()), e)),
        v(upload(convert<T>(h.values().data(), h.values().size()), e)), rows(h.rows()), cols(h.cols()), nnz(h.nnz()) {}
  csr_view<T, Index> view() const { return {rows, cols, nnz, rp.data(), ci.data(), v.data()}; }
};
template <class T, class Index>
struct dev_coo {
  buffer<Index, device_space> ri, ci;
  buffer<T, device_space> v;
  Index rows, cols, nnz;
  dev_coo(coo_matrix<float, Index> const& h, cuda_exec e)
      : ri(upload(std::vector<Index>(h.row_idx().begin(), h.row_idx().end()), e)),
        ci(upload(std::vector<Index>(h.col_idx().begin(), h.col_idx().end()), e)),
        v(upload(convert<T>(h.values().data(), h.values().size()), e)), rows(h.rows()), cols(h.cols()), nnz(h.nnz()) {}
  coo_view<T, Index> view() const { return {rows, cols, nnz, ri.data(), ci.data(), v.data()}; }
};
template <class T, class Index>
struct dev_ell {
  buffer<Index, device_space> ci;
  buffer<T, device_space> v;
  Index rows, cols, width, nnz;
  dev_ell(ell_matrix<float, Index> const& h, cuda_exec e)
      : ci(upload(std::vector<Index>(h.col_idx().begin(), h.col_idx().end()), e)),
        v(upload(convert<T>(h.values().data(), h.values().size()), e)), rows(h.rows()), cols(h.cols()),
        width(h.width()), nnz(h.nnz()) {}
  ell_view<T, Index> view() const { return {rows, cols, width, nnz, ci.data(), v.data()}; }
};

template <class Index>
std::string index_name() {
  return sizeof(Index) == 8 ? "int64" : "int32";
}

// One policy on one sparse operand (host form ha, device form da), every epilogue:
// the host reference (the host executor runs it for every policy), then the device.
template <class T, class Policy, class HostView, class DevView>
void check_policy(std::string const& what, HostView ha, DevView da, dense_matrix<float> const& b,
                  device_dense<T> const& db, epilogue_set const& eps, cuda_exec e) {
  for (int ep = 0; ep < epilogue_set::count; ++ep) {
    dense_matrix<float> ref(static_cast<std::int64_t>(ha.rows), b.cols());
    ops::spmm(host_exec{}, Policy{}, ha, b.view(), ref.view(), eps.get(ep, false));
    device_dense<T> dc(dense_matrix<float>(ref.rows(), ref.cols()), ref.cols(), e);
    ops::spmm(e, Policy{}, da, db.cview(), dc.view(), eps.get(ep, true));
    check_against(ref, dc, e, what + " / epilogue " + std::to_string(ep));
  }
}

// Every CSR, COO, ELL and tiled-dense policy on A (rows x cols) times a random B.
template <class T, class Index>
void check_all_policies(std::string const& shape, csr_matrix<float, Index> const& a, std::int64_t n,
                        std::uint32_t seed, cuda_exec e) {
  std::string const tag = shape + " / " + index_name<Index>() + " / ";
  auto const b = random_dense(a.cols(), n, seed);
  device_dense<T> db(b, n, e);
  epilogue_set const eps(n, e);
  {
    dev_csr<T, Index> da(a, e);
    auto const ha = a.view();
    auto const dv = da.view();
    check_policy<T, policy::csr_row_split<1, 4>>(tag + "csr_row_split<1,4>", ha, dv, b, db, eps, e);
    check_policy<T, policy::csr_row_split<2, 4, true>>(tag + "csr_row_split<2,4,rows_in_x>", ha, dv, b, db, eps, e);
    check_policy<T, policy::csr_staged_b<32, 64>>(tag + "csr_staged_b<32,64>", ha, dv, b, db, eps, e);
    if constexpr (std::is_same_v<T, float>)
      check_policy<T, policy::csr_panels<16, 64, 1>>(tag + "csr_panels<16,64,1>", ha, dv, b, db, eps, e);
    else  // __half: 16 rows x 8 accumulators would spill (linear/op/spmm.cuh)
      check_policy<T, policy::csr_panels<8, 64, 1>>(tag + "csr_panels<8,64,1>", ha, dv, b, db, eps, e);
    check_policy<T, policy::csr_nnz_balanced<>>(tag + "csr_nnz_balanced", ha, dv, b, db, eps, e);
    check_policy<T, policy::skip_empty_rows_mask<policy::csr_row_split<>>>(tag + "skip_empty_rows_mask", ha, dv, b,
                                                                           db, eps, e);
    check_policy<T, policy::skip_empty_rows_compact<policy::csr_row_split<>>>(tag + "skip_empty_rows_compact", ha,
                                                                              dv, b, db, eps, e);
    check_policy<T, policy::automatic>(tag + "automatic", ha, dv, b, db, eps, e);
    if constexpr (std::is_same_v<T, float>) {  // the cuSPARSE baselines are tested in float
      check_policy<T, policy::cusparse_spmm<policy::cusparse_alg::default_alg>>(tag + "cusparse csr default", ha, dv,
                                                                                b, db, eps, e);
      check_policy<T, policy::cusparse_spmm<policy::cusparse_alg::csr_alg2>>(tag + "cusparse csr_alg2", ha, dv, b, db,
                                                                             eps, e);
    }
  }
  {
    auto const h = to_coo(a);
    dev_coo<T, Index> da(h, e);
    check_policy<T, policy::coo_nnz_split<>>(tag + "coo_nnz_split", h.view(), da.view(), b, db, eps, e);
    check_policy<T, policy::coo_nnz_split<32, 1>>(tag + "coo_nnz_split<32,1>", h.view(), da.view(), b, db, eps, e);
    if constexpr (std::is_same_v<T, float>)
      check_policy<T, policy::cusparse_spmm<policy::cusparse_alg::default_alg>>(tag + "cusparse coo default",
                                                                                h.view(), da.view(), b, db, eps, e);
  }
  {
    auto const h = to_ell(a);
    dev_ell<T, Index> da(h, e);
    check_policy<T, policy::ell_row_split<>>(tag + "ell_row_split", h.view(), da.view(), b, db, eps, e);
  }
  {  // tiled-dense: int64 tile indices whatever the CSR's Index
    auto const h = to_tiled_dense(a, 32, 32);
    device_tiled<T> da(h, e);
    tiled_dense_view<float const> const hv = h.view();
    check_policy<T, policy::tiled_dense_spmm>(tag + "tiled_dense_spmm", hv, da.view(), b, db, eps, e);
  }
}

struct shape_case {
  char const* name;
  std::int64_t m, k, n, extra;
};
std::vector<shape_case> shapes() {
  return {
      {"1x1x1", 1, 1, 1, 0},
      {"corners 37x53, N 33", 37, 53, 33, 300},
      {"9 x (2^20+1) columns, N 8", 9, (std::int64_t{1} << 20) + 1, 8, 40},
      {"(2^20+1) rows x 65, N 4", (std::int64_t{1} << 20) + 1, 65, 4, 64},
  };
}

}  // namespace

TEMPLATE_TEST_CASE("every spmm policy with int32 and int64 indices at the largest row and column indices",
                   "[cuda][ops][spmm][indices]", float, __half) {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  {
    cuda_exec e{s};
    std::uint32_t seed = 2024;
    for (auto const& sc : shapes()) {
      ++seed;
      check_all_policies<TestType, std::int32_t>(sc.name, corner_csr<std::int32_t>(sc.m, sc.k, sc.extra, seed), sc.n,
                                                 seed + 7, e);
      check_all_policies<TestType, std::int64_t>(sc.name, corner_csr<std::int64_t>(sc.m, sc.k, sc.extra, seed), sc.n,
                                                 seed + 7, e);
    }
  }
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

namespace {
// A (3 x k, Index) times B (k x 1 float, 8.6 GB for k ~ 2^31) with nonzeros at columns 0,
// 2^31 - 2, k - 1 and around 2^31 (where k allows); B is zero except the rows A touches.
template <class Index>
void check_huge_k(std::int64_t k, cuda_exec e) {
  std::int64_t const two31 = std::int64_t{1} << 31;
  std::vector<std::pair<std::int64_t, std::int64_t>> at = {{0, 0}, {0, k - 1}, {1, two31 - 2}, {2, 1}, {2, k - 1}};
  if (k > two31 + 1) at.insert(at.end(), {{1, two31 - 1}, {1, two31}, {2, two31 + 1}});
  std::sort(at.begin(), at.end());
  std::vector<Index> rp(4, 0), ci;
  std::vector<float> vals;
  int t = 0;
  for (auto const& [r, c] : at) {
    ++rp[static_cast<std::size_t>(r + 1)];
    ci.push_back(static_cast<Index>(c));
    vals.push_back(static_cast<float>(t % 3 + 1) * (t % 2 ? -1.f : 1.f));
    ++t;
  }
  for (int i = 0; i < 3; ++i) rp[static_cast<std::size_t>(i + 1)] += rp[static_cast<std::size_t>(i)];
  auto const a = make_csr<float, Index>(Index(3), static_cast<Index>(k), rp, ci, vals);

  dense_matrix<float> b(k, 1);
  std::fill(b.values().begin(), b.values().end(), 0.f);
  for (auto const& rc : at)  // small nonzero integers
    b.values()[static_cast<std::size_t>(rc.second)] = static_cast<float>(rc.second % 7) - 3.f + (rc.second % 7 == 3 ? 4.f : 0.f);
  buffer<float, device_space> dbuf(static_cast<std::size_t>(k), e);
  SDNN_CUDA_CHECK(cudaMemcpyAsync(dbuf.data(), b.values().data(), sizeof(float) * static_cast<std::size_t>(k),
                                  cudaMemcpyHostToDevice, e.stream));
  dense_view<float const> const db{k, 1, 1, dbuf.data()};
  epilogue_set const eps(1, e);
  std::string const tag = "3 x " + std::to_string(k) + " / " + index_name<Index>() + " / ";

  auto run = [&](std::string const& what, auto policy, auto ha, auto da) {
    using P = decltype(policy);
    for (int ep = 0; ep < epilogue_set::count; ++ep) {
      dense_matrix<float> ref(3, 1);
      ops::spmm(host_exec{}, P{}, ha, b.view(), ref.view(), eps.get(ep, false));
      device_dense<float> dc(dense_matrix<float>(3, 1), 1, e);
      ops::spmm(e, P{}, da, db, dc.view(), eps.get(ep, true));
      check_against(ref, dc, e, tag + what + " / epilogue " + std::to_string(ep));
    }
  };
  {
    dev_csr<float, Index> da(a, e);
    run("csr_row_split<1,4>", policy::csr_row_split<1, 4>{}, a.view(), da.view());
    run("csr_row_split<2,4,rows_in_x>", policy::csr_row_split<2, 4, true>{}, a.view(), da.view());
    run("csr_nnz_balanced", policy::csr_nnz_balanced<>{}, a.view(), da.view());
    run("skip_empty_rows_mask", policy::skip_empty_rows_mask<policy::csr_row_split<>>{}, a.view(), da.view());
    run("skip_empty_rows_compact", policy::skip_empty_rows_compact<policy::csr_row_split<>>{}, a.view(), da.view());
    run("cusparse csr default", policy::cusparse_spmm<policy::cusparse_alg::default_alg>{}, a.view(), da.view());
  }
  {
    auto const h = to_coo(a);
    dev_coo<float, Index> da(h, e);
    run("coo_nnz_split", policy::coo_nnz_split<>{}, h.view(), da.view());
    run("cusparse coo default", policy::cusparse_spmm<policy::cusparse_alg::default_alg>{}, h.view(), da.view());
  }
  {
    auto const h = to_ell(a);
    dev_ell<float, Index> da(h, e);
    run("ell_row_split", policy::ell_row_split<>{}, h.view(), da.view());
  }
}
}  // namespace

TEST_CASE("spmm with about 2^31 columns: int32 at 2^31 - 1, int64 past 2^31 (8.6 GB B)",
          "[cuda][ops][spmm][indices][large]") {
  SDNN_REQUIRE_DEVICE();
  std::size_t free_bytes = 0, total = 0;
  SDNN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  // B (8.6 GB) plus cuSPARSE's buffer and the plans' scratch: ask for 12 GB.
  if (free_bytes < (std::size_t{12} << 30)) {
    WARN("less than 12 GB of free device memory: the 2^31-column cases are not run");
    return;
  }
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  {
    cuda_exec e{s};
    check_huge_k<std::int32_t>((std::int64_t{1} << 31) - 1, e);  // the largest int32 column count
    check_huge_k<std::int64_t>((std::int64_t{1} << 31) + 5, e);  // column indices past 2^31
  }
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

// Dense x sparse (Y * W): W's largest row and column indices, 32-bit W only (see the top).
TEST_CASE("dense x sparse at W's largest row and column indices", "[cuda][ops][spmm][indices]") {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  {
    cuda_exec e{s};
    struct wc {
      char const* name;
      std::int64_t m, k, n, extra;  // Y is m x k, W is k x n
    };
    std::uint32_t seed = 77;
    for (auto const& c : {wc{"corners W 53x37, M 33", 33, 53, 37, 300}, wc{"W 45 x (2^20+1), M 4", 4, 45, (1 << 20) + 1, 40},
                          wc{"W (2^20+1) x 33, M 4", 4, (1 << 20) + 1, 33, 40}}) {
      ++seed;
      auto const w = corner_csr<std::int32_t>(c.k, c.n, c.extra, seed);
      auto const y = random_dense(c.m, c.k, seed + 1);
      device_csr<float> dw(w, e);
      device_dense<float> dy(y, c.k, e);
      epilogue_set const eps(c.n, e);
      for (int ep = 0; ep < epilogue_set::count; ++ep) {
        dense_matrix<float> ref(c.m, c.n);
        ops::spmm_dense_sparse(host_exec{}, policy::csc_gather<>{}, y.view(), w.view(), ref.view(), eps.get(ep, false));
        std::string const what = std::string(c.name) + " / epilogue " + std::to_string(ep);
        device_dense<float> d1(dense_matrix<float>(c.m, c.n), c.n, e);
        ops::spmm_dense_sparse(e, policy::csc_gather<>{}, dy.cview(), dw.view(), d1.view(), eps.get(ep, true));
        check_against(ref, d1, e, "csc_gather / " + what);
        device_dense<float> d3(dense_matrix<float>(c.m, c.n), c.n, e);
        ops::spmm_dense_sparse(e, policy::sparse_linear_default{}, dy.cview(), dw.view(), d3.view(), eps.get(ep, true));
        check_against(ref, d3, e, "skip_empty_rows_csc_tiled16 / " + what);
        device_dense<float> d2(dense_matrix<float>(c.m, c.n), c.n, e);
        ops::spmm_dense_sparse(e, policy::cusparse_spmm<policy::cusparse_alg::default_alg>{}, dy.cview(), dw.view(),
                               d2.view(), eps.get(ep, true));
        check_against(ref, d2, e, "cusparse dense x sparse / " + what);
      }
    }
  }
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

}  // namespace sdnn_spmm_indices_test
