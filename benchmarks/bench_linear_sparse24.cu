// bench_linear_sparse24: Y[N x M] = X[N x K] W^T in bf16 with W 2:4, in one process: dense_cublas
// (cublasGemmEx TN on the pruned W stored dense, CUBLAS_COMPUTE_32F), sdnn_24 (sparse24_linear_plan,
// sparse24_auto), sdnn_24_tile_<t> (each candidate tile forced: the evidence of
// policy::sparse24_tuning_sm90; on 11008 x 4096, or everywhere with --sweep), cusparselt_24 (with
// SDNN_HAS_CUSPARSELT; _padN16 where cuSPARSELt refuses N and N rounded up to 16 runs), and the
// ceilings: read_floor_24 / read_floor_dense (one read of the 2:4 or dense W bytes, flushed alike),
// mma_sp_peak / mma_dense_peak (mma.sp m16n8k32 and mma m16n8k16 from registers, dense-equivalent
// flops). W 11008x4096, 4096x11008, 8192x8192, 4096x4096; N 1..2048.
// L2 flushed before every call (not timed): "clean" reads a buffer of twice the L2 (the L2 then
// holds clean lines, as after a previous layer's weights), "dirty" memsets it (the L2 then holds
// dirty lines that the timed call writes back to memory: about 50 MB of extra traffic on an H100).
// SDNN_BENCH_FLUSH = clean (default), dirty or both. Median of SDNN_BENCH_REPS (25) after
// SDNN_BENCH_WARMUP (3) warm-ups; JSON lines ($SDNN_BENCH_JSON) with speedup_vs_dense (same flush),
// hbm_pct, tc_pct, rel_err_vs_dense. --quick: 11008 x 4096, N = 8, 128, 2048; --ns a,b,..: other N.
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
#include <cstdlib>
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

int env_int(char const* name, int def) {
  char const* v = std::getenv(name);
  return v && *v ? std::atoi(v) : def;
}
int reps() {
  static int const r = std::max(1, env_int("SDNN_BENCH_REPS", 25));
  return r;
}
int warmups() {
  static int const w = std::max(0, env_int("SDNN_BENCH_WARMUP", 3));
  return w;
}

void cublas_check(cublasStatus_t st, char const* what) {
  if (st != CUBLAS_STATUS_SUCCESS) SDNN_FAIL("cuBLAS: ", what, " failed: ", cublasGetStatusName(st));
}

// Reads n 16-byte words; the sink is written only if their XOR hits a constant (never, in practice),
// which keeps the loads.
__global__ void read_words_kernel(uint4 const* p, std::size_t n, unsigned* sink) {
  unsigned a = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    uint4 const v = __ldcg(p + i);
    a ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (a == 0x9E3779B9u) *sink = a;
}
void read_words(void const* p, std::size_t bytes, unsigned* sink, cudaStream_t s) {
  read_words_kernel<<<sdnn::detail::sm_count() * 4, 512, 0, s>>>(static_cast<uint4 const*>(p), bytes / 16, sink);
  SDNN_CUDA_CHECK_LAUNCH();
}

enum class flush_mode { clean, dirty };
char const* name_of(flush_mode f) { return f == flush_mode::clean ? "clean" : "dirty"; }

// Twice the L2 size, read (clean) or rewritten (dirty) before every timed call.
struct l2_flusher {
  buffer<unsigned char, device_space> buf;
  buffer<unsigned, device_space> sink;
  int turn = 0;
  explicit l2_flusher(cuda_exec e) {
    int dev = 0, l2 = 0;
    SDNN_CUDA_CHECK(cudaGetDevice(&dev));
    SDNN_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    buf = buffer<unsigned char, device_space>(std::size_t(2) * std::max(l2, 1 << 20), e);
    sink = buffer<unsigned, device_space>(1, e);
    SDNN_CUDA_CHECK(cudaMemsetAsync(buf.data(), 0x3C, buf.size(), e.stream));
  }
  void operator()(flush_mode f, cudaStream_t s) {
    if (f == flush_mode::dirty) SDNN_CUDA_CHECK(cudaMemsetAsync(buf.data(), ++turn & 0xFF, buf.size(), s));
    else read_words(buf.data(), buf.size(), sink.data(), s);
  }
};

// Median seconds of f() over reps() calls, each after an L2 flush (not timed).
template <class F>
double median_flushed(F&& f, l2_flusher& flush, flush_mode mode, cudaStream_t s) {
  cudaEvent_t a, b;
  SDNN_CUDA_CHECK(cudaEventCreate(&a));
  SDNN_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < warmups(); ++i) f();
  int const n = reps();
  std::vector<float> ms(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    flush(mode, s);
    SDNN_CUDA_CHECK(cudaEventRecord(a, s));
    f();
    SDNN_CUDA_CHECK(cudaEventRecord(b, s));
    SDNN_CUDA_CHECK(cudaEventSynchronize(b));
    SDNN_CUDA_CHECK(cudaEventElapsedTime(&ms[static_cast<std::size_t>(i)], a, b));
  }
  SDNN_CUDA_CHECK(cudaEventDestroy(a));
  SDNN_CUDA_CHECK(cudaEventDestroy(b));
  std::nth_element(ms.begin(), ms.begin() + n / 2, ms.end());
  return ms[static_cast<std::size_t>(n / 2)] * 1e-3;
}

// The tensor-core ceilings: each warp keeps 8 independent accumulators and issues Iters x 8
// mma from registers (operands 1.0 and 0.5, not zeros). Sparse: mma.sp m16n8k32 (8192
// dense-equivalent flops, half of them done); dense: mma m16n8k16 (4096 flops).
template <bool Sparse>
__global__ void __launch_bounds__(256) mma_peak_kernel(float* out, int iters) {
  std::uint32_t a[4] = {0x3F803F80u, 0x3F003F00u, 0x3F803F00u, 0x3F003F80u};
  std::uint32_t b[4] = {0x3F003F00u, 0x3F803F80u, 0x3F003F80u, 0x3F803F00u};
  std::uint32_t const e = 0x44444444u;  // every group keeps positions (0, 1)
  float acc[8][4] = {};
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if constexpr (Sparse) {
        kernels::mma_sp_16832<__nv_bfloat16, 0>(acc[j], a, b, e);
      } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
      }
    }
  }
  float s = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// The tiles of the sweep: every candidate of policy/sparse24.hpp (none with -DSDNN_BENCH_SWEEP=0, a
// build that compiles faster).
#ifndef SDNN_BENCH_SWEEP
#define SDNN_BENCH_SWEEP 1
#endif
template <class Tile>
struct sweep_tile {
  using tile = Tile;
  char const* name;
};
template <class F>
void for_each_sweep_tile([[maybe_unused]] F&& f) {
#if SDNN_BENCH_SWEEP
  f(sweep_tile<policy::sparse24_tile_n8>{"n8"});
  f(sweep_tile<policy::sparse24_tile_n32>{"n32"});
  f(sweep_tile<policy::sparse24_tile_n64>{"n64"});
  f(sweep_tile<policy::sparse24_tile_n128>{"n128"});
  f(sweep_tile<policy::sparse24_tile_n128_w8>{"n128_w8"});
  f(sweep_tile<policy::sparse24_tile_m256_n64>{"m256_n64"});
  f(sweep_tile<policy::sparse24_tile_m256_n128>{"m256_n128"});
  f(sweep_tile<policy::sparse24_tile_m256_n128_k128>{"m256_n128_k128"});
#if SDNN_SPARSE24_WGMMA
  f(sweep_tile<policy::sparse24_tile_w_n32>{"w_n32"});
  f(sweep_tile<policy::sparse24_tile_w_n64>{"w_n64"});
  f(sweep_tile<policy::sparse24_tile_w_n128>{"w_n128"});
  f(sweep_tile<policy::sparse24_tile_w_m256_n128>{"w_m256_n128"});
  f(sweep_tile<policy::sparse24_tile_ws_n32>{"ws_n32"});
  f(sweep_tile<policy::sparse24_tile_ws_n64>{"ws_n64"});
  f(sweep_tile<policy::sparse24_tile_ws_n128>{"ws_n128"});
  f(sweep_tile<policy::sparse24_tile_ws_m256_n128>{"ws_m256_n128"});
#endif
#endif
}

// A type-erased plan (one tile forced) for the sweep.
struct any_plan {
  virtual ~any_plan() = default;
  virtual void run(cuda_exec e, dense_view<bf16 const> x, dense_view<bf16> y) const = 0;
  virtual std::string describe_run(std::int64_t n) const = 0;
};
template <class Tile>
struct tile_plan final : any_plan {
  ops::sparse24_linear_plan<bf16, bf16, Tile> p;
  tile_plan(sparse24_matrix<bf16> const& w, cuda_exec e) : p(w, e) {}
  void run(cuda_exec e, dense_view<bf16 const> x, dense_view<bf16> y) const override {
    p.run(e, x, y, epilogue_none());
  }
  std::string describe_run(std::int64_t n) const override { return p.describe_run(n); }
};

// One weight shape: W pruned to 2:4 on the host, dense copy on the device, X and Y for the
// largest N, the sdnn plans (auto and, for the sweep, each candidate tile).
struct problem {
  std::int64_t m = 0, k = 0, max_n = 0;
  sparse24_matrix<bf16> w;
  buffer<bf16, device_space> w_dense, x, y;
  std::unique_ptr<l2_flusher> flush;
  std::unique_ptr<ops::sparse24_linear_plan<bf16, bf16>> plan;
  std::map<std::string, std::unique_ptr<any_plan>> tiles;
  cublasHandle_t blas = nullptr;
  std::map<std::pair<std::int64_t, int>, std::vector<float>> y_dense;  // cuBLAS's Y per (N, flush), for rel_err
  std::map<std::pair<std::int64_t, int>, double> t_dense;               // cuBLAS's time per (N, flush)
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
  if (sweep)
    for_each_sweep_tile([&](auto t) {
      using Tile = typename decltype(t)::tile;
      p->tiles[t.name] = std::make_unique<tile_plan<Tile>>(p->w, e);
    });
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

void report(benchmark::State& st, problem& p, std::int64_t n, flush_mode fm, std::string const& impl,
            std::string const& detail, double t, bool sparse) {
  double const m = double(p.m), k = double(p.k), nn = double(n);
  double const w_bytes = sparse ? m * k + m * k / 8 : 2 * m * k;
  double const bytes = w_bytes + 2 * nn * k + 2 * nn * m, flops = 2 * m * nn * k;
  auto const key = std::make_pair(n, int(fm));
  auto y = download_y(p, n);
  double rel = 0;
  if (auto it = p.y_dense.find(key); it != p.y_dense.end() && impl != "dense_cublas") {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
      double const d = double(y[i]) - it->second[i];
      num += d * d, den += double(it->second[i]) * it->second[i];
    }
    rel = den > 0 ? std::sqrt(num / den) : 0;
  }
  if (impl == "dense_cublas") p.y_dense[key] = std::move(y), p.t_dense[key] = t;
  double const dense_t = p.t_dense.count(key) ? p.t_dense[key] : 0;
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
  j.num("rel_err_vs_dense", rel).str("flush", name_of(fm)).num("reps", reps());
  j.emit();
}

// The ceilings, once per process: mma.sp and mma from registers over every SM.
void register_peaks() {
  auto peak = [](std::string const& name, auto kernel, double flops_per_mma) {
    benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
      int const blocks = sdnn::detail::sm_count() * 4, threads = 256, iters = 4096;
      buffer<float, device_space> out(static_cast<std::size_t>(blocks * threads), cuda_exec{stream()});
      double t = 0;
      for (auto _ : st) {
        t = sdnn_bench::median_seconds(
            [&] {
              kernel<<<blocks, threads, 0, stream()>>>(out.data(), iters);
              SDNN_CUDA_CHECK_LAUNCH();
            },
            stream(), 5, 2);
        st.SetIterationTime(t);
      }
      double const flops = double(blocks) * (threads / 32) * iters * 8 * flops_per_mma;
      st.counters["tflops"] = flops / t * 1e-12;
      sdnn_bench::json_line j("linear_sparse24");
      j.str("utc", sdnn_bench::utc_time()).str("impl", name).str("detail", "8 independent mma per warp, 32 warps/SM");
      j.num("time_us", t * 1e6).num("tflops", flops / t * 1e-12).num("tc_pct", 100 * flops / t / kPeakDense);
      j.emit();
    })->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
  };
  peak("mma_sp_peak", mma_peak_kernel<true>, 16.0 * 8 * 32 * 2);
  peak("mma_dense_peak", mma_peak_kernel<false>, 16.0 * 8 * 16 * 2);
}

void register_shape(std::int64_t m, std::int64_t k, std::vector<std::int64_t> const& ns, bool sweep,
                    std::vector<flush_mode> const& modes) {
  std::int64_t const max_n = *std::max_element(ns.begin(), ns.end());
  std::string const shape = "W" + std::to_string(m) + "x" + std::to_string(k);
  for (flush_mode fm : modes) {
    std::string const fs = std::string("/") + name_of(fm);
    // The memory floor: one read of the 2:4 bytes (values + metadata) and of the dense bytes.
    benchmark::RegisterBenchmark((shape + fs + "/read_floor").c_str(), [=](benchmark::State& st) {
      auto p = get_problem(m, k, max_n, sweep);
      for (auto _ : st) {
        for (bool sparse : {true, false}) {
          std::size_t const bytes = (sparse ? std::size_t(m * k + m * k / 8) : std::size_t(2 * m * k)) / 16 * 16;
          double const t = median_flushed([&] { read_words(p->w_dense.data(), bytes, p->flush->sink.data(), stream()); },
                                          *p->flush, fm, stream());
          st.SetIterationTime(t);
          sdnn_bench::json_line j("linear_sparse24");
          j.str("utc", sdnn_bench::utc_time()).str("impl", sparse ? "read_floor_24" : "read_floor_dense");
          j.str("detail", "one read of the W bytes, uint4 loads").num("m", double(m)).num("k", double(k)).num("n", 0);
          j.num("time_us", t * 1e6).num("min_bytes", double(bytes)).num("hbm_pct", 100 * double(bytes) / t / kHbm);
          j.str("flush", name_of(fm)).num("reps", reps()).emit();
        }
      }
    })->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
    for (std::int64_t n : ns) {
      std::string const cfg = shape + "/N" + std::to_string(n) + fs;
      auto add = [&](std::string const& name, std::function<void(benchmark::State&, problem&)> body) {
        benchmark::RegisterBenchmark((cfg + "/" + name).c_str(), [=](benchmark::State& st) {
          auto p = get_problem(m, k, max_n, sweep);
          for (auto _ : st) body(st, *p);
        })->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
      };
      // cuBLAS first: the baseline of speedup_vs_dense and rel_err.
      add("dense_cublas", [n, fm](benchmark::State& st, problem& p) {
        float const alpha = 1.0f, beta = 0.0f;
        auto call = [&] {
          cublas_check(cublasGemmEx(p.blas, CUBLAS_OP_T, CUBLAS_OP_N, int(p.m), int(n), int(p.k), &alpha,
                                    p.w_dense.data(), CUDA_R_16BF, int(p.k), p.x.data(), CUDA_R_16BF, int(p.k), &beta,
                                    p.y.data(), CUDA_R_16BF, int(p.m), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                       "cublasGemmEx");
        };
        double const t = median_flushed(call, *p.flush, fm, stream());
        st.SetIterationTime(t);
        report(st, p, n, fm, "dense_cublas", "TN bf16, CUBLAS_COMPUTE_32F", t, false);
      });
      add("sdnn_24", [n, fm](benchmark::State& st, problem& p) {
        cuda_exec const e{stream()};
        double const t =
            median_flushed([&] { p.plan->run(e, p.xv(n), p.yv(n), epilogue_none()); }, *p.flush, fm, stream());
        st.SetIterationTime(t);
        report(st, p, n, fm, "sdnn_24", p.plan->describe_run(n), t, true);
      });
      if (sweep && fm == flush_mode::clean)  // the sweep once, under the default flush
        for_each_sweep_tile([&](auto tile) {
          std::string const name = std::string("sdnn_24_tile_") + tile.name, key = tile.name;
          add(name, [n, fm, name, key](benchmark::State& st, problem& p) {
            cuda_exec const e{stream()};
            auto const& plan = *p.tiles.at(key);
            double const t = median_flushed([&] { plan.run(e, p.xv(n), p.yv(n)); }, *p.flush, fm, stream());
            st.SetIterationTime(t);
            report(st, p, n, fm, name, plan.describe_run(n), t, true);
          });
        });
#if SDNN_HAS_CUSPARSELT
      add("cusparselt_24", [n, fm](benchmark::State& st, problem& p) {
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
          double const t = median_flushed([&] { lt->run(e, p.xv(nr), p.yv(nr)); }, *p.flush, fm, stream());
          st.SetIterationTime(t);
          report(st, p, n, fm, name,
                 why.empty() ? "ALG_DEFAULT + MatmulSearch" : "N=" + std::to_string(nr) + " ran: " + why, t, true);
        } catch (error const& err) {  // a refusal is a result, not the end of the run
          st.SetIterationTime(1.0);
          st.SkipWithError(err.what());
          sdnn_bench::json_line j("linear_sparse24");
          j.str("impl", "cusparselt_24").num("m", double(p.m)).num("k", double(p.k)).num("n", double(n));
          j.str("flush", name_of(fm)).str("error", err.what()).emit();
        }
      });
#endif
    }
  }
}

// "--ns 8,128" (removed from argv): the N to run; empty when absent.
std::vector<std::int64_t> take_ns(int& argc, char** argv) {
  std::vector<std::int64_t> ns;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--ns") {
      std::string const v = argv[i + 1];
      for (std::size_t a = 0; a < v.size();) {
        std::size_t b = v.find(',', a);
        if (b == std::string::npos) b = v.size();
        ns.push_back(std::stoll(v.substr(a, b - a)));
        a = b + 1;
      }
      for (int j = i; j + 2 < argc; ++j) argv[j] = argv[j + 2];
      argc -= 2;
      break;
    }
  return ns;
}

}  // namespace

int main(int argc, char** argv) {
  bool const quick = sdnn_bench::take_flag(argc, argv, "--quick");
  bool const sweep_all = sdnn_bench::take_flag(argc, argv, "--sweep");
  auto ns = take_ns(argc, argv);
  if (ns.empty())
    ns = quick ? std::vector<std::int64_t>{8, 128, 2048} : std::vector<std::int64_t>{1, 8, 32, 128, 512, 2048};
  std::vector<flush_mode> modes{flush_mode::clean};
  if (char const* f = std::getenv("SDNN_BENCH_FLUSH")) {
    std::string const v = f;
    if (v == "dirty") modes = {flush_mode::dirty};
    else if (v == "both") modes = {flush_mode::clean, flush_mode::dirty};
  }
  struct shape {
    std::int64_t m, k;
  };
  std::vector<shape> const shapes = quick ? std::vector<shape>{{11008, 4096}}
                                          : std::vector<shape>{{11008, 4096}, {4096, 11008}, {8192, 8192}, {4096, 4096}};
  register_peaks();
  // The tile sweep on the headline shape (the evidence for the tuning table), or everywhere with --sweep.
  for (auto s : shapes) register_shape(s.m, s.k, ns, sweep_all || (!quick && s.m == 11008 && s.k == 4096), modes);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  current_problem().reset();
  benchmark::Shutdown();
  return 0;
}
