// sdnn/conv/cudnn_conv.cuh - layers::cudnn_conv2d: the dense convolution baseline through
// cuDNN (conv/vendor/cudnn.cuh), behind the same sdnn::layer<T> interface as sparse_conv2d
// (needs SDNN_HAS_CUDNN, i.e. linking sdnn::cudnn; without it this header declares nothing).
//
// plan(batch, ...) SYNCHRONISES (upload + cudnnFindConvolutionForwardAlgorithm);
// forward(cuda_exec) = cudnnConvolutionForward + one elementwise bias/ReLU pass and never
// synchronises. See conv/vendor/cudnn.cuh for the algorithm and math-type choice.
#pragma once

#if defined(SDNN_HAS_CUDNN)

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sdnn/core/exec.hpp"
#include "sdnn/conv/shape.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/layers/layer.hpp"
#include "sdnn/conv/vendor/cudnn.cuh"

namespace sdnn::layers {

template <class T>
class cudnn_conv2d : public layer<T> {
 public:
  // weights: dense K x C x R x S (float, converted to T on upload), bias: [K] or empty.
  cudnn_conv2d(conv::conv_shape shape, std::vector<float> weights, std::vector<float> bias = {}, bool relu = true)
      : impl_(shape, std::move(weights), std::move(bias), relu) {}

  std::string name() const override { return impl_.name(); }
  std::int64_t out_features(std::int64_t in_features) const override { return impl_.out_features(in_features); }
  cudnnConvolutionFwdAlgo_t algorithm() const { return impl_.algorithm(); }
  cudnnMathType_t math_type() const { return impl_.math_type(); }

  // Synchronises (upload + cudnnFindConvolutionForwardAlgorithm).
  void plan(std::int64_t batch, std::int64_t in_features, cuda_exec exec) override {
    impl_.plan(batch, in_features, exec);
  }
  void forward(host_exec exec, dense_view<T const> in, dense_view<T> out) override { impl_.forward(exec, in, out); }
  // Needs plan() for this batch size first.
  void forward(cuda_exec exec, dense_view<T const> in, dense_view<T> out) override { impl_.forward(exec, in, out); }
  // The convolution alone (no bias/ReLU pass): what benchmarks compare against.
  void convolution_only(cuda_exec exec, T const* in, T* out) { impl_.convolution_only(exec, in, out); }

 private:
  vendor::cudnn_conv2d<T> impl_;
};

}  // namespace sdnn::layers

#endif  // SDNN_HAS_CUDNN
