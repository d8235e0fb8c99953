// The vendor wrappers' error reporting and the dense x sparse form of the one cuSPARSE
// wrapper (vendor::cusparse_spmm_plan):
//  - a failing cuSPARSE / cuBLAS call throws sdnn::cusparse_error / sdnn::cublas_error whose
//    message names the library, the call and the status by name;
//  - Y * W through W^T with each workspace mode, a row count that changes from run to run,
//    the live-row flags of the epilogue pass, and shape checks (sdnn::dimension_mismatch).
#include "sdnn_gpu_test.cuh"
#include "sdnn_spmm_fixtures.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/formats/convert.cuh>
#include <sdnn/linear/reference/spmm.hpp>
#include <sdnn/linear/vendor/cublas.cuh>
#include <sdnn/linear/vendor/cusparse.cuh>

#include <cstdint>
#include <string>
#include <vector>

using namespace sdnn;
using namespace sdnn_test;

TEST_CASE("a failing cuSPARSE call throws sdnn::cusparse_error naming the call and the status", "[cuda][vendor][error]") {
  SDNN_REQUIRE_DEVICE();
  float dummy = 0;
  cusparseDnMatDescr_t d = nullptr;
  try {
    // A negative row count is an invalid argument.
    SDNN_CUSPARSE_CHECK(cusparseCreateDnMat(&d, -1, 4, 4, &dummy, CUDA_R_32F, CUSPARSE_ORDER_ROW));
    FAIL("no throw");
  } catch (cusparse_error const& e) {
    std::string const w = e.what();
    INFO(w);
    CHECK(has(w, "cuSPARSE"));
    CHECK(has(w, "cusparseCreateDnMat"));
    CHECK(has(w, "CUSPARSE_STATUS_"));
    CHECK(has(w, "CUSPARSE_STATUS_INVALID_VALUE"));
    CHECK(e.library() == "cuSPARSE");
    CHECK(e.status() == static_cast<int>(CUSPARSE_STATUS_INVALID_VALUE));
  }
  if (d) cusparseDestroyDnMat(d);
}

TEST_CASE("a failing cuBLAS call throws sdnn::cublas_error naming the call and the status", "[cuda][vendor][error]") {
  SDNN_REQUIRE_DEVICE();
  try {
    SDNN_CUBLAS_CHECK(cublasSetStream(nullptr, nullptr));  // no handle
    FAIL("no throw");
  } catch (library_error const& e) {
    REQUIRE(dynamic_cast<cublas_error const*>(&e) != nullptr);
    std::string const w = e.what();
    INFO(w);
    CHECK(has(w, "cuBLAS"));
    CHECK(has(w, "cublasSetStream"));
    CHECK(has(w, "CUBLAS_STATUS_"));
  }
}

TEST_CASE("cusparse_spmm_plan computes Y * W from W^T, with flags, in both workspace modes", "[cuda][vendor][cusparse]") {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  cuda_exec e{s};
  {
    std::int64_t const m = 57, k = 90, n = 70;
    auto const w = random_csr(csr_case{"w", k, n, 0, 0.1, 0.2}, 901);  // W: k x n
    auto y = random_dense(m, k, 902);
    for (std::int64_t j = 0; j < k; ++j) y(5, j) = 0;  // row 5 gives no output at all
    device_csr<float> dw(w, e);
    auto const wt = transpose(dw.view(), e);  // W^T: n x k
    device_dense<float> dy(y, k, e);
    epilogue_set eps(n, e);
    for (auto mode : {vendor::cusparse_workspace::reuse, vendor::cusparse_workspace::per_call}) {
      vendor::cusparse_spmm_plan<float, int> plan(vendor::dense_times_sparse, wt.view(), mode);
      for (std::int64_t rows : {m, std::int64_t{20}, m}) {  // the row count may change between runs
        for (int which = 0; which < epilogue_set::count; ++which) {
          INFO("mode " << (mode == vendor::cusparse_workspace::reuse ? "reuse" : "per_call") << ", rows " << rows
                       << ", epilogue " << which);
          dense_matrix<float> ref(m, n);
          reference::dense_sparse_spmm(dense_view<float const>(y.view()), w.view(), ref.view(), eps.get(which, false));
          device_dense<float> dc(dense_matrix<float>(m, n), n, e);
          device_buffer<int> flags(static_cast<std::size_t>(m), e);
          SDNN_CUDA_CHECK(cudaMemsetAsync(flags.data(), 0, flags.size() * sizeof(int), s));
          plan.run_rows(dy.cview(), dc.view(), rows, eps.get(which, true), flags.data(), e);
          auto const got = download(dc.d.data(), dc.d.size(), e);
          auto const f = to_vector(flags, s);
          for (std::int64_t i = 0; i < m; ++i) {
            bool any = false;
            for (std::int64_t j = 0; j < n; ++j) {
              float const want = i < rows ? ref(i, j) : 0.f;  // rows past `rows` are not written
              any = any || (i < rows && want != 0.f);
              REQUIRE(got[static_cast<std::size_t>(i * n + j)] == want);
            }
            REQUIRE(f[static_cast<std::size_t>(i)] == (any ? 1 : 0));
          }
        }
      }
      if (mode == vendor::cusparse_workspace::per_call) REQUIRE(plan.buffer_bytes() == 0);
      // Y with the wrong number of columns, C with the wrong number of columns.
      device_dense<float> bad(dense_matrix<float>(m, n), n, e);
      REQUIRE_THROWS_AS(plan.run_rows(bad.cview(), bad.view(), m, epilogue_none<float>(), nullptr, e),
                        dimension_mismatch);
      REQUIRE_THROWS_AS(plan.run_rows(dy.cview(), dy.view(), m, epilogue_none<float>(), nullptr, e),
                        dimension_mismatch);
      REQUIRE_THROWS_AS(plan.run_rows(dy.cview(), bad.view(), m + 1, epilogue_none<float>(), nullptr, e), error);
    }
    SDNN_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}
