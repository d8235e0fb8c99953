// bench_linear_sparse24: Y[N x M] = X[N x K] W^T in bf16 with W 2:4, in one process: dense_cublas
// (cublasGemmEx TN on the pruned W stored dense, CUBLAS_COMPUTE_32F), sdnn_24 (sparse24_linear_plan,
// sparse24_auto), sdnn_24_tile_<t> (each tile forced: the evidence of policy::sparse24_tuning_sm90; on
// 11008 x 4096, not with --quick), cusparselt_24 (with SDNN_HAS_CUSPARSELT; _padN16 where cuSPARSELt
// refuses N and N rounded up to 16 runs). W 11008x4096, 4096x11008, 8192x8192, 4096x4096; N 1..2048.
// L2 flushed before every call; median of 25 after 3 warm-ups; JSON lines ($SDNN_BENCH_JSON) with
// speedup_vs_dense, hbm_pct, tc_pct, rel_err_vs_dense. --quick: 11008 x 4096, N = 8, 128, 2048.
#include "bench_util.cuh"

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <sdnn/core/memory.cuh>
#include <sdnn/core/numeric.cuh>
#include <sdnn/formats/sparse24.hpp>
#include <sdnn/linear/op/sparse24_linear.cuh>
#include <sdnn/train/op/prune_sparse24.hpp>
#if SDNN_HAS_CUSPARSELT
#include <sdnn/linear/vendor/cusparselt.cuh>
#endif

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace sdnn;

namespace {
using sdnn_bench::stream;

// hbm_pct: the fewest bytes (W values + metadata, or dense W; X; Y) over 3.35 TB/s; tc_pct: 2 M N K
// over the bf16 tensor peak, 989 TFLOP/s dense or 1979 with 2:4 (H100 SXM datasheet).
constexpr double kHbm = 3.35e12, kPeakDense = 989.4e12, kPeakSparse = 1978.9e12;
constexpr int kReps = 25, kWarmup = 3;

void cublas_check(cublasStatus_t st, char const* what) {
  if (st != CUBLAS_STATUS_SUCCESS) SDNN_FAIL("cuBLAS: ", what, " failed: ", cublasGetStatusName(st));
}

// Twice the L2 size, rewritten before every timed call.
struct l2_flusher {
  buffer<unsigned char, device_space> buf;
  int turn = 0;
  explicit l2_flusher(cuda_exec e) {
    int dev = 0, l2 = 0;
    SDNN_CUDA_CHECK(cudaGetDevice(&dev));
    SDNN_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    buf = buffer<unsigned char, device_space>(std::size_t(2) * std::max(l2, 1 << 20), e);
  }
  void operator()(cudaStream_t s) { SDNN_CUDA_CHECK(cudaMemsetAsync(buf.data(), ++turn & 0xFF, buf.size(), s)); }
};

// Median seconds of f() over kReps calls, each after an L2 flush (not timed).
template <class F>
double median_flushed(F&& f, l2_flusher& flush, cudaStream_t s) {
  cudaEvent_t a, b;
  SDNN_CUDA_CHECK(cudaEventCreate(&a));
  SDNN_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < kWarmup; ++i) f();
  std::vector<float> ms(kReps);
  for (int i = 0; i < kReps; ++i) {
    flush(s);
    SDNN_CUDA_CHECK(cudaEventRecord(a, s));
    f();
    SDNN_CUDA_CHECK(cudaEventRecord(b, s));
    SDNN_CUDA_CHECK(cudaEventSynchronize(b));
    SDNN_CUDA_CHECK(cudaEventElapsedTime(&ms[static_cast<std::size_t>(i)], a, b));
  }
  SDNN_CUDA_CHECK(cudaEventDestroy(a));
  SDNN_CUDA_CHECK(cudaEventDestroy(b));
  std::nth_element(ms.begin(), ms.begin() + kReps / 2, ms.end());
  return ms[kReps / 2] * 1e-3;
}

// One weight shape: W pruned to 2:4 on the host, dense copy on the device, X and Y for the
// largest N, the sdnn plans (auto and forced tiles).
struct problem {
  std::int64_t m = 0, k = 0, max_n = 0;
  sparse24_matrix<bf16> w;
  buffer<bf16, device_space> w_dense, x, y;
  std::unique_ptr<l2_flusher> flush;
  std::unique_ptr<ops::sparse24_linear_plan<bf16, bf16>> plan;
  std::unique_ptr<ops::sparse24_linear_plan<bf16, bf16, policy::sparse24_tile_n8>> p8;
  std::unique_ptr<ops::sparse24_linear_plan<bf16, bf16, policy::sparse24_tile_n32>> p32;
  std::unique_ptr<ops::sparse24_linear_plan<bf16, bf16, policy::sparse24_tile_n64>> p64;
  std::unique_ptr<ops::sparse24_linear_plan<bf16, bf16, policy::sparse24_tile_n128>> p128;
  cublasHandle_t blas = nullptr;
  std::map<std::int64_t, std::vector<float>> y_dense;  // cuBLAS's Y per N, for rel_err
  std::map<std::int64_t, double> t_dense;               // cuBLAS's time per N
  ~problem() {
    if (blas) cublasDestroy(blas);
  }
  dense_view<bf16 const> xv(std::int64_t n) const { return {n, k, k, x.data()}; }
  dense_view<bf16> yv(std::int64_t n) { return {n, m, m, y.data()}; }
};

std::shared_ptr<problem> make_problem(std::int64_t m, std::int64_t k, std::int64_t max_n, bool sweep, cuda_exec e) {
  auto p = std::make_shared<problem>();
  p->m = m, p->k = k, p->max_n = max_n;
  std::mt19937 rng(static_cast<unsigned>(m * 131 + k));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  {
    dense_matrix<bf16> d(m, k);
    for (std::int64_t i = 0; i < m * k; ++i) d.data()[i] = bf16(u(rng));
    p->w = ops::prune_sparse24(d.view());
  }
  auto const wd = to_dense(p->w);
  p->w_dense = to_device(wd.data(), wd.size(), e);
  std::vector<bf16> x(static_cast<std::size_t>(max_n * k));
  for (auto& v : x) v = bf16(u(rng));
  p->x = to_device(x.data(), x.size(), e);
  p->y = buffer<bf16, device_space>(static_cast<std::size_t>(max_n * m), e);
  p->flush = std::make_unique<l2_flusher>(e);
  p->plan = std::make_unique<ops::sparse24_linear_plan<bf16, bf16>>(p->w, e);
  if (sweep) {
    p->p8 = std::make_unique<decltype(p->p8)::element_type>(p->w, e);
    p->p32 = std::make_unique<decltype(p->p32)::element_type>(p->w, e);
    p->p64 = std::make_unique<decltype(p->p64)::element_type>(p->w, e);
    p->p128 = std::make_unique<decltype(p->p128)::element_type>(p->w, e);
  }
  cublas_check(cublasCreate(&p->blas), "cublasCreate");
  cublas_check(cublasSetStream(p->blas, e.stream), "cublasSetStream");
  SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));
  return p;
}

// Only the current shape's problem stays alive (released by main before the runtime unloads).
std::shared_ptr<problem>& current_problem() {
  static std::shared_ptr<problem> cur;
  return cur;
}
std::shared_ptr<problem> get_problem(std::int64_t m, std::int64_t k, std::int64_t max_n, bool sweep) {
  auto& cur = current_problem();
  if (!cur || cur->m != m || cur->k != k) {
    cur.reset();
    cur = make_problem(m, k, max_n, sweep, cuda_exec{stream()});
  }
  return cur;
}

std::vector<float> download_y(problem& p, std::int64_t n) {
  std::vector<bf16> h(static_cast<std::size_t>(n * p.m));
  SDNN_CUDA_CHECK(cudaMemcpyAsync(h.data(), p.y.data(), h.size() * sizeof(bf16), cudaMemcpyDeviceToHost, stream()));
  SDNN_CUDA_CHECK(cudaStreamSynchronize(stream()));
  std::vector<float> f(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) f[i] = static_cast<float>(h[i]);
  return f;
}

double copy_rate() {  // bytes read + written per second of a 1 GiB device-to-device copy
  static double r = [] {
    std::size_t const bytes = std::size_t(1) << 30;
    buffer<unsigned char, device_space> a(bytes, cuda_exec{stream()}), b(bytes, cuda_exec{stream()});
    SDNN_CUDA_CHECK(cudaMemsetAsync(a.data(), 1, bytes, stream()));
    double const t = sdnn_bench::median_seconds(
        [&] { SDNN_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, stream())); },
        stream(), 5, 1);
    return 2.0 * double(bytes) / t;
  }();
  return r;
}

void report(benchmark::State& st, problem& p, std::int64_t n, std::string const& impl, std::string const& detail,
            double t, bool sparse) {
  double const m = double(p.m), k = double(p.k), nn = double(n);
  double const w_bytes = sparse ? m * k + m * k / 8 : 2 * m * k;
  double const bytes = w_bytes + 2 * nn * k + 2 * nn * m, flops = 2 * m * nn * k;
  auto y = download_y(p, n);
  double rel = 0;
  if (auto it = p.y_dense.find(n); it != p.y_dense.end() && impl != "dense_cublas") {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
      double const d = double(y[i]) - it->second[i];
      num += d * d, den += double(it->second[i]) * it->second[i];
    }
    rel = den > 0 ? std::sqrt(num / den) : 0;
  }
  if (impl == "dense_cublas") p.y_dense[n] = std::move(y), p.t_dense[n] = t;
  double const dense_t = p.t_dense.count(n) ? p.t_dense[n] : 0;
  st.counters["us"] = t * 1e6;
  st.counters["x_dense"] = dense_t > 0 ? dense_t / t : 0;
  st.counters["hbm_pct"] = 100 * bytes / t / kHbm;
  st.counters["rel_err"] = rel;
  sdnn_bench::json_line j("linear_sparse24");
  j.str("utc", sdnn_bench::utc_time()).str("impl", impl).str("detail", detail);
  j.num("m", m).num("k", k).num("n", nn).num("time_us", t * 1e6);
  j.num("speedup_vs_dense", dense_t > 0 ? dense_t / t : 0);
  j.num("min_bytes", bytes).num("hbm_pct", 100 * bytes / t / kHbm);
  j.num("copy_tbs", copy_rate() * 1e-12).num("hbm_pct_of_copy", 100 * bytes / t / copy_rate());
  j.num("tflops", flops / t * 1e-12).num("tc_pct", 100 * flops / t / (sparse ? kPeakSparse : kPeakDense));
  j.num("rel_err_vs_dense", rel).str("flush", "L2 flushed before every call").num("reps", kReps);
  j.emit();
}

void register_shape(std::int64_t m, std::int64_t k, std::vector<std::int64_t> const& ns, bool sweep) {
  std::int64_t const max_n = *std::max_element(ns.begin(), ns.end());
  for (std::int64_t n : ns) {
    std::string const cfg = "W" + std::to_string(m) + "x" + std::to_string(k) + "/N" + std::to_string(n);
    auto add = [&](std::string const& name, std::function<void(benchmark::State&, problem&)> body) {
      benchmark::RegisterBenchmark((cfg + "/" + name).c_str(), [=](benchmark::State& st) {
        auto p = get_problem(m, k, max_n, sweep);
        for (auto _ : st) body(st, *p);
      })->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
    };
    // cuBLAS first: the baseline of speedup_vs_dense and rel_err.
    add("dense_cublas", [n](benchmark::State& st, problem& p) {
      float const alpha = 1.0f, beta = 0.0f;
      auto call = [&] {
        cublas_check(cublasGemmEx(p.blas, CUBLAS_OP_T, CUBLAS_OP_N, int(p.m), int(n), int(p.k), &alpha,
                                  p.w_dense.data(), CUDA_R_16BF, int(p.k), p.x.data(), CUDA_R_16BF, int(p.k), &beta,
                                  p.y.data(), CUDA_R_16BF, int(p.m), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "cublasGemmEx");
      };
      double const t = median_flushed(call, *p.flush, stream());
      st.SetIterationTime(t);
      report(st, p, n, "dense_cublas", "TN bf16, CUBLAS_COMPUTE_32F", t, false);
    });
    add("sdnn_24", [n](benchmark::State& st, problem& p) {
      cuda_exec const e{stream()};
      double const t = median_flushed([&] { p.plan->run(e, p.xv(n), p.yv(n), epilogue_none()); }, *p.flush, stream());
      st.SetIterationTime(t);
      report(st, p, n, "sdnn_24", p.plan->describe_run(n), t, true);
    });
    if (sweep) {
      auto tile = [&](std::string const& name, auto member) {
        add(name, [n, name, member](benchmark::State& st, problem& p) {
          cuda_exec const e{stream()};
          auto& plan = *(p.*member);
          double const t = median_flushed([&] { plan.run(e, p.xv(n), p.yv(n), epilogue_none()); }, *p.flush, stream());
          st.SetIterationTime(t);
          report(st, p, n, name, plan.describe_run(n), t, true);
        });
      };
      tile("sdnn_24_tile_n8", &problem::p8);
      tile("sdnn_24_tile_n32", &problem::p32);
      tile("sdnn_24_tile_n64", &problem::p64);
      tile("sdnn_24_tile_n128", &problem::p128);
    }
#if SDNN_HAS_CUSPARSELT
    add("cusparselt_24", [n](benchmark::State& st, problem& p) {
      cuda_exec const e{stream()};
      dense_view<bf16 const> const wv{p.m, p.k, p.k, p.w_dense.data()};
      std::unique_ptr<vendor::cusparselt_linear<bf16>> lt;
      std::int64_t nr = n;
      std::string name = "cusparselt_24", why;
      try {
        try {
          lt = std::make_unique<vendor::cusparselt_linear<bf16>>(wv, n, e);
        } catch (library_error const& err) {
          why = err.what();
          nr = (n + 15) / 16 * 16;  // cuSPARSELt's size rules: retry with N rounded up to 16
          if (nr > p.max_n || nr == n) throw;
          lt = std::make_unique<vendor::cusparselt_linear<bf16>>(wv, nr, e);
          name = "cusparselt_24_padN16";
        }
        double const t = median_flushed([&] { lt->run(e, p.xv(nr), p.yv(nr)); }, *p.flush, stream());
        st.SetIterationTime(t);
        report(st, p, n, name, why.empty() ? "ALG_DEFAULT + MatmulSearch" : "N=" + std::to_string(nr) + " ran: " + why,
               t, true);
      } catch (error const& err) {  // a refusal is a result, not the end of the run
        st.SetIterationTime(1.0);
        st.SkipWithError(err.what());
        sdnn_bench::json_line j("linear_sparse24");
        j.str("impl", "cusparselt_24").num("m", double(p.m)).num("k", double(p.k)).num("n", double(n));
        j.str("error", err.what()).emit();
      }
    });
#endif
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool const quick = sdnn_bench::take_flag(argc, argv, "--quick");
  std::vector<std::int64_t> const ns = quick ? std::vector<std::int64_t>{8, 128, 2048}
                                             : std::vector<std::int64_t>{1, 8, 32, 128, 512, 2048};
  struct shape {
    std::int64_t m, k;
  };
  std::vector<shape> const shapes = quick ? std::vector<shape>{{11008, 4096}}
                                          : std::vector<shape>{{11008, 4096}, {4096, 11008}, {8192, 8192}, {4096, 4096}};
  // The tile sweep on the headline shape only (it is the evidence for the tuning table).
  for (auto s : shapes) register_shape(s.m, s.k, ns, !quick && s.m == 11008 && s.k == 4096);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  current_problem().reset();
  benchmark::Shutdown();
  return 0;
}
