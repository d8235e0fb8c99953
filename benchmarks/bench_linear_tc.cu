// bench_linear_tc: Y[N x M] = X[N x K] W^T (bf16, float accumulation, bf16 out) by cublas_bf16
// (cublasGemmEx TN, CUBLAS_COMPUTE_32F), tc_dense_mma, tc_tile_offsets (unstructured 50-99 %) and
// tc_block_sparse (32 x 32 blocks, 75/90 % empty), in one process. W 11008x4096, 4096x11008,
// 8192^2, 4096^2; N 1..2048. L2 flushed before every timed launch (outside the events); median of
// 20 after 3 untimed. One JSON line per point ($SDNN_BENCH_JSON or stdout, family "linear_tc"):
// GPU, CUDA, date, time, speedup over cuBLAS, % of HBM peak (3.35 TB/s; W as stored + X + Y) and
// of the dense bf16 tensor-core peak (989 TFLOP/s; the mma work issued). --quick: 11008 x 4096,
// N 8/32/2048, 70/90/95 % and 90 % blocks. A subset (short device calls): --shapes=MxK,..
// --n=8,32,.. --unstructured=0.9,.. --blocked=0.9,.. (an empty list: none) --no-dense
// --shape=small|large|stream|direct|tma (the sparse plans' shape forced; the JSON's launch field says
// which ran; direct: 32 x 32 blocks only; tma: blocks only, sm_90).
#include "bench_util.cuh"

#include <cublas_v2.h>

#include <sdnn/formats/block_sparse.hpp>
#include <sdnn/formats/tile_offsets.hpp>
#include <sdnn/linear/op/tc_linear.cuh>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace sdnn;

namespace {
using sdnn_bench::stream;

constexpr double kHbmPeak = 3.35e12, kTcPeak = 989e12;  // H100 SXM datasheet: HBM3, dense bf16
bool g_dense = true;                                      // tc_dense_mma points
policy::tc_shape g_shape = policy::tc_shape::automatic;  // --shape=...: forced for the sparse plans

#define BENCH_CUBLAS(call)                                                                          \
  do {                                                                                              \
    cublasStatus_t st_ = (call);                                                                    \
    if (st_ != CUBLAS_STATUS_SUCCESS) SDNN_FAIL("cuBLAS: ", #call, " failed: ", cublasGetStatusName(st_)); \
  } while (0)

struct shape {
  std::int64_t m, k;
};

// A fast generator for the big matrices (the pattern and values need no quality beyond uniform).
struct xorshift {
  std::uint64_t s;
  std::uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
  float value() { return float(uniform() * 2.0 - 1.0); }  // trained-weight-like magnitudes do not matter here
};

// Device data of one shape, shared by every configuration: X (largest N), Y, the flush buffer.
struct shape_data {
  shape s;
  buffer<bf16, device_space> x, y;
  buffer<unsigned char, device_space> flush;
  buffer<bf16, device_space> w_dense;  // for cuBLAS
  cublasHandle_t h = nullptr;
  std::map<std::int64_t, double> cublas_t;  // N -> seconds
  ~shape_data() {
    if (h) cublasDestroy(h);
  }
};

std::shared_ptr<shape_data>& current_shape() {
  static std::shared_ptr<shape_data> cur;
  return cur;
}

dense_matrix<bf16> make_w(shape s, double sparsity, int block, std::uint64_t seed) {
  xorshift r{seed * 0x9E3779B97F4A7C15ull + 1};
  dense_matrix<bf16> w(s.m, s.k);
  if (block == 0) {
    for (auto& v : w.values()) v = r.uniform() < sparsity ? bf16(0.f) : bf16(r.value() + (r.value() > 0 ? 0.01f : -0.01f));
  } else {
    std::int64_t const rb = (s.m + block - 1) / block, cb = (s.k + block - 1) / block;
    std::vector<char> keep(std::size_t(rb * cb));
    for (auto& kf : keep) kf = r.uniform() >= sparsity;
    for (std::int64_t i = 0; i < s.m; ++i)
      for (std::int64_t j = 0; j < s.k; ++j)
        w(i, j) = keep[std::size_t((i / block) * cb + j / block)] ? bf16(r.value() + 0.01f) : bf16(0.f);
  }
  return w;
}

std::shared_ptr<shape_data> get_shape(shape s) {
  auto& cur = current_shape();
  if (cur && cur->s.m == s.m && cur->s.k == s.k) return cur;
  cur.reset();
  cuda_exec e{stream()};
  auto d = std::make_shared<shape_data>();
  d->s = s;
  std::int64_t const nmax = 2048;
  xorshift r{7};
  std::vector<bf16> hx(std::size_t(nmax * s.k));
  for (auto& v : hx) v = bf16(r.value());
  d->x = to_device(hx.data(), hx.size(), e);
  d->y = buffer<bf16, device_space>(std::size_t(nmax * s.m), e);
  int dev = 0, l2 = 0;
  SDNN_CUDA_CHECK(cudaGetDevice(&dev));
  SDNN_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  d->flush = buffer<unsigned char, device_space>(std::size_t(2) * std::size_t(l2), e);
  auto w = make_w(s, 0.0, 0, 1);
  d->w_dense = to_device(w.data(), w.size(), e);
  BENCH_CUBLAS(cublasCreate(&d->h));
  BENCH_CUBLAS(cublasSetStream(d->h, stream()));
  SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));
  cur = d;
  return d;
}

// Median seconds of `reps` launches of f, each after an L2 flush (outside the events).
double time_flushed(shape_data& d, std::function<void()> const& f, int reps = 20) {
  cudaStream_t s = stream();
  for (int i = 0; i < 3; ++i) f();
  cudaEvent_t a, b;
  SDNN_CUDA_CHECK(cudaEventCreate(&a));
  SDNN_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> ms(static_cast<std::size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    SDNN_CUDA_CHECK(cudaMemsetAsync(d.flush.data(), i & 0xff, d.flush.size(), s));
    SDNN_CUDA_CHECK(cudaEventRecord(a, s));
    f();
    SDNN_CUDA_CHECK(cudaEventRecord(b, s));
    SDNN_CUDA_CHECK(cudaEventSynchronize(b));
    SDNN_CUDA_CHECK(cudaEventElapsedTime(&ms[std::size_t(i)], a, b));
  }
  SDNN_CUDA_CHECK(cudaEventDestroy(a));
  SDNN_CUDA_CHECK(cudaEventDestroy(b));
  std::nth_element(ms.begin(), ms.begin() + reps / 2, ms.end());
  return ms[std::size_t(reps / 2)] * 1e-3;
}

// One configuration's plan (built once, reused across N).
struct config {
  std::string kernel;  // tc_dense_mma, tc_tile_offsets, tc_block_sparse
  double sparsity = 0;
  shape s{};
  std::size_t weight_bytes = 0;
  double mma_fraction = 1;  // share of the dense mma work the kernel issues
  std::function<void(std::int64_t, cuda_exec)> run;
  std::function<std::string(std::int64_t)> describe;
  std::shared_ptr<void> keep;
};
std::shared_ptr<config>& current_config() {
  static std::shared_ptr<config> cur;
  return cur;
}

std::shared_ptr<config> get_config(shape s, std::string const& kernel, double sparsity) {
  auto& cur = current_config();
  if (cur && cur->kernel == kernel && cur->sparsity == sparsity && cur->s.m == s.m && cur->s.k == s.k) return cur;
  cur.reset();
  auto d = get_shape(s);
  auto c = std::make_shared<config>();
  c->kernel = kernel;
  c->sparsity = sparsity;
  c->s = s;
  cuda_exec e{stream()};
  auto xv = [d, s](std::int64_t n) { return dense_view<bf16 const>{n, s.k, s.k, d->x.data()}; };
  auto yv = [d, s](std::int64_t n) { return dense_view<bf16>{n, s.m, s.m, d->y.data()}; };
  if (kernel == "tc_dense_mma") {
    auto w = make_w(s, 0.0, 0, 1);
    auto p = std::make_shared<ops::tc_linear_plan<policy::tc_dense_mma, bf16>>(w, e);
    c->weight_bytes = p->weight_bytes();
    c->run = [p, xv, yv](std::int64_t n, cuda_exec ex) { p->run(ex, xv(n), yv(n), epilogue_none<float>()); };
    c->describe = [p](std::int64_t n) { return p->describe(n); };
    c->keep = p;
  } else if (kernel == "tc_tile_offsets") {
    auto w = make_w(s, sparsity, 0, std::uint64_t(sparsity * 1000) + 2);
    auto t = tile_offsets_from_dense(w.view());
    std::int64_t nonempty_sub = 0;
    {
      auto v = t.view();
      for (std::int32_t q = 0; q < v.ntiles; ++q) {
        std::uint8_t const* rec = v.data + std::size_t(v.tile_offset[q]) * 16;
        for (int sidx = 0; sidx < 16; ++sidx) nonempty_sub += sdnn::detail::read_u16(rec + 2 * sidx) != sdnn::detail::read_u16(rec + 2 * sidx + 2);
      }
    }
    c->mma_fraction = double(nonempty_sub) * 256.0 / (double(s.m) * double(s.k));
    auto p = std::make_shared<ops::tc_linear_plan<policy::tc_tile_offsets_mma, bf16>>(t, e, plan_options{}, g_shape);
    c->weight_bytes = p->weight_bytes();
    c->run = [p, xv, yv](std::int64_t n, cuda_exec ex) { p->run(ex, xv(n), yv(n), epilogue_none<float>()); };
    c->describe = [p](std::int64_t n) { return p->describe(n); };
    c->keep = p;
  } else {
    auto w = make_w(s, sparsity, 32, std::uint64_t(sparsity * 1000) + 3);
    auto b = block_sparse_from_dense(w.view(), 32, 32);
    c->mma_fraction = double(b.nnzb()) * 1024.0 / (double(s.m) * double(s.k));
    auto p = std::make_shared<ops::tc_linear_plan<policy::tc_block_sparse_mma, bf16>>(b, e, plan_options{}, g_shape);
    c->weight_bytes = p->weight_bytes();
    c->run = [p, xv, yv](std::int64_t n, cuda_exec ex) { p->run(ex, xv(n), yv(n), epilogue_none<float>()); };
    c->describe = [p](std::int64_t n) { return p->describe(n); };
    c->keep = p;
  }
  SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));
  cur = c;
  return c;
}

std::string shape_name(shape s) { return std::to_string(s.m) + "x" + std::to_string(s.k); }

void report(benchmark::State& st, shape s, std::int64_t n, std::string const& kernel, double sparsity, double t,
            std::size_t weight_bytes, double mma_fraction, std::string const& what) {
  auto d = get_shape(s);
  double const bytes = double(weight_bytes) + 2.0 * double(n) * double(s.k + s.m);
  double const flops = 2.0 * double(s.m) * double(s.k) * double(n) * mma_fraction;
  st.counters["us"] = t * 1e6;
  st.counters["hbm_pct"] = 100.0 * bytes / t / kHbmPeak;
  st.counters["tc_pct"] = 100.0 * flops / t / kTcPeak;
  sdnn_bench::json_line j("linear_tc");
  j.str("utc", sdnn_bench::utc_time()).str("shape", shape_name(s)).str("kernel", kernel);
  j.num("m", double(s.m)).num("k", double(s.k)).num("n", double(n)).num("sparsity", sparsity);
  j.num("time_us", t * 1e6).num("bytes", bytes).num("hbm_pct", 100.0 * bytes / t / kHbmPeak);
  j.num("mma_flops", flops).num("tc_pct", 100.0 * flops / t / kTcPeak);
  if (auto it = d->cublas_t.find(n); it != d->cublas_t.end()) {
    j.num("speedup_vs_cublas", it->second / t);
    st.counters["x_cublas"] = it->second / t;
  }
  if (!what.empty()) j.str("launch", what);
  j.emit();
}

void register_shape(shape s, std::vector<std::int64_t> const& ns, std::vector<double> const& unstructured,
                    std::vector<double> const& blocked) {
  std::string const sn = shape_name(s);
  auto add = [](std::string const& name, std::function<void(benchmark::State&)> f) {
    benchmark::RegisterBenchmark(name.c_str(), [f](benchmark::State& st) { f(st); })
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMicrosecond);
  };
  // Registration order is run order: cuBLAS first (the speedups' reference), then each
  // configuration over every N (its weights are built once).
  for (auto n : ns)
    add(sn + "/n" + std::to_string(n) + "/cublas_bf16", [s, n](benchmark::State& st) {
      auto d = get_shape(s);
      float const alpha = 1.f, beta = 0.f;
      auto f = [&] {
        BENCH_CUBLAS(cublasGemmEx(d->h, CUBLAS_OP_T, CUBLAS_OP_N, int(s.m), int(n), int(s.k), &alpha, d->w_dense.data(),
                                  CUDA_R_16BF, int(s.k), d->x.data(), CUDA_R_16BF, int(s.k), &beta, d->y.data(),
                                  CUDA_R_16BF, int(s.m), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      };
      double t = 0;
      for (auto _ : st) {
        t = time_flushed(*d, f);
        st.SetIterationTime(t);
      }
      d->cublas_t[n] = t;
      report(st, s, n, "cublas_bf16", 0.0, t, std::size_t(s.m * s.k * 2), 1.0, "");
    });
  auto add_config = [&](std::string const& kernel, double sp) {
    for (auto n : ns) {
      std::string const name =
          sn + "/n" + std::to_string(n) + "/" + kernel + (kernel == "tc_dense_mma" ? "" : "/sp" + std::to_string(int(sp * 100 + 0.5)));
      add(name, [s, n, kernel, sp](benchmark::State& st) {
        auto c = get_config(s, kernel, sp);
        auto d = get_shape(s);
        double t = 0;
        for (auto _ : st) {
          t = time_flushed(*d, [&] { c->run(n, cuda_exec{stream()}); });
          st.SetIterationTime(t);
        }
        report(st, s, n, kernel, sp, t, c->weight_bytes, c->mma_fraction, c->describe(n));
      });
    }
  };
  if (g_dense) add_config("tc_dense_mma", 0.0);
  for (double sp : unstructured) add_config("tc_tile_offsets", sp);
  for (double sp : blocked) add_config("tc_block_sparse", sp);
}

// --name=a,b,c: the values (removed from argv); absent: `fallback`.
template <class V>
std::vector<V> take_list(int& argc, char** argv, std::string const& name, std::vector<V> fallback) {
  std::string const key = name + "=";
  int out = 0;
  for (int i = 0; i < argc; ++i) {
    std::string const a = argv[i];
    if (i > 0 && a.compare(0, key.size(), key) == 0) {
      fallback.clear();
      std::string rest = a.substr(key.size());
      while (!rest.empty()) {
        auto const comma = rest.find(',');
        std::string const item = rest.substr(0, comma);
        if (!item.empty()) fallback.push_back(V(std::stod(item)));
        rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
      }
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  bool const quick = sdnn_bench::take_flag(argc, argv, "--quick");
  g_dense = !sdnn_bench::take_flag(argc, argv, "--no-dense");
  if (sdnn_bench::take_flag(argc, argv, "--shape=small")) g_shape = policy::tc_shape::small;
  if (sdnn_bench::take_flag(argc, argv, "--shape=large")) g_shape = policy::tc_shape::large;
  if (sdnn_bench::take_flag(argc, argv, "--shape=stream")) g_shape = policy::tc_shape::stream;
  if (sdnn_bench::take_flag(argc, argv, "--shape=direct")) g_shape = policy::tc_shape::direct;
  if (sdnn_bench::take_flag(argc, argv, "--shape=tma")) g_shape = policy::tc_shape::tma;
  auto const ns_opt = take_list<std::int64_t>(argc, argv, "--n", {});
  auto const un_opt = take_list<double>(argc, argv, "--unstructured", {-1});
  auto const bl_opt = take_list<double>(argc, argv, "--blocked", {-1});
  std::vector<shape> shapes_opt;
  {
    std::string const key = "--shapes=";
    int out = 0;
    for (int i = 0; i < argc; ++i) {
      std::string a = argv[i];
      if (i > 0 && a.compare(0, key.size(), key) == 0) {
        a = a.substr(key.size());
        while (!a.empty()) {
          auto const comma = a.find(',');
          std::string const item = a.substr(0, comma);
          auto const x = item.find('x');
          shapes_opt.push_back({std::stoll(item.substr(0, x)), std::stoll(item.substr(x + 1))});
          a = comma == std::string::npos ? "" : a.substr(comma + 1);
        }
      } else {
        argv[out++] = argv[i];
      }
    }
    argc = out;
  }
  benchmark::Initialize(&argc, argv);
  bool const subset = !ns_opt.empty() || shapes_opt.size() || un_opt != std::vector<double>{-1} ||
                      bl_opt != std::vector<double>{-1};
  if (subset) {
    auto const ns = ns_opt.empty() ? std::vector<std::int64_t>{8, 32, 2048} : ns_opt;
    auto const un = un_opt == std::vector<double>{-1} ? std::vector<double>{0.7, 0.9, 0.95} : un_opt;
    auto const bl = bl_opt == std::vector<double>{-1} ? std::vector<double>{0.9} : bl_opt;
    for (shape s : shapes_opt.empty() ? std::vector<shape>{{11008, 4096}} : shapes_opt) register_shape(s, ns, un, bl);
  } else if (quick) {
    register_shape({11008, 4096}, {8, 32, 2048}, {0.7, 0.9, 0.95}, {0.9});
  } else {
    std::vector<std::int64_t> const ns{1, 8, 32, 128, 512, 2048};
    for (shape s : {shape{11008, 4096}, shape{4096, 11008}, shape{8192, 8192}, shape{4096, 4096}})
      register_shape(s, ns, {0.5, 0.7, 0.9, 0.95, 0.99}, {0.75, 0.9});
  }
  benchmark::RunSpecifiedBenchmarks();
  current_config().reset();
  current_shape().reset();
  benchmark::Shutdown();
  return 0;
}
