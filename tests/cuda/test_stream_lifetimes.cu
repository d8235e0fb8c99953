// No device buffer is freed under a running kernel (docs/foundation.md#the-plan-protocol):
// destroying, re-planning, move-assigning or growing an object that owns device memory waits
// for the work already enqueued on every stream it ran on.
//
// Each test makes the object on stream a, runs it on stream b behind a gate (a kernel that
// returns when the host opens it), then destroys / re-plans / move-assigns / grows it from the
// host while b's work is pending. At once it hands the memory pool's free blocks of the freed
// sizes to new allocations and overwrites them with zeros, again and again for 100 ms: first on
// a third stream c (blocks whose free has already executed: the pool's opportunistic reuse, which
// catches a free enqueued before the wait), then on a (stream-ordered reuse of what a freed,
// which catches a free that never waits). Zeros are a safe poison: read as indices or counts they
// stay in range. Then the gate opens; b's results must be exactly the host reference, and a (the
// stream the object frees on) must not have passed b's pending work while the gate was shut
// (deterministic: before the fix a free that never waits leaves a free to run on). A dedicated
// pool (reuse across streams allowed, nothing released at synchronisation, no inserted
// dependencies) makes the reuse as likely as the driver allows. Where the action itself
// synchronises (sparse_conv2d::plan, the cuDNN destructor), b waits behind a 100 ms spin
// instead of the gate. Every path is run once on a first (kernels loaded: lazy loading must not
// block a launch while the gate is shut). Also: the dense x sparse row-list runs refuse a C
// with fewer rows than A (they wrote past it), and host checks of cuBLAS and row-split limits.
#include "sdnn_conv_fixtures.hpp"
#include "sdnn_gpu_test.cuh"
#include "sdnn_test_util.hpp"

#include <sdnn/sdnn.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

using namespace sdnn;

namespace {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// b's gate: returns when the host sets *open (then *done = 1) or after ns nanoseconds (*done =
// 2); open == nullptr: a plain spin of ns.
__global__ void hold_kernel(int const volatile* open, int volatile* done, unsigned long long ns) {
  unsigned long long const t0 = global_ns();
  for (;;) {
    if (open && *open) {
      *done = 1;
      return;
    }
    if (global_ns() - t0 >= ns) {
      if (done) *done = 2;
      return;
    }
    __nanosleep(20000);
  }
}

struct poisoned_block {
  unsigned* p;
  unsigned long long words;
};
constexpr int max_poisoned = 512;

// Writes `pattern` over every listed block, again and again, for ns nanoseconds.
__global__ void poison_kernel(poisoned_block const* table, int n, unsigned pattern, unsigned long long ns) {
  __shared__ poisoned_block t[max_poisoned];
  for (int i = threadIdx.x; i < n; i += blockDim.x) t[i] = table[i];
  __syncthreads();
  unsigned long long const t0 = global_ns();
  unsigned long long const first = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
  do {
    for (int e = 0; e < n; ++e) {
      unsigned volatile* p = t[e].p;
      for (unsigned long long i = first; i < t[e].words; i += stride) p[i] = pattern;
    }
  } while (global_ns() - t0 < ns);
}

constexpr unsigned long long ms = 1000000ull;

// Streams a, b, c, the gate, and a dedicated memory pool set as the device's current pool for
// the test (the previous one is restored at the end).
struct lifetimes {
  cudaStream_t a = nullptr, b = nullptr, c = nullptr;
  int* flags = nullptr;               // pinned, mapped: [0] open, [1] how the gate returned
  poisoned_block* tables = nullptr;   // pinned, mapped: one table for c, one for a
  cudaMemPool_t pool = nullptr, old_pool = nullptr;
  int dev = 0;

  lifetimes() {
    SDNN_CUDA_CHECK(cudaGetDevice(&dev));
    for (auto* s : {&a, &b, &c}) SDNN_CUDA_CHECK(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
    SDNN_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&flags), 2 * sizeof(int), cudaHostAllocMapped));
    SDNN_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&tables), 2 * max_poisoned * sizeof(poisoned_block),
                                  cudaHostAllocMapped));
    flags[0] = flags[1] = 0;
    SDNN_CUDA_CHECK(cudaDeviceGetMemPool(&old_pool, dev));
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    SDNN_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
    std::uint64_t keep = UINT64_MAX;
    int yes = 1, no = 0;
    SDNN_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    SDNN_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &yes));
    SDNN_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &no));
    SDNN_CUDA_CHECK(cudaDeviceSetMemPool(dev, pool));
    // load both kernels now (lazy loading while the gate is shut could wait for the gate)
    hold_kernel<<<1, 32, 0, a>>>(nullptr, nullptr, 0);
    poison_kernel<<<1, 32, 0, a>>>(tables, 0, 0u, 0);
    SDNN_CUDA_CHECK_LAUNCH();
    SDNN_CUDA_CHECK(cudaStreamSynchronize(a));
  }
  ~lifetimes() {
    if (flags) reinterpret_cast<int volatile*>(flags)[0] = 1;
    cudaDeviceSynchronize();
    if (old_pool) cudaDeviceSetMemPool(dev, old_pool);
    if (pool) cudaMemPoolDestroy(pool);
    for (auto s : {a, b, c})
      if (s) cudaStreamDestroy(s);
    if (tables) cudaFreeHost(tables);
    if (flags) cudaFreeHost(flags);
  }
  lifetimes(lifetimes const&) = delete;
  lifetimes& operator=(lifetimes const&) = delete;

  cuda_exec ea() const { return cuda_exec{a}; }
  cuda_exec eb() const { return cuda_exec{b}; }

  // b waits until open_gate() (at most 5 s, so a broken test cannot hang).
  void shut_gate() {
    flags[0] = flags[1] = 0;
    hold_kernel<<<1, 32, 0, b>>>(flags, flags + 1, 5000 * ms);
    SDNN_CUDA_CHECK_LAUNCH();
  }
  void open_gate() { reinterpret_cast<int volatile*>(flags)[0] = 1; }
  // After a synchronisation: the gate was opened by the host, not by its timeout.
  bool gate_opened_by_host() const { return reinterpret_cast<int volatile*>(flags)[1] == 1; }
  void spin_b(unsigned long long ns) {
    hold_kernel<<<1, 32, 0, b>>>(nullptr, nullptr, ns);
    SDNN_CUDA_CHECK_LAUNCH();
  }

  // An event on a, recorded now.
  cudaEvent_t mark_a() const {
    cudaEvent_t e = nullptr;
    SDNN_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    SDNN_CUDA_CHECK(cudaEventRecord(e, a));
    return e;
  }
  // Whether a is still held behind b's gated work (given a moment to run what it can).
  static bool still_pending(cudaEvent_t e) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    cudaError_t const st = cudaEventQuery(e);
    if (st != cudaErrorNotReady) SDNN_CUDA_CHECK(st);
    if (cudaPeekAtLastError() == cudaErrorNotReady) cudaGetLastError();  // "not ready" is no error
    cudaEventDestroy(e);
    return st == cudaErrorNotReady;
  }

  // Overwrites with zeros, for `ns`, the free blocks of these sizes that c (completed frees) and
  // then a (stream order) are given at once; enqueued only, never blocks the host.
  void poison_freed(std::vector<std::size_t> sizes, unsigned long long ns = 100 * ms) {
    std::sort(sizes.begin(), sizes.end(), std::greater<>());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a's frees that do not wait have run
    poison_on(c, tables, sizes, ns);
    poison_on(a, tables + max_poisoned, sizes, ns);
  }

  // The end of a gated test, called once the object is released on a (b still shut): poisons
  // the freed sizes, opens the gate and waits for the device; b's gate must have been opened
  // by the host and the release on a must have waited for b.
  void poison_open_and_check(std::vector<std::size_t> sizes) {
    auto const freed = mark_a();
    poison_freed(std::move(sizes));
    bool const a_waited = still_pending(freed);
    open_gate();
    SDNN_CUDA_CHECK(cudaDeviceSynchronize());
    REQUIRE(gate_opened_by_host());
    CHECK(a_waited);  // the release on a waited for b
  }

 private:
  std::uint64_t reserved() const {
    std::uint64_t r = 0;
    SDNN_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &r));
    return r;
  }
  // Up to 32 blocks of each size, stopping at a size when the pool has to grow.
  void poison_on(cudaStream_t s, poisoned_block* table, std::vector<std::size_t> const& sizes,
                 unsigned long long ns) {
    int n = 0;
    for (std::size_t bytes : sizes) {
      if (bytes < sizeof(unsigned)) continue;
      for (int k = 0; k < 32 && n < max_poisoned; ++k) {
        std::uint64_t const before = reserved();
        void* p = nullptr;
        SDNN_CUDA_CHECK(cudaMallocAsync(&p, bytes, s));
        table[n++] = {static_cast<unsigned*>(p), bytes / sizeof(unsigned)};
        if (reserved() > before) break;
      }
    }
    poison_kernel<<<8, 256, 0, s>>>(table, n, 0u, ns);
    SDNN_CUDA_CHECK_LAUNCH();
    for (int i = 0; i < n; ++i) SDNN_CUDA_CHECK(cudaFreeAsync(table[i].p, s));
  }
};

// Small integers: every order of summation gives the same bits, so results compare with ==.
csr_matrix<float, std::int32_t> random_w(std::int64_t k, std::int64_t n, double density, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::int32_t> rp{0}, ci;
  std::vector<float> v;
  for (std::int64_t i = 0; i < k; ++i) {
    for (std::int64_t j = 0; j < n; ++j)
      if (u(g) < density) {
        ci.push_back(static_cast<std::int32_t>(j));
        v.push_back(static_cast<float>(static_cast<int>(g() % 4) + 1) * (g() % 2 ? 1.f : -1.f));
      }
    rp.push_back(static_cast<std::int32_t>(ci.size()));
  }
  return make_csr<float, std::int32_t>(static_cast<std::int32_t>(k), static_cast<std::int32_t>(n), rp, ci, v);
}
// Rows of small non-negative integers; about one row in five is all zero.
dense_matrix<float> random_x(std::int64_t m, std::int64_t k, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(0, 1);
  dense_matrix<float> x(m, k);
  for (std::int64_t i = 0; i < m; ++i) {
    if (u(g) < 0.2) continue;
    for (std::int64_t j = 0; j < k; ++j) x(i, j) = u(g) < 0.3 ? static_cast<float>(g() % 3 + 1) : 0.f;
  }
  return x;
}
csr_matrix<float, std::int32_t> clone(csr_matrix<float, std::int32_t> const& w) {
  csr_matrix<float, std::int32_t> c(w.rows(), w.cols(), w.nnz());
  c.row_ptr() = w.row_ptr().clone();
  c.col_idx() = w.col_idx().clone();
  c.values() = w.values().clone();
  return c;
}
std::vector<float> column_bias(std::int64_t n) {
  std::vector<float> b(static_cast<std::size_t>(n));
  for (std::int64_t j = 0; j < n; ++j) b[static_cast<std::size_t>(j)] = static_cast<float>(j % 5 + 1);
  return b;
}
// The exact host result of a layer.
dense_matrix<float> host_forward(layer<float>& l, dense_matrix<float> const& x) {
  dense_matrix<float> y(x.rows(), l.out_features(x.cols()));
  l.forward(host_exec{}, x.view(), y.view());
  return y;
}
template <class T>
std::size_t count_different(std::vector<T> const& got, std::vector<T> const& want) {
  std::size_t bad = got.size() == want.size() ? 0 : 1 + got.size();
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) bad += !(got[i] == want[i]);
  return bad;
}
std::size_t count_different(dense_matrix<float> const& got, dense_matrix<float> const& want) {
  return count_different(std::vector<float>(got.data(), got.data() + got.size()),
                         std::vector<float>(want.data(), want.data() + want.size()));
}
std::size_t nonzeros(dense_matrix<float> const& y) {
  return static_cast<std::size_t>(std::count_if(y.data(), y.data() + y.size(), [](float v) { return v != 0.f; }));
}
dense_view<float const> cview(dense_matrix<float, device_space> const& m) { return m.view(); }

using layer_t = layers::sparse_linear<float>;

}  // namespace

TEST_CASE("sparse_linear destroyed right after a forward on another stream: the bias outlives the run",
          "[cuda][lifetimes]") {
  SDNN_REQUIRE_DEVICE();
  lifetimes t;
  std::int64_t const m = 512, k = 384, n = 512;
  auto const w = random_w(k, n, 0.04, 1u);
  auto const bias = column_bias(n);
  basic_epilogue<float> epi;  // bias on every output (also on zero products): every output reads it
  epi.bias = bias.data();
  epi.bias_count = static_cast<std::int64_t>(bias.size());
  auto layer = std::make_unique<layer_t>(clone(w), epi);
  auto const x = random_x(m, k, 2u);
  auto const ref = host_forward(*layer, x);
  auto const dx = to_device(x, t.ea());
  dense_matrix<float, device_space> ya(m, n, t.ea()), yb(m, n, t.ea());
  layer->plan(m, k, t.ea());
  layer->forward(t.ea(), cview(dx), ya.view());  // every kernel loaded, and the result right
  REQUIRE(count_different(to_host(ya, t.ea()), ref) == 0);
  std::size_t const ws = layer->device_plan().workspace_bytes();

  t.shut_gate();
  layer->forward(t.eb(), cview(dx), yb.view());  // reads the device bias and the plan on b
  layer.reset();                                  // frees on a, from the host, b still shut
  t.poison_open_and_check({static_cast<std::size_t>(n) * sizeof(float), ws, static_cast<std::size_t>(w.nnz()) * 4,
                           static_cast<std::size_t>(n + 1) * 4});
  REQUIRE(count_different(to_host(yb, t.eb()), ref) == 0);
}

TEST_CASE("sparse_linear: a larger batch on another stream grows the workspace after the run that used it",
          "[cuda][lifetimes]") {
  SDNN_REQUIRE_DEVICE();
  lifetimes t;
  std::int64_t const m = 1024, k = 256, n = 384;
  auto const w = random_w(k, n, 0.05, 3u);
  // zero-preserving: the default policy lists the live rows in its own workspace
  layer_t layer(clone(w), epilogue_capped_relu<float>(-1.f, 32.f));
  auto const x1 = random_x(m, k, 4u), x2 = random_x(2 * m, k, 5u);
  auto const ref1 = host_forward(layer, x1), ref2 = host_forward(layer, x2);
  REQUIRE(nonzeros(ref1) > 1000);
  auto const dx1 = to_device(x1, t.ea()), dx2 = to_device(x2, t.ea());
  dense_matrix<float, device_space> y1(m, n, t.ea()), y2(2 * m, n, t.ea());
  layer.plan(m, k, t.ea());
  REQUIRE(layer.device_plan().workspace_bytes() > 0);
  layer.forward(t.ea(), cview(dx1), y1.view());
  REQUIRE(count_different(to_host(y1, t.ea()), ref1) == 0);
  SDNN_CUDA_CHECK(cudaMemsetAsync(y1.data(), 0, y1.size() * sizeof(float), t.a));
  std::size_t const old_ws = layer.device_plan().workspace_bytes();
  SDNN_CUDA_CHECK(cudaStreamSynchronize(t.a));

  t.shut_gate();
  layer.forward(t.eb(), cview(dx1), y1.view());  // uses the workspace sized for m rows
  layer.forward(t.eb(), cview(dx2), y2.view());  // 2m rows: the plan grows its workspace first
  REQUIRE(layer.device_plan().max_rows() >= 2 * m);
  t.poison_open_and_check({old_ws});
  REQUIRE(count_different(to_host(y1, t.eb()), ref1) == 0);
  REQUIRE(count_different(to_host(y2, t.eb()), ref2) == 0);
}

TEST_CASE("dense_sparse_plan move-assigned while a run on another stream still reads it", "[cuda][lifetimes]") {
  SDNN_REQUIRE_DEVICE();
  lifetimes t;
  using plan_t = ops::dense_sparse_plan<policy::skip_empty_rows<policy::csc_tiled<16>>, float>;
  std::int64_t const m = 1024, k = 512, n = 512;
  auto const w1 = random_w(k, n, 0.05, 6u);
  auto const w2 = random_w(k, n, 0.02, 7u);
  auto const epi = epilogue_capped_relu<float>(-1.f, 32.f);
  auto const x = random_x(m, k, 8u);
  dense_matrix<float> ref(m, n);
  ops::spmm_dense_sparse(host_exec{}, policy::csc_gather<>{}, x.view(), w1.view(), ref.view(), epi);
  REQUIRE(nonzeros(ref) > 1000);
  auto const dx = to_device(x, t.ea());
  dense_matrix<float, device_space> ya(m, n, t.ea()), yb(m, n, t.ea());
  plan_t p(w1, t.ea(), plan_options{m, true});
  plan_t q(w2, t.ea(), plan_options{m, true});
  p.run(t.ea(), cview(dx), ya.view(), epi);
  REQUIRE(count_different(to_host(ya, t.ea()), ref) == 0);
  std::size_t const ws = p.workspace_bytes();

  t.shut_gate();
  p.run(t.eb(), cview(dx), yb.view(), epi);  // reads W^T, the tiles and the workspace on b
  p = std::move(q);                          // the old buffers are released on a
  t.poison_open_and_check({ws, static_cast<std::size_t>(w1.nnz()) * 4, static_cast<std::size_t>(n + 1) * 4,
                           static_cast<std::size_t>(w1.nnz()) * 2});
  REQUIRE(count_different(to_host(yb, t.eb()), ref) == 0);
}

TEST_CASE("sequential re-planned or destroyed while a forward on another stream uses its ping-pong buffers",
          "[cuda][lifetimes]") {
  SDNN_REQUIRE_DEVICE();
  lifetimes t;
  std::int64_t const m = 512, f0 = 256, f1 = 512, f2 = 512, f3 = 128;
  auto const epi = epilogue_relu<float>();
  std::vector<std::shared_ptr<layer<float>>> layers{
      std::make_shared<layer_t>(random_w(f0, f1, 0.05, 9u), epi),
      std::make_shared<layer_t>(random_w(f1, f2, 0.03, 10u), epi),
      std::make_shared<layer_t>(random_w(f2, f3, 0.05, 11u), epi)};
  auto seq = std::make_unique<sequential<float>>(layers);  // the test keeps the layers alive
  auto const x = random_x(m, f0, 12u);
  auto const ref = host_forward(*seq, x);
  REQUIRE(nonzeros(ref) > 1000);
  auto const dx = to_device(x, t.ea());
  dense_matrix<float, device_space> ya(m, f3, t.ea()), yb(m, f3, t.ea());
  seq->plan(m, f0, t.ea());
  seq->forward(t.ea(), cview(dx), ya.view());
  REQUIRE(count_different(to_host(ya, t.ea()), ref) == 0);
  std::size_t const pingpong = static_cast<std::size_t>(m * std::max(f1, f2)) * sizeof(float);

  bool const replan = GENERATE(true, false);
  INFO((replan ? "re-planned" : "destroyed"));
  t.shut_gate();
  seq->forward(t.eb(), cview(dx), yb.view());
  if (replan)
    seq->plan(m, f0, t.ea());  // same batch: the layers keep their plans, ping and pong are new
  else
    seq.reset();
  t.poison_open_and_check({pingpong});
  REQUIRE(count_different(to_host(yb, t.eb()), ref) == 0);
}

TEST_CASE("direct_conv_plan move-assigned, sparse_conv2d re-planned, after a run on another stream",
          "[cuda][lifetimes][conv]") {
  SDNN_REQUIRE_DEVICE();
  lifetimes t;
  int const N = 8;
  auto const s = conv::conv_shape::conv2d(16, 24, 24, 32, 3, 3, 1, 1);
  auto const wd1 = sdnn_test::small_ints(static_cast<std::size_t>(s.weight_count()), -2, 2, 20u);
  auto const wd2 = sdnn_test::small_ints(static_cast<std::size_t>(s.weight_count()), -2, 2, 21u);
  auto const p1 = conv::prune_uniform(wd1.data(), s.K, s.filter_size(), 0.7);
  auto const p2 = conv::prune_uniform(wd2.data(), s.K, s.filter_size(), 0.5);
  std::vector<float> bias(static_cast<std::size_t>(s.K), 1.0f);
  auto const in = sdnn_test::small_ints(static_cast<std::size_t>(N * s.in_features()), 0, 3, 22u);
  auto const ref64 = conv::conv_reference(s, N, in.data(), p1.pruned.data(), bias.data(), true);
  std::vector<float> ref(ref64.begin(), ref64.end());
  auto const din = sdnn_test::upload(in, t.ea());
  auto const dbias = sdnn_test::upload(bias, t.ea());
  std::size_t const out_n = static_cast<std::size_t>(N * s.out_features());
  device_buffer<float> ya(out_n, t.ea()), yb(out_n, t.ea());
  auto const w1 = conv::make_conv_weights<float>(s, p1);
  // weight sizes (the tiled entries hold one 8-byte entry per stored weight)
  std::size_t const entries = static_cast<std::size_t>(p1.K) * p1.nnz_per_channel * 8;

  SECTION("direct_conv_plan: the defaulted move-assignment releases the old weights after b's run") {
    auto const cands = conv::direct_conv_candidates(s, sizeof(float), N);
    auto const it = std::find_if(cands.begin(), cands.end(), [&](auto const& c) {
      return conv::direct_conv_plan<float>::can_implement(s, c).ok();
    });
    REQUIRE(it != cands.end());
    auto const cfg = *it;
    conv::direct_conv_plan<float> p(w1, cfg, t.ea());
    conv::direct_conv_plan<float> q(conv::make_conv_weights<float>(s, p2), cfg, t.ea());
    p.run(t.ea(), N, din.data(), dbias.data(), true, ya.data());
    REQUIRE(count_different(sdnn_test::to_vector(ya, t.a), ref) == 0);

    t.shut_gate();
    p.run(t.eb(), N, din.data(), dbias.data(), true, yb.data());
    p = std::move(q);
    t.poison_open_and_check(
        {entries, static_cast<std::size_t>(s.K + 1) * 4, static_cast<std::size_t>(4 * s.K + 1) * 4});
    REQUIRE(count_different(sdnn_test::to_vector(yb, t.b), ref) == 0);
  }
  SECTION("sparse_conv2d: plan() again (it synchronises a) after a forward on b") {
    layers::sparse_conv2d<float> layer(w1, bias);
    std::int64_t const fi = s.in_features(), fo = s.out_features();
    layer.plan(N, fi, t.ea());
    layer.forward(t.ea(), dense_view<float const>{N, fi, fi, din.data()}, dense_view<float>{N, fo, fo, ya.data()});
    REQUIRE(count_different(sdnn_test::to_vector(ya, t.a), ref) == 0);

    t.spin_b(100 * ms);  // not the gate: plan() synchronises a, which waits for b
    layer.forward(t.eb(), dense_view<float const>{N, fi, fi, din.data()}, dense_view<float>{N, fo, fo, yb.data()});
    layer.plan(N, fi, t.ea());  // tunes again: the old plan is destroyed or move-assigned
    t.poison_freed({entries, static_cast<std::size_t>(s.K) * 4}, 150 * ms);
    SDNN_CUDA_CHECK(cudaDeviceSynchronize());
    REQUIRE(count_different(sdnn_test::to_vector(yb, t.b), ref) == 0);
  }
}

#if defined(SDNN_HAS_CUDNN)
TEST_CASE("cudnn_conv2d destroyed right after a forward on another stream", "[cuda][lifetimes][cudnn]") {
  SDNN_REQUIRE_DEVICE();
  lifetimes t;
  int const N = 8;
  auto const s = conv::conv_shape::conv2d(8, 20, 20, 16, 3, 3, 1, 1);
  auto const wd = sdnn_test::small_ints(static_cast<std::size_t>(s.weight_count()), -2, 2, 30u);
  std::vector<float> bias(static_cast<std::size_t>(s.K), 0.5f);
  auto const in = sdnn_test::small_ints(static_cast<std::size_t>(N * s.in_features()), 0, 3, 31u);
  auto const ref = conv::conv_reference(s, N, in.data(), wd.data(), bias.data(), true);
  double refmax = 1;
  for (double v : ref) refmax = std::max(refmax, std::fabs(v));
  auto const din = sdnn_test::upload(in, t.ea());
  std::int64_t const fi = s.in_features(), fo = s.out_features();
  std::size_t const out_n = static_cast<std::size_t>(N * fo);
  device_buffer<float> ya(out_n, t.ea()), yb(out_n, t.ea());
  auto layer = std::make_unique<layers::cudnn_conv2d<float>>(s, wd, bias, true);
  layer->plan(N, fi, t.ea());
  auto close = [&](std::vector<float> const& y) {
    double worst = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::fabs(double(y[i]) - ref[i]) / refmax);
    return worst <= 1e-5;  // cuDNN may use Winograd or FFT: close, not exact
  };
  layer->forward(t.ea(), dense_view<float const>{N, fi, fi, din.data()}, dense_view<float>{N, fo, fo, ya.data()});
  REQUIRE(close(sdnn_test::to_vector(ya, t.a)));

  t.spin_b(100 * ms);  // not the gate: cudnnDestroy may synchronise the device
  layer->forward(t.eb(), dense_view<float const>{N, fi, fi, din.data()}, dense_view<float>{N, fo, fo, yb.data()});
  layer.reset();
  t.poison_freed({static_cast<std::size_t>(s.weight_count()) * 4, static_cast<std::size_t>(s.K) * 4}, 150 * ms);
  SDNN_CUDA_CHECK(cudaDeviceSynchronize());
  REQUIRE(close(sdnn_test::to_vector(yb, t.b)));
}
#endif

TEST_CASE("cusparse_spmm_plan destroyed right after a run on another stream", "[cuda][lifetimes][cusparse]") {
  SDNN_REQUIRE_DEVICE();
  lifetimes t;
  std::int64_t const m = 512, k = 512, n = 256;
  auto const a = random_w(m, k, 0.05, 40u);
  auto const bh = random_x(k, n, 41u);
  dense_matrix<float> ref(m, n);
  reference::spmm(a.view(), dense_view<float const>(bh.view()), ref.view(), epilogue_none<float>());
  REQUIRE(nonzeros(ref) > 1000);
  auto const da = to_device(a, t.ea());
  auto const db = to_device(bh, t.ea());
  dense_matrix<float, device_space> ca(m, n, t.ea()), cb(m, n, t.ea());
  auto p = std::make_unique<vendor::cusparse_spmm_plan<float, std::int32_t>>(
      da.view(), cview(db), ca.view(), policy::cusparse_alg::default_alg, t.ea());
  p->run(cview(db), ca.view(), epilogue_none<float>(), t.ea());
  REQUIRE(count_different(to_host(ca, t.ea()), ref) == 0);
  REQUIRE(p->buffer_bytes() > 0);
  std::size_t const buf = p->buffer_bytes();

  t.shut_gate();
  p->run(cview(db), cb.view(), epilogue_none<float>(), t.eb());  // cuSPARSE's buffer, on b
  p.reset();
  t.poison_open_and_check({buf});
  REQUIRE(count_different(to_host(cb, t.eb()), ref) == 0);
}

TEST_CASE("dense x sparse row-list runs refuse a C with fewer rows than A: nothing is written past C",
          "[cuda][lifetimes][bounds]") {
  SDNN_REQUIRE_DEVICE();
  cuda_exec e;
  // W 4 x 4 (dense), A 64 x 4, C the first 8 rows of a 64-row allocation whose rows 8..63 guard
  std::vector<std::int32_t> rp{0, 4, 8, 12, 16}, ci{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
  std::vector<float> v(16, 1.f);
  auto const w = make_csr<float, std::int32_t>(4, 4, rp, ci, v);
  dense_matrix<float> x(64, 4);
  for (std::int64_t i = 0; i < 64; ++i)
    for (std::int64_t j = 0; j < 4; ++j) x(i, j) = 1.f;
  auto const dx = to_device(x, e);
  float const sentinel = 12345.f;
  std::vector<float> guard(64 * 4, sentinel);
  auto dc = sdnn_test::upload(guard, e);
  dense_view<float> c8{8, 4, 4, dc.data()};
  std::vector<std::int32_t> all(64);
  for (int i = 0; i < 64; ++i) all[static_cast<std::size_t>(i)] = i;
  auto const dlist = sdnn_test::upload(all, e);
  auto const epi = epilogue_none<float>();

  ops::dense_sparse_plan<policy::csc_tiled<16, 256>, float> p(w, e);
  REQUIRE(p.tiles_ok());  // the footprint-tiled kernel, which never checked C
  CHECK_THROWS_AS(p.run_rows(e, cview(dx), c8, epi, ops::listed_rows{nullptr, nullptr, 64}, nullptr),
                  dimension_mismatch);
  CHECK_THROWS_AS(p.run_rows(e, cview(dx), c8, epi, ops::listed_rows{dlist.data(), nullptr, 64}, nullptr),
                  dimension_mismatch);
  layer_t layer(clone(w), epi);
  layer.plan(64, 4, e);
  CHECK_THROWS_AS(layer.forward_rows(e, cview(dx), c8, ops::listed_rows{nullptr, nullptr, 64}, nullptr), error);
  csc_tiles_host<float> th;
  REQUIRE(build_csc_tiles(transpose(w).view(), 256, 1024, th));
  auto up = [&](auto const& vec) { return to_device(vec.data(), vec.size(), e); };
  auto fp_ptr = up(th.fp_ptr), fp = up(th.fp), col_ptr = up(th.col_ptr), cols = up(th.cols), nnz_ptr = up(th.nnz_ptr);
  auto lidx = up(th.lidx);
  auto vals = up(th.vals);
  csc_tiles_view<float> tv{th.n,          th.k,      th.tiles,       th.max_footprint, fp_ptr.data(), fp.data(),
                           col_ptr.data(), cols.data(), nnz_ptr.data(), lidx.data(),      vals.data()};
  auto kernel_direct = [&] {
    kernels::tiled_csc_spmm<16, 256>(cview(dx), tv, c8, epi, static_cast<std::int32_t const*>(nullptr),
                                     static_cast<std::int32_t const*>(nullptr), 64, static_cast<int*>(nullptr), e);
  };
  CHECK_THROWS_AS(kernel_direct(), error);
  SDNN_CUDA_CHECK(cudaDeviceSynchronize());
  auto const after = sdnn_test::to_vector(dc);
  std::size_t touched = 0;
  for (std::size_t i = 8 * 4; i < after.size(); ++i) touched += after[i] != sentinel;
  REQUIRE(touched == 0);
  // C with as many rows as A: the run is allowed and right (every output is 4)
  dense_view<float> c64{64, 4, 4, dc.data()};
  p.run_rows(e, cview(dx), c64, epi, ops::listed_rows{nullptr, nullptr, 64}, nullptr);
  auto const full = sdnn_test::to_vector(dc);
  REQUIRE(std::count(full.begin(), full.end(), 4.f) == 64 * 4);
}

TEST_CASE("host limits: cuBLAS int sizes, the row-split grid", "[cuda][lifetimes][bounds]") {
  // No device needed: both refuse before touching it.
  std::int64_t const big = std::int64_t{1} << 31;
  dense_view<float const> a{1, big, big, nullptr}, b{big, 1, 1, nullptr};
  dense_view<float> c{1, 1, 1, nullptr};
  auto const why =
      sdnn_test::error_text([&] { vendor::cublas_gemm(cublasHandle_t{}, a, b, c, epilogue_none<float>(), nullptr); });
  REQUIRE(sdnn_test::has(why, "int sizes"));
  // rows on grid x, column slabs on grid y: at most 65535 slabs of 128 columns (float, U = 1)
  std::int64_t const n = 65535LL * 128 + 1;
  csr_view<float, std::int32_t> w{4, 4, 0, nullptr, nullptr, nullptr};
  dense_view<float const> bb{4, n, n, nullptr};
  dense_view<float> cc{4, n, n, nullptr};
  auto const st = ops::csr_spmm_plan<policy::csr_row_split<1, 4, true>, float, std::int32_t>::can_implement(w, bb, cc);
  REQUIRE_FALSE(st.ok());
  REQUIRE(sdnn_test::has(st.why(), "65535"));
  REQUIRE(ops::csr_spmm_plan<policy::csr_row_split<1, 4, false>, float, std::int32_t>::can_implement(w, bb, cc).ok());
}
