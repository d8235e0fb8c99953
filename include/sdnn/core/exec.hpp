// sdnn/core/exec.hpp - executors: where an op runs.
//
// host_exec runs the plain sequential reference. cuda_exec{stream} enqueues work on a
// CUDA stream and never synchronises the device unless the op's documentation says so.
// This header needs no CUDA headers: cudaStream_t is `CUstream_st*`.
#pragma once

#include <memory>

struct CUstream_st;

namespace sdnn {

namespace detail {
class stream_use;  // core/memory.cuh: the streams an owner of device memory ran on
}  // namespace detail

struct host_exec {};

struct cuda_exec {
  CUstream_st* stream = nullptr;  // nullptr = the legacy default stream
  // Set by the plans, layers and pipelines on the executor they allocate with (as Thrust's
  // policies carry an allocator): device buffers allocated through it wait, when freed or
  // replaced, for every stream their owner ran on (core/memory.cuh). Users leave it empty.
  std::shared_ptr<detail::stream_use> owner;
  cuda_exec() = default;
  explicit cuda_exec(CUstream_st* s) : stream(s) {}
};

template <class Exec>
inline constexpr bool is_host_exec_v = false;
template <>
inline constexpr bool is_host_exec_v<host_exec> = true;
template <class Exec>
inline constexpr bool is_cuda_exec_v = false;
template <>
inline constexpr bool is_cuda_exec_v<cuda_exec> = true;

}  // namespace sdnn
