// sdnn/conv/kernel/direct_sparse_quantized.cuh - direct sparse convolution (float data, float
// sums) with quantized weights decoded on the fly, and its launcher; the device weights, the
// variant dispatch and the checks are in conv/op/direct_sparse_quantized.cuh. The body is the
// float kernel's with another weight source, so for every config the result is BITWISE equal
// to the float kernel run on dequantize(weights) (docs/conv.md#quantized-weights).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/exec.hpp"
#include "sdnn/conv/kernel/direct_sparse.cuh"
#include "sdnn/linear/kernel/spmm_quantized.cuh"

namespace sdnn::conv {

namespace detail {

// The weight source of the quantized kernels (see direct_sparse_conv_block): the tile offset
// (int32, already times NB) of entry i and its code decoded by dec (linear/kernel/spmm_quantized.cuh),
// as the tile_entry<float> the float kernel would have loaded:
//   int8:      w = __fmul_rn(scale[k], float(q[i] - zero[k])), (scale, zero) of the output
//              channel k read once per k-group pass (one group when per layer);
//   codebook4: w = codebook[nibble i of packed], the 16 float centroids (half widened, exact)
//              in shared memory.
// Both give exactly the float int8_encoding / codebook4_encoding::decode computes on the host,
// and every sum is then the float kernel's: the same fmaf(w, x, acc) in the same order, the
// same store (partial sums through the output, bias, ReLU); tests/cuda/test_conv_quantized.cu
// checks the bitwise equality with ==. Entries are read in the tiled, chunk-major order of
// tiled_conv_entries (conv/weights.hpp); the codes were permuted to that order at plan time.
template <class Decoder>
struct decoded_entry_source {
  std::int32_t const* off;
  Decoder dec;
  SDNN_DEVICE SDNN_FORCEINLINE auto channel(int k) const { return dec.channel(k); }
  template <class Channel>
  SDNN_DEVICE SDNN_FORCEINLINE tile_entry<float> entry(int i, Channel ch) const {
    return {__ldg(off + i), dec.value(i, ch)};
  }
};
template <class Decoder>
SDNN_DEVICE SDNN_FORCEINLINE decoded_entry_source<Decoder> decoded_entries(std::int32_t const* off, Decoder dec) {
  return {off, dec};
}

template <class Values, int NB, int KG, int P, bool SumsInRegisters>
__global__ void __launch_bounds__(256)
    direct_sparse_conv_quantized_kernel(direct_conv_params p, float const* __restrict__ in,
                                        std::int32_t const* __restrict__ off, Values vals,
                                        std::int32_t const* __restrict__ ptr, float const* __restrict__ bias,
                                        int relu, float* __restrict__ out) {
  __shared__ float s_codebook[16];
  // codebook4: the block fills s_codebook here (16 threads); it is read after the body's first
  // barrier.
  auto const src = decoded_entries(off, ::sdnn::kernels::detail::make_decoder(vals, s_codebook));
  direct_sparse_conv_block<float, float, NB, KG, P, SumsInRegisters>(p, in, src, ptr, bias, relu, out);
}

}  // namespace detail

// Launches one compiled variant with the encoding's device view (kernels::int8_values_view or
// kernels::codebook4_values_view, indexed by tiled entry) on exec.stream; grid, threads and
// the dynamic shared memory (the input window) come from the plan (conv/op/direct_sparse_quantized.cuh).
// Never synchronises.
template <class Values, int NB, int KG, int P, bool SumsInRegisters>
void launch_direct_sparse_conv_quantized(direct_conv_params const& p, dim3 grid, int threads,
                                         std::size_t smem_bytes, float const* in, std::int32_t const* offsets,
                                         Values const& values, std::int32_t const* ptr, float const* bias, bool relu,
                                         float* out, cuda_exec exec) {
  auto kernel = detail::direct_sparse_conv_quantized_kernel<Values, NB, KG, P, SumsInRegisters>;
  ::sdnn::detail::allow_dynamic_smem(kernel, smem_bytes);
  kernel<<<grid, threads, smem_bytes, exec.stream>>>(p, in, offsets, values, ptr, bias, relu ? 1 : 0, out);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace sdnn::conv
