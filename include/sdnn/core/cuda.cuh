// sdnn/core/cuda.cuh - CUDA error checking (SDNN_CUDA_CHECK after every call,
// SDNN_CUDA_CHECK_LAUNCH after every launch) and the cached device queries that plans use
// (multiprocessor count, compute capability, the default weight budget).
#pragma once

#include "sdnn/core/config.hpp"
#if !SDNN_HAS_CUDA
#error "sdnn: device headers (.cuh) need SDNN_HAS_CUDA=1 in every translation unit of the program (link the sdnn::sdnn target of a CUDA-enabled build, or define it yourself)"
#endif

#include <cuda_runtime.h>

#include "sdnn/core/arch.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <vector>

namespace sdnn::detail {
inline void cuda_check(cudaError_t st, char const* call, char const* file, int line) {
  if (st != cudaSuccess) {
    // Consume the (non-sticky) error so it is reported once, here, and not again by the
    // next unrelated cudaGetLastError() check.
    cudaGetLastError();
    throw ::sdnn::cuda_error(call, static_cast<int>(st),
                             concat(cudaGetErrorName(st), " (", cudaGetErrorString(st), ")"), file, line);
  }
}
inline cudaStream_t stream_of(cuda_exec const& e) { return e.stream; }

// Number of multiprocessors of the current device (cached per device; safe from any thread:
// a racing first call stores the same value twice).
inline int sm_count() {
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice", __FILE__, __LINE__);
  static std::atomic<int> cache[64] = {};
  if (dev < 64) {
    if (int const n = cache[dev].load(std::memory_order_relaxed)) return n;
  }
  int n = 0;
  cuda_check(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev),
             "cudaDeviceGetAttribute", __FILE__, __LINE__);
  if (dev < 64) cache[dev].store(n, std::memory_order_relaxed);
  return n;
}

// Compute capability of the current device (cached per device): the key of the tuning
// tables (linear/policy/tuning.hpp).
inline arch current_arch() {
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice", __FILE__, __LINE__);
  static std::atomic<int> cache[64] = {};  // 100 * major + minor + 1; 0: not read yet
  if (dev < 64) {
    if (int const c = cache[dev].load(std::memory_order_relaxed)) return arch{(c - 1) / 100, (c - 1) % 100};
  }
  arch a;
  cuda_check(cudaDeviceGetAttribute(&a.major, cudaDevAttrComputeCapabilityMajor, dev), "cudaDeviceGetAttribute",
             __FILE__, __LINE__);
  cuda_check(cudaDeviceGetAttribute(&a.minor, cudaDevAttrComputeCapabilityMinor, dev), "cudaDeviceGetAttribute",
             __FILE__, __LINE__);
  if (dev < 64) cache[dev].store(100 * a.major + a.minor + 1, std::memory_order_relaxed);
  return a;
}

// Lets `kernel` take `bytes` of dynamic shared memory per block on the current device (beyond
// 48 KB with its static shared memory, a kernel must opt in). Call it in the function that
// launches the kernel, before each launch (and before an occupancy query with that much). nvcc's
// default in whole-program mode (-static-global-template-stub=true) gives every translation unit
// its own stub and device copy of a __global__ template it instantiates, and the limit belongs to
// the copy behind the address passed; an inline host function that raised it in one place and
// launched from another, or kept a "done" flag in a static (one per program), could raise one
// unit's copy and launch another's: cudaErrorInvalidValue at the launch. Raised once per
// (address, device), remembered here under a lock; the limit only grows. Thread-safe; never
// synchronises.
inline void allow_dynamic_smem(void const* kernel, std::size_t bytes) {
  if (bytes == 0) return;
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice", __FILE__, __LINE__);
  struct raised {
    void const* fn;
    int dev;
    std::size_t bytes;
  };
  static std::mutex mu;
  static std::vector<raised> done;
  std::lock_guard<std::mutex> lock(mu);
  raised* hit = nullptr;
  for (auto& r : done)
    if (r.fn == kernel && r.dev == dev) hit = &r;
  if (hit && hit->bytes >= bytes) return;
  cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
             "cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize)", __FILE__, __LINE__);
  if (hit) hit->bytes = bytes;
  else done.push_back({kernel, dev, bytes});
}
template <class... Args>
void allow_dynamic_smem(void (*kernel)(Args...), std::size_t bytes) {
  allow_dynamic_smem(reinterpret_cast<void const*>(kernel), bytes);
}

// The device-memory budget of a weight placement (core/weight_placement.hpp) given none: 60% of
// the current device's free memory, read now (every plan that may stream its weights, e.g. the
// pipeline's weight store).
inline std::uint64_t default_weight_budget() {
  std::size_t free_b = 0, total_b = 0;
  cuda_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo", __FILE__, __LINE__);
  return static_cast<std::uint64_t>(0.6 * static_cast<double>(free_b));
}
}  // namespace sdnn::detail

#define SDNN_CUDA_CHECK(call) ::sdnn::detail::cuda_check((call), #call, __FILE__, __LINE__)
// After every kernel launch: catches bad launch configurations without synchronising.
#define SDNN_CUDA_CHECK_LAUNCH() SDNN_CUDA_CHECK(cudaGetLastError())

namespace sdnn::detail {
// For destructors, which cannot throw: a failed release is reported on stderr and its
// error consumed, so it is neither lost silently nor blamed on a later, unrelated call.
inline void cuda_check_noexcept(cudaError_t st, char const* what) noexcept {
  if (st != cudaSuccess) {
    cudaGetLastError();
    report_release("CUDA", what, cudaGetErrorName(st));
  }
}
}  // namespace sdnn::detail
