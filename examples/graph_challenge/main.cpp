// graph_challenge - Sparse DNN Graph Challenge inference with sdnn.
//
//   graph_challenge                      built-in default: official 1024-neuron network (120 layers),
//                                        60000 inputs made from the shipped MNIST digits, on the GPU if
//                                        one is present else on the host; checked against the host reference
//   graph_challenge infer --neurons N --layers L --weights DIR --inputs FILE [--categories OUT]
//                         [--truth FILE] [--backend host|cuda] [--policy NAME]
//   graph_challenge generate --neurons N --layers L --seed S --out DIR [--images K --mnist IDX]
//   graph_challenge bench --neurons N --layers L [--images K] [--policy NAME] [--seed S] [--mnist IDX]
//
// Timing: "inference seconds" covers the whole inference of all inputs (input densification,
// every layer, live-row compaction, reading the categories back); file reading, network
// generation/upload and the one-time plan (weights transposed to CSC, buffers, CUDA Graph
// capture during a warm-up run) are excluded, as in the official rules. The rate is
// inputs * total nonzeros of all layers / seconds (edges/s).
#include <sdnn/data/challenge_inputs.hpp>
#include <sdnn/data/distinct_inputs.hpp>
#include <sdnn/ops/challenge_engine.hpp>
#include <sdnn/data/radixnet.hpp>
#include <sdnn/io/challenge_tsv.hpp>
#include <sdnn/io/mnist_idx.hpp>
#include <sdnn/layers/sparse_linear.hpp>
#include <sdnn/pipeline/challenge.hpp>
#include <sdnn/policies/dense_sparse.hpp>
#include <sdnn/reference/challenge.hpp>

#if defined(__CUDACC__)
#include <sdnn/kernels/radixnet.cuh>
#include <sdnn/formats/copy.cuh>
#include <sdnn/pipeline/challenge.cuh>
#include <sdnn/ops/challenge_engine.cuh>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <vector>

#ifndef SDNN_EXAMPLE_DATA_DIR
#define SDNN_EXAMPLE_DATA_DIR "tests/data"
#endif

using namespace sdnn;
using host_csr = csr_matrix<float, std::int32_t>;

namespace {

struct options {
  std::string command;
  std::map<std::string, std::string> kv;
  std::string get(std::string const& k, std::string const& def = "") const {
    auto it = kv.find(k);
    return it == kv.end() ? def : it->second;
  }
  bool has(std::string const& k) const { return kv.count(k) != 0; }
  std::int64_t num(std::string const& k, std::int64_t def = -1) const {
    auto it = kv.find(k);
    if (it == kv.end()) {
      SDNN_EXPECTS(def >= 0, "graph_challenge ", command, ": --", k, " is required");
      return def;
    }
    char* end = nullptr;
    long long v = std::strtoll(it->second.c_str(), &end, 10);
    SDNN_EXPECTS(end && *end == '\0', "graph_challenge: --", k, " expects an integer, got '", it->second, "'");
    return v;
  }
};

options parse(int argc, char** argv) {
  options o;
  int i = 1;
  if (argc > 1 && argv[1][0] != '-') o.command = argv[i++];
  for (; i < argc; ++i) {
    std::string a = argv[i];
    SDNN_EXPECTS(a.rfind("--", 0) == 0 && i + 1 < argc, "graph_challenge: expected '--option value', got '", a, "'");
    o.kv[a.substr(2)] = argv[++i];
  }
  return o;
}

bool file_exists(std::string const& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

std::string today() {
  char buf[32];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

struct machine {
  bool gpu = false;
  std::string gpu_name = "none", cuda_version = "none";
};

machine probe() {
  machine m;
#if defined(__CUDACC__)
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) {
    cudaDeviceProp p{};
    SDNN_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
    m.gpu = true;
    m.gpu_name = p.name;
    int rv = 0;
    cudaRuntimeGetVersion(&rv);
    m.cuda_version = std::to_string(rv / 1000) + "." + std::to_string((rv % 1000) / 10);
  } else {
    cudaGetLastError();
  }
#endif
  return m;
}

struct outcome {
  std::vector<std::int32_t> categories;
  double seconds = 0;
  std::int64_t connections = 0;
  std::int64_t batches = 0;
  std::string engine;  // the depth-first engine: what it computed and which proofs held (else empty)
  std::string engine_json;
};

// Layer sources: layer l (0-based) as a host CSR (N x N, row = input neuron).
using host_layer_fn = std::function<host_csr(std::int32_t)>;

template <class Policy>
outcome run_host(std::int32_t layers_n, float bias, host_layer_fn const& make, host_csr const& inputs) {
  using layer_t = layers::sparse_linear<float, format::csr, Policy>;
  std::vector<std::shared_ptr<layer_t>> layers;
  for (std::int32_t l = 0; l < layers_n; ++l) layers.push_back(std::make_shared<layer_t>(make(l), epilogue_challenge<float>(bias)));
  pipeline::challenge_network<Policy> net(layers);
  auto t0 = std::chrono::steady_clock::now();
  auto r = net.run(host_exec{}, inputs.view());
  auto t1 = std::chrono::steady_clock::now();
  return {std::move(r.categories), std::chrono::duration<double>(t1 - t0).count(), net.connections(), r.batches};
}

#if defined(__CUDACC__)
using device_csr = csr_matrix<float, std::int32_t, device_space>;
using device_layer_fn = std::function<device_csr(std::int32_t, cuda_exec)>;

// Where the device run takes layer l from: a host CSR (read from a file: the layer transposes
// and tiles it on the host and uploads it once, at plan time) or a device CSR (generated on
// the device: transposed there; tiles need one download of W^T).
struct layer_source {
  host_layer_fn host;
  device_layer_fn device;
};
// One warm-up run (for the pipeline: CUDA Graph capture), then `reps` timed runs (reps <= 0: 5
// when the warm-up took under a second, else 1); every run's categories must equal the warm-up's.
// Returns the warm-up's result and sets seconds (median of the timed runs), warm_s and reps.
template <class Run>
auto timed_runs(cudaStream_t s, Run&& run, int& reps, double& seconds, double& warm_s) {
  SDNN_CUDA_CHECK(cudaStreamSynchronize(s));
  auto w0 = std::chrono::steady_clock::now();
  auto warm = run();
  warm_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  if (reps <= 0) reps = warm_s < 1.0 ? 5 : 1;
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    SDNN_CUDA_CHECK(cudaStreamSynchronize(s));
    auto t0 = std::chrono::steady_clock::now();
    auto r = run();  // synchronises at the end (reads the categories back)
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    SDNN_EXPECTS(r.categories == warm.categories, "graph_challenge: categories changed between runs");
  }
  std::sort(times.begin(), times.end());
  seconds = times[times.size() / 2];
  return warm;
}

// Builds the device network (weights transposed to CSC once), uploads the inputs, runs one
// warm-up inference (captures the CUDA Graph), then `reps` timed ones (median); reps = 0
// picks 5 when the warm-up took under a second, else 1.
template <class Policy>
outcome run_device(std::int32_t layers_n, float bias, layer_source const& make, host_csr const& inputs, int reps,
                   std::int64_t max_batch) {
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cuda_exec exec{s};
  outcome out;
  {
    using layer_t = layers::sparse_linear<float, format::csr, Policy>;
    std::vector<std::shared_ptr<layer_t>> layers;
    for (std::int32_t l = 0; l < layers_n; ++l)
      layers.push_back(make.host ? std::make_shared<layer_t>(make.host(l), epilogue_challenge<float>(bias))
                                 : std::make_shared<layer_t>(make.device(l, exec), epilogue_challenge<float>(bias), exec));
    pipeline::challenge_network<Policy> net(layers);
    pipeline::challenge_options opt;
    opt.max_batch = max_batch;
    auto in_d = to_device(inputs, exec);
    net.plan(inputs.rows(), exec, opt);
    double warm_s = 0;
    auto warm = timed_runs(s, [&] { return net.run(exec, in_d.view()); }, reps, out.seconds, warm_s);
    out.batches = warm.batches;
    out.categories = std::move(warm.categories);
    out.connections = net.connections();
    std::fprintf(stderr, "  (warm-up run %.4f s incl. graph capture; %d timed runs; batch %lld rows)\n", warm_s, reps,
                 static_cast<long long>(net.batch()));
  }
  SDNN_CUDA_CHECK(cudaStreamSynchronize(s));
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
  return out;
}
#endif

#if defined(__CUDACC__)
// The depth-first engine (ops::challenge_engine_plan, issue 10) from host layers: plan (proofs,
// uploads), one warm-up run, then `reps` timed ones (median; reps = 0: 5 when the warm-up took
// under a second, else 1). Inference seconds as for the pipelines: inputs on the device ->
// categories on the host.
outcome run_engine(std::int32_t layers_n, float bias, host_layer_fn const& make, host_csr const& inputs, int reps,
                   ops::challenge_engine_options opt) {
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cuda_exec exec{s};
  outcome out;
  {
    std::vector<host_csr> ws;
    for (std::int32_t l = 0; l < layers_n; ++l) ws.push_back(make(l));
    ops::challenge_engine_plan plan(ws, bias, exec, opt);
    ws.clear();
    auto in_d = to_device(inputs, exec);
    double warm_s = 0;
    auto warm = timed_runs(s, [&] { return plan.run(exec, in_d.view()); }, reps, out.seconds, warm_s);
    out.categories = std::move(warm.categories);
    out.connections = plan.connections();
    out.batches = warm.rows;
    double fmin = 1e300, fmax = 0;
    for (double f : plan.fold_factors()) {
      fmin = std::min(fmin, f);
      fmax = std::max(fmax, f);
    }
    char buf[768];
    std::snprintf(buf, sizeof buf,
                  "rows x layers computed %lld of %lld; layers skipped %lld (%lld rows, %d threads per row); "
                  "rows retired as all-cap %lld; fold factor %.0f..%.0f; %s",
                  static_cast<long long>(warm.row_layers),
                  static_cast<long long>(inputs.rows()) * static_cast<long long>(layers_n),
                  static_cast<long long>(warm.layers_skipped), static_cast<long long>(warm.rows),
                  plan.threads_per_row(), static_cast<long long>(warm.retired), fmin, fmax, plan.summary().c_str());
    out.engine = buf;
    std::snprintf(buf, sizeof buf,
                  ",\"row_layers\":%lld,\"layers_skipped\":%lld,\"retired\":%lld,\"fold_min\":%.0f,\"fold_max\":%.0f,"
                  "\"retirement_proven_from\":%d",
                  static_cast<long long>(warm.row_layers), static_cast<long long>(warm.layers_skipped),
                  static_cast<long long>(warm.retired), fmin, fmax,
                  opt.structure.retirement ? plan.structure().saturation.retire_from() : -1);
    out.engine_json = buf;
    std::fprintf(stderr, "  (engine warm-up run %.4f s; %d timed runs)\n", warm_s, reps);
  }
  SDNN_CUDA_CHECK(cudaStreamSynchronize(s));
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
  return out;
}
#endif

// The depth-first engine's --policy names: all proofs on, or one or both switched off.
bool engine_policy(std::string const& name, ops::challenge_engine_options& opt) {
  if (name == "depth_first") return true;
  if (name == "depth_first_no_retirement") return opt.structure.retirement = false, true;
  if (name == "depth_first_no_folding") return opt.structure.folding = false, true;
  if (name == "depth_first_plain") {
    opt.structure.retirement = opt.structure.folding = false;
    return true;
  }
  return false;
}

// Calls f(Policy{}) for the named policy.
template <class F>
void with_policy(std::string const& name, F&& f) {
  using namespace sdnn::policy;
  if (name.empty() || name == policy::name<sparse_linear_default>()) return f(sparse_linear_default{});
  if (name == policy::name<skip_empty_rows<csc_gather<4>>>()) return f(skip_empty_rows<csc_gather<4>>{});
  if (name == policy::name<skip_empty_rows<csc_gather<16>>>()) return f(skip_empty_rows<csc_gather<16>>{});
  if (name == policy::name<skip_empty_rows<csc_gather<8>>>()) return f(skip_empty_rows<csc_gather<8>>{});
  if (name == policy::name<skip_empty_rows<csc_gather<32>>>()) return f(skip_empty_rows<csc_gather<32>>{});
  if (name == policy::name<skip_empty_rows<csc_tiled<8>>>()) return f(skip_empty_rows<csc_tiled<8>>{});
  if (name == policy::name<skip_empty_rows<csc_tiled<32>>>()) return f(skip_empty_rows<csc_tiled<32>>{});
  if (name == policy::name<csc_gather<16>>()) return f(csc_gather<16>{});
  if (name == policy::name<cusparse_reuse_buffer>()) return f(cusparse_reuse_buffer{});
  if (name == policy::name<cusparse_buffer_per_call>()) return f(cusparse_buffer_per_call{});
  if (name == policy::name<cusparse_filter_rows>()) return f(cusparse_filter_rows{});
  SDNN_FAIL("graph_challenge: unknown --policy '", name, "'; known: ", policy::name<sparse_linear_default>(),
            " (default), skip_empty_rows_csc_tiled{8,32}, skip_empty_rows_csc_gather{4,8,16,32}, csc_gather16, "
            "cusparse_reuse_buffer, cusparse_buffer_per_call, cusparse_filter_rows, and the depth-first engine: "
            "depth_first, depth_first_no_retirement, depth_first_no_folding, depth_first_plain");
}

void print_summary(std::int32_t n, std::int32_t layers_n, std::int64_t inputs, outcome const& o,
                   std::string const& backend, std::string const& policy_name, machine const& m) {
  double const rate = o.seconds > 0 ? static_cast<double>(inputs) * static_cast<double>(o.connections) / o.seconds : 0;
  std::printf("network:           %d neurons x %d layers\n", n, layers_n);
  std::printf("inputs:            %lld\n", static_cast<long long>(inputs));
  std::printf("connections:       %lld\n", static_cast<long long>(o.connections));
  std::printf("inference seconds: %.6f\n", o.seconds);
  std::printf("rate (edges/s):    %.4e\n", rate);
  std::printf("categories:        %zu\n", o.categories.size());
  // Device policies do not apply to the host backend (it runs the reference summation order).
  if (backend == "cuda")
    std::printf("backend:           cuda (policy %s)\n", policy_name.c_str());
  else
    std::printf("backend:           host (sequential reference; device policies do not apply)\n");
  std::printf("GPU:               %s\n", backend == "cuda" ? m.gpu_name.c_str() : "none (host backend)");
  if (!o.engine.empty()) std::printf("engine:            %s\n", o.engine.c_str());
}

std::string json_line(std::int32_t n, std::int32_t layers_n, std::int64_t inputs, outcome const& o,
                      std::string const& backend, std::string const& policy_name, machine const& m) {
  double const rate = o.seconds > 0 ? static_cast<double>(inputs) * static_cast<double>(o.connections) / o.seconds : 0;
  char buf[2048];
  std::snprintf(buf, sizeof buf,
                "{\"family\":\"graph_challenge\",\"gpu\":\"%s\",\"cuda\":\"%s\",\"date\":\"%s\",\"neurons\":%d,"
                "\"layers\":%d,\"inputs\":%lld,\"connections\":%lld,\"seconds\":%.6g,\"edges_per_second\":%.6g,"
                "\"policy\":\"%s\",\"backend\":\"%s\",\"categories\":%zu,\"batches\":%lld%s}",
                backend == "cuda" ? m.gpu_name.c_str() : "none", m.cuda_version.c_str(), today().c_str(), n, layers_n,
                static_cast<long long>(inputs), static_cast<long long>(o.connections), o.seconds, rate,
                policy_name.c_str(), backend.c_str(), o.categories.size(), static_cast<long long>(o.batches),
                o.engine_json.c_str());
  return buf;
}

std::string layer_path(std::string const& dir, std::int32_t n, std::int32_t l1) {
  std::string const base = dir + "/n" + std::to_string(n) + "-l" + std::to_string(l1) + ".tsv";
  if (file_exists(base)) return base;
  if (file_exists(base + ".gz")) return base + ".gz";
  SDNN_FAIL("graph_challenge: neither ", base, " nor ", base, ".gz exists");
}

std::string default_mnist() { return std::string(SDNN_EXAMPLE_DATA_DIR) + "/mnist-10k-images-idx3-ubyte.gz"; }

int cmd_infer(options const& o, machine const& m) {
  auto const n = static_cast<std::int32_t>(o.num("neurons"));
  auto const layers_n = static_cast<std::int32_t>(o.num("layers"));
  std::string const dir = o.get("weights"), in_path = o.get("inputs");
  SDNN_EXPECTS(!dir.empty() && !in_path.empty(), "graph_challenge infer: --weights DIR and --inputs FILE are required");
  std::string const backend = o.get("backend", m.gpu ? "cuda" : "host");
  SDNN_EXPECTS(backend == "host" || backend == "cuda", "graph_challenge: --backend must be host or cuda, got ", backend);
  SDNN_EXPECTS(backend == "host" || m.gpu, "graph_challenge: --backend cuda but no CUDA device (or a host-only build)");
  float const bias = data::challenge_bias(n);
  auto const inputs = io::read_challenge_images(in_path, n);
  outcome res;
  std::string pname;
  ops::challenge_engine_options eopt;
  if (engine_policy(o.get("policy"), eopt)) {
    SDNN_EXPECTS(backend == "cuda", "graph_challenge: the depth-first engine needs --backend cuda");
    pname = o.get("policy");
#if defined(__CUDACC__)
    res = run_engine(layers_n, bias, [&](std::int32_t l) { return io::read_challenge_layer(layer_path(dir, n, l + 1), n); },
                     inputs, 1, eopt);
#endif
  } else
  with_policy(o.get("policy"), [&](auto tag) {
    using P = decltype(tag);
    pname = policy::name<P>();
    if (backend == "host") {
      res = run_host<P>(layers_n, bias, [&](std::int32_t l) { return io::read_challenge_layer(layer_path(dir, n, l + 1), n); },
                        inputs);
    } else {
#if defined(__CUDACC__)
      res = run_device<P>(
          layers_n, bias,
          layer_source{[&](std::int32_t l) { return io::read_challenge_layer(layer_path(dir, n, l + 1), n); }, {}},
          inputs, 1, o.num("batch", 0));
#endif
    }
  });
  print_summary(n, layers_n, inputs.rows(), res, backend, pname, m);
  if (o.has("categories")) io::write_categories(o.get("categories"), res.categories);
  if (o.has("truth")) {
    auto truth = io::read_categories(o.get("truth"));
    bool const ok = truth == res.categories;
    std::printf("truth:             %s (%zu expected, %zu found)\n", ok ? "MATCH" : "MISMATCH", truth.size(),
                res.categories.size());
    if (!ok) return 1;
  }
  return 0;
}

int cmd_generate(options const& o) {
  auto const n = static_cast<std::int32_t>(o.num("neurons"));
  auto const layers_n = static_cast<std::int32_t>(o.num("layers"));
  std::string const seed = o.get("seed", "0"), dir = o.get("out");
  SDNN_EXPECTS(!dir.empty(), "graph_challenge generate: --out DIR is required");
  ::mkdir(dir.c_str(), 0755);
  bool const official = seed == "official";
  SDNN_EXPECTS(!official || (n == 1024 && layers_n <= 120), "graph_challenge generate: --seed official needs N = 1024 and L <= 120");
  std::uint64_t const s = official ? 0 : std::strtoull(seed.c_str(), nullptr, 10);
  for (std::int32_t l = 0; l < layers_n; ++l) {
    auto w = official ? data::official_1024_layer(l) : data::radixnet_layer(n, l, s);
    io::write_challenge_tsv(dir + "/n" + std::to_string(n) + "-l" + std::to_string(l + 1) + ".tsv", w.view());
  }
  std::printf("wrote %d layers of %d neurons to %s\n", layers_n, n, dir.c_str());
  if (o.has("images")) {
    auto const k = static_cast<std::int32_t>(o.num("images"));
    auto const mnist = io::read_idx_images(o.get("mnist", default_mnist()));
    auto y = data::challenge_inputs_from_mnist(mnist, n, k);
    std::string const p = dir + "/sparse-images-" + std::to_string(n) + ".tsv";
    io::write_challenge_tsv(p, y.view());
    std::printf("wrote %d images to %s\n", k, p.c_str());
  }
  return 0;
}

int cmd_bench(options const& o, machine const& m) {
  auto const n = static_cast<std::int32_t>(o.num("neurons"));
  auto const layers_n = static_cast<std::int32_t>(o.num("layers"));
  auto const images = static_cast<std::int32_t>(o.num("images", 60000));
  std::uint64_t const seed = static_cast<std::uint64_t>(o.num("seed", 2026));
  auto const mnist = io::read_idx_images(o.get("mnist", default_mnist()));
  // `images` distinct images (issue 10): digit n mod 10000 shifted by a small offset chosen from
  // n / 10000 (data/distinct_inputs.hpp), so no input repeats and no de-duplication is flattered.
  auto const inputs = data::distinct_challenge_inputs(mnist, n, images);
  float const bias = data::challenge_bias(n);
  std::string const backend = m.gpu ? "cuda" : "host";
  outcome res;
  std::string pname;
  ops::challenge_engine_options eopt;
  if (engine_policy(o.get("policy"), eopt)) {
    SDNN_EXPECTS(m.gpu, "graph_challenge: the depth-first engine needs a CUDA device");
    pname = o.get("policy");
#if defined(__CUDACC__)
    bool const official = n == 1024 && layers_n <= 120 && o.get("seed") == "";
    res = run_engine(layers_n, bias,
                     [&](std::int32_t l) { return official ? data::official_1024_layer(l) : data::radixnet_layer(n, l, seed); },
                     inputs, static_cast<int>(o.num("reps", 0)), eopt);
#endif
  } else
  with_policy(o.get("policy"), [&](auto tag) {
    using P = decltype(tag);
    pname = policy::name<P>();
#if defined(__CUDACC__)
    if (m.gpu) {
      bool const official = n == 1024 && layers_n <= 120 && o.get("seed") == "";
      res = run_device<P>(
          layers_n, bias,
          layer_source{{}, [&](std::int32_t l, cuda_exec e) {
                         return official ? data::official_1024_layer_device(l, e)
                                         : data::radixnet_layer_device(n, l, seed, e);
                       }},
          inputs, static_cast<int>(o.num("reps", 0)), o.num("batch", 0));
      return;
    }
#endif
    res = run_host<P>(layers_n, bias, [&](std::int32_t l) { return data::radixnet_layer(n, l, seed); }, inputs);
  });
  print_summary(n, layers_n, inputs.rows(), res, backend, pname, m);
  std::string const line = json_line(n, layers_n, inputs.rows(), res, backend, pname, m);
  std::printf("%s\n", line.c_str());
  if (char const* p = std::getenv("SDNN_BENCH_JSON")) std::ofstream(p, std::ios::app) << line << '\n';
  return 0;
}

// The built-in default: official 1024 x 120 network, 60000 inputs from the shipped MNIST
// digits. The inputs repeat with the period of the distinct digits (10000 shipped), so the
// host reference on the first 10000 inputs determines every category exactly: input i
// (1-based) is a category iff input ((i - 1) mod 10000) + 1 is.
int cmd_default(options const& o, machine const& m) {
  std::int32_t const n = 1024, layers_n = 120, count = 60000;
  auto const mnist = io::read_idx_images(o.get("mnist", default_mnist()));
  auto const inputs = data::challenge_inputs_from_mnist(mnist, n, count);
  float const bias = data::challenge_bias(n);
  std::string const backend = m.gpu ? "cuda" : "host";
  // On a GPU the default is the depth-first engine with every structure proof it can make on
  // these weights (ops::challenge_engine_plan; exact: the check below compares categories).
  std::string pname = m.gpu ? "depth_first" : policy::name<policy::sparse_linear_default>();
  outcome res;
#if defined(__CUDACC__)
  if (m.gpu)
    res = run_engine(layers_n, bias, [](std::int32_t l) { return data::official_1024_layer(l); }, inputs, 0, {});
#endif
  if (!m.gpu)
    res = run_host<policy::sparse_linear_default>(layers_n, bias, [](std::int32_t l) { return data::official_1024_layer(l); },
                                                  inputs);
  print_summary(n, layers_n, count, res, backend, pname, m);

  std::int32_t const distinct = std::min(count, mnist.count);
  std::printf("checking against the host reference (sdnn::reference::challenge_infer) on the %d distinct inputs...\n",
              distinct);
  host_csr sub = data::challenge_inputs_from_mnist(mnist, n, distinct);
  std::vector<host_csr> ws;
  for (std::int32_t l = 0; l < layers_n; ++l) ws.push_back(data::official_1024_layer(l));
  auto t0 = std::chrono::steady_clock::now();
  auto ref_sub = reference::challenge_categories(reference::challenge_infer(sub, ws, bias));
  double const ref_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<char> alive(static_cast<std::size_t>(distinct), 0);
  for (auto id : ref_sub) alive[static_cast<std::size_t>(id - 1)] = 1;
  std::vector<std::int32_t> ref;
  for (std::int32_t i = 0; i < count; ++i)
    if (alive[static_cast<std::size_t>(i % distinct)]) ref.push_back(i + 1);
  bool const ok = ref == res.categories;
  std::printf("host reference:    %.2f s for %d inputs, %zu categories of %d expected\n", ref_s, distinct, ref.size(),
              count);
  std::printf("check:             %s\n", ok ? "MATCH (categories equal the host reference)" : "MISMATCH");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    options const o = parse(argc, argv);
    machine const m = probe();
    if (o.command.empty()) return cmd_default(o, m);
    if (o.command == "infer") return cmd_infer(o, m);
    if (o.command == "generate") return cmd_generate(o);
    if (o.command == "bench") return cmd_bench(o, m);
    std::fprintf(stderr, "graph_challenge: unknown command '%s' (infer, generate, bench, or none)\n", o.command.c_str());
    return 2;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "graph_challenge: error: %s\n", e.what());
    return 2;
  }
}
