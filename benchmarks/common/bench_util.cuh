// Shared benchmark utilities: CUDA-event timing for Google Benchmark's manual time, and (from
// bench_json.cuh) the machine description and JSON-lines output.
//
// Protocol (every sdnn benchmark): warm-up launches, then each Google Benchmark
// iteration times `reps` launches between two CUDA events and reports their median via
// SetIterationTime; the vendor baseline is timed the same way in the same process.
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <sdnn/core/cuda.cuh>

#include "bench_json.cuh"

namespace sdnn_bench {

// Median time in seconds of `reps` timed calls of f() (after `warmup` untimed ones).
template <class F>
double median_seconds(F&& f, cudaStream_t s, int reps = 20, int warmup = 3) {
  for (int i = 0; i < warmup; ++i) f();
  cudaEvent_t a, b;
  SDNN_CUDA_CHECK(cudaEventCreate(&a));
  SDNN_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i) {
    SDNN_CUDA_CHECK(cudaEventRecord(a, s));
    f();
    SDNN_CUDA_CHECK(cudaEventRecord(b, s));
    SDNN_CUDA_CHECK(cudaEventSynchronize(b));
    SDNN_CUDA_CHECK(cudaEventElapsedTime(&ms[i], a, b));
  }
  SDNN_CUDA_CHECK(cudaEventDestroy(a));
  SDNN_CUDA_CHECK(cudaEventDestroy(b));
  std::nth_element(ms.begin(), ms.begin() + reps / 2, ms.end());
  return ms[reps / 2] * 1e-3;
}

// Runs f as a Google Benchmark manual-time loop: each iteration reports the median of
// `reps` event-timed calls. Returns the median over iterations (seconds).
template <class F>
double run_manual(benchmark::State& state, F&& f, cudaStream_t s, int reps = 10) {
  std::vector<double> all;
  for (auto _ : state) {
    double t = median_seconds(f, s, reps, all.empty() ? 3 : 0);
    state.SetIterationTime(t);
    all.push_back(t);
  }
  std::nth_element(all.begin(), all.begin() + all.size() / 2, all.end());
  return all.empty() ? 0.0 : all[all.size() / 2];
}

// The one stream every benchmark of a program runs on (created on first use, never
// destroyed: device buffers freed at exit still need it).
inline cudaStream_t stream() {
  static cudaStream_t s = [] {
    cudaStream_t x;
    SDNN_CUDA_CHECK(cudaStreamCreate(&x));
    return x;
  }();
  return s;
}

// Removes `flag` from argv (before Google Benchmark parses the rest); true if it was there.
inline bool take_flag(int& argc, char** argv, char const* flag) {
  bool found = false;
  int out = 0;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && std::string(argv[i]) == flag) found = true;
    else argv[out++] = argv[i];
  }
  argc = out;
  return found;
}

}  // namespace sdnn_bench
