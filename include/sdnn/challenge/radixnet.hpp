// sdnn/challenge/radixnet.hpp - the Sparse DNN Graph Challenge networks (RadiX-Net), host
// generator. radixnet_layer(N, l, seed) is layer l of an N-neuron network with the official
// structure (32 nonzeros of 1/16 in every row and column; blocks of K = log2(N / 16) layers, each
// block's rows a seeded permutation of block 0's); official_1024_layer(l) is the official
// 1024 x 120 network bit for bit. The official permutations for N > 1024 were never published:
// larger networks have the official structure and statistics, not the official bits. Structure
// and permutations: docs/challenge.md#radix-net-networks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "sdnn/core/config.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/random.hpp"
#include "sdnn/challenge/official_1024_permutations.hpp"
#include "sdnn/formats/csr.hpp"

namespace sdnn::data {

inline constexpr std::int32_t radixnet_nnz_per_row = 32;  // 2 residues x 16 repeats
inline constexpr float radixnet_weight = 0.0625f;         // 1/16, exact in every float type

// The official bias of each challenge network size: -0.30, -0.35, -0.40, -0.45.
inline float challenge_bias(std::int32_t neurons) {
  switch (neurons) {
    case 1024: return -0.30f;
    case 4096: return -0.35f;
    case 16384: return -0.40f;
    case 65536: return -0.45f;
    default:
      SDNN_FAIL("challenge_bias: the Graph Challenge defines a bias for 1024, 4096, 16384 and 65536 neurons, got ",
                neurons);
  }
}

// K = log2(N / 16): 6, 8, 10, 12 for the official sizes. N must be a power of two >= 32.
inline std::int32_t radixnet_block_layers(std::int32_t neurons) {
  SDNN_EXPECTS(neurons >= 32 && (neurons & (neurons - 1)) == 0 && neurons <= (1 << 30),
               "radixnet: neurons must be a power of two in [32, 2^30], got ", neurons);
  std::int32_t k = 0;
  while ((16 << k) < neurons) ++k;
  return k;
}

namespace detail {

// Column k (0..31, ascending) of a row whose block-0 residue is p, in layer t of a block
// with stride s = 2^(t-1) and M = N / 16. The row's residues are q_lo < q_hi
// ({p, (p - s) mod M}, distinct since 0 < s < M), so its columns interleave as
// q_lo, q_hi, q_lo + M, q_hi + M, ...
SDNN_HOST_DEVICE inline std::int32_t radixnet_column(std::int32_t p, std::int32_t s, std::int32_t m,
                                                     std::int32_t k) {
  std::int32_t const q2 = (p - s + m) % m;
  std::int32_t const lo = p < q2 ? p : q2, hi = p < q2 ? q2 : p;
  return ((k & 1) ? hi : lo) + m * (k >> 1);
}

// Fills a CSR of N x N from the permutation of the layer's block (perm[i] = block-0 row of row i).
// Layer t = 1..K of block 0 has W(i, j) = 1/16 exactly when (i mod M - j mod M) mod M is 0 or
// s = 2^(t-1) (i = input neuron, j = output neuron, M = N / 16); row i of a later block is row
// perm[i] of block 0 (columns are never permuted). Layout: row_ptr[i] = 32 i, columns ascending,
// values 0.0625f.
inline csr_matrix<float, std::int32_t> radixnet_layer_from_permutation(std::int32_t neurons, std::int32_t t,
                                                                       std::vector<std::int32_t> const& perm) {
  std::int32_t const m = neurons / 16, s = 1 << (t - 1);
  SDNN_EXPECTS(static_cast<std::int64_t>(neurons) * radixnet_nnz_per_row <= 0x7fffffff,
               "radixnet: ", neurons, " neurons overflow int32 nonzero indices");
  csr_matrix<float, std::int32_t> w(neurons, neurons, neurons * radixnet_nnz_per_row);
  std::int32_t* rp = w.row_ptr().data();
  std::int32_t* ci = w.col_idx().data();
  float* v = w.values().data();
  for (std::int32_t i = 0; i <= neurons; ++i) rp[i] = i * radixnet_nnz_per_row;
  for (std::int32_t i = 0; i < neurons; ++i) {
    std::int32_t const p = perm[static_cast<std::size_t>(i)] % m;
    for (std::int32_t k = 0; k < radixnet_nnz_per_row; ++k) {
      ci[i * radixnet_nnz_per_row + k] = radixnet_column(p, s, m, k);
      v[i * radixnet_nnz_per_row + k] = radixnet_weight;
    }
  }
  return w;
}

inline void check_layer(std::int32_t layer) {
  SDNN_EXPECTS(layer >= 0, "radixnet: layer must be >= 0 (0-based), got ", layer);
}

}  // namespace detail

// perm[i] = the block-0 row that row i of block `block` copies (one permutation for all K layers
// of a block). Identity for block 0, else a Fisher-Yates shuffle driven by splitmix64 seeded with
// seed + block * 0x9E3779B97F4A7C15 (j = next() mod (i + 1) for i = N-1..1; the modulo bias is
// below 2^-40, irrelevant here). Plain 64-bit integer arithmetic, so every platform (and the
// device generator, which expands the same host-computed permutation) gets the same network.
inline std::vector<std::int32_t> radixnet_permutation(std::int32_t neurons, std::int32_t block, std::uint64_t seed) {
  radixnet_block_layers(neurons);  // validates neurons
  SDNN_EXPECTS(block >= 0, "radixnet_permutation: block must be >= 0, got ", block);
  std::vector<std::int32_t> perm(static_cast<std::size_t>(neurons));
  std::iota(perm.begin(), perm.end(), 0);
  if (block == 0) return perm;
  ::sdnn::splitmix64 rng{seed + static_cast<std::uint64_t>(block) * 0x9E3779B97F4A7C15ull};
  ::sdnn::shuffle(perm, rng);
  return perm;
}

// The canonical permutation of block `block` (0..19) of the official 1024-neuron network:
// row i -> r + 64 * (number of rows before i with residue r), r = the official residue (only
// perm_b(i) mod M is determined by the official layers; official_1024_permutations.hpp).
inline std::vector<std::int32_t> official_1024_permutation(std::int32_t block) {
  SDNN_EXPECTS(block >= 0 && block < detail::official_1024_blocks,
               "official_1024_permutation: block must be in [0, 20), got ", block);
  std::vector<std::int32_t> perm(1024);
  if (block == 0) {
    std::iota(perm.begin(), perm.end(), 0);
    return perm;
  }
  char const* res = detail::official_1024_residues[block - 1];
  std::int32_t seen[64] = {};
  for (std::int32_t i = 0; i < 1024; ++i) {
    char const c = res[i];
    std::int32_t r = -1;
    for (std::int32_t a = 0; a < 64; ++a)
      if (detail::official_1024_alphabet[a] == c) r = a;
    SDNN_EXPECTS(r >= 0, "official_1024_permutation: corrupt residue table at block ", block, " row ", i);
    perm[static_cast<std::size_t>(i)] = r + 64 * seen[r]++;
  }
  return perm;
}

// Layer `layer` (0-based; any depth: block = layer / K) of the generated N-neuron network.
inline csr_matrix<float, std::int32_t> radixnet_layer(std::int32_t neurons, std::int32_t layer, std::uint64_t seed) {
  std::int32_t const k = radixnet_block_layers(neurons);
  detail::check_layer(layer);
  return detail::radixnet_layer_from_permutation(neurons, layer % k + 1, radixnet_permutation(neurons, layer / k, seed));
}

// Layer `layer` (0-based, 0..119) of the official 1024-neuron network, bit for bit.
inline csr_matrix<float, std::int32_t> official_1024_layer(std::int32_t layer) {
  SDNN_EXPECTS(layer >= 0 && layer < 120, "official_1024_layer: layer must be in [0, 120) (0-based), got ", layer);
  return detail::radixnet_layer_from_permutation(1024, layer % 6 + 1, official_1024_permutation(layer / 6));
}

}  // namespace sdnn::data
