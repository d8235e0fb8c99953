// sdnn/core/plan.hpp - the one protocol that every op plan, layer and pipeline follows.
//
// Inference weights are static, so work is split into a plan, made once, and runs, made many
// times: Plan::can_implement(shape...) says why a problem cannot run; the constructor checks the
// same (throwing sdnn::error), then uploads, reorders and sizes its workspace; run() is const,
// enqueues on exec.stream and never allocates, frees or synchronises (except where documented).
// Releasing or replacing a plan's buffers waits for the work of every stream it ran on (those
// streams must outlive it): docs/foundation.md#the-plan-protocol.
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

// Caller-supplied scratch memory for run(): device memory, `bytes` long. By default a plan owns
// a workspace of workspace_bytes(), allocated at construction; a caller that manages memory
// itself passes plan_options{.own_workspace = false} and gives every run() a workspace of at
// least workspace_bytes() bytes, aligned to `alignment`; run() checks the size. Runs on different
// streams that share one workspace race: give each stream its own.
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
