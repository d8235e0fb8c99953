// bench_conv_quantized: direct sparse convolution with quantized weights against the
// float direct sparse convolution and dense cuDNN (float, CUDNN_FMA_MATH = no TF32), all in the
// same process on the same input. Layers: VGG-16 3x3 convolutions (bench_conv.cu's list; by
// default the five with C >= 64 at distinct sizes), pruned with the global rule at 90 % (the
// sparsity bench_conv's pass starts with), batch 32 (bench_conv uses 128; 32 keeps this run
// well under a minute).
//
// Formats: float (conv/op/direct_sparse.cuh), int8 (per output channel, symmetric; per layer, asymmetric)
// and codebook4 (16 half centroids), conv/op/direct_sparse_quantized.cuh. Each format is tuned on its own
// over direct_conv_candidates (median of 3 timed launches after one warm-up per candidate),
// then the chosen config is timed (median of 20). The quantized kernels are bitwise equal to
// the float kernel on the dequantized weights (tests/cuda/test_conv_quantized.cu), so only
// time and bytes differ.
//
// One JSON line per (layer, format) to $SDNN_BENCH_JSON (default stdout; bench_util.cuh adds
// GPU, CUDA versions, date): time_s, cudnn_s (convolution alone), speedup_vs_cudnn,
// speedup_vs_float, weight bytes of the host format (index / value / param / total) and of
// the device tiled weights, the tuned config.
// Flags (before Google Benchmark's own): --batch=32 --sparsity=0.9 --layers=substring
// (matches any of bench_conv's nine VGG names, e.g. --layers=vgg_ for all nine).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "bench_conv_layers.hpp"
#include "bench_util.cuh"

#include <sdnn/conv/weights.hpp>
#include <sdnn/conv/quantized_weights.hpp>
#include <sdnn/conv/kernel/util.cuh>
#include <sdnn/conv/op/direct_sparse.cuh>
#include <sdnn/conv/op/direct_sparse_quantized.cuh>
#include <sdnn/train/op/prune_uniform.hpp>
#if defined(SDNN_HAS_CUDNN)
#include <sdnn/conv/cudnn_conv.cuh>
#endif

using namespace sdnn;
using namespace sdnn::conv;

namespace {

using layer_spec = sdnn_bench::named_conv;  // benchmarks/common/bench_conv_layers.hpp
bool default_layer(std::string const& n) {
  return n == "vgg_64x224_64" || n == "vgg_128x112_128" || n == "vgg_256x56_256" || n == "vgg_512x28_512" ||
         n == "vgg_512x14_512";
}

struct options {
  int batch = 32;
  double sparsity = 0.9;
  std::string layer_filter;
} opt;

struct tuned {
  direct_conv_config config;
  double seconds = std::numeric_limits<double>::infinity();
};

// Tunes Plan over the candidates (each built from w), then times the winner (median of 20).
template <class Plan, class W, class Run>
tuned tune_and_time(W const& w, std::vector<direct_conv_config> const& cands, cuda_exec ex, Run&& run,
                    weight_footprint* device_bytes) {
  tuned best;
  for (auto const& c : cands) {
    if (!Plan::can_implement(w.shape, c)) continue;
    Plan const p(w, c, ex);
    double const t = sdnn_bench::median_seconds([&] { run(p); }, ex.stream, 3, 1);
    if (t < best.seconds) best = {c, t};
  }
  SDNN_EXPECTS(std::isfinite(best.seconds), "bench_conv_quantized: no candidate config can run ", w.shape.C, " x ",
               w.shape.H, " x ", w.shape.W, " -> ", w.shape.K);
  Plan const p(w, best.config, ex);
  if (device_bytes) {
    if constexpr (std::is_same_v<W, sparse_conv_weights<float>>) {
      auto const g = p.geometry();
      std::size_t const chunk_ptrs = std::size_t(g.nchunks) * w.shape.K + 1;
      *device_bytes = {(w.offsets.size() + chunk_ptrs) * sizeof(std::int32_t), w.values.size() * sizeof(float), 0};
    } else {
      *device_bytes = p.bytes();
    }
  }
  best.seconds = sdnn_bench::median_seconds([&] { run(p); }, ex.stream, 20, 3);
  return best;
}

void bench_layer(benchmark::State& state, layer_spec L) {
  cuda_exec ex;
  conv_shape const& s = L.s;
  std::mt19937 g(1234);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> dense(static_cast<std::size_t>(s.weight_count()));
  for (auto& x : dense) x = nd(g) / std::sqrt(float(s.filter_size()));
  std::vector<float> bias(static_cast<std::size_t>(s.K));
  for (auto& x : bias) x = 0.1f * nd(g);
  auto const pr = prune_uniform(dense.data(), s.K, s.filter_size(), opt.sparsity);
  auto const w = make_conv_weights<float>(s, pr);
  int8_options pc;
  pc.granularity = quant_granularity::per_channel;
  int8_options la;
  la.symmetric = false;
  auto const q8c = quantize_int8(w, pc);
  auto const q8a = quantize_int8(w, la);
  auto const q4 = quantize_codebook4(w);

  std::int64_t const N = opt.batch;
  device_buffer<float> in(static_cast<std::size_t>(N * s.in_features()), ex);
  device_buffer<float> out(static_cast<std::size_t>(N * s.out_features()), ex);
  device_buffer<float> db(bias.size(), ex);
  SDNN_CUDA_CHECK(cudaMemcpyAsync(db.data(), bias.data(), bias.size() * sizeof(float), cudaMemcpyHostToDevice, ex.stream));
  sdnn::conv::detail::fill_hash(in.data(), in.size(), 77u, ex);

  double cudnn_s = 0;
  int cudnn_algo = -1;
#if defined(SDNN_HAS_CUDNN)
  {
    layers::cudnn_conv2d<float> dn(s, dense, bias, true);
    dn.plan(N, s.in_features(), ex);
    cudnn_algo = int(dn.algorithm());
    cudnn_s = sdnn_bench::median_seconds([&] { dn.convolution_only(ex, in.data(), out.data()); }, ex.stream, 20, 3);
  }
#endif

  auto const cands = direct_conv_candidates(s, sizeof(float), N);
  auto run = [&](auto const& p) { p.run(ex, N, in.data(), db.data(), true, out.data()); };
  struct row {
    std::string format;
    weight_footprint host, device;
    tuned t;
  };
  std::vector<row> rows(4);
  rows[0].format = "float";
  rows[0].host = footprint(w);
  rows[0].t = tune_and_time<direct_conv_plan<float, float>>(w, cands, ex, run, &rows[0].device);
  rows[1].format = "int8_per_channel_sym";
  rows[1].host = footprint(q8c);
  rows[1].t = tune_and_time<quantized_direct_conv_plan<int8_encoding>>(q8c, cands, ex, run, &rows[1].device);
  rows[2].format = "int8_per_layer_asym";
  rows[2].host = footprint(q8a);
  rows[2].t = tune_and_time<quantized_direct_conv_plan<int8_encoding>>(q8a, cands, ex, run, &rows[2].device);
  rows[3].format = "codebook4";
  rows[3].host = footprint(q4);
  rows[3].t = tune_and_time<quantized_direct_conv_plan<codebook4_encoding>>(q4, cands, ex, run, &rows[3].device);
  SDNN_CUDA_CHECK(cudaStreamSynchronize(ex.stream));

  for (auto _ : state) state.SetIterationTime(rows[0].t.seconds);
  double const fma_sparse = double(N) * double(s.out_features()) * double(pr.nnz_per_channel);
  for (auto const& r : rows) {
    state.counters[r.format + "_ms"] = r.t.seconds * 1e3;
    auto const& c = r.t.config;
    auto const geo = geometry_of(s, c);
    sdnn_bench::json_line("conv_quantized")
        .str("net", "vgg16")
        .str("layer", L.name)
        .str("format", r.format)
        .num("batch", double(N))
        .num("C", s.C).num("H", s.H).num("W", s.W).num("K", s.K).num("R", s.R).num("S", s.S)
        .num("sparsity", opt.sparsity)
        .str("rule", "global")
        .num("achieved_sparsity", pr.achieved_sparsity)
        .num("nnz_per_channel", double(pr.nnz_per_channel))
        .num("time_s", r.t.seconds)
        .num("cudnn_s", cudnn_s)
        .num("cudnn_algo", cudnn_algo)
        .num("speedup_vs_cudnn", cudnn_s > 0 ? cudnn_s / r.t.seconds : 0)
        .num("speedup_vs_float", rows[0].t.seconds / r.t.seconds)
        .num("sparse_tfma_per_s", fma_sparse / r.t.seconds / 1e12)
        .num("weight_index_bytes", double(r.host.index_bytes))
        .num("weight_value_bytes", double(r.host.value_bytes))
        .num("weight_param_bytes", double(r.host.param_bytes))
        .num("weight_bytes", double(r.host.total()))
        .num("device_weight_bytes", double(r.device.total()))
        .num("dense_float_weight_bytes", double(s.weight_count()) * 4)
        .num("variant", c.variant).num("tw", c.tw).num("th", c.th).num("cc", c.cc)
        .num("kw", c.kw).num("ksplit", c.ksplit).num("sums_in_registers", c.sums_in_registers)
        .num("nchunks", geo.nchunks)
        .emit();
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--batch=", 0) == 0) opt.batch = std::stoi(a.substr(8));
    else if (a.rfind("--sparsity=", 0) == 0) opt.sparsity = std::stod(a.substr(11));
    else if (a.rfind("--layers=", 0) == 0) opt.layer_filter = a.substr(9);
    else rest.push_back(argv[i]);
  }
  int rc = static_cast<int>(rest.size());
  benchmark::Initialize(&rc, rest.data());
  for (auto const& L : sdnn_bench::vgg16_layers()) {
    if (opt.layer_filter.empty() ? !default_layer(L.name) : L.name.find(opt.layer_filter) == std::string::npos) continue;
    std::string const n = "conv_quantized/" + L.name + "/s" + std::to_string(int(opt.sparsity * 1000 + 0.5));
    benchmark::RegisterBenchmark(n.c_str(), bench_layer, L)->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
