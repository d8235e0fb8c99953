// sdnn/vendor/cusparse.cuh - the cuSPARSE SpMM baseline behind the spmm interface.
//
//   C[M x N] = epi(A_sparse[M x K] * B[K x N]), A in CSR or COO (32- or 64-bit indices),
//   B and C row-major (CUSPARSE_ORDER_ROW) as in every sdnn op. T = float (CUDA_R_32F) or
//   __half (CUDA_R_16F data, CUDA_R_32F compute).
// A plan holds the handle, the descriptors and the external buffer for one A and one
// (B, C) shape: the buffer is sized and allocated once (cusparseSpMM_bufferSize) and
// reused by every run(); cusparseSpMM_preprocess runs once at plan time for CSR_ALG1/3.
// Not every algorithm supports every layout/type: the plan throws sdnn::cusparse_error with
// the cuSPARSE status (e.g. CUSPARSE_STATUS_NOT_SUPPORTED) and callers may skip it.
// `column_major` plans describe B and C as column-major (ld = K resp. M): a different
// layout of the same product, offered only so benchmarks can time the algorithms that
// need it; such a plan cannot serve the row-major ops interface.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#include <cstdint>
#include <type_traits>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/formats/coo.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/core/cusparse_alg.hpp"
#include "sdnn/vendor/cublas.cuh"

namespace sdnn::vendor {

namespace detail {
inline char const* cusparse_status_name(cusparseStatus_t st) {
  switch (st) {
    case CUSPARSE_STATUS_SUCCESS: return "CUSPARSE_STATUS_SUCCESS";
    case CUSPARSE_STATUS_NOT_INITIALIZED: return "CUSPARSE_STATUS_NOT_INITIALIZED";
    case CUSPARSE_STATUS_ALLOC_FAILED: return "CUSPARSE_STATUS_ALLOC_FAILED";
    case CUSPARSE_STATUS_INVALID_VALUE: return "CUSPARSE_STATUS_INVALID_VALUE";
    case CUSPARSE_STATUS_ARCH_MISMATCH: return "CUSPARSE_STATUS_ARCH_MISMATCH";
    case CUSPARSE_STATUS_EXECUTION_FAILED: return "CUSPARSE_STATUS_EXECUTION_FAILED";
    case CUSPARSE_STATUS_INTERNAL_ERROR: return "CUSPARSE_STATUS_INTERNAL_ERROR";
    case CUSPARSE_STATUS_MATRIX_TYPE_NOT_SUPPORTED: return "CUSPARSE_STATUS_MATRIX_TYPE_NOT_SUPPORTED";
    case CUSPARSE_STATUS_NOT_SUPPORTED: return "CUSPARSE_STATUS_NOT_SUPPORTED";
    case CUSPARSE_STATUS_INSUFFICIENT_RESOURCES: return "CUSPARSE_STATUS_INSUFFICIENT_RESOURCES";
    default: return "CUSPARSE_STATUS_UNKNOWN";
  }
}
inline void cusparse_check(cusparseStatus_t st, char const* call, char const* file, int line) {
  if (st != CUSPARSE_STATUS_SUCCESS)
    throw ::sdnn::cusparse_error(call, static_cast<int>(st),
                                 ::sdnn::detail::concat(cusparse_status_name(st), " (", cusparseGetErrorString(st), ")"),
                                 file, line);
}
}  // namespace detail
}  // namespace sdnn::vendor

#define SDNN_CUSPARSE_CHECK(call) ::sdnn::vendor::detail::cusparse_check((call), #call, __FILE__, __LINE__)

namespace sdnn::vendor {

inline cusparseSpMMAlg_t to_cusparse(policy::cusparse_alg a) {
  switch (a) {
    case policy::cusparse_alg::default_alg: return CUSPARSE_SPMM_ALG_DEFAULT;
    case policy::cusparse_alg::csr_alg1: return CUSPARSE_SPMM_CSR_ALG1;
    case policy::cusparse_alg::csr_alg2: return CUSPARSE_SPMM_CSR_ALG2;
    case policy::cusparse_alg::csr_alg3: return CUSPARSE_SPMM_CSR_ALG3;
    case policy::cusparse_alg::coo_alg1: return CUSPARSE_SPMM_COO_ALG1;
    case policy::cusparse_alg::coo_alg2: return CUSPARSE_SPMM_COO_ALG2;
    case policy::cusparse_alg::coo_alg3: return CUSPARSE_SPMM_COO_ALG3;
    case policy::cusparse_alg::coo_alg4: return CUSPARSE_SPMM_COO_ALG4;
    case policy::cusparse_alg::blocked_ell_alg1: return CUSPARSE_SPMM_BLOCKED_ELL_ALG1;
  }
  return CUSPARSE_SPMM_ALG_DEFAULT;
}

inline char const* name_of(policy::cusparse_alg a) {
  switch (a) {
    case policy::cusparse_alg::default_alg: return "ALG_DEFAULT";
    case policy::cusparse_alg::csr_alg1: return "CSR_ALG1";
    case policy::cusparse_alg::csr_alg2: return "CSR_ALG2";
    case policy::cusparse_alg::csr_alg3: return "CSR_ALG3";
    case policy::cusparse_alg::coo_alg1: return "COO_ALG1";
    case policy::cusparse_alg::coo_alg2: return "COO_ALG2";
    case policy::cusparse_alg::coo_alg3: return "COO_ALG3";
    case policy::cusparse_alg::coo_alg4: return "COO_ALG4";
    case policy::cusparse_alg::blocked_ell_alg1: return "BLOCKED_ELL_ALG1";
  }
  return "?";
}

template <class T>
constexpr cudaDataType cuda_type() {
  if constexpr (std::is_same_v<T, float>) return CUDA_R_32F;
  else if constexpr (std::is_same_v<T, double>) return CUDA_R_64F;
  else if constexpr (std::is_same_v<T, __half>) return CUDA_R_16F;
  else static_assert(::sdnn::detail::dependent_false<T>, "cusparse: float, double or __half");
}
template <class Index>
constexpr cusparseIndexType_t index_type() {
  return sizeof(Index) == 4 ? CUSPARSE_INDEX_32I : CUSPARSE_INDEX_64I;
}

template <class T, class Index>
class cusparse_spmm_plan {
  using compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

 public:
  // Plans C = A * B for A in CSR; b and c give the shapes and the buffers of the first run.
  cusparse_spmm_plan(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, policy::cusparse_alg alg,
                     cuda_exec exec, bool column_major = false)
      : alg_(alg), column_major_(column_major), m_(a.rows), k_(a.cols), nnz_(a.nnz) {
    check_shapes(b, c);
    SDNN_CUSPARSE_CHECK(cusparseCreate(&h_));
    if (!trivial(b, c))
      SDNN_CUSPARSE_CHECK(cusparseCreateConstCsr(&a_, a.rows, a.cols, a.nnz, a.row_ptr, a.col_idx, a.values,
                                                 index_type<Index>(), index_type<Index>(), CUSPARSE_INDEX_BASE_ZERO,
                                                 cuda_type<T>()));
    finish(b, c, exec);
  }
  // Plans C = A * B for A in canonical COO.
  cusparse_spmm_plan(coo_view<T, Index> a, dense_view<T const> b, dense_view<T> c, policy::cusparse_alg alg,
                     cuda_exec exec, bool column_major = false)
      : alg_(alg), column_major_(column_major), m_(a.rows), k_(a.cols), nnz_(a.nnz) {
    check_shapes(b, c);
    SDNN_CUSPARSE_CHECK(cusparseCreate(&h_));
    if (!trivial(b, c))
      SDNN_CUSPARSE_CHECK(cusparseCreateConstCoo(&a_, a.rows, a.cols, a.nnz, a.row_idx, a.col_idx, a.values,
                                                 index_type<Index>(), CUSPARSE_INDEX_BASE_ZERO, cuda_type<T>()));
    finish(b, c, exec);
  }
  ~cusparse_spmm_plan() {
    if (bd_) cusparseDestroyDnMat(bd_);
    if (cd_) cusparseDestroyDnMat(cd_);
    if (a_) cusparseDestroySpMat(a_);
    if (h_) cusparseDestroy(h_);
  }
  cusparse_spmm_plan(cusparse_spmm_plan const&) = delete;
  cusparse_spmm_plan& operator=(cusparse_spmm_plan const&) = delete;

  std::size_t buffer_bytes() const noexcept { return buf_.size(); }

  // C = epi(A * B) on exec.stream; b and c must have the planned shapes and leading
  // dimensions (the dense descriptors are built once and only their pointers change).
  template <class Acc>
  void run(dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi, cuda_exec exec) {
    check_shapes(b, c);
    SDNN_EXPECTS(b.ld == ldb_ && c.ld == ldc_, "cusparse_spmm: the plan was built for leading dimensions B ", ldb_,
                 ", C ", ldc_, "; run() got B ", b.ld, ", C ", c.ld);
    if (c.rows == 0 || c.cols == 0) return;
    if (trivial(b, c)) {  // nothing to multiply: C = epi(0)
      SDNN_CUDA_CHECK(cudaMemset2DAsync(c.data, sizeof(T) * c.ld, 0, sizeof(T) * c.cols, c.rows, exec.stream));
      apply_epilogue(c, epi, exec.stream);
      return;
    }
    SDNN_CUSPARSE_CHECK(cusparseSetStream(h_, exec.stream));
    SDNN_CUSPARSE_CHECK(cusparseDnMatSetValues(bd_, const_cast<T*>(b.data)));
    SDNN_CUSPARSE_CHECK(cusparseDnMatSetValues(cd_, c.data));
    compute_t const alpha = 1, beta = 0;
    SDNN_CUSPARSE_CHECK(cusparseSpMM(h_, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha,
                                     a_, bd_, &beta, cd_, cuda_type<compute_t>(), to_cusparse(alg_), buf_.data()));
    if (!column_major_) apply_epilogue(c, epi, exec.stream);
  }

 private:
  void check_shapes(dense_view<T const> b, dense_view<T> c) const {
    SDNN_EXPECTS(b.rows == k_ && c.rows == m_ && c.cols == b.cols, "cusparse_spmm: A is ", m_, " x ", k_, ", B ",
                 b.rows, " x ", b.cols, ", C ", c.rows, " x ", c.cols);
  }
  bool trivial(dense_view<T const> b, dense_view<T> c) const {
    return nnz_ == 0 || c.rows == 0 || c.cols == 0 || b.rows == 0;
  }
  void finish(dense_view<T const> b, dense_view<T> c, cuda_exec exec) {
    ldb_ = b.ld, ldc_ = c.ld;
    if (trivial(b, c)) return;
    std::int64_t const ldb = column_major_ ? b.rows : b.ld, ldc = column_major_ ? c.rows : c.ld;
    auto const order = column_major_ ? CUSPARSE_ORDER_COL : CUSPARSE_ORDER_ROW;
    SDNN_CUSPARSE_CHECK(cusparseCreateDnMat(&bd_, b.rows, b.cols, ldb, const_cast<T*>(b.data), cuda_type<T>(), order));
    SDNN_CUSPARSE_CHECK(cusparseCreateDnMat(&cd_, c.rows, c.cols, ldc, c.data, cuda_type<T>(), order));
    SDNN_CUSPARSE_CHECK(cusparseSetStream(h_, exec.stream));
    compute_t const alpha = 1, beta = 0;
    std::size_t bytes = 0;
    SDNN_CUSPARSE_CHECK(cusparseSpMM_bufferSize(h_, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a_, bd_, &beta, cd_,
                                                cuda_type<compute_t>(), to_cusparse(alg_), &bytes));
    buf_ = buffer<unsigned char, device_space>(bytes > 0 ? bytes : 1, exec);
    if (alg_ == policy::cusparse_alg::csr_alg1 || alg_ == policy::cusparse_alg::csr_alg3)
      SDNN_CUSPARSE_CHECK(cusparseSpMM_preprocess(h_, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                  CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a_, bd_, &beta, cd_,
                                                  cuda_type<compute_t>(), to_cusparse(alg_), buf_.data()));
  }

  policy::cusparse_alg alg_;
  bool column_major_;
  std::int64_t m_, k_, nnz_;
  std::int64_t ldb_ = 0, ldc_ = 0;
  cusparseHandle_t h_ = nullptr;
  cusparseConstSpMatDescr_t a_ = nullptr;
  cusparseDnMatDescr_t bd_ = nullptr, cd_ = nullptr;
  buffer<unsigned char, device_space> buf_;
};

}  // namespace sdnn::vendor
