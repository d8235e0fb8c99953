// sdnn/vendor/cusparse_challenge.cuh - the cuSPARSE baseline for sparse_linear layers, and a
// device CSR transpose (cusparseCsr2cscEx2) used to hold weights in CSC.
//
// The product c = a * B (a: rows x k dense row-major, B: k x n sparse, given as bt = B^T,
// n x k CSR) is computed as c^T = bt * a^T with cusparseSpMM: a row-major rows x k matrix is
// the column-major k x rows matrix a^T, so no data moves. The epilogue (bias, ReLU, cap) and
// the live-row flags are applied by a second kernel, as in the seed paper's cuSPARSE code.
//   cusparse_workspace::reuse       workspace sized once and kept (variant "reuse buffer")
//   cusparse_workspace::per_call    workspace sized and allocated for every product ("buffer per call")
#pragma once

#include <cusparse.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <type_traits>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/kernels/epilogue.cuh"  // apply_epilogue_rows_kernel
#include "sdnn/vendor/cusparse.cuh"  // SDNN_CUSPARSE_CHECK

namespace sdnn::vendor {
namespace detail {

template <class T>
constexpr cudaDataType_t cuda_type() {
  if constexpr (std::is_same_v<T, float>) return CUDA_R_32F;
  else if constexpr (std::is_same_v<T, double>) return CUDA_R_64F;
  else if constexpr (std::is_same_v<T, __half>) return CUDA_R_16F;
  else static_assert(sdnn::detail::dependent_false<T>, "cuSPARSE baseline: value type must be float, double or __half");
}
template <class Index>
constexpr cusparseIndexType_t index_type() {
  if constexpr (std::is_same_v<Index, std::int32_t>) return CUSPARSE_INDEX_32I;
  else return CUSPARSE_INDEX_64I;
}

// One cuSPARSE handle per host thread, created on first use (creation costs milliseconds).
inline cusparseHandle_t cusparse_handle() {
  struct holder {
    cusparseHandle_t h = nullptr;
    holder() { SDNN_CUSPARSE_CHECK(cusparseCreate(&h)); }
    ~holder() {
      if (h) cusparseDestroy(h);
    }
  };
  thread_local holder hold;
  return hold.h;
}

}  // namespace detail

// Device transpose of a device CSR (rows x cols) into a new device CSR (cols x rows), sorted.
template <class T>
csr_matrix<T, std::int32_t, device_space> transpose_csr(csr_view<T, std::int32_t> w, cuda_exec exec) {
  csr_matrix<T, std::int32_t, device_space> t(w.cols, w.rows, w.nnz, exec);
  if (w.nnz == 0 || w.rows == 0 || w.cols == 0) {
    SDNN_CUDA_CHECK(cudaMemsetAsync(t.row_ptr().data(), 0, (static_cast<std::size_t>(w.cols) + 1) * sizeof(std::int32_t),
                                    exec.stream));
    return t;
  }
  cusparseHandle_t h = detail::cusparse_handle();
  SDNN_CUSPARSE_CHECK(cusparseSetStream(h, exec.stream));
  std::size_t bytes = 0;
  SDNN_CUSPARSE_CHECK(cusparseCsr2cscEx2_bufferSize(
      h, w.rows, w.cols, w.nnz, w.values, w.row_ptr, w.col_idx, t.values().data(), t.row_ptr().data(),
      t.col_idx().data(), detail::cuda_type<T>(), CUSPARSE_ACTION_NUMERIC, CUSPARSE_INDEX_BASE_ZERO,
      CUSPARSE_CSR2CSC_ALG1, &bytes));
  buffer<unsigned char, device_space> work(bytes, exec);
  SDNN_CUSPARSE_CHECK(cusparseCsr2cscEx2(h, w.rows, w.cols, w.nnz, w.values, w.row_ptr, w.col_idx, t.values().data(),
                               t.row_ptr().data(), t.col_idx().data(), detail::cuda_type<T>(),
                               CUSPARSE_ACTION_NUMERIC, CUSPARSE_INDEX_BASE_ZERO, CUSPARSE_CSR2CSC_ALG1,
                               work.data()));
  return t;
}

enum class cusparse_workspace { reuse, per_call };

// c[0..rows) = epi(a[0..rows) * B) through cusparseSpMM, B given as bt (n x k CSR, device).
// flags (optional, device, [rows]) get 1 for rows with a nonzero output. `reuse` keeps a
// workspace across calls (grown when a larger one is needed); `per_call` sizes, allocates
// and frees one on every call (stream-ordered, no synchronisation either way).
template <class T, class Index = std::int32_t>
class cusparse_spmm {
 public:
  explicit cusparse_spmm(cusparse_workspace mode = cusparse_workspace::reuse) : mode_(mode) {}

  template <class Acc>
  void run(dense_view<T const> a, csr_view<T, Index> bt, dense_view<T> c, std::int64_t rows, basic_epilogue<Acc> epi,
           int* flags, cuda_exec exec) {
    SDNN_EXPECTS(a.cols == bt.cols && c.cols == bt.rows, "cusparse_spmm: shapes a ", a.rows, " x ", a.cols, ", bt ",
                 bt.rows, " x ", bt.cols, ", c ", c.rows, " x ", c.cols, " do not match");
    SDNN_EXPECTS(rows <= a.rows && rows <= c.rows, "cusparse_spmm: ", rows, " rows asked, a has ", a.rows,
                 ", c has ", c.rows);
    if (rows == 0 || bt.rows == 0) return;
    if (bt.cols == 0 || bt.nnz == 0) {
      SDNN_CUDA_CHECK(cudaMemset2DAsync(c.data, c.ld * sizeof(T), 0, c.cols * sizeof(T), rows, exec.stream));
    } else {
      cusparseHandle_t h = detail::cusparse_handle();
      SDNN_CUSPARSE_CHECK(cusparseSetStream(h, exec.stream));
      cusparseSpMatDescr_t sa;
      cusparseDnMatDescr_t db, dc;
      SDNN_CUSPARSE_CHECK(cusparseCreateCsr(&sa, bt.rows, bt.cols, bt.nnz, const_cast<Index*>(bt.row_ptr),
                                  const_cast<Index*>(bt.col_idx), const_cast<T*>(bt.values),
                                  detail::index_type<Index>(), detail::index_type<Index>(),
                                  CUSPARSE_INDEX_BASE_ZERO, detail::cuda_type<T>()));
      SDNN_CUSPARSE_CHECK(cusparseCreateDnMat(&db, a.cols, rows, a.ld, const_cast<T*>(a.data), detail::cuda_type<T>(),
                                    CUSPARSE_ORDER_COL));
      SDNN_CUSPARSE_CHECK(cusparseCreateDnMat(&dc, c.cols, rows, c.ld, c.data, detail::cuda_type<T>(), CUSPARSE_ORDER_COL));
      using compute_t = accumulator_t<T>;
      compute_t const alpha = 1, beta = 0;
      cudaDataType_t const ct = detail::cuda_type<compute_t>();
      std::size_t bytes = 0;
      SDNN_CUSPARSE_CHECK(cusparseSpMM_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                        &alpha, sa, db, &beta, dc, ct, CUSPARSE_SPMM_ALG_DEFAULT, &bytes));
      buffer<unsigned char, device_space> local;
      unsigned char* work = nullptr;
      if (mode_ == cusparse_workspace::reuse) {
        if (bytes > work_.size()) work_ = buffer<unsigned char, device_space>(bytes, exec);
        work = work_.data();
      } else {
        local = buffer<unsigned char, device_space>(bytes, exec);
        work = local.data();
      }
      SDNN_CUSPARSE_CHECK(cusparseSpMM(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, sa,
                             db, &beta, dc, ct, CUSPARSE_SPMM_ALG_DEFAULT, work));
      cusparseDestroySpMat(sa);
      cusparseDestroyDnMat(db);
      cusparseDestroyDnMat(dc);
    }
    unsigned const blocks = static_cast<unsigned>(std::min<std::int64_t>(rows, 1 << 20));
    detail::apply_epilogue_rows_kernel<<<blocks, 256, 0, exec.stream>>>(
        c, epi, static_cast<Index const*>(nullptr), static_cast<Index const*>(nullptr), static_cast<Index>(rows), flags);
    SDNN_CUDA_CHECK_LAUNCH();
  }

 private:
  cusparse_workspace mode_;
  buffer<unsigned char, device_space> work_;
};

}  // namespace sdnn::vendor
