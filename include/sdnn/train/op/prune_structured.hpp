// sdnn/train/op/prune_structured.hpp - magnitude pruning of a dense host weight matrix (M x K)
// for the tensor-core layers: unstructured (the smallest |w| to zero) or by blocks of br x bc
// (the blocks of smallest L2 norm to zero). Results are dense matrices with the same shape;
// formats/block_sparse.hpp and formats/tile_offsets.hpp store them. Both are deterministic:
// ties go to the lower flat index (element) or lower block index (row-major over blocks).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn::train {

namespace detail {
inline void check_sparsity(double s, char const* what) {
  SDNN_EXPECTS(s >= 0.0 && s < 1.0, what, ": target sparsity must be in [0, 1), got ", s);
}
template <class T>
void check_no_nan(dense_view<T> w, char const* what) {
  for (std::int64_t i = 0; i < w.rows; ++i)
    for (std::int64_t j = 0; j < w.cols; ++j)
      SDNN_EXPECTS(!std::isnan(static_cast<double>(static_cast<float>(w(i, j)))), what, ": w(", i, ", ", j,
                   ") is NaN (it has no magnitude order)");
}
// How many of n items a target sparsity zeroes: round(s * n), never all of them when n > 0.
inline std::int64_t zero_count(double s, std::int64_t n) {
  auto z = static_cast<std::int64_t>(std::llround(s * static_cast<double>(n)));
  return std::min<std::int64_t>(std::max<std::int64_t>(z, 0), n > 0 ? n - 1 : 0);
}
}  // namespace detail

// w with the round(sparsity * M * K) entries of smallest magnitude set to zero (entries already
// zero count among them: they are the smallest). Ties: the lower flat index i * K + j goes first.
template <class T>
dense_matrix<std::remove_const_t<T>> prune_magnitude(dense_view<T> w, double sparsity) {
  using V = std::remove_const_t<T>;
  detail::check_sparsity(sparsity, "prune_magnitude");
  detail::check_no_nan(w, "prune_magnitude");
  std::int64_t const n = w.rows * w.cols;
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t(0));
  auto mag = [&](std::int64_t g) { return std::fabs(static_cast<double>(static_cast<float>(w(g / w.cols, g % w.cols)))); };
  std::int64_t const z = detail::zero_count(sparsity, n);
  std::nth_element(order.begin(), order.begin() + z, order.end(), [&](std::int64_t a, std::int64_t b) {
    double const x = mag(a), y = mag(b);
    return x < y || (x == y && a < b);
  });
  dense_matrix<V> out(w.rows, w.cols);
  for (std::int64_t i = 0; i < w.rows; ++i)
    for (std::int64_t j = 0; j < w.cols; ++j) out(i, j) = w(i, j);
  for (std::int64_t k = 0; k < z; ++k) {
    std::int64_t const g = order[static_cast<std::size_t>(k)];
    out(g / w.cols, g % w.cols) = V(0.0f);
  }
  return out;
}

// w with the round(block_sparsity * B) blocks of br x bc (B blocks; edge blocks partial) of
// smallest L2 norm set to zero. Ties: the lower block index (block row-major) goes first.
template <class T>
dense_matrix<std::remove_const_t<T>> prune_blocks_l2(dense_view<T> w, std::int32_t br, std::int32_t bc,
                                                     double block_sparsity) {
  using V = std::remove_const_t<T>;
  detail::check_sparsity(block_sparsity, "prune_blocks_l2");
  SDNN_EXPECTS(br >= 1 && bc >= 1, "prune_blocks_l2: the block shape must be positive, got ", br, " x ", bc);
  detail::check_no_nan(w, "prune_blocks_l2");
  std::int64_t const rb = (w.rows + br - 1) / br, cb = (w.cols + bc - 1) / bc, nb = rb * cb;
  std::vector<double> norm2(static_cast<std::size_t>(nb), 0.0);
  for (std::int64_t i = 0; i < w.rows; ++i)
    for (std::int64_t j = 0; j < w.cols; ++j) {
      double const v = static_cast<double>(static_cast<float>(w(i, j)));
      norm2[static_cast<std::size_t>((i / br) * cb + j / bc)] += v * v;
    }
  std::vector<std::int64_t> order(static_cast<std::size_t>(nb));
  std::iota(order.begin(), order.end(), std::int64_t(0));
  std::int64_t const z = detail::zero_count(block_sparsity, nb);
  std::nth_element(order.begin(), order.begin() + z, order.end(), [&](std::int64_t a, std::int64_t b) {
    double const x = norm2[static_cast<std::size_t>(a)], y = norm2[static_cast<std::size_t>(b)];
    return x < y || (x == y && a < b);
  });
  std::vector<char> zeroed(static_cast<std::size_t>(nb), 0);
  for (std::int64_t k = 0; k < z; ++k) zeroed[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])] = 1;
  dense_matrix<V> out(w.rows, w.cols);
  for (std::int64_t i = 0; i < w.rows; ++i)
    for (std::int64_t j = 0; j < w.cols; ++j)
      out(i, j) = zeroed[static_cast<std::size_t>((i / br) * cb + j / bc)] ? V(0.0f) : V(w(i, j));
  return out;
}

}  // namespace sdnn::train
