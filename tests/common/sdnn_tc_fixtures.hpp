// Shared helpers of the 16-bit tensor-core tests (linear and convolution): seeded random values,
// dense and magnitude-pruned matrices, the significand bits of each output type, and the weights of a tensor-core policy
// made from a dense matrix. Host-only.
#pragma once

#include <sdnn/core/numeric.hpp>
#include <sdnn/formats/block_sparse.hpp>
#include <sdnn/formats/dense.hpp>
#include <sdnn/formats/tile_offsets.hpp>
#include <sdnn/linear/policy/tensor_core.hpp>
#include <sdnn/train/op/prune_structured.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

namespace sdnn_test {

// rows x cols, every entry drawn uniformly from [lo, hi) and rounded to T.
template <class T>
sdnn::dense_matrix<T> random_matrix(std::int64_t rows, std::int64_t cols, unsigned seed, float lo = -1.f,
                                    float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  sdnn::dense_matrix<T> a(rows, cols);
  for (auto& v : a.values()) v = T(u(rng));
  return a;
}

// n values drawn uniformly from [lo, hi) and rounded to T.
template <class T>
std::vector<T> random_vector(std::int64_t n, unsigned seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<T> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = T(u(rng));
  return v;
}

// W m x k with about `sparsity` of its entries zero (unstructured, magnitude pruning of a
// random_matrix); 0: all kept, 1: all zero.
template <class T>
sdnn::dense_matrix<T> pruned(std::int64_t m, std::int64_t k, double sparsity, unsigned seed) {
  auto w = random_matrix<T>(m, k, seed);
  if (sparsity <= 0) return w;
  if (sparsity >= 1) return sdnn::dense_matrix<T>(m, k);
  return sdnn::train::prune_magnitude(std::as_const(w).view(), sparsity);
}

// The weights of tensor-core policy Policy made from a dense host matrix: a copy (dense), blocks of
// br x bc, or 64 x 64 tile offsets.
template <class Policy, class T>
auto make_tc_weights(sdnn::dense_matrix<T> const& w, int br = 32, int bc = 32) {
  if constexpr (std::is_same_v<Policy, sdnn::policy::tc_dense_mma>) {
    sdnn::dense_matrix<T> c(w.rows(), w.cols());
    std::copy(w.values().begin(), w.values().end(), c.values().begin());
    return c;
  } else if constexpr (std::is_same_v<Policy, sdnn::policy::tc_block_sparse_mma>) {
    return sdnn::block_sparse_from_dense(w.view(), br, bc);
  } else {
    return sdnn::tile_offsets_from_dense(w.view());
  }
}

// The significand bits p of Out (its unit roundoff is 2^-p).
template <class Out>
constexpr int out_bits() {
  if constexpr (std::is_same_v<Out, float>) return 24;
  else if constexpr (std::is_same_v<Out, sdnn::bf16>) return 8;
  else return 11;
}

}  // namespace sdnn_test
