// bench_gemm: dense C[M x N] = A[M x K] * B[K x N] (identity epilogue), sdnn's tiled GEMM
// against cuBLAS in the same process: SGEMM (CUBLAS_DEFAULT_MATH: TF32 off, the strict
// float baseline) and cublasGemmEx on __half (float compute; cuBLAS uses tensor cores
// there while sdnn's kernel is FFMA, so the half ratio is expected to be low).
// Axes: square sizes 1024..8192 (--quick: 4096), float and __half, tile shapes.
// A and B are >= 8 MB at 1024 and 128 MB at 4096 (float); the GEMM is compute-bound, so
// no input rotation is needed beyond the smallest size.
// Output: Google Benchmark (--benchmark_out) and JSON lines with GFLOP/s and the ratio
// to cuBLAS ($SDNN_BENCH_JSON or stdout).
#include "bench_util.cuh"

#include <sdnn/sdnn.hpp>
#include <sdnn/linear/op/gemm.cuh>

#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace sdnn;

namespace {
using sdnn_bench::stream;
using sdnn_bench::utc_time;
bool g_quick = false;
std::map<std::string, double> g_vendor;


template <class T>
struct operands {
  std::int64_t n = 0;
  buffer<T, device_space> a, b, c;
};
template <class T>
operands<T>& get(std::int64_t n) {
  static operands<T> o;
  if (o.n != n) {
    cuda_exec e{stream()};
    o = operands<T>{};
    o.n = n;
    std::vector<T> h(static_cast<std::size_t>(n * n));
    std::mt19937 rng(1);
    std::uniform_int_distribution<int> v(-3, 3);
    for (auto& x : h) x = value_cast<T>(static_cast<float>(v(rng)));
    o.a = buffer<T, device_space>(h.size(), e);
    o.b = buffer<T, device_space>(h.size(), e);
    o.c = buffer<T, device_space>(h.size(), e);
    SDNN_CUDA_CHECK(cudaMemcpyAsync(o.a.data(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice, e.stream));
    SDNN_CUDA_CHECK(cudaMemcpyAsync(o.b.data(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice, e.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));
  }
  return o;
}

template <class T, class Policy>
void bench(benchmark::State& st, std::int64_t n, std::string const& name, bool vendor) {
  auto& o = get<T>(n);
  cuda_exec e{stream()};
  dense_view<T const> a{n, n, n, o.a.data()}, b{n, n, n, o.b.data()};
  dense_view<T> c{n, n, n, o.c.data()};
  double const t = sdnn_bench::run_manual(st, [&] { ops::gemm(e, Policy{}, a, b, c, epilogue_none<float>()); },
                                          e.stream, n >= 8192 ? 3 : 10);
  double const flops = 2.0 * n * n * n;
  st.counters["GFLOPs"] = flops / t * 1e-9;
  std::string const cfg = std::string(sizeof(T) == 4 ? "float" : "half") + "/n" + std::to_string(n);
  if (vendor) g_vendor[cfg] = t;
  sdnn_bench::json_line j("gemm");
  j.str("utc", utc_time()).str("config", cfg).str("kernel", name).str("value_type", sizeof(T) == 4 ? "float" : "half");
  j.num("m", n).num("k", n).num("n", n).num("vendor", vendor ? 1 : 0).num("time_ms", t * 1e3);
  j.num("gflops", flops / t * 1e-9).num("sparsity", 0);
  if (!vendor && g_vendor.count(cfg)) {
    j.str("baseline", sizeof(T) == 4 ? "cublasSgemm(default math, TF32 off)" : "cublasGemmEx(16F, compute 32F)");
    j.num("baseline_ms", g_vendor[cfg] * 1e3).num("speedup_vs_vendor", g_vendor[cfg] / t);
    st.counters["x_vendor"] = g_vendor[cfg] / t;
  }
  j.emit();
}

template <class T, class Policy>
void reg(std::int64_t n, std::string const& name, bool vendor) {
  std::string const full = std::string(sizeof(T) == 4 ? "float" : "half") + "/n" + std::to_string(n) + "/" + name;
  benchmark::RegisterBenchmark(full.c_str(), [=](benchmark::State& st) { bench<T, Policy>(st, n, name, vendor); })
      ->UseManualTime()
      ->Iterations(n >= 8192 ? 2 : 3)
      ->Unit(benchmark::kMicrosecond);
}
}  // namespace

int main(int argc, char** argv) {
  g_quick = sdnn_bench::take_flag(argc, argv, "--quick");
  std::vector<std::int64_t> sizes = g_quick ? std::vector<std::int64_t>{4096} : std::vector<std::int64_t>{1024, 2048, 4096, 8192};
  for (auto n : sizes) {
    reg<float, policy::cublas_gemm>(n, "cublas_sgemm", true);
    reg<float, policy::tiled_gemm<128, 128, 8>>(n, "sdnn_tiled_128x128x8", false);
    if (!g_quick || n == 4096) reg<float, policy::tiled_gemm<128, 128, 16>>(n, "sdnn_tiled_128x128x16", false);
    if (!g_quick) reg<float, policy::tiled_gemm<64, 64, 8>>(n, "sdnn_tiled_64x64x8", false);
  }
  for (auto n : sizes) {
    if (g_quick) break;
    reg<__half, policy::cublas_gemm>(n, "cublas_hgemm", true);
    reg<__half, policy::tiled_gemm<128, 128, 16>>(n, "sdnn_tiled_128x128x16", false);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
