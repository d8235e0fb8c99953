// sdnn/linear/vendor/cublaslt.cuh - vendor::cublaslt_linear16<T>: Y[M x N] = epi(X[M x K] W^T) for
// bf16 / fp16 row-major X, W (N x K) and Y through cublasLtMatmul, the bias and ReLU fused in
// cuBLASLt's epilogue, float compute. The bias is given to cuBLASLt as floats where it takes them
// (one rounding of acc + bias to T, as sdnn's own kernels round), else rounded to T first: CUDA
// 13.0's cuBLASLt refuses a float bias with a 16-bit output (CUBLAS_STATUS_INVALID_VALUE, H100), so
// there the result has the two roundings of cuDNN's separate bias pass (|error| <= u (|acc| + |bias|)
// more). Used by the automatic convolution for 1x1 stride-1 unpadded layers, which in NHWC are
// exactly this product (X = the activations, M = batch*H*W, K = C; W = the GEMM view).
//
// As the column-major product D = op(A) B: D is Y^T (N x M, ld N), A is W read as K x N (ld K,
// transposed), B is X read as K x M (ld K). The plan asks cuBLASLt's heuristic for up to 8
// algorithms for pointers aligned to 16 bytes (rows of 16-bit values with K and N multiples of 8)
// and keeps the fastest on this GPU (each timed on scratch operands after an L2 flush, median of 5:
// the plan SYNCHRONISES own.stream); run() checks that the pointers it gets are aligned. A configuration the heuristic has no algorithm for (for instance a float
// bias this cuBLASLt does not take with a 16-bit output) is refused at construction with an
// sdnn::error, which the automatic plan reads as "not a candidate".
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/error.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/numeric.hpp"
#include "sdnn/core/plan.cuh"
#include "sdnn/formats/dense.hpp"
#include "sdnn/linear/vendor/cublas.cuh"

namespace sdnn::vendor {

template <class T>
class cublaslt_linear16 {
  static_assert(is_16bit_float_v<T>, "cublaslt_linear16: T must be sdnn::bf16 or sdnn::fp16");

 public:
  static constexpr std::size_t workspace_limit = std::size_t(32) << 20;
  static constexpr std::uintptr_t alignment = 16;

  // w: N x K and bias: N floats or none, on the host (copied to the device on own.stream).
  cublaslt_linear16(std::int64_t M, std::int64_t N, std::int64_t K, dense_view<T const> w,
                    std::vector<float> const& bias, bool relu, cuda_exec own)
      : m_(M), n_(N), k_(K), relu_(relu), has_bias_(!bias.empty()) {
    SDNN_EXPECTS(M >= 1 && N >= 1 && K >= 1, "cublaslt_linear16: M, N, K must be >= 1, got ", M, ", ", N, ", ", K);
    SDNN_EXPECTS_DIMS(w.rows == N && w.cols == K, "cublaslt_linear16: W is ", w.rows, " x ", w.cols, ", expected ", N,
                      " x ", K);
    SDNN_EXPECTS(K % 8 == 0 && N % 8 == 0, "cublaslt_linear16: K = ", K, " and N = ", N,
                 " must be multiples of 8 (16-byte rows)");
    SDNN_EXPECTS_DIMS(bias.empty() || std::int64_t(bias.size()) == N, "cublaslt_linear16: the bias has ",
                      bias.size(), " values, the output ", N, " columns");
    host_buffer<T> packed(std::size_t(N * K));
    for (std::int64_t i = 0; i < N; ++i)
      for (std::int64_t j = 0; j < K; ++j) packed[std::size_t(i * K + j)] = w(i, j);
    w_ = copy_to<device_space>(packed, own);
    SDNN_CUBLAS_CHECK(cublasLtCreate(&h_));
    cudaDataType_t const dt = std::is_same_v<T, bf16> ? CUDA_R_16BF : CUDA_R_16F;
    SDNN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t const ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    SDNN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    SDNN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtEpilogue_t const epi = has_bias_ ? (relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                                             : (relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
    SDNN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    SDNN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, dt, std::uint64_t(K), std::uint64_t(N), K));
    SDNN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_, dt, std::uint64_t(K), std::uint64_t(M), K));
    SDNN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d_, dt, std::uint64_t(N), std::uint64_t(M), N));
    cublasLtMatmulPreference_t pref = nullptr;
    SDNN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    std::uint64_t const ws = workspace_limit;
    std::uint32_t const al = alignment;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceSetAttribute(pref, attr, &al, sizeof al);
    std::array<cublasLtMatmulHeuristicResult_t, 8> found{};
    int count = 0;
    // The bias as floats first; where cuBLASLt has no algorithm for that, rounded to T.
    auto ask = [&](bool float_bias) {
      if (has_bias_) {
        std::int32_t const bt = float_bias ? CUDA_R_32F : dt;
        void const* p = nullptr;
        if (float_bias) {
          bias_f_ = copy_to<device_space>(host_buffer<float>(bias.begin(), bias.end()), own);
          p = bias_f_.data();
        } else {
          host_buffer<T> rounded(bias.size());
          for (std::size_t i = 0; i < bias.size(); ++i) rounded[i] = T(bias[i]);
          bias_t_ = copy_to<device_space>(rounded, own);
          p = bias_t_.data();
        }
        cublasStatus_t e = cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
        if (e == CUBLAS_STATUS_SUCCESS) e = cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p, sizeof p);
        if (e != CUBLAS_STATUS_SUCCESS) return e;
      }
      count = 0;
      return cublasLtMatmulAlgoGetHeuristic(h_, op_, a_, b_, d_, d_, pref, int(found.size()), found.data(), &count);
    };
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = ask(true);
      float_bias_ = has_bias_ && st == CUBLAS_STATUS_SUCCESS && count > 0;
      if (has_bias_ && !float_bias_) {
        bias_f_ = {};
        st = ask(false);
      }
    }
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || count < 1) {
      release();
      SDNN_FAIL("cublaslt_linear16: cuBLASLt has no algorithm for ", M, " x ", N, " x ", K, " ", value_type_name<T>(),
                has_bias_ ? " with a bias" : "", relu ? " and ReLU" : "", " (",
                st == CUBLAS_STATUS_SUCCESS ? "no result" : cublasGetStatusName(st), ")");
    }
    // The heuristic's order is a guess: time its candidates and keep the fastest.
    std::size_t most_ws = 0;
    for (int i = 0; i < count; ++i) most_ws = std::max(most_ws, found[std::size_t(i)].workspaceSize);
    if (most_ws) ws_ = device_buffer<unsigned char>(most_ws, own);
    algo_ = found[0].algo;
    if (count > 1) {
      device_buffer<T> x(std::size_t(M * K), own), y(std::size_t(M * N), own);
      SDNN_CUDA_CHECK(cudaMemsetAsync(x.data(), 0x3c, x.size() * sizeof(T), own.stream));
      ::sdnn::detail::flushed_timer timer(own);
      double best = 0;
      for (int i = 0; i < count; ++i) {
        algo_ = found[std::size_t(i)].algo;
        std::array<float, 5> ms{};
        timer([&] { run(own, x.data(), y.data()); });  // warm-up
        for (auto& v : ms) v = timer([&] { run(own, x.data(), y.data()); });
        std::sort(ms.begin(), ms.end());
        if (i == 0 || ms[2] < best) {
          best = ms[2];
          chosen_ = i;
        }
      }
      algo_ = found[std::size_t(chosen_)].algo;
      candidates_ = count;
      SDNN_CUDA_CHECK(cudaStreamSynchronize(own.stream));  // the scratch operands go
    }
  }
  ~cublaslt_linear16() { release(); }
  cublaslt_linear16(cublaslt_linear16 const&) = delete;
  cublaslt_linear16& operator=(cublaslt_linear16 const&) = delete;

  // y (M x N, row-major) = epi(x (M x K, row-major) W^T) on exec.stream.
  void run(cuda_exec exec, T const* x, T* y) const {
    SDNN_EXPECTS(reinterpret_cast<std::uintptr_t>(x) % alignment == 0 &&
                     reinterpret_cast<std::uintptr_t>(y) % alignment == 0,
                 "cublaslt_linear16: x and y must be 16-byte aligned");
    float const one = 1.f, zero = 0.f;
    SDNN_CUBLAS_CHECK(cublasLtMatmul(h_, op_, &one, w_.data(), a_, x, b_, &zero, y, d_, y, d_, &algo_,
                                     ws_.size() ? const_cast<unsigned char*>(ws_.data()) : nullptr, ws_.size(),
                                     exec.stream));
  }
  std::string describe() const {
    return ::sdnn::detail::concat("cublaslt_linear16<", value_type_name<T>(), ">: ", m_, " x ", n_, " x ", k_,
                                  !has_bias_ ? "" : float_bias_ ? ", float bias" : ", bias rounded to the output type",
                                  relu_ ? ", ReLU" : "", " fused, algorithm ", chosen_ + 1, " of the heuristic's ",
                                  candidates_, " (fastest timed), ", ws_.size(), " B workspace");
  }

 private:
  void release() noexcept {
    if (d_) cublasLtMatrixLayoutDestroy(d_);
    if (b_) cublasLtMatrixLayoutDestroy(b_);
    if (a_) cublasLtMatrixLayoutDestroy(a_);
    if (op_) cublasLtMatmulDescDestroy(op_);
    if (h_) detail::cublas_check_noexcept(cublasLtDestroy(h_), "cublasLtDestroy");
    d_ = b_ = a_ = nullptr;
    op_ = nullptr;
    h_ = nullptr;
  }

  std::int64_t m_, n_, k_;
  bool relu_, has_bias_, float_bias_ = false;
  int chosen_ = 0, candidates_ = 1;
  device_buffer<T> w_;
  device_buffer<float> bias_f_;  // the bias cuBLASLt reads: floats, or
  device_buffer<T> bias_t_;      // rounded to T
  device_buffer<unsigned char> ws_;
  cublasLtHandle_t h_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};

}  // namespace sdnn::vendor
