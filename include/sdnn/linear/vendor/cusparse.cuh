// sdnn/linear/vendor/cusparse.cuh - the cuSPARSE SpMM baseline: one wrapper (cusparse_spmm_plan)
// behind the spmm interface, ops::spmm_dense_sparse and the cuSPARSE sparse_linear policies,
// for sparse x dense (A in CSR or COO) and dense x sparse (W given as W^T in CSR) products.
// T = float (CUDA_R_32F), double (CUDA_R_64F) or __half (CUDA_R_16F data, CUDA_R_32F compute).
// The epilogue (and the live-row flags of the dense x sparse form) is a second pass,
// kernels::apply_epilogue. The plan, its two forms and its buffer: docs/linear.md#vendor-baselines.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/coo.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/linear/policy/cusparse_alg.hpp"
#include "sdnn/linear/kernel/epilogue.cuh"

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
// For destructors, which cannot throw: a failed release is reported, never thrown.
inline void cusparse_check_noexcept(cusparseStatus_t st, char const* what) noexcept {
  if (st != CUSPARSE_STATUS_SUCCESS) ::sdnn::detail::report_release("cuSPARSE", what, cusparse_status_name(st));
}
}  // namespace detail
}  // namespace sdnn::vendor

#define SDNN_CUSPARSE_CHECK(call) ::sdnn::vendor::detail::cusparse_check((call), #call, __FILE__, __LINE__)

namespace sdnn::vendor {
// The calling thread's cuSPARSE handle, created on first use (creation costs milliseconds).
// Every call sets the stream it runs on before using it.
inline cusparseHandle_t cusparse_handle() {
  struct holder {
    cusparseHandle_t h = nullptr;
    holder() { SDNN_CUSPARSE_CHECK(cusparseCreate(&h)); }
    ~holder() {
      if (h) detail::cusparse_check_noexcept(cusparseDestroy(h), "cusparseDestroy");
    }
    holder(holder const&) = delete;
    holder& operator=(holder const&) = delete;
  };
  thread_local holder hold;
  return hold.h;
}

// One cuSPARSE matrix descriptor (sparse or dense, const or not), owned: move-only, destroyed
// with its owner (a failed destroy is reported, never thrown). out() is the slot a
// cusparseCreate* call fills; get() is what the other calls take.
template <class Descr>
class cusparse_descr {
  static constexpr bool sparse = std::is_convertible_v<Descr, cusparseConstSpMatDescr_t>;
  static_assert(sparse || std::is_convertible_v<Descr, cusparseConstDnMatDescr_t>,
                "cusparse_descr: a sparse or dense matrix descriptor");

 public:
  cusparse_descr() = default;
  cusparse_descr(cusparse_descr&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  cusparse_descr& operator=(cusparse_descr&& o) noexcept {
    if (this != &o) {
      reset();
      d_ = std::exchange(o.d_, nullptr);
    }
    return *this;
  }
  cusparse_descr(cusparse_descr const&) = delete;
  cusparse_descr& operator=(cusparse_descr const&) = delete;
  ~cusparse_descr() { reset(); }

  Descr get() const noexcept { return d_; }
  explicit operator bool() const noexcept { return d_ != nullptr; }
  // Destroys the descriptor held, if any, and returns the empty slot for a cusparseCreate* call.
  Descr* out() noexcept {
    reset();
    return &d_;
  }
  void reset() noexcept {
    if (!d_) return;
    if constexpr (sparse) detail::cusparse_check_noexcept(cusparseDestroySpMat(d_), "cusparseDestroySpMat");
    else detail::cusparse_check_noexcept(cusparseDestroyDnMat(d_), "cusparseDestroyDnMat");
    d_ = nullptr;
  }

 private:
  Descr d_ = nullptr;
};
using cusparse_spmat = cusparse_descr<cusparseSpMatDescr_t>;
using cusparse_const_spmat = cusparse_descr<cusparseConstSpMatDescr_t>;
using cusparse_dnmat = cusparse_descr<cusparseDnMatDescr_t>;
}  // namespace sdnn::vendor

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

// The cuSPARSE data and index type of T and Index.
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

// How a plan holds its external cuSPARSE workspace.
//   reuse     sized when the dense shapes are first seen (plan time where they are given),
//             kept, and grown when a later shape needs more ("reuse buffer")
//   per_call  sized, allocated and freed on every product (stream-ordered, no
//             synchronisation; the "buffer per call" baseline)
enum class cusparse_workspace { reuse, per_call };

// Constructor tag of the dense x sparse form (see cusparse_spmm_plan).
struct dense_times_sparse_t {
  explicit dense_times_sparse_t() = default;
};
inline constexpr dense_times_sparse_t dense_times_sparse{};

// The one cuSPARSE SpMM wrapper. It holds the descriptors and the external buffer for one
// sparse operand (cusparse_workspace says how the buffer is kept). Two forms of the same product:
//
// sparse x dense   C[M x N] = epi(A[M x K] * B[K x N]), A in CSR or COO (32- or 64-bit
//                  indices); B and C row-major with the shapes and leading dimensions
//                  given at plan time (the dense descriptors are built once and only their
//                  pointers change per run).
// dense x sparse   C[rows x N] = epi(Y[rows x K] * W[K x N]), Y and C row-major, W given as
//                  W^T (N x K CSR = W in CSC). Computed as C^T = W^T * Y^T: a row-major
//                  rows x K matrix is the column-major K x rows matrix Y^T, so no data moves.
//                  The number of rows and the leading dimensions may change from run to run
//                  (the dense descriptors and the workspace follow). The epilogue pass can
//                  also set flags[r] = 1 for each row r with a nonzero output.
//
// cuSPARSE has no fused epilogue: a non-identity epilogue (or a flags request) runs as a
// second pass (kernels::apply_epilogue). Calls go through the calling thread's cuSPARSE
// handle (cusparse_handle(); creating one costs milliseconds, and a network holds many plans).
// Not every algorithm supports every layout/type: the plan throws sdnn::cusparse_error with
// the cuSPARSE status (e.g. CUSPARSE_STATUS_NOT_SUPPORTED) and callers may skip it.
template <class T, class Index>
class cusparse_spmm_plan {
  using compute_t = accumulator_t<T>;

 public:
  // Plans C = A * B for A in CSR; b and c give the shapes and the buffers of the first run.
  // column_major (this and the COO constructor) describes B and C as column-major (ld = K
  // resp. M): a different layout of the same product, offered only so benchmarks can time the
  // algorithms that need it; such a plan cannot serve the row-major ops interface (and
  // applies no epilogue).
  cusparse_spmm_plan(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, policy::cusparse_alg alg,
                     cuda_exec exec, bool column_major = false,
                     cusparse_workspace workspace = cusparse_workspace::reuse)
      : alg_(alg), workspace_(workspace), column_major_(column_major), m_(a.rows), k_(a.cols), nnz_(a.nnz) {
    check_shapes(b, c);
    if (!trivial(b, c)) describe(a);
    plan_sparse_dense(b, c, exec);
  }
  // Plans C = A * B for A in canonical COO.
  cusparse_spmm_plan(coo_view<T, Index> a, dense_view<T const> b, dense_view<T> c, policy::cusparse_alg alg,
                     cuda_exec exec, bool column_major = false,
                     cusparse_workspace workspace = cusparse_workspace::reuse)
      : alg_(alg), workspace_(workspace), column_major_(column_major), m_(a.rows), k_(a.cols), nnz_(a.nnz) {
    check_shapes(b, c);
    if (!trivial(b, c))
      SDNN_CUSPARSE_CHECK(cusparseCreateConstCoo(d_.a.out(), a.rows, a.cols, a.nnz, a.row_idx, a.col_idx, a.values,
                                                 index_type<Index>(), CUSPARSE_INDEX_BASE_ZERO, cuda_type<T>()));
    plan_sparse_dense(b, c, exec);
  }
  // Plans C = Y * W with wt = W^T (N x K CSR, device; must outlive the plan; a device CSR is
  // transposed by sdnn::transpose, formats/convert.cuh). The dense descriptors and the
  // workspace are made at the first run (or by prepare()).
  cusparse_spmm_plan(dense_times_sparse_t, csr_view<T, Index> wt,
                     cusparse_workspace workspace = cusparse_workspace::reuse,
                     policy::cusparse_alg alg = policy::cusparse_alg::default_alg)
      : alg_(alg), workspace_(workspace), dense_sparse_(true), m_(wt.rows), k_(wt.cols), nnz_(wt.nnz) {
    if (m_ > 0 && k_ > 0 && nnz_ > 0) describe(wt);
  }
  // The same, prepared at plan time for every row of y and c.
  cusparse_spmm_plan(dense_times_sparse_t tag, csr_view<T, Index> wt, dense_view<T const> y, dense_view<T> c,
                     policy::cusparse_alg alg, cuda_exec exec,
                     cusparse_workspace workspace = cusparse_workspace::reuse)
      : cusparse_spmm_plan(tag, wt, workspace, alg) {
    prepare(y, c, y.rows, exec);
  }
  cusparse_spmm_plan(cusparse_spmm_plan const&) = delete;
  cusparse_spmm_plan& operator=(cusparse_spmm_plan const&) = delete;

  // The kept workspace (0 with cusparse_workspace::per_call).
  std::size_t buffer_bytes() const noexcept { return buf_.size(); }

  // sparse x dense: C = epi(A * B) on exec.stream; b and c must have the planned shapes and
  // leading dimensions. dense x sparse: C = epi(Y * W) over every row of y (b) and c.
  template <class Acc>
  void run(dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi, cuda_exec exec) {
    if (dense_sparse_) return run_rows(b, c, b.rows, epi, static_cast<int*>(nullptr), exec);
    check_shapes(b, c);
    SDNN_EXPECTS(b.ld == ldb_ && c.ld == ldc_, "cusparse_spmm: the plan was built for leading dimensions B ", ldb_,
                 ", C ", ldc_, "; run() got B ", b.ld, ", C ", c.ld);
    if (c.rows == 0 || c.cols == 0) return;
    if (trivial(b, c)) {  // nothing to multiply: C = epi(0)
      SDNN_CUDA_CHECK(cudaMemset2DAsync(c.data, sizeof(T) * c.ld, 0, sizeof(T) * c.cols, c.rows, exec.stream));
      kernels::apply_epilogue(c, epi, exec);
      return;
    }
    multiply(b.data, c.data, exec);
    if (!column_major_) kernels::apply_epilogue(c, epi, exec);
  }

  // dense x sparse: c[0..rows) = epi(y[0..rows) * W) on exec.stream; flags (device, [rows],
  // optional) get 1 for the rows with a nonzero output. Never synchronises.
  template <class Acc>
  void run_rows(dense_view<T const> y, dense_view<T> c, std::int64_t rows, basic_epilogue<Acc> const& epi, int* flags,
                cuda_exec exec) {
    SDNN_EXPECTS(dense_sparse_, "cusparse_spmm: run_rows() needs a dense x sparse plan (dense_times_sparse)");
    check_rows(y, c, rows);
    if (rows == 0 || m_ == 0) return;
    if (k_ == 0 || nnz_ == 0) {
      SDNN_CUDA_CHECK(cudaMemset2DAsync(c.data, c.ld * sizeof(T), 0, c.cols * sizeof(T), rows, exec.stream));
    } else {
      if (!d_.b || rows != rows_ || y.ld != ldb_ || c.ld != ldc_) prepare(y, c, rows, exec);
      multiply(y.data, c.data, exec);
    }
    if (flags != nullptr || !kernels::is_identity(epi)) kernels::apply_epilogue(c, rows, epi, flags, exec);
  }

  // dense x sparse: makes the dense descriptors (and, with cusparse_workspace::reuse, the
  // workspace) for `rows` rows of y and c, so that runs of that shape allocate nothing.
  void prepare(dense_view<T const> y, dense_view<T> c, std::int64_t rows, cuda_exec exec) {
    SDNN_EXPECTS(dense_sparse_, "cusparse_spmm: prepare() needs a dense x sparse plan (dense_times_sparse)");
    check_rows(y, c, rows);
    if (rows == 0 || m_ == 0 || k_ == 0 || nnz_ == 0) return;
    rows_ = rows;
    make_dense(k_, rows, y.ld, y.data, m_, c.ld, c.data, CUSPARSE_ORDER_COL);
    size_workspace(exec);
  }

 private:
  void check_shapes(dense_view<T const> b, dense_view<T> c) const {
    SDNN_EXPECTS_DIMS(b.rows == k_ && c.rows == m_ && c.cols == b.cols, "cusparse_spmm: A is ", m_, " x ", k_, ", B ",
                      b.rows, " x ", b.cols, ", C ", c.rows, " x ", c.cols);
  }
  void check_rows(dense_view<T const> y, dense_view<T> c, std::int64_t rows) const {
    SDNN_EXPECTS_DIMS(y.cols == k_ && c.cols == m_, "cusparse_spmm: W is ", k_, " x ", m_, ", Y ", y.rows, " x ",
                      y.cols, ", C ", c.rows, " x ", c.cols);
    SDNN_EXPECTS(rows >= 0 && rows <= y.rows && rows <= c.rows, "cusparse_spmm: ", rows, " rows asked, Y has ",
                 y.rows, ", C has ", c.rows);
  }
  bool trivial(dense_view<T const> b, dense_view<T> c) const {
    return nnz_ == 0 || c.rows == 0 || c.cols == 0 || b.rows == 0;
  }
  static bool preprocesses(policy::cusparse_alg a) {
    return a == policy::cusparse_alg::csr_alg1 || a == policy::cusparse_alg::csr_alg3;
  }

  void describe(csr_view<T, Index> a) {
    SDNN_CUSPARSE_CHECK(cusparseCreateConstCsr(d_.a.out(), a.rows, a.cols, a.nnz, a.row_ptr, a.col_idx, a.values,
                                               index_type<Index>(), index_type<Index>(), CUSPARSE_INDEX_BASE_ZERO,
                                               cuda_type<T>()));
  }
  void plan_sparse_dense(dense_view<T const> b, dense_view<T> c, cuda_exec exec) {
    ldb_ = b.ld, ldc_ = c.ld;
    if (trivial(b, c)) return;
    if (column_major_)
      make_dense(b.rows, b.cols, b.rows, b.data, c.rows, c.rows, c.data, CUSPARSE_ORDER_COL);
    else
      make_dense(b.rows, b.cols, b.ld, b.data, c.rows, c.ld, c.data, CUSPARSE_ORDER_ROW);
    size_workspace(exec);
  }
  // B (b_rows x b_cols) and C (c_rows x b_cols) in the given order; ldb_/ldc_ keep the
  // leading dimensions the caller's views had.
  void make_dense(std::int64_t b_rows, std::int64_t b_cols, std::int64_t ldb, T const* b, std::int64_t c_rows,
                  std::int64_t ldc, T* c, cusparseOrder_t order) {
    d_.release_dense();
    if (dense_sparse_) ldb_ = ldb, ldc_ = ldc;
    SDNN_CUSPARSE_CHECK(
        cusparseCreateDnMat(d_.b.out(), b_rows, b_cols, ldb, const_cast<T*>(b), cuda_type<T>(), order));
    SDNN_CUSPARSE_CHECK(cusparseCreateDnMat(d_.c.out(), c_rows, b_cols, ldc, c, cuda_type<T>(), order));
  }
  std::size_t workspace_bytes(cusparseHandle_t h) const {
    compute_t const alpha = 1, beta = 0;
    std::size_t bytes = 0;
    SDNN_CUSPARSE_CHECK(cusparseSpMM_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, d_.a.get(), d_.b.get(), &beta,
                                                d_.c.get(), cuda_type<compute_t>(), to_cusparse(alg_), &bytes));
    return bytes > 0 ? bytes : 1;
  }
  void preprocess(cusparseHandle_t h, void* work) const {
    if (!preprocesses(alg_)) return;
    compute_t const alpha = 1, beta = 0;
    SDNN_CUSPARSE_CHECK(cusparseSpMM_preprocess(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                &alpha, d_.a.get(), d_.b.get(), &beta, d_.c.get(),
                                                cuda_type<compute_t>(), to_cusparse(alg_), work));
  }
  // With cusparse_workspace::reuse: grows the kept workspace to this shape's need and runs
  // the algorithm's preprocessing (CSR_ALG1/3) into it.
  void size_workspace(cuda_exec exec) {
    if (workspace_ != cusparse_workspace::reuse) return;
    cusparseHandle_t const h = cusparse_handle();
    SDNN_CUSPARSE_CHECK(cusparseSetStream(h, exec.stream));
    std::size_t const bytes = workspace_bytes(h);
    // the buffer it replaces is released after every stream this plan ran on
    if (bytes > buf_.size()) buf_ = buffer<unsigned char, device_space>(bytes, runs_.owned(exec));
    runs_.note(exec);
    preprocess(h, buf_.data());
  }
  void multiply(T const* b, T* c, cuda_exec exec) {
    runs_.note(exec);
    cusparseHandle_t const h = cusparse_handle();
    SDNN_CUSPARSE_CHECK(cusparseSetStream(h, exec.stream));
    SDNN_CUSPARSE_CHECK(cusparseDnMatSetValues(d_.b.get(), const_cast<T*>(b)));
    SDNN_CUSPARSE_CHECK(cusparseDnMatSetValues(d_.c.get(), c));
    buffer<unsigned char, device_space> local;  // used and released on exec.stream only
    void* work = buf_.data();
    if (workspace_ == cusparse_workspace::per_call) {
      local = buffer<unsigned char, device_space>(workspace_bytes(h), exec);
      work = local.data();
      preprocess(h, work);
    }
    compute_t const alpha = 1, beta = 0;
    SDNN_CUSPARSE_CHECK(cusparseSpMM(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha,
                                     d_.a.get(), d_.b.get(), &beta, d_.c.get(), cuda_type<compute_t>(),
                                     to_cusparse(alg_), work));
  }

  // First: buf_ is allocated through runs_.owned(); multiply() notes every stream it runs on.
  ::sdnn::detail::run_streams runs_;
  policy::cusparse_alg alg_;
  cusparse_workspace workspace_;
  bool column_major_ = false, dense_sparse_ = false;
  std::int64_t m_, k_, nnz_;  // the sparse operand (A, or W^T in the dense x sparse form)
  std::int64_t ldb_ = 0, ldc_ = 0, rows_ = 0;
  // The cuSPARSE descriptors, released by this member's destructor, so a constructor that
  // throws half way (e.g. CUSPARSE_STATUS_NOT_SUPPORTED) leaks nothing.
  struct descriptors {
    cusparse_const_spmat a;
    cusparse_dnmat b, c;
    void release_dense() noexcept {
      b.reset();
      c.reset();
    }
  } d_;
  buffer<unsigned char, device_space> buf_;
};
}  // namespace sdnn::vendor
