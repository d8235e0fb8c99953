// sdnn/core/plan.hpp - the one protocol that every op plan, layer and pipeline follows.
//
// Inference operands (weights) are static, so work is split into a plan, made once, and runs,
// made many times. In the spirit of CUTLASS's device operators:
//
//   auto why = Plan::can_implement(shape...);   // static; plan_status: ok, or why not
//   Plan p(operand, exec, options);             // checks (throws sdnn::error with the same
//                                               // reason), then plans: uploads, transposes,
//                                               // reorders, sizes and (by default) allocates
//                                               // its workspace. May synchronise exec.stream
//                                               // only where the plan's comment says so.
//   p.workspace_bytes()                         // scratch that run() needs
//   p.run(exec, operands..., ws = {})           // const; enqueues on exec.stream and returns;
//                                               // never allocates, never frees, never
//                                               // synchronises (except where documented, e.g.
//                                               // a vendor baseline that reads a count back)
//
// Workspace: by default the plan owns a workspace of workspace_bytes(), allocated at
// construction. A caller that manages memory itself passes plan_options{.own_workspace =
// false} and gives every run() a `workspace` of at least workspace_bytes() bytes, aligned to
// workspace::alignment; run() checks the size.
//
// Streams. A plan is made on one stream (its "home" stream: its buffers are allocated there,
// stream-ordered) and may run on any stream. Runs on the same stream are ordered by the
// stream. Runs on different streams that share a plan's own workspace race: give each stream
// its own caller-supplied workspace (or its own plan). Destroying a plan never frees memory
// that a run still uses: the plan remembers every stream it ran on, and its destructor makes
// the home stream wait (an event, no host synchronisation) for the work already enqueued on
// those streams before its buffers are released on the home stream. So the streams a plan
// ran on must still exist when it is destroyed. A CUDA Graph captured from run() refers to
// the plan's memory: destroy the graph first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace sdnn {

// The answer of can_implement(): ok, or the reason a plan cannot be made.
class plan_status {
 public:
  plan_status() = default;
  static plan_status failure(std::string why) { return plan_status(std::move(why)); }
  bool ok() const noexcept { return why_.empty(); }
  explicit operator bool() const noexcept { return ok(); }
  std::string const& why() const noexcept { return why_; }

 private:
  explicit plan_status(std::string why) : why_(std::move(why)) {}
  std::string why_;
};

// Caller-supplied scratch memory for run(): device memory, `bytes` long.
struct workspace {
  static constexpr std::size_t alignment = 256;
  void* data = nullptr;
  std::size_t bytes = 0;
};

struct plan_options {
  std::int64_t max_rows = 0;  // the largest row count (batch) a run will see; 0: the plan's default
  bool own_workspace = true;  // false: every run() is given a workspace by the caller
};

namespace detail {
// Carves aligned pieces out of one workspace.
class workspace_carver {
 public:
  explicit workspace_carver(workspace ws) : base_(static_cast<unsigned char*>(ws.data)), size_(ws.bytes) {}
  // Bytes of `n` objects of T, rounded up to the alignment.
  template <class T>
  static std::size_t bytes_of(std::size_t n) {
    return (n * sizeof(T) + workspace::alignment - 1) / workspace::alignment * workspace::alignment;
  }
  template <class T>
  T* take(std::size_t n) {
    std::size_t const b = bytes_of<T>(n);
    if (b == 0) return nullptr;
    T* p = reinterpret_cast<T*>(base_ + used_);
    used_ += b;
    return used_ <= size_ ? p : nullptr;
  }
  std::size_t used() const noexcept { return used_; }

 private:
  unsigned char* base_;
  std::size_t size_, used_ = 0;
};
}  // namespace detail

}  // namespace sdnn
