// bench_conv16: the 16-bit convolution on the tensor cores against cuDNN, NHWC, the layers of
// VGG-16 and the distinct layers of ResNet-50 at batch 1 / 16 / 128, bf16 and fp16, each with bias
// and ReLU, and the VGG-16 convolution stack end to end. Paths per layer: cuDNN (its best algorithm,
// bias + ReLU fused or as a separate pass, whichever it timed faster), cuDNN's convolution alone,
// sdnn's implicit GEMM dense, its direct kernel on a first layer (R*S*C <= 256), with channel
// blocks (64 x 32, 32 x 32 and 16 x 16 output x input channels shared by all taps) at each
// --sparsity, with the filter 2:4 along R*S*C (mma.sp), the automatic plan on the same weights, and
// whole filters and input channels removed (cuDNN on the compact layer). The baseline of every
// speedup is the faster of the two cuDNN rows. L2 flushed before every timed launch, median of
// --reps after two warm-up runs. One JSON line per (layer, batch, type, path) (family "conv16");
// benchmarks/plot_conv16.py draws the PNG. Options: --layers=vgg,resnet --batch=1,16,128
// --types=fp16,bf16 --sparsity=0.75,0.9 --reps=20 --mode=layers|stack|both --blocks=64x32,32x32,16x16
// --sdnn-dense=1 --sparse24=1 --tma=1 --small-c=1 --commit=HASH --only=NAME (one layer, by name). The
// channel-block rows run the tiled kernels (sdnn_tc_blocks) and, with --tma=1, the TMA block kernel
// forced (sdnn_tc_blocks_tma; where the input or the blocks do not allow it the plan runs its tiled
// kernels).
#include <cuda_runtime.h>

#include <sdnn/conv/filter_removal.hpp>
#include <sdnn/conv/gemm_weights.hpp>
#include <sdnn/conv/op/conv16_auto.cuh>
#include <sdnn/conv/op/small_c_conv.cuh>
#include <sdnn/conv/op/sparse24_conv.cuh>
#include <sdnn/conv/op/tc_conv.cuh>
#include <sdnn/conv/vendor/cudnn16.cuh>
#include <sdnn/core/memory.cuh>
#include <sdnn/core/plan.cuh>
#include <sdnn/train/op/prune_sparse24.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_json.cuh"

using namespace sdnn;

namespace {

struct layer_def {
  std::string name;
  conv::conv_shape s;
  int count = 1;  // times the layer occurs in the network
};

// VGG-16's 13 convolutions (3x3, stride 1, pad 1); repeated layers carry a count.
std::vector<layer_def> vgg16() {
  auto c = [](int C, int H, int K) { return conv::conv_shape::conv2d(C, H, H, K, 3, 3, 1, 1); };
  return {{"conv1_1", c(3, 224, 64), 1},    {"conv1_2", c(64, 224, 64), 1},   {"conv2_1", c(64, 112, 128), 1},
          {"conv2_2", c(128, 112, 128), 1}, {"conv3_1", c(128, 56, 256), 1},  {"conv3_2", c(256, 56, 256), 2},
          {"conv4_1", c(256, 28, 512), 1},  {"conv4_2", c(512, 28, 512), 2},  {"conv5_1", c(512, 14, 512), 3}};
}
// The distinct convolutions of ResNet-50 (torchvision layout: stride on the 3x3 of a block).
std::vector<layer_def> resnet50() {
  auto c = [](int C, int H, int K, int R, int st, int pad) { return conv::conv_shape::conv2d(C, H, H, K, R, R, st, pad); };
  return {{"r50_conv1", c(3, 224, 64, 7, 2, 3), 1},
          {"r50_l1_1x1a", c(64, 56, 64, 1, 1, 0), 1},
          {"r50_l1_3x3", c(64, 56, 64, 3, 1, 1), 3},
          {"r50_l1_1x1b", c(64, 56, 256, 1, 1, 0), 4},
          {"r50_l1_1x1c", c(256, 56, 64, 1, 1, 0), 2},
          {"r50_l2_1x1a", c(256, 56, 128, 1, 1, 0), 1},
          {"r50_l2_3x3s2", c(128, 56, 128, 3, 2, 1), 1},
          {"r50_l2_1x1b", c(128, 28, 512, 1, 1, 0), 4},
          {"r50_l2_down", c(256, 56, 512, 1, 2, 0), 1},
          {"r50_l2_1x1c", c(512, 28, 128, 1, 1, 0), 3},
          {"r50_l2_3x3", c(128, 28, 128, 3, 1, 1), 3},
          {"r50_l3_1x1a", c(512, 28, 256, 1, 1, 0), 1},
          {"r50_l3_3x3s2", c(256, 28, 256, 3, 2, 1), 1},
          {"r50_l3_1x1b", c(256, 14, 1024, 1, 1, 0), 6},
          {"r50_l3_down", c(512, 28, 1024, 1, 2, 0), 1},
          {"r50_l3_1x1c", c(1024, 14, 256, 1, 1, 0), 5},
          {"r50_l3_3x3", c(256, 14, 256, 3, 1, 1), 5},
          {"r50_l4_1x1a", c(1024, 14, 512, 1, 1, 0), 1},
          {"r50_l4_3x3s2", c(512, 14, 512, 3, 2, 1), 1},
          {"r50_l4_1x1b", c(512, 7, 2048, 1, 1, 0), 3},
          {"r50_l4_down", c(1024, 14, 2048, 1, 2, 0), 1},
          {"r50_l4_1x1c", c(2048, 7, 512, 1, 1, 0), 2},
          {"r50_l4_3x3", c(512, 7, 512, 3, 1, 1), 2}};
}

struct options {
  std::vector<std::string> nets{"vgg"};
  std::vector<std::int64_t> batches{1, 16, 128};
  std::vector<std::string> types{"fp16", "bf16"};
  std::vector<double> sparsity{0.75, 0.9};
  int reps = 20;
  std::string commit = "unknown", only, mode = "both";  // mode: layers, stack or both
  std::vector<std::pair<int, int>> blocks{{64, 32}, {32, 32}, {16, 16}};  // channel blocks, output x input
  bool sdnn_dense = true;  // time sdnn's dense implicit GEMM too
  bool sparse24 = true;    // the 2:4 rows (and a 2:4 stack)
  bool tma = true;         // the channel-block rows with the TMA kernel forced
  bool small_c = true;     // the automatic plans may take the direct kernel of first layers
};
options g_opt;

// The automatic plans' options: every path, or all but the direct kernel (--small-c=0).
ops::conv16_auto_options auto_options() {
  ops::conv16_auto_options o;
  if (!g_opt.small_c) o.allowed &= ~(1u << unsigned(ops::conv16_path::small_c));
  return o;
}

std::vector<std::string> split(std::string const& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string t;
  while (std::getline(ss, t, ','))
    if (!t.empty()) v.push_back(t);
  return v;
}

void parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](char const* key) -> char const* {
      std::size_t const n = std::strlen(key);
      return a.compare(0, n, key) == 0 ? a.c_str() + n : nullptr;
    };
    if (auto v = val("--layers=")) g_opt.nets = split(v);
    else if (auto v = val("--batch=")) {
      g_opt.batches.clear();
      for (auto const& t : split(v)) g_opt.batches.push_back(std::stoll(t));
    } else if (auto v = val("--types=")) g_opt.types = split(v);
    else if (auto v = val("--sparsity=")) {
      g_opt.sparsity.clear();
      for (auto const& t : split(v)) g_opt.sparsity.push_back(std::stod(t));
    } else if (auto v = val("--reps=")) g_opt.reps = std::max(3, std::atoi(v));
    else if (auto v = val("--commit=")) g_opt.commit = v;
    else if (auto v = val("--only=")) g_opt.only = v;
    else if (auto v = val("--mode=")) g_opt.mode = v;
    else if (auto v = val("--sdnn-dense=")) g_opt.sdnn_dense = std::atoi(v) != 0;
    else if (auto v = val("--sparse24=")) g_opt.sparse24 = std::atoi(v) != 0;
    else if (auto v = val("--tma=")) g_opt.tma = std::atoi(v) != 0;
    else if (auto v = val("--small-c=")) g_opt.small_c = std::atoi(v) != 0;
    else if (auto v = val("--blocks=")) {  // e.g. 64x32,32x32
      g_opt.blocks.clear();
      for (auto const& t : split(v)) g_opt.blocks.push_back({std::stoi(t), std::stoi(t.substr(t.find('x') + 1))});
    }
    else {
      std::fprintf(stderr, "bench_conv16: unknown option %s\n", a.c_str());
      std::exit(2);
    }
  }
}

// ---- device context, L2 flush, timing ----------------------------------------------------------

struct device_ctx {
  cudaStream_t stream = nullptr;
  std::unique_ptr<::sdnn::detail::flushed_timer> timer;  // each run after an L2 flush, between two events
  std::unique_ptr<::sdnn::detail::flushed_timer> wall;   // the same without holding the stream (the stack)
};
device_ctx* g_dev = nullptr;
cuda_exec exec() { return cuda_exec{g_dev->stream}; }

struct timing {
  double med_s = 0, min_s = 0;
};
// Two untimed launches, then the median of reps launches, each after an L2 flush (a memset of
// twice the L2 size) and between two CUDA events: the plans' own plan-time timer, which holds the
// stream until the run is enqueued (GPU time: the layers). wall: without the hold, so host work
// that outlasts the GPU's is counted (the stack: one forward issued layer by layer).
template <class F>
timing measure(F&& f, bool wall = false) {
  f();
  f();
  std::vector<double> t;
  auto& timer = wall ? *g_dev->wall : *g_dev->timer;
  for (int i = 0; i < g_opt.reps; ++i) t.push_back(double(timer(f)) * 1e-3);
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front()};
}

// ---- output ------------------------------------------------------------------------------------

// A JSON line of this program: the shared one (bench_json.cuh) with the commit measured.
sdnn_bench::json_line result_line() {
  sdnn_bench::json_line j("conv16");
  j.str("commit", g_opt.commit);
  return j;
}

// ---- one layer ---------------------------------------------------------------------------------

template <class T>
std::vector<T> random_values(std::int64_t n, unsigned seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<T> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = T(u(rng));
  return v;
}

// Largest |a - b| / (|b| + 1) over two device outputs of n elements (b the cuDNN one).
template <class T>
double max_rel_diff(T const* a, T const* b, std::int64_t n) {
  std::vector<T> ha(static_cast<std::size_t>(n)), hb(static_cast<std::size_t>(n));
  SDNN_CUDA_CHECK(cudaMemcpyAsync(ha.data(), a, n * sizeof(T), cudaMemcpyDeviceToHost, g_dev->stream));
  SDNN_CUDA_CHECK(cudaMemcpyAsync(hb.data(), b, n * sizeof(T), cudaMemcpyDeviceToHost, g_dev->stream));
  SDNN_CUDA_CHECK(cudaStreamSynchronize(g_dev->stream));
  double m = 0;
  for (std::size_t i = 0; i < ha.size(); ++i) {
    double const x = float(ha[i]), y = float(hb[i]);
    double const d = std::fabs(x - y) / (std::fabs(y) + 1.0);
    m = std::isnan(d) ? 1e30 : std::max(m, d);
  }
  return m;
}

struct row {
  std::string path, structure;
  double sparsity = 0;  // of the weights as pruned (channel blocks: the share of blocks dropped)
  double target = 0;    // the --sparsity asked for
  timing t;
  double check = -1;  // max relative difference to cuDNN's output of the same weights (-1: not checked)
  std::string note;
};

template <class T>
void run_layer(layer_def const& L, std::int64_t batch, std::map<std::string, double>& fp16_time) {
  auto const& s = L.s;
  std::string const tname = value_type_name<T>();
  std::int64_t const RSC = s.filter_size(), xin = batch * s.H * s.W * s.C, yout = batch * s.OH() * s.OW() * s.K;
  float const wscale = 1.0f / std::sqrt(float(RSC));
  auto const hx = random_values<T>(xin, 7, 1.0f);
  dense_matrix<T> wg(s.K, RSC);
  {
    auto const w = random_values<T>(s.K * RSC, 11, wscale);
    std::copy(w.begin(), w.end(), wg.values().begin());
  }
  std::vector<float> bias(static_cast<std::size_t>(s.K));
  for (int k = 0; k < s.K; ++k) bias[std::size_t(k)] = 0.01f * float(k % 7 - 3);
  auto ex = exec();
  buffer<T, device_space> dx(static_cast<std::size_t>(xin), ex), dy(static_cast<std::size_t>(yout), ex),
      dref(static_cast<std::size_t>(yout), ex);
  SDNN_CUDA_CHECK(cudaMemcpyAsync(dx.data(), hx.data(), xin * sizeof(T), cudaMemcpyHostToDevice, g_dev->stream));
  buffer<float, device_space> dbias(bias.size(), ex);
  SDNN_CUDA_CHECK(cudaMemcpyAsync(dbias.data(), bias.data(), bias.size() * 4, cudaMemcpyHostToDevice, g_dev->stream));
  basic_epilogue<float> epi;
  epi.bias = dbias.data();
  epi.relu = true;

  std::vector<row> rows;
  std::string cudnn_desc;
  double target = 0;  // the sparsity asked for, recorded in the rows made under it
  // A cuDNN plan of (shape, GEMM view); its output into `out`.
  auto cudnn_time = [&](conv::conv_shape const& cs, dense_view<T const> w, std::vector<float> const& b, T* in, T* out,
                        bool conv_only, std::string* desc) {
    vendor::cudnn_conv2d_nhwc<T> plan(cs, batch, w, b, true, false, ex);
    if (desc) *desc = plan.describe();
    return conv_only ? measure([&] { plan.convolution_only(ex, in, out); }) : measure([&] { plan.run(ex, in, out); });
  };
  try {
    row r{"cudnn", "dense", 0};
    r.t = cudnn_time(s, std::as_const(wg).view(), bias, dx.data(), dref.data(), false, &cudnn_desc);
    r.note = cudnn_desc;
    rows.push_back(r);
    row c{"cudnn_conv_only", "dense", 0};
    c.t = cudnn_time(s, std::as_const(wg).view(), bias, dx.data(), dy.data(), true, nullptr);
    rows.push_back(c);
  } catch (std::exception const& e) {
    std::fprintf(stderr, "%s batch %lld %s: cuDNN failed: %s\n", L.name.c_str(), (long long)batch, tname.c_str(), e.what());
    return;
  }
  // sdnn on the same weights (checked against cuDNN's output), then each structure.
  // make(): an sdnn convolution plan (tc_conv_plan, sparse24_conv_plan); its time, its output
  // checked against ref, what it runs.
  auto plan_time = [&](auto make, std::string const& path, std::string const& structure, double sp, T const* ref) {
    row r{path, structure, sp, target};
    try {
      auto const plan = make();
      r.t = measure([&] { plan.run(ex, dx.data(), batch, dy.data(), epi); });
      if (ref) r.check = max_rel_diff(dy.data(), ref, yout);
      r.note = plan.describe(batch);
    } catch (std::exception const& e) {
      r.note = std::string("failed: ") + e.what();
      r.t = {NAN, NAN};
    }
    rows.push_back(r);
  };
  auto sdnn_time = [&](auto policy_tag, auto const& weights, std::string const& path, std::string const& structure,
                       double sp, T const* ref, policy::tc_shape tiles = policy::tc_shape::automatic) {
    plan_time([&] { return ops::tc_conv_plan<decltype(policy_tag), T>(s, weights, ex, plan_options{}, tiles); }, path,
              structure, sp, ref);
  };
  // cuDNN on pruned weights (zeros and all) into dref: the reference output of their check.
  auto cudnn_reference = [&](dense_matrix<T> const& w) {
    try {
      vendor::cudnn_conv2d_nhwc<T> ref(s, batch, std::as_const(w).view(), bias, true, false, ex);
      ref.run(ex, dx.data(), dref.data());
    } catch (std::exception const&) {
    }
  };
  // The automatic plan on the same weights: its time, and what it chose.
  auto auto_time = [&](dense_matrix<T> const& w, std::string const& structure, double sp) {
    row r{"automatic", structure, sp, target};
    try {
      ops::conv16_auto_plan<T> plan(s, batch, std::as_const(w).view(), bias, true, false, ex, auto_options());
      r.t = measure([&] { plan.run(ex, dx.data(), dy.data()); });
      r.note = plan.reason();
    } catch (std::exception const& e) {
      r.note = std::string("failed: ") + e.what();
      r.t = {NAN, NAN};
    }
    rows.push_back(r);
  };
  {
    dense_matrix<T> w2(s.K, RSC);
    std::copy(wg.values().begin(), wg.values().end(), w2.values().begin());
    if (g_opt.sdnn_dense) sdnn_time(policy::tc_dense_mma{}, w2, "sdnn_tc_dense", "dense", 0, dref.data());
    if (ops::small_c_conv_can_implement<T>(s))  // a first layer: the direct kernel
      plan_time([&] { return ops::small_c_conv_plan<T>(s, std::as_const(wg).view(), ex); }, "sdnn_small_c", "dense", 0,
                dref.data());
    auto_time(wg, "dense", 0);
  }
  for (double sp : g_opt.sparsity) {
    target = sp;
    for (auto [bko, bc] : g_opt.blocks) {
      if (s.K % bko || s.C % bc) continue;
      std::string const st = "cb" + std::to_string(bko) + "x" + std::to_string(bc);
      auto pr = conv::prune_channel_blocks(s, std::as_const(wg).view(), bko, bc, sp);
      auto bw = conv::channel_block_gemm_weights(s, std::as_const(pr.gemm).view(), pr.mask);
      double const actual = 1.0 - double(pr.mask.kept_count()) / double(pr.mask.blocks());
      cudnn_reference(pr.gemm);
      sdnn_time(policy::tc_block_sparse_mma{}, bw, "sdnn_tc_blocks", st, actual, dref.data(), policy::tc_shape::tiled);
      if (g_opt.tma && bc == 32)
        sdnn_time(policy::tc_block_sparse_mma{}, bw, "sdnn_tc_blocks_tma", st, actual, dref.data(), policy::tc_shape::tma);
      auto_time(pr.gemm, st, actual);
    }
    // Whole filters and input channels removed: cuDNN on the compact layer (about sqrt(1 - sp) of
    // the output and of the input channels kept; all inputs of a 3-channel first layer).
    // Kept counts rounded to multiples of 8 (cuDNN's NHWC tensor-core kernels need them).
    double const keep = std::sqrt(1.0 - sp);
    auto round8 = [&](int n) { return std::max(8, int(std::lround(keep * n / 8.0)) * 8); };
    int const kk = round8(s.K);
    int const kc = s.C <= 4 ? s.C : round8(s.C);
    auto cs = conv::conv_shape::conv2d(kc, s.H, s.W, kk, s.R, s.S, s.stride_h, s.pad_h, s.dil_h);
    dense_matrix<T> cw(kk, cs.filter_size());
    for (int k = 0; k < kk; ++k)
      for (std::int64_t j = 0; j < cs.filter_size(); ++j) cw(k, j) = wg(k, j);
    std::vector<float> cb(bias.begin(), bias.begin() + kk);
    row r{"cudnn_compact", "filters", 1.0 - double(kk) * kc / (double(s.K) * s.C), sp};
    try {
      r.t = cudnn_time(cs, std::as_const(cw).view(), cb, dx.data(), dy.data(), false, nullptr);
      r.note = "K " + std::to_string(kk) + " of " + std::to_string(s.K) + ", C " + std::to_string(kc) + " of " +
               std::to_string(s.C);
    } catch (std::exception const& e) {
      r.t = {NAN, NAN};
      r.note = std::string("failed: ") + e.what();
    }
    rows.push_back(r);
  }
  // 2:4 along R*S*C by magnitude (half of every filter): the mma.sp implicit GEMM and the automatic
  // plan, checked against cuDNN on the same pruned weights.
  if (g_opt.sparse24) {
    target = 0.5;
    auto const w24 = to_dense(ops::prune_sparse24(std::as_const(wg).view()));
    cudnn_reference(w24);
    plan_time([&] { return ops::sparse24_conv_plan<T>(s, sparse24_from_dense(std::as_const(w24).view()), ex); },
              "sdnn_tc_sparse24", "2:4", 0.5, dref.data());
    auto_time(w24, "2:4", 0.5);
  }

  // The baseline: the faster of cuDNN with its epilogue and cuDNN's convolution alone.
  double const base = std::min(rows[0].t.med_s, rows[1].t.med_s);
  std::string const key = L.name + "/" + std::to_string(batch);
  if (std::is_same_v<T, fp16>) fp16_time[key] = base;
  double const flops = 2.0 * double(batch) * s.OH() * s.OW() * s.K * double(RSC);
  for (auto const& r : rows) {
    auto j = result_line();
    j.str("layer", L.name).num("count", L.count).num("batch", double(batch)).str("type", tname);
    j.num("C", s.C).num("H", s.H).num("W", s.W).num("K", s.K).num("R", s.R).num("S", s.S).num("stride", s.stride_h);
    j.num("pad", s.pad_h).str("path", r.path).str("structure", r.structure).num("sparsity", r.sparsity);
    j.num("target_sparsity", r.structure == "dense" ? 0.0 : r.target);
    j.num("time_us", r.t.med_s * 1e6).num("min_us", r.t.min_s * 1e6).num("reps", g_opt.reps);
    j.str("timing", "gpu: stream held until the run was enqueued");
    j.num("speedup_vs_cudnn", base / r.t.med_s).num("cudnn_us", base * 1e6);
    auto f = fp16_time.find(key);
    j.num("speedup_vs_cudnn_fp16", f != fp16_time.end() ? f->second / r.t.med_s : NAN);
    j.num("dense_tflops", flops / r.t.med_s * 1e-12);
    if (r.check >= 0) j.num("max_rel_diff_vs_cudnn", r.check);
    j.str("note", r.note);
    j.emit();
    std::printf("%-14s b=%-4lld %s %-16s %-9s %.2f  %9.1f us  x%.2f%s\n", L.name.c_str(), (long long)batch,
                tname.c_str(), r.path.c_str(), r.structure.c_str(), r.sparsity, r.t.med_s * 1e6, base / r.t.med_s,
                r.check >= 0 ? (" diff " + std::to_string(r.check)).c_str() : "");
  }
}


// ---- the VGG-16 convolution stack ----------------------------------------------------------------

// The 13 convolutions of VGG-16 with ReLU and the 2x2 max-pool after conv1_2, 2_2, 3_3, 4_3 and
// 5_3, at one batch: cuDNN on dense weights against the automatic plans on weights pruned to
// channel blocks (every layer but conv1_1, whose 3 input channels make no block; it keeps its
// dense weights). One JSON line per (structure, sparsity) with the whole forward's time.
template <class T>
void run_stack(std::int64_t batch) {
  struct L {
    conv::conv_shape s;
    bool pool;
  };
  std::vector<L> net;
  for (auto const& l : vgg16())
    for (int i = 0; i < l.count; ++i) net.push_back({l.s, false});
  for (int i : {1, 3, 6, 9, 12}) net[std::size_t(i)].pool = true;
  auto ex = exec();
  std::int64_t most = 0;
  for (auto const& l : net)
    most = std::max({most, batch * l.s.H * l.s.W * l.s.C, batch * l.s.OH() * l.s.OW() * l.s.K});
  buffer<T, device_space> x(std::size_t(batch * 224 * 224 * 3), ex), a(std::size_t(most), ex), b(std::size_t(most), ex);
  auto const hx = random_values<T>(batch * 224 * 224 * 3, 5, 1.0f);
  SDNN_CUDA_CHECK(cudaMemcpyAsync(x.data(), hx.data(), hx.size() * sizeof(T), cudaMemcpyHostToDevice, g_dev->stream));
  std::vector<dense_matrix<T>> dense;
  std::vector<std::vector<float>> biases;
  for (std::size_t i = 0; i < net.size(); ++i) {
    auto const& sh = net[i].s;
    dense_matrix<T> w(sh.K, sh.filter_size());
    auto const v = random_values<T>(sh.K * sh.filter_size(), 100 + unsigned(i), 1.0f / std::sqrt(float(sh.filter_size())));
    std::copy(v.begin(), v.end(), w.values().begin());
    dense.push_back(std::move(w));
    std::vector<float> bb(std::size_t(sh.K));
    for (int k = 0; k < sh.K; ++k) bb[std::size_t(k)] = 0.01f * float(k % 7 - 3);
    biases.push_back(std::move(bb));
  }
  // One forward: the input stays in x; layer i writes a (i even) or b and the next reads it.
  auto time_stack = [&](auto& plans) {
    return measure(
        [&] {
          T const* in = x.data();
          T* bufs[2] = {a.data(), b.data()};
          int k = 0;
          for (auto const& p : plans) {
            p->run(ex, in, bufs[k]);
            in = bufs[k];
            k ^= 1;
          }
        },
        /*wall=*/true);
  };
  std::vector<std::unique_ptr<vendor::cudnn_conv2d_nhwc<T>>> base;
  for (std::size_t i = 0; i < net.size(); ++i)
    base.push_back(std::make_unique<vendor::cudnn_conv2d_nhwc<T>>(net[i].s, batch, std::as_const(dense[i]).view(),
                                                                   biases[i], true, net[i].pool, ex));
  timing const tb = time_stack(base);
  double target = 0;
  auto emit = [&](std::string const& path, std::string const& structure, double sp, timing const& t, std::string const& note) {
    auto j = result_line();
    j.str("layer", "vgg16_stack").num("batch", double(batch)).str("type", value_type_name<T>()).str("path", path);
    j.str("structure", structure).num("sparsity", sp).num("target_sparsity", target).num("time_us", t.med_s * 1e6);
    j.str("timing", "wall: one forward issued layer by layer, host work included");
    j.num("min_us", t.min_s * 1e6);
    j.num("reps", g_opt.reps).num("speedup_vs_cudnn", tb.med_s / t.med_s).str("note", note);
    j.emit();
    std::printf("vgg16_stack    b=%-4lld %s %-16s %-9s %.2f  %9.1f us  x%.2f\n", (long long)batch,
                value_type_name<T>(), path.c_str(), structure.c_str(), sp, t.med_s * 1e6, tb.med_s / t.med_s);
  };
  emit("cudnn", "dense", 0, tb, "");
  for (double sp : g_opt.sparsity)
    for (auto const& shape_pair : g_opt.blocks) {
      target = sp;
      int const bko = shape_pair.first, bc = shape_pair.second;
      std::string const st = "cb" + std::to_string(bko) + "x" + std::to_string(bc);
      std::vector<std::unique_ptr<ops::conv16_auto_plan<T>>> plans;
      std::string chosen;
      std::int64_t kept = 0, blocks = 0;
      for (std::size_t i = 0; i < net.size(); ++i) {
        auto const& sh = net[i].s;
        dense_matrix<T> w = [&] {
          if (sh.C % bc || sh.K % bko) {
            dense_matrix<T> c(sh.K, sh.filter_size());
            std::copy(dense[i].values().begin(), dense[i].values().end(), c.values().begin());
            return c;
          }
          auto pr = conv::prune_channel_blocks(sh, std::as_const(dense[i]).view(), bko, bc, sp);
          kept += pr.mask.kept_count();
          blocks += pr.mask.blocks();
          return std::move(pr.gemm);
        }();
        plans.push_back(std::make_unique<ops::conv16_auto_plan<T>>(sh, batch, std::as_const(w).view(), biases[i], true,
                                                                    net[i].pool, ex, auto_options()));
        chosen += std::string(i ? " " : "") + ops::conv16_path_name(plans.back()->path());
      }
      emit("automatic", st, blocks ? 1.0 - double(kept) / double(blocks) : 0.0, time_stack(plans), chosen);
    }
  if (g_opt.sparse24) {  // every layer 2:4 along R*S*C (conv1_1's 27 taps x channels included)
    target = 0.5;
    std::vector<std::unique_ptr<ops::conv16_auto_plan<T>>> plans;
    std::string chosen;
    for (std::size_t i = 0; i < net.size(); ++i) {
      auto const w = to_dense(ops::prune_sparse24(std::as_const(dense[i]).view()));
      plans.push_back(std::make_unique<ops::conv16_auto_plan<T>>(net[i].s, batch, std::as_const(w).view(), biases[i],
                                                                  true, net[i].pool, ex, auto_options()));
      chosen += std::string(i ? " " : "") + ops::conv16_path_name(plans.back()->path());
    }
    emit("automatic", "2:4", 0.5, time_stack(plans), chosen);
  }
}

}  // namespace

int main(int argc, char** argv) {
  parse(argc, argv);
  device_ctx dev;
  g_dev = &dev;
  SDNN_CUDA_CHECK(cudaStreamCreateWithFlags(&dev.stream, cudaStreamNonBlocking));
  dev.timer = std::make_unique<::sdnn::detail::flushed_timer>(exec());
  dev.wall = std::make_unique<::sdnn::detail::flushed_timer>(exec(), false);
  std::vector<layer_def> layers;
  for (auto const& n : g_opt.nets) {
    auto v = n == "resnet" ? resnet50() : vgg16();
    for (auto& l : v)
      if (g_opt.only.empty() || l.name == g_opt.only) layers.push_back(l);
  }
  std::map<std::string, double> fp16_time;
  if (g_opt.mode != "layers")
    for (auto batch : g_opt.batches)
      for (auto const& t : g_opt.types) {
        if (t == "fp16") run_stack<fp16>(batch);
        else run_stack<bf16>(batch);
      }
  if (g_opt.mode != "stack") {
    for (auto const& L : layers)
      for (auto batch : g_opt.batches)
        for (auto const& t : g_opt.types) {
          if (t == "fp16") run_layer<fp16>(L, batch, fp16_time);
          else run_layer<bf16>(L, batch, fp16_time);
        }
  }
  dev.timer.reset();
  dev.wall.reset();
  SDNN_CUDA_CHECK(cudaStreamDestroy(dev.stream));
  return 0;
}
