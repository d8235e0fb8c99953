// bench_quantized_spmm: the sparse_linear forward Y[N x K] = X[N x K] * W[K x M] with W stored
// as float CSR, int8 CSR and 4-bit codebook CSR (formats/quantized.hpp), timed in the same
// process against cuSPARSE SpMM on the float weights:
//
//   float_csc_gather   sdnn's float dense x sparse kernel (ops::dense_sparse_plan<csc_gather<>>)
//   cusparse_spmm      cuSPARSE SpMM (float, ALG_DEFAULT, reused buffer) on W^T
//   int8_channel_sym   ops::quantized_dense_sparse_plan<int8_encoding> (per-channel, symmetric)
//   int8_layer_asym    the same, per-layer asymmetric (zero point)
//   codebook4          ops::quantized_dense_sparse_plan<codebook4_encoding>
//
// Axes: K = M = 4096, N = 1024 activation rows, W sparsity 90 / 95 / 99 % (uniform random,
// Bernoulli per element, Laplace-like values as trained weights). X rotates over enough copies
// to exceed twice the L2 cache (each run streams X from device memory), identity epilogue.
//
// Output: Google Benchmark counters (GFLOPs = 2 * nnz * N / t; weight_B, index_B, value_B,
// param_B: host bytes of the format, footprint() of formats/quantized.hpp; x_float: speedup
// over float_csc_gather, x_cusparse: over cuSPARSE) and one JSON line per (sparsity, kernel)
// to $SDNN_BENCH_JSON (or stdout), family "quantized_spmm", with the same numbers plus
// rel_err: ||Y_q - Y_float||_2 / ||Y_float||_2 (the quantization error of the product).
// --quick: 90 % and 99 % only.
#include "bench_util.cuh"

#include <sdnn/sdnn.hpp>
#include <sdnn/formats/quantized.hpp>
#include <sdnn/linear/op/dense_sparse.cuh>
#include <sdnn/linear/op/quantized_spmm.cuh>

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
using sdnn_bench::utc_time;

constexpr std::int64_t kK = 4096, kM = 4096, kN = 1024;

struct problem {
  double sparsity = 0;
  csr_matrix<float, int> w;  // host, K x M
  quantized_csr<int8_encoding> q8c, q8l;
  quantized_csr<codebook4_encoding> qc;
  std::vector<buffer<float, device_space>> x;  // rotating copies of X (N x K)
  buffer<float, device_space> y;                // N x M
  std::vector<float> y_float;                   // the float product (host), for rel_err
  std::size_t turn = 0;
  dense_view<float const> xv() { return {kN, kK, kK, x[turn].data()}; }
  dense_view<float> yv() { return {kN, kM, kM, y.data()}; }
  void rotate() { turn = (turn + 1) % x.size(); }
};

std::shared_ptr<problem> make_problem(double sparsity, cuda_exec e) {
  auto p = std::make_shared<problem>();
  p->sparsity = sparsity;
  std::mt19937_64 rng(42 + static_cast<std::uint64_t>(sparsity * 1000));
  std::uniform_real_distribution<double> u(0, 1);
  double const density = 1.0 - sparsity, lq = std::log1p(-density);
  std::vector<int> rp{0}, ci;
  std::vector<float> v;
  ci.reserve(static_cast<std::size_t>(density * kK * kM * 1.01) + 16);
  v.reserve(ci.capacity());
  for (std::int64_t i = 0; i < kK; ++i) {
    // Geometric skips: one draw per nonzero.
    for (std::int64_t j = static_cast<std::int64_t>(std::log(1 - u(rng)) / lq); j < kM;
         j += 1 + static_cast<std::int64_t>(std::log(1 - u(rng)) / lq)) {
      ci.push_back(static_cast<int>(j));
      double const mag = -std::log(1.0 - u(rng)) * 0.05;  // Laplace-like, as trained weights
      v.push_back(static_cast<float>(u(rng) < 0.5 ? -mag : mag));
    }
    rp.push_back(static_cast<int>(ci.size()));
  }
  p->w = make_csr<float, int>(static_cast<int>(kK), static_cast<int>(kM), rp, ci, v);
  int8_options o;
  o.granularity = quant_granularity::per_channel;
  p->q8c = quantize_int8(p->w, o);
  o.granularity = quant_granularity::per_layer;
  o.symmetric = false;
  p->q8l = quantize_int8(p->w, o);
  p->qc = quantize_codebook4(p->w);

  int dev = 0, l2 = 0;
  SDNN_CUDA_CHECK(cudaGetDevice(&dev));
  SDNN_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  std::size_t const xbytes = static_cast<std::size_t>(kN * kK) * sizeof(float);
  std::size_t const copies =
      std::min<std::size_t>(8, std::max<std::size_t>(1, (2 * static_cast<std::size_t>(l2)) / xbytes + 1));
  std::vector<float> hx(static_cast<std::size_t>(kN * kK));
  std::mt19937 r2(7);
  std::uniform_real_distribution<float> xv(0.f, 1.f);  // post-ReLU activations
  for (auto& a : hx) a = xv(r2);
  for (std::size_t i = 0; i < copies; ++i) p->x.push_back(to_device(hx.data(), hx.size(), e));
  p->y = buffer<float, device_space>(static_cast<std::size_t>(kN * kM), e);
  SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));
  return p;
}

// Keeps only the current sparsity's problem alive (released by main before the CUDA runtime
// unloads: a static's destructor would free device memory too late).
std::shared_ptr<problem>& current_problem() {
  static std::shared_ptr<problem> cur;
  return cur;
}
std::shared_ptr<problem> get_problem(double sp) {
  auto& cur = current_problem();
  if (!cur || cur->sparsity != sp) {
    cur.reset();
    cur = make_problem(sp, cuda_exec{stream()});
  }
  return cur;
}

std::string config_name(double sp) {
  return "dense_x_qcsr/n" + std::to_string(kN) + "k" + std::to_string(kK) + "m" + std::to_string(kM) + "/sp" +
         std::to_string(static_cast<int>(sp * 100 + 0.5));
}

std::map<std::string, double> g_float_t, g_vendor_t;  // config -> seconds

double rel_err(problem& p) {
  std::vector<float> y(p.y.size());
  SDNN_CUDA_CHECK(cudaMemcpyAsync(y.data(), p.y.data(), y.size() * sizeof(float), cudaMemcpyDeviceToHost, stream()));
  SDNN_CUDA_CHECK(cudaStreamSynchronize(stream()));
  double num = 0, den = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    double const d = double(y[i]) - double(p.y_float[i]);
    num += d * d;
    den += double(p.y_float[i]) * double(p.y_float[i]);
  }
  return den > 0 ? std::sqrt(num / den) : 0.0;
}

// Times `run` (one product on stream(), reading p.xv()) and reports it.
void report(benchmark::State& st, problem& p, std::string const& kernel, weight_footprint const& fp,
            weight_footprint const& device_fp, std::function<void()> const& run) {
  std::string const cfg = config_name(p.sparsity);
  double const t = sdnn_bench::run_manual(st, [&] { run(); p.rotate(); }, stream(), 10);
  // The last product read some copy of X; all copies hold the same values.
  bool const is_float = kernel == "float_csc_gather", is_vendor = kernel == "cusparse_spmm";
  if (is_float) {
    p.y_float.resize(p.y.size());
    SDNN_CUDA_CHECK(cudaMemcpyAsync(p.y_float.data(), p.y.data(), p.y.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                    stream()));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(stream()));
    g_float_t[cfg] = t;
  }
  if (is_vendor) g_vendor_t[cfg] = t;
  bool const have_err = !is_float && !p.y_float.empty();  // a filter may have skipped the float run
  double const err = have_err ? rel_err(p) : 0.0;
  double const nnz = static_cast<double>(p.w.nnz());
  double const flops = 2.0 * nnz * static_cast<double>(kN);
  st.counters["GFLOPs"] = flops / t * 1e-9;
  st.counters["weight_B"] = static_cast<double>(fp.total());
  st.counters["index_B"] = static_cast<double>(fp.index_bytes);
  st.counters["value_B"] = static_cast<double>(fp.value_bytes);
  st.counters["param_B"] = static_cast<double>(fp.param_bytes);
  if (have_err) st.counters["rel_err"] = err;
  sdnn_bench::json_line j("quantized_spmm");
  j.str("utc", utc_time()).str("config", cfg).str("kernel", kernel);
  j.num("n", kN).num("k", kK).num("m", kM).num("nnz", nnz).num("sparsity", p.sparsity);
  j.num("vendor", is_vendor ? 1 : 0).num("time_ms", t * 1e3).num("gflops", flops / t * 1e-9);
  j.num("weight_bytes", static_cast<double>(fp.total())).num("index_bytes", static_cast<double>(fp.index_bytes));
  j.num("value_bytes", static_cast<double>(fp.value_bytes)).num("param_bytes", static_cast<double>(fp.param_bytes));
  j.num("device_weight_bytes", static_cast<double>(device_fp.total()));
  if (have_err || is_float) j.num("rel_err", err);
  if (auto it = g_float_t.find(cfg); it != g_float_t.end()) {
    j.num("speedup_vs_float", it->second / t);
    st.counters["x_float"] = it->second / t;
  }
  if (auto it = g_vendor_t.find(cfg); it != g_vendor_t.end()) {
    j.num("speedup_vs_cusparse", it->second / t);
    st.counters["x_cusparse"] = it->second / t;
  }
  j.emit();
}

void register_config(double sp) {
  std::string const cfg = config_name(sp);
  auto add = [&](std::string const& name, std::function<void(benchmark::State&, problem&, cuda_exec)> body) {
    benchmark::RegisterBenchmark((cfg + "/" + name).c_str(), [=](benchmark::State& st) {
      auto p = get_problem(sp);
      body(st, *p, cuda_exec{stream()});
    })->UseManualTime()->Iterations(3)->Unit(benchmark::kMicrosecond);
  };
  // Registration order is run order: the float kernel first (the reference of rel_err and
  // x_float), then cuSPARSE (x_cusparse), then the quantized kernels.
  add("float_csc_gather", [](benchmark::State& st, problem& p, cuda_exec e) {
    ops::dense_sparse_plan<policy::csc_gather<>, float> plan(p.w, e, plan_options{kN, true});
    auto const fp = footprint(p.w);
    weight_footprint const dfp{(static_cast<std::size_t>(kM) + 1 + p.w.col_idx().size()) * 4, fp.value_bytes, 0};
    report(st, p, "float_csc_gather", fp, dfp, [&] { plan.run(e, p.xv(), p.yv(), epilogue_none<float>()); });
  });
  add("cusparse_spmm", [](benchmark::State& st, problem& p, cuda_exec e) {
    ops::dense_sparse_plan<policy::cusparse_spmm<>, float> plan(p.w, e, plan_options{kN, true});
    auto const fp = footprint(p.w);
    weight_footprint const dfp{(static_cast<std::size_t>(kM) + 1 + p.w.col_idx().size()) * 4, fp.value_bytes, 0};
    report(st, p, "cusparse_spmm", fp, dfp, [&] { plan.run(e, p.xv(), p.yv(), epilogue_none<float>()); });
  });
  add("int8_channel_sym", [](benchmark::State& st, problem& p, cuda_exec e) {
    ops::quantized_dense_sparse_plan<int8_encoding> plan(p.q8c, e);
    report(st, p, "int8_channel_sym", footprint(p.q8c), plan.weight_bytes(),
           [&] { plan.run(e, p.xv(), p.yv(), epilogue_none<float>()); });
  });
  add("int8_layer_asym", [](benchmark::State& st, problem& p, cuda_exec e) {
    ops::quantized_dense_sparse_plan<int8_encoding> plan(p.q8l, e);
    report(st, p, "int8_layer_asym", footprint(p.q8l), plan.weight_bytes(),
           [&] { plan.run(e, p.xv(), p.yv(), epilogue_none<float>()); });
  });
  add("codebook4", [](benchmark::State& st, problem& p, cuda_exec e) {
    ops::quantized_dense_sparse_plan<codebook4_encoding> plan(p.qc, e);
    report(st, p, "codebook4", footprint(p.qc), plan.weight_bytes(),
           [&] { plan.run(e, p.xv(), p.yv(), epilogue_none<float>()); });
  });
}

}  // namespace

int main(int argc, char** argv) {
  bool const quick = sdnn_bench::take_flag(argc, argv, "--quick");
  for (double sp : quick ? std::vector<double>{0.9, 0.99} : std::vector<double>{0.9, 0.95, 0.99}) register_config(sp);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  current_problem().reset();
  benchmark::Shutdown();
  return 0;
}
