// python/src/device_conv.cu - sdnn.Conv2d's device half: ops::conv16_auto_plan<T> behind
// conv_handle, one plan per (batch, H, W) made at its first forward. Making a plan is a tuning
// run (cuDNN's best algorithm and each structured tensor-core path timed on this GPU): it
// synchronises the stream, once per shape; later forwards only enqueue.
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <tuple>

#include "device.hpp"
#include "sdnn/core/cuda.cuh"
#include "sdnn/core/error.hpp"

#if defined(SDNN_HAS_CUDNN)
#include "sdnn/conv/nhwc.hpp"
#include "sdnn/conv/op/conv16_auto.cuh"
#endif

namespace sdnn_py {

#if defined(SDNN_HAS_CUDNN)
namespace {

template <class T>
class conv_impl final : public conv_handle {
 public:
  conv_impl(conv_geometry g, T const* wg, std::vector<float> bias, bool relu, bool pool)
      : g_(g), bias_(std::move(bias)), relu_(relu), pool_(pool) {
    SDNN_EXPECTS(g.C >= 1 && g.K >= 1 && g.R >= 1 && g.S >= 1 && g.stride_h >= 1 && g.stride_w >= 1 &&
                     g.dil_h >= 1 && g.dil_w >= 1 && g.pad_h >= 0 && g.pad_w >= 0,
                 "sdnn.Conv2d: channels, kernel, stride and dilation must be >= 1 and padding >= 0");
    wg_ = sdnn::dense_matrix<T>(g.K, std::int64_t(g.R) * g.S * g.C);
    if (wg_.size()) std::memcpy(wg_.data(), wg, wg_.size() * sizeof(T));
    SDNN_EXPECTS(bias_.empty() || bias_.size() == std::size_t(g.K), "sdnn.Conv2d: the bias has ", bias_.size(),
                 " values, the layer ", g.K, " output channels");
    SDNN_CUDA_CHECK(cudaGetDevice(&device_));
  }
  std::pair<int, int> out_hw(int H, int W) const override {
    auto const s = shape(H, W);
    s.check();
    return pool_ ? std::pair<int, int>{s.OH() / 2, s.OW() / 2} : std::pair<int, int>{s.OH(), s.OW()};
  }
  void forward(std::uintptr_t x, std::uintptr_t y, std::int64_t batch, int H, int W, std::uintptr_t stream) override {
    int old = 0;
    SDNN_CUDA_CHECK(cudaGetDevice(&old));
    if (old != device_) SDNN_CUDA_CHECK(cudaSetDevice(device_));
    try {
      sdnn::cuda_exec const exec(reinterpret_cast<CUstream_st*>(stream));
      std::lock_guard<std::mutex> lock(mu_);
      auto& p = plans_[std::make_tuple(batch, H, W)];
      if (!p) {
        auto s = shape(H, W);
        p = std::make_unique<sdnn::ops::conv16_auto_plan<T>>(s, batch, std::as_const(wg_).view(), bias_, relu_, pool_,
                                                            exec);
      }
      p->run(exec, reinterpret_cast<T const*>(x), reinterpret_cast<T*>(y));
    } catch (...) {
      if (old != device_) cudaSetDevice(old);
      throw;
    }
    if (old != device_) SDNN_CUDA_CHECK(cudaSetDevice(old));
  }
  std::string reason(std::int64_t batch, int H, int W) const override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(std::make_tuple(batch, H, W));
    return it == plans_.end() || !it->second ? std::string() : it->second->describe();
  }
  int device() const noexcept override { return device_; }

 private:
  sdnn::conv::conv_shape shape(int H, int W) const {
    sdnn::conv::conv_shape s;
    s.C = g_.C; s.H = H; s.W = W; s.K = g_.K; s.R = g_.R; s.S = g_.S;
    s.stride_h = g_.stride_h; s.stride_w = g_.stride_w;
    s.pad_h = g_.pad_h; s.pad_w = g_.pad_w;
    s.dil_h = g_.dil_h; s.dil_w = g_.dil_w;
    return s;
  }

  conv_geometry g_;
  sdnn::dense_matrix<T> wg_;
  std::vector<float> bias_;
  bool relu_, pool_;
  int device_ = 0;
  mutable std::mutex mu_;
  std::map<std::tuple<std::int64_t, int, int>, std::unique_ptr<sdnn::ops::conv16_auto_plan<T>>> plans_;
};

}  // namespace

std::unique_ptr<conv_handle> make_conv(dtype type, conv_geometry g, void const* wg, std::vector<float> bias, bool relu,
                                       bool pool) {
  if (type == dtype::f16)
    return std::make_unique<conv_impl<sdnn::fp16>>(g, static_cast<sdnn::fp16 const*>(wg), std::move(bias), relu, pool);
  if (type == dtype::bf16)
    return std::make_unique<conv_impl<sdnn::bf16>>(g, static_cast<sdnn::bf16 const*>(wg), std::move(bias), relu, pool);
  SDNN_FAIL("sdnn.Conv2d: the weights must be float16 or bfloat16, got ", dtype_name(type));
}
#else
std::unique_ptr<conv_handle> make_conv(dtype, conv_geometry, void const*, std::vector<float>, bool, bool) {
  throw sdnn::not_compiled("sdnn.Conv2d", "the module was built without cuDNN (the automatic convolution needs it)",
                           __FILE__, __LINE__);
}
#endif

}  // namespace sdnn_py
