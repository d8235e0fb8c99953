// sdnn/core/plan.cuh - the device half of the plan protocol (core/plan.hpp): the record of the
// streams a plan ran on, which orders every release of its device buffers after them, and the
// workspace helpers of run().
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <memory>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/kernel/hold_stream.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.hpp"

namespace sdnn::detail {

// The stream record of an object that owns device memory (a plan, layer, pipeline or vendor
// wrapper): every stream it was made or ran on. Allocate the object's buffers through owned(exec)
// (or bind() them): each then waits for all those streams before it is freed or replaced
// (core/memory.cuh), so the order of the members, a move-assignment or a re-plan cannot free
// memory that work enqueued on another stream still uses. run() calls note(exec).
class run_streams {
 public:
  run_streams() : use_(std::make_shared<stream_use>()) {}
  explicit run_streams(cuda_exec const& home) : run_streams() { use_->note(home.stream); }
  run_streams(run_streams&&) noexcept = default;
  run_streams& operator=(run_streams&&) noexcept = default;
  run_streams(run_streams const&) = delete;
  run_streams& operator=(run_streams const&) = delete;

  // Called by run() (const objects: the record is shared, not a member value).
  void note(cuda_exec const& exec) const {
    if (use_) use_->note(exec.stream);
  }
  // exec, noted, whose allocations are bound to this record.
  cuda_exec owned(cuda_exec exec) const {
    note(exec);
    exec.owner = use_;
    return exec;
  }
  // Binds buffers allocated elsewhere (e.g. handed over by the caller) to this record.
  template <class... B>
  void bind(B&... bufs) const {
    (bufs.bind(use_), ...);
  }
  std::shared_ptr<stream_use> const& record() const noexcept { return use_; }

 private:
  std::shared_ptr<stream_use> use_;
};

// The workspace run() uses: the caller's when given (checked to hold `need` bytes), else the
// plan's own (plan_options::own_workspace), which a plan made without one does not have.
inline workspace plan_workspace(workspace ws, buffer<unsigned char, device_space> const& own, std::size_t need,
                                char const* what) {
  if (ws.data == nullptr) {
    SDNN_EXPECTS(own.size() >= need, what,
                 ": made without its own workspace (plan_options::own_workspace = false), so run() needs a "
                 "workspace of ", need, " bytes");
    return workspace{const_cast<unsigned char*>(own.data()), own.size()};
  }
  SDNN_EXPECTS(ws.bytes >= need, what, ": workspace of ", ws.bytes, " bytes, need ", need);
  return ws;
}

// Throws the reason of a failed can_implement() (plan constructors); returns v.
template <class V>
V const& implementable(plan_status const& st, V const& v) {
  if (!st) SDNN_FAIL(st.why());
  return v;
}

// Plan-time timing of candidate runs the way the benchmarks time them: each run alone between two
// events on the plan's stream, after a flush of the L2 cache (a memset of twice its size, not
// timed), so that the ranking a plan makes matches what bench_* measures. The stream is held
// (core/kernel/hold_stream.cuh) until the run is enqueued: the time is the run's GPU time, not the host
// work of enqueuing it, which for a vendor call (a cuDNN legacy call builds its execution plan on
// the host) can exceed the kernel's and varies with the CPU's load. hold = false: no hold, so a
// run whose host work outlasts the flush is timed with it (the wall time of issuing it, e.g. a
// whole network layer by layer). Synchronises per run.
class flushed_timer {
 public:
  explicit flushed_timer(cuda_exec exec, bool hold = true) : exec_(exec), hold_(hold) {
    int dev = 0, l2 = 0;
    SDNN_CUDA_CHECK(cudaGetDevice(&dev));
    SDNN_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    flush_ = buffer<unsigned char, device_space>(std::size_t(2) * std::size_t(l2 > 0 ? l2 : 1 << 20), exec);
    SDNN_CUDA_CHECK(cudaEventCreate(&a_));
    SDNN_CUDA_CHECK(cudaEventCreate(&b_));
    void* go = nullptr;
    SDNN_CUDA_CHECK(cudaHostAlloc(&go, sizeof(int), cudaHostAllocMapped));
    go_ = static_cast<int volatile*>(go);
    *go_ = 1;
    SDNN_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&go_dev_), go, 0));
  }
  flushed_timer(flushed_timer const&) = delete;
  flushed_timer& operator=(flushed_timer const&) = delete;
  ~flushed_timer() {
    if (a_) cudaEventDestroy(a_);
    if (b_) cudaEventDestroy(b_);
    if (go_) {
      *go_ = 1;
      cuda_check_noexcept(cudaStreamSynchronize(exec_.stream), "cudaStreamSynchronize (flushed_timer)");
      cuda_check_noexcept(cudaFreeHost(const_cast<int*>(go_)), "cudaFreeHost (flushed_timer)");
    }
  }
  // Milliseconds of one run of f() (which enqueues on the timer's stream).
  template <class F>
  float operator()(F&& f) {
    SDNN_CUDA_CHECK(cudaMemsetAsync(flush_.data(), ++turn_ & 0xff, flush_.size(), exec_.stream));
    *go_ = hold_ ? 0 : 1;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    struct release {  // the GPU goes on however f() ends
      int volatile* go;
      void now() const {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        *go = 1;
      }
      ~release() { now(); }
    } const rel{go_};
    if (hold_) hold_stream(go_dev_, exec_.stream);
    SDNN_CUDA_CHECK(cudaEventRecord(a_, exec_.stream));
    f();
    SDNN_CUDA_CHECK(cudaEventRecord(b_, exec_.stream));
    rel.now();
    SDNN_CUDA_CHECK(cudaEventSynchronize(b_));
    float ms = 0;
    SDNN_CUDA_CHECK(cudaEventElapsedTime(&ms, a_, b_));
    return ms;
  }

 private:
  cuda_exec exec_;
  bool hold_ = true;
  buffer<unsigned char, device_space> flush_;
  cudaEvent_t a_ = nullptr, b_ = nullptr;
  int volatile* go_ = nullptr;  // pinned, mapped: the hold's release
  int* go_dev_ = nullptr;
  int turn_ = 0;
};

}  // namespace sdnn::detail
