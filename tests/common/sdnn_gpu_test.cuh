// Helpers for device tests: every device test starts with SDNN_REQUIRE_DEVICE().
// Without a GPU the test returns early (CI excludes the `gpu` label anyway); with the
// environment variable SDNN_REQUIRE_GPU=1 a missing GPU makes the test fail instead.
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "sdnn_catch.hpp"
#include <sdnn/core/exec.hpp>
#include <sdnn/core/memory.cuh>

namespace sdnn_test {
inline bool gpu_required() {
  char const* v = std::getenv("SDNN_REQUIRE_GPU");
  return v && std::strcmp(v, "0") != 0 && *v != '\0';
}
inline bool have_gpu() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

// One stream for a test (cudaStreamCreateWithFlags: blocking by default, or
// cudaStreamNonBlocking), synchronised and destroyed at scope exit.
struct stream_guard {
  cudaStream_t s = nullptr;
  explicit stream_guard(unsigned flags = cudaStreamDefault) { SDNN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, flags)); }
  ~stream_guard() {
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
  }
  stream_guard(stream_guard const&) = delete;
  stream_guard& operator=(stream_guard const&) = delete;
  sdnn::cuda_exec exec() const { return sdnn::cuda_exec{s}; }
};

// Two non-blocking streams for the plan-protocol tests (runs on a stream other than a plan's
// home stream); synchronised and destroyed at scope exit.
struct stream_pair {
  cudaStream_t a = nullptr, b = nullptr;
  stream_pair() {
    SDNN_CUDA_CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    SDNN_CUDA_CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  }
  ~stream_pair() {
    cudaStreamSynchronize(a);
    cudaStreamSynchronize(b);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
  }
};

// A host vector on the device, enqueued on ex.stream (core/memory.cuh's to_device).
template <class T>
sdnn::buffer<T, sdnn::device_space> upload(std::vector<T> const& h, sdnn::cuda_exec ex) {
  return sdnn::to_device(h.data(), h.size(), ex);
}
// n elements of device memory back on the host (synchronises ex.stream).
template <class T>
std::vector<T> download(T const* d, std::size_t n, sdnn::cuda_exec ex) {
  std::vector<T> h(n);
  if (n) SDNN_CUDA_CHECK(cudaMemcpyAsync(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost, ex.stream));
  SDNN_CUDA_CHECK(cudaStreamSynchronize(ex.stream));
  return h;
}

// Copies a device buffer back (synchronises the stream) into a std::vector.
template <class T>
std::vector<T> to_vector(sdnn::buffer<T, sdnn::device_space> const& d, cudaStream_t s = nullptr) {
  std::vector<T> h(d.size());
  if (!h.empty()) SDNN_CUDA_CHECK(cudaMemcpyAsync(h.data(), d.data(), d.size() * sizeof(T), cudaMemcpyDeviceToHost, s));
  SDNN_CUDA_CHECK(cudaStreamSynchronize(s));
  return h;
}
}  // namespace sdnn_test

#define SDNN_REQUIRE_DEVICE()                                                              \
  do {                                                                                     \
    if (!::sdnn_test::have_gpu()) {                                                        \
      if (::sdnn_test::gpu_required()) FAIL("SDNN_REQUIRE_GPU is set but no CUDA device is visible"); \
      WARN("no CUDA device: device test not run");                                         \
      return;                                                                              \
    }                                                                                      \
  } while (0)
