// sparse_vgg16: the 13 VGG-16 convolutions (3x3, pad 1, ReLU) with 2x2 max-pooling between
// blocks, weights pruned on the device (train/op/prune_uniform.cuh) to 90 % (uniform nnz per output
// channel, global threshold or per-channel rule), run as a device
// pipeline of sdnn::layer<float> (layers::sparse_conv2d + a max-pool layer), and the same
// stack with the same pruned weights on dense cuDNN (float, no TF32). Prints both times
// and the max relative error of the final output (max |sdnn - cudnn| / max |cudnn|).
//
//   sparse_vgg16 [batch = 32] [sparsity = 0.9] [reps = 5] [rule = global | per_channel]
// Random weights (He-scaled, fixed seed), random input in [-1, 1).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <sdnn/sdnn.hpp>
#include <sdnn/conv/weights.hpp>
#include <sdnn/train/op/prune_uniform.cuh>
#include <sdnn/conv/sparse_conv.cuh>
#if defined(SDNN_HAS_CUDNN)
#include <sdnn/conv/cudnn_conv.cuh>
#endif

using namespace sdnn;

namespace {
// 2x2 max-pooling, stride 2, NCHW (the VGG-16 pool layer).
template <class T>
__global__ void maxpool2_kernel(T const* in, T* out, std::int64_t planes, int H, int W) {
  int const OH = H / 2, OW = W / 2;
  std::int64_t const n = planes * OH * OW;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t const pl = i / (OH * OW);
    int const r = int(i % (OH * OW)), y = r / OW, x = r % OW;
    T const* p = in + pl * H * W + std::int64_t(2 * y) * W + 2 * x;
    out[i] = std::max(std::max(p[0], p[1]), std::max(p[W], p[W + 1]));
  }
}

class maxpool2 : public layer<float> {
 public:
  maxpool2(int C, int H, int W) : C_(C), H_(H), W_(W) {}
  std::string name() const override { return "maxpool2"; }
  std::int64_t out_features(std::int64_t in) const override {
    SDNN_EXPECTS(in == std::int64_t(C_) * H_ * W_, "maxpool2: expects ", std::int64_t(C_) * H_ * W_, " features, got ", in);
    return std::int64_t(C_) * (H_ / 2) * (W_ / 2);
  }
  void forward(host_exec, dense_view<float const> in, dense_view<float> out) override {
    for (std::int64_t n = 0; n < in.rows; ++n)
      for (int c = 0; c < C_; ++c)
        for (int y = 0; y < H_ / 2; ++y)
          for (int x = 0; x < W_ / 2; ++x) {
            float const* p = in.row(n) + (std::int64_t(c) * H_ + 2 * y) * W_ + 2 * x;
            out(n, (std::int64_t(c) * (H_ / 2) + y) * (W_ / 2) + x) = std::max(std::max(p[0], p[1]), std::max(p[W_], p[W_ + 1]));
          }
  }
  void forward(cuda_exec ex, dense_view<float const> in, dense_view<float> out) override {
    maxpool2_kernel<<<1024, 256, 0, ex.stream>>>(in.data, out.data, in.rows * C_, H_, W_);
    SDNN_CUDA_CHECK_LAUNCH();
  }

 private:
  int C_, H_, W_;
};

struct conv_stack {
  std::vector<std::unique_ptr<layer<float>>> layers;
  std::vector<device_buffer<float>> acts;  // acts[i] = output of layer i
  std::int64_t in_features = 0;
  void plan(std::int64_t batch, cuda_exec ex) {
    std::int64_t f = in_features;
    acts.clear();
    for (auto& l : layers) {
      l->plan(batch, f, ex);
      f = l->out_features(f);
      acts.emplace_back(static_cast<std::size_t>(batch * f), ex);
    }
  }
  float const* run(float const* in, std::int64_t batch, cuda_exec ex) {
    std::int64_t f = in_features;
    float const* cur = in;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      std::int64_t const of = layers[i]->out_features(f);
      layers[i]->forward(ex, dense_view<float const>{batch, f, f, cur}, dense_view<float>{batch, of, of, acts[i].data()});
      cur = acts[i].data();
      f = of;
    }
    return cur;
  }
};

template <class F>
double median_ms(F&& f, int reps) {
  cudaEvent_t a, b;
  SDNN_CUDA_CHECK(cudaEventCreate(&a));
  SDNN_CUDA_CHECK(cudaEventCreate(&b));
  f();  // warm-up
  std::vector<float> ms(static_cast<std::size_t>(reps));
  for (auto& m : ms) {
    SDNN_CUDA_CHECK(cudaEventRecord(a));
    f();
    SDNN_CUDA_CHECK(cudaEventRecord(b));
    SDNN_CUDA_CHECK(cudaEventSynchronize(b));
    SDNN_CUDA_CHECK(cudaEventElapsedTime(&m, a, b));
  }
  SDNN_CUDA_CHECK(cudaEventDestroy(a));
  SDNN_CUDA_CHECK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  int const batch = argc > 1 ? std::atoi(argv[1]) : 32;
  double const sparsity = argc > 2 ? std::atof(argv[2]) : 0.9;
  int const reps = argc > 3 ? std::atoi(argv[3]) : 5;
  std::string const rule_name = argc > 4 ? argv[4] : "global";
  try {
    SDNN_EXPECTS(rule_name == "global" || rule_name == "per_channel",
                 "sparse_vgg16: rule must be global or per_channel, got '", rule_name, "'");
    conv::prune_rule const rule = rule_name == "global" ? conv::prune_rule::global : conv::prune_rule::per_channel;
    cuda_exec ex;
    // (C, K, H) of the 13 convolutions; 0 marks a pool.
    int const cfg[][3] = {{3, 64, 224},   {64, 64, 224},  {0, 64, 224},   {64, 128, 112}, {128, 128, 112},
                          {0, 128, 112},  {128, 256, 56}, {256, 256, 56}, {256, 256, 56}, {0, 256, 56},
                          {256, 512, 28}, {512, 512, 28}, {512, 512, 28}, {0, 512, 28},   {512, 512, 14},
                          {512, 512, 14}, {512, 512, 14}, {0, 512, 14}};
    std::mt19937 g(2024);
    conv_stack sparse, dense;
    sparse.in_features = dense.in_features = 3 * 224 * 224;
    double padding = 0, stored = 0;
    for (auto const& l : cfg) {
      if (l[0] == 0) {
        sparse.layers.push_back(std::make_unique<maxpool2>(l[1], l[2], l[2]));
        dense.layers.push_back(std::make_unique<maxpool2>(l[1], l[2], l[2]));
        continue;
      }
      auto const s = conv::conv_shape::conv2d(l[0], l[2], l[2], l[1], 3, 3, 1, 1);
      // He init, rescaled so the kept weights keep the activation scale after pruning
      std::normal_distribution<float> nd(0.0f, std::sqrt(2.0f / float(s.filter_size() * (1.0 - sparsity))));
      std::vector<float> w(static_cast<std::size_t>(s.weight_count())), bias(static_cast<std::size_t>(s.K));
      for (auto& x : w) x = nd(g);
      for (auto& x : bias) x = 0.01f * nd(g);
      // pruned on the device (one synchronisation per layer: the report), then the host
      // copy builds the offset format and feeds the dense cuDNN stack
      device_buffer<float> dw(w.size(), ex);
      SDNN_CUDA_CHECK(cudaMemcpyAsync(dw.data(), w.data(), w.size() * sizeof(float), cudaMemcpyHostToDevice, ex.stream));
      auto const p = conv::to_host(conv::prune_uniform(dw.data(), s.K, s.filter_size(), sparsity, rule, ex), ex);
      padding += double(p.padding);
      stored += double(p.nnz_per_channel * s.K);
      sparse.layers.push_back(std::make_unique<layers::sparse_conv2d<float>>(conv::make_conv_weights<float>(s, p), bias));
#if defined(SDNN_HAS_CUDNN)
      dense.layers.push_back(std::make_unique<layers::cudnn_conv2d<float>>(s, p.pruned, bias, true));
#endif
    }
    device_buffer<float> in(static_cast<std::size_t>(batch) * sparse.in_features, ex);
    conv::detail::fill_hash(in.data(), in.size(), 99u, ex);
    std::printf("VGG-16 conv stack, batch %d, sparsity %.3f, %s pruning (padding %.2f %% of stored entries)\n", batch,
                sparsity, rule_name.c_str(), 100.0 * padding / stored);
    sparse.plan(batch, ex);  // tuning runs (synchronising)
    float const* ys = nullptr;
    double const t_sparse = median_ms([&] { ys = sparse.run(in.data(), batch, ex); }, reps);
    std::int64_t const nout = static_cast<std::int64_t>(batch) * 512 * 7 * 7;
    std::vector<float> a(static_cast<std::size_t>(nout)), b(static_cast<std::size_t>(nout));
    SDNN_CUDA_CHECK(cudaMemcpy(a.data(), ys, a.size() * sizeof(float), cudaMemcpyDeviceToHost));
    std::printf("sdnn direct sparse conv pipeline: %.3f ms\n", t_sparse);
#if defined(SDNN_HAS_CUDNN)
    dense.plan(batch, ex);
    float const* yd = nullptr;
    double const t_dense = median_ms([&] { yd = dense.run(in.data(), batch, ex); }, reps);
    SDNN_CUDA_CHECK(cudaMemcpy(b.data(), yd, b.size() * sizeof(float), cudaMemcpyDeviceToHost));
    double maxdiff = 0, maxref = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      maxdiff = std::max(maxdiff, double(std::fabs(a[i] - b[i])));
      maxref = std::max(maxref, double(std::fabs(b[i])));
    }
    std::printf("cuDNN dense pipeline (float, no TF32): %.3f ms\n", t_dense);
    std::printf("speedup: %.2fx\n", t_dense / t_sparse);
    std::printf("max relative error of the output: %.3e (max |sdnn - cudnn| / max |cudnn|, max |cudnn| = %.3e)\n",
                maxref > 0 ? maxdiff / maxref : maxdiff, maxref);
#else
    std::printf("cuDNN not available: no dense comparison\n");
#endif
  } catch (std::exception const& e) {
    std::fprintf(stderr, "sparse_vgg16: %s\n", e.what());
    return 1;
  }
  return 0;
}
