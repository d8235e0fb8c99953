// graph_challenge - Sparse DNN Graph Challenge inference with sdnn.
//
//   graph_challenge                      the default command: official 1024-neuron network (120 layers),
//                                        60000 inputs made from the shipped MNIST digits, on the GPU if
//                                        one is present else on the host; checked against the host reference
//   graph_challenge infer --neurons N --layers L --weights DIR --inputs FILE [options]
//   graph_challenge generate --neurons N --layers L --out DIR [options]
//   graph_challenge bench --neurons N --layers L [options]
//   graph_challenge [COMMAND] --help     every option of a command, with its default and unit
//
// The command line is parsed by cli.hpp (tested in tests/host/test_cli.cpp): unknown options
// and stray values are refused, integers are range-checked, and every input and output path
// is checked before any long work. Messages for the user name no source file.
//
// Timing: "inference seconds" covers the whole inference of all inputs (input densification,
// every layer, live-row compaction, reading the categories back); file reading, network
// generation/upload and the one-time plan (weights transposed to CSC, buffers, CUDA Graph
// capture during a warm-up run) are excluded, as in the official rules. The rate is
// inputs * total nonzeros of all layers / seconds (edges/s).
#include "cli.hpp"

#include <sdnn/challenge/inputs.hpp>
#include <sdnn/challenge/distinct_inputs.hpp>
#include <sdnn/challenge/engine.hpp>
#include <sdnn/challenge/radixnet.hpp>
#include <sdnn/challenge/tsv.hpp>
#include <sdnn/io/mnist_idx.hpp>
#include <sdnn/linear/sparse_linear.hpp>
#include <sdnn/challenge/pipeline.hpp>
#include <sdnn/pipeline/weight_store.hpp>
#include <sdnn/linear/policy/dense_sparse.hpp>
#include <sdnn/challenge/reference.hpp>

#if defined(__CUDACC__)
#include <sdnn/challenge/kernel/radixnet.cuh>
#include <sdnn/formats/copy.cuh>
#include <sdnn/challenge/pipeline.cuh>
#include <sdnn/challenge/engine.cuh>
#endif

#if SDNN_GRAPH_CHALLENGE_MPI
#include <sdnn/dist/categories.hpp>
#include <sdnn/dist/mpi.hpp>
#include <sdnn/dist/partition.hpp>
#include <sdnn/dist/signature.hpp>
#include <sdnn/dist/timing.hpp>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <ctime>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <mutex>
#include <string>
#include <thread>
#include <sys/stat.h>
#include <vector>

#ifndef SDNN_EXAMPLE_DATA_DIR
#define SDNN_EXAMPLE_DATA_DIR "tests/data"
#endif

using namespace sdnn;
using host_csr = csr_matrix<float, std::int32_t>;

namespace {

constexpr char const* program_name = "graph_challenge";

// How to get several ranks (the same text in every build, so the README's --help stays one).
[[maybe_unused]] constexpr char const* multi_rank_note =  // the build without MPI prints it
    "several ranks: mpirun -np P graph_challenge infer|bench ... splits the inputs over P processes, one GPU "
    "each, in a build with MPI (configure with MPI found, or -DSDNN_ENABLE_MPI=ON)";

// A failure to show the user as it is (cli::error: no source location, no prefix; main adds
// "graph_challenge: error: ").
template <class... Args>
[[noreturn]] void fail(Args const&... args) {
  throw cli::error(cli::detail::concat(args...));
}
// Options that do not go together: a usage error (main points to `COMMAND --help`).
template <class... Args>
[[noreturn]] void fail_usage(std::string const& command, Args const&... args) {
  throw cli::usage_error(cli::detail::concat(args...), command);
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
    int dev = 0;  // the current device: 0, or the one a rank chose (one GPU per rank)
    SDNN_CUDA_CHECK(cudaGetDevice(&dev));
    SDNN_CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
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
  std::string weights, weights_json;  // streamed weights (--weight-store): bytes and bandwidth (else empty)
};

// --weight-store and --device-memory-budget of infer and bench (pipeline policies only).
struct weight_args {
  pipeline::weight_placement mode = pipeline::weight_placement::device;
  std::uint64_t budget = 0;  // bytes; 0 = none
  bool given = false;        // either option on the command line (the summary then says where the weights were)
};

// Layer sources: layer l (0-based) as a host CSR (N x N, row = input neuron).
using host_layer_fn = std::function<host_csr(std::int32_t)>;

// make(l), with "  <label> l+1/L" redrawn on a terminal (stderr) as the layers come.
host_layer_fn with_progress(std::string const& label, std::int32_t layers_n, host_layer_fn make) {
  // make may run on several threads at once (the engine's plan builds layers in parallel): the
  // progress line counts finished layers under a lock.
  struct shared_progress {
    shared_progress(std::string const& what, std::int32_t total) : line(what, total) {}
    cli::progress line;
    std::mutex mu;
    std::int32_t done = 0;
  };
  auto p = std::make_shared<shared_progress>(label, layers_n);
  return [p, make = std::move(make)](std::int32_t l) {
    auto w = make(l);
    std::lock_guard<std::mutex> lock(p->mu);
    p->line.step(++p->done);
    return w;
  };
}

// What the host backend runs, whatever --policy says: the sequential reference product
// (reference::dense_sparse_spmm) on the live rows, dead rows dropped after every layer. Named
// in the summary and the bench JSON, which never name a device policy for a host run.
constexpr char const* host_policy_name = "host_reference";

// The host backend's layer: reports each layer's forward to a progress line.
class progress_layer final : public layers::sparse_linear<float, format::csr, policy::sparse_linear_default> {
  using base = layers::sparse_linear<float, format::csr, policy::sparse_linear_default>;

 public:
  progress_layer(host_csr w, float bias, cli::progress* p, std::int32_t index)
      : base(std::move(w), epilogue_capped_relu<float>(bias)), progress_(p), index_(index) {}
  using base::forward;
  void forward(host_exec e, dense_view<float const> in, dense_view<float> out) override {
    base::forward(e, in, out);
    if (progress_) progress_->step(index_ + 1);
  }

 private:
  cli::progress* progress_;
  std::int32_t index_;
};

// The host backend (pipeline::challenge_network on host_exec); "host inference: layer k/L" on
// a terminal while it runs.
outcome run_host(std::int32_t layers_n, float bias, host_layer_fn const& make, host_csr const& inputs) {
  using P = policy::sparse_linear_default;
  using layer_t = layers::sparse_linear<float, format::csr, P>;
  cli::progress progress("host inference: layer", layers_n);
  std::vector<std::shared_ptr<layer_t>> layers;
  for (std::int32_t l = 0; l < layers_n; ++l) layers.push_back(std::make_shared<progress_layer>(make(l), bias, &progress, l));
  pipeline::challenge_network<P> net(layers);
  auto t0 = std::chrono::steady_clock::now();
  auto r = net.run(host_exec{}, inputs.view());
  auto t1 = std::chrono::steady_clock::now();
  outcome out;
  out.categories = std::move(r.categories);
  out.seconds = std::chrono::duration<double>(t1 - t0).count();
  out.connections = net.connections();
  out.batches = r.batches;
  return out;
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
// With --weight-store host or auto the layers come from the host source when there is one
// (streamed layers are packed from host weights).
bool use_host_layers(layer_source const& make, weight_args const& wa) {
  return make.host && (!make.device || wa.mode != pipeline::weight_placement::device);
}
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
    if (r.categories != warm.categories) fail("categories changed between runs (a bug: please report it)");
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
                   std::int64_t max_batch, weight_args const& wa = {}) {
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cuda_exec exec{s};
  outcome out;
  {
    using layer_t = layers::sparse_linear<float, format::csr, Policy>;
    std::vector<std::shared_ptr<layer_t>> layers(static_cast<std::size_t>(layers_n));
    bool const host_layers = use_host_layers(make, wa);
    if (host_layers) {
      // Host layers are made on several threads (make.host may run concurrently: see
      // with_progress); 65536 x 1920 is 4e9 connections, minutes on one core.
      unsigned const workers = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
      std::atomic<std::int32_t> next{0};
      std::vector<std::exception_ptr> failed(workers);
      auto work = [&](unsigned w) {
        try {
          for (std::int32_t l = next++; l < layers_n; l = next++)
            layers[static_cast<std::size_t>(l)] = std::make_shared<layer_t>(make.host(l), epilogue_capped_relu<float>(bias));
        } catch (...) {
          failed[w] = std::current_exception();
          next = layers_n;
        }
      };
      std::vector<std::thread> pool;
      for (unsigned w = 1; w < workers; ++w) pool.emplace_back(work, w);
      work(0);
      for (auto& t : pool) t.join();
      for (auto& e : failed)
        if (e) std::rethrow_exception(e);
    } else {
      for (std::int32_t l = 0; l < layers_n; ++l)
        layers[static_cast<std::size_t>(l)] =
            std::make_shared<layer_t>(make.device(l, exec), epilogue_capped_relu<float>(bias), exec);
    }
    pipeline::challenge_network<Policy> net(layers);
    pipeline::challenge_options opt;
    opt.max_batch = max_batch;
    opt.weights = wa.mode;
    opt.device_memory_budget = wa.budget;
    auto in_d = to_device(inputs, exec);
    net.plan(inputs.rows(), exec, opt);
    double warm_s = 0;
    auto warm = timed_runs(s, [&] { return net.run(exec, in_d.view()); }, reps, out.seconds, warm_s);
    out.batches = warm.batches;
    out.categories = std::move(warm.categories);
    out.connections = net.connections();
    std::fprintf(stderr, "  (warm-up run %.4f s incl. graph capture; %d timed runs; batch %lld rows)\n", warm_s, reps,
                 static_cast<long long>(net.batch()));
    auto const& st = net.weight_stats();
    if (st.streamed) {  // what the last timed run streamed, against the link's measured peak
      double const peak = pipeline::measure_h2d_peak();
      double const achieved = st.copy_seconds > 0 ? static_cast<double>(st.bytes) / st.copy_seconds : 0;
      double const overall = out.seconds > 0 ? static_cast<double>(st.bytes) / out.seconds : 0;
      char buf[768];
      std::snprintf(buf, sizeof buf,
                    "streamed from pinned host memory, %d slots of %.1f MiB (budget %s); %.3f GB in %lld uploads per "
                    "run; H2D %.2f GB/s while copying (copy stream busy %.4f s), %.2f GB/s over the inference, link "
                    "peak %.2f GB/s (%.0f%%)",
                    st.slots, static_cast<double>(st.slot_bytes) / 1048576.0,
                    wa.budget ? pipeline::format_bytes(wa.budget).c_str() : "none", static_cast<double>(st.bytes) / 1e9,
                    static_cast<long long>(st.uploads), achieved / 1e9, st.copy_seconds, overall / 1e9, peak / 1e9,
                    peak > 0 ? 100.0 * achieved / peak : 0.0);
      out.weights = buf;
      std::snprintf(buf, sizeof buf,
                    ",\"weights\":\"host\",\"weight_slots\":%d,\"slot_bytes\":%llu,\"pinned_bytes\":%llu,"
                    "\"streamed_bytes\":%llu,\"uploads\":%lld,\"copy_seconds\":%.6g,\"h2d_bytes_per_second\":%.6g,"
                    "\"h2d_peak_bytes_per_second\":%.6g",
                    st.slots, static_cast<unsigned long long>(st.slot_bytes),
                    static_cast<unsigned long long>(st.pinned_bytes), static_cast<unsigned long long>(st.bytes),
                    static_cast<long long>(st.uploads), st.copy_seconds, achieved, peak);
      out.weights_json = buf;
    } else if (wa.given) {
      std::uint64_t total = 0;
      for (auto b : net.resident_layer_bytes()) total += b;
      out.weights = "resident on the device (" + pipeline::format_bytes(total) + " estimated; budget " +
                    (wa.budget ? pipeline::format_bytes(wa.budget)
                               : std::string(wa.mode == pipeline::weight_placement::automatic ? "60% of the free memory"
                                                                                              : "none")) +
                    ")";
      out.weights_json = ",\"weights\":\"device\"";
    }
  }
  SDNN_CUDA_CHECK(cudaStreamSynchronize(s));
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
  return out;
}
#endif

#if defined(__CUDACC__)
// The depth-first engine (ops::challenge_engine_plan) from host layers: plan (proofs,
// uploads), one warm-up run, then `reps` timed ones (median; reps = 0: 5 when the warm-up took
// under a second, else 1). Inference seconds as for the pipelines: inputs on the device ->
// categories on the host.
outcome run_engine(std::int32_t layers_n, float bias, host_layer_fn const& make, host_csr const& inputs, int reps,
                   ops::challenge_engine_options opt, int build_threads = 0) {
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cuda_exec exec{s};
  outcome out;
  {
    // Layers made (read or generated) on every core at once and dropped once the plan has built
    // their classes: 65536 x 1920 never sits on the host whole (about 32 GB of CSR).
    // (build_threads > 0: several ranks share the machine's cores.)
    int const threads = build_threads > 0 ? build_threads
                                          : static_cast<int>(std::max(1u, std::min(16u, std::thread::hardware_concurrency())));
    ops::challenge_engine_plan plan(layers_n, make, bias, exec, opt, threads);
    if (plan.streamed()) {  // --weight-store host, or auto over the budget: windows of layers from pinned memory
      auto const& sc = plan.stream_schedule();
      out.weights = "engine terms streamed from pinned host memory: " + std::to_string(sc.windows.size()) +
                    " windows in 2 slots of " + pipeline::format_bytes(sc.slot_bytes) + ", a park of " +
                    std::to_string(sc.park_rows) + " rows; plan " + pipeline::format_bytes(plan.device_bytes()) +
                    " on the device (budget " +
                    (opt.device_memory_budget ? pipeline::format_bytes(opt.device_memory_budget)
                                              : std::string("60% of the free memory")) + ")";
      out.weights_json = ",\"weights\":\"host\",\"engine_device_bytes\":" + std::to_string(plan.device_bytes()) +
                         ",\"stream_windows\":" + std::to_string(sc.windows.size()) +
                         ",\"stream_slot_bytes\":" + std::to_string(sc.slot_bytes) +
                         ",\"stream_park_rows\":" + std::to_string(sc.park_rows);
    } else if (opt.device_memory_budget > 0) {  // --device-memory-budget: the plan checked it before allocating
      out.weights = "engine plan resident on the device: " + pipeline::format_bytes(plan.device_bytes()) +
                    " (layer layout and team scratch; budget " + pipeline::format_bytes(opt.device_memory_budget) + ")";
      out.weights_json = ",\"weights\":\"device\",\"engine_device_bytes\":" + std::to_string(plan.device_bytes());
    }
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
    if (plan.streamed()) {  // what the warm-up run moved (a timed run moves the same, less what the slots still held)
      double const peak = pipeline::measure_h2d_peak();
      double const achieved = warm.copy_seconds > 0 ? static_cast<double>(warm.bytes_streamed) / warm.copy_seconds : 0;
      std::snprintf(buf, sizeof buf,
                    "; streamed %.3f GB in %lld uploads (copy stream busy %.4f s, %.1f GB/s while copying, link "
                    "peak %.1f GB/s), %lld passes, %lld windows skipped, %lld groups of rows",
                    static_cast<double>(warm.bytes_streamed) / 1e9, static_cast<long long>(warm.uploads),
                    warm.copy_seconds, achieved / 1e9, peak / 1e9, static_cast<long long>(warm.passes),
                    static_cast<long long>(warm.windows_skipped), static_cast<long long>(warm.groups));
      out.engine += buf;
      std::snprintf(buf, sizeof buf,
                    ",\"stream_bytes\":%llu,\"stream_uploads\":%lld,\"stream_passes\":%lld,"
                    "\"stream_windows_skipped\":%lld,\"stream_groups\":%lld,\"copy_seconds\":%.6g,"
                    "\"h2d_bytes_per_second\":%.6g,\"h2d_peak_bytes_per_second\":%.6g",
                    static_cast<unsigned long long>(warm.bytes_streamed), static_cast<long long>(warm.uploads),
                    static_cast<long long>(warm.passes), static_cast<long long>(warm.windows_skipped),
                    static_cast<long long>(warm.groups), warm.copy_seconds, achieved, peak);
      out.engine_json += buf;
    }
    std::fprintf(stderr, "  (engine warm-up run %.4f s; %d timed runs)\n", warm_s, reps);
  }
  SDNN_CUDA_CHECK(cudaStreamSynchronize(s));
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
  return out;
}
#endif

// The depth-first engine's --policy names: all proofs on, or one or both switched off.
std::vector<std::string> const engine_policy_names = {"depth_first", "depth_first_no_retirement",
                                                      "depth_first_no_folding", "depth_first_plain"};

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

// Calls f(Policy{}) for each layer-by-layer pipeline policy until f returns true; true if one did.
template <class F>
bool for_each_pipeline_policy(F&& f) {
  using namespace sdnn::policy;
  return f(sparse_linear_default{}) || f(skip_empty_rows<csc_tiled<8>>{}) || f(skip_empty_rows<csc_tiled<32>>{}) ||
         f(skip_empty_rows<csc_gather<4>>{}) || f(skip_empty_rows<csc_gather<8>>{}) ||
         f(skip_empty_rows<csc_gather<16>>{}) || f(skip_empty_rows<csc_gather<32>>{}) || f(csc_gather<16>{}) ||
         f(cusparse_reuse_buffer{}) || f(cusparse_buffer_per_call{}) || f(cusparse_filter_rows{});
}

std::vector<std::string> pipeline_policy_names() {
  std::vector<std::string> names;
  for_each_pipeline_policy([&](auto tag) {
    names.push_back(policy::name<decltype(tag)>());
    return false;
  });
  return names;
}

std::string const& default_policy_name() {
  static std::string const n = policy::name<policy::sparse_linear_default>();
  return n;
}

// Calls f(Policy{}) for the named pipeline policy (the parser has checked the name).
template <class F>
void with_policy(std::string const& name, F&& f) {
  bool const found = for_each_pipeline_policy([&](auto tag) {
    if (name != policy::name<decltype(tag)>()) return false;
    f(tag);
    return true;
  });
  if (!found) fail("unknown --policy '", name, "'");
}

double rate_of(std::int64_t inputs, outcome const& o) {
  return o.seconds > 0 ? static_cast<double>(inputs) * static_cast<double>(o.connections) / o.seconds : 0;
}

void print_summary(std::int32_t n, std::int32_t layers_n, std::int64_t inputs, outcome const& o,
                   std::string const& backend, std::string const& policy_name, machine const& m) {
  std::printf("network:           %d neurons x %d layers\n", n, layers_n);
  std::printf("inputs:            %lld\n", static_cast<long long>(inputs));
  std::printf("connections:       %lld\n", static_cast<long long>(o.connections));
  std::printf("inference seconds: %.6f\n", o.seconds);
  std::printf("rate (edges/s):    %.4e\n", rate_of(inputs, o));
  std::printf("categories:        %zu\n", o.categories.size());
  // Device policies do not apply to the host backend (it runs the reference summation order).
  if (backend == "cuda")
    std::printf("backend:           cuda (policy %s)\n", policy_name.c_str());
  else
    std::printf("backend:           host (policy %s: the sequential reference; device policies do not apply)\n",
                host_policy_name);
  std::printf("GPU:               %s\n", backend == "cuda" ? m.gpu_name.c_str() : "none (host backend)");
  if (!o.engine.empty()) std::printf("engine:            %s\n", o.engine.c_str());
  if (!o.weights.empty()) std::printf("weights:           %s\n", o.weights.c_str());
}

// FNV-1a (64-bit) of the category ids, 4 little-endian bytes each: runs are compared by it
// (resident and streamed weights, one process and several ranks), since bench prints no ids.
unsigned long long categories_fnv1a(std::vector<std::int32_t> const& categories) {
  unsigned long long fnv = 1469598103934665603ull;
  for (auto c : categories)
    for (int b = 0; b < 4; ++b) fnv = (fnv ^ ((static_cast<std::uint32_t>(c) >> (8 * b)) & 0xffu)) * 1099511628211ull;
  return fnv;
}

std::string json_line(std::int32_t n, std::int32_t layers_n, std::int64_t inputs, outcome const& o,
                      std::string const& backend, std::string const& policy_name, machine const& m) {
  char buf[3072];
  std::snprintf(buf, sizeof buf,
                "{\"family\":\"graph_challenge\",\"gpu\":\"%s\",\"cuda\":\"%s\",\"date\":\"%s\",\"neurons\":%d,"
                "\"layers\":%d,\"inputs\":%lld,\"connections\":%lld,\"seconds\":%.6g,\"edges_per_second\":%.6g,"
                "\"policy\":\"%s\",\"backend\":\"%s\",\"categories\":%zu,\"categories_fnv1a\":\"%016llx\","
                "\"batches\":%lld%s%s}",
                backend == "cuda" ? m.gpu_name.c_str() : "none", m.cuda_version.c_str(), today().c_str(), n, layers_n,
                static_cast<long long>(inputs), static_cast<long long>(o.connections), o.seconds, rate_of(inputs, o),
                backend == "cuda" ? policy_name.c_str() : host_policy_name, backend.c_str(), o.categories.size(),
                categories_fnv1a(o.categories), static_cast<long long>(o.batches), o.engine_json.c_str(),
                o.weights_json.c_str());
  return buf;
}

std::string default_mnist() { return std::string(SDNN_EXAMPLE_DATA_DIR) + "/mnist-10k-images-idx3-ubyte.gz"; }

std::string mnist_path(cli::result const& o) {
  std::string const p = o.has("mnist") ? o.text("mnist") : default_mnist();
  cli::check_input_file(p, "--mnist");
  return p;
}

// The layer files DIR/nN-lK.tsv (else .tsv.gz), K = 1..L: every one must exist before the
// first is read.
std::vector<std::string> layer_paths(std::string dir, std::int32_t n, std::int32_t layers_n) {
  cli::check_input_dir(dir, "--weights");
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  std::vector<std::string> paths;
  for (std::int32_t l1 = 1; l1 <= layers_n; ++l1) {
    std::string const base = dir + "/n" + std::to_string(n) + "-l" + std::to_string(l1) + ".tsv";
    std::string const p = file_exists(base) ? base : file_exists(base + ".gz") ? base + ".gz" : "";
    if (p.empty()) fail("--weights: layer ", l1, " of ", layers_n, ": neither '", base, "' nor '", base, ".gz' exists");
    cli::check_input_file(p, "--weights");
    paths.push_back(p);
  }
  return paths;
}

// ---------------------------------------------------------------------------------------
// The command line.

std::string const challenge_sizes = "1024, 4096, 16384 or 65536";

// --neurons of infer and bench: a Graph Challenge size (the bias is defined for those).
std::string check_challenge_size(std::string const& v) {
  std::int64_t n = 0;
  cli::parse_int64(v, n);
  return n == 1024 || n == 4096 || n == 16384 || n == 65536
             ? ""
             : "is not a Graph Challenge size: " + challenge_sizes + " (the challenge defines the bias for those)";
}

std::string check_seed(std::string const& v) {
  std::uint64_t s = 0;
  return cli::parse_uint64(v, s) ? "" : "is not an unsigned 64-bit integer (0 to 18446744073709551615)";
}

// --device-memory-budget: a byte size (pipeline::parse_byte_size).
std::string check_byte_size(std::string const& v) {
  std::uint64_t b = 0;
  return pipeline::parse_byte_size(v, b)
             ? ""
             : "is not a byte size (plain bytes, or a number with B, KiB, MiB, GiB, TiB, KB, MB, GB or TB, e.g. 4GiB)";
}

// The pipeline policies that can stream their weights from host memory (not the cuSPARSE baselines).
std::string streaming_policies() {
  std::string r;
  for (auto const& n : pipeline_policy_names())
    if (n.rfind("cusparse", 0) != 0) r += (r.empty() ? "" : ", ") + n;
  return r;
}

// --weight-store and --device-memory-budget of infer and bench (out-of-core weights).
void add_weight_options(cli::command& c) {
  c.opt("weight-store", "WHERE").one_of({"device", "host", "auto"}).default_to("device")
      .help("where the weights live: device (resident), host (pinned host memory, streamed to the GPU: layer "
            "by layer through a ring of device slots for a pipeline policy, in windows of layers through two "
            "slots for the depth-first engine), auto (host when the resident weights exceed "
            "--device-memory-budget, else 60% of the free device memory)");
  c.opt("device-memory-budget", "SIZE").text().check(check_byte_size).default_is("none")
      .help("device memory for the weights: 4GiB, 512MiB, or bytes; streamed weights take 2 or 3 slots of the "
            "largest layer within it (the depth-first engine: its whole plan, two slots of layer windows and "
            "the parked rows)");
}

// The weight options as given; refused (usage error) with the engine, the cuSPARSE policies and
// the host backend.
weight_args weight_options(cli::result const& o, std::string const& command, std::string const& policy_name,
                           bool engine, bool gpu) {
  weight_args wa;
  wa.given = o.has("weight-store") || o.has("device-memory-budget");
  pipeline::parse_weight_placement(o.text("weight-store"), wa.mode);
  if (o.has("device-memory-budget")) pipeline::parse_byte_size(o.text("device-memory-budget"), wa.budget);
  if (wa.mode == pipeline::weight_placement::device && wa.budget == 0) return wa;
  std::string const what = o.has("device-memory-budget") ? "--device-memory-budget" : "--weight-store " + o.text("weight-store");
  // The engine streams its terms in windows of layers (ops::challenge_engine_plan): host, or auto
  // over the budget; device with a budget: its plan checks its layout against it (else an error).
  if (engine) return wa;
  if (policy_name.rfind("cusparse", 0) == 0)
    fail_usage(command, what, ": --policy ", policy_name,
               " keeps cuSPARSE descriptors on resident weights; weights stream with: ", streaming_policies());
  if (!gpu) fail_usage(command, what, ": applies to the GPU backend only");
  return wa;
}

cli::parser make_parser() {
  std::string const int32_max = "2147483647";
  cli::parser p(program_name,
                "Sparse DNN Graph Challenge inference with sdnn: reads or generates a network and its inputs, runs "
                "the inference on the GPU (the depth-first engine or a layer-by-layer pipeline) or on the host, "
                "and prints inputs, connections, inference seconds, rate, backend and GPU.");
  std::vector<std::string> policies = pipeline_policy_names();
  policies.insert(policies.end(), engine_policy_names.begin(), engine_policy_names.end());
  std::string const policy_help =
      "the kernel policy on the GPU: a layer-by-layer pipeline policy, or the depth-first engine (depth_first: "
      "every structure proof; _no_retirement, _no_folding, _plain: proofs switched off). The host "
      "backend runs the sequential reference (host_reference) whatever the policy.";

  auto& d = p.add("", "official 1024-neuron network (120 layers), 60000 inputs made from the shipped MNIST "
                      "digits; on the GPU if one is visible (the depth-first engine), else on the host; then "
                      "checked against the host reference on the 10000 distinct inputs. Exit 0 only on a match.");
  d.opt("mnist", "IDX")
      .text()
      .default_is("the shipped 10000 digits, tests/data/mnist-10k-images-idx3-ubyte.gz")
      .help("MNIST IDX image file (plain or gzip'd) the inputs are made from");

  auto& infer = p.add("infer", "reads a network and inputs in the official TSV format, runs the inference, "
                               "writes or checks the categories");
  infer.description(
      "Reads the layers DIR/nN-lK.tsv (or .tsv.gz), K = 1..L, and the input TSV, runs the inference and prints "
      "inputs, connections, inference seconds (no file reading or plan), rate, backend and GPU. Every file is "
      "checked before the first is read.");
  infer.opt("neurons", "N").integer(1, 65536).check(check_challenge_size).required()
      .help("neurons per layer: " + challenge_sizes);
  infer.opt("layers", "L").integer(1, 2147483647).required().help("number of layers to read, 1 to " + int32_max);
  infer.opt("weights", "DIR").text().required().help("directory holding the layer files nN-lK.tsv or nN-lK.tsv.gz");
  infer.opt("inputs", "FILE").text().required()
      .help("input images in the official TSV format (image id, neuron, value; 1-based; plain or gzip'd)");
  infer.opt("categories", "OUT").text().default_is("not written")
      .help("write the categories here: one 1-based image id per line, ascending (checked for writing first)");
  infer.opt("truth", "FILE").text().default_is("not checked")
      .help("expected categories (same format); exit 1 when the result differs");
  infer.opt("backend", "NAME").one_of({"host", "cuda"}).default_is("cuda when a GPU is visible, else host")
      .help("where to run");
  infer.opt("policy", "NAME").one_of(policies).default_to(default_policy_name()).help(policy_help);
  infer.opt("batch", "B").integer(0).default_to("0")
      .help("rows (images) per device batch of a pipeline policy; 0 = as many as fit in about 70% of the free "
            "device memory");
  add_weight_options(infer);
  infer.epilog("exit status: 0 done (and --truth matched), 1 --truth differs, 2 bad arguments or input.");

  auto& gen = p.add("generate", "writes a RadiX-Net network (and challenge-like images) in the official TSV format");
  gen.description(
      "Writes the layers DIR/nN-lK.tsv, K = 1..L, of a RadiX-Net network (32 connections of 1/16 per neuron; with "
      "--seed official and N = 1024 the official layers) and, with --images, K challenge-like images "
      "DIR/sparse-images-N.tsv made from MNIST digits. Prints the files written, the connections and the image "
      "nonzeros. Every argument is checked before anything is written.");
  gen.opt("neurons", "N").integer(32, 1 << 20)
      .check([](std::string const& v) {
        std::int64_t n = 0;
        cli::parse_int64(v, n);
        return (n & (n - 1)) == 0 ? "" : "is not a power of two (RadiX-Net needs one)";
      })
      .required()
      .help("neurons per layer: a power of two, 32 to 1048576 (the challenge sizes are " + challenge_sizes + ")");
  gen.opt("layers", "L").integer(1, 2147483647).required().help("number of layers to write, 1 to " + int32_max);
  gen.opt("out", "DIR").text().required().help("output directory, created (with its parents) when missing");
  gen.opt("seed", "S")
      .text()
      .default_to("0")
      .check([](std::string const& v) {
        return v == "official" ? std::string() : check_seed(v).empty() ? std::string() : "is neither 'official' nor an unsigned 64-bit integer";
      })
      .help("permutation seed, an unsigned 64-bit integer, or 'official' (N = 1024, L <= 120: the official layers)");
  gen.opt("images", "K").integer(1, 2147483647).default_is("no images written")
      .help("number of images to write (needs N a perfect square: the image is sqrt(N) x sqrt(N) pixels)");
  gen.opt("mnist", "IDX").text().default_is("the shipped 10000 digits, tests/data/mnist-10k-images-idx3-ubyte.gz")
      .help("MNIST IDX image file the images are made from (with --images only)");

  auto& bench = p.add("bench", "generates a network and distinct inputs in memory, times the inference, prints "
                               "the summary and one JSON line");
  bench.description(
      "Generates the network (on the device for the pipeline policies, on the host for the engine and the host "
      "backend) and K distinct inputs in memory (digit n mod 10000 shifted by a small offset chosen from n / "
      "10000), runs the inference on the GPU if one is visible (else on the host), prints the summary and one "
      "JSON line, also appended to the file named by $SDNN_BENCH_JSON (checked for writing first).");
  bench.opt("neurons", "N").integer(1, 65536).check(check_challenge_size).required()
      .help("neurons per layer: " + challenge_sizes);
  bench.opt("layers", "L").integer(1, 2147483647).required().help("number of layers, 1 to " + int32_max);
  bench.opt("images", "K").integer(1, 2147483647).default_to("60000")
      .help("number of distinct input images, at most " + std::to_string(data::distinct_input_offsets().size()) +
            " per source digit (" + std::to_string(data::distinct_input_offsets().size() * 10000) +
            " with the shipped digits)");
  bench.opt("policy", "NAME").one_of(policies).default_to(default_policy_name()).help(policy_help);
  bench.opt("seed", "S").text().check(check_seed)
      .default_is("the official layers when N = 1024 and L <= 120, else 2026")
      .help("RadiX-Net permutation seed, an unsigned 64-bit integer");
  bench.opt("reps", "R").integer(0, 1000000).default_to("0")
      .help("timed runs after the warm-up run, the median is reported; 0 = 5 when the warm-up took under a "
            "second, else 1 (GPU only)");
  bench.opt("batch", "B").integer(0).default_to("0")
      .help("rows (images) per device batch of a pipeline policy; 0 = as many as fit in about 70% of the free "
            "device memory");
  bench.opt("mnist", "IDX").text().default_is("the shipped 10000 digits, tests/data/mnist-10k-images-idx3-ubyte.gz")
      .help("MNIST IDX image file the inputs are made from");
  add_weight_options(bench);

  p.epilog(
      "Timing: inference seconds cover the inference of all inputs (inputs on the device -> categories on\n"
      "the host); file reading, network generation and the one-time plan are excluded.\n"
      "Rate = inputs x connections / seconds (edges/s).\n"
      "Exit status: 0 done (and every check matched), 1 a check differs, 2 bad arguments or input.\n"
      "Several ranks: mpirun -np P graph_challenge infer|bench ... splits the inputs over P processes (one\n"
      "GPU each) in a build with MPI (configure with MPI found, or -DSDNN_ENABLE_MPI=ON).");
  return p;
}

// ---------------------------------------------------------------------------------------
// The commands.

// What `infer` and `bench` run, shared by the single process and several ranks: the inputs, and
// how to run the inference of some of their rows (all of them, or one rank's slice).
using layer_wrap = std::function<host_layer_fn(host_layer_fn)>;  // wraps a host layer source (several ranks: hashing)
struct job {
  std::int32_t n = 0, layers_n = 0;
  float bias = 0;
  std::string backend, policy_name;
  std::string json_path;    // bench: $SDNN_BENCH_JSON (checked), else empty
  host_csr inputs;
  host_layer_fn host_layer;  // the network's host layers (null where a run generates them on the device)
  // rows: the inputs to run; wrap: applied to the host layer source; threads: the engine plan's
  // build threads (0: as many as the single process uses).
  std::function<outcome(host_csr const& rows, layer_wrap const& wrap, int threads)> run;
};

host_layer_fn no_wrap(host_layer_fn f) { return f; }

// infer: every check before any work (writer: this process writes --categories and reads --truth),
// then the inputs read.
job prepare_infer(cli::result const& o, machine const& m, bool writer) {
  job j;
  auto const n = j.n = static_cast<std::int32_t>(o.integer("neurons"));
  auto const layers_n = j.layers_n = static_cast<std::int32_t>(o.integer("layers"));
  std::string const backend = j.backend = o.has("backend") ? o.text("backend") : m.gpu ? "cuda" : "host";
  std::string const policy_name = j.policy_name = o.text("policy");
  ops::challenge_engine_options eopt;
  bool const engine = engine_policy(policy_name, eopt);
  if (backend == "cuda" && !m.gpu)
    fail("--backend cuda, but ",
#if defined(__CUDACC__)
         "no CUDA device is visible",
#else
         "this build has no CUDA (configure with a CUDA compiler)",
#endif
         "; use --backend host");
  if (engine && backend != "cuda") fail_usage("infer", "--policy ", policy_name, ": the depth-first engine needs --backend cuda");
  weight_args const wa = weight_options(o, "infer", policy_name, engine, backend == "cuda");
  eopt.device_memory_budget = wa.budget;  // the engine: its plan checks its layout against the budget
  eopt.weights = wa.mode;                 // host or auto: it streams its terms in windows of layers
  // Every path before any work.
  auto const paths = layer_paths(o.text("weights"), n, layers_n);
  std::string const in_path = o.text("inputs");
  cli::check_input_file(in_path, "--inputs");
  if (writer && o.has("truth")) cli::check_input_file(o.text("truth"), "--truth");
  if (writer && o.has("categories")) cli::check_output_file(o.text("categories"), "--categories");

  float const bias = j.bias = data::challenge_bias(n);
  j.inputs = io::read_challenge_images(in_path, n);
  j.host_layer = [paths, n](std::int32_t l) { return io::read_challenge_layer(paths[static_cast<std::size_t>(l)], n); };
  std::int64_t const batch = o.integer("batch");
  j.run = [=, src = j.host_layer](host_csr const& inputs, layer_wrap const& wrap, int threads) {
    auto const read = wrap(with_progress("reading layer", layers_n, src));
    outcome res;
    if (backend == "host") {
      res = run_host(layers_n, bias, read, inputs);
    } else if (engine) {
#if defined(__CUDACC__)
      res = run_engine(layers_n, bias, read, inputs, 1, eopt, threads);
#endif
    } else {
      with_policy(policy_name, [&](auto tag) {
        (void)tag;
#if defined(__CUDACC__)
        using P = decltype(tag);
        res = run_device<P>(layers_n, bias, layer_source{read, {}}, inputs, 1, batch, wa);
#endif
      });
    }
    (void)threads;
    (void)eopt;
    (void)batch;
    (void)wa;
    return res;
  };
  return j;
}

// infer's --categories and --truth (one process, or rank 0): 0, or 1 when --truth differs.
int finish_infer(cli::result const& o, std::vector<std::int32_t> const& categories) {
  if (o.has("categories")) io::write_categories(o.text("categories"), categories);
  if (o.has("truth")) {
    auto truth = io::read_categories(o.text("truth"));
    bool const ok = truth == categories;
    std::printf("truth:             %s (%zu expected, %zu found)\n", ok ? "MATCH" : "MISMATCH", truth.size(),
                categories.size());
    if (!ok) return 1;
  }
  return 0;
}

int cmd_infer(cli::result const& o, machine const& m) {
  job const j = prepare_infer(o, m, true);
  outcome const res = j.run(j.inputs, no_wrap, 0);
  print_summary(j.n, j.layers_n, j.inputs.rows(), res, j.backend, j.policy_name, m);
  return finish_infer(o, res.categories);
}

int cmd_generate(cli::result const& o) {
  auto const n = static_cast<std::int32_t>(o.integer("neurons"));
  auto const layers_n = static_cast<std::int32_t>(o.integer("layers"));
  std::string const seed = o.text("seed"), dir = o.text("out");
  bool const official = seed == "official";
  std::uint64_t s = 0;
  if (!official) cli::parse_uint64(seed, s);
  // Every argument before anything is written.
  if (official && (n != 1024 || layers_n > 120))
    fail_usage("generate", "--seed official needs --neurons 1024 and --layers <= 120 (the published network), got ", n, " x ",
         layers_n);
  if (o.has("mnist") && !o.has("images")) fail_usage("generate", "--mnist is used only with --images K");
  std::int32_t side = 1;
  while (static_cast<std::int64_t>(side + 1) * (side + 1) <= n) ++side;
  if (o.has("images") && side * side != n)
    fail_usage("generate", "--images needs --neurons a perfect square (the image is sqrt(N) x sqrt(N) pixels), got ", n);
  std::string const images_path = dir + "/sparse-images-" + std::to_string(n) + ".tsv";
  cli::check_output_dir(dir, "--out");
  // The images are made (and the digits read) before anything is written, so a bad digit file
  // or an image count the digits cannot give leaves no half-written network behind.
  host_csr images;
  if (o.has("images"))
    images = data::challenge_inputs_from_mnist(io::read_idx_images(mnist_path(o)), n,
                                               static_cast<std::int32_t>(o.integer("images")));

  cli::make_dirs(dir, "--out");
  std::int64_t connections = 0;
  {
    cli::progress progress("writing layer", layers_n);
    for (std::int32_t l = 0; l < layers_n; ++l) {
      auto w = official ? data::official_1024_layer(l) : data::radixnet_layer(n, l, s);
      io::write_challenge_tsv(dir + "/n" + std::to_string(n) + "-l" + std::to_string(l + 1) + ".tsv", w.view());
      connections += w.nnz();
      progress.step(l + 1);
    }
  }
  std::printf("wrote %d layers of %d neurons (%lld connections, %s) to %s\n", layers_n, n,
              static_cast<long long>(connections), official ? "the official layers" : ("seed " + seed).c_str(),
              dir.c_str());
  if (o.has("images")) {
    io::write_challenge_tsv(images_path, images.view());
    std::printf("wrote %d images (%lld nonzeros) to %s\n", images.rows(), static_cast<long long>(images.nnz()),
                images_path.c_str());
  }
  return 0;
}

// bench: every check before any work (writer: this process appends to $SDNN_BENCH_JSON), then
// the inputs made.
job prepare_bench(cli::result const& o, machine const& m, bool writer) {
  job j;
  auto const n = j.n = static_cast<std::int32_t>(o.integer("neurons"));
  auto const layers_n = j.layers_n = static_cast<std::int32_t>(o.integer("layers"));
  auto const images = static_cast<std::int32_t>(o.integer("images"));
  // Without --seed, N = 1024 and L <= 120 run the official layers (on every backend).
  bool const official = n == 1024 && layers_n <= 120 && !o.has("seed");
  std::uint64_t seed = 2026;
  if (o.has("seed")) cli::parse_uint64(o.text("seed"), seed);
  std::string const policy_name = j.policy_name = o.text("policy");
  auto const reps = static_cast<int>(o.integer("reps"));
  ops::challenge_engine_options eopt;
  bool const engine = engine_policy(policy_name, eopt);
  if (engine && !m.gpu) fail("--policy ", policy_name, ": the depth-first engine needs a CUDA device");
  weight_args const wa = weight_options(o, "bench", policy_name, engine, m.gpu);
  eopt.device_memory_budget = wa.budget;  // the engine: its plan checks its layout against the budget
  eopt.weights = wa.mode;                 // host or auto: it streams its terms in windows of layers
  char const* json_path = writer ? std::getenv("SDNN_BENCH_JSON") : nullptr;
  if (json_path && *json_path) cli::check_output_file(json_path, "$SDNN_BENCH_JSON");
  if (json_path) j.json_path = json_path;
  auto const mnist = io::read_idx_images(mnist_path(o));
  // `images` distinct images: digit n mod 10000 shifted by a small offset chosen from
  // n / 10000 (challenge/distinct_inputs.hpp), so no input repeats and no de-duplication is flattered.
  j.inputs = data::distinct_challenge_inputs(mnist, n, images);
  float const bias = j.bias = data::challenge_bias(n);
  j.backend = m.gpu ? "cuda" : "host";
  host_layer_fn const host_layer = [n, seed, official](std::int32_t l) {
    return official ? data::official_1024_layer(l) : data::radixnet_layer(n, l, seed);
  };
  bool const gpu = m.gpu;
  // The pipeline policies generate the layers on the device: no host layers.
  if (!gpu || engine) j.host_layer = host_layer;
  std::int64_t const batch = o.integer("batch");
  j.run = [=](host_csr const& inputs, layer_wrap const& wrap, int threads) {
    outcome res;
    if (!gpu) {
      res = run_host(layers_n, bias, wrap(host_layer), inputs);
    } else if (engine) {
#if defined(__CUDACC__)
      res = run_engine(layers_n, bias, wrap(host_layer), inputs, reps, eopt, threads);
#endif
    } else {
      with_policy(policy_name, [&](auto tag) {
        (void)tag;
#if defined(__CUDACC__)
        using P = decltype(tag);
        // streamed weights (--weight-store host|auto) are packed from host layers: generated on the host
        res = run_device<P>(layers_n, bias,
                            layer_source{wa.mode != pipeline::weight_placement::device
                                             ? with_progress("generating layer", layers_n, host_layer)
                                             : host_layer_fn{},
                                         [&](std::int32_t l, cuda_exec e) {
                                           return official ? data::official_1024_layer_device(l, e)
                                                           : data::radixnet_layer_device(n, l, seed, e);
                                         }},
                            inputs, reps, batch, wa);
#endif
      });
    }
    (void)reps;
    (void)threads;
    (void)eopt;
    (void)batch;
    (void)wa;
    return res;
  };
  return j;
}

// bench's JSON line: printed, and appended to $SDNN_BENCH_JSON when set.
void emit_json(std::string const& line, std::string const& json_path) {
  std::printf("%s\n", line.c_str());
  if (!json_path.empty()) {
    std::ofstream f(json_path, std::ios::app);
    f << line << '\n';
    if (!f) fail("$SDNN_BENCH_JSON: cannot append to '", json_path, "'");
  }
}

int cmd_bench(cli::result const& o, machine const& m) {
  job const j = prepare_bench(o, m, true);
  outcome const res = j.run(j.inputs, no_wrap, 0);
  print_summary(j.n, j.layers_n, j.inputs.rows(), res, j.backend, j.policy_name, m);
  emit_json(json_line(j.n, j.layers_n, j.inputs.rows(), res, j.backend, j.policy_name, m), j.json_path);
  return 0;
}

// The default command: official 1024 x 120 network, 60000 inputs from the shipped MNIST
// digits. The inputs repeat with the period of the distinct digits (10000 shipped), so the
// host reference on the first 10000 inputs determines every category exactly: input i
// (1-based) is a category iff input ((i - 1) mod 10000) + 1 is.
int cmd_default(cli::result const& o, machine const& m) {
  std::int32_t const n = 1024, layers_n = 120, count = 60000;
  auto const mnist = io::read_idx_images(mnist_path(o));
  auto const inputs = data::challenge_inputs_from_mnist(mnist, n, count);
  float const bias = data::challenge_bias(n);
  std::string const backend = m.gpu ? "cuda" : "host";
  // On a GPU the default is the depth-first engine with every structure proof it can make on
  // these weights (ops::challenge_engine_plan; exact: the check below compares categories).
  std::string const pname = m.gpu ? "depth_first" : host_policy_name;
  outcome res;
#if defined(__CUDACC__)
  if (m.gpu)
    res = run_engine(layers_n, bias, [](std::int32_t l) { return data::official_1024_layer(l); }, inputs, 0, {});
#endif
  if (!m.gpu) res = run_host(layers_n, bias, [](std::int32_t l) { return data::official_1024_layer(l); }, inputs);
  print_summary(n, layers_n, count, res, backend, pname, m);

  std::int32_t const distinct = std::min(count, mnist.count);
  std::printf("checking against the host reference (sdnn::reference::challenge_infer) on the %d distinct inputs...\n",
              distinct);
  std::fflush(stdout);
  host_csr sub = data::challenge_inputs_from_mnist(mnist, n, distinct);
  std::vector<host_csr> ws;
  for (std::int32_t l = 0; l < layers_n; ++l) ws.push_back(data::official_1024_layer(l));
  auto t0 = std::chrono::steady_clock::now();
  // reference::challenge_infer, one layer at a time for the progress line.
  host_csr y = std::move(sub);
  {
    cli::progress progress("host reference: layer", layers_n);
    for (std::int32_t l = 0; l < layers_n; ++l) {
      y = reference::challenge_layer(y, ws[static_cast<std::size_t>(l)], bias);
      progress.step(l + 1);
    }
  }
  auto ref_sub = reference::challenge_categories(y);
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

void print_error(std::string const& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s: error: %s\n", program_name, message.c_str());
}

// The single process: today's program (also what one MPI rank runs).
int run_one(int argc, char** argv) {
  try {
    cli::parser const parser = make_parser();
    cli::result const o = parser.parse(argc, argv);
    if (o.help) {
      std::fputs(o.help_text.c_str(), stdout);
      return 0;
    }
    if (o.command == "generate") return cmd_generate(o);
    machine const m = probe();
    if (o.command.empty()) return cmd_default(o, m);
    if (o.command == "infer") return cmd_infer(o, m);
    if (o.command == "bench") return cmd_bench(o, m);
    fail("command '", o.command, "' is declared but not implemented");
  } catch (cli::usage_error const& e) {
    print_error(e.what());
    std::fprintf(stderr, "run '%s%s%s --help' for the options\n", program_name, e.command().empty() ? "" : " ",
                 e.command().c_str());
    return 2;
  } catch (cli::error const& e) {
    print_error(e.what());
    return 2;
  } catch (sdnn::error const& e) {  // from the library: its message without the source location
    print_error(cli::strip_location(e.what()));
    return 2;
  } catch (std::bad_alloc const&) {
    print_error("out of memory (std::bad_alloc): the input or the network is too large for this machine");
    return 2;
  } catch (std::exception const& e) {
    print_error(cli::strip_location(e.what()));
    return 2;
  }
}

#if SDNN_GRAPH_CHALLENGE_MPI
// ---------------------------------------------------------------------------------------
// Several ranks (mpirun -np P graph_challenge infer|bench ..., P > 1): every rank parses the
// same arguments, reads or generates the network and the inputs (weights replicated: each rank
// builds its own plan), the ranks check that they agree, rank 0 splits the inputs into P
// contiguous blocks balanced by nonzeros (dist::nnz_partition) and broadcasts the split, each
// rank runs its block through the single process's path (run_host / run_engine / run_device,
// one GPU per rank) and times it as the single process does, and rank 0 gathers the categories
// (global 1-based ids, ascending) and the times and prints the summary. Every failure is an
// error on every rank and a non-zero exit (sdnn/dist/mpi.hpp: collective_step, run_guarded).
namespace dmpi = sdnn::dist::mpi;

// f(), with a failure turned into the message the single process would print (no source
// location; a usage error points to --help): collective_step passes it to every rank.
template <class F>
void user_step(F&& f) {
  try {
    f();
  } catch (cli::usage_error const& e) {
    throw cli::error(cli::detail::concat(e.what(), " (run '", program_name, e.command().empty() ? "" : " ",
                                         e.command(), " --help' for the options)"));
  } catch (cli::error const&) {
    throw;
  } catch (std::bad_alloc const&) {
    throw cli::error("out of memory (std::bad_alloc): the input or the network is too large for this machine");
  } catch (std::exception const& e) {
    throw cli::error(cli::strip_location(e.what()));
  }
}

std::uint64_t text_hash(std::string const& t) {
  dist::hasher h;
  h.bytes(t.data(), t.size());
  return h.digest();
}

// The body of a run on several ranks; returns the exit status (0, or 1 when --truth differs),
// the same on every rank.
int run_ranks_body(int argc, char** argv, MPI_Comm comm) {
  int const me = dmpi::rank(comm), ranks = dmpi::size(comm);
  // The ranks on this machine: one GPU each (local rank modulo the device count), and a share of
  // the cores for building the engine plan.
  MPI_Comm node;
  SDNN_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &node));
  int const local_rank = dmpi::rank(node), local_ranks = dmpi::size(node);
  SDNN_MPI_CHECK(MPI_Comm_free(&node));

  cli::parser const parser = make_parser();
  cli::result o;
  dmpi::collective_step(comm, "reading the options", [&] {
    user_step([&] {
      o = parser.parse(argc, argv);
      if (!o.help && o.command != "infer" && o.command != "bench")
        fail(o.command.empty() ? std::string("the default command") : "'" + o.command + "'",
             " runs on one process; with several ranks (mpirun -np P) run 'infer' or 'bench'");
    });
  });
  if (o.help) {
    if (me == 0) std::fputs(o.help_text.c_str(), stdout);
    return 0;
  }

  machine m;
  int device = -1, devices = 0;
  dmpi::collective_step(comm, "choosing the GPU", [&] {
    user_step([&] {
#if defined(__CUDACC__)
      int count = 0;
      if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
        device = local_rank % count;
        devices = count;
        SDNN_CUDA_CHECK(cudaSetDevice(device));
      } else {
        cudaGetLastError();
      }
#endif
      m = probe();
    });
  });
  // More ranks than GPUs on a machine: they share GPUs (and their memory and time), which is
  // correct but slower than one rank per GPU; said once per machine.
  if (devices > 0 && local_ranks > devices && local_rank == 0)
    std::fprintf(stderr,
                 "%s: warning: %d ranks share %d GPU%s on this machine (rank r uses GPU r mod %d): the ranks' "
                 "times include waiting for each other; run at most one rank per GPU\n",
                 program_name, local_ranks, devices, devices == 1 ? "" : "s", devices);
  // One GPU per rank: a run on the GPU needs one on every rank (infer --backend host needs none).
  bool const needs_gpu = !(o.command == "infer" && o.has("backend") && o.text("backend") == "host");
  int const has_gpu = m.gpu ? 1 : 0;
  int any_gpu = 0;
  SDNN_MPI_CHECK(MPI_Allreduce(&has_gpu, &any_gpu, 1, MPI_INT, MPI_MAX, comm));
  dmpi::collective_step(comm, "checking the GPUs", [&] {
    if (needs_gpu && any_gpu && !m.gpu)
      fail("this rank sees no CUDA device while other ranks do: run one rank per GPU, each on a machine with one");
  });

  job j;
  dmpi::collective_step(comm, o.command == "infer" ? "reading the inputs" : "making the inputs", [&] {
    user_step([&] { j = o.command == "infer" ? prepare_infer(o, m, me == 0) : prepare_bench(o, m, me == 0); });
  });
  float const cap = 32.f;  // epilogue_capped_relu's
  // What every rank must agree on before the inputs are split: the problem (dist::network_signature's
  // fields but the weights, which are checked once each rank has made them: the engine's plan builds
  // them a few at a time, so the network never sits whole on the host) and what runs it.
  dmpi::check_agreement(comm, dist::signature{}
                                  .add_count("layers", j.layers_n)
                                  .add_count("neurons", j.n)
                                  .add_float("bias", j.bias)
                                  .add_float("cap", cap)
                                  .add_count("inputs", j.inputs.rows())
                                  .add_hash("inputs hash", dist::hash_csr(j.inputs.view()))
                                  .add_hash("backend and policy", text_hash(j.backend + " " + j.policy_name)));

  // Contiguous blocks of inputs balanced by nonzeros (rank 0 decides, every rank receives).
  dist::partition p;
  dmpi::collective_step(comm, "splitting the inputs", [&] {
    if (me == 0) p = dist::nnz_partition(j.inputs.view(), ranks);
  });
  p = dmpi::broadcast_partition(comm, p);
  dist::input_range const mine = p.range(me);

  // The rank's inference, timed as the single process times it (inputs on the device ->
  // categories on the host); each layer the rank makes is hashed on the way (slot l: the
  // engine's plan makes layers on several threads).
  std::vector<std::uint64_t> layer_hash(static_cast<std::size_t>(j.layers_n), 0);
  std::vector<std::int64_t> layer_nnz(static_cast<std::size_t>(j.layers_n), 0);
  layer_wrap const hashing = [&](host_layer_fn f) -> host_layer_fn {
    return [&, f = std::move(f)](std::int32_t l) {
      auto w = f(l);
      layer_hash[static_cast<std::size_t>(l)] = dist::hash_csr(w.view());
      layer_nnz[static_cast<std::size_t>(l)] = w.nnz();
      return w;
    };
  };
  int const threads = static_cast<int>(
      std::max(1u, std::min(16u, std::thread::hardware_concurrency() / static_cast<unsigned>(local_ranks))));
  outcome res;
  std::vector<std::int64_t> ids;
  dmpi::collective_step(comm, "inference", [&] {
    user_step([&] {
      if (mine.empty()) {  // fewer inputs than ranks: nothing to run, but the network is still checked
        if (j.host_layer)
          for (std::int32_t l = 0; l < j.layers_n; ++l) hashing(j.host_layer)(l);
        return;
      }
      res = j.run(dist::slice_rows(j.inputs.view(), mine), hashing, threads);
      ids = dist::to_global_ids(res.categories, mine);
    });
  });
  if (j.host_layer) {  // the layers as each rank made them (the pipelines' device-generated layers: not hashed)
    dist::hasher h;
    std::int64_t nnz = 0;
    for (std::size_t l = 0; l < layer_hash.size(); ++l) {
      h.value(layer_hash[l]);
      nnz += layer_nnz[l];
    }
    dmpi::check_agreement(comm, dist::signature{}.add_count("weight nonzeros", nnz).add_hash("weights hash", h.digest()));
  }

  auto const all = dmpi::gather_categories(comm, ids, &p);
  auto const times = dmpi::gather_times(comm, res.seconds);
  auto const counts = dmpi::gather_counts(comm, mine.size());
  long long const mine_cb[2] = {static_cast<long long>(res.connections), static_cast<long long>(res.batches)};
  long long conn = 0, batches = 0;
  SDNN_MPI_CHECK(MPI_Allreduce(&mine_cb[0], &conn, 1, MPI_LONG_LONG, MPI_MAX, comm));
  SDNN_MPI_CHECK(MPI_Allreduce(&mine_cb[1], &batches, 1, MPI_LONG_LONG, MPI_SUM, comm));

  int status = 0;
  dmpi::collective_step(comm, "reporting", [&] {
    user_step([&] {
      if (me != 0) return;
      // The program's outcome: every category, the slowest rank's seconds (the run takes as long
      // as it), the rate from those.
      outcome g;
      g.categories.reserve(all.size());
      for (auto id : all) {
        if (id > std::numeric_limits<std::int32_t>::max()) fail("category id ", id, " does not fit int32");
        g.categories.push_back(static_cast<std::int32_t>(id));
      }
      g.seconds = *std::max_element(times.begin(), times.end());
      g.connections = conn;
      g.batches = batches;
      if (!res.engine.empty()) g.engine = "rank 0: " + res.engine;
      g.engine_json = res.engine_json;
      print_summary(j.n, j.layers_n, j.inputs.rows(), g, j.backend, j.policy_name, m);
      std::printf("ranks:             %d (inputs in contiguous blocks balanced by nonzeros; inference seconds: "
                  "the slowest rank's)\n",
                  ranks);
      std::fputs(dist::timing_report(times, counts).c_str(), stdout);
      if (o.command == "bench") {
        std::string line = json_line(j.n, j.layers_n, j.inputs.rows(), g, j.backend, j.policy_name, m);
        line.pop_back();  // the closing brace
        line += ",\"ranks\":" + std::to_string(ranks) + ",\"rank_seconds\":[";
        for (std::size_t r = 0; r < times.size(); ++r) {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%s%.6g", r ? "," : "", times[r]);
          line += buf;
        }
        line += "]}";
        emit_json(line, j.json_path);
      } else {
        status = finish_infer(o, g.categories);
      }
      std::fflush(stdout);
    });
  });
  SDNN_MPI_CHECK(MPI_Bcast(&status, 1, MPI_INT, 0, comm));
  return status;
}

// Exit status as the single process's: 0 done, 1 --truth differs, 2 an error (on every rank:
// "graph_challenge: rank R: error: ...").
int run_ranks(int argc, char** argv, MPI_Comm comm) {
  int status = 0;
  int const rc = dmpi::run_guarded(comm, program_name, [&] { status = run_ranks_body(argc, argv, comm); });
  return rc != 0 ? 2 : status;
}
#else
// Launched as one of several ranks (mpirun -np P, P > 1) but built without MPI: every process
// would run the whole problem on its own, so each refuses.
int launched_ranks() {
  for (char const* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"}) {
    char const* s = std::getenv(v);
    if (s && std::atoi(s) > 1) return std::atoi(s);
  }
  return 1;
}
#endif

}  // namespace

int main(int argc, char** argv) {
#if SDNN_GRAPH_CHALLENGE_MPI
  MPI_Init(&argc, &argv);
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  int const rc = ranks > 1 ? run_ranks(argc, argv, MPI_COMM_WORLD) : run_one(argc, argv);
  MPI_Finalize();
  return rc;
#else
  if (int const ranks = launched_ranks(); ranks > 1) {
    print_error(cli::detail::concat("started as one of ", ranks, " MPI ranks, but this build has no MPI; ",
                                    multi_rank_note));
    return 2;
  }
  return run_one(argc, argv);
#endif
}
