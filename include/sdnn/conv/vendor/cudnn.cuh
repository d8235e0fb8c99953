// sdnn/conv/vendor/cudnn.cuh - vendor::cudnn_conv2d: the dense convolution baseline through
// cuDNN (needs SDNN_HAS_CUDNN, i.e. linking sdnn::cudnn; without it this header declares
// nothing). conv/cudnn_conv.cuh puts it behind the same sdnn::layer<T> interface as
// sparse_conv2d (layers::cudnn_conv2d). plan(batch, ...) SYNCHRONISES; forward(cuda_exec)
// never does.
#pragma once

#if defined(SDNN_HAS_CUDNN)

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>
#include <type_traits>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/conv/shape.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/conv/kernel/util.cuh"
#include "sdnn/conv/reference/convolution.hpp"

namespace sdnn::detail {
inline void cudnn_check(cudnnStatus_t st, char const* call, char const* file, int line) {
  if (st != CUDNN_STATUS_SUCCESS)
    throw ::sdnn::cudnn_error(call, static_cast<int>(st), cudnnGetErrorString(st), file, line);
}
// For destructors, which cannot throw: a failed release is reported, never thrown.
inline void cudnn_check_noexcept(cudnnStatus_t st, char const* what) noexcept {
  if (st != CUDNN_STATUS_SUCCESS) report_release("cuDNN", what, cudnnGetErrorString(st));
}
}  // namespace sdnn::detail
#define SDNN_CUDNN_CHECK(call) ::sdnn::detail::cudnn_check((call), #call, __FILE__, __LINE__)

namespace sdnn::vendor {

// The plan behind layers::cudnn_conv2d (same members).
template <class T>
class cudnn_conv2d {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, __half>, "cudnn_conv2d: T must be float or __half");

 public:
  // weights: dense K x C x R x S (float, converted to T on upload), bias: [K] or empty.
  cudnn_conv2d(conv::conv_shape shape, std::vector<float> weights, std::vector<float> bias = {}, bool relu = true)
      : s_(shape), w_(std::move(weights)), bias_(std::move(bias)), relu_(relu) {
    s_.check();
    SDNN_EXPECTS(w_.size() == static_cast<std::size_t>(s_.weight_count()), "cudnn_conv2d: expected K*C*R*S = ",
                 s_.weight_count(), " weights, got ", w_.size());
    SDNN_EXPECTS(bias_.empty() || bias_.size() == static_cast<std::size_t>(s_.K), "cudnn_conv2d: bias must have K = ",
                 s_.K, " entries (or none), got ", bias_.size());
  }
  ~cudnn_conv2d() {
    using ::sdnn::detail::cudnn_check_noexcept;
    if (x_) cudnn_check_noexcept(cudnnDestroyTensorDescriptor(x_), "cudnnDestroyTensorDescriptor");
    if (y_) cudnn_check_noexcept(cudnnDestroyTensorDescriptor(y_), "cudnnDestroyTensorDescriptor");
    if (f_) cudnn_check_noexcept(cudnnDestroyFilterDescriptor(f_), "cudnnDestroyFilterDescriptor");
    if (c_) cudnn_check_noexcept(cudnnDestroyConvolutionDescriptor(c_), "cudnnDestroyConvolutionDescriptor");
    if (h_) cudnn_check_noexcept(cudnnDestroy(h_), "cudnnDestroy");
  }
  cudnn_conv2d(cudnn_conv2d const&) = delete;
  cudnn_conv2d& operator=(cudnn_conv2d const&) = delete;

  std::string name() const { return "cudnn_conv2d"; }
  std::int64_t out_features(std::int64_t in_features) const {
    SDNN_EXPECTS(in_features == s_.in_features(), name(), ": expects C*H*W = ", s_.in_features(),
                 " input features, got ", in_features);
    return s_.out_features();
  }
  cudnnConvolutionFwdAlgo_t algorithm() const { return algo_; }
  cudnnMathType_t math_type() const { return math_; }

  // Synchronises: uploads the weights, sets the descriptors and lets cuDNN time every forward
  // algorithm (cudnnFindConvolutionForwardAlgorithm), keeping the fastest that succeeded. float
  // runs with CUDNN_FMA_MATH (no TF32: results with a tensor-op math type are rejected); __half
  // runs with CUDNN_TENSOR_OP_MATH and float compute type.
  void plan(std::int64_t batch, std::int64_t in_features, cuda_exec exec) {
    out_features(in_features);
    SDNN_EXPECTS(batch >= 1, name(), ": batch must be >= 1, got ", batch);
    if (!h_) {
      SDNN_CUDNN_CHECK(cudnnCreate(&h_));
      SDNN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_));
      SDNN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_));
      SDNN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&f_));
      SDNN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&c_));
      host_buffer<T> hw(w_.size());
      for (std::size_t i = 0; i < w_.size(); ++i) hw[i] = value_cast<T>(w_[i]);
      wdev_ = copy_to<device_space>(hw, runs_.owned(exec));
      if (!bias_.empty()) {
        host_buffer<float> hb(bias_.begin(), bias_.end());
        bdev_ = copy_to<device_space>(hb, runs_.owned(exec));
      }
    }
    SDNN_CUDNN_CHECK(cudnnSetStream(h_, exec.stream));
    cudnnDataType_t const dt = std::is_same_v<T, float> ? CUDNN_DATA_FLOAT : CUDNN_DATA_HALF;
    int const n = static_cast<int>(batch);
    SDNN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_, CUDNN_TENSOR_NCHW, dt, n, s_.C, s_.H, s_.W));
    SDNN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_, CUDNN_TENSOR_NCHW, dt, n, s_.K, s_.OH(), s_.OW()));
    SDNN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(f_, dt, CUDNN_TENSOR_NCHW, s_.K, s_.C, s_.R, s_.S));
    SDNN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(c_, s_.pad_h, s_.pad_w, s_.stride_h, s_.stride_w, s_.dil_h,
                                                     s_.dil_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    math_ = std::is_same_v<T, float> ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    SDNN_CUDNN_CHECK(cudnnSetConvolutionMathType(c_, math_));
    int returned = 0;
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    SDNN_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(h_, x_, f_, c_, y_, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                          &returned, perf));
    bool found = false;
    for (int i = 0; i < returned && !found; ++i) {  // sorted fastest first
      if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
      bool const tensor_op =
          perf[i].mathType == CUDNN_TENSOR_OP_MATH || perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
      if (std::is_same_v<T, float> && tensor_op) continue;  // TF32 stays off for float
      algo_ = perf[i].algo;
      math_ = perf[i].mathType;
      ws_bytes_ = perf[i].memory;
      found = true;
    }
    SDNN_EXPECTS(found, name(), ": cuDNN found no usable forward algorithm");
    SDNN_CUDNN_CHECK(cudnnSetConvolutionMathType(c_, math_));
    if (ws_.size() < ws_bytes_) ws_ = device_buffer<unsigned char>(ws_bytes_, runs_.owned(exec));
    batch_ = batch;
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
  }

  void forward(host_exec, dense_view<T const> in, dense_view<T> out) {
    check_views(in, out);
    auto const y = conv::conv_reference(s_, in.rows, in.data, w_.data(), bias_.empty() ? nullptr : bias_.data(), relu_);
    for (std::int64_t i = 0; i < out.rows; ++i)
      for (std::int64_t j = 0; j < out.cols; ++j)
        out(i, j) = value_cast<T>(static_cast<float>(y[static_cast<std::size_t>(i * out.cols + j)]));
  }

  // Needs plan() for this batch size first. cudnnConvolutionForward + one elementwise
  // bias/ReLU pass (skipped when there is no bias and no ReLU); never synchronises.
  void forward(cuda_exec exec, dense_view<T const> in, dense_view<T> out) {
    check_views(in, out);
    SDNN_EXPECTS(h_ && in.rows == batch_, name(), ": plan(", in.rows, ", ...) must run before forward; planned for ",
                 batch_);
    runs_.note(exec);
    SDNN_CUDNN_CHECK(cudnnSetStream(h_, exec.stream));
    float const one = 1.0f, zero = 0.0f;
    SDNN_CUDNN_CHECK(cudnnConvolutionForward(h_, &one, x_, in.data, f_, wdev_.data(), c_, algo_, ws_.data(), ws_bytes_,
                                             &zero, y_, out.data));
    if (relu_ || !bias_.empty()) {
      std::size_t const n = static_cast<std::size_t>(out.rows * out.cols);
      conv::detail::bias_relu(out.data, n, s_.K, std::int64_t(s_.OH()) * s_.OW(),
                              bias_.empty() ? nullptr : bdev_.data(), relu_, exec);
    }
  }

  // The convolution alone (no bias/ReLU pass): what benchmarks compare against.
  void convolution_only(cuda_exec exec, T const* in, T* out) {
    SDNN_EXPECTS(h_ != nullptr, name(), ": plan() must run first");
    runs_.note(exec);
    SDNN_CUDNN_CHECK(cudnnSetStream(h_, exec.stream));
    float const one = 1.0f, zero = 0.0f;
    SDNN_CUDNN_CHECK(
        cudnnConvolutionForward(h_, &one, x_, in, f_, wdev_.data(), c_, algo_, ws_.data(), ws_bytes_, &zero, y_, out));
  }

 private:
  void check_views(dense_view<T const> in, dense_view<T> out) const {
    SDNN_EXPECTS(in.cols == s_.in_features() && in.ld == in.cols, name(), ": input must be batch x C*H*W = ",
                 s_.in_features(), " with ld == cols, got cols ", in.cols, " ld ", in.ld);
    SDNN_EXPECTS(out.rows == in.rows && out.cols == s_.out_features() && out.ld == out.cols, name(),
                 ": output must be ", in.rows, " x ", s_.out_features(), " with ld == cols");
  }

  conv::conv_shape s_;
  std::vector<float> w_, bias_;
  bool relu_;
  cudnnHandle_t h_ = nullptr;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t f_ = nullptr;
  cudnnConvolutionDescriptor_t c_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_{};
  cudnnMathType_t math_ = CUDNN_DEFAULT_MATH;
  std::size_t ws_bytes_ = 0;
  std::int64_t batch_ = 0;
  // The streams it was planned or ran on: the buffers below are allocated through runs_.owned(),
  // so a re-plan or the destructor releases them after that work (core/plan.cuh).
  ::sdnn::detail::run_streams runs_;
  device_buffer<T> wdev_;
  device_buffer<float> bdev_;
  device_buffer<unsigned char> ws_;
};

}  // namespace sdnn::vendor

#endif  // SDNN_HAS_CUDNN
