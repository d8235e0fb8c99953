// Device tests of every cuSPARSE SpMM algorithm sdnn exposes (linear/vendor/cusparse.cuh,
// linear/vendor/cusparse_blocked_ell.cuh) against the host reference (linear/reference/spmm.hpp):
//   CSR:         ALG_DEFAULT, CSR_ALG1, CSR_ALG2, CSR_ALG3
//   COO:         ALG_DEFAULT, COO_ALG1, COO_ALG2, COO_ALG3, COO_ALG4
//   tiled-dense: BLOCKED_ELL_ALG1 (and ALG_DEFAULT, which is ALG1 for Blocked-ELL)
// on seeded random small-integer data and edge cases, each with three epilogues (none;
// bias per column + ReLU + cap, applied to empty rows too; the Graph Challenge rule).
// Each plan is built once and run again with a second B (plans are reused).
//
// Exactness: float sums of small integers are exact in any order, so float compares with
// == even for the algorithms cuSPARSE documents as run-to-run non-deterministic (COO_ALG1/3,
// CSR_ALG1/2). __half: cuSPARSE rounds C to half and the unfused epilogue pass rounds again,
// so __half compares within 2^-9 relative (two roundings of at most half an ulp each).
//
// Edge cases that cuSPARSE is not asked to compute: with nnz 0 (or no occupied tile), M,
// K or N zero the plans skip cuSPARSE (no descriptors, no call) and write C = epi(0); the
// "nnz 0", "K = 0", "N = 0" and "0 rows" cases below check that.
#include "sdnn_gpu_test.cuh"
#include "sdnn_spmm_fixtures.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/formats/convert.hpp>
#include <sdnn/linear/op/spmm.cuh>
#include <sdnn/linear/reference/spmm.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>
#include <vector>

namespace sdnn_vendor_cusparse_test {
using namespace sdnn;
using sdnn_test::check_against;
using sdnn_test::csr_case;
using sdnn_test::device_coo;
using sdnn_test::device_csr;
using sdnn_test::device_dense;
using sdnn_test::device_tiled;
using sdnn_test::epilogue_set;
using sdnn_test::download;
using sdnn_test::random_block_csr;
using sdnn_test::random_csr;
using sdnn_test::random_dense;
using sdnn_test::tiled_case;
using sdnn_test::upload;
using policy::cusparse_alg;

namespace {

// A stream that outlives the buffers of the test body (declare it first).
struct test_stream {
  cudaStream_t s = nullptr;
  test_stream() { SDNN_CUDA_CHECK(cudaStreamCreate(&s)); }
  ~test_stream() { cudaStreamDestroy(s); }
  cuda_exec exec() const { return cuda_exec{s}; }
};

// Runs f; an exception becomes a failed check naming `what`, and the test goes on (one
// algorithm rejecting one case must not hide the others).
template <class F>
void guarded(std::string const& what, F&& f) {
  try {
    f();
  } catch (std::exception const& ex) {
    cudaGetLastError();
    FAIL_CHECK(what << ": threw " << ex.what());
  }
}

template <class T>
constexpr int half_tol() { return std::is_same_v<T, float> ? 0 : -9; }


dense_matrix<float> reference_product(csr_matrix<float, int> const& a, dense_matrix<float> const& b,
                                      basic_epilogue<float> const& epi) {
  dense_matrix<float> ref(a.rows(), b.cols());
  reference::spmm(a.view(), b.view(), ref.view(), epi);
  return ref;
}

// A built plan run with every epilogue, then with a second B (the plan keeps its
// descriptors and only the pointers change), each against the host reference.
template <class T, class Plan>
void check_plan_runs(Plan& plan, csr_matrix<float, int> const& a, dense_matrix<float> const& b,
                     dense_matrix<float> const& b2, device_dense<T> const& db, device_dense<T> const& db2,
                     device_dense<T>& dc, epilogue_set const& eps, std::string const& what, cuda_exec e) {
  for (int ep = 0; ep < epilogue_set::count; ++ep) {
    plan.run(e, db.cview(), dc.view(), eps.get(ep, true));
    check_against(reference_product(a, b, eps.get(ep, false)), dc, e, what + " / epilogue " + std::to_string(ep),
                  half_tol<T>());
  }
  plan.run(e, db2.cview(), dc.view(), eps.get(1, true));
  check_against(reference_product(a, b2, eps.get(1, false)), dc, e, what + " / second B", half_tol<T>());
}

std::vector<csr_case> csr_cases() {
  return {
      {"0 rows", 0, 5, 7, 0.5, 0},
      {"N = 0", 9, 5, 0, 0.5, 0},
      {"K = 0", 6, 0, 5, 0.5, 0},
      {"nnz 0 (all rows empty)", 40, 30, 20, 0.5, 1.0},
      {"1x1x1", 1, 1, 1, 1.0, 0},
      {"one row", 1, 300, 9, 0.3, 0},
      {"N = 1", 37, 53, 1, 0.3, 0.1},
      {"K = 1", 50, 1, 6, 0.5, 0},
      {"N = 7", 64, 48, 7, 0.2, 0.1},
      {"N = 13, odd sizes", 131, 77, 13, 0.2, 0.2},
      {"N = 133", 131, 77, 133, 0.2, 0.2},
      {"padded ld", 70, 90, 36, 0.1, 0.3, -1, 4},
      {"90% empty rows", 500, 200, 96, 0.1, 0.9},
      {"a row of 3000 entries", 120, 4000, 40, 0.01, 0.3, 7},
      {"N = 517", 64, 64, 517, 0.15, 0.0},
  };
}

// One (format, algorithm, case): a plan run with every epilogue, then with a second B,
// then the one-shot ops::spmm.
template <class T, cusparse_alg Alg, bool Coo>
void run_sparse_case(csr_case const& cs, std::uint32_t seed, cuda_exec e) {
  using P = policy::cusparse_spmm<Alg>;
  using plan_t = std::conditional_t<Coo, ops::coo_spmm_plan<P, T, int>, ops::csr_spmm_plan<P, T, int>>;
  std::string const what =
      std::string(Coo ? "COO " : "CSR ") + vendor::name_of(Alg) + " / " + cs.name + " / seed " + std::to_string(seed);
  auto const a = random_csr(cs, seed);
  auto const b = random_dense(cs.k, cs.n, seed + 1), b2 = random_dense(cs.k, cs.n, seed + 2);
  epilogue_set const eps(cs.n, e);
  std::int64_t const ld = cs.n + cs.ld_pad;
  device_csr<T> dcsr(a, e);
  device_coo<T> dcoo(to_coo(a), e);
  auto const view = [&] {
    if constexpr (Coo) return dcoo.view();
    else return dcsr.view();
  }();
  device_dense<T> db(b, ld, e), db2(b2, ld, e);
  device_dense<T> dc(dense_matrix<float>(cs.m, cs.n), ld, e);
  guarded(what, [&] {
    plan_t plan(view, db.cview(), dc.view(), e);
    check_plan_runs(plan, a, b, b2, db, db2, dc, eps, what, e);
  });
  guarded(what + " / ops::spmm", [&] {
    device_dense<T> dc2(dense_matrix<float>(cs.m, cs.n), ld, e);
    ops::spmm(e, P{}, view, db.cview(), dc2.view(), eps.get(2, true));
    check_against(reference_product(a, b, eps.get(2, false)), dc2, e, what + " / ops::spmm", half_tol<T>());
  });
}

// ---------------------------------------------------------------------------------------
// Blocked-ELL

using blocked_ell = policy::cusparse_spmm<cusparse_alg::blocked_ell_alg1>;

// What the plan's Blocked-ELL arrays must hold for tiled matrix t (see the header comment
// of linear/vendor/cusparse_blocked_ell.cuh), built with plain loops.
struct ell_layout {
  std::int64_t ell_cols = 0;
  std::vector<std::int32_t> col;
  std::vector<float> val;
};
ell_layout expected_layout(tiled_dense_matrix<float> const& t) {
  ell_layout r;
  std::int64_t const bs = t.tile_rows();
  auto const& trp = t.tile_row_ptr();
  std::int64_t slots = 0;
  for (std::int64_t ti = 0; ti < t.grid_rows(); ++ti)
    slots = std::max<std::int64_t>(slots, trp[static_cast<std::size_t>(ti + 1)] - trp[static_cast<std::size_t>(ti)]);
  r.ell_cols = slots * bs;
  r.col.assign(static_cast<std::size_t>(t.grid_rows() * slots), -1);
  r.val.assign(static_cast<std::size_t>(t.rows() * r.ell_cols), 0.f);
  for (std::int64_t ti = 0; ti < t.grid_rows(); ++ti)
    for (std::int64_t s = 0; s < trp[static_cast<std::size_t>(ti + 1)] - trp[static_cast<std::size_t>(ti)]; ++s) {
      std::int64_t const tj = t.tile_col()[static_cast<std::size_t>(trp[static_cast<std::size_t>(ti)] + s)];
      r.col[static_cast<std::size_t>(ti * slots + s)] = static_cast<std::int32_t>(tj);
      for (std::int64_t i = 0; i < bs; ++i)
        for (std::int64_t j = 0; j < bs; ++j)
          r.val[static_cast<std::size_t>((ti * bs + i) * r.ell_cols + s * bs + j)] = t(ti * bs + i, tj * bs + j);
    }
  return r;
}

template <class T>
void check_layout(ell_layout const& want, vendor::cusparse_blocked_ell_plan<T> const& p, cuda_exec e,
                  std::string const& what) {
  INFO(what);
  REQUIRE(p.ell_cols() == want.ell_cols);
  CHECK(download(p.ell_col_ind(), want.col.size(), e) == want.col);
  auto const v = download(p.ell_values(), want.val.size(), e);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (value_cast<float>(v[i]) != want.val[i] && bad++ < 3)
      UNSCOPED_INFO(what << ": ellValue[" << i << "] = " << value_cast<float>(v[i]) << ", expected " << want.val[i]);
  CHECK(bad == 0);
}

std::vector<tiled_case> tiled_cases() {
  // name, m, k, n, tile, tile density, element density, empty tile rows, full tile row, ld pad
  return {
      {"0 rows", 0, 64, 8, 32, 0.5, 0.5},
      {"K = 0", 64, 0, 8, 32, 0.5, 0.5},
      {"N = 0", 64, 64, 0, 32, 0.5, 0.5},
      {"no occupied tile (nnz 0)", 64, 96, 16, 32, 0.0, 0.5},
      {"one tile, N = 8", 32, 32, 8, 32, 1.0, 0.5},
      {"one tile row", 32, 256, 20, 32, 0.5, 0.3},
      {"one tile column", 256, 32, 20, 32, 0.5, 0.3},
      {"N = 1", 64, 128, 1, 32, 0.4, 0.5},
      {"N = 7, tile 16", 96, 160, 7, 16, 0.3, 0.4, 0.2},
      {"N = 13, tile 8", 64, 96, 13, 8, 0.25, 0.5, 0.2},
      {"padded ld, tile 16", 64, 64, 36, 16, 0.4, 0.5, 0.0, -1, 4},
      {"tile rows of 0..94 tiles (rows of 3008 entries)", 256, 3008, 40, 32, 0.02, 0.3, 0.3, 2},
      {"N = 517, dense tiles", 128, 128, 517, 32, 0.3, 1.0},
  };
}

template <class T>
void run_tiled_case(tiled_case const& cs, std::uint32_t seed, cuda_exec e) {
  std::string const what = "Blocked-ELL / " + cs.name + " / seed " + std::to_string(seed);
  auto const a = random_block_csr(cs, seed);
  auto const t = to_tiled_dense(a, cs.tile, cs.tile);
  auto const b = random_dense(cs.k, cs.n, seed + 1), b2 = random_dense(cs.k, cs.n, seed + 2);
  epilogue_set const eps(cs.n, e);
  std::int64_t const ld = cs.n + cs.ld_pad;
  device_tiled<T> da(t, e);
  device_dense<T> db(b, ld, e), db2(b2, ld, e);
  device_dense<T> dc(dense_matrix<float>(cs.m, cs.n), ld, e);
  if (cs.ld_pad > 0) {  // the vendor kernel writes into C's padding: the plan refuses padded operands
    auto const msg = sdnn_test::error_text([&] { ops::tiled_spmm_plan<blocked_ell, T>(da.view(), db.cview(), dc.view(), e); });
    CHECK(sdnn_test::has(msg, "must be packed"));
    return;
  }
  guarded(what, [&] {
    ops::tiled_spmm_plan<blocked_ell, T> plan(da.view(), db.cview(), dc.view(), e);
    if (cs.n > 0 && t.occupied_tiles() > 0) check_layout(expected_layout(t), plan.vendor_plan(), e, what);
    if (t.occupied_tiles() == 0) CHECK(plan.vendor_plan().ell_cols() == 0);
    check_plan_runs(plan, a, b, b2, db, db2, dc, eps, what, e);
  });
  guarded(what + " / ops::spmm", [&] {
    device_dense<T> dc2(dense_matrix<float>(cs.m, cs.n), ld, e);
    ops::spmm(e, blocked_ell{}, da.view(), db.cview(), dc2.view(), eps.get(2, true));
    check_against(reference_product(a, b, eps.get(2, false)), dc2, e, what + " / ops::spmm", half_tol<T>());
    device_dense<T> dc3(dense_matrix<float>(cs.m, cs.n), ld, e);
    ops::spmm(e, policy::cusparse_spmm<>{}, da.view(), db.cview(), dc3.view(), eps.get(1, true));
    check_against(reference_product(a, b, eps.get(1, false)), dc3, e, what + " / ops::spmm ALG_DEFAULT",
                  half_tol<T>());
  });
}

}  // namespace

TEMPLATE_TEST_CASE("cuSPARSE CSR algorithms match the reference", "[cuda][vendor][cusparse]", float, __half) {
  SDNN_REQUIRE_DEVICE();
  test_stream s;
  std::uint32_t seed = 4100;
  for (auto const& cs : csr_cases()) {
    ++seed;
    run_sparse_case<TestType, cusparse_alg::default_alg, false>(cs, seed, s.exec());
    run_sparse_case<TestType, cusparse_alg::csr_alg1, false>(cs, seed, s.exec());
    run_sparse_case<TestType, cusparse_alg::csr_alg2, false>(cs, seed, s.exec());
    run_sparse_case<TestType, cusparse_alg::csr_alg3, false>(cs, seed, s.exec());
  }
}

TEMPLATE_TEST_CASE("cuSPARSE COO algorithms match the reference", "[cuda][vendor][cusparse]", float, __half) {
  SDNN_REQUIRE_DEVICE();
  test_stream s;
  std::uint32_t seed = 4200;
  for (auto const& cs : csr_cases()) {
    ++seed;
    run_sparse_case<TestType, cusparse_alg::default_alg, true>(cs, seed, s.exec());
    run_sparse_case<TestType, cusparse_alg::coo_alg1, true>(cs, seed, s.exec());
    run_sparse_case<TestType, cusparse_alg::coo_alg2, true>(cs, seed, s.exec());
    run_sparse_case<TestType, cusparse_alg::coo_alg3, true>(cs, seed, s.exec());
    run_sparse_case<TestType, cusparse_alg::coo_alg4, true>(cs, seed, s.exec());
  }
}

TEMPLATE_TEST_CASE("cuSPARSE Blocked-ELL on tiled-dense matches the reference", "[cuda][vendor][cusparse]", float,
                   __half) {
  SDNN_REQUIRE_DEVICE();
  test_stream s;
  std::uint32_t seed = 4300;
  for (auto const& cs : tiled_cases()) run_tiled_case<TestType>(cs, ++seed, s.exec());
}

// NVIDIA's dense2sparse_blockedell sample (CUDALibrarySamples): a 4 x 6 matrix, 2 x 2
// blocks, ellColInd {1, -1, 0, 2}; the conversion must give the sample's ellValue.
TEST_CASE("cuSPARSE Blocked-ELL conversion reproduces NVIDIA's sample layout", "[cuda][vendor][cusparse]") {
  SDNN_REQUIRE_DEVICE();
  test_stream s;
  cuda_exec const e = s.exec();
  float const dense[] = {0, 0, 1, 2, 0, 0,  //
                         0, 0, 3, 4, 0, 0,  //
                         5, 6, 0, 0, 7, 8,  //
                         9, 10, 0, 0, 11, 12};
  dense_matrix<float> ad(4, 6);
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 6; ++j) ad(i, j) = dense[i * 6 + j];
  auto const t = to_tiled_dense(ad, 2, 2);
  ell_layout want;
  want.ell_cols = 4;
  want.col = {1, -1, 0, 2};
  want.val = {1, 2, 0, 0, 3, 4, 0, 0, 5, 6, 7, 8, 9, 10, 11, 12};
  auto const b = random_dense(6, 3, 11);
  auto const ref = reference_product(to_csr<int>(ad), b, epilogue_none<float>());
  device_tiled<float> da(t, e);
  device_dense<float> db(b, 3, e), dc(dense_matrix<float>(4, 3), 3, e);
  guarded("NVIDIA sample", [&] {
    ops::tiled_spmm_plan<blocked_ell, float> plan(da.view(), db.cview(), dc.view(), e);
    check_layout(want, plan.vendor_plan(), e, "NVIDIA sample");
    plan.run(e, db.cview(), dc.view(), epilogue_none<float>());
    check_against(ref, dc, e, "NVIDIA sample product");
  });
}

// 1 + 2^-12 is exact in float but rounds to 1 in TF32 (10-bit mantissa). Measured on CUDA
// 13.0 / H200: the float Blocked-ELL product runs on TF32 tensor cores, so C is the product
// of the TF32-rounded inputs (32), not the float one (32 + 2^-7). The header documents
// this; if a cuSPARSE release computes in full float, this test fails and the note (and
// bench_spmm's label) must change.
TEST_CASE("cuSPARSE Blocked-ELL float computes with TF32-rounded inputs (documented)", "[cuda][vendor][cusparse]") {
  SDNN_REQUIRE_DEVICE();
  test_stream s;
  cuda_exec const e = s.exec();
  float const x = 1.f + std::ldexp(1.f, -12);
  auto tf32 = [](float v) {  // keep 10 mantissa bits (truncation and round-to-nearest agree for x)
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    u &= 0xffffe000u;
    std::memcpy(&v, &u, 4);
    return v;
  };
  dense_matrix<float> ad(32, 32), ad_tf32(32, 32), b(32, 8);
  for (std::size_t i = 0; i < ad.size(); ++i) ad.values()[i] = x, ad_tf32.values()[i] = tf32(x);
  for (std::size_t i = 0; i < b.size(); ++i) b.values()[i] = 1.f;
  auto const t = to_tiled_dense(ad, 32, 32);
  auto const exact = reference_product(to_csr<int>(ad), b, epilogue_none<float>());
  auto const ref = reference_product(to_csr<int>(ad_tf32), b, epilogue_none<float>());
  REQUIRE(exact(0, 0) == 32.f + std::ldexp(1.f, -7));
  REQUIRE(ref(0, 0) == 32.f);
  device_tiled<float> da(t, e);
  device_dense<float> db(b, 8, e), dc(dense_matrix<float>(32, 8), 8, e);
  guarded("TF32 probe", [&] {
    ops::spmm(e, blocked_ell{}, da.view(), db.cview(), dc.view(), epilogue_none<float>());
    check_against(ref, dc, e, "Blocked-ELL float (the TF32 product of the inputs)");
  });
}

// Shapes cuSPARSE Blocked-ELL cannot take are refused at plan time, before any device work
// (views without data suffice, so this runs without a GPU too).
TEST_CASE("cuSPARSE Blocked-ELL rejects shapes it cannot take", "[cuda][vendor][cusparse]") {
  using sdnn_test::error_text;
  using sdnn_test::has;
  cuda_exec const e{};
  auto plan_for = [&](std::int64_t rows, std::int64_t cols, std::int64_t tr, std::int64_t tc) {
    return error_text([&] {
      tiled_dense_view<float const> a{rows, cols, tr, tc, (rows + tr - 1) / tr, (cols + tc - 1) / tc, 0,
                                      nullptr, nullptr, nullptr, nullptr};
      dense_view<float const> b{cols, 8, 8, nullptr};
      dense_view<float> c{rows, 8, 8, nullptr};
      ops::tiled_spmm_plan<blocked_ell, float> p(a, b, c, e);
    });
  };
  auto const nonsquare = plan_for(64, 64, 32, 16);
  CHECK(has(nonsquare, "tiles must be square"));
  CHECK(has(nonsquare, "32 x 16"));
  auto const rows = plan_for(40, 64, 32, 32);
  CHECK(has(rows, "multiples of the tile size 32"));
  CHECK(has(rows, "A is 40 x 64"));
  CHECK(has(plan_for(64, 40, 32, 32), "multiples of the tile size 32"));
  CHECK(has(plan_for(64, 64, 16, 16), "no throw"));  // a valid shape with no tile: nothing to do
}

// A plan is built for one packed (B, C) shape: anything else is refused.
TEST_CASE("cuSPARSE Blocked-ELL plan refuses another B/C shape", "[cuda][vendor][cusparse]") {
  SDNN_REQUIRE_DEVICE();
  using sdnn_test::error_text;
  using sdnn_test::has;
  test_stream s;
  cuda_exec const e = s.exec();
  tiled_case const cs{"", 64, 64, 16, 32, 1.0, 0.5};
  auto const a = random_block_csr(cs, 5);
  auto const t = to_tiled_dense(a, 32, 32);
  device_tiled<float> da(t, e);
  device_dense<float> db(random_dense(64, 16, 6), 16, e), dc(dense_matrix<float>(64, 16), 16, e);
  device_dense<float> db_ld(random_dense(64, 16, 6), 20, e), dc_ld(dense_matrix<float>(64, 16), 20, e);
  device_dense<float> db_n(random_dense(64, 8, 6), 8, e), dc_n(dense_matrix<float>(64, 8), 8, e);
  guarded("plan reuse", [&] {
    ops::tiled_spmm_plan<blocked_ell, float> plan(da.view(), db.cview(), dc.view(), e);
    CHECK(has(error_text([&] { plan.run(e, db_ld.cview(), dc_ld.view(), epilogue_none<float>()); }),
              "got ld(B) = 20 for 16 columns"));
    CHECK(has(error_text([&] { plan.run(e, db_n.cview(), dc_n.view(), epilogue_none<float>()); }),
              "the plan is for N = 16"));
  });
}

}  // namespace sdnn_vendor_cusparse_test
