// sdnn/challenge/engine.cuh - the plan of the depth-first Graph Challenge engine (what it computes
// and proves: challenge/engine.hpp and docs/challenge.md#the-depth-first-engine; how:
// challenge/kernel/engine.cuh).
//
// Plan protocol (core/plan.hpp): can_implement (ops::challenge_engine_can_implement), the
// constructor proves and uploads (synchronises exec.stream once, at the end, so the host
// arrays may go), run() enqueues the engine and reads the categories back: it synchronises
// exec.stream (the categories are a host result, as in pipeline::challenge_network::run).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <memory_resource>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/formats/convert.hpp"
#include "sdnn/challenge/kernel/engine.cuh"
#include "sdnn/challenge/engine.hpp"
#include "sdnn/challenge/engine_layout_build.hpp"

namespace sdnn::ops {

// Page-locked host memory (cudaMallocHost / cudaFreeHost) as a std::pmr resource: a streamed
// plan (weights = host) builds its term arrays in it, and the copy stream reads them there.
class challenge_engine_pinned_resource final : public std::pmr::memory_resource {
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    SDNN_EXPECTS(alignment <= 4096, "challenge engine: pinned memory aligned to ", alignment, " bytes");  // pages
    void* p = nullptr;
    SDNN_CUDA_CHECK(cudaMallocHost(&p, bytes > 0 ? bytes : 1));
    return p;
  }
  void do_deallocate(void* p, std::size_t, std::size_t) override {
    sdnn::detail::cuda_check_noexcept(cudaFreeHost(p), "cudaFreeHost");
  }
  bool do_is_equal(std::pmr::memory_resource const& other) const noexcept override { return this == &other; }
};
// The one instance, never destroyed (arrays freed during static destruction still find it).
inline std::pmr::memory_resource* challenge_engine_pinned_memory() {
  static auto* const r = new challenge_engine_pinned_resource();
  return r;
}

class challenge_engine_plan {
 public:
  // layers: host CSR (row = input neuron, col = output neuron), all N x N; bias: the
  // challenge's scalar bias. Proves the structure, builds each layer's classes and uploads.
  challenge_engine_plan(std::vector<csr_matrix<float, std::int32_t>> const& layers, float bias, cuda_exec exec,
                        challenge_engine_options opt = {})
      : opt_(opt), bias_(bias), runs_(exec) {
    SDNN_EXPECTS(!layers.empty(), "challenge engine: needs at least one layer");
    upload(build_challenge_engine_layout(
               static_cast<std::int32_t>(layers.size()),
               [&](std::int32_t l) { return prepare_engine_layer(layers[l], l, bias_, opt_); }, opt_, 1,
               terms_memory()),
           runs_.owned(exec));  // the plan's buffers wait for every stream it ran on when released
  }

  // The streaming form, for networks too large to hold on the host at once (65536 x 1920 is
  // about 32 GB of CSR): make(l) returns layer l (N x N host CSR) and is called once per layer,
  // from `threads` threads at a time (layers l .. l + threads - 1 together, so make must be
  // safe to call concurrently when threads > 1); each layer is dropped once its classes are
  // built. Same proofs, layout and results as the vector form.
  using layer_source = std::function<csr_matrix<float, std::int32_t>(std::int32_t)>;
  challenge_engine_plan(std::int32_t layers, layer_source const& make, float bias, cuda_exec exec,
                        challenge_engine_options opt = {}, int threads = 1)
      : opt_(opt), bias_(bias), runs_(exec) {
    upload(build_challenge_engine_layout(
               layers, [&](std::int32_t l) { return prepare_engine_layer(make(l), l, bias_, opt_); }, opt_, threads,
               terms_memory()),
           runs_.owned(exec));
  }

 private:
  // Where the build puts the terms: weights = host streams them, known before the build, so they
  // are built in pinned memory and kept there (plan_stream); else pageable memory.
  std::pmr::memory_resource* terms_memory() const {
    return opt_.weights == weight_placement::host ? challenge_engine_pinned_memory() : std::pmr::get_default_resource();
  }

  // Takes the layout's host arrays and metadata, chooses threads per row and where the team
  // buffers live, and uploads (synchronising exec.stream once, at the end).
  void upload(challenge_engine_layout lay, cuda_exec exec) {
    n_ = lay.n;
    connections_ = lay.connections;
    max_distinct_ = lay.max_distinct;
    compact_ = lay.compact;
    uniform_ = lay.uniform;
    folds_ = std::move(lay.folds);
    report_ = std::move(lay.report);
    std::int32_t const L = lay.layers();
    int dev = 0, optin = 0, per_sm_smem = 0;
    SDNN_CUDA_CHECK(cudaGetDevice(&dev));
    SDNN_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    SDNN_CUDA_CHECK(cudaDeviceGetAttribute(&per_sm_smem, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
    std::size_t const limit = optin > 0 ? static_cast<std::size_t>(optin) - 1024 : challenge_engine_default_smem;
    auto const st = challenge_engine_can_implement(n_, L, max_distinct_);
    if (!st) SDNN_FAIL(st.why());
    threads_ = opt_.threads_per_row ? opt_.threads_per_row : kernels::challenge_engine_threads_for(max_distinct_);
    SDNN_EXPECTS(threads_ == 32 || threads_ == 128 || threads_ == 512,
                 "challenge engine: threads_per_row must be 32, 128 or 512, got ", threads_);
    // Where the team buffers go: shared memory when a block's share still lets half of the
    // SM's threads run (else the input row's scratch, then the state, move to global memory).
    int const teams = kernels::challenge_engine_teams(threads_);
    std::size_t const blocks_wanted = std::max<std::size_t>(1, 2048 / static_cast<std::size_t>(threads_ * teams) / 2);
    auto fits = [&](bool state_sh, bool input_sh) {
      std::size_t const b = kernels::challenge_engine_team_smem(static_cast<std::int32_t>(n_), max_distinct_, state_sh,
                                                                input_sh) * static_cast<std::size_t>(teams);
      return b <= limit && b * blocks_wanted <= static_cast<std::size_t>(per_sm_smem > 0 ? per_sm_smem : limit);
    };
    bool const force_global = opt_.scratch == challenge_engine_scratch_place::global;
    scratch_.state_shared = !force_global && (fits(true, false) || opt_.scratch == challenge_engine_scratch_place::shared);
    scratch_.input_shared = scratch_.state_shared && !force_global && fits(true, true);
    SDNN_EXPECTS(kernels::challenge_engine_team_smem(static_cast<std::int32_t>(n_), max_distinct_, scratch_.state_shared,
                                                     scratch_.input_shared) * static_cast<std::size_t>(teams) <= limit,
                 "challenge engine: ", threads_, " threads per row need more shared memory than the GPU gives");
    scratch_.global_per_team = (scratch_.state_shared ? 0 : 2 * static_cast<std::int64_t>(max_distinct_)) +
                               (scratch_.input_shared ? 0 : n_);
    grid_ = dispatch([&](auto tag, auto term) {
      return kernels::challenge_engine_grid<decltype(tag)::value, decltype(term)>(
          std::numeric_limits<std::int32_t>::max(), static_cast<std::int32_t>(n_), max_distinct_, scratch_);
    });
    // What the plan holds on the device, checked against the budget before anything is allocated.
    auto bytes_of = [](auto const& v) { return static_cast<std::uint64_t>(v.size() * sizeof(v[0])); };
    device_bytes_ = bytes_of(lay.desc) + bytes_of(lay.slices) +
                    (uniform_ ? bytes_of(lay.uniform_terms) : compact_ ? bytes_of(lay.compact_terms) : bytes_of(lay.wide)) +
                    bytes_of(lay.values) + bytes_of(lay.last_class) +
                    static_cast<std::uint64_t>(grid_ * teams * scratch_.global_per_team) * sizeof(float);
    // host and automatic without a budget: 60% of the free device memory (as the pipeline's weight store)
    std::uint64_t budget = opt_.device_memory_budget;
    if (budget == 0 && opt_.weights != weight_placement::device) budget = sdnn::detail::default_weight_budget();
    bool const over = budget > 0 && device_bytes_ > budget;
    streamed_ = opt_.weights == weight_placement::host || (opt_.weights == weight_placement::automatic && over);
    if (over && !streamed_)
      SDNN_FAIL("challenge engine: the plan needs ", device_bytes_, " bytes of device memory (layer layout and team "
                "scratch) but the budget is ", budget,
                " bytes; weights host (or automatic) streams the layers from pinned host memory");
    if (streamed_) plan_stream(lay, budget, exec);
    d_desc_ = to_device(lay.desc.data(), lay.desc.size(), exec);
    d_slices_ = to_device(lay.slices.data(), lay.slices.size(), exec);
    if (!streamed_) {  // streamed: the terms stay on the host (plan_stream), two slots hold windows of them
      if (uniform_)
        d_uniform_ = to_device(lay.uniform_terms.data(), lay.uniform_terms.size(), exec);
      else if (compact_)
        d_compact_ = to_device(lay.compact_terms.data(), lay.compact_terms.size(), exec);
      else
        d_wide_ = to_device(lay.wide.data(), lay.wide.size(), exec);
    }
    if (!lay.values.empty()) d_values_ = to_device(lay.values.data(), lay.values.size(), exec);
    d_last_class_ = to_device(lay.last_class.data(), lay.last_class.size(), exec);
    d_queue_ = buffer<int, device_space>(1, exec);
    d_counters_ = buffer<kernels::challenge_engine_counters, device_space>(1, exec);
    if (scratch_.global_per_team > 0)
      d_scratch_ = buffer<float, device_space>(
          static_cast<std::size_t>(grid_ * teams * scratch_.global_per_team), exec);
    if (!scratch_.input_shared)  // the kernel keeps the input scratch zero between rows
      SDNN_CUDA_CHECK(cudaMemsetAsync(d_scratch_.data(), 0, d_scratch_.size() * sizeof(float), exec.stream));
    scratch_.global = d_scratch_.data();
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));  // uploads from pageable memory done
  }

  // Streamed weights: the schedule for the budget less the resident part, the terms kept in
  // pinned host memory, two device slots, the copy stream and its events.
  void plan_stream(challenge_engine_layout& lay, std::uint64_t budget, cuda_exec exec) {
    std::size_t const tb = challenge_engine_term_bytes(lay);
    std::int64_t const count = challenge_engine_term_count(lay);
    std::uint64_t const terms_bytes = static_cast<std::uint64_t>(count) * tb;
    std::uint64_t const fixed = device_bytes_ - terms_bytes;
    if (fixed >= budget)
      SDNN_FAIL("challenge engine: the plan's resident part (layer descriptors, slices, weight tables and team "
                "scratch) needs ", format_bytes(fixed), ", the device-memory budget is ", format_bytes(budget),
                "; streaming moves only the terms");
    sched_ = schedule_engine_stream(lay.desc, count, tb, max_distinct_, budget - fixed, opt_.stream_slot_bytes,
                                    opt_.stream_park_rows);
    term_bytes_ = tb;
    device_bytes_ = fixed + 2 * sched_.slot_bytes;
    // The terms stay in pinned host memory for the copy stream. weights = host built them there
    // (terms_memory()): the plan takes the array over, nothing is copied. automatic learns only
    // now, after the build, that it streams: one copy of the terms into pinned memory.
    if (uniform_)
      keep_pinned(h_uniform_, lay.uniform_terms);
    else if (compact_)
      keep_pinned(h_compact_, lay.compact_terms);
    else
      keep_pinned(h_wide_, lay.wide);
    for (auto& slot : d_slot_) slot = buffer<unsigned char, device_space>(static_cast<std::size_t>(sched_.slot_bytes), exec);
    cudaStream_t cs = nullptr;
    SDNN_CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    copy_.reset(cs);
    for (auto& e : loaded_) e = make_event(false);
    for (auto& e : free_) e = make_event(false);
    fork_ = make_event(false);
    h_count_ = buffer<int, pinned_space>(2);
  }
  // to = from's terms in pinned memory: from's array itself when it is pinned, else a copy.
  template <class V>
  static void keep_pinned(V& to, V& from) {
    if (from.get_allocator().resource()->is_equal(*to.get_allocator().resource())) {
      to = std::move(from);  // the same resource: the array moves
    } else {
      to.reserve(from.size());
      to.assign(from.begin(), from.end());
      V(from.get_allocator()).swap(from);
    }
  }
  // The streamed terms' bytes (one of the three arrays).
  unsigned char const* host_terms() const noexcept {
    return uniform_   ? reinterpret_cast<unsigned char const*>(h_uniform_.data())
           : compact_ ? reinterpret_cast<unsigned char const*>(h_compact_.data())
                      : reinterpret_cast<unsigned char const*>(h_wide_.data());
  }

 public:
  std::int64_t neurons() const noexcept { return n_; }
  std::int64_t depth() const noexcept { return static_cast<std::int64_t>(folds_.size()); }
  std::int64_t connections() const noexcept { return connections_; }
  // Threads that carry one row (a warp, or a block for layers of more than 256 classes), and
  // whether the team's state and input row sit in shared memory.
  int threads_per_row() const noexcept { return threads_; }
  bool state_in_shared_memory() const noexcept { return scratch_.state_shared; }
  bool input_in_shared_memory() const noexcept { return scratch_.input_shared; }
  // Terms: 4-byte compact ones or 8-byte (input, weight); the fast path (every layer with one
  // finite weight and classes of one length, a multiple of 4: 2-byte terms).
  bool compact_terms() const noexcept { return compact_; }
  // Device bytes the plan holds: layer layout and team scratch (not a run's inputs or results);
  // streamed, the resident part and the two slots (a run adds the park for min(rows, park_rows)
  // rows, stream_schedule().device_bytes(rows) with the slots; all of it within the budget).
  std::uint64_t device_bytes() const noexcept { return device_bytes_; }
  // Whether the terms stream from pinned host memory (weights = host, or automatic over the
  // budget), and the windows and park they stream with (empty when resident).
  bool streamed() const noexcept { return streamed_; }
  challenge_engine_stream_schedule const& stream_schedule() const noexcept { return sched_; }
  bool fast_path() const noexcept { return uniform_; }
  // The proofs as made at plan time, and the fold factor used per layer (1: not folded).
  challenge::structure_report const& structure() const noexcept { return report_; }
  std::vector<double> const& fold_factors() const noexcept { return folds_; }
  std::string summary() const { return report_.summary(); }

  // Categories of the device CSR inputs (rows x N). Synchronises exec.stream (reads the
  // categories back). Allocates the category bits (one per row) (and the final activations when
  // asked) for this call: rows is a run-time quantity of the inputs.
  challenge_engine_result run(cuda_exec exec, csr_view<float, std::int32_t> inputs, bool keep_final = false) const {
    SDNN_EXPECTS_DIMS(inputs.cols == n_, "challenge engine: inputs have ", inputs.cols, " columns, the network ", n_,
                      " neurons");
    runs_.note(exec);
    challenge_engine_result res;
    std::int64_t const rows = inputs.rows;
    // One bit per row (a 60000-row run copies 7.5 KB back, not 240 KB).
    std::size_t const words = static_cast<std::size_t>(std::max<std::int64_t>((rows + 31) / 32, 1));
    buffer<std::uint32_t, device_space> cat(words, exec);
    buffer<float, device_space> fin;
    SDNN_CUDA_CHECK(cudaMemsetAsync(cat.data(), 0, cat.size() * sizeof(std::uint32_t), exec.stream));
    if (keep_final) {
      fin = buffer<float, device_space>(static_cast<std::size_t>(rows * n_), exec);
      SDNN_CUDA_CHECK(cudaMemsetAsync(fin.data(), 0, fin.size() * sizeof(float), exec.stream));
    }
    // The queue and counters are the plan's: runs of one plan on two streams would share them.
    auto* queue = const_cast<int*>(d_queue_.data());
    auto* counters = const_cast<kernels::challenge_engine_counters*>(d_counters_.data());
    SDNN_CUDA_CHECK(cudaMemsetAsync(queue, 0, sizeof(int), exec.stream));
    SDNN_CUDA_CHECK(cudaMemsetAsync(counters, 0, sizeof(kernels::challenge_engine_counters), exec.stream));
    kernels::challenge_engine_layers const net = layers_view();
    auto const epi = epilogue_capped_relu<float>(bias_, opt_.cap);
    float* fp = keep_final ? fin.data() : nullptr;
    std::int64_t const teams = kernels::challenge_engine_teams(threads_);
    // One launch: a pass over at most `work` rows (kernels::challenge_engine_pass).
    auto launch = [&](kernels::challenge_engine_layers const& v, kernels::challenge_engine_pass const& pass,
                      std::int64_t work) {
      std::int64_t const blocks = std::min<std::int64_t>(grid_, (work + teams - 1) / teams);
      dispatch([&](auto tag, auto term) {
        kernels::challenge_engine<decltype(tag)::value, decltype(term)>(inputs, v, epi, opt_.cap, queue, cat.data(), fp,
                                                                        scratch_, blocks, counters, pass, exec);
        return 0;
      });
    };
    if (!streamed_)
      launch(net, kernels::challenge_engine_pass::whole(net.layers, static_cast<std::int32_t>(rows)), rows);
    else
      run_windows(exec, rows, net, launch, queue, res);
    std::vector<std::uint32_t> flags(words);
    kernels::challenge_engine_counters c{};
    if (rows)
      SDNN_CUDA_CHECK(cudaMemcpyAsync(flags.data(), cat.data(), flags.size() * sizeof(std::uint32_t),
                                      cudaMemcpyDeviceToHost, exec.stream));
    SDNN_CUDA_CHECK(cudaMemcpyAsync(&c, counters, sizeof c, cudaMemcpyDeviceToHost, exec.stream));
    if (keep_final) {
      res.final.resize(static_cast<std::size_t>(rows * n_));
      if (rows)
        SDNN_CUDA_CHECK(cudaMemcpyAsync(res.final.data(), fin.data(), res.final.size() * sizeof(float),
                                        cudaMemcpyDeviceToHost, exec.stream));
    }
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    for (std::int64_t i = 0; i < rows; ++i)
      if (flags[static_cast<std::size_t>(i >> 5)] >> (i & 31) & 1u) res.categories.push_back(static_cast<std::int32_t>(i + 1));
    res.row_layers = static_cast<std::int64_t>(c.row_layers);
    res.layers_skipped = static_cast<std::int64_t>(c.layers_skipped);
    res.retired = static_cast<std::int64_t>(c.retired);
    res.rows = static_cast<std::int64_t>(c.rows);
    return res;
  }

 private:
  // Calls f(std::integral_constant<int, T>{}, Term{}) for the plan's threads per row and terms.
  template <class F>
  std::int64_t dispatch(F&& f) const {
    auto with = [&](auto tag) -> std::int64_t {
      if (uniform_) return f(tag, challenge_engine_uniform_term{});
      if (compact_) return f(tag, challenge_engine_compact_term{});
      return f(tag, challenge_engine_term{});
    };
    switch (threads_) {
      case 32: return with(std::integral_constant<int, 32>{});
      case 128: return with(std::integral_constant<int, 128>{});
      default: return with(std::integral_constant<int, 512>{});
    }
  }

  // Streamed weights (docs/challenge.md#out-of-core-streaming): groups of rows; per group one
  // pass of the first window over the pending input rows (all of them in the first group),
  // parking the survivors the park holds and leaving the others (overflow) pending for the next
  // group, then each later window over the parked rows. The copy of the next window into the
  // other slot (copy stream) overlaps the current pass (exec.stream); a slot is rewritten after
  // the pass that read it (free_ events), a pass starts after its slot's copy (loaded_ events); a
  // slot that already holds the window is not copied again. After each pass the host reads the
  // live count (a synchronisation of exec.stream), which ends the group's windows early when no
  // row is alive.
  template <class Launch>
  void run_windows(cuda_exec exec, std::int64_t rows, kernels::challenge_engine_layers net, Launch const& launch,
                   int* queue, challenge_engine_result& res) const {
    if (rows == 0) return;
    auto const W = static_cast<std::int32_t>(sched_.windows.size());
    std::int64_t const P = W > 1 ? std::min<std::int64_t>(rows, sched_.park_rows) : 0;  // one window: no park
    std::size_t const dmax = static_cast<std::size_t>(std::max(max_distinct_, 1));
    std::size_t const Pz = static_cast<std::size_t>(P);
    buffer<float, device_space> park(2 * Pz * dmax, exec);  // two buffers: a pass reads one, appends to the other
    buffer<std::int32_t, device_space> live(2 * Pz, exec);
    // rows pending for the next group (overflow of the first window), two lists of up to `rows`
    buffer<std::int32_t, device_space> pending(W > 1 ? 2 * static_cast<std::size_t>(rows) : 0, exec);
    buffer<int, device_space> counts(4, exec);  // live counts of the park's buffers, then of the pending lists
    std::vector<std::pair<event_ptr, event_ptr>> timing;  // each upload's start and end (copy stream)
    // the copy stream starts after what exec.stream holds (the slots and this run's buffers)
    SDNN_CUDA_CHECK(cudaEventRecord(fork_.get(), exec.stream));
    SDNN_CUDA_CHECK(cudaStreamWaitEvent(copy_.get(), fork_.get(), 0));
    // Window w's terms in a slot other than `avoid` (the one a queued pass reads), copied unless
    // a slot holds them already.
    auto stage = [&](std::int32_t w, int avoid) {
      int s = held_[0] == w ? 0 : held_[1] == w ? 1 : -1;
      if (s >= 0) return s;
      s = avoid == 0 ? 1 : 0;
      challenge_engine_window const& win = sched_.windows[static_cast<std::size_t>(w)];
      std::size_t const bytes = static_cast<std::size_t>(win.term_end - win.term_begin) * term_bytes_;
      held_[s] = -1;
      SDNN_CUDA_CHECK(cudaStreamWaitEvent(copy_.get(), free_[s].get(), 0));
      timing.emplace_back(make_event(true), make_event(true));
      SDNN_CUDA_CHECK(cudaEventRecord(timing.back().first.get(), copy_.get()));
      if (bytes)
        SDNN_CUDA_CHECK(cudaMemcpyAsync(d_slot_[s].data(),
                                        host_terms() + static_cast<std::size_t>(win.term_begin) * term_bytes_, bytes,
                                        cudaMemcpyHostToDevice, copy_.get()));
      SDNN_CUDA_CHECK(cudaEventRecord(timing.back().second.get(), copy_.get()));
      SDNN_CUDA_CHECK(cudaEventRecord(loaded_[s].get(), copy_.get()));
      held_[s] = w;
      res.bytes_streamed += bytes;
      ++res.uploads;
      return s;
    };
    // One pass of window w from slot s (after its copy); the slot is free again after it.
    auto run_pass = [&](std::int32_t w, int s, kernels::challenge_engine_pass pass, std::int64_t work) {
      challenge_engine_window const& win = sched_.windows[static_cast<std::size_t>(w)];
      pass.first = win.first;
      pass.end = win.end;
      pass.term_shift = win.term_begin;
      pass.park_capacity = static_cast<std::int32_t>(P);
      SDNN_CUDA_CHECK(cudaStreamWaitEvent(exec.stream, loaded_[s].get(), 0));
      SDNN_CUDA_CHECK(cudaMemsetAsync(queue, 0, sizeof(int), exec.stream));
      net.terms = d_slot_[s].data();
      launch(net, pass, work);
      SDNN_CUDA_CHECK(cudaEventRecord(free_[s].get(), exec.stream));
      last_slot_ = s;
      ++res.passes;
    };
    // Device counts read on the host (one synchronisation of exec.stream).
    auto read_counts = [&](int const* a, int const* b) {
      SDNN_CUDA_CHECK(cudaMemcpyAsync(h_count_.data(), a, sizeof(int), cudaMemcpyDeviceToHost, exec.stream));
      if (b) SDNN_CUDA_CHECK(cudaMemcpyAsync(h_count_.data() + 1, b, sizeof(int), cudaMemcpyDeviceToHost, exec.stream));
      SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    };
    auto park_of = [&](int b) { return park.data() + static_cast<std::size_t>(b) * Pz * dmax; };
    auto live_of = [&](int b) { return live.data() + static_cast<std::size_t>(b) * Pz; };
    auto pending_of = [&](int b) { return pending.data() + static_cast<std::size_t>(b) * static_cast<std::size_t>(rows); };
    std::int64_t waiting = rows;  // input rows not yet run (the first group: all, in order)
    int src = -1;                 // the pending list they are in (-1: the range [0, rows))
    while (waiting > 0) {
      ++res.groups;
      // 1. The first window over the waiting rows: survivors park while the park has room, the
      //    others wait for the next group (their first-window work is done again then).
      int const s0 = stage(0, last_slot_);
      if (W > 1) stage(1, s0);  // window 1's copy overlaps the first window's pass
      int const dst = src == 0 ? 1 : 0;
      kernels::challenge_engine_pass first;
      first.row_begin = 0;
      first.row_end = static_cast<std::int32_t>(rows);
      if (src >= 0) {
        first.live_in = pending_of(src);
        first.live_in_count = counts.data() + 2 + src;
      }
      if (W > 1) {
        first.live_out = live_of(0);
        first.live_out_count = counts.data();
        first.park_out = park_of(0);
        first.overflow = pending_of(dst);
        first.overflow_count = counts.data() + 2 + dst;
        SDNN_CUDA_CHECK(cudaMemsetAsync(counts.data(), 0, sizeof(int), exec.stream));
        SDNN_CUDA_CHECK(cudaMemsetAsync(first.overflow_count, 0, sizeof(int), exec.stream));
      }
      run_pass(0, s0, first, waiting);
      if (W == 1) break;  // every row ran every layer
      read_counts(counts.data(), first.overflow_count);
      std::int64_t alive = std::min<std::int64_t>(h_count_[0], P);
      std::int64_t const over = h_count_[1];
      SDNN_EXPECTS(over >= 0 && over < waiting && (over == 0 || h_count_[0] >= P),
                   "challenge engine: ", over, " rows of ", waiting, " overflowed a park of ", P, " (internal error)");
      waiting = over;
      src = dst;
      // 2. The later windows over the parked rows (buffer b), until none is alive.
      int b = 0;
      std::int32_t w = 1;
      for (; w < W && alive > 0; ++w) {
        int const s = stage(w, last_slot_);
        if (w + 1 < W) stage(w + 1, s);  // its copy overlaps this pass
        kernels::challenge_engine_pass pass;
        pass.live_in = live_of(b);
        pass.live_in_count = counts.data() + b;
        pass.park_in = park_of(b);
        pass.live_out = live_of(1 - b);
        pass.live_out_count = counts.data() + (1 - b);
        pass.park_out = park_of(1 - b);
        SDNN_CUDA_CHECK(cudaMemsetAsync(pass.live_out_count, 0, sizeof(int), exec.stream));
        run_pass(w, s, pass, alive);
        b = 1 - b;
        if (w + 1 < W) {
          read_counts(counts.data() + b, nullptr);
          alive = h_count_[0];
          SDNN_EXPECTS(alive <= P, "challenge engine: ", alive, " rows parked in a park of ", P, " (internal error)");
        }
      }
      res.windows_skipped += W - w;
    }
    // The copy stream's busy time (every copy has been waited on by a pass, or is a prefetch).
    SDNN_CUDA_CHECK(cudaStreamSynchronize(copy_.get()));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    for (auto const& t : timing) {
      float ms = 0;
      SDNN_CUDA_CHECK(cudaEventElapsedTime(&ms, t.first.get(), t.second.get()));
      res.copy_seconds += static_cast<double>(ms) / 1e3;
    }
  }

  kernels::challenge_engine_layers layers_view() const {
    kernels::challenge_engine_layers v;
    v.layers = static_cast<std::int32_t>(folds_.size());
    v.n = static_cast<std::int32_t>(n_);
    v.max_distinct = max_distinct_;
    v.desc = d_desc_.data();
    v.slices = d_slices_.data();
    v.terms = uniform_   ? static_cast<void const*>(d_uniform_.data())
              : compact_ ? static_cast<void const*>(d_compact_.data())
                         : static_cast<void const*>(d_wide_.data());
    v.values = d_values_.data();
    v.last_class = d_last_class_.data();
    return v;
  }

  challenge_engine_options opt_;
  float bias_ = 0;
  std::int64_t n_ = 0, connections_ = 0;
  std::int32_t max_distinct_ = 0;
  int threads_ = 32;
  bool compact_ = false, uniform_ = false;
  std::int64_t grid_ = 0;
  std::uint64_t device_bytes_ = 0;
  kernels::challenge_engine_scratch scratch_;
  challenge::structure_report report_;
  std::vector<double> folds_;
  buffer<challenge_engine_layer_desc, device_space> d_desc_;
  buffer<std::int32_t, device_space> d_last_class_;
  buffer<challenge_engine_slice, device_space> d_slices_;
  buffer<challenge_engine_term, device_space> d_wide_;
  buffer<challenge_engine_compact_term, device_space> d_compact_;
  buffer<std::uint16_t, device_space> d_uniform_;
  buffer<float, device_space> d_values_;
  buffer<float, device_space> d_scratch_;
  buffer<int, device_space> d_queue_;
  buffer<kernels::challenge_engine_counters, device_space> d_counters_;
  // Streamed weights (weights = host, or automatic over the budget).
  struct event_deleter {
    void operator()(cudaEvent_t e) const noexcept { sdnn::detail::cuda_check_noexcept(cudaEventDestroy(e), "cudaEventDestroy"); }
  };
  struct stream_deleter {
    void operator()(cudaStream_t s) const noexcept {
      sdnn::detail::cuda_check_noexcept(cudaStreamDestroy(s), "cudaStreamDestroy");
    }
  };
  using event_ptr = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, event_deleter>;
  static event_ptr make_event(bool timing) {
    cudaEvent_t e = nullptr;
    SDNN_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
    return event_ptr(e);
  }
  bool streamed_ = false;
  challenge_engine_stream_schedule sched_;
  std::size_t term_bytes_ = 0;
  // the terms in pinned host memory (the one array of the layout's encoding)
  std::pmr::vector<std::uint16_t> h_uniform_{challenge_engine_pinned_memory()};
  std::pmr::vector<challenge_engine_compact_term> h_compact_{challenge_engine_pinned_memory()};
  std::pmr::vector<challenge_engine_term> h_wide_{challenge_engine_pinned_memory()};
  mutable buffer<unsigned char, device_space> d_slot_[2];  // run() rewrites them
  std::unique_ptr<std::remove_pointer_t<cudaStream_t>, stream_deleter> copy_;
  event_ptr loaded_[2], free_[2], fork_;
  mutable buffer<int, pinned_space> h_count_;   // counts of the last pass (live, overflow)
  mutable int held_[2] = {-1, -1};              // the window each slot holds (-1: none)
  mutable int last_slot_ = 1;
  sdnn::detail::run_streams runs_;  // the streams the plan's buffers wait for when released
};

}  // namespace sdnn::ops
