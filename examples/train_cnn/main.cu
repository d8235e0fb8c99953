// train_cnn: learn the structure a sparse convolution can skip, on the device, and measure what
// it buys. Trains a small CNN (28x28x1 -> 3x3 convolutions of 64, 128, 128 channels, each with
// ReLU and a 2x2 max-pool -> a linear classifier) on the shipped MNIST digits in bf16 mixed
// precision (train::mixed_cnn), then from the dense model makes one sparse model per structure
// and sparsity: 32 x 32 channel blocks and blocks of 32 whole filters (group lasso + gradual
// pruning + fine-tune), unstructured and 2:4 (magnitude pruning + fine-tune). Reports test
// accuracy with float, bf16 and int8 (per-row) weights, saves each model as an .sdnn file
// (io/sparse_model.hpp; a filter-pruned model without its removed channels), loads it back and
// times it end to end in fp16 with the automatic convolution plans against the dense model
// through cuDNN fp16 in the same process. --help: the options.
#include <sdnn/conv/filter_removal.hpp>
#include <sdnn/conv/op/conv16_auto.cuh>
#include <sdnn/io/mnist_idx.hpp>
#include <sdnn/io/sparse_model.hpp>
#include <sdnn/linear/op/tc_auto.cuh>
#include <sdnn/train/op/mixed_cnn.cuh>
#include <sdnn/train/op/structured_sparsity.hpp>

#include "../common/example_util.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#ifndef SDNN_EXAMPLE_DATA_DIR
#define SDNN_EXAMPLE_DATA_DIR "tests/data"
#endif

using namespace sdnn;
using namespace sdnn_example;

namespace {

struct options : training_options {
  std::vector<std::int64_t> channels{64, 128, 128};
  options() {
    penalty = 2e-4f;
    structures = {"channel_blocks", "filters", "unstructured", "sparse24"};
    bench_batches = {1, 32, 128, 1024};
    reps = 50;
    data_dir = SDNN_EXAMPLE_DATA_DIR;
  }
};

void usage() {
  std::cout
      << "usage: train_cnn [options]\n"
         "  --channels a,b,c        output channels of the 3x3 convolutions, each with ReLU and a 2x2 pool\n"
         "                          (default 64,128,128; the layers after the first need multiples of 32)\n"
         "  --batch B               training batch (default 128)\n"
         "  --epochs E              dense epochs (default 8)\n"
         "  --prune-epochs P        epochs of the gradual pruning (group lasso for the group structures) (default 4)\n"
         "  --finetune-epochs F     fine-tune epochs with the final masks (default 3)\n"
         "  --lr X --finetune-lr X  Adam learning rates (default 1e-3, 3e-4)\n"
         "  --penalty X             group-lasso coefficient (default 2e-4)\n"
         "  --structures a,b        of channel_blocks, filters, unstructured, sparse24 (default all four)\n"
         "  --sparsities s,t        target sparsities (default 0.75,0.9,0.95; 2:4 is 0.5). channel_blocks,\n"
         "                          unstructured: of the convolutions after the first; filters: the share of\n"
         "                          32 x 32 channel blocks of those layers that removing whole filters (blocks\n"
         "                          of 32, 1 - sqrt(1 - s) of every layer's) empties\n"
         "  --bench-batches n,m     inference batches timed (default 1,32,128,1024; none: --bench-batches 0)\n"
         "  --reps R                timed repeats per point (default 50)\n"
         "  --train N --test N      seeded split of the 10000 shipped digits (default 8000 / 2000)\n"
         "  --seed S                split, initialisation and batch order (default 1)\n"
         "  --min-accuracy A        exit 1 if a reported bf16 test accuracy is below A (default 0)\n"
         "  --inject-nan-step S     puts a NaN into a weight before training step S, to test the stop:\n"
         "                          the message names the step, the last good epoch's model is written\n"
         "                          to MODEL_DIR/train_cnn_checkpoint.sdnn, the exit status is 3\n"
         "  --data DIR --model-dir DIR --json FILE --markdown FILE --commit C\n";
}

bool parse(int argc, char** argv, options& o) {
  if (!parse_training_options(argc, argv, o, {"channel_blocks", "filters", "unstructured", "sparse24"}, usage,
                              [&](std::string const& k, std::string const& v) {
                                if (k != "--channels") return false;
                                o.channels = split_list<std::int64_t>(v);
                                return true;
                              }))
    return false;
  SDNN_EXPECTS(o.channels.size() >= 2 && o.channels.size() <= 3, "--channels takes two or three layers (each pools, "
               "28 -> 14 -> 7 -> 3), got ", o.channels.size());
  for (std::size_t l = 0; l < o.channels.size(); ++l)
    SDNN_EXPECTS(o.channels[l] >= 32 && o.channels[l] % 32 == 0 && o.channels[l] <= 1024,
                 "--channels: every layer needs a multiple of 32 channels in [32, 1024], got ", o.channels[l]);
  for (auto n : o.bench_batches) SDNN_EXPECTS(n >= 1 && n <= 1024, "--bench-batches: each in [1, 1024], got ", n);
  return true;
}

host_model last_good;
std::vector<train::conv_layer_spec> cnn_arch;
std::string checkpoint_path = "train_cnn_checkpoint.sdnn";

struct result {
  std::string name, structure;
  double target = 0, sparsity = 0, block_sparsity = 0;  // over the convolutions after the first
  double flops_share = 1;                                // multiply-adds of the saved model / the dense one's
  double acc_f32 = 0, acc_bf16 = 0, acc_int8 = 0, acc_loaded = 0;
  double seconds = 0;
  std::string file, kept;
  std::vector<std::pair<std::int64_t, double>> ms;  // batch -> median ms end to end
  std::vector<double> base_ms;                       // the baseline's, timed alternately with it
  std::vector<double> eager_ms, eager_base_ms;       // the same, launched call by call (not as graphs)
  std::vector<std::string> paths;
};

// The 32 x 32 channel blocks of the layer after the first (C a multiple of 32).
train::weight_groups channel_blocks(conv::conv_shape const& s) {
  return train::conv_channel_block_groups(s.K, s.R, s.S, s.C, 32, 32);
}
// Blocks of 32 whole filters.
train::weight_groups filter_blocks(conv::conv_shape const& s) {
  return train::conv_channel_block_groups(s.K, s.R, s.S, s.C, 32, s.C);
}

// Zero weights and empty 32 x 32 channel blocks over the convolutions after the first, where a
// weight that reads a removed channel (the previous layer's filter and bias are zero, so the
// channel is 0) counts as zero: the file's model does not hold it.
std::pair<double, double> conv_sparsity(host_model const& h, train::mixed_cnn<bf16> const& m) {
  double z = 0, n = 0, zb = 0, nb = 0;
  for (std::size_t l = 1; l < m.conv_count(); ++l) {
    dense_matrix<float> w(h.w[l].rows(), h.w[l].cols());
    std::copy(h.w[l].data(), h.w[l].data() + w.rows() * w.cols(), w.data());
    auto const& prev = h.w[l - 1];
    int const C = m.shape(l).C;
    for (int c = 0; c < C; ++c) {
      bool dead = h.b[l - 1][std::size_t(c)] == 0.0f;
      for (std::int64_t j = 0; j < prev.cols() && dead; ++j) dead = prev(c, j) == 0.0f;
      if (dead)
        for (std::int64_t i = 0; i < w.rows(); ++i)
          for (std::int64_t j = c; j < w.cols(); j += C) w(i, j) = 0.0f;
    }
    for (std::int64_t i = 0; i < w.rows(); ++i)
      for (std::int64_t j = 0; j < w.cols(); ++j, ++n) z += w(i, j) == 0.0f;
    auto const norms = train::group_norms(w.view(), channel_blocks(m.shape(l)));
    for (float v : norms) zb += v == 0.0f;
    nb += double(norms.size());
  }
  return {n > 0 ? z / n : 0, nb > 0 ? zb / nb : 0};
}

// ---- files and inference ---------------------------------------------------------------------

std::vector<conv::gemm_conv_layer> to_gemm_layers(host_model const& h, train::mixed_cnn<bf16> const& m) {
  std::vector<conv::gemm_conv_layer> v;
  for (std::size_t l = 0; l < m.conv_count(); ++l) {
    conv::gemm_conv_layer c;
    c.shape = m.shape(l);
    c.pool = m.pooled(l);
    c.w.assign(h.w[l].view().data, h.w[l].view().data + h.w[l].rows() * h.w[l].cols());
    c.bias = h.b[l];
    v.push_back(std::move(c));
  }
  return v;
}

// A layer of fp16 weights (the inference type), or float ones (the checkpoint's master weights).
io::model_layer file_layer(dense_view<float const> w, std::vector<float> const& bias, io::model_structure st, bool relu,
                           bool f32 = false) {
  io::model_layer L;
  L.structure = st;
  if (st == io::model_structure::blocks) L.block_rows = L.block_cols = 32;
  L.value = f32 ? io::model_value::f32 : io::model_value::fp16;
  L.activation = relu ? io::model_activation::relu : io::model_activation::none;
  L.w = dense_matrix<float>(w.rows, w.cols);
  for (std::int64_t i = 0; i < w.rows; ++i)
    for (std::int64_t j = 0; j < w.cols; ++j) L.w(i, j) = f32 ? w(i, j) : static_cast<float>(fp16(w(i, j)));
  L.bias = bias;
  return L;
}

// The model as a file: the convolutions as conv2d layers (3x3, stride 1, pad 1, ReLU and the 2x2
// pool), the classifier as a linear layer. A filter-pruned model
// is saved without its removed channels (conv::drop_dead_channels), a dense network of fewer channels.
io::sparse_model to_file_model(host_model const& h, train::mixed_cnn<bf16> const& m, std::string const& structure,
                               std::string const& description, std::string* kept = nullptr) {
  io::sparse_model f;
  f.description = description;
  auto convs = to_gemm_layers(h, m);
  std::vector<float> cls(h.w.back().view().data, h.w.back().view().data + h.w.back().rows() * h.w.back().cols());
  std::int64_t flat = m.flat_features();
  if (structure == "filters") {
    auto const c = conv::drop_dead_channels(convs, cls, m.classes());
    convs = c.convs;
    cls = c.classifier;
    flat = c.flat;
  }
  for (std::size_t l = 0; l < convs.size(); ++l) {
    auto const& c = convs[l];
    io::model_structure st = io::model_structure::dense;
    if (l > 0 && structure == "channel_blocks") st = io::model_structure::blocks;
    if (l > 0 && structure == "unstructured") st = io::model_structure::unstructured;
    if (l > 0 && structure == "sparse24") st = io::model_structure::sparse24;
    io::model_layer L = file_layer(dense_view<float const>{c.shape.K, c.shape.filter_size(), c.shape.filter_size(), c.w.data()},
                                   c.bias, st, true);
    if (c.pool) L.activation = io::model_activation::relu_maxpool2x2;
    L.kind = io::model_layer_kind::conv2d;
    L.conv = {c.shape.C, c.shape.R, c.shape.S, 1, c.shape.pad_h};
    f.layers.push_back(std::move(L));
    if (kept) *kept += (l ? "-" : "") + std::to_string(c.shape.K);
  }
  f.layers.push_back(file_layer(dense_view<float const>{m.classes(), flat, flat, cls.data()}, h.b.back(),
                                io::model_structure::dense, false));
  return f;
}

dense_matrix<fp16> to_fp16(dense_matrix<float> const& w) {
  dense_matrix<fp16> out(w.rows(), w.cols());
  for (std::int64_t i = 0; i < w.rows(); ++i)
    for (std::int64_t j = 0; j < w.cols(); ++j) out(i, j) = fp16(w(i, j));
  return out;
}

// A loaded model at one batch: an automatic convolution plan per layer (bias, ReLU and the pool
// fused where the path allows), the classifier through cuBLAS (its 10 outputs are no 16-byte
// rows for cuBLASLt), the same in both. dense_only: cuDNN alone for the convolutions.
struct inference_model {
  std::int64_t batch;
  std::vector<std::unique_ptr<ops::conv16_auto_plan<fp16>>> convs;
  std::unique_ptr<ops::tc_auto_linear_plan<fp16, fp16>> classifier;
  device_buffer<float> classifier_bias;
  std::vector<device_buffer<fp16>> act;
  device_buffer<fp16> logits;
  std::size_t ws_bytes = 0;
  device_buffer<char> ws;

  inference_model(io::sparse_model const& f, std::int64_t n, bool dense_only, cuda_exec exec) : batch(n) {
    SDNN_EXPECTS(f.layers.size() >= 2 && f.layers.back().kind == io::model_layer_kind::linear,
                 "the file must hold convolutions and a linear classifier");
    int h = 28, w = 28;
    for (std::size_t l = 0; l + 1 < f.layers.size(); ++l) {
      auto const& L = f.layers[l];
      SDNN_EXPECTS(L.kind == io::model_layer_kind::conv2d, "layer ", l, " of the file is not a convolution");
      conv::conv_shape const s = conv::conv_shape::conv2d(L.conv.in_channels, h, w, int(L.w.rows()), L.conv.kernel_h,
                                                          L.conv.kernel_w, L.conv.stride, L.conv.pad);
      ops::conv16_auto_options opt;
      if (dense_only) opt.allowed = 1u << unsigned(ops::conv16_path::cudnn);
      dense_matrix<fp16> const wg = to_fp16(L.w);
      SDNN_EXPECTS(L.activation != io::model_activation::none, "layer ", l, ": the example runs ReLU convolutions");
      bool const pool = L.activation == io::model_activation::relu_maxpool2x2;
      convs.push_back(std::make_unique<ops::conv16_auto_plan<fp16>>(s, n, wg.view(), L.bias, true, pool, exec, opt));
      act.emplace_back(static_cast<std::size_t>(convs.back()->y_elements()), exec);
      ws_bytes = std::max(ws_bytes, convs.back()->workspace_bytes());
      h = convs.back()->out_h();
      w = convs.back()->out_w();
    }
    auto const& L = f.layers.back();
    dense_matrix<fp16> const wc = to_fp16(L.w);
    ops::tc_auto_options copt;
    copt.max_rows = n;
    copt.allowed = 1u << int(policy::tc_path::cublas_dense);
    classifier = std::make_unique<ops::tc_auto_linear_plan<fp16, fp16>>(wc.view(), exec, copt);
    classifier_bias = to_device(L.bias.data(), L.bias.size(), exec);
    logits = device_buffer<fp16>(static_cast<std::size_t>(n * L.w.rows()), exec);
    if (ws_bytes) ws = device_buffer<char>(ws_bytes, exec);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
  }
  fp16 const* run(cuda_exec exec, fp16 const* x) const {
    fp16 const* in = x;
    for (std::size_t l = 0; l < convs.size(); ++l) {
      convs[l]->run(exec, in, const_cast<fp16*>(act[l].data()), workspace{const_cast<char*>(ws.data()), ws_bytes});
      in = act[l].data();
    }
    basic_epilogue<float> epi = epilogue_none<float>();
    epi.bias = classifier_bias.data();
    auto const& c = *classifier;
    c.run(exec, dense_view<fp16 const>{batch, c.in_features(), c.in_features(), in},
          dense_view<fp16>{batch, c.out_features(), c.out_features(), const_cast<fp16*>(logits.data())}, epi);
    return logits.data();
  }
  std::string paths() const {
    std::string s;
    for (auto const& p : convs) s += (s.empty() ? "" : "+") + std::string(ops::conv16_path_name(p->path()));
    return s;
  }
};

// Accuracy of a loaded model through its plans, in batches of its batch (the last one zero padded).
double loaded_accuracy(inference_model const& m, device_set const& d, cuda_exec exec) {
  std::int64_t correct = 0;
  std::int64_t const classes = 10, n = m.batch;
  device_buffer<fp16> xb(static_cast<std::size_t>(n * d.px), exec);
  std::vector<fp16> logits(static_cast<std::size_t>(n * classes));
  for (std::int64_t r = 0; r < d.n; r += n) {
    std::int64_t const k = std::min(n, d.n - r);
    SDNN_CUDA_CHECK(cudaMemsetAsync(xb.data(), 0, xb.size() * sizeof(fp16), exec.stream));
    SDNN_CUDA_CHECK(cudaMemcpyAsync(xb.data(), d.xh.data() + r * d.px, std::size_t(k * d.px) * sizeof(fp16),
                                    cudaMemcpyDeviceToDevice, exec.stream));
    fp16 const* out = m.run(exec, xb.data());
    SDNN_CUDA_CHECK(cudaMemcpyAsync(logits.data(), out, logits.size() * sizeof(fp16), cudaMemcpyDeviceToHost, exec.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    for (std::int64_t i = 0; i < k; ++i) {
      std::int64_t best = 0;
      for (std::int64_t j = 1; j < classes; ++j)
        if (float(logits[std::size_t(i * classes + j)]) > float(logits[std::size_t(i * classes + best)])) best = j;
      correct += best == d.labels[std::size_t(r + i)];
    }
  }
  return double(correct) / double(d.n);
}

// The multiply-adds with a nonzero weight of one image.
std::int64_t macs(io::sparse_model const& f) {
  auto nnz = [](dense_matrix<float> const& w) {
    return std::int64_t(std::count_if(w.data(), w.data() + w.rows() * w.cols(), [](float v) { return v != 0.0f; }));
  };
  std::int64_t h = 28, w = 28, total = 0;
  for (std::size_t l = 0; l + 1 < f.layers.size(); ++l) {
    total += h * w * nnz(f.layers[l].w);  // 3x3, pad 1, stride 1: OH = H
    if (f.layers[l].activation == io::model_activation::relu_maxpool2x2) h /= 2, w /= 2;
  }
  return total + nnz(f.layers.back().w);
}

int run(options const& o, cuda_exec exec) {
  cudaDeviceProp prop{};
  SDNN_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  auto const digits = load_digits(o.data_dir, o.seed, o.train, o.test, exec);
  device_set const& train = digits.first;
  device_set const& test = digits.second;
  SDNN_EXPECTS(train.px == 784, "the digits must be 28 x 28, got ", train.px, " pixels");
  std::int64_t const px = train.px;
  for (auto c : o.channels) cnn_arch.push_back({static_cast<std::int32_t>(c), 3, 1, true});
  std::string desc = "CNN 28x28x1";
  for (auto c : o.channels) desc += "-c" + std::to_string(c) + "p";
  desc += "-10";
  std::printf("%s, %lld train / %lld test digits (seed %llu), batch %lld, bf16 mixed precision, %s\n", desc.c_str(),
              (long long)o.train, (long long)o.test, (unsigned long long)o.seed, (long long)o.batch, prop.name);

  epoch_runner ctx(train, o.batch, o.inject_nan_step, o.seed * 7919 + 1, last_good, exec);
  train::mixed_options mo;
  mo.max_batch = std::max<std::int64_t>(o.batch, 250);
  mo.optimizer.lr = o.lr;
  train::mixed_cnn<bf16> net(28, 28, 1, cnn_arch, 10, o.seed, mo, exec);
  train::mixed_options mo32;
  mo32.max_batch = 250;
  mo32.loss_scale = {false, 1.0f};
  train::mixed_cnn<float> eval32(28, 28, 1, cnn_arch, 10, 1, mo32, exec);
  auto acc16 = [&] { return double(net.count_correct(exec, test.view16(), test.y.data())) / double(test.n); };

  std::vector<result> results;
  auto const t_dense = std::chrono::steady_clock::now();
  for (int e = 0; e < o.epochs; ++e) {
    auto const s = ctx.run(net, exec);
    std::printf("dense epoch %d: loss %.4f, test %.4f (loss scale %g, %lld skipped)\n", e + 1, s.mean_loss, acc16(),
                s.loss_scale, (long long)s.skipped);
  }
  host_model const dense = download(net, exec);
  {
    result r;
    r.name = r.structure = "dense";
    r.acc_bf16 = acc16();
    r.acc_f32 = accuracy32(eval32, dense, test, false, exec);
    r.acc_int8 = accuracy32(eval32, dense, test, true, exec);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_dense).count();
    results.push_back(r);
  }
  double const epoch_s = ctx.device_seconds / ctx.epochs;
  std::printf("device training: %.2f ms per epoch (%lld steps of %lld, read back once per epoch)\n", epoch_s * 1e3,
              (long long)(o.train / o.batch), (long long)o.batch);

  std::size_t const L = net.conv_count();
  for (auto const& st : o.structures) {
    std::vector<double> targets = st == "sparse24" ? std::vector<double>{0.5} : o.sparsities;
    for (double target : targets) {
      auto const t0 = std::chrono::steady_clock::now();
      upload(net, dense, exec);
      net.set_optimizer([&] { auto r = mo.optimizer; r.lr = o.lr; return r; }());
      // the layers a structure prunes: the filter blocks of every convolution, or the
      // convolutions after the first (the first has one input channel)
      std::size_t const first = st == "filters" ? 0 : 1;
      double const layer_target = st == "filters" ? 1.0 - std::sqrt(1.0 - target) : target;
      std::vector<train::weight_groups> groups(L);
      for (std::size_t l = first; l < L; ++l) {
        if (st == "channel_blocks") groups[l] = channel_blocks(net.shape(l));
        if (st == "filters") groups[l] = filter_blocks(net.shape(l));
        if (st == "channel_blocks" || st == "filters") net.layer(l).set_group_lasso(exec, groups[l], o.penalty);
      }
      int const ramp = st == "sparse24" ? 1 : o.prune_epochs;
      for (int e = 1; e <= ramp; ++e) {
        if (st != "sparse24") ctx.run(net, exec);
        double const s = st == "sparse24" ? 0.5 : train::sparsity_at(0.0, layer_target, e, 0, ramp);
        for (std::size_t l = first; l < L; ++l) {
          auto const w = net.layer(l).weights(exec);
          std::vector<std::uint8_t> mask = st == "unstructured" ? train::magnitude_mask(w.view(), s)
                                           : st == "sparse24"   ? train::sparse24_mask(w.view())
                                                                : train::group_mask(w.view(), groups[l], s);
          net.layer(l).set_mask(exec, mask, 32, 32);  // the SDDMM skips the empty 32 x 32 blocks, if any
          if (st == "filters") {  // a removed filter loses its bias too, so its channel is exactly 0
            std::vector<std::uint8_t> bm(static_cast<std::size_t>(w.rows()), 0);
            for (std::int64_t i = 0; i < w.rows(); ++i)
              for (std::int64_t j = 0; j < w.cols() && !bm[std::size_t(i)]; ++j) bm[std::size_t(i)] = mask[std::size_t(i * w.cols() + j)];
            net.layer(l).set_bias_mask(exec, bm);
          }
        }
      }
      for (std::size_t l = 0; l < L; ++l) net.layer(l).set_group_lasso_penalty(0.0f);
      net.set_optimizer([&] { auto r = mo.optimizer; r.lr = o.finetune_lr; return r; }());
      train::mixed_stats last{};
      for (int e = 0; e < o.finetune_epochs; ++e) last = ctx.run(net, exec);
      host_model const h = download(net, exec);
      result r;
      r.structure = st;
      r.target = target;
      r.name = st + (st == "sparse24" ? std::string("") : " " + std::to_string(int(std::lround(target * 100))) + "%");
      std::tie(r.sparsity, r.block_sparsity) = conv_sparsity(h, net);
      r.acc_bf16 = acc16();
      r.acc_f32 = accuracy32(eval32, h, test, false, exec);
      r.acc_int8 = accuracy32(eval32, h, test, true, exec);
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::string tag = st + (st == "sparse24" ? "" : "_" + std::to_string(int(std::lround(target * 100))));
      r.file = o.model_dir + "/cnn_" + tag + ".sdnn";
      io::write_sparse_model(r.file, to_file_model(h, net, st, desc + ", " + r.name, &r.kept));
      std::printf("%-20s conv sparsity %.4f, empty channel blocks %.4f, channels %s: test float %.4f bf16 %.4f int8 "
                  "%.4f (fine-tune loss %.4f, %.1f s)\n",
                  r.name.c_str(), r.sparsity, r.block_sparsity, r.kept.c_str(), r.acc_f32, r.acc_bf16, r.acc_int8,
                  last.mean_loss, r.seconds);
      results.push_back(r);
    }
  }
  results.front().file = o.model_dir + "/cnn_dense.sdnn";
  io::write_sparse_model(results.front().file, to_file_model(dense, net, "dense", desc + ", dense", &results.front().kept));

  // ---- inference from the files (fp16) ----
  device_buffer<char> flush(std::size_t(128) << 20, exec);
  std::int64_t const max_b = o.bench_batches.empty() ? 1 : *std::max_element(o.bench_batches.begin(), o.bench_batches.end());
  device_buffer<fp16> xin(static_cast<std::size_t>(max_b * px), exec);
  SDNN_CUDA_CHECK(cudaMemsetAsync(xin.data(), 0, xin.size() * sizeof(fp16), exec.stream));
  SDNN_CUDA_CHECK(cudaMemcpyAsync(xin.data(), test.xh.data(), std::size_t(std::min(test.n, max_b) * px) * sizeof(fp16),
                                  cudaMemcpyDeviceToDevice, exec.stream));
  // the baseline per batch: the dense model with every convolution through cuDNN fp16
  io::sparse_model const dense_file = io::read_sparse_model(results.front().file);
  std::vector<std::unique_ptr<inference_model>> base;
  for (auto n : o.bench_batches) base.push_back(std::make_unique<inference_model>(dense_file, n, true, exec));
  std::int64_t const dense_macs = macs(dense_file);
  for (std::size_t i = 0; i < results.size(); ++i) {
    auto& r = results[i];
    io::sparse_model const file = io::read_sparse_model(r.file);
    r.flops_share = double(macs(file)) / double(dense_macs);
    {
      inference_model m(file, 128, false, exec);
      r.acc_loaded = loaded_accuracy(m, test, exec);
    }
    for (std::size_t k = 0; k < o.bench_batches.size(); ++k) {
      std::int64_t const n = o.bench_batches[k];
      inference_model m(file, n, false, exec);
      auto const t = median_pair_ms([&] { m.run(exec, xin.data()); }, [&] { base[k]->run(exec, xin.data()); }, o.reps,
                                    exec, flush);
      r.eager_ms.push_back(t.first);
      r.eager_base_ms.push_back(t.second);
      graph_pass const gm(exec, [&] { m.run(exec, xin.data()); }), gb(exec, [&] { base[k]->run(exec, xin.data()); });
      SDNN_EXPECTS(gm.ok() && gb.ok(), "a forward pass could not be captured as a CUDA graph (", r.name, ", batch ", n,
                   ")");
      auto const tg = median_pair_ms([&] { gm.run(); }, [&] { gb.run(); }, o.reps, exec, flush);
      r.ms.push_back({n, tg.first});
      r.base_ms.push_back(tg.second);
      r.paths.push_back(m.paths());
      for (std::size_t l = 0; l < m.convs.size(); ++l)
        std::printf("%s b%lld conv %zu: %s\n", r.name.c_str(), (long long)n, l, m.convs[l]->reason().c_str());
    }
  }

  // ---- report ----
  std::ostringstream md, js;
  md << "| model | conv sparsity | empty channel blocks | channels | MACs vs dense | test float | test bf16 | test int8 | loaded file (fp16) |";
  for (auto n : o.bench_batches) md << " ms b" << n << " | vs cuDNN b" << n << " | eager vs cuDNN b" << n << " |";
  md << "\n|---|---|---|---|---|---|---|---|---|";
  for (std::size_t k = 0; k < o.bench_batches.size(); ++k) md << "---|---|---|";
  md << "\n";
  js << "{\n  \"gpu\": \"" << prop.name << "\", \"commit\": \"" << o.commit << "\", \"model\": \"" << desc
     << "\", \"train\": " << o.train << ", \"test\": " << o.test << ", \"seed\": " << o.seed << ", \"batch\": " << o.batch
     << ", \"epochs\": " << o.epochs << ", \"prune_epochs\": " << o.prune_epochs
     << ", \"finetune_epochs\": " << o.finetune_epochs << ", \"penalty\": " << o.penalty << ", \"lr\": " << o.lr
     << ", \"finetune_lr\": " << o.finetune_lr << ", \"reps\": " << o.reps
     << ",\n  \"device_epoch_ms\": " << epoch_s * 1e3 << ",\n  \"models\": [\n";
  bool below = false;
  for (std::size_t i = 0; i < results.size(); ++i) {
    auto const& r = results[i];
    char buf[320];
    std::snprintf(buf, sizeof buf, "| %s | %.4f | %.4f | %s | %.3f | %.2f %% | %.2f %% | %.2f %% | %.2f %% |",
                  r.name.c_str(), r.sparsity, r.block_sparsity, r.kept.c_str(), r.flops_share, 100 * r.acc_f32,
                  100 * r.acc_bf16, 100 * r.acc_int8, 100 * r.acc_loaded);
    md << buf;
    js << "    {\"name\": \"" << r.name << "\", \"structure\": \"" << r.structure << "\", \"target\": " << r.target
       << ", \"conv_sparsity\": " << r.sparsity << ", \"empty_channel_blocks\": " << r.block_sparsity
       << ", \"channels\": \"" << r.kept << "\", \"macs_vs_dense\": " << r.flops_share
       << ", \"acc_float\": " << r.acc_f32 << ", \"acc_bf16\": " << r.acc_bf16 << ", \"acc_int8\": " << r.acc_int8
       << ", \"acc_loaded_fp16\": " << r.acc_loaded << ", \"seconds\": " << r.seconds << ", \"file\": \"" << r.file
       << "\", \"inference\": [";
    for (std::size_t k = 0; k < r.ms.size(); ++k) {
      double const sp = r.base_ms[k] / r.ms[k].second;
      std::snprintf(buf, sizeof buf, " %.4f | %.2fx | %.2fx |", r.ms[k].second, sp, r.eager_base_ms[k] / r.eager_ms[k]);
      md << buf;
      js << (k ? ", " : "") << "{\"batch\": " << r.ms[k].first << ", \"ms\": " << r.ms[k].second
         << ", \"dense_cudnn_fp16_ms\": " << r.base_ms[k] << ", \"speedup_vs_cudnn_fp16\": " << sp
         << ", \"eager_ms\": " << r.eager_ms[k] << ", \"eager_dense_cudnn_fp16_ms\": " << r.eager_base_ms[k] << ", \"paths\": \"" << r.paths[k] << "\"}";
    }
    md << "\n";
    js << "]}" << (i + 1 < results.size() ? "," : "") << "\n";
    if (r.acc_bf16 < o.min_accuracy) below = true;
  }
  js << "  ]\n}\n";
  md << "\n";
  if (!o.bench_batches.empty()) {
    md << "Every model runs from its file in fp16 through the automatic convolution plans (cuDNN or sdnn's "
          "tensor-core kernels, the fastest at plan time) and cuBLAS for the classifier; the baseline is the "
          "dense model with every convolution through cuDNN fp16, timed alternately with each model (median of "
       << o.reps << " runs each, L2 flushed before every run). ms and vs cuDNN: each forward pass launched as a "
          "CUDA graph (both sides); eager: the same passes launched call by call, where the host's work per call "
          "(cuDNN's above all) shows. Baseline with the dense row: ";
    for (std::size_t k = 0; k < o.bench_batches.size(); ++k)
      md << (k ? ", " : "") << "b" << o.bench_batches[k] << " " << results.front().base_ms[k] << " ms";
    md << ". ";
  }
  md << "Device training: " << epoch_s * 1e3 << " ms per epoch.\n";
  write_report(md.str(), js.str(), results, o);
  return below ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) try {
  options o;
  if (!parse(argc, argv, o)) return 0;
  checkpoint_path = o.model_dir + "/train_cnn_checkpoint.sdnn";
  return run_on_stream([&](cuda_exec exec) { return run(o, exec); });
} catch (train::nonfinite_loss const& e) {
  std::cerr << "train_cnn: " << e.what() << "\n";
  if (!last_good.w.empty()) {
    io::sparse_model f;
    f.description = "train_cnn: the last good epoch";
    for (std::size_t l = 0; l < last_good.w.size(); ++l) {
      io::model_layer L = file_layer(last_good.w[l].view(), last_good.b[l], io::model_structure::dense,
                                     l + 1 < last_good.w.size(), true);
      if (l + 1 < last_good.w.size()) {
        L.kind = io::model_layer_kind::conv2d;
        L.conv = {static_cast<std::int32_t>(last_good.w[l].cols() / 9), 3, 3, 1, 1};
        if (cnn_arch[l].pool) L.activation = io::model_activation::relu_maxpool2x2;
      }
      f.layers.push_back(std::move(L));
    }
    io::write_sparse_model(checkpoint_path, f);
    std::cerr << "train_cnn: the model after the last good epoch is in " << checkpoint_path << "\n";
  }
  return 3;
} catch (std::exception const& e) {
  std::cerr << "train_cnn: error: " << e.what() << "\n";
  return 2;
}
