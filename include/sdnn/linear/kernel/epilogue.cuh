// sdnn/linear/kernel/epilogue.cuh - the unfused epilogue pass: c = epi(c) in place, as a second
// kernel after a product that has no fused epilogue (the cuBLAS and cuSPARSE baselines), in
// place or from a float staging buffer (store_epilogue).
// One block per row (grid-strided), threads over the columns; epi is evaluated in its
// accumulator type Acc and the result converted once on store, as in the fused kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn::kernels {

// True when epi(x, col) == x for every x and col (no pass needed after a vendor call).
template <class Acc>
inline bool is_identity(basic_epilogue<Acc> const& e) {
  return e.bias == nullptr && e.bias_scalar == Acc(0) && !e.relu && !e.has_cap;
}

// c(r, j) = epi(c(r, j)) for r < rows; flags[r] = 1 when row r has a nonzero output.
template <class T, class Acc>
__global__ void epilogue_pass_kernel(dense_view<T> c, std::int64_t rows, basic_epilogue<Acc> epi, int* flags) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int any = 0;
    for (std::int64_t j = threadIdx.x; j < c.cols; j += blockDim.x) {
      Acc const v = epi(value_cast<Acc>(c(r, j)), j);
      c(r, j) = value_cast<T>(v);
      any |= v != Acc(0);
    }
    if (flags) {  // uniform over the block, so the barrier is reached by all or none
      any = __syncthreads_or(any);
      if (threadIdx.x == 0 && any) flags[r] = 1;
    }
  }
}

// c(r, j) = epi(c(r, j)) for r < rows; flags[r] = 1 (device, may be nullptr) when row r has
// a nonzero output. Launched even for an identity epilogue, as the flags are an output.
// Never synchronises.
template <class T, class Acc>
void apply_epilogue(dense_view<T> c, std::int64_t rows, basic_epilogue<Acc> const& epi, int* flags,
                    cuda_exec exec) {
  if (rows <= 0 || c.cols <= 0) return;
  unsigned const blocks = static_cast<unsigned>(rows < 65535 ? rows : 65535);
  epilogue_pass_kernel<<<blocks, 256, 0, exec.stream>>>(c, rows, epi, flags);
  SDNN_CUDA_CHECK_LAUNCH();
}

// c = epi(c) in place over every row; nothing for an identity epilogue. Never synchronises.
template <class T, class Acc>
void apply_epilogue(dense_view<T> c, basic_epilogue<Acc> const& epi, cuda_exec exec) {
  if (is_identity(epi)) return;
  apply_epilogue(c, c.rows, epi, static_cast<int*>(nullptr), exec);
}

// dst(r, j) = epi(src(r, j)) rounded once to Out: the epilogue of a product staged in float.
template <class Out>
__global__ void store_epilogue_kernel(dense_view<float const> src, dense_view<Out> dst, basic_epilogue<float> epi) {
  for (std::int64_t r = blockIdx.x; r < src.rows; r += gridDim.x)
    for (std::int64_t j = threadIdx.x; j < src.cols; j += blockDim.x) dst(r, j) = value_cast<Out>(epi(src(r, j), j));
}
template <class Out>
void store_epilogue(dense_view<float const> src, dense_view<Out> dst, basic_epilogue<float> const& epi, cuda_exec exec) {
  if (src.rows <= 0 || src.cols <= 0) return;
  unsigned const blocks = static_cast<unsigned>(src.rows < 65535 ? src.rows : 65535);
  store_epilogue_kernel<<<blocks, 256, 0, exec.stream>>>(src, dst, epi);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace sdnn::kernels
