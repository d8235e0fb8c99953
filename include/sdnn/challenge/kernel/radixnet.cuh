// sdnn/challenge/kernel/radixnet.cuh - the RadiX-Net challenge networks generated straight into
// device memory: the fill kernel and the calls that launch it. The same networks, bit for bit, as
// the host generator (challenge/radixnet.hpp): the host computes a block's row permutation, one
// grid-stride kernel writes each N x N CSR, so a 65536 x 1920 network never touches host memory
// (docs/challenge.md#radix-net-networks). Everything (allocation, the copy of the permutation,
// the kernel, the free of the permutation) is enqueued on exec.stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/challenge/radixnet.hpp"
#include "sdnn/formats/csr.hpp"

namespace sdnn::data {

namespace radixnet_kernels {
// Grid-stride over the n * 32 nonzeros: entry e is column e % 32 of row e / 32; entries
// e <= n also write row_ptr[e]. perm == nullptr means the identity (block 0).
template <class Index>
__global__ void radixnet_fill(Index n, Index m, Index s, Index const* __restrict__ perm, Index* __restrict__ row_ptr,
                              Index* __restrict__ col_idx, float* __restrict__ values) {
  Index const nnz = n * radixnet_nnz_per_row;
  for (Index e = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; e < nnz;
       e += static_cast<Index>(gridDim.x) * blockDim.x) {
    Index const i = e / radixnet_nnz_per_row, k = e % radixnet_nnz_per_row;
    Index const p = (perm ? perm[i] : i) % m;
    col_idx[e] = detail::radixnet_column(p, s, m, k);
    values[e] = radixnet_weight;
    if (e <= n) row_ptr[e] = e * radixnet_nnz_per_row;
  }
}
}  // namespace radixnet_kernels

namespace detail {
// One layer (t = 1..K) from a permutation already in device memory (nullptr: identity).
inline csr_matrix<float, std::int32_t, device_space> radixnet_fill_layer(std::int32_t neurons, std::int32_t t,
                                                                         std::int32_t const* dperm, cuda_exec exec) {
  std::int32_t const m = neurons / 16, s = 1 << (t - 1);
  SDNN_EXPECTS(static_cast<std::int64_t>(neurons) * radixnet_nnz_per_row <= 0x7fffffff, "radixnet: ", neurons,
               " neurons overflow int32 nonzero indices");
  csr_matrix<float, std::int32_t, device_space> w(neurons, neurons, neurons * radixnet_nnz_per_row, exec);
  int const threads = 256;
  std::int64_t const want = (static_cast<std::int64_t>(neurons) * radixnet_nnz_per_row + threads - 1) / threads;
  std::int64_t const cap = 32LL * sdnn::detail::sm_count();
  int const blocks = static_cast<int>(want < cap ? want : cap);
  radixnet_kernels::radixnet_fill<std::int32_t><<<blocks, threads, 0, exec.stream>>>(
      neurons, m, s, dperm, w.row_ptr().data(), w.col_idx().data(), w.values().data());
  SDNN_CUDA_CHECK_LAUNCH();
  return w;
}

// Uploads a host permutation to a stream-ordered buffer. The copy is from pageable memory, so
// cudaMemcpyAsync stages it before returning (the host vector may be freed at once) and may wait
// for the stream; block 0 needs no copy (identity).
inline buffer<std::int32_t, device_space> upload_permutation(std::vector<std::int32_t> const& perm, cuda_exec exec) {
  return to_device(perm.data(), perm.size(), exec);
}

inline csr_matrix<float, std::int32_t, device_space> radixnet_layer_device_from_permutation(
    std::int32_t neurons, std::int32_t t, std::vector<std::int32_t> const* perm, cuda_exec exec) {
  if (!perm) return radixnet_fill_layer(neurons, t, nullptr, exec);
  auto const dperm = upload_permutation(*perm, exec);
  return radixnet_fill_layer(neurons, t, dperm.data(), exec);  // dperm is freed stream-ordered after the kernel
}
}  // namespace detail

// Layer `layer` (0-based) of the generated N-neuron network (== radixnet_layer, on the device).
inline csr_matrix<float, std::int32_t, device_space> radixnet_layer_device(std::int32_t neurons, std::int32_t layer,
                                                                           std::uint64_t seed, cuda_exec exec) {
  std::int32_t const k = radixnet_block_layers(neurons);
  detail::check_layer(layer);
  std::int32_t const block = layer / k;
  if (block == 0) return detail::radixnet_layer_device_from_permutation(neurons, layer % k + 1, nullptr, exec);
  auto const perm = radixnet_permutation(neurons, block, seed);
  return detail::radixnet_layer_device_from_permutation(neurons, layer % k + 1, &perm, exec);
}

// Layer `layer` (0-based, 0..119) of the official 1024-neuron network (== official_1024_layer).
inline csr_matrix<float, std::int32_t, device_space> official_1024_layer_device(std::int32_t layer, cuda_exec exec) {
  SDNN_EXPECTS(layer >= 0 && layer < 120, "official_1024_layer_device: layer must be in [0, 120) (0-based), got ",
               layer);
  if (layer < 6) return detail::radixnet_layer_device_from_permutation(1024, layer + 1, nullptr, exec);
  auto const perm = official_1024_permutation(layer / 6);
  return detail::radixnet_layer_device_from_permutation(1024, layer % 6 + 1, &perm, exec);
}

// All K layers of block `block` of the generated N-neuron network (layers block * K ..
// block * K + K - 1), sharing one permutation computation and one upload: the way to
// generate a deep network (the 65536 x 1920 one is 160 blocks of 12 layers).
inline std::vector<csr_matrix<float, std::int32_t, device_space>> radixnet_block_device(std::int32_t neurons,
                                                                                        std::int32_t block,
                                                                                        std::uint64_t seed,
                                                                                        cuda_exec exec) {
  std::int32_t const k = radixnet_block_layers(neurons);
  SDNN_EXPECTS(block >= 0, "radixnet_block_device: block must be >= 0, got ", block);
  std::vector<csr_matrix<float, std::int32_t, device_space>> layers;
  layers.reserve(static_cast<std::size_t>(k));
  buffer<std::int32_t, device_space> dperm;
  if (block > 0) dperm = detail::upload_permutation(radixnet_permutation(neurons, block, seed), exec);
  for (std::int32_t t = 1; t <= k; ++t)
    layers.push_back(detail::radixnet_fill_layer(neurons, t, block > 0 ? dperm.data() : nullptr, exec));
  return layers;
}

}  // namespace sdnn::data
