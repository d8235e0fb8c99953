// examples/common/example_util.hpp - what the training examples share: option lists, the seeded
// split of the shipped digits and the batch order, a model's weights on the host, one training
// epoch on the device, the float / int8 accuracy, and the timing of a forward pass (CUDA events,
// an L2 flush before every run, medians; alternating with a baseline; eagerly or as a CUDA graph).
// A Model is a train::mixed_mlp or train::mixed_cnn.
#pragma once

#include <sdnn/core/cuda.cuh>
#include <sdnn/core/exec.hpp>
#include <sdnn/core/memory.cuh>
#include <sdnn/core/random.hpp>
#include <sdnn/io/mnist_idx.hpp>
#include <sdnn/train/kernel/mixed_precision.cuh>
#include <sdnn/train/op/mixed_mlp.cuh>
#include <sdnn/train/op/structured_sparsity.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <limits>
#include <stdexcept>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace sdnn_example {
using sdnn::bf16;
using sdnn::cuda_exec;
using sdnn::dense_matrix;
using sdnn::dense_view;
using sdnn::device_buffer;
using sdnn::fp16;
using sdnn::shuffle;
using sdnn::splitmix64;

template <class T>
std::vector<T> split_list(std::string const& s) {
  std::vector<T> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    if constexpr (std::is_same_v<T, std::string>) out.push_back(item);
    else if constexpr (std::is_integral_v<T>) out.push_back(static_cast<T>(std::stoll(item)));
    else out.push_back(static_cast<T>(std::stod(item)));
  }
  return out;
}

// The options both training examples take; each example sets its own defaults (in its options'
// constructor) and adds its own.
struct training_options {
  std::int64_t batch = 128, train = 8000, test = 2000;
  int epochs = 8, prune_epochs = 4, finetune_epochs = 3;
  float lr = 1e-3f, finetune_lr = 3e-4f, penalty = 0.0f;
  std::vector<std::string> structures;
  std::vector<double> sparsities{0.75, 0.9, 0.95};
  std::vector<std::int64_t> bench_batches;
  int reps = 30;
  std::int64_t inject_nan_step = -1;  // a test of the stop path: a NaN weight before this step
  std::uint64_t seed = 1;
  double min_accuracy = 0;
  std::string data_dir, model_dir = ".", json, markdown, commit = "unknown";
};

// argv into o: own(key, value) takes the example's own options (true: taken), the shared ones
// are read here; false after --help (usage() printed). Then the shared checks, which a user sees
// before any training: sizes, epochs, the structures among `known`, learning rates, penalty and
// sparsities (train::check_options).
template <class Own>
bool parse_training_options(int argc, char** argv, training_options& o, std::vector<std::string> const& known,
                            void (*usage)(), Own&& own) {
  for (int i = 1; i < argc; ++i) {
    std::string const k = argv[i];
    if (k == "--help" || k == "-h") {
      usage();
      return false;
    }
    if (i + 1 >= argc) throw std::runtime_error("option " + k + " needs a value (--help lists them)");
    std::string const v = argv[++i];
    if (own(k, v)) continue;
    if (k == "--batch") o.batch = std::stoll(v);
    else if (k == "--epochs") o.epochs = std::stoi(v);
    else if (k == "--prune-epochs") o.prune_epochs = std::stoi(v);
    else if (k == "--finetune-epochs") o.finetune_epochs = std::stoi(v);
    else if (k == "--lr") o.lr = std::stof(v);
    else if (k == "--finetune-lr") o.finetune_lr = std::stof(v);
    else if (k == "--penalty") o.penalty = std::stof(v);
    else if (k == "--structures") o.structures = split_list<std::string>(v);
    else if (k == "--sparsities") o.sparsities = split_list<double>(v);
    else if (k == "--bench-batches") o.bench_batches = split_list<std::int64_t>(v == "0" ? "" : v);
    else if (k == "--reps") o.reps = std::stoi(v);
    else if (k == "--train") o.train = std::stoll(v);
    else if (k == "--test") o.test = std::stoll(v);
    else if (k == "--seed") o.seed = std::stoull(v);
    else if (k == "--min-accuracy") o.min_accuracy = std::stod(v);
    else if (k == "--inject-nan-step") o.inject_nan_step = std::stoll(v);
    else if (k == "--data") o.data_dir = v;
    else if (k == "--model-dir") o.model_dir = v;
    else if (k == "--json") o.json = v;
    else if (k == "--markdown") o.markdown = v;
    else if (k == "--commit") o.commit = v;
    else throw std::runtime_error("unknown option " + k + " (--help lists them)");
  }
  SDNN_EXPECTS(o.batch >= 1 && o.train >= o.batch && o.test >= 1 && o.train + o.test <= 10000,
               "need 1 <= batch <= train, test >= 1 and train + test <= 10000");
  SDNN_EXPECTS(o.epochs >= 1 && o.prune_epochs >= 1 && o.finetune_epochs >= 0 && o.reps >= 1,
               "need epochs >= 1, prune-epochs >= 1, finetune-epochs >= 0, reps >= 1");
  for (auto const& st : o.structures)
    SDNN_EXPECTS(std::find(known.begin(), known.end(), st) != known.end(), "unknown structure '", st, "'");
  for (double sp : o.sparsities) sdnn::train::check_options({o.lr, o.penalty, sp});
  sdnn::train::check_options({o.finetune_lr, 0.0, 0.0});
  return true;
}

// f(exec) on a new non-blocking stream, synchronised and destroyed after; f's result.
template <class F>
int run_on_stream(F&& f) {
  cudaStream_t stream;
  SDNN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int const rc = f(cuda_exec{stream});
  SDNN_CUDA_CHECK(cudaStreamSynchronize(stream));
  SDNN_CUDA_CHECK(cudaStreamDestroy(stream));
  return rc;
}

// The report: the Markdown table to stdout, then each model's paths per timed batch; the JSON and
// the Markdown to their files where o names them.
template <class Results>
void write_report(std::string const& md, std::string const& js, Results const& results, training_options const& o) {
  std::cout << "\n" << md;
  for (auto const& r : results)
    for (std::size_t k = 0; k < r.paths.size(); ++k)
      std::printf("%s b%lld: %s\n", r.name.c_str(), (long long)o.bench_batches[k], r.paths[k].c_str());
  if (!o.json.empty()) std::ofstream(o.json) << js;
  if (!o.markdown.empty()) std::ofstream(o.markdown) << md;
}

// A split of the digits on the device: bf16 (training), float (evaluation), fp16 (inference), the
// labels on the device and on the host.
struct device_set {
  std::int64_t n = 0, px = 0;
  device_buffer<bf16> x16;
  device_buffer<float> x32;
  device_buffer<fp16> xh;
  device_buffer<std::int32_t> y;
  std::vector<std::int32_t> labels;
  dense_view<bf16 const> view16() const { return {n, px, px, x16.data()}; }
  dense_view<float const> view32() const { return {n, px, px, x32.data()}; }
};

// The seeded split of the shipped 10000 digits (pixels / 255): shuffled by splitmix64{seed}, the first
// n_train for training, the next n_test for testing.
inline std::pair<device_set, device_set> load_digits(std::string const& dir, std::uint64_t seed, std::int64_t n_train,
                                                     std::int64_t n_test, cuda_exec exec) {
  auto const img = sdnn::io::read_idx_images(dir + "/mnist-10k-images-idx3-ubyte.gz");
  auto const lab = sdnn::io::read_idx_labels(dir + "/mnist-10k-labels-idx1-ubyte.gz");
  std::int64_t const px = std::int64_t(img.rows) * img.cols;
  SDNN_EXPECTS(n_train + n_test <= std::int64_t(img.count), "the split needs ", n_train + n_test, " digits, the file has ",
               img.count);
  splitmix64 rng{seed};
  std::vector<std::size_t> perm(static_cast<std::size_t>(img.count));
  for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = i;
  shuffle(perm, rng);
  auto take = [&](std::size_t first, std::int64_t n) {
    device_set d;
    d.n = n;
    d.px = px;
    std::vector<float> x(static_cast<std::size_t>(n * px));
    std::vector<bf16> x16(x.size());
    std::vector<fp16> xh(x.size());
    d.labels.resize(static_cast<std::size_t>(n));
    for (std::int64_t r = 0; r < n; ++r) {
      std::size_t const s = perm[first + std::size_t(r)];
      for (std::int64_t c = 0; c < px; ++c) {
        float const v = img.pixels[s * std::size_t(px) + std::size_t(c)] / 255.0f;
        x[std::size_t(r * px + c)] = v;
        x16[std::size_t(r * px + c)] = bf16(v);
        xh[std::size_t(r * px + c)] = fp16(v);
      }
      d.labels[std::size_t(r)] = lab[s];
    }
    d.x16 = sdnn::to_device(x16.data(), x16.size(), exec);
    d.x32 = sdnn::to_device(x.data(), x.size(), exec);
    d.xh = sdnn::to_device(xh.data(), xh.size(), exec);
    d.y = sdnn::to_device(d.labels.data(), d.labels.size(), exec);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));  // the pageable uploads
    return d;
  };
  device_set train = take(0, n_train);
  device_set test = take(static_cast<std::size_t>(n_train), n_test);
  return {std::move(train), std::move(test)};
}

// A trained model on the host: per layer its master weights (out x in; a convolution's GEMM view)
// and biases.
struct host_model {
  std::vector<dense_matrix<float>> w;
  std::vector<std::vector<float>> b;
};

template <class Model>
host_model download(Model& m, cuda_exec exec) {
  host_model h;
  for (std::size_t l = 0; l < m.layer_count(); ++l) {
    h.w.push_back(m.layer(l).weights(exec));
    h.b.push_back(m.layer(l).bias(exec));
  }
  return h;
}
// h's weights into m, with no mask, bias mask or group-lasso penalty left.
template <class Model>
void upload(Model& m, host_model const& h, cuda_exec exec) {
  for (std::size_t l = 0; l < m.layer_count(); ++l) {
    m.layer(l).set_mask(exec, {});
    m.layer(l).set_bias_mask(exec, {});
    m.layer(l).set_group_lasso_penalty(0.0f);
    m.layer(l).set_weights(exec, h.w[l].view(), h.b[l]);
  }
}

// The state of the training epochs: the seeded batch order, the batch buffers, the device time.
struct epoch_runner {
  device_set const& train;
  std::int64_t batch;
  std::int64_t inject_nan_step;  // a test of the stop path: a NaN weight before this step (-1: none)
  splitmix64 order_rng;
  device_buffer<std::int32_t> order, yb;
  device_buffer<bf16> xb;
  double device_seconds = 0;
  int epochs = 0;
  std::int64_t steps = 0;  // training steps enqueued so far
  host_model& last_good;   // the model after the last epoch whose losses were all finite

  epoch_runner(device_set const& t, std::int64_t b, std::int64_t nan_step, std::uint64_t seed, host_model& good,
               cuda_exec exec)
      : train(t), batch(b), inject_nan_step(nan_step), order_rng{seed}, order(std::size_t(t.n), exec),
        yb(std::size_t(b), exec), xb(std::size_t(b * t.px), exec), last_good(good) {}

  // One epoch: the seeded order uploaded once, then every step enqueued (the last partial batch
  // dropped); one read-back at the end, which throws train::nonfinite_loss on a non-finite loss.
  template <class Model>
  sdnn::train::mixed_stats run(Model& m, cuda_exec exec) {
    std::vector<std::int32_t> ord(static_cast<std::size_t>(train.n));
    for (std::size_t i = 0; i < ord.size(); ++i) ord[i] = static_cast<std::int32_t>(i);
    shuffle(ord, order_rng);
    auto const t0 = std::chrono::steady_clock::now();
    SDNN_CUDA_CHECK(cudaMemcpyAsync(order.data(), ord.data(), ord.size() * 4, cudaMemcpyHostToDevice, exec.stream));
    std::int64_t const px = train.px;
    for (std::int64_t first = 0; first + batch <= train.n; first += batch) {
      dense_view<bf16> x{batch, px, px, xb.data()};
      sdnn::kernels::gather_rows<bf16, std::int32_t>(train.view16(), train.y.data(), order.data(), first, x, yb.data(),
                                                     exec);
      if (steps++ == inject_nan_step) {
        auto w = m.layer(0).weights(exec);
        w(0, 0) = std::numeric_limits<float>::quiet_NaN();
        m.layer(0).set_weights(exec, w.view(), {});
      }
      m.train_step(exec, dense_view<bf16 const>(x), yb.data());
    }
    auto const s = m.take_stats(exec);
    device_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++epochs;
    last_good = download(m, exec);
    return s;
  }
};

// Test accuracy of host weights through a float model f (its weights are replaced): the master
// weights, or per-row symmetric int8 weights (scale max|w| / 127).
template <class Model>
double accuracy32(Model& f, host_model const& h, device_set const& d, bool int8, cuda_exec exec) {
  for (std::size_t l = 0; l < h.w.size(); ++l) {
    dense_matrix<float> w(h.w[l].rows(), h.w[l].cols());
    for (std::int64_t i = 0; i < w.rows(); ++i) {
      float mx = 0;
      for (std::int64_t j = 0; j < w.cols(); ++j) mx = std::max(mx, std::fabs(h.w[l](i, j)));
      float const sc = mx > 0 ? mx / 127.0f : 1.0f;
      for (std::int64_t j = 0; j < w.cols(); ++j)
        w(i, j) = int8 ? std::nearbyint(h.w[l](i, j) / sc) * sc : h.w[l](i, j);
    }
    f.layer(l).set_weights(exec, w.view(), h.b[l]);
  }
  return double(f.count_correct(exec, d.view32(), d.y.data())) / double(d.n);
}

// Median of reps CUDA-event timings of f, each after an L2 flush, after 3 warm-up runs.
template <class F>
double median_ms(F&& f, int reps, cuda_exec exec, device_buffer<char>& flush) {
  cudaEvent_t a, b;
  SDNN_CUDA_CHECK(cudaEventCreate(&a));
  SDNN_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    SDNN_CUDA_CHECK(cudaMemsetAsync(flush.data(), i & 0xff, flush.size(), exec.stream));
    SDNN_CUDA_CHECK(cudaEventRecord(a, exec.stream));
    f();
    SDNN_CUDA_CHECK(cudaEventRecord(b, exec.stream));
    SDNN_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    SDNN_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  SDNN_CUDA_CHECK(cudaEventDestroy(a));
  SDNN_CUDA_CHECK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Medians of reps CUDA-event timings of fa and of fb, run alternately (a change of the GPU's
// clocks weighs on both alike), each after an L2 flush, after 3 warm-up runs of each.
template <class FA, class FB>
std::pair<double, double> median_pair_ms(FA&& fa, FB&& fb, int reps, cuda_exec exec, device_buffer<char>& flush) {
  cudaEvent_t a, b;
  SDNN_CUDA_CHECK(cudaEventCreate(&a));
  SDNN_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) fa(), fb();
  std::vector<double> t[2];
  for (int i = 0; i < 2 * reps; ++i) {
    SDNN_CUDA_CHECK(cudaMemsetAsync(flush.data(), i & 0xff, flush.size(), exec.stream));
    SDNN_CUDA_CHECK(cudaEventRecord(a, exec.stream));
    if (i % 2) fb();
    else fa();
    SDNN_CUDA_CHECK(cudaEventRecord(b, exec.stream));
    SDNN_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    SDNN_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t[i % 2].push_back(ms);
  }
  SDNN_CUDA_CHECK(cudaEventDestroy(a));
  SDNN_CUDA_CHECK(cudaEventDestroy(b));
  for (auto& v : t) std::sort(v.begin(), v.end());
  return {t[0][t[0].size() / 2], t[1][t[1].size() / 2]};
}

// A forward pass captured as a CUDA graph, which launches it without the host's per-call work
// (cuDNN's and sdnn's); ok() is false where the capture failed (then the pass runs eagerly).
class graph_pass {
 public:
  template <class F>
  graph_pass(cuda_exec exec, F&& f) : exec_(exec) {
    if (cudaStreamBeginCapture(exec.stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    bool threw = false;
    try {
      f();
    } catch (std::exception const&) {
      threw = true;
    }
    cudaGraph_t g = nullptr;
    cudaError_t const e = cudaStreamEndCapture(exec.stream, &g);
    if (!threw && e == cudaSuccess && g && cudaGraphInstantiate(&ge_, g, 0) != cudaSuccess) ge_ = nullptr;
    if (g) cudaGraphDestroy(g);
    (void)cudaGetLastError();
  }
  ~graph_pass() {
    if (ge_) cudaGraphExecDestroy(ge_);
  }
  graph_pass(graph_pass const&) = delete;
  graph_pass& operator=(graph_pass const&) = delete;
  bool ok() const noexcept { return ge_ != nullptr; }
  void run() const { SDNN_CUDA_CHECK(cudaGraphLaunch(ge_, exec_.stream)); }

 private:
  cuda_exec exec_;
  cudaGraphExec_t ge_ = nullptr;
};

}  // namespace sdnn_example
