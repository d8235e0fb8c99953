// sdnn/core/plan.cuh - the device half of the plan protocol (core/plan.hpp): remembering the
// streams a plan ran on, so that destroying it orders the release of its buffers after them.
#pragma once

#include <cuda_runtime.h>

#include <mutex>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.hpp"

namespace sdnn::detail {

// A member of every plan that owns device buffers. Declare it LAST: members are destroyed
// in reverse order, so its destructor (which makes the home stream wait for every other
// stream the plan ran on) runs before the buffers are released on the home stream.
class run_streams {
 public:
  run_streams() = default;
  explicit run_streams(cuda_exec home) : home_(home.stream) {}
  run_streams(run_streams&& o) noexcept : home_(o.home_), used_(std::move(o.used_)) { o.used_.clear(); }
  run_streams& operator=(run_streams&& o) noexcept {
    if (this != &o) {
      release();
      home_ = o.home_;
      used_ = std::move(o.used_);
      o.used_.clear();
    }
    return *this;
  }
  run_streams(run_streams const&) = delete;
  run_streams& operator=(run_streams const&) = delete;
  ~run_streams() { release(); }

  // Called by run() (const plans: the member is mutable). Cheap: a lock and a short scan.
  void note(cuda_exec exec) const {
    if (exec.stream == home_) return;
    std::lock_guard<std::mutex> lock(mu_);
    for (auto s : used_)
      if (s == exec.stream) return;
    used_.push_back(exec.stream);
  }

 private:
  // Makes home_ wait for everything enqueued so far on the other streams; no host sync.
  void release() noexcept {
    for (auto s : used_) {
      cudaEvent_t ev = nullptr;
      if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
        cuda_check_noexcept(cudaGetLastError(), "cudaEventCreateWithFlags (plan release)");
        continue;
      }
      cuda_check_noexcept(cudaEventRecord(ev, s), "cudaEventRecord (plan release)");
      cuda_check_noexcept(cudaStreamWaitEvent(home_, ev, 0), "cudaStreamWaitEvent (plan release)");
      cuda_check_noexcept(cudaEventDestroy(ev), "cudaEventDestroy (plan release)");
    }
    used_.clear();
  }
  cudaStream_t home_ = nullptr;
  mutable std::mutex mu_;
  mutable std::vector<cudaStream_t> used_;
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

}  // namespace sdnn::detail
