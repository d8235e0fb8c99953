// sdnn/core/kernel/hold_stream.cuh - a one-thread kernel that holds a stream until the host sets a
// flag in mapped pinned memory (or about 50 ms pass), and its launcher. detail::flushed_timer
// (core/plan.cuh) enqueues it before a timed run, so the run is wholly enqueued before its first
// event and the events time the GPU's work, not the host's.
#pragma once

#include <cuda_runtime.h>

#include "sdnn/core/cuda.cuh"

namespace sdnn::detail {

template <int = 0>
__global__ void hold_stream_kernel(int const volatile* go) {
#if __CUDA_ARCH__ >= 700
  for (int i = 0; i < 50000 && *go == 0; ++i) __nanosleep(1000);
#else
  for (long long i = 0; i < 50000000ll && *go == 0; ++i) {
  }
#endif
}

// go: the device address of a mapped pinned int the host sets to nonzero to release the stream.
inline void hold_stream(int const* go, cudaStream_t stream) {
  hold_stream_kernel<<<1, 1, 0, stream>>>(go);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace sdnn::detail
