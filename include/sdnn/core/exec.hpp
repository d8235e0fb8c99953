// sdnn/core/exec.hpp - executors: where an op runs.
//
// host_exec runs the plain sequential reference. cuda_exec{stream} enqueues work on a
// CUDA stream and never synchronises the device unless the op's documentation says so.
// This header needs no CUDA headers: cudaStream_t is `CUstream_st*`.
#pragma once

struct CUstream_st;

namespace sdnn {

struct host_exec {};

struct cuda_exec {
  CUstream_st* stream = nullptr;  // nullptr = the legacy default stream
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
