// Shared benchmark utilities: CUDA-event timing for Google Benchmark's manual time, the
// machine description (GPU, clocks, CUDA version, date) and JSON-lines output.
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

namespace sdnn_bench {

struct machine_info {
  std::string gpu, cuda_runtime, cuda_driver, date;
  int sm_count = 0, sm_clock_mhz = 0, mem_clock_mhz = 0;
};

inline machine_info const& machine() {
  static machine_info m = [] {
    machine_info r;
    cudaDeviceProp p{};
    int dev = 0;
    SDNN_CUDA_CHECK(cudaGetDevice(&dev));
    SDNN_CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
    r.gpu = p.name;
    r.sm_count = p.multiProcessorCount;
    int clk = 0, mclk = 0;
    cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, dev);
    cudaDeviceGetAttribute(&mclk, cudaDevAttrMemoryClockRate, dev);
    r.sm_clock_mhz = clk / 1000;
    r.mem_clock_mhz = mclk / 1000;
    int rv = 0, dv = 0;
    cudaRuntimeGetVersion(&rv);
    cudaDriverGetVersion(&dv);
    r.cuda_runtime = std::to_string(rv / 1000) + "." + std::to_string((rv % 1000) / 10);
    r.cuda_driver = std::to_string(dv / 1000) + "." + std::to_string((dv % 1000) / 10);
    char buf[32];
    std::time_t t = std::time(nullptr);
    std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
    r.date = buf;
    return r;
  }();
  return m;
}

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

// One JSON object per line, appended to $SDNN_BENCH_JSON (default: stdout). Every line
// carries the machine description so results files are self-describing.
class json_line {
 public:
  explicit json_line(std::string const& family) {
    auto const& m = machine();
    str("family", family);
    str("gpu", m.gpu);
    str("cuda_runtime", m.cuda_runtime);
    str("cuda_driver", m.cuda_driver);
    str("date", m.date);
    num("sm_clock_mhz", m.sm_clock_mhz);
  }
  json_line& str(std::string const& k, std::string const& v) {
    sep();
    os_ << '"' << k << "\":\"" << v << '"';
    return *this;
  }
  json_line& num(std::string const& k, double v) {
    sep();
    os_ << '"' << k << "\":" << v;
    return *this;
  }
  void emit() {
    static std::mutex mu;
    std::lock_guard<std::mutex> g(mu);
    std::string line = os_.str() + "}";
    if (char const* path = std::getenv("SDNN_BENCH_JSON")) {
      std::ofstream(path, std::ios::app) << line << '\n';
    } else {
      std::printf("%s\n", line.c_str());
    }
  }

 private:
  void sep() { os_ << (first_ ? "{" : ","); first_ = false; }
  std::ostringstream os_;
  bool first_ = true;
};

// Wall-clock time of day (UTC, HH:MM:SS) for the JSON lines.
inline std::string utc_time() {
  char buf[16];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%H:%M:%S", std::gmtime(&t));
  return buf;
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
