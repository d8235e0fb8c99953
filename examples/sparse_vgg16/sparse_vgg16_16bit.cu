// sparse_vgg16_16bit: the 13 VGG-16 convolutions (3x3, pad 1, bias + ReLU, 2x2 max-pool after
// each block) in fp16 or bf16 on NHWC activations, with weights pruned to channel blocks (BKo x BC
// output x input channels shared by every tap; conv1_1's 3 input channels make no block, it stays
// dense). Each layer is an ops::conv16_auto_plan: the fastest of cuDNN and sdnn's tensor-core
// kernels (the implicit GEMMs; conv1_1's direct kernel), timed at plan time on this GPU. The same stack with the same pruned weights
// through cuDNN alone (its best algorithm per layer) is the baseline. Prints each layer's choice,
// both forward times and the max relative difference of the final outputs.
//
//   sparse_vgg16_16bit [batch = 16] [sparsity = 0.9] [reps = 20] [type = fp16 | bf16] [block = 32]
// Times: CUDA events around one whole forward issued layer by layer (host work included), median
// of reps after 3 warm-up forwards; the L2 is not flushed (the stack's activations pass through it
// as in inference). Random weights (He-scaled, fixed seed) and input in [-1, 1).
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
#include <sdnn/conv/gemm_weights.hpp>
#include <sdnn/conv/op/conv16_auto.cuh>
#include <sdnn/core/memory.cuh>

using namespace sdnn;

namespace {

struct layer_spec {
  char const* name;
  int C, HW, K;
  bool pool;
};
constexpr layer_spec vgg16[] = {
    {"conv1_1", 3, 224, 64, false},   {"conv1_2", 64, 224, 64, true},   {"conv2_1", 64, 112, 128, false},
    {"conv2_2", 128, 112, 128, true}, {"conv3_1", 128, 56, 256, false}, {"conv3_2", 256, 56, 256, false},
    {"conv3_3", 256, 56, 256, true},  {"conv4_1", 256, 28, 512, false}, {"conv4_2", 512, 28, 512, false},
    {"conv4_3", 512, 28, 512, true},  {"conv5_1", 512, 14, 512, false}, {"conv5_2", 512, 14, 512, false},
    {"conv5_3", 512, 14, 512, true}};

template <class Run>
double median_us(Run&& run, int reps, cudaStream_t s) {
  cudaEvent_t a, b;
  SDNN_CUDA_CHECK(cudaEventCreate(&a));
  SDNN_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) run();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    SDNN_CUDA_CHECK(cudaStreamSynchronize(s));
    SDNN_CUDA_CHECK(cudaEventRecord(a, s));
    run();
    SDNN_CUDA_CHECK(cudaEventRecord(b, s));
    SDNN_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    SDNN_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3);
  }
  SDNN_CUDA_CHECK(cudaEventDestroy(a));
  SDNN_CUDA_CHECK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The stream outlives everything allocated on it (buffers are freed in stream order).
struct owned_stream {
  cudaStream_t s = nullptr;
  owned_stream() { SDNN_CUDA_CHECK(cudaStreamCreate(&s)); }
  ~owned_stream() {
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
  }
};

template <class T>
int run(std::int64_t batch, double sparsity, int reps, int block) {
  owned_stream owner;
  cudaStream_t const stream = owner.s;
  cuda_exec const ex(stream);
  std::mt19937 rng(7);
  std::vector<conv::conv_shape> shapes;
  std::vector<dense_matrix<T>> weights;
  std::vector<std::vector<float>> biases;
  std::int64_t kept = 0, blocks = 0, most = 0;
  for (auto const& l : vgg16) {
    auto const s = conv::conv_shape::conv2d(l.C, l.HW, l.HW, l.K, 3, 3, 1, 1);
    std::normal_distribution<float> he(0.f, std::sqrt(2.f / float(s.filter_size())));
    dense_matrix<T> w(s.K, s.filter_size());
    for (auto& v : w.values()) v = T(he(rng));
    if (s.C % block == 0 && s.K % block == 0) {
      auto pr = conv::prune_channel_blocks(s, std::as_const(w).view(), block, block, sparsity);
      kept += pr.mask.kept_count();
      blocks += pr.mask.blocks();
      w = std::move(pr.gemm);
    }
    std::vector<float> b(std::size_t(s.K));
    for (int k = 0; k < s.K; ++k) b[std::size_t(k)] = 0.01f * float(k % 7 - 3);
    most = std::max({most, batch * s.H * s.W * s.C, batch * s.OH() * s.OW() * s.K});
    shapes.push_back(s);
    weights.push_back(std::move(w));
    biases.push_back(std::move(b));
  }
  std::printf("VGG-16 %s, batch %lld, %.0f %% of the %dx%d channel blocks asked, %.1f %% pruned (%lld of %lld "
              "blocks kept; conv1_1 dense)\n",
              value_type_name<T>(), (long long)batch, sparsity * 100, block, block,
              blocks ? 100.0 * (1.0 - double(kept) / double(blocks)) : 0.0, (long long)kept, (long long)blocks);

  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<T> hx(std::size_t(batch * 224 * 224 * 3));
  std::fflush(stdout);
  for (auto& v : hx) v = T(u(rng));
  buffer<T, device_space> x(hx.size(), ex), a(std::size_t(most), ex), b(std::size_t(most), ex);
  SDNN_CUDA_CHECK(cudaMemcpyAsync(x.data(), hx.data(), hx.size() * sizeof(T), cudaMemcpyHostToDevice, stream));

  std::vector<std::unique_ptr<ops::conv16_auto_plan<T>>> sdnn_stack;
  std::vector<std::unique_ptr<vendor::cudnn_conv2d_nhwc<T>>> cudnn_stack;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    auto const pool = vgg16[i].pool;
    sdnn_stack.push_back(std::make_unique<ops::conv16_auto_plan<T>>(shapes[i], batch, std::as_const(weights[i]).view(),
                                                                    biases[i], true, pool, ex));
    cudnn_stack.push_back(std::make_unique<vendor::cudnn_conv2d_nhwc<T>>(
        shapes[i], batch, std::as_const(weights[i]).view(), biases[i], true, pool, ex));
    std::printf("  %-8s %-15s %s\n", vgg16[i].name, ops::conv16_path_name(sdnn_stack.back()->path()),
                sdnn_stack.back()->reason().substr(0, 110).c_str());
    std::fflush(stdout);
  }
  // One forward: the input stays in x; layer i writes a (i even) or b, the next reads it.
  T* out = nullptr;
  auto forward = [&](auto const& stack) {
    T const* in = x.data();
    T* bufs[2] = {a.data(), b.data()};
    int k = 0;
    for (auto const& p : stack) {
      p->run(ex, in, bufs[k]);
      in = bufs[k];
      k ^= 1;
    }
    out = const_cast<T*>(in);
  };
  std::size_t const n_out = std::size_t(batch * 7 * 7 * 512);
  forward(cudnn_stack);
  std::vector<T> want(n_out), got(n_out);
  SDNN_CUDA_CHECK(cudaMemcpyAsync(want.data(), out, n_out * sizeof(T), cudaMemcpyDeviceToHost, stream));
  forward(sdnn_stack);
  SDNN_CUDA_CHECK(cudaMemcpyAsync(got.data(), out, n_out * sizeof(T), cudaMemcpyDeviceToHost, stream));
  SDNN_CUDA_CHECK(cudaStreamSynchronize(stream));
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < n_out; ++i) {
    diff = std::max(diff, std::fabs(double(float(got[i])) - double(float(want[i]))));
    scale = std::max(scale, std::fabs(double(float(want[i]))));
  }
  double const t_cudnn = median_us([&] { forward(cudnn_stack); }, reps, stream);
  double const t_sdnn = median_us([&] { forward(sdnn_stack); }, reps, stream);
  std::printf("max |sdnn - cudnn| / max |cudnn| = %.3g (the two round 13 layers to %s independently)\n",
              scale > 0 ? diff / scale : diff, value_type_name<T>());
  std::printf("forward, batch %lld: cuDNN %.1f us, sdnn automatic %.1f us, speedup %.2fx\n", (long long)batch, t_cudnn,
              t_sdnn, t_cudnn / t_sdnn);
  return scale > 0 && diff / scale < 0.1 ? 0 : 1;  // a gross mismatch fails the run
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::int64_t const batch = argc > 1 ? std::atoll(argv[1]) : 16;
    double const sparsity = argc > 2 ? std::atof(argv[2]) : 0.9;
    int const reps = argc > 3 ? std::atoi(argv[3]) : 20;
    std::string const type = argc > 4 ? argv[4] : "fp16";
    int const block = argc > 5 ? std::atoi(argv[5]) : 32;
    if (batch < 1 || reps < 1 || sparsity < 0 || sparsity > 1 || (type != "fp16" && type != "bf16") ||
        (block != 16 && block != 32 && block != 64)) {
      std::fprintf(stderr, "usage: sparse_vgg16_16bit [batch >= 1] [sparsity in [0, 1]] [reps >= 1] "
                           "[fp16 | bf16] [block 16 | 32 | 64]\n");
      return 2;
    }
    return type == "fp16" ? run<fp16>(batch, sparsity, reps, block) : run<bf16>(batch, sparsity, reps, block);
  } catch (std::exception const& e) {
    std::fprintf(stderr, "sparse_vgg16_16bit: %s\n", e.what());
    return 1;
  }
}
