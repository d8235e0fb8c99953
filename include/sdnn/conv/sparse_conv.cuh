// sdnn/conv/sparse_conv.cuh - layers::sparse_conv2d / sparse_conv1d: direct sparse
// convolution (conv::direct_conv_plan, conv/op/direct_sparse.cuh) behind sdnn::layer<T>.
//
// Activations are batch x (C*H*W) row-major (= NCHW, rows contiguous: ld == cols); the
// output is batch x (K*OH*OW). The layer fuses bias + ReLU (options::relu).
// plan(batch, ...) SYNCHRONISES (weight upload and a short tuning run:
// docs/conv.md#plans-and-tuning); forward(cuda_exec) never synchronises once planned.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/conv/weights.hpp"
#include "sdnn/conv/kernel/util.cuh"
#include "sdnn/conv/op/direct_sparse.cuh"
#include "sdnn/layers/layer.hpp"
#include "sdnn/conv/reference/convolution.hpp"


namespace sdnn::layers {

// Acc = float accumulates in float; Acc = __half (T = __half only) accumulates in half
// (paired __hfma2 over two images). __half data with float accumulation is rounded to
// half once (the tuning candidates keep partial sums in registers across channel chunks).
template <class T, class Acc = accumulator_t<T>>
class sparse_conv2d : public layer<T> {
 public:
  struct options {
    bool relu = true;
    std::optional<conv::direct_conv_config> force;  // skip tuning, use this shape
    int tune_reps = 2;
    std::int64_t tune_batch_cap = 64;  // tuning runs on min(batch, cap) images
  };

  sparse_conv2d(conv::sparse_conv_weights<T> w, std::vector<float> bias, options o)
      : w_(std::move(w)), bias_(std::move(bias)), opt_(std::move(o)) {
    conv::validate(w_);
    SDNN_EXPECTS(bias_.empty() || bias_.size() == static_cast<std::size_t>(w_.shape.K), "sparse_conv2d: bias must have K = ",
                 w_.shape.K, " entries (or none), got ", bias_.size());
  }
  sparse_conv2d(conv::sparse_conv_weights<T> w, std::vector<float> bias = {})
      : sparse_conv2d(std::move(w), std::move(bias), options{}) {}

  std::string name() const override { return "sparse_conv2d"; }
  std::int64_t out_features(std::int64_t in_features) const override {
    SDNN_EXPECTS(in_features == w_.shape.in_features(), name(), ": expects C*H*W = ", w_.shape.in_features(),
                 " input features, got ", in_features);
    return w_.shape.out_features();
  }
  conv::conv_shape const& shape() const { return w_.shape; }
  conv::sparse_conv_weights<T> const& weights() const { return w_; }
  conv::direct_conv_config const& config() const { return dev_->config(); }
  bool planned() const { return dev_.has_value(); }
  // (candidate, seconds) of the last tuning run.
  std::vector<std::pair<conv::direct_conv_config, double>> const& tuning_log() const { return log_; }

  // Synchronises: uploads the weights and runs a short tuning run (each candidate (variant,
  // block shape) of direct_conv_candidates, one conv::direct_conv_plan each, timed on the real
  // shape with CUDA events, min of tune_reps launches after one warm-up) and keeps the
  // fastest; options::force skips tuning.
  void plan(std::int64_t batch, std::int64_t in_features, cuda_exec exec) override {
    out_features(in_features);
    upload_bias(exec);
    log_.clear();
    if (opt_.force) {
      dev_.emplace(w_, *opt_.force, exec);
      SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
      return;
    }
    std::int64_t const nb = std::max<std::int64_t>(1, std::min(batch, opt_.tune_batch_cap));
    device_buffer<T> in(static_cast<std::size_t>(nb * w_.shape.in_features()), exec);
    device_buffer<T> out(static_cast<std::size_t>(nb * w_.shape.out_features()), exec);
    conv::detail::fill_hash(in.data(), in.size(), 12345u, exec);
    cudaEvent_t a, b;
    SDNN_CUDA_CHECK(cudaEventCreate(&a));
    SDNN_CUDA_CHECK(cudaEventCreate(&b));
    double best = std::numeric_limits<double>::infinity();
    for (auto const& c : candidates(batch)) {
      if (!plan_type::can_implement(w_.shape, c)) continue;  // e.g. the window does not fit shared memory
      plan_type d(w_, c, exec);
      d.run(exec, nb, in.data(), bias_ptr(), opt_.relu, out.data());
      double t = std::numeric_limits<double>::infinity();
      for (int r = 0; r < std::max(1, opt_.tune_reps); ++r) {
        SDNN_CUDA_CHECK(cudaEventRecord(a, exec.stream));
        d.run(exec, nb, in.data(), bias_ptr(), opt_.relu, out.data());
        SDNN_CUDA_CHECK(cudaEventRecord(b, exec.stream));
        SDNN_CUDA_CHECK(cudaEventSynchronize(b));
        float ms = 0;
        SDNN_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
        t = std::min(t, ms * 1e-3);
      }
      log_.push_back({c, t});
      if (t < best) {
        best = t;
        dev_ = std::move(d);
      }
    }
    SDNN_CUDA_CHECK(cudaEventDestroy(a));
    SDNN_CUDA_CHECK(cudaEventDestroy(b));
    SDNN_EXPECTS(dev_.has_value(), name(), ": no candidate block shape fits in shared memory");
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
  }

  void forward(host_exec, dense_view<T const> in, dense_view<T> out) override {
    check_views(in, out);
    auto const y = conv::conv_reference(w_, in.rows, in.data, bias_.empty() ? nullptr : bias_.data(), opt_.relu);
    for (std::int64_t i = 0; i < out.rows; ++i)
      for (std::int64_t j = 0; j < out.cols; ++j)
        out(i, j) = value_cast<T>(static_cast<float>(y[static_cast<std::size_t>(i * out.cols + j)]));
  }

  // Never synchronises once planned; called unplanned it uploads the weights first (a
  // pageable-memory copy, which blocks the host) with the forced or the first candidate config.
  void forward(cuda_exec exec, dense_view<T const> in, dense_view<T> out) override {
    check_views(in, out);
    if (!dev_) {
      upload_bias(exec);
      conv::direct_conv_config c = opt_.force ? *opt_.force : candidates(in.rows).front();
      dev_.emplace(w_, c, exec);
    }
    runs_.note(exec);
    dev_->run(exec, in.rows, in.data, bias_ptr(), opt_.relu, out.data);
  }

 private:
  void check_views(dense_view<T const> in, dense_view<T> out) const {
    SDNN_EXPECTS(in.cols == w_.shape.in_features() && in.ld == in.cols, name(), ": input must be batch x C*H*W = ",
                 w_.shape.in_features(), " with ld == cols, got cols ", in.cols, " ld ", in.ld);
    SDNN_EXPECTS(out.rows == in.rows && out.cols == w_.shape.out_features() && out.ld == out.cols, name(),
                 ": output must be ", in.rows, " x ", w_.shape.out_features(), " with ld == cols, got ", out.rows, " x ",
                 out.cols, " ld ", out.ld);
  }
  void upload_bias(cuda_exec exec) {
    if (bias_.empty() || bias_dev_.size() == bias_.size()) return;
    host_buffer<float> hb(bias_.begin(), bias_.end());
    bias_dev_ = copy_to<device_space>(hb, runs_.owned(exec));
  }
  float const* bias_ptr() const { return bias_.empty() ? nullptr : bias_dev_.data(); }
  // The tuning candidates this (T, Acc) may run: no output round trip of partial sums
  // for __half data with float accumulation (it would round them to half per chunk).
  std::vector<conv::direct_conv_config> candidates(std::int64_t batch) const {
    return conv::direct_conv_candidates(w_.shape, sizeof(T), batch, conv::direct_conv_window_budget,
                                        conv::output_round_trip_exact<T, Acc>);
  }

  conv::sparse_conv_weights<T> w_;
  std::vector<float> bias_;
  options opt_;
  // The streams forward() ran on: the device bias, which the plan's runs read, is released after
  // them (the plan keeps its own record, so a re-plan waits too).
  sdnn::detail::run_streams runs_;
  device_buffer<float> bias_dev_;
  using plan_type = conv::direct_conv_plan<T, Acc>;
  std::optional<plan_type> dev_;
  std::vector<std::pair<conv::direct_conv_config, double>> log_;
};

// 1-D: weights built on conv_shape::conv1d (H = 1, kernel along W); same kernel, with a
// thread's pixels along the sequence.
template <class T, class Acc = accumulator_t<T>>
class sparse_conv1d : public sparse_conv2d<T, Acc> {
 public:
  using base = sparse_conv2d<T, Acc>;
  using options = typename base::options;
  sparse_conv1d(conv::sparse_conv_weights<T> w, std::vector<float> bias, options o)
      : base(check_1d(std::move(w)), std::move(bias), std::move(o)) {}
  sparse_conv1d(conv::sparse_conv_weights<T> w, std::vector<float> bias = {})
      : sparse_conv1d(std::move(w), std::move(bias), options{}) {}
  std::string name() const override { return "sparse_conv1d"; }

 private:
  static conv::sparse_conv_weights<T> check_1d(conv::sparse_conv_weights<T> w) {
    SDNN_EXPECTS(w.shape.H == 1 && w.shape.R == 1 && w.shape.pad_h == 0,
                 "sparse_conv1d: weights must be built on conv_shape::conv1d (H = 1, R = 1, pad_h = 0), got H=",
                 w.shape.H, " R=", w.shape.R, " pad_h=", w.shape.pad_h);
    return w;
  }
};

}  // namespace sdnn::layers
