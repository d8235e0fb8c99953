// train_structured: learn a structure the tensor cores can skip, on the device, and measure what
// it buys. Trains the 784-H-H-10 MLP on the shipped MNIST digits in bf16 mixed precision
// (train::mixed_mlp: float master weights, Adam, dynamic loss scale), then from the dense model
// makes one sparse model per structure and sparsity: 32 x 32 blocks (group lasso + gradual
// pruning of the weakest blocks + fine-tune), unstructured (gradual magnitude pruning +
// fine-tune) and 2:4 (masked magnitude pruning + fine-tune). Reports test accuracy with float,
// bf16 and int8 (per-row) weights, saves every model as an .sdnn file (io/sparse_model.hpp),
// loads it back and times the loaded model end to end with the automatic tensor-core plans
// against the dense model through cuBLAS/cuBLASLt bf16 in the same process. --help: the options.
#include <sdnn/io/mnist_idx.hpp>
#include <sdnn/io/sparse_model.hpp>
#include <sdnn/linear/op/tc_auto.cuh>
#include <sdnn/linear/vendor/cublaslt.cuh>
#include <sdnn/train/op/mixed_mlp.cuh>
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
#include <vector>

#ifndef SDNN_EXAMPLE_DATA_DIR
#define SDNN_EXAMPLE_DATA_DIR "tests/data"
#endif

using namespace sdnn;
using namespace sdnn_example;

namespace {

struct options : training_options {
  std::int64_t hidden = 1024;
  options() {
    prune_epochs = 6;
    finetune_epochs = 4;
    penalty = 2e-5f;
    structures = {"blocks", "unstructured", "sparse24"};
    bench_batches = {1, 32, 1024};
    data_dir = SDNN_EXAMPLE_DATA_DIR;
  }
};

void usage() {
  std::cout
      << "usage: train_structured [options]\n"
         "  --hidden H              hidden width of the 784-H-H-10 MLP (default 1024)\n"
         "  --batch B               training batch (default 128)\n"
         "  --epochs E              dense epochs (default 8)\n"
         "  --prune-epochs P        epochs of the gradual pruning (group lasso for blocks) (default 6)\n"
         "  --finetune-epochs F     fine-tune epochs with the final mask (default 4)\n"
         "  --lr X --finetune-lr X  Adam learning rates (default 1e-3, 3e-4)\n"
         "  --penalty X             group-lasso coefficient of the block models (default 2e-5)\n"
         "  --structures a,b        of blocks, unstructured, sparse24 (default all three)\n"
         "  --sparsities s,t        target sparsities of the hidden layers (default 0.75,0.9,0.95; 2:4 is 0.5)\n"
         "  --bench-batches n,m     inference batches timed (default 1,32,1024; none: --bench-batches 0)\n"
         "  --reps R                timed repeats per point (default 30)\n"
         "  --train N --test N      seeded split of the 10000 shipped digits (default 8000 / 2000)\n"
         "  --seed S                split, initialisation and batch order (default 1)\n"
         "  --min-accuracy A        exit 1 if a reported bf16 test accuracy is below A (default 0)\n"
         "  --inject-nan-step S     puts a NaN into a weight before training step S, to test the stop:\n"
         "                          the message names the step, the last good epoch's model is written\n"
         "                          to MODEL_DIR/train_structured_checkpoint.sdnn, the exit status is 3\n"
         "  --data DIR --model-dir DIR --json FILE --markdown FILE --commit C\n";
}

bool parse(int argc, char** argv, options& o) {
  if (!parse_training_options(argc, argv, o, {"blocks", "unstructured", "sparse24"}, usage,
                              [&](std::string const& k, std::string const& v) {
                                if (k != "--hidden") return false;
                                o.hidden = std::stoll(v);
                                return true;
                              }))
    return false;
  SDNN_EXPECTS(o.hidden >= 16 && o.hidden % 16 == 0, "--hidden must be a positive multiple of 16, got ", o.hidden);
  return true;
}

// The model after the last epoch whose losses were all finite, written out if training stops.
host_model last_good;
std::string checkpoint_path = "train_structured_checkpoint.sdnn";


double accuracy16(train::mixed_mlp<bf16>& m, device_set const& d, cuda_exec exec) {
  return double(m.count_correct(exec, d.view16(), d.y.data())) / double(d.n);
}

struct result {
  std::string name, structure;
  double target = 0, sparsity = 0;  // target and measured sparsity of the hidden layers
  double acc_f32 = 0, acc_bf16 = 0, acc_int8 = 0, acc_loaded = 0;
  double seconds = 0;
  std::string file;
  std::vector<std::pair<std::int64_t, double>> ms;  // batch -> median ms end to end
  std::vector<std::string> paths;                   // per batch: the plans' paths
  // per batch, as CUDA graphs timed alternately with the dense model through cuBLASLt (fused
  // bias + ReLU) as a graph: this model's and that baseline's median ms (0: no graph)
  std::vector<double> graph_ms, graph_lt_ms;
};

// The hidden layers' masks for a structure at sparsity s, from the current master weights.
std::vector<std::uint8_t> make_mask(std::string const& st, dense_matrix<float> const& w, double s) {
  if (st == "blocks") return train::group_mask(w.view(), train::block_groups(w.rows(), w.cols(), 32, 32), s);
  if (st == "unstructured") return train::magnitude_mask(w.view(), s);
  return train::sparse24_mask(w.view());
}

double hidden_sparsity(host_model const& h) {
  double z = 0, n = 0;
  for (std::size_t l = 0; l + 1 < h.w.size(); ++l)
    for (std::int64_t i = 0; i < h.w[l].rows(); ++i)
      for (std::int64_t j = 0; j < h.w[l].cols(); ++j, ++n) z += h.w[l](i, j) == 0.0f;
  return n > 0 ? z / n : 0;
}

// ---- files and inference ---------------------------------------------------------------------

io::sparse_model to_file_model(host_model const& h, std::string const& structure, std::string const& description) {
  io::sparse_model m;
  m.description = description;
  for (std::size_t l = 0; l < h.w.size(); ++l) {
    io::model_layer L;
    bool const hidden = l + 1 < h.w.size();
    L.structure = !hidden || structure == "dense"  ? io::model_structure::dense
                  : structure == "blocks"         ? io::model_structure::blocks
                  : structure == "sparse24"       ? io::model_structure::sparse24
                                                  : io::model_structure::unstructured;
    if (L.structure == io::model_structure::blocks) L.block_rows = L.block_cols = 32;
    L.value = io::model_value::bf16;
    L.activation = hidden ? io::model_activation::relu : io::model_activation::none;
    L.w = dense_matrix<float>(h.w[l].rows(), h.w[l].cols());
    for (std::int64_t i = 0; i < L.w.rows(); ++i)
      for (std::int64_t j = 0; j < L.w.cols(); ++j) L.w(i, j) = static_cast<float>(bf16(h.w[l](i, j)));
    L.bias = h.b[l];
    m.layers.push_back(std::move(L));
  }
  return m;
}

// A file's weights (already bf16 values, held as floats) as a bf16 matrix for the plans.
dense_matrix<bf16> to_bf16(dense_matrix<float> const& w) {
  dense_matrix<bf16> out(w.rows(), w.cols());
  for (std::int64_t i = 0; i < w.rows(); ++i)
    for (std::int64_t j = 0; j < w.cols(); ++j) out(i, j) = bf16(w(i, j));
  return out;
}

// The loaded model as a chain of automatic plans (bf16, bias and ReLU in the plans' epilogue);
// dense_only restricts every plan to cuBLAS.
struct inference_model {
  std::vector<std::unique_ptr<ops::tc_auto_linear_plan<bf16, bf16>>> plans;
  std::vector<device_buffer<float>> bias;
  std::vector<bool> relu;
  std::vector<device_buffer<bf16>> act;
  std::int64_t max_rows = 0;

  inference_model(io::sparse_model const& m, std::int64_t max_rows_, bool dense_only, cuda_exec exec)
      : max_rows(max_rows_) {
    for (auto const& L : m.layers) {
      dense_matrix<bf16> const w = to_bf16(L.w);
      ops::tc_auto_options opt;
      opt.max_rows = max_rows;
      if (dense_only) opt.allowed = 1u << int(policy::tc_path::cublas_dense);
      plans.push_back(std::make_unique<ops::tc_auto_linear_plan<bf16, bf16>>(w.view(), exec, opt));
      bias.push_back(to_device(L.bias.data(), L.bias.size(), exec));
      relu.push_back(L.activation == io::model_activation::relu);
      act.emplace_back(static_cast<std::size_t>(max_rows * L.w.rows()), exec);
    }
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
  }
  basic_epilogue<float> epilogue(std::size_t l) const {
    basic_epilogue<float> epi = relu[l] ? epilogue_relu<float>() : epilogue_none<float>();
    epi.bias = bias[l].data();
    return epi;
  }
  // Measures each layer's paths with its own epilogue (fused in sdnn's kernels, a pass after cuBLAS).
  void tune(cuda_exec exec, std::vector<std::int64_t> const& ns) {
    for (std::size_t l = 0; l < plans.size(); ++l) plans[l]->tune(exec, ns, epilogue(l));
  }
  // logits (bf16, n x classes) of x (device, n x in); returns the last activation buffer.
  bf16 const* run(cuda_exec exec, bf16 const* x, std::int64_t n) const {
    bf16 const* in = x;
    for (std::size_t l = 0; l < plans.size(); ++l) {
      auto const& p = *plans[l];
      plans[l]->run(exec, dense_view<bf16 const>{n, p.in_features(), p.in_features(), in},
                    dense_view<bf16>{n, p.out_features(), p.out_features(), const_cast<bf16*>(act[l].data())},
                    epilogue(l));
      in = act[l].data();
    }
    return in;
  }
  std::string paths(std::int64_t n) const {
    std::string s;
    for (auto const& p : plans) s += (s.empty() ? "" : "+") + std::string(policy::tc_path_name(p->path(n)));
    return s;
  }
};

// The dense baseline's other form: the hidden layers through cuBLASLt with bias + ReLU fused.
struct lt_model {
  std::vector<std::unique_ptr<vendor::cublaslt_linear16<bf16>>> hidden;
  std::unique_ptr<ops::tc_auto_linear_plan<bf16, bf16>> last;
  device_buffer<float> last_bias;
  std::vector<device_buffer<bf16>> act;
  lt_model(io::sparse_model const& m, std::int64_t n, cuda_exec exec) {
    for (std::size_t l = 0; l + 1 < m.layers.size(); ++l) {
      auto const& L = m.layers[l];
      dense_matrix<bf16> const w = to_bf16(L.w);
      hidden.push_back(std::make_unique<vendor::cublaslt_linear16<bf16>>(n, L.w.rows(), L.w.cols(), w.view(), L.bias,
                                                                        true, exec));
      act.emplace_back(static_cast<std::size_t>(n * L.w.rows()), exec);
    }
    auto const& L = m.layers.back();
    dense_matrix<bf16> const w = to_bf16(L.w);
    ops::tc_auto_options opt;
    opt.max_rows = n;
    opt.allowed = 1u << int(policy::tc_path::cublas_dense);
    last = std::make_unique<ops::tc_auto_linear_plan<bf16, bf16>>(w.view(), exec, opt);
    last_bias = to_device(L.bias.data(), L.bias.size(), exec);
    act.emplace_back(static_cast<std::size_t>(n * L.w.rows()), exec);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
  }
  void run(cuda_exec exec, bf16 const* x, std::int64_t n) const {
    bf16 const* in = x;
    for (std::size_t l = 0; l < hidden.size(); ++l) {
      hidden[l]->run(exec, in, const_cast<bf16*>(act[l].data()));
      in = act[l].data();
    }
    basic_epilogue<float> epi = epilogue_none<float>();
    epi.bias = last_bias.data();
    last->run(exec, dense_view<bf16 const>{n, last->in_features(), last->in_features(), in},
              dense_view<bf16>{n, last->out_features(), last->out_features(), const_cast<bf16*>(act.back().data())},
              epi);
  }
};

// Accuracy of a loaded model through its inference plans, in batches of max_rows.
double loaded_accuracy(inference_model const& m, device_set const& d, cuda_exec exec) {
  std::int64_t correct = 0;
  std::int64_t const classes = m.plans.back()->out_features();
  std::vector<bf16> logits;
  std::vector<std::int32_t> labels(static_cast<std::size_t>(d.n));
  SDNN_CUDA_CHECK(cudaMemcpy(labels.data(), d.y.data(), labels.size() * 4, cudaMemcpyDeviceToHost));
  for (std::int64_t r = 0; r < d.n; r += m.max_rows) {
    std::int64_t const n = std::min(m.max_rows, d.n - r);
    bf16 const* out = m.run(exec, d.x16.data() + r * d.px, n);
    logits.resize(static_cast<std::size_t>(n * classes));
    SDNN_CUDA_CHECK(cudaMemcpyAsync(logits.data(), out, logits.size() * sizeof(bf16), cudaMemcpyDeviceToHost, exec.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t best = 0;
      for (std::int64_t j = 1; j < classes; ++j)
        if (float(logits[std::size_t(i * classes + j)]) > float(logits[std::size_t(i * classes + best)])) best = j;
      correct += best == labels[std::size_t(r + i)];
    }
  }
  return double(correct) / double(d.n);
}


// Everything on one stream; every device buffer is released before the caller destroys it.
int run(options const& o, cuda_exec exec) {
  cudaDeviceProp prop{};
  SDNN_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));

  auto const digits = load_digits(o.data_dir, o.seed, o.train, o.test, exec);
  device_set const& train = digits.first;
  device_set const& test = digits.second;
  std::int64_t const px = train.px;
  std::vector<std::int64_t> const widths{px, o.hidden, o.hidden, 10};
  std::printf("MLP %lld-%lld-%lld-10, %lld train / %lld test digits (seed %llu), batch %lld, bf16 mixed precision, %s\n",
              (long long)px, (long long)o.hidden, (long long)o.hidden, (long long)o.train, (long long)o.test,
              (unsigned long long)o.seed, (long long)o.batch, prop.name);

  epoch_runner ctx(train, o.batch, o.inject_nan_step, o.seed * 7919 + 1, last_good, exec);
  train::mixed_options mo;
  mo.max_batch = std::max<std::int64_t>(o.batch, 1000);
  mo.optimizer.lr = o.lr;
  train::mixed_mlp<bf16> net(widths, o.seed, mo, exec);
  train::mixed_options mo32;  // the float network the float and int8 accuracies are measured on
  mo32.max_batch = 1000;
  mo32.loss_scale = {false, 1.0f};
  train::mixed_mlp<float> eval32(widths, 1, mo32, exec);

  std::vector<result> results;
  auto const t_dense = std::chrono::steady_clock::now();
  for (int e = 0; e < o.epochs; ++e) {
    auto const s = ctx.run(net, exec);
    std::printf("dense epoch %d: loss %.4f, test %.4f (loss scale %g, %lld skipped)\n", e + 1, s.mean_loss,
                accuracy16(net, test, exec), s.loss_scale, (long long)s.skipped);
  }
  host_model const dense = download(net, exec);
  {
    result r;
    r.name = "dense";
    r.structure = "dense";
    r.acc_bf16 = accuracy16(net, test, exec);
    r.acc_f32 = accuracy32(eval32, dense, test, false, exec);
    r.acc_int8 = accuracy32(eval32, dense, test, true, exec);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_dense).count();
    results.push_back(r);
  }
  double const epoch_s = ctx.device_seconds / ctx.epochs;
  std::printf("device training: %.2f ms per epoch (%lld steps of %lld, read back once per epoch)\n", epoch_s * 1e3,
              (long long)(o.train / o.batch), (long long)o.batch);

  // ---- the sparse models ----
  for (auto const& st : o.structures) {
    std::vector<double> targets = st == "sparse24" ? std::vector<double>{0.5} : o.sparsities;
    for (double target : targets) {
      auto const t0 = std::chrono::steady_clock::now();
      upload(net, dense, exec);
      net.set_optimizer([&] { auto r = mo.optimizer; r.lr = o.lr; return r; }());
      std::vector<train::weight_groups> groups;
      for (std::size_t l = 0; l + 1 < net.layer_count(); ++l) {
        groups.push_back(train::block_groups(widths[l + 1], widths[l], 32, 32));
        if (st == "blocks") net.layer(l).set_group_lasso(exec, groups.back(), o.penalty);
      }
      int const ramp = st == "sparse24" ? 1 : o.prune_epochs;
      for (int e = 1; e <= ramp; ++e) {
        if (st != "sparse24") ctx.run(net, exec);
        double const s = st == "sparse24" ? 0.5 : train::sparsity_at(0.0, target, e, 0, ramp);
        for (std::size_t l = 0; l + 1 < net.layer_count(); ++l) {
          auto const w = net.layer(l).weights(exec);
          net.layer(l).set_mask(exec, make_mask(st, w, s), st == "blocks" ? 32 : 0, st == "blocks" ? 32 : 0);
        }
      }
      for (std::size_t l = 0; l + 1 < net.layer_count(); ++l) net.layer(l).set_group_lasso_penalty(0.0f);
      net.set_optimizer([&] { auto r = mo.optimizer; r.lr = o.finetune_lr; return r; }());
      train::mixed_stats last{};
      for (int e = 0; e < o.finetune_epochs; ++e) last = ctx.run(net, exec);
      host_model h = download(net, exec);
      result r;
      r.structure = st;
      r.target = target;
      r.name = st + (st == "sparse24" ? std::string("") : " " + std::to_string(int(std::lround(target * 100))) + "%");
      r.sparsity = hidden_sparsity(h);
      r.acc_bf16 = accuracy16(net, test, exec);
      r.acc_f32 = accuracy32(eval32, h, test, false, exec);
      r.acc_int8 = accuracy32(eval32, h, test, true, exec);
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%-18s hidden sparsity %.4f: test float %.4f bf16 %.4f int8 %.4f (fine-tune loss %.4f, %.1f s)\n",
                  r.name.c_str(), r.sparsity, r.acc_f32, r.acc_bf16, r.acc_int8, last.mean_loss, r.seconds);
      results.push_back(r);
      results.back().file = o.model_dir + "/mlp_" + st + (st == "sparse24" ? "" : "_" + std::to_string(int(std::lround(target * 100)))) + ".sdnn";
      io::write_sparse_model(results.back().file, to_file_model(h, st, "784-" + std::to_string(o.hidden) + "-" +
                                                                             std::to_string(o.hidden) + "-10 MLP, " + r.name));
    }
  }
  results.front().file = o.model_dir + "/mlp_dense.sdnn";
  io::write_sparse_model(results.front().file, to_file_model(dense, "dense", "784-" + std::to_string(o.hidden) + "-" +
                                                                               std::to_string(o.hidden) + "-10 MLP, dense"));

  // ---- inference from the files ----
  std::int64_t const max_rows = o.bench_batches.empty() ? 1000 : std::max<std::int64_t>(
      1000, *std::max_element(o.bench_batches.begin(), o.bench_batches.end()));
  device_buffer<char> flush(std::size_t(128) << 20, exec);
  device_buffer<bf16> xin(static_cast<std::size_t>(max_rows * px), exec);
  SDNN_CUDA_CHECK(cudaMemcpyAsync(xin.data(), test.x16.data(), std::min(test.n, max_rows) * px * sizeof(bf16),
                                  cudaMemcpyDeviceToDevice, exec.stream));
  std::vector<std::pair<std::int64_t, double>> dense_ms, dense_lt_ms;
  std::vector<std::unique_ptr<lt_model>> lts;  // the dense model through cuBLASLt, per batch
  if (!o.bench_batches.empty()) {
    io::sparse_model const dense_file = io::read_sparse_model(results.front().file);
    for (auto n : o.bench_batches) lts.push_back(std::make_unique<lt_model>(dense_file, n, exec));
  }
  for (std::size_t i = 0; i < results.size(); ++i) {
    auto& r = results[i];
    io::sparse_model const file = io::read_sparse_model(r.file);
    inference_model m(file, max_rows, false, exec);
    if (!o.bench_batches.empty()) m.tune(exec, o.bench_batches);
    r.acc_loaded = loaded_accuracy(m, test, exec);
    for (std::size_t k = 0; k < o.bench_batches.size(); ++k) {
      std::int64_t const n = o.bench_batches[k];
      r.ms.push_back({n, median_ms([&] { m.run(exec, xin.data(), n); }, o.reps, exec, flush)});
      r.paths.push_back(m.paths(n));
      graph_pass const gm(exec, [&] { m.run(exec, xin.data(), n); }), gl(exec, [&] { lts[k]->run(exec, xin.data(), n); });
      auto const t = gm.ok() && gl.ok() ? median_pair_ms([&] { gm.run(); }, [&] { gl.run(); }, o.reps, exec, flush)
                                        : std::pair<double, double>{0.0, 0.0};
      r.graph_ms.push_back(t.first);
      r.graph_lt_ms.push_back(t.second);
      for (std::size_t l = 0; l < m.plans.size(); ++l)  // why each layer runs where it does
        std::printf("%s b%lld layer %zu: %s\n", r.name.c_str(), (long long)n, l, m.plans[l]->reason(n).c_str());
    }
    if (i == 0) {  // the baselines: the dense model through cuBLAS alone, and through cuBLASLt
      inference_model dense_cublas(file, max_rows, true, exec);
      for (auto n : o.bench_batches)
        dense_ms.push_back({n, median_ms([&] { dense_cublas.run(exec, xin.data(), n); }, o.reps, exec, flush)});
      for (std::size_t k = 0; k < o.bench_batches.size(); ++k)
        dense_lt_ms.push_back({o.bench_batches[k], median_ms([&] { lts[k]->run(exec, xin.data(), o.bench_batches[k]); },
                                                             o.reps, exec, flush)});
    }
  }

  // ---- report ----
  auto best_dense = [&](std::size_t k) { return std::min(dense_ms[k].second, dense_lt_ms[k].second); };
  std::ostringstream md, js;
  md << "| model | hidden sparsity | test float | test bf16 | test int8 | loaded file (bf16) |";
  for (auto n : o.bench_batches) md << " ms b" << n << " | vs dense b" << n << " | graphs vs cuBLASLt b" << n << " |";
  md << "\n|---|---|---|---|---|---|";
  for (std::size_t k = 0; k < o.bench_batches.size(); ++k) md << "---|---|---|";
  md << "\n";
  js << "{\n  \"gpu\": \"" << prop.name << "\", \"commit\": \"" << o.commit << "\", \"hidden\": " << o.hidden
     << ", \"train\": " << o.train << ", \"test\": " << o.test << ", \"seed\": " << o.seed << ", \"batch\": " << o.batch
     << ", \"epochs\": " << o.epochs << ", \"prune_epochs\": " << o.prune_epochs
     << ", \"finetune_epochs\": " << o.finetune_epochs << ", \"penalty\": " << o.penalty << ", \"lr\": " << o.lr
     << ", \"finetune_lr\": " << o.finetune_lr << ", \"reps\": " << o.reps
     << ",\n  \"device_epoch_ms\": " << epoch_s * 1e3 << ",\n  \"dense_cublaslt_ms\": {";
  for (std::size_t k = 0; k < dense_lt_ms.size(); ++k)
    js << (k ? ", " : "") << "\"" << dense_lt_ms[k].first << "\": " << dense_lt_ms[k].second;
  js << "},\n  \"dense_cublas_ms\": {";
  for (std::size_t k = 0; k < dense_ms.size(); ++k)
    js << (k ? ", " : "") << "\"" << dense_ms[k].first << "\": " << dense_ms[k].second;
  js << "},\n  \"models\": [\n";
  bool below = false;
  for (std::size_t i = 0; i < results.size(); ++i) {
    auto const& r = results[i];
    char buf[256];
    std::snprintf(buf, sizeof buf, "| %s | %.4f | %.2f %% | %.2f %% | %.2f %% | %.2f %% |", r.name.c_str(), r.sparsity,
                  100 * r.acc_f32, 100 * r.acc_bf16, 100 * r.acc_int8, 100 * r.acc_loaded);
    md << buf;
    js << "    {\"name\": \"" << r.name << "\", \"structure\": \"" << r.structure << "\", \"target\": " << r.target
       << ", \"sparsity\": " << r.sparsity << ", \"acc_float\": " << r.acc_f32 << ", \"acc_bf16\": " << r.acc_bf16
       << ", \"acc_int8\": " << r.acc_int8 << ", \"acc_loaded\": " << r.acc_loaded << ", \"seconds\": " << r.seconds
       << ", \"file\": \"" << r.file << "\", \"inference\": [";
    for (std::size_t k = 0; k < r.ms.size(); ++k) {
      double const sp = best_dense(k) / r.ms[k].second;
      double const gsp = r.graph_ms[k] > 0 ? r.graph_lt_ms[k] / r.graph_ms[k] : 0.0;
      if (r.graph_ms[k] > 0) std::snprintf(buf, sizeof buf, " %.4f | %.2fx | %.2fx |", r.ms[k].second, sp, gsp);
      else std::snprintf(buf, sizeof buf, " %.4f | %.2fx | no graph |", r.ms[k].second, sp);
      md << buf;
      js << (k ? ", " : "") << "{\"batch\": " << r.ms[k].first << ", \"ms\": " << r.ms[k].second
         << ", \"speedup_vs_best_dense\": " << sp << ", \"graph_ms\": " << r.graph_ms[k]
         << ", \"graph_dense_cublaslt_ms\": " << r.graph_lt_ms[k] << ", \"graph_speedup_vs_cublaslt\": " << gsp
         << ", \"paths\": \"" << r.paths[k] << "\"}";
    }
    md << "\n";
    js << "]}" << (i + 1 < results.size() ? "," : "") << "\n";
    if (r.acc_bf16 < o.min_accuracy) below = true;
  }
  js << "  ]\n}\n";
  md << "\n";
  if (!o.bench_batches.empty()) {
    md << "Every model runs through the automatic plans, tuned with its epilogue at these batches. Dense "
          "baseline per batch: the faster of the dense model through the plans restricted to cuBLAS (";
    for (std::size_t k = 0; k < dense_ms.size(); ++k)
      md << (k ? ", " : "") << "b" << dense_ms[k].first << " " << dense_ms[k].second << " ms";
    md << ") and through cuBLASLt with bias + ReLU fused (";
    for (std::size_t k = 0; k < dense_lt_ms.size(); ++k)
      md << (k ? ", " : "") << "b" << dense_lt_ms[k].first << " " << dense_lt_ms[k].second << " ms";
    md << "). Graphs vs cuBLASLt: each forward pass captured once as a CUDA graph (without the host's "
          "work per call), the model's and the dense model's through cuBLASLt timed alternately, median of "
       << o.reps << " each after an L2 flush. ";
  }
  md << "Device training: " << epoch_s * 1e3 << " ms per epoch.\n";
  write_report(md.str(), js.str(), results, o);
  return below ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) try {
  options o;
  if (!parse(argc, argv, o)) return 0;
  checkpoint_path = o.model_dir + "/train_structured_checkpoint.sdnn";
  return run_on_stream([&](cuda_exec exec) { return run(o, exec); });
} catch (train::nonfinite_loss const& e) {
  std::cerr << "train_structured: " << e.what() << "\n";
  if (!last_good.w.empty()) {
    io::write_sparse_model(checkpoint_path, to_file_model(last_good, "dense", "last good epoch"));
    std::cerr << "train_structured: the model after the last good epoch is in " << checkpoint_path << "\n";
  }
  return 3;
} catch (std::exception const& e) {
  std::cerr << "train_structured: error: " << e.what() << "\n";
  return 2;
}
