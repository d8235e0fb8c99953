// sdnn/linear/vendor/cublas.cuh - the cuBLAS dense-product baseline behind the gemm interface.
//
//   C[M x N] = epi(A[M x K] * B[K x N]), row-major views, computed as the column-major
//   product C^T = B^T * A^T (no copies). float: cublasSgemm with CUBLAS_DEFAULT_MATH, in
//   which TF32 is off (strict float; NVIDIA_TF32_OVERRIDE must not be set), or
//   CUBLAS_PEDANTIC_MATH on request. __half: cublasGemmEx with CUDA_R_16F operands and
//   CUBLAS_COMPUTE_32F (float accumulation, like sdnn's kernels). cublas_linear16: the linear
//   layer's Y[N x M] = X[N x K] W^T for sdnn::bf16 / sdnn::fp16 (the tensor-core plans' dense path).
#pragma once

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/numeric.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/linear/kernel/epilogue.cuh"

namespace sdnn::vendor {

namespace detail {
inline void cublas_check(cublasStatus_t st, char const* call, char const* file, int line) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw ::sdnn::cublas_error(call, static_cast<int>(st),
                               ::sdnn::detail::concat(cublasGetStatusName(st), " (", cublasGetStatusString(st), ")"),
                               file, line);
}
// For destructors, which cannot throw: a failed release is reported, never thrown.
inline void cublas_check_noexcept(cublasStatus_t st, char const* what) noexcept {
  if (st != CUBLAS_STATUS_SUCCESS) ::sdnn::detail::report_release("cuBLAS", what, cublasGetStatusName(st));
}
}  // namespace detail
}  // namespace sdnn::vendor

#define SDNN_CUBLAS_CHECK(call) ::sdnn::vendor::detail::cublas_check((call), #call, __FILE__, __LINE__)

namespace sdnn::vendor {

// An owning cuBLAS handle (move-only).
class cublas_handle {
 public:
  explicit cublas_handle(bool pedantic = false) {
    SDNN_CUBLAS_CHECK(cublasCreate(&h_));
    SDNN_CUBLAS_CHECK(cublasSetMathMode(h_, pedantic ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH));
  }
  ~cublas_handle() {
    if (h_) detail::cublas_check_noexcept(cublasDestroy(h_), "cublasDestroy");
  }
  cublas_handle(cublas_handle&& o) noexcept : h_(o.h_) { o.h_ = nullptr; }
  cublas_handle& operator=(cublas_handle&&) = delete;
  cublas_handle(cublas_handle const&) = delete;
  cublas_handle& operator=(cublas_handle const&) = delete;
  cublasHandle_t get() const noexcept { return h_; }

 private:
  cublasHandle_t h_ = nullptr;
};

// The calling thread's default-math handle (created on first use; handle creation costs
// milliseconds, so ops reuse it).
inline cublas_handle& default_cublas_handle() {
  thread_local cublas_handle h(false);
  return h;
}

// C = epi(A * B) through cuBLAS on `stream`. cuBLAS has no fused epilogue here: a
// non-identity epilogue runs as a second elementwise pass (kernels::apply_epilogue), which
// the benchmarks leave out by using none.
template <class T, class Acc>
void cublas_gemm(cublasHandle_t h, dense_view<T const> a, dense_view<T const> b, dense_view<T> c,
                 basic_epilogue<Acc> const& epi, cudaStream_t stream) {
  SDNN_EXPECTS(a.cols == b.rows && c.rows == a.rows && c.cols == b.cols, "cublas_gemm: shapes ", a.rows, "x", a.cols,
               " * ", b.rows, "x", b.cols, " -> ", c.rows, "x", c.cols, " do not match");
  if (c.rows == 0 || c.cols == 0) return;
  if (a.cols == 0) {  // cuBLAS needs k >= 1 for a defined product here: C = epi(0)
    SDNN_CUDA_CHECK(cudaMemset2DAsync(c.data, sizeof(T) * c.ld, 0, sizeof(T) * c.cols, c.rows, stream));
    kernels::apply_epilogue(c, epi, cuda_exec{stream});
    return;
  }
  // cublasSgemm / cublasGemmEx take int sizes and leading dimensions
  constexpr std::int64_t imax = std::numeric_limits<int>::max();
  auto ld_of = [](std::int64_t l, std::int64_t cols) { return l > 0 ? l : (cols > 0 ? cols : 1); };
  SDNN_EXPECTS(c.rows <= imax && c.cols <= imax && a.cols <= imax && ld_of(a.ld, a.cols) <= imax &&
                   ld_of(b.ld, b.cols) <= imax && ld_of(c.ld, c.cols) <= imax,
               "cublas_gemm: cuBLAS takes int sizes; ", a.rows, "x", a.cols, " * ", b.rows, "x", b.cols,
               " (leading dimensions ", a.ld, ", ", b.ld, ", ", c.ld, ") exceed ", imax);
  SDNN_CUBLAS_CHECK(cublasSetStream(h, stream));
  int const m = static_cast<int>(c.cols), n = static_cast<int>(c.rows), k = static_cast<int>(a.cols);
  auto ld = [&](std::int64_t l, std::int64_t cols) { return static_cast<int>(ld_of(l, cols)); };
  float const alpha = 1.f, beta = 0.f;
  if constexpr (std::is_same_v<T, float>) {
    SDNN_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, b.data, ld(b.ld, b.cols), a.data,
                                  ld(a.ld, a.cols), &beta, c.data, ld(c.ld, c.cols)));
  } else if constexpr (std::is_same_v<T, __half>) {
    SDNN_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, b.data, CUDA_R_16F, ld(b.ld, b.cols),
                                   a.data, CUDA_R_16F, ld(a.ld, a.cols), &beta, c.data, CUDA_R_16F, ld(c.ld, c.cols),
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else {
    static_assert(::sdnn::detail::dependent_false<T>, "cublas_gemm: float or __half only");
  }
  kernels::apply_epilogue(c, epi, cuda_exec{stream});
}

// Y[N x M] = X[N x K] W^T (W M x K, row-major, the nn.Linear layout) for T = sdnn::bf16 or
// sdnn::fp16, Out = T or float: cublasGemmEx with W transposed (the column-major product
// Y^T = W X^T), CUBLAS_COMPUTE_32F. No epilogue. Never synchronises.
template <class T, class Out>
void cublas_linear16(cublasHandle_t h, dense_view<T const> x, dense_view<T const> w, dense_view<Out> y,
                     cudaStream_t stream) {
  static_assert(is_16bit_float_v<T>, "cublas_linear16: T must be sdnn::bf16 or sdnn::fp16");
  static_assert(std::is_same_v<Out, T> || std::is_same_v<Out, float>, "cublas_linear16: Out must be T or float");
  SDNN_EXPECTS_DIMS(x.cols == w.cols && y.rows == x.rows && y.cols == w.rows, "cublas_linear16: X ", x.rows, " x ",
                    x.cols, ", W ", w.rows, " x ", w.cols, ", Y ", y.rows, " x ", y.cols);
  if (y.rows == 0 || y.cols == 0) return;
  std::int64_t const ldx = x.rows > 1 ? x.ld : x.cols, ldy = y.rows > 1 ? y.ld : y.cols;  // one row: ld unused
  if (x.cols == 0) {  // no K: Y = 0
    SDNN_CUDA_CHECK(cudaMemset2DAsync(y.data, sizeof(Out) * std::size_t(ldy), 0, sizeof(Out) * std::size_t(y.cols),
                                      std::size_t(y.rows), stream));
    return;
  }
  constexpr std::int64_t imax = std::numeric_limits<int>::max();
  SDNN_EXPECTS(y.rows <= imax && y.cols <= imax && x.cols <= imax && ldx <= imax && ldy <= imax && w.ld <= imax,
               "cublas_linear16: cuBLAS takes int sizes; X ", x.rows, " x ", x.cols, ", W ", w.rows, " x ", w.cols,
               " exceed ", imax);
  cudaDataType_t const t = std::is_same_v<T, bf16> ? CUDA_R_16BF : CUDA_R_16F;
  cudaDataType_t const o = std::is_same_v<Out, float> ? CUDA_R_32F : t;
  float const alpha = 1.f, beta = 0.f;
  SDNN_CUBLAS_CHECK(cublasSetStream(h, stream));
  SDNN_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(w.rows), int(x.rows), int(x.cols), &alpha, w.data, t,
                                 int(w.ld), x.data, t, int(ldx), &beta, y.data, o, int(ldy), CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
}

}  // namespace sdnn::vendor
