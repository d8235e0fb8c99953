// examples/common/example_util.hpp - what the training examples share: option lists, the seeded
// generator of the split and the batch order, and the timing of a forward pass (CUDA events, an L2
// flush before every run, medians; alternating with a baseline; eagerly or as a CUDA graph).
#pragma once

#include <sdnn/core/cuda.cuh>
#include <sdnn/core/exec.hpp>
#include <sdnn/core/memory.cuh>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace sdnn_example {
using sdnn::cuda_exec;
using sdnn::device_buffer;

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

// splitmix64, as the library's initialisation uses: the split and the batch order.
struct rng64 {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};
template <class V>
void shuffle(V& v, rng64& r) {
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[r.below(i)]);
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
