// sdnn/kernels/epilogue.cuh - the unfused epilogue passes of the vendor baselines (cuBLAS,
// cuSPARSE run the product; these kernels apply bias / ReLU / cap afterwards):
//   apply_epilogue(c, epi, stream)   c = epi(c) in place over a dense view
//   apply_epilogue_rows_kernel       the same over listed rows, with live-row flags
//                                    (launched by vendor/cusparse_challenge.cuh)
// Namespace sdnn::vendor: they belong to the vendor wrappers' interface.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn::vendor {

// True when epi(x, col) == x for every x and col (no pass needed after a vendor call).
template <class Acc>
inline bool is_identity(basic_epilogue<Acc> const& e) {
  return e.bias == nullptr && e.bias_scalar == Acc(0) && !e.relu && !e.has_cap;
}

namespace detail {
template <class T, class Acc>
__global__ void apply_epilogue_kernel(dense_view<T> c, basic_epilogue<Acc> epi) {
  for (std::int64_t i = blockIdx.x; i < c.rows; i += gridDim.x)
    for (std::int64_t j = threadIdx.x; j < c.cols; j += blockDim.x)
      c.data[i * c.ld + j] = value_cast<T>(epi(value_cast<Acc>(c.data[i * c.ld + j]), j));
}
}  // namespace detail

// c = epi(c) in place (the unfused epilogue of the vendor baselines); nothing for identity.
template <class T, class Acc>
void apply_epilogue(dense_view<T> c, basic_epilogue<Acc> const& epi, cudaStream_t stream) {
  if (is_identity(epi) || c.rows <= 0 || c.cols <= 0) return;
  std::int64_t const blocks = c.rows < 65535 ? c.rows : 65535;
  detail::apply_epilogue_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(c, epi);
  SDNN_CUDA_CHECK_LAUNCH();
}

namespace detail {

// c[r, j] = epi(c[r, j]) for listed rows (rows == nullptr: r = i); flags[i] = 1 when any output
// of the i-th listed row is nonzero. One block per listed row.
template <class T, class Index, class Acc>
__global__ void apply_epilogue_rows_kernel(dense_view<T> c, basic_epilogue<Acc> epi, Index const* rows,
                                           Index const* count, Index max_count, int* flags) {
  Index const n = count ? min(*count, max_count) : max_count;
  for (Index i = blockIdx.x; i < n; i += gridDim.x) {
    Index const r = rows ? rows[i] : i;
    int any = 0;
    for (std::int64_t j = threadIdx.x; j < c.cols; j += blockDim.x) {
      Acc const v = epi(value_cast<Acc>(c(r, j)), j);
      c(r, j) = value_cast<T>(v);
      any |= v != Acc(0);
    }
    any = __syncthreads_or(any);
    if (flags && threadIdx.x == 0 && any) flags[i] = 1;
  }
}

}  // namespace detail

}  // namespace sdnn::vendor
