// bench_conv: direct sparse convolution (sdnn, uniform-nnz rows, tuned per layer) against
// dense cuDNN (float with CUDNN_FMA_MATH = no TF32, and __half with tensor ops), batch 128,
// in the same process. Layers: the VGG-16 3x3 convolutions, ResNet-50 and DenseNet-121
// 1x1 convolutions, text-CNN 1-D convolutions (kernel 2 and 3).
//
// One JSON line per (layer, precision, sparsity, pruning rule) to $SDNN_BENCH_JSON
//   (default stdout): sdnn_s (fused conv + bias + ReLU), cudnn_s (convolution alone: the
//   conservative baseline), cudnn_fused_s (convolution + bias/ReLU pass), speedup =
//   cudnn_s / sdnn_s, the tuned block shape (with sums_in_registers, chunks, passes and
//   windows staged per block), the pruning rule, nnz per channel and padding overhead.
// Pruning rules (train/op/prune_uniform.hpp): "global" (one threshold; channels padded to the
//   densest one) and "per_channel" (every channel keeps round((1-s)*C*R*S): no padding
//   unless a channel has too few nonzeros: the "target" sparsity level per channel).
//   Default: global at every sparsity, per_channel at 90 % only (names end in
//   /per_channel); --rules=global,per_channel runs each listed rule at every sparsity.
// Flags (before Google Benchmark's own): --quick (VGG layers 1-4, one 1x1, both 1-D;
//   sparsities 90 and 95 %), --sparsities=0.8,0.9 --precisions=float,half,half_facc
//   --rules=global,per_channel --batch=128 --layers=substring.
// Precisions: float (float data, float accumulation), half (half data, half arithmetic),
// half_facc (half data, float accumulation); cuDNN half for both half variants.
#include <benchmark/benchmark.h>

#include <cuda_fp16.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_conv_layers.hpp"
#include "bench_util.cuh"

#include <sdnn/conv/weights.hpp>
#include <sdnn/train/op/prune_uniform.hpp>
#include <sdnn/conv/sparse_conv.cuh>
#if defined(SDNN_HAS_CUDNN)
#include <sdnn/conv/cudnn_conv.cuh>
#endif

using namespace sdnn;
using namespace sdnn::conv;

namespace {

struct layer_spec {
  std::string net, name;
  conv_shape s;
};

std::vector<layer_spec> all_layers() {
  std::vector<layer_spec> v;
  for (auto const& l : sdnn_bench::vgg16_layers()) v.push_back({"vgg16", l.name, l.s});
  int const rn[6][3] = {{64, 56, 256}, {256, 56, 64}, {128, 28, 512}, {512, 28, 128}, {256, 14, 1024}, {1024, 14, 256}};
  for (auto const& l : rn)
    v.push_back({"resnet50", "rn50_1x1_" + std::to_string(l[0]) + "x" + std::to_string(l[1]) + "_" + std::to_string(l[2]),
                 conv_shape::conv2d(l[0], l[1], l[1], l[2], 1, 1)});
  int const dn[3][3] = {{256, 56, 128}, {512, 28, 128}, {1024, 14, 128}};
  for (auto const& l : dn)
    v.push_back({"densenet121", "dn121_1x1_" + std::to_string(l[0]) + "x" + std::to_string(l[1]) + "_" + std::to_string(l[2]),
                 conv_shape::conv2d(l[0], l[1], l[1], l[2], 1, 1)});
  // text-CNN: 256-dim embeddings, sequences of 1024 tokens, 256 filters of width 2 / 3
  v.push_back({"textcnn", "text_1d_k2_256x1024_256", conv_shape::conv1d(256, 1024, 256, 2)});
  v.push_back({"textcnn", "text_1d_k3_256x1024_256", conv_shape::conv1d(256, 1024, 256, 3)});
  return v;
}

struct options {
  bool quick = false;
  std::vector<double> sparsities{0.80, 0.875, 0.90, 0.93, 0.95};
  std::vector<std::string> precisions{"float", "half", "half_facc"};
  int batch = 128;
  std::string layer_filter;
  bool precisions_given = false;
  std::vector<std::string> rules{"global", "per_channel"};
  bool rules_given = false;
} opt;

prune_rule rule_of(std::string const& r) {
  if (r == "global") return prune_rule::global;
  if (r == "per_channel") return prune_rule::per_channel;
  SDNN_FAIL("bench_conv: --rules takes global and/or per_channel, got '", r, "'");
}

// The buffers and baseline of the layer being measured (one at a time: the largest VGG
// layer needs 1.6 GB per float activation tensor at batch 128).
template <class T>
struct layer_ctx {
  layer_spec spec;
  std::vector<float> dense_w, bias;
  device_buffer<T> in, out;
  double cudnn_s = 0, cudnn_fused_s = 0;
  int cudnn_algo = -1;
};

std::string cur_key;
std::shared_ptr<void> cur_ctx;

template <class T>
layer_ctx<T>& ctx_for(layer_spec const& L, char const* prec) {
  std::string const key = L.name + "/" + (std::is_same_v<T, float> ? "float" : "half");
  if (key == cur_key) return *static_cast<layer_ctx<T>*>(cur_ctx.get());
  cur_ctx.reset();
  SDNN_CUDA_CHECK(cudaDeviceSynchronize());
  cuda_exec ex;
  auto c = std::make_shared<layer_ctx<T>>();
  c->spec = L;
  std::mt19937 g(1234);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  c->dense_w.resize(static_cast<std::size_t>(L.s.weight_count()));
  for (auto& x : c->dense_w) x = nd(g) / std::sqrt(float(L.s.filter_size()));
  c->bias.resize(static_cast<std::size_t>(L.s.K));
  for (auto& x : c->bias) x = 0.1f * nd(g);
  c->in = device_buffer<T>(static_cast<std::size_t>(opt.batch) * L.s.in_features(), ex);
  c->out = device_buffer<T>(static_cast<std::size_t>(opt.batch) * L.s.out_features(), ex);
  sdnn::conv::detail::fill_hash(c->in.data(), c->in.size(), 77u, ex);
#if defined(SDNN_HAS_CUDNN)
  static std::map<std::string, std::array<double, 3>> cudnn_cache;  // key -> (conv, fused, algo): one Find per layer
  if (auto it = cudnn_cache.find(key); it != cudnn_cache.end()) {
    c->cudnn_s = it->second[0];
    c->cudnn_fused_s = it->second[1];
    c->cudnn_algo = int(it->second[2]);
  } else {
    layers::cudnn_conv2d<T> dn(L.s, c->dense_w, c->bias, true);
    dn.plan(opt.batch, L.s.in_features(), ex);
    c->cudnn_algo = int(dn.algorithm());
    std::int64_t const fi = L.s.in_features(), fo = L.s.out_features();
    c->cudnn_s = sdnn_bench::median_seconds([&] { dn.convolution_only(ex, c->in.data(), c->out.data()); }, ex.stream, 10, 3);
    c->cudnn_fused_s = sdnn_bench::median_seconds(
        [&] {
          dn.forward(ex, dense_view<T const>{opt.batch, fi, fi, c->in.data()}, dense_view<T>{opt.batch, fo, fo, c->out.data()});
        },
        ex.stream, 10, 2);
    cudnn_cache[key] = {c->cudnn_s, c->cudnn_fused_s, double(c->cudnn_algo)};
    std::printf("# %s cudnn %s: %.3f ms (algo %d, math %d), with bias/relu pass %.3f ms\n", L.name.c_str(), prec,
                c->cudnn_s * 1e3, c->cudnn_algo, int(dn.math_type()), c->cudnn_fused_s * 1e3);
  }
#endif
  SDNN_CUDA_CHECK(cudaDeviceSynchronize());
  cur_key = key;
  cur_ctx = c;
  return *c;
}

template <class T, class Acc>
void bench_sparse(benchmark::State& state, layer_spec L, double sparsity, std::string prec, std::string rule) {
  auto& c = ctx_for<T>(L, prec.c_str());
  cuda_exec ex;
  auto const p = prune_uniform(c.dense_w.data(), L.s.K, L.s.filter_size(), sparsity, rule_of(rule));
  typename layers::sparse_conv2d<T, Acc>::options o;
  o.tune_reps = 1;  // plan: one warm-up + one timed launch per candidate (keeps the sweep short)
  layers::sparse_conv2d<T, Acc> sp(make_conv_weights<T>(L.s, p), c.bias, o);
  sp.plan(opt.batch, L.s.in_features(), ex);
  std::int64_t const fi = L.s.in_features(), fo = L.s.out_features();
  double const t = sdnn_bench::run_manual(
      state,
      [&] {
        sp.forward(ex, dense_view<T const>{opt.batch, fi, fi, c.in.data()}, dense_view<T>{opt.batch, fo, fo, c.out.data()});
      },
      ex.stream, 5);
  auto const& cfg = sp.config();
  auto const geo = geometry_of(L.s, cfg);
  for (auto const& [c, tt] : sp.tuning_log()) {
    auto const g = geometry_of(L.s, c);
    bool const chosen = c.variant == cfg.variant && c.tw == cfg.tw && c.th == cfg.th && c.cc == cfg.cc &&
                        c.kw == cfg.kw && c.ksplit == cfg.ksplit && c.sums_in_registers == cfg.sums_in_registers;
    std::printf("# tune %s %s %s s=%.3f variant %d tw %d th %d cc %d (%d chunks) kw %d ksplit %d sums %s "
                "(%d passes, %d windows): %.3f ms%s\n",
                L.name.c_str(), prec.c_str(), rule.c_str(), sparsity, c.variant, c.tw, c.th, c.cc, g.nchunks, c.kw,
                c.ksplit, c.sums_in_registers ? "in registers" : "through the output", g.passes, g.stagings, tt * 1e3,
                chosen ? " *" : "");
  }
  double const flops_dense = 2.0 * opt.batch * double(L.s.out_features()) * double(L.s.filter_size());
  double const fma_sparse = double(opt.batch) * double(L.s.out_features()) * double(p.nnz_per_channel);
  state.counters["speedup"] = c.cudnn_s > 0 ? c.cudnn_s / t : 0;
  state.counters["sparse_TFMAs"] = fma_sparse / t / 1e12;
  sdnn_bench::json_line("conv")
      .str("net", L.net)
      .str("layer", L.name)
      .str("precision", prec)
      .num("batch", opt.batch)
      .num("C", L.s.C).num("H", L.s.H).num("W", L.s.W).num("K", L.s.K).num("R", L.s.R).num("S", L.s.S)
      .num("sparsity", sparsity)
      .str("rule", rule)
      .num("achieved_sparsity", p.achieved_sparsity)
      .num("nnz_per_channel", double(p.nnz_per_channel))
      .num("padding_overhead", p.padding_overhead)
      .num("sdnn_s", t)
      .num("cudnn_s", c.cudnn_s)
      .num("cudnn_fused_s", c.cudnn_fused_s)
      .num("cudnn_algo", c.cudnn_algo)
      .num("speedup", c.cudnn_s > 0 ? c.cudnn_s / t : 0)
      .num("speedup_vs_fused", c.cudnn_fused_s > 0 ? c.cudnn_fused_s / t : 0)
      .num("dense_tflops_cudnn", c.cudnn_s > 0 ? flops_dense / c.cudnn_s / 1e12 : 0)
      .num("sparse_tfma_per_s", fma_sparse / t / 1e12)
      .num("variant", cfg.variant).num("tw", cfg.tw).num("th", cfg.th).num("cc", cfg.cc)
      .num("kw", cfg.kw).num("ksplit", cfg.ksplit).num("sums_in_registers", cfg.sums_in_registers)
      .num("nchunks", geo.nchunks).num("passes", geo.passes).num("windows_per_block", geo.stagings)
      .emit();
}

std::vector<std::string> split(std::string const& s) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) r.push_back(x);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") opt.quick = true;
    else if (a.rfind("--sparsities=", 0) == 0) {
      opt.sparsities.clear();
      for (auto const& x : split(a.substr(13))) opt.sparsities.push_back(std::stod(x));
    } else if (a.rfind("--precisions=", 0) == 0) {
      opt.precisions = split(a.substr(13));
      opt.precisions_given = true;
    }
    else if (a.rfind("--rules=", 0) == 0) {
      opt.rules = split(a.substr(8));
      for (auto const& r : opt.rules) rule_of(r);  // validate
      opt.rules_given = true;
    }
    else if (a.rfind("--batch=", 0) == 0) opt.batch = std::stoi(a.substr(8));
    else if (a.rfind("--layers=", 0) == 0) opt.layer_filter = a.substr(9);
    else rest.push_back(argv[i]);
  }
  if (opt.quick && opt.sparsities.size() == 5) opt.sparsities = {0.90, 0.95};
  int rc = static_cast<int>(rest.size());
  benchmark::Initialize(&rc, rest.data());
  // The 90 % pass over every layer first (the targets), then the other sparsities, so a
  // time-boxed run still has the headline numbers. half_facc (half data, float
  // accumulation) only at 90 % unless --precisions names it; per_channel pruning only at
  // 90 % unless --rules names it.
  std::vector<double> order = opt.sparsities;
  std::stable_sort(order.begin(), order.end(), [](double a, double b) { return (a == 0.9) > (b == 0.9); });
  for (double s : order)
    for (auto const& L : all_layers()) {
      if (!opt.layer_filter.empty() && L.name.find(opt.layer_filter) == std::string::npos) continue;
      if (opt.quick && !(L.name.rfind("vgg_3x", 0) == 0 || L.name.rfind("vgg_64x", 0) == 0 ||
                         L.name.rfind("vgg_128x112", 0) == 0 || L.name == "rn50_1x1_256x56_64" || L.net == "textcnn"))
        continue;
      for (auto const& prec : opt.precisions)
        for (auto const& rule : opt.rules) {
          if (prec == "half_facc" && s != 0.9 && !opt.precisions_given) continue;
          if (rule == "per_channel" && s != 0.9 && !opt.rules_given) continue;
          // global rows keep their old names; per_channel rows end in /per_channel
          std::string const n = "conv/" + L.name + "/" + prec + "/s" + std::to_string(int(s * 1000 + 0.5)) +
                                (rule == "global" ? "" : "/" + rule);
          auto cfg = [](auto* b) { b->UseManualTime()->Iterations(2)->Unit(benchmark::kMillisecond); };
          if (prec == "float") cfg(benchmark::RegisterBenchmark(n.c_str(), bench_sparse<float, float>, L, s, prec, rule));
          else if (prec == "half")
            cfg(benchmark::RegisterBenchmark(n.c_str(), bench_sparse<__half, __half>, L, s, prec, rule));
          else if (prec == "half_facc")
            cfg(benchmark::RegisterBenchmark(n.c_str(), bench_sparse<__half, float>, L, s, prec, rule));
        }
    }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  cur_ctx.reset();
  return 0;
}
