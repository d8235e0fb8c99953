// sdnn/train/op/mixed_cnn.cuh - a small convolutional network trained on the device in mixed
// precision: NHWC convolution layers (bias, ReLU, optional 2x2 max-pool) and one linear
// classifier, each a mixed_linear over its GEMM view, so everything mixed_linear offers holds
// here too (float master weights and their T copy, masks, the 32 x 32 block SDDMM for the weight
// gradient of a block mask, group lasso, SGD / Adam, the loss scale on the device). A convolution
// runs as im2col + GEMM: its weight is the K x R*S*C matrix with columns in (r, s, c) order
// (conv::filter_to_gemm's, and io::sparse_model's conv2d layout), so conv_channel_block_groups
// and conv_filter_groups name its groups. The backward is the GEMM's, col2im (a gather) and the
// pool's. A training step is enqueued without a host round trip; take_stats() reads back.
// Every call takes the stream the object was made on.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "sdnn/conv/kernel/nhwc_epilogue.cuh"
#include "sdnn/conv/shape.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/formats/dense.hpp"
#include "sdnn/train/kernel/conv_training.cuh"
#include "sdnn/train/op/mixed_mlp.cuh"

namespace sdnn::train {

// One convolution layer of a mixed_cnn: K output channels, a square kernel, stride 1, `pad` on
// every side, ReLU, and a 2x2 stride-2 max-pool after it or not.
struct conv_layer_spec {
  std::int32_t out_channels = 32;
  std::int32_t kernel = 3;
  std::int32_t pad = 1;
  bool pool = true;
};

template <class T>
class mixed_cnn {
 public:
  // An H x W x C image (one row of H*W*C values, NHWC) through `convs` and a linear classifier
  // of `classes` outputs. Layer l (convolutions first, the classifier last) is seeded seed + l.
  mixed_cnn(int H, int W, int C, std::vector<conv_layer_spec> const& convs, std::int64_t classes, std::uint64_t seed,
            mixed_options const& opt, cuda_exec exec)
      : opt_(opt), book_(opt.loss_scale, exec), home_{exec.stream} {
    SDNN_EXPECTS(!convs.empty(), "mixed_cnn: need at least one convolution layer");
    SDNN_EXPECTS(classes >= 1, "mixed_cnn: need at least one class, got ", classes);
    SDNN_EXPECTS(opt.max_batch >= 1, "mixed_cnn: max_batch must be >= 1, got ", opt.max_batch);
    detail::check_optimizer(opt.optimizer, "mixed_cnn");
    int h = H, w = W, c = C;
    std::int64_t const B = opt.max_batch;
    for (std::size_t l = 0; l < convs.size(); ++l) {
      auto const& sp = convs[l];
      SDNN_EXPECTS(sp.out_channels >= 1 && sp.kernel >= 1 && sp.pad >= 0, "mixed_cnn: layer ", l,
                   " needs out_channels >= 1, kernel >= 1 and pad >= 0, got ", sp.out_channels, ", ", sp.kernel,
                   ", ", sp.pad);
      conv::conv_shape const s = conv::conv_shape::conv2d(c, h, w, sp.out_channels, sp.kernel, sp.kernel, 1, sp.pad);
      SDNN_EXPECTS(!sp.pool || (s.OH() >= 2 && s.OW() >= 2), "mixed_cnn: layer ", l, "'s output is ", s.OH(), " x ",
                   s.OW(), ", too small for a 2x2 pool");
      conv_stage st{s, sp.pool};
      std::int64_t const rows = B * s.OH() * s.OW();
      st.col = device_buffer<T>(static_cast<std::size_t>(rows * s.filter_size()), exec);
      st.y = device_buffer<T>(static_cast<std::size_t>(rows * s.K), exec);
      st.dy = device_buffer<float>(static_cast<std::size_t>(rows * s.K), exec);
      st.dp = device_buffer<T>(static_cast<std::size_t>(rows * s.K), exec);
      if (l > 0) st.dcol = device_buffer<float>(static_cast<std::size_t>(rows * s.filter_size()), exec);
      h = sp.pool ? s.OH() / 2 : s.OH();
      w = sp.pool ? s.OW() / 2 : s.OW();
      c = s.K;
      if (sp.pool) {
        st.pooled = device_buffer<T>(static_cast<std::size_t>(B * h * w * c), exec);
        st.dout = device_buffer<float>(static_cast<std::size_t>(B * h * w * c), exec);
      }
      convs_.push_back(std::move(st));
      layers_.emplace_back(s.filter_size(), s.K, true, seed + l, exec);
    }
    flat_ = std::int64_t(h) * w * c;
    layers_.emplace_back(flat_, classes, false, seed + convs.size(), exec);
    logits_ = device_buffer<float>(static_cast<std::size_t>(B * classes), exec);
    fc_p_ = device_buffer<float>(static_cast<std::size_t>(B * classes), exec);
    dp_fc_ = device_buffer<T>(static_cast<std::size_t>(B * classes), exec);
  }

  // The layers as mixed_linear: 0 .. conv_count()-1 the convolutions (K x R*S*C), then the classifier.
  std::size_t layer_count() const noexcept { return layers_.size(); }
  std::size_t conv_count() const noexcept { return convs_.size(); }
  mixed_linear<T>& layer(std::size_t l) { return layers_.at(l); }
  mixed_linear<T> const& layer(std::size_t l) const { return layers_.at(l); }
  conv::conv_shape const& shape(std::size_t l) const { return convs_.at(l).s; }
  bool pooled(std::size_t l) const { return convs_.at(l).pool; }
  std::int64_t in_features() const { return convs_.front().s.in_features(); }
  std::int64_t flat_features() const noexcept { return flat_; }  // the classifier's input
  std::int64_t classes() const { return layers_.back().out_features(); }
  mixed_options const& options() const noexcept { return opt_; }

  void set_optimizer(optimizer_rule const& o) {
    detail::check_optimizer_change(opt_.optimizer, o, "mixed_cnn");
    opt_.optimizer = o;
  }

  // The logits (float, B x classes, device) of a batch x (B x H*W*C, NHWC rows); valid until the next call.
  dense_view<float const> logits(cuda_exec exec, dense_view<T const> x) {
    home_.check(exec, "mixed_cnn::logits");
    std::int64_t const B = check_batch(x);
    T const* in = x.data;
    for (std::size_t l = 0; l < convs_.size(); ++l) {
      auto& c = convs_[l];
      std::int64_t const rows = B * c.s.OH() * c.s.OW();
      kernels::im2col_nhwc(in, c.s, B, c.col.data(), exec);
      // the float product goes through dy (free until the backward)
      layers_[l].forward(exec, col(l, B), dense_view<float>{rows, c.s.K, c.s.K, c.dy.data()},
                         dense_view<T>{rows, c.s.K, c.s.K, c.y.data()});
      if (c.pool) conv::detail::nhwc_max_pool2x2(c.y.data(), c.pooled.data(), B, c.s.OH(), c.s.OW(), c.s.K, exec);
      in = c.pool ? c.pooled.data() : c.y.data();
    }
    dense_view<float> logits{B, classes(), classes(), logits_.data()};
    layers_.back().forward(exec, dense_view<T const>{B, flat_, flat_, in},
                           dense_view<float>{B, classes(), classes(), fc_p_.data()}, logits);
    return logits;
  }

  // Forward, loss and backward of one batch (labels: device int32 [B]); the gradients are
  // unscaled and checked, the penalties added. Enqueued.
  void compute_gradients(cuda_exec exec, dense_view<T const> x, std::int32_t const* labels) {
    std::int64_t const B = check_batch(x);
    logits(exec, x);
    dense_view<float> dlog{B, classes(), classes(), logits_.data()};  // dlogits overwrite the logits
    book_.loss_gradient(exec, dlog, labels);
    auto* st = book_.state();
    auto& last = convs_.back();
    float* dflat = last.pool ? last.dout.data() : last.dy.data();
    layers_.back().backward(exec, dense_view<T const>{B, flat_, flat_, last.pool ? last.pooled.data() : last.y.data()},
                            nullptr, classes(), dlog, &st->scale, dense_view<T>{B, classes(), classes(), dp_fc_.data()},
                            dense_view<float>{B, flat_, flat_, dflat});
    for (std::size_t l = convs_.size(); l-- > 0;) {
      auto& c = convs_[l];
      int const OH = c.s.OH(), OW = c.s.OW();
      std::int64_t const rows = B * OH * OW;
      if (c.pool) kernels::max_pool2x2_backward(c.y.data(), c.dout.data(), B, OH, OW, c.s.K, c.dy.data(), exec);
      dense_view<float> dcol = l == 0 ? dense_view<float>{} : dense_view<float>{rows, c.s.filter_size(), c.s.filter_size(), c.dcol.data()};
      layers_[l].backward(exec, col(l, B), c.y.data(), c.s.K, dense_view<float const>{rows, c.s.K, c.s.K, c.dy.data()},
                          nullptr, dense_view<T>{rows, c.s.K, c.s.K, c.dp.data()}, dcol);
      if (l > 0) {
        auto& prev = convs_[l - 1];
        kernels::col2im_nhwc(c.dcol.data(), c.s, B, prev.pool ? prev.dout.data() : prev.dy.data(), exec);
      }
    }
    book_.finish_gradients(exec, layers_);
  }

  // The optimizer step of the gradients compute_gradients left (skipped on a non-finite one),
  // then the loss-scale update. Enqueued.
  void apply_step(cuda_exec exec) {
    home_.check(exec, "mixed_cnn::apply_step");
    book_.step(exec, layers_, opt_);
  }

  void train_step(cuda_exec exec, dense_view<T const> x, std::int32_t const* labels) {
    compute_gradients(exec, x, labels);
    apply_step(exec);
  }

  // Mean loss of one batch, without a step (for checks). Synchronises.
  double loss(cuda_exec exec, dense_view<T const> x, std::int32_t const* labels) {
    auto const lg = logits(exec, x);
    return ops::softmax_cross_entropy(exec, lg, labels);
  }

  // How many of the n rows of data (device, n x H*W*C) are classified as their label, in
  // batches of max_batch. Synchronises.
  std::int64_t count_correct(cuda_exec exec, dense_view<T const> data, std::int32_t const* labels) {
    home_.check(exec, "mixed_cnn::count_correct");
    return book_.count_correct(exec, opt_.max_batch, data, labels, [&](dense_view<T const> xb) { return logits(exec, xb); });
  }

  // The bookkeeping since the previous call; nonfinite_loss naming the step. Synchronises.
  mixed_stats take_stats(cuda_exec exec) {
    home_.check(exec, "mixed_cnn::take_stats");
    return book_.take(exec, "mixed_cnn");
  }

 private:
  struct conv_stage {
    conv::conv_shape s;
    bool pool = false;
    device_buffer<T> col, y, dp, pooled;
    device_buffer<float> dy, dcol, dout;  // dy: also the forward's float product
  };
  std::int64_t check_batch(dense_view<T const> x) const {
    SDNN_EXPECTS_DIMS(x.cols == in_features() && x.ld >= x.cols, "mixed_cnn: the batch has ", x.cols,
                      " values per image, the model takes ", in_features());
    SDNN_EXPECTS(x.rows >= 1 && x.rows <= opt_.max_batch, "mixed_cnn: a batch holds 1 to max_batch = ", opt_.max_batch,
                 " images, got ", x.rows);
    SDNN_EXPECTS(x.ld == x.cols, "mixed_cnn: the images must be packed rows (ld = H*W*C = ", x.cols, "), got ld ", x.ld);
    return x.rows;
  }
  dense_view<T const> col(std::size_t l, std::int64_t B) const {
    auto const& c = convs_[l];
    std::int64_t const k = c.s.filter_size();
    return {B * c.s.OH() * c.s.OW(), k, k, c.col.data()};
  }
  mixed_options opt_;
  std::vector<conv_stage> convs_;
  std::vector<mixed_linear<T>> layers_;
  std::int64_t flat_ = 0;
  device_buffer<float> logits_, fc_p_;  // fc_p_: the classifier's float product
  device_buffer<T> dp_fc_;
  detail::step_book book_;
  detail::home_stream home_;
};

}  // namespace sdnn::train
