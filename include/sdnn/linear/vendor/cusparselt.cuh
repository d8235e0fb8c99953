// sdnn/linear/vendor/cusparselt.cuh - the cuSPARSELt baseline of the 2:4 linear layer:
//
//   Y[N x M] = X[N x K] * W^T     W: M x K dense with 2:4 zeros along K (device), bf16 or fp16
//
// A plan for one batch size N: prune check (refusing a W that is not 2:4), compression and an algorithm
// search once, in the constructor, which synchronises exec.stream; run() enqueues one cusparseLtMatmul.
// Errors: sdnn::library_error ("cuSPARSELt") with the status name and text. Only with
// SDNN_HAS_CUSPARSELT=1 (cmake/sdnn_find_cusparselt.cmake, target sdnn::cusparselt_lib); a program
// that includes it also offers cuSPARSELt to the automatic 16-bit layer (vendor/sparse24_vendor.hpp).
#pragma once

#include "sdnn/core/config.hpp"

#if SDNN_HAS_CUSPARSELT

#include <cuda_runtime.h>
#include <cusparseLt.h>

#include <cstdint>
#include <type_traits>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/error.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/numeric.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/linear/vendor/sparse24_vendor.hpp"

#include <memory>

namespace sdnn::vendor {

namespace detail {
inline void cusparselt_check(cusparseStatus_t st, char const* call, char const* file, int line) {
  if (st != CUSPARSE_STATUS_SUCCESS)
    throw ::sdnn::library_error("cuSPARSELt", call, static_cast<int>(st),
                                ::sdnn::detail::concat(cusparseGetErrorName(st), " (", cusparseGetErrorString(st), ")"),
                                file, line);
}
inline void cusparselt_check_noexcept(cusparseStatus_t st, char const* what) noexcept {
  if (st != CUSPARSE_STATUS_SUCCESS) ::sdnn::detail::report_release("cuSPARSELt", what, cusparseGetErrorName(st));
}
}  // namespace detail
}  // namespace sdnn::vendor

#define SDNN_CUSPARSELT_CHECK(call) ::sdnn::vendor::detail::cusparselt_check((call), #call, __FILE__, __LINE__)

namespace sdnn::vendor {

namespace detail {
// The handle and descriptors, each destroyed only if it was made (also when a constructor throws).
struct cusparselt_state {
  cusparseLtHandle_t handle{};
  cusparseLtMatDescriptor_t a{}, b{}, c{};
  cusparseLtMatmulDescriptor_t mm{};
  cusparseLtMatmulAlgSelection_t alg{};
  cusparseLtMatmulPlan_t plan{};
  bool has_handle = false, has_a = false, has_b = false, has_c = false, has_plan = false;
  cusparselt_state() = default;
  cusparselt_state(cusparselt_state const&) = delete;
  cusparselt_state& operator=(cusparselt_state const&) = delete;
  ~cusparselt_state() {
    if (has_plan) cusparselt_check_noexcept(cusparseLtMatmulPlanDestroy(&plan), "cusparseLtMatmulPlanDestroy");
    if (has_a) cusparselt_check_noexcept(cusparseLtMatDescriptorDestroy(&a), "cusparseLtMatDescriptorDestroy");
    if (has_b) cusparselt_check_noexcept(cusparseLtMatDescriptorDestroy(&b), "cusparseLtMatDescriptorDestroy");
    if (has_c) cusparselt_check_noexcept(cusparseLtMatDescriptorDestroy(&c), "cusparseLtMatDescriptorDestroy");
    if (has_handle) cusparselt_check_noexcept(cusparseLtDestroy(&handle), "cusparseLtDestroy");
  }
};
}  // namespace detail

// Computed as the column-major C[M x N] = W * X^T (W row-major, not transposed; X row-major,
// transposed; C column-major: the memory of Y). No epilogue. T: sdnn::bf16 or sdnn::fp16. Not copyable or movable (cuSPARSELt descriptors may hold their
// own addresses); hold it by unique_ptr.
template <class T>
class cusparselt_linear {
  static_assert(is_16bit_float_v<T>, "cusparselt_linear: sdnn::bf16 or sdnn::fp16");

 public:
  // w: device view, M x K row-major (ld >= K), 2:4 along K; n: the batch size of every run.
  cusparselt_linear(dense_view<T const> w, std::int64_t n, cuda_exec exec) : m_(w.rows), k_(w.cols), n_(n) {
    SDNN_EXPECTS(m_ > 0 && k_ > 0 && n_ > 0, "cusparselt_linear: W ", m_, " x ", k_, " and N = ", n_,
                 " must all be positive");
    constexpr cudaDataType dt = std::is_same_v<T, bf16> ? CUDA_R_16BF : CUDA_R_16F;
    constexpr unsigned align = 16;
    std::int64_t const ldw = w.rows > 1 ? w.ld : w.cols;
    auto& st = st_;
    SDNN_CUSPARSELT_CHECK(cusparseLtInit(&st.handle));
    st.has_handle = true;
    SDNN_CUSPARSELT_CHECK(cusparseLtStructuredDescriptorInit(&st.handle, &st.a, m_, k_, ldw, align, dt,
                                                             CUSPARSE_ORDER_ROW, CUSPARSELT_SPARSITY_50_PERCENT));
    st.has_a = true;
    SDNN_CUSPARSELT_CHECK(cusparseLtDenseDescriptorInit(&st.handle, &st.b, n_, k_, k_, align, dt, CUSPARSE_ORDER_ROW));
    st.has_b = true;
    SDNN_CUSPARSELT_CHECK(cusparseLtDenseDescriptorInit(&st.handle, &st.c, m_, n_, m_, align, dt, CUSPARSE_ORDER_COL));
    st.has_c = true;
    SDNN_CUSPARSELT_CHECK(cusparseLtMatmulDescriptorInit(&st.handle, &st.mm, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                         CUSPARSE_OPERATION_TRANSPOSE, &st.a, &st.b, &st.c, &st.c,
                                                         CUSPARSE_COMPUTE_32F));
    void const* wp = w.data;
    SDNN_CUSPARSELT_CHECK(
        cusparseLtMatmulDescSetAttribute(&st.handle, &st.mm, CUSPARSELT_MATMUL_SPARSE_MAT_POINTER, &wp, sizeof(wp)));
    SDNN_CUSPARSELT_CHECK(cusparseLtMatmulAlgSelectionInit(&st.handle, &st.alg, &st.mm, CUSPARSELT_MATMUL_ALG_DEFAULT));
    SDNN_CUSPARSELT_CHECK(cusparseLtMatmulPlanInit(&st.handle, &st.plan, &st.mm, &st.alg));
    st.has_plan = true;

    // Refuse a W that is not 2:4 (the check reads a flag back: synchronises).
    // The flag starts at 0: the check need not write it when W is valid, and a pooled allocation
    // holds anything.
    buffer<int, device_space> valid(1, exec);
    SDNN_CUDA_CHECK(cudaMemsetAsync(valid.data(), 0, sizeof(int), exec.stream));
    SDNN_CUSPARSELT_CHECK(cusparseLtSpMMAPruneCheck(&st.handle, &st.mm, w.data, valid.data(), exec.stream));
    int bad = 0;
    SDNN_CUDA_CHECK(cudaMemcpyAsync(&bad, valid.data(), sizeof bad, cudaMemcpyDeviceToHost, exec.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    SDNN_EXPECTS(bad == 0, "cusparselt_linear: W (", m_, " x ", k_,
                 ") is not 2:4 along K (cusparseLtSpMMAPruneCheck)");

    std::size_t csize = 0, cbuf = 0;
    SDNN_CUSPARSELT_CHECK(cusparseLtSpMMACompressedSize(&st.handle, &st.plan, &csize, &cbuf));
    compressed_ = buffer<unsigned char, device_space>(csize, exec);
    buffer<unsigned char, device_space> cscratch(cbuf, exec);
    SDNN_CUSPARSELT_CHECK(
        cusparseLtSpMMACompress(&st.handle, &st.plan, w.data, compressed_.data(), cscratch.data(), exec.stream));

    // Algorithm search once, on scratch X and Y of this shape.
    buffer<T, device_space> xs(static_cast<std::size_t>(n_ * k_), exec), ys(static_cast<std::size_t>(n_ * m_), exec);
    SDNN_CUDA_CHECK(cudaMemsetAsync(xs.data(), 0, xs.size() * sizeof(T), exec.stream));
    float const alpha = 1.0f, beta = 0.0f;
    cudaStream_t s = exec.stream;
    SDNN_CUSPARSELT_CHECK(cusparseLtMatmulSearch(&st.handle, &st.plan, &alpha, compressed_.data(), xs.data(), &beta,
                                                 ys.data(), ys.data(), nullptr, &s, 1));
    std::size_t wsb = 0;
    SDNN_CUSPARSELT_CHECK(cusparseLtMatmulGetWorkspace(&st.handle, &st.plan, &wsb));
    ws_ = buffer<unsigned char, device_space>(wsb, exec);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));  // scratch freed after the search finished
  }
  cusparselt_linear(cusparselt_linear const&) = delete;
  cusparselt_linear& operator=(cusparselt_linear const&) = delete;

  std::int64_t batch() const noexcept { return n_; }
  std::size_t compressed_bytes() const noexcept { return compressed_.size(); }
  std::size_t workspace_bytes() const noexcept { return ws_.size(); }

  // y = x * W^T; x: N x K, y: N x M, contiguous rows (ld == cols), device.
  void run(cuda_exec exec, dense_view<T const> x, dense_view<T> y) const {
    SDNN_EXPECTS_DIMS(x.rows == n_ && x.cols == k_ && y.rows == n_ && y.cols == m_, "cusparselt_linear: planned for X ",
                      n_, " x ", k_, " -> Y ", n_, " x ", m_, ", got X ", x.rows, " x ", x.cols, ", Y ", y.rows, " x ",
                      y.cols);
    SDNN_EXPECTS((x.rows <= 1 || x.ld == x.cols) && (y.rows <= 1 || y.ld == y.cols),
                 "cusparselt_linear: X and Y must have contiguous rows");
    float const alpha = 1.0f, beta = 0.0f;
    cudaStream_t s = exec.stream;
    SDNN_CUSPARSELT_CHECK(cusparseLtMatmul(&st_.handle, &st_.plan, &alpha, compressed_.data(), x.data, &beta, y.data, y.data,
                                           ws_.empty() ? nullptr : const_cast<unsigned char*>(ws_.data()), &s, 1));
  }

 private:
  std::int64_t m_, k_, n_;
  detail::cusparselt_state st_;
  buffer<unsigned char, device_space> compressed_, ws_;
};

namespace detail {
template <class T>
class cusparselt_matmul final : public sparse24_matmul<T> {
 public:
  cusparselt_matmul(dense_view<T const> w, std::int64_t n, cuda_exec exec) : lt_(w, n, exec) {}
  void run(cuda_exec exec, dense_view<T const> x, dense_view<T> y) const override { lt_.run(exec, x, y); }
  std::size_t device_bytes() const override { return lt_.compressed_bytes() + lt_.workspace_bytes(); }

 private:
  cusparselt_linear<T> lt_;
};
template <class T>
std::unique_ptr<sparse24_matmul<T>> make_cusparselt_matmul(dense_view<T const> w, std::int64_t n, cuda_exec exec) {
  return std::make_unique<cusparselt_matmul<T>>(w, n, exec);
}
// Set before main() in every program that includes this header.
inline bool const cusparselt_offered = [] {
  sparse24_vendor_maker<bf16>.store(&make_cusparselt_matmul<bf16>);
  sparse24_vendor_maker<fp16>.store(&make_cusparselt_matmul<fp16>);
  return true;
}();
}  // namespace detail

}  // namespace sdnn::vendor

#endif  // SDNN_HAS_CUSPARSELT
