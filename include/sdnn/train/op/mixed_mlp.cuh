// sdnn/train/op/mixed_mlp.cuh - a fully connected network trained on the device in mixed
// precision: float master weights, their T copy (bf16, fp16 or float) for every product, float
// accumulation (cuBLAS GemmEx with CUBLAS_COMPUTE_32F, and the tensor cores' block SDDMM), a
// loss scale that lives on the device, SGD with momentum or Adam, a mask per layer that pruning
// sets (the weight gradient of a 32 x 32 block mask is computed on the kept blocks only), and a
// group-lasso penalty over any weight_groups. A training step is enqueued without a host round
// trip; take_stats() is the one place that reads the device's bookkeeping back. Every call takes
// the stream the object was made on (its buffers are stream-ordered there; another is refused).
// Rules: train/mixed_precision.hpp; docs/train.md#mixed-precision-training-on-the-device.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/numeric.hpp"
#include "sdnn/core/random.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/linear/vendor/cublas.cuh"
#include "sdnn/train/kernel/mixed_precision.cuh"
#include "sdnn/train/op/backward.cuh"
#include "sdnn/train/op/structured_sparsity.hpp"
#include "sdnn/train/mixed_precision.hpp"

namespace sdnn::train {

// A training step's loss was NaN or Inf: step() is the iteration (0-based, counted over the
// model's life) of the first such loss.
class nonfinite_loss : public error {
 public:
  nonfinite_loss(std::int64_t step, std::string const& what) : error(what), step_(step) {}
  std::int64_t step() const noexcept { return step_; }

 private:
  std::int64_t step_;
};

struct mixed_options {
  optimizer_rule optimizer{};
  loss_scale_rule loss_scale{};  // for float, {false, 1.0f}: no scaling is needed
  std::int64_t max_batch = 256;             // the most rows a step or an evaluation sees
};

// What take_stats() read back: the steps since the previous call.
struct mixed_stats {
  double mean_loss = 0.0;       // over the steps with a finite loss
  std::int64_t losses = 0;      // how many
  std::int64_t step = 0;        // optimizer steps taken so far (model life)
  std::int64_t iteration = 0;   // training steps run so far
  std::int64_t skipped = 0;     // steps skipped for a non-finite gradient so far
  float loss_scale = 1.0f;
};

namespace detail {

template <class T>
constexpr cudaDataType_t cuda_type() {
  if constexpr (std::is_same_v<T, float>) return CUDA_R_32F;
  else if constexpr (std::is_same_v<T, bf16>) return CUDA_R_16BF;
  else return CUDA_R_16F;
}

// Row-major C[m x n] (float, ld ldc) = op(A) op(B) through the column-major cuBLAS call on
// the transposes; A and B are T. ta: A is stored transposed (k x m), tb: B stored (n x k).
template <class T>
void gemm_f32(cuda_exec exec, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T const* a,
              std::int64_t lda, T const* b, std::int64_t ldb, float* c, std::int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    SDNN_CUDA_CHECK(cudaMemset2DAsync(c, sizeof(float) * ldc, 0, sizeof(float) * n, m, exec.stream));
    return;
  }
  cublasHandle_t h = vendor::default_cublas_handle().get();
  SDNN_CUBLAS_CHECK(cublasSetStream(h, exec.stream));
  float const alpha = 1.0f, beta = 0.0f;
  // C^T (n x m, col-major ldc) = op(B)^T op(A)^T: B first.
  SDNN_CUBLAS_CHECK(cublasGemmEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                                 static_cast<int>(m), static_cast<int>(k), &alpha, b, cuda_type<T>(),
                                 static_cast<int>(ldb), a, cuda_type<T>(), static_cast<int>(lda), &beta, c, CUDA_R_32F,
                                 static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// The stream an object was made on, which every later call must use.
struct home_stream {
  cudaStream_t s = nullptr;
  void check(cuda_exec e, char const* who) const {
    SDNN_EXPECTS(e.stream == s, who, ": called on another stream than the one it was made on (its buffers are "
                 "stream-ordered there); use that stream or make the object on this one");
  }
};

inline void zero(float* p, std::size_t n, cuda_exec exec) {
  if (n) SDNN_CUDA_CHECK(cudaMemsetAsync(p, 0, n * sizeof(float), exec.stream));
}

}  // namespace detail

// Y = act(X W^T + b) with W out x in (the nn.Linear layout), trained in mixed precision.
template <class T>
class mixed_linear {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16> || std::is_same_v<T, fp16>,
                "mixed_linear: T must be float, sdnn::bf16 or sdnn::fp16");

 public:
  // He-uniform weights from splitmix64{seed} (core/random.hpp), zero bias.
  mixed_linear(std::int64_t in, std::int64_t out, bool relu, std::uint64_t seed, cuda_exec exec)
      : in_(in), out_(out), relu_(relu), home_{exec.stream} {
    SDNN_EXPECTS(in >= 1 && out >= 1, "mixed_linear: the layer must be at least 1 x 1, got ", out, " x ", in);
    dense_matrix<float> w(out, in);
    splitmix64 r{seed};
    double const a = std::sqrt(6.0 / double(in));
    for (std::int64_t i = 0; i < out; ++i)
      for (std::int64_t j = 0; j < in; ++j) w(i, j) = static_cast<float>((2.0 * r.uniform() - 1.0) * a);
    auto const n = static_cast<std::size_t>(in * out);
    w_ = device_buffer<float>(n, exec);
    gw_ = device_buffer<float>(n, exec);
    mw_ = device_buffer<float>(n, exec);
    vw_ = device_buffer<float>(n, exec);
    low_ = device_buffer<T>(n, exec);
    b_ = device_buffer<float>(static_cast<std::size_t>(out), exec);
    gb_ = device_buffer<float>(static_cast<std::size_t>(out), exec);
    mb_ = device_buffer<float>(static_cast<std::size_t>(out), exec);
    vb_ = device_buffer<float>(static_cast<std::size_t>(out), exec);
    for (auto* p : {&gw_, &mw_, &vw_}) detail::zero(p->data(), n, exec);
    for (auto* p : {&b_, &gb_, &mb_, &vb_}) detail::zero(p->data(), static_cast<std::size_t>(out), exec);
    set_weights(exec, w.view(), {});
  }

  std::int64_t in_features() const noexcept { return in_; }
  std::int64_t out_features() const noexcept { return out_; }
  bool relu() const noexcept { return relu_; }

  // New master weights (host, out x in) and bias (empty: keep); the masks still apply; the
  // optimizer's moments are kept.
  void set_weights(cuda_exec exec, dense_view<float const> w, std::vector<float> const& bias) {
    home_.check(exec, "mixed_linear::set_weights");
    SDNN_EXPECTS_DIMS(w.rows == out_ && w.cols == in_, "mixed_linear::set_weights: W must be ", out_, " x ", in_,
                      ", got ", w.rows, " x ", w.cols);
    SDNN_EXPECTS_DIMS(bias.empty() || std::int64_t(bias.size()) == out_, "mixed_linear::set_weights: the bias has ",
                      bias.size(), " values, the layer ", out_, " outputs");
    std::vector<float> packed(static_cast<std::size_t>(out_ * in_));
    for (std::int64_t i = 0; i < out_; ++i)
      for (std::int64_t j = 0; j < in_; ++j) packed[static_cast<std::size_t>(i * in_ + j)] = w(i, j);
    SDNN_CUDA_CHECK(cudaMemcpyAsync(w_.data(), packed.data(), packed.size() * sizeof(float), cudaMemcpyHostToDevice,
                                    exec.stream));
    if (!bias.empty())
      SDNN_CUDA_CHECK(
          cudaMemcpyAsync(b_.data(), bias.data(), bias.size() * sizeof(float), cudaMemcpyHostToDevice, exec.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));  // `packed` and `bias` are pageable host memory
    kernels::mask_and_round(w_.data(), mask_.empty() ? nullptr : mask_.data(), low_.data(), out_ * in_, exec);
    if (!bias_mask_.empty())
      kernels::mask_and_round(b_.data(), bias_mask_.data(), static_cast<T*>(nullptr), out_, exec);
  }

  // The master weights and bias on the host. Synchronises exec.stream.
  dense_matrix<float> weights(cuda_exec exec) const { return download(w_, exec); }
  std::vector<float> bias(cuda_exec exec) const { return download_vector(b_, exec, "mixed_linear::bias"); }
  // The last computed weight gradient (unscaled once a step has run it through the check). Synchronises.
  dense_matrix<float> weight_gradient(cuda_exec exec) const { return download(gw_, exec); }
  std::vector<float> bias_gradient(cuda_exec exec) const {
    return download_vector(gb_, exec, "mixed_linear::bias_gradient");
  }

  // Keep only the weights where mask[i * in + j] != 0 (empty: all of them). Masked weights are
  // zeroed now and stay zero. With a block shape (32 x 32 is the one the tensor-core SDDMM
  // takes) the weight gradient is computed on the blocks holding a kept weight only, where the
  // shapes allow it (T 16-bit; in, out and the batch multiples of 16), else as a dense product.
  void set_mask(cuda_exec exec, std::vector<std::uint8_t> const& mask, std::int32_t block_rows = 0,
                std::int32_t block_cols = 0) {
    home_.check(exec, "mixed_linear::set_mask");
    SDNN_EXPECTS(mask.empty() || std::int64_t(mask.size()) == out_ * in_, "mixed_linear::set_mask: the mask has ",
                 mask.size(), " entries, the layer ", out_, " x ", in_);
    mask_ = mask.empty() ? device_buffer<std::uint8_t>() : to_device(mask.data(), mask.size(), exec);
    kept_blocks_ = device_buffer<std::int32_t>();
    kept_count_ = 0;
    if (!mask.empty() && block_rows == 32 && block_cols == 32 && !std::is_same_v<T, float> && in_ % 16 == 0 &&
        out_ % 16 == 0) {
      std::int32_t const bcols = static_cast<std::int32_t>((in_ + 31) / 32);
      std::int32_t const brows = static_cast<std::int32_t>((out_ + 31) / 32);
      std::vector<std::int32_t> kept;
      for (std::int32_t bi = 0; bi < brows; ++bi)
        for (std::int32_t bj = 0; bj < bcols; ++bj) {
          bool any = false;
          for (std::int64_t i = bi * 32; i < std::min<std::int64_t>(out_, bi * 32 + 32) && !any; ++i)
            for (std::int64_t j = bj * 32; j < std::min<std::int64_t>(in_, bj * 32 + 32); ++j)
              if (mask[static_cast<std::size_t>(i * in_ + j)]) {
                any = true;
                break;
              }
          if (any) kept.push_back(bi * bcols + bj);
        }
      kept_count_ = static_cast<std::int32_t>(kept.size());
      kept_blocks_ = to_device(kept.data(), kept.size(), exec);
      block_cols_ = bcols;
    }
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));  // the pageable uploads above
    detail::zero(gw_.data(), gw_.size(), exec);            // pruned entries' gradients stay 0
    kernels::mask_and_round(w_.data(), mask_.empty() ? nullptr : mask_.data(), low_.data(), out_ * in_, exec);
  }
  bool has_mask() const noexcept { return !mask_.empty(); }

  // Keep only the biases where mask[i] != 0 (empty: all): a removed output (a pruned filter)
  // then computes exactly act(0), so the layers after it may drop the channel.
  void set_bias_mask(cuda_exec exec, std::vector<std::uint8_t> const& mask) {
    home_.check(exec, "mixed_linear::set_bias_mask");
    SDNN_EXPECTS(mask.empty() || std::int64_t(mask.size()) == out_, "mixed_linear::set_bias_mask: the mask has ",
                 mask.size(), " entries, the layer ", out_, " outputs");
    bias_mask_ = mask.empty() ? device_buffer<std::uint8_t>() : to_device(mask.data(), mask.size(), exec);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));  // the pageable upload
    if (!bias_mask_.empty())
      kernels::mask_and_round(b_.data(), bias_mask_.data(), static_cast<T*>(nullptr), out_, exec);
  }
  // How many 32 x 32 blocks the weight gradient visits (0: it is a dense product).
  std::int32_t sddmm_blocks() const noexcept { return kept_count_; }

  // A group-lasso term lambda * sum_g ||W_g|| added to the loss (lambda 0: none).
  void set_group_lasso(cuda_exec exec, weight_groups const& g, float lambda) {
    home_.check(exec, "mixed_linear::set_group_lasso");
    SDNN_EXPECTS(std::isfinite(lambda) && lambda >= 0.0f, "mixed_linear::set_group_lasso: the penalty must be >= 0, got ",
                 lambda);
    SDNN_EXPECTS_DIMS(g.rows == out_ && g.cols == in_, "mixed_linear::set_group_lasso: the groups cover ", g.rows,
                      " x ", g.cols, ", the layer is ", out_, " x ", in_);
    lambda_ = lambda;
    groups_ = g.count();
    gptr_ = to_device(g.ptr.data(), g.ptr.size(), exec);
    gidx_ = to_device(g.idx.data(), g.idx.size(), exec);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
  }
  void set_group_lasso_penalty(float lambda) {
    SDNN_EXPECTS(std::isfinite(lambda) && lambda >= 0.0f, "mixed_linear: the group-lasso penalty must be >= 0, got ",
                 lambda);
    lambda_ = lambda;
  }

  // P = X W^T (float), Y = act(P + b) as Out (T for a hidden layer, float for the logits).
  template <class Out>
  void forward(cuda_exec exec, dense_view<T const> x, dense_view<float> p, dense_view<Out> y) const {
    home_.check(exec, "mixed_linear::forward");
    detail::gemm_f32<T>(exec, false, true, x.rows, out_, in_, x.data, x.ld, low_.data(), in_, p.data, p.ld);
    kernels::bias_act_forward<Out>(p, b_.data(), relu_, y, exec);
  }

  // From dY (float, scaled by the loss scale or to be scaled by *scale): dP (T scratch), the
  // bias and weight gradients, and dX (float, optional). y: this layer's stored output (T;
  // nullptr for a layer without activation).
  void backward(cuda_exec exec, dense_view<T const> x, T const* y, std::int64_t ldy, dense_view<float const> dy,
                float const* scale, dense_view<T> dp, dense_view<float> dx) {
    home_.check(exec, "mixed_linear::backward");
    if (auto const need = static_cast<std::size_t>(kernels::act_backward_scratch(dy.rows, dy.cols)); need > partial_.size())
      partial_ = device_buffer<float>(need, exec);  // once per larger batch: a tall (convolution) GEMM's bias sums
    kernels::act_backward<T, T>(dy, relu_ ? y : nullptr, ldy, scale, dp, gb_.data(), exec, partial_.data());
    dense_view<T const> const cdp = dp;
    if constexpr (!std::is_same_v<T, float>) {
      if (kept_count_ > 0 && x.rows % 16 == 0 && x.ld % 8 == 0 && reinterpret_cast<std::uintptr_t>(x.data) % 32 == 0) {
        kernels::block_sddmm<T>(x, cdp, kept_blocks_.data(), kept_count_, block_cols_, gw_.data(), in_, out_, in_,
                                exec);
      } else {
        dense_dw(exec, x, cdp);
      }
    } else {
      dense_dw(exec, x, cdp);
    }
    if (dx.data) detail::gemm_f32<T>(exec, false, false, x.rows, in_, out_, cdp.data, cdp.ld, low_.data(), in_, dx.data, dx.ld);
  }

  void unscale_check(cuda_exec exec, step_state* st) {
    kernels::unscale_check(gw_.data(), out_ * in_, st, exec);
    kernels::unscale_check(gb_.data(), out_, st, exec);
  }
  void add_penalty(cuda_exec exec, step_state const* st) {
    if (lambda_ > 0.0f)
      kernels::group_lasso_grad(w_.data(), gptr_.data(), gidx_.data(), groups_, lambda_, gw_.data(), st, exec);
  }
  void step(cuda_exec exec, optimizer_rule const& rule, step_state const* st) {
    kernels::optimizer_step<T>(w_.data(), gw_.data(), mw_.data(), vw_.data(), mask_.empty() ? nullptr : mask_.data(),
                               low_.data(), out_ * in_, rule, st, exec);
    kernels::optimizer_step<T>(b_.data(), gb_.data(), mb_.data(), vb_.data(),
                               bias_mask_.empty() ? nullptr : bias_mask_.data(), nullptr, out_, rule, st, exec);
  }

 private:
  void dense_dw(cuda_exec exec, dense_view<T const> x, dense_view<T const> dp) {
    // dW (out x in) = dP^T X: A = dP stored (B x out) transposed, B = X (B x in).
    detail::gemm_f32<T>(exec, true, false, out_, in_, x.rows, dp.data, dp.ld, x.data, x.ld, gw_.data(), in_);
  }
  std::vector<float> download_vector(device_buffer<float> const& d, cuda_exec exec, char const* who) const {
    home_.check(exec, who);
    std::vector<float> h(d.size());
    SDNN_CUDA_CHECK(cudaMemcpyAsync(h.data(), d.data(), h.size() * sizeof(float), cudaMemcpyDeviceToHost, exec.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    return h;
  }
  dense_matrix<float> download(device_buffer<float> const& d, cuda_exec exec) const {
    home_.check(exec, "mixed_linear");
    dense_matrix<float> h(out_, in_);
    SDNN_CUDA_CHECK(
        cudaMemcpyAsync(h.view().data, d.data(), d.size() * sizeof(float), cudaMemcpyDeviceToHost, exec.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    return h;
  }

  std::int64_t in_, out_;
  bool relu_;
  device_buffer<float> w_, gw_, mw_, vw_, b_, gb_, mb_, vb_;
  device_buffer<T> low_;
  device_buffer<std::uint8_t> mask_, bias_mask_;
  device_buffer<float> partial_;  // act_backward's chunk sums
  device_buffer<std::int32_t> kept_blocks_;
  std::int32_t kept_count_ = 0, block_cols_ = 0;
  device_buffer<std::int64_t> gptr_, gidx_;
  std::int64_t groups_ = 0;
  float lambda_ = 0.0f;
  detail::home_stream home_;
};

namespace detail {

inline void check_optimizer(optimizer_rule const& o, char const* who) {
  SDNN_EXPECTS(std::isfinite(o.lr) && o.lr > 0.0f, who, ": the learning rate must be > 0, got ", o.lr);
  SDNN_EXPECTS(o.momentum >= 0.0f && o.momentum < 1.0f, who, ": the momentum must be in [0, 1), got ", o.momentum);
  SDNN_EXPECTS(o.beta1 >= 0.0f && o.beta1 < 1.0f && o.beta2 >= 0.0f && o.beta2 < 1.0f, who,
               ": Adam's betas must be in [0, 1), got ", o.beta1, " and ", o.beta2);
  SDNN_EXPECTS(o.eps > 0.0f && o.weight_decay >= 0.0f, who, ": eps must be > 0 and the weight decay >= 0, got ", o.eps,
               " and ", o.weight_decay);
}
// A model's optimizer changed from `from` to `to`: `to` is valid and keeps the kind and the betas.
inline void check_optimizer_change(optimizer_rule const& from, optimizer_rule const& to, char const* who) {
  check_optimizer(to, who);
  SDNN_EXPECTS(to.kind == from.kind && to.beta1 == from.beta1 && to.beta2 == from.beta2, who,
               "::set_optimizer: only the learning rate, momentum, eps and weight decay may change");
}

// The device bookkeeping a model's training steps share: the step state (loss scale, counters,
// the first non-finite loss), the batch loss and the count of correct predictions; and the parts
// of a step that are the same for every model of mixed_linear layers.
class step_book {
 public:
  step_book(loss_scale_rule const& ls, cuda_exec exec) : loss_(1, exec), bad_row_(1, exec), correct_(1, exec) {
    SDNN_CUDA_CHECK(cudaMemsetAsync(bad_row_.data(), 0xff, sizeof(unsigned long long), exec.stream));
    step_state const s0 = initial_state(ls);
    state_ = to_device(&s0, 1, exec);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));  // the pageable upload
  }
  step_state* state() { return state_.data(); }

  // The mean softmax cross-entropy of the logits (B x classes), tracked in the state, and its
  // gradient written over the logits. Enqueued.
  void loss_gradient(cuda_exec exec, dense_view<float> logits, std::int32_t const* labels) {
    ops::softmax_cross_entropy_async(exec, dense_view<float const>(logits), labels, loss_.data(), logits,
                                     bad_row_.data());
    kernels::track_loss(loss_.data(), state_.data(), exec);
  }
  // After the backward of every layer: each one's gradients unscaled and checked, then the
  // penalties added. Enqueued.
  template <class Layers>
  void finish_gradients(cuda_exec exec, Layers& layers) {
    for (auto& L : layers) L.unscale_check(exec, state());
    for (auto& L : layers) L.add_penalty(exec, state());
  }
  // Every layer's optimizer step (skipped on a non-finite gradient), then the loss-scale update.
  // Enqueued.
  template <class Layers>
  void step(cuda_exec exec, Layers& layers, mixed_options const& opt) {
    for (auto& L : layers) L.step(exec, opt.optimizer, state());
    kernels::finish_step(state_.data(), opt.loss_scale, opt.optimizer, exec);
  }

  // How many of the rows of data are classified as their label, in batches of max_batch rows;
  // logits(batch) gives a batch's logits (device). Synchronises.
  template <class T, class Logits>
  std::int64_t count_correct(cuda_exec exec, std::int64_t max_batch, dense_view<T const> data,
                             std::int32_t const* labels, Logits&& logits) {
    SDNN_CUDA_CHECK(cudaMemsetAsync(correct_.data(), 0, sizeof(unsigned long long), exec.stream));
    for (std::int64_t r = 0; r < data.rows; r += max_batch) {
      std::int64_t const b = std::min(max_batch, data.rows - r);
      kernels::count_correct(logits(dense_view<T const>{b, data.cols, data.ld, data.data + r * data.ld}), labels + r,
                             correct_.data(), exec);
    }
    unsigned long long c = 0;
    SDNN_CUDA_CHECK(cudaMemcpyAsync(&c, correct_.data(), sizeof(c), cudaMemcpyDeviceToHost, exec.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    return static_cast<std::int64_t>(c);
  }

  // The bookkeeping since the previous call (the loss mean restarts); nonfinite_loss naming the
  // step if a loss since the model's start was NaN or Inf. Synchronises.
  mixed_stats take(cuda_exec exec, char const* who) {
    step_state s;
    SDNN_CUDA_CHECK(cudaMemcpyAsync(&s, state_.data(), sizeof(s), cudaMemcpyDeviceToHost, exec.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    if (s.first_bad_step >= 0)
      throw nonfinite_loss(s.first_bad_step, ::sdnn::detail::concat(who, ": the loss of training step ",
                                                                     s.first_bad_step,
                                                                     " is not finite (NaN or Inf); training stopped"));
    mixed_stats r;
    r.mean_loss = s.loss_count ? s.loss_sum / double(s.loss_count) : 0.0;
    r.losses = s.loss_count;
    r.step = s.step;
    r.iteration = s.iteration;
    r.skipped = s.skipped;
    r.loss_scale = s.scale;
    s.loss_sum = 0.0;
    s.loss_count = 0;
    SDNN_CUDA_CHECK(cudaMemcpyAsync(state_.data(), &s, sizeof(s), cudaMemcpyHostToDevice, exec.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    return r;
  }

 private:
  device_buffer<double> loss_;
  device_buffer<unsigned long long> bad_row_, correct_;
  device_buffer<step_state> state_;
};

}  // namespace detail

// A chain of mixed_linear layers (ReLU after every one but the last) trained with mean
// softmax cross-entropy on integer labels in [0, classes).
template <class T>
class mixed_mlp {
 public:
  // widths: in, hidden..., classes (at least two entries). Layer l is seeded with seed + l.
  mixed_mlp(std::vector<std::int64_t> const& widths, std::uint64_t seed, mixed_options const& opt, cuda_exec exec)
      : opt_(opt), book_(opt.loss_scale, exec), home_{exec.stream} {
    SDNN_EXPECTS(widths.size() >= 2, "mixed_mlp: need an input width and at least one layer, got ", widths.size(),
                 " widths");
    SDNN_EXPECTS(opt.max_batch >= 1, "mixed_mlp: max_batch must be >= 1, got ", opt.max_batch);
    detail::check_optimizer(opt.optimizer, "mixed_mlp");
    for (std::size_t l = 0; l + 1 < widths.size(); ++l)
      layers_.emplace_back(widths[l], widths[l + 1], l + 2 < widths.size(), seed + l, exec);
    for (auto const& L : layers_) {
      auto const n = static_cast<std::size_t>(opt.max_batch * L.out_features());
      p_.emplace_back(n, exec);
      y_.emplace_back(n, exec);
      dy_.emplace_back(n, exec);
      dp_.emplace_back(n, exec);
    }
    logits_ = device_buffer<float>(static_cast<std::size_t>(opt.max_batch * classes()), exec);
  }

  std::size_t layer_count() const noexcept { return layers_.size(); }
  mixed_linear<T>& layer(std::size_t l) { return layers_.at(l); }
  mixed_linear<T> const& layer(std::size_t l) const { return layers_.at(l); }
  std::int64_t in_features() const { return layers_.front().in_features(); }
  std::int64_t classes() const { return layers_.back().out_features(); }
  mixed_options const& options() const noexcept { return opt_; }

  void set_optimizer(optimizer_rule const& o) {
    detail::check_optimizer_change(opt_.optimizer, o, "mixed_mlp");
    opt_.optimizer = o;
  }

  // Forward, loss and backward of one batch (x: device, B x in with B <= max_batch; labels:
  // device int32 [B]); the gradients are unscaled and checked, the penalties added. Enqueued.
  void compute_gradients(cuda_exec exec, dense_view<T const> x, std::int32_t const* labels) {
    home_.check(exec, "mixed_mlp::compute_gradients");
    std::int64_t const B = check_batch(x);
    logits(exec, x);
    dense_view<float> dlog{B, classes(), classes(), logits_.data()};  // dlogits overwrite the logits
    book_.loss_gradient(exec, dlog, labels);
    auto* st = book_.state();
    for (std::size_t l = layers_.size(); l-- > 0;) {
      auto& L = layers_[l];
      dense_view<T const> xin = l == 0 ? x : act(l - 1, B);
      dense_view<float const> dy = l + 1 == layers_.size() ? dense_view<float const>(dlog)
                                                            : dense_view<float const>{B, L.out_features(), L.out_features(), dy_[l].data()};
      dense_view<T> dp{B, L.out_features(), L.out_features(), dp_[l].data()};
      dense_view<float> dx = l == 0 ? dense_view<float>{} : dense_view<float>{B, L.in_features(), L.in_features(), dy_[l - 1].data()};
      L.backward(exec, xin, y_[l].data(), L.out_features(), dy, l + 1 == layers_.size() ? &st->scale : nullptr, dp, dx);
    }
    book_.finish_gradients(exec, layers_);
  }

  // The optimizer step of the gradients compute_gradients left (skipped on a non-finite one),
  // then the loss-scale update. Enqueued.
  void apply_step(cuda_exec exec) {
    home_.check(exec, "mixed_mlp::apply_step");
    book_.step(exec, layers_, opt_);
  }

  void train_step(cuda_exec exec, dense_view<T const> x, std::int32_t const* labels) {
    compute_gradients(exec, x, labels);
    apply_step(exec);
  }

  // The logits (float, B x classes, device) of a batch; valid until the next call.
  dense_view<float const> logits(cuda_exec exec, dense_view<T const> x) {
    home_.check(exec, "mixed_mlp::logits");
    std::int64_t const B = check_batch(x);
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      auto const& L = layers_[l];
      dense_view<T const> xin = l == 0 ? x : act(l - 1, B);
      dense_view<float> p{B, L.out_features(), L.out_features(), p_[l].data()};
      if (l + 1 < layers_.size())
        L.forward(exec, xin, p, dense_view<T>{B, L.out_features(), L.out_features(), y_[l].data()});
      else
        L.forward(exec, xin, p, dense_view<float>{B, classes(), classes(), logits_.data()});
    }
    return {B, classes(), classes(), logits_.data()};
  }

  // Mean loss of one batch, without a step (for checks). Synchronises.
  double loss(cuda_exec exec, dense_view<T const> x, std::int32_t const* labels) {
    std::int64_t const B = check_batch(x);
    logits(exec, x);
    return ops::softmax_cross_entropy(exec, dense_view<float const>{B, classes(), classes(), logits_.data()}, labels);
  }

  // How many of the n rows of data (device, n x in) are classified as their label, in batches
  // of max_batch. Synchronises.
  std::int64_t count_correct(cuda_exec exec, dense_view<T const> data, std::int32_t const* labels) {
    home_.check(exec, "mixed_mlp::count_correct");
    return book_.count_correct(exec, opt_.max_batch, data, labels, [&](dense_view<T const> xb) { return logits(exec, xb); });
  }

  // The bookkeeping since the previous call (the loss mean restarts). Throws nonfinite_loss,
  // naming the step, if a loss since the model's start was NaN or Inf. Synchronises.
  mixed_stats take_stats(cuda_exec exec) {
    home_.check(exec, "mixed_mlp::take_stats");
    return book_.take(exec, "mixed_mlp");
  }

 private:
  std::int64_t check_batch(dense_view<T const> x) const {
    SDNN_EXPECTS_DIMS(x.cols == in_features(), "mixed_mlp: the batch has ", x.cols, " features, the model takes ",
                      in_features());
    SDNN_EXPECTS(x.rows >= 1 && x.rows <= opt_.max_batch, "mixed_mlp: a batch holds 1 to max_batch = ", opt_.max_batch,
                 " rows, got ", x.rows);
    return x.rows;
  }
  dense_view<T const> act(std::size_t l, std::int64_t B) const {
    return {B, layers_[l].out_features(), layers_[l].out_features(), y_[l].data()};
  }

  mixed_options opt_;
  std::vector<mixed_linear<T>> layers_;
  std::vector<device_buffer<float>> p_, dy_;
  std::vector<device_buffer<T>> y_, dp_;
  device_buffer<float> logits_;
  detail::step_book book_;
  detail::home_stream home_;
};

}  // namespace sdnn::train
