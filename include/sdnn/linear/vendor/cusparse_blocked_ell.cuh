// sdnn/linear/vendor/cusparse_blocked_ell.cuh - the cuSPARSE Blocked-ELL SpMM baseline for the
// tiled-dense format (CUSPARSE_SPMM_BLOCKED_ELL_ALG1):
//
//   C[M x N] = epi(A[M x K] * B[K x N]), A tiled-dense with square bs x bs tiles, B and C
//   row-major (CUSPARSE_ORDER_ROW) and packed.
//
// float runs on TF32 tensor cores, so float Blocked-ELL is not a strict-float baseline, and
// the plan SYNCHRONISES once at plan time (see the class). The Blocked-ELL layout:
// docs/linear.md#blocked-ell.
#pragma once

#include <cub/device/device_reduce.cuh>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cusparse.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/formats/tiled_dense.hpp"
#include "sdnn/linear/kernel/blocked_ell.cuh"  // tiled_to_blocked_ell_kernel
#include "sdnn/linear/kernel/epilogue.cuh"
#include "sdnn/linear/vendor/cusparse.cuh"  // SDNN_CUSPARSE_CHECK, cuda_type, cusparse_handle, cusparse_descr

namespace sdnn::vendor {

namespace detail {

}  // namespace detail

// T = float (CUDA_R_32F data and compute) or __half (CUDA_R_16F data, CUDA_R_32F compute).
// The cuSPARSE SpMM data-type table lists both for Blocked-ELL (float from compute capability
// 8.0, half from 7.0). Measured (CUDA 13.0, H200, tests/cuda/test_vendor_cusparse.cu): float
// runs on TF32 tensor cores - A and B are rounded to a 10-bit mantissa - so float Blocked-ELL
// is NOT a strict-float baseline (results are exact only where the inputs are exact in TF32,
// e.g. small integers); bench_spmm labels its row accordingly.
// Constraints (checked at plan time, sdnn::error naming the constraint): square tiles; M and K
// multiples of the tile size (Blocked-ELL has no partial blocks); tile columns fit 32-bit
// indices; B and C packed (ld == cols: in the same measurement ALG1 writes into the padding
// columns of a padded C). What cuSPARSE itself rejects (CUSPARSE_STATUS_NOT_SUPPORTED) comes
// back as sdnn::cusparse_error naming the type, block size and shapes.
// The plan SYNCHRONISES exec.stream once at plan time (see convert()); run() never
// synchronises. Nothing to multiply (M, K or N zero, or no occupied tile) skips cuSPARSE and
// writes C = epi(0). The epilogue runs as a separate pass (kernels::apply_epilogue), as in the
// other vendor baselines. Calls go through the calling thread's cuSPARSE handle
// (cusparse_handle()).
template <class T>
class cusparse_blocked_ell_plan {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, __half>,
                "cusparse_blocked_ell_plan: value type must be float or __half");

 public:
  // Block column index of an empty slot. Empty slots also get zero values: the API documents
  // -1 as "empty block", but github.com/NVIDIA/CUDALibrarySamples/issues/80 reports a -1 block
  // being read as block column 0; with zeros behind it the product is the same either way
  // (for finite B).
  static constexpr std::int32_t padding_index = -1;

  // Plans C = A * B; b and c give the shapes (and leading dimensions) of every run.
  cusparse_blocked_ell_plan(tiled_dense_view<T const> a, dense_view<T const> b, dense_view<T> c, cuda_exec exec)
      : m_(a.rows), k_(a.cols), n_(b.cols), ldb_(b.ld), ldc_(c.ld), bs_(a.tile_rows) {
    SDNN_EXPECTS(a.tile_rows > 0 && a.tile_rows == a.tile_cols, "cusparse Blocked-ELL: tiles must be square (the Blocked-ELL block is ",
                 "ellBlockSize x ellBlockSize), got ", a.tile_rows, " x ", a.tile_cols, " tiles");
    SDNN_EXPECTS(a.rows % bs_ == 0 && a.cols % bs_ == 0, "cusparse Blocked-ELL: A's rows and columns must be ",
                 "multiples of the tile size ", bs_, " (Blocked-ELL has no partial blocks), A is ", a.rows, " x ",
                 a.cols);
    SDNN_EXPECTS(a.grid_cols <= std::numeric_limits<std::int32_t>::max(),
                 "cusparse Blocked-ELL: ", a.grid_cols, " tile columns do not fit 32-bit block column indices");
    check_shapes(b, c);
    if (m_ > 0 && k_ > 0 && a.occupied_tiles > 0) convert(a, exec);
    if (trivial()) return;
    auto& o = obj_;
    SDNN_CUSPARSE_CHECK(cusparseCreateConstBlockedEll(o.a.out(), m_, k_, bs_, ell_cols_, col_ind_.data(),
                                                      values_.data(), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                                      cuda_type<T>()));
    SDNN_CUSPARSE_CHECK(
        cusparseCreateDnMat(o.b.out(), k_, n_, ldb_, const_cast<T*>(b.data), cuda_type<T>(), CUSPARSE_ORDER_ROW));
    SDNN_CUSPARSE_CHECK(cusparseCreateDnMat(o.c.out(), m_, n_, ldc_, c.data, cuda_type<T>(), CUSPARSE_ORDER_ROW));
    cusparseHandle_t const h = cusparse_handle();
    SDNN_CUSPARSE_CHECK(cusparseSetStream(h, exec.stream));
    float const alpha = 1, beta = 0;
    std::size_t bytes = 0;
    check_spmm_status(cusparseSpMM_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                              &alpha, o.a.get(), o.b.get(), &beta, o.c.get(), CUDA_R_32F,
                                              CUSPARSE_SPMM_BLOCKED_ELL_ALG1, &bytes),
                      "cusparseSpMM_bufferSize", __LINE__);
    buf_ = buffer<unsigned char, device_space>(bytes > 0 ? bytes : 1, runs_.owned(exec));
  }
  cusparse_blocked_ell_plan(cusparse_blocked_ell_plan const&) = delete;
  cusparse_blocked_ell_plan& operator=(cusparse_blocked_ell_plan const&) = delete;

  std::int64_t block_size() const noexcept { return bs_; }
  std::int64_t ell_cols() const noexcept { return ell_cols_; }  // 0: A has no occupied tile
  // The Blocked-ELL arrays (device): [m / bs][ell_cols / bs] block columns, [m][ell_cols] values.
  std::int32_t const* ell_col_ind() const noexcept { return col_ind_.data(); }
  T const* ell_values() const noexcept { return values_.data(); }
  std::size_t buffer_bytes() const noexcept { return buf_.size(); }

  // C = epi(A * B) on exec.stream; b and c must have the planned shapes, packed (which
  // also fixes their leading dimensions to the planned ones).
  template <class Acc>
  void run(dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi, cuda_exec exec) {
    check_shapes(b, c);
    SDNN_EXPECTS((b.data != nullptr || k_ * n_ == 0) && (c.data != nullptr || m_ * n_ == 0),
                 "cusparse Blocked-ELL: a non-empty B or C has a null data pointer");
    if (m_ == 0 || n_ == 0) return;
    if (trivial()) {  // nothing to multiply: C = epi(0)
      SDNN_CUDA_CHECK(cudaMemset2DAsync(c.data, sizeof(T) * c.ld, 0, sizeof(T) * c.cols, c.rows, exec.stream));
      kernels::apply_epilogue(c, epi, exec);
      return;
    }
    runs_.note(exec);
    auto& o = obj_;
    cusparseHandle_t const h = cusparse_handle();
    SDNN_CUSPARSE_CHECK(cusparseSetStream(h, exec.stream));
    SDNN_CUSPARSE_CHECK(cusparseDnMatSetValues(o.b.get(), const_cast<T*>(b.data)));
    SDNN_CUSPARSE_CHECK(cusparseDnMatSetValues(o.c.get(), c.data));
    float const alpha = 1, beta = 0;
    check_spmm_status(cusparseSpMM(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha,
                                   o.a.get(), o.b.get(), &beta, o.c.get(), CUDA_R_32F, CUSPARSE_SPMM_BLOCKED_ELL_ALG1,
                                   buf_.data()),
                      "cusparseSpMM", __LINE__);
    kernels::apply_epilogue(c, epi, exec);
  }

 private:
  void check_shapes(dense_view<T const> b, dense_view<T> c) const {
    SDNN_EXPECTS(b.rows == k_ && b.cols == n_ && c.rows == m_ && c.cols == n_, "cusparse Blocked-ELL: A is ", m_,
                 " x ", k_, " and the plan is for N = ", n_, ", got B ", b.rows, " x ", b.cols, ", C ", c.rows, " x ",
                 c.cols);
    SDNN_EXPECTS(b.ld == b.cols && c.ld == c.cols,
                 "cusparse Blocked-ELL: B and C must be packed (ld == cols; with a padded C the vendor kernel "
                 "writes into the padding), got ld(B) = ", b.ld, " for ", b.cols, " columns, ld(C) = ", c.ld, " for ",
                 c.cols);
  }
  // A cuSPARSE status of SpMM: NOT_SUPPORTED becomes a cusparse_error that names what was asked.
  void check_spmm_status(cusparseStatus_t st, char const* call, int line) const {
    if (st == CUSPARSE_STATUS_NOT_SUPPORTED)
      throw cusparse_error(call, static_cast<int>(st),
                           ::sdnn::detail::concat(::sdnn::vendor::detail::cusparse_status_name(st), " (",
                                                  cusparseGetErrorString(st), ") for Blocked-ELL with ",
                                                  std::is_same_v<T, float> ? "float" : "__half",
                                                  " values (float compute), block size ", bs_, ", row-major B and C, A ",
                                                  m_, " x ", k_, ", N = ", n_, ", ld(B) = ", ldb_, ", ld(C) = ", ldc_),
                           __FILE__, line);
    ::sdnn::vendor::detail::cusparse_check(st, call, __FILE__, line);
  }
  bool trivial() const noexcept { return m_ == 0 || k_ == 0 || n_ == 0 || ell_cols_ == 0; }

  // Sizes the Blocked-ELL arrays (one host round trip: ellCols is a reduction over A's tile
  // rows on the device and is needed on the host) and fills them on the device:
  //   ellBlockSize = bs (the tile size), ellCols = bs * (most occupied tiles in a tile row);
  //   ellColInd [M/bs][ellCols/bs], row-major: slot s of block row i holds the tile column of
  //     the s-th occupied tile of tile row i, and -1 (an empty block) past its last one;
  //   ellValue [M][ellCols], row-major: block row i, slot s is the bs x bs sub-matrix at rows
  //     i*bs.., columns s*bs.. (one tile row of values spans bs rows of ellValue).
  // That layout is the one NVIDIA's samples use (dense2sparse_blockedell: a 4 x 6 matrix with
  // bs 2, ellColInd {1, -1, 0, 2}, ellValue {1 2 0 0 | 3 4 0 0 | 5 6 7 8 | 9 10 11 12}).
  void convert(tiled_dense_view<T const> a, cuda_exec exec) {
    auto counts = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                                  detail::tiles_in_row{a.tile_row_ptr});
    buffer<std::int64_t, device_space> most(1, exec);
    std::size_t bytes = 0;
    SDNN_CUDA_CHECK(cub::DeviceReduce::Max(nullptr, bytes, counts, most.data(), a.grid_rows, exec.stream));
    buffer<unsigned char, device_space> tmp(bytes, exec);
    SDNN_CUDA_CHECK(cub::DeviceReduce::Max(tmp.data(), bytes, counts, most.data(), a.grid_rows, exec.stream));
    std::int64_t slots = 0;
    SDNN_CUDA_CHECK(cudaMemcpyAsync(&slots, most.data(), sizeof slots, cudaMemcpyDeviceToHost, exec.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    if (slots <= 0) return;
    ell_cols_ = slots * bs_;
    std::int64_t const block_rows = m_ / bs_;
    col_ind_ = buffer<std::int32_t, device_space>(static_cast<std::size_t>(block_rows * slots), runs_.owned(exec));
    values_ = buffer<T, device_space>(static_cast<std::size_t>(m_ * ell_cols_), runs_.owned(exec));
    std::int64_t const jobs = block_rows * slots;
    unsigned const grid = static_cast<unsigned>(jobs < (1 << 20) ? jobs : (1 << 20));
    detail::tiled_to_blocked_ell_kernel<<<grid, 256, 0, exec.stream>>>(a, slots, values_.data(), col_ind_.data(),
                                                                       padding_index);
    SDNN_CUDA_CHECK_LAUNCH();
  }

  // First: the buffers below are allocated through runs_.owned(); run() notes its stream.
  ::sdnn::detail::run_streams runs_;
  std::int64_t m_, k_, n_, ldb_, ldc_, bs_;
  std::int64_t ell_cols_ = 0;
  buffer<std::int32_t, device_space> col_ind_;
  buffer<T, device_space> values_;
  // The cuSPARSE descriptors, released by this member's destructor, so a constructor that
  // throws half way (e.g. NOT_SUPPORTED) leaks nothing.
  struct cusparse_objects {
    cusparse_const_spmat a;
    cusparse_dnmat b, c;
  } obj_;
  buffer<unsigned char, device_space> buf_;
};

}  // namespace sdnn::vendor
