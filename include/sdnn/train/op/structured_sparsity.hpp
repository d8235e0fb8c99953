// sdnn/train/op/structured_sparsity.hpp - structured-sparsity learning on a dense float weight
// matrix (host): groups of weights (blocks, conv channel blocks, whole filters), their L2 norms,
// the group-lasso penalty with its gradient and proximal step, pruning masks (by group, by
// magnitude, 2:4), and the cubic sparsity schedule. Weights are M x K row-major (nn.Linear: out x
// in; a convolution: its GEMM view K x R*S*C, column (r*S + s)*C + c). Every result is
// deterministic: ties go to the lower index. These are the host references of the device kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/train/op/prune_structured.hpp"

namespace sdnn::train {

// A partition of some of the elements of a rows x cols matrix into groups: group g holds the flat
// indices e = i * cols + j in idx[ptr[g] .. ptr[g+1]), ascending. An element belongs to at most one
// group; elements in no group are never penalised or pruned by the group functions.
struct weight_groups {
  std::int64_t rows = 0, cols = 0;
  std::vector<std::int64_t> ptr;  // [count() + 1]
  std::vector<std::int64_t> idx;  // flat element indices, group by group

  std::int64_t count() const { return ptr.empty() ? 0 : static_cast<std::int64_t>(ptr.size()) - 1; }
};

namespace detail {
// a * b (both >= 0) as an element count, or an sdnn::error naming `what` when it overflows.
inline std::int64_t extent(std::int64_t a, std::int64_t b, char const* what) {
  return static_cast<std::int64_t>(::sdnn::detail::checked_extent(a, b, what));
}
// Refuses groups that are not a valid partition of part of a rows x cols matrix.
inline void check_groups(weight_groups const& g, char const* what) {
  std::size_t const n = static_cast<std::size_t>(extent(g.rows, g.cols, what));
  SDNN_EXPECTS(!g.ptr.empty() && g.ptr.front() == 0 && g.ptr.back() == static_cast<std::int64_t>(g.idx.size()), what,
               ": the groups' ptr must start at 0 and end at idx.size() = ", g.idx.size());
  for (std::int64_t q = 0; q < g.count(); ++q)
    SDNN_EXPECTS(g.ptr[static_cast<std::size_t>(q)] <= g.ptr[static_cast<std::size_t>(q) + 1], what, ": group ", q,
                 " has ptr ", g.ptr[static_cast<std::size_t>(q)], " > ", g.ptr[static_cast<std::size_t>(q) + 1]);
  std::vector<std::uint8_t> seen(n, 0);
  for (std::int64_t q = 0; q < g.count(); ++q) {
    std::int64_t const b = g.ptr[static_cast<std::size_t>(q)], e = g.ptr[static_cast<std::size_t>(q) + 1];
    for (std::int64_t p = b; p < e; ++p) {
      std::int64_t const x = g.idx[static_cast<std::size_t>(p)];
      SDNN_EXPECTS(x >= 0 && x < static_cast<std::int64_t>(n), what, ": group ", q, " holds element ", x,
                   ", outside the ", g.rows, " x ", g.cols, " matrix");
      SDNN_EXPECTS(p == b || x > g.idx[static_cast<std::size_t>(p) - 1], what, ": group ", q,
                   " is not in ascending element order at element ", x);
      SDNN_EXPECTS(!seen[static_cast<std::size_t>(x)], what, ": element ", x, " (", x / g.cols, ", ", x % g.cols,
                   ") is in more than one group");
      seen[static_cast<std::size_t>(x)] = 1;
    }
  }
}
template <class T>
void check_view_shape(dense_view<T> w, std::int64_t rows, std::int64_t cols, char const* what, char const* name) {
  SDNN_EXPECTS_DIMS(w.rows == rows && w.cols == cols && (w.rows == 0 || w.ld >= w.cols), what, ": ", name, " is ",
                    w.rows, " x ", w.cols, " (ld ", w.ld, "), the groups are over a ", rows, " x ", cols, " matrix");
}
inline float& at_flat(dense_view<float> w, std::int64_t e) { return w(e / w.cols, e % w.cols); }
inline float at_flat(dense_view<float const> w, std::int64_t e) { return w(e / w.cols, e % w.cols); }
}  // namespace detail

// br x bc blocks of a rows x cols matrix, numbered block row-major ((i / br) * ceil(cols / bc) +
// j / bc); the blocks of the last block row / column are partial when br / bc does not divide.
inline weight_groups block_groups(std::int64_t rows, std::int64_t cols, std::int32_t br, std::int32_t bc) {
  SDNN_EXPECTS(br >= 1 && bc >= 1, "block_groups: the block shape must be positive, got ", br, " x ", bc);
  std::int64_t const n = detail::extent(rows, cols, "block_groups");
  weight_groups g{rows, cols, {0}, {}};
  g.idx.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i0 = 0; i0 < rows; i0 += br)
    for (std::int64_t j0 = 0; j0 < cols; j0 += bc) {
      for (std::int64_t i = i0; i < std::min(rows, i0 + br); ++i)
        for (std::int64_t j = j0; j < std::min(cols, j0 + bc); ++j) g.idx.push_back(i * cols + j);
      g.ptr.push_back(static_cast<std::int64_t>(g.idx.size()));
    }
  return g;
}

// The channel blocks of a convolution's GEMM view (K x R*S*C, column (r*S + s)*C + c): group
// i * (C / bc) + j holds output channels [i*bko, (i+1)*bko) x input channels [j*bc, (j+1)*bc) at
// every tap, the blocks of conv::channel_block_mask (conv/gemm_weights.hpp), numbered as it does.
inline weight_groups conv_channel_block_groups(std::int64_t K, std::int64_t R, std::int64_t S, std::int64_t C,
                                               std::int32_t bko, std::int32_t bc) {
  SDNN_EXPECTS(K >= 1 && R >= 1 && S >= 1 && C >= 1, "conv_channel_block_groups: K, R, S, C must be >= 1, got ", K,
               ", ", R, ", ", S, ", ", C);
  SDNN_EXPECTS(bko >= 1 && bc >= 1, "conv_channel_block_groups: the block shape must be positive, got ", bko, " x ",
               bc);
  SDNN_EXPECTS(K % bko == 0, "conv_channel_block_groups: K = ", K, " output channels is not a multiple of BKo = ", bko);
  SDNN_EXPECTS(C % bc == 0, "conv_channel_block_groups: C = ", C, " input channels is not a multiple of BC = ", bc);
  std::int64_t const taps = detail::extent(R, S, "conv_channel_block_groups");
  std::int64_t const cols = detail::extent(taps, C, "conv_channel_block_groups");
  std::int64_t const n = detail::extent(K, cols, "conv_channel_block_groups");
  weight_groups g{K, cols, {0}, {}};
  g.idx.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < K / bko; ++i)
    for (std::int64_t j = 0; j < C / bc; ++j) {
      for (std::int64_t ko = i * bko; ko < (i + 1) * bko; ++ko)
        for (std::int64_t t = 0; t < taps; ++t)
          for (std::int64_t c = j * bc; c < (j + 1) * bc; ++c) g.idx.push_back(ko * cols + t * C + c);
      g.ptr.push_back(static_cast<std::int64_t>(g.idx.size()));
    }
  return g;
}

// Whole filters of a convolution: group k is row k of the GEMM view (K x R*S*C).
inline weight_groups conv_filter_groups(std::int64_t K, std::int64_t R, std::int64_t S, std::int64_t C) {
  SDNN_EXPECTS(K >= 1 && R >= 1 && S >= 1 && C >= 1, "conv_filter_groups: K, R, S, C must be >= 1, got ", K, ", ", R,
               ", ", S, ", ", C);
  std::int64_t const cols = detail::extent(detail::extent(R, S, "conv_filter_groups"), C, "conv_filter_groups");
  weight_groups g{K, cols, {0}, {}};
  g.idx.resize(static_cast<std::size_t>(detail::extent(K, cols, "conv_filter_groups")));
  std::iota(g.idx.begin(), g.idx.end(), std::int64_t(0));
  for (std::int64_t k = 1; k <= K; ++k) g.ptr.push_back(k * cols);
  return g;
}

// The L2 norm of each group, in float: s = s + w[e] * w[e] over the group's idx in ascending order
// (each product and sum rounded to float, no fused multiply-add), then norm = std::sqrt(s) in
// float. A device kernel that reduces in another order matches these within a tolerance.
inline std::vector<float> group_norms(dense_view<float const> w, weight_groups const& g) {
  detail::check_groups(g, "group_norms");
  detail::check_view_shape(w, g.rows, g.cols, "group_norms", "w");
  std::vector<float> norm(static_cast<std::size_t>(g.count()));
  for (std::int64_t q = 0; q < g.count(); ++q) {
    float s = 0.0f;
    for (std::int64_t p = g.ptr[static_cast<std::size_t>(q)]; p < g.ptr[static_cast<std::size_t>(q) + 1]; ++p) {
      float const v = detail::at_flat(w, g.idx[static_cast<std::size_t>(p)]);
      s = s + v * v;
    }
    norm[static_cast<std::size_t>(q)] = std::sqrt(s);
  }
  return norm;
}

// The group-lasso penalty sum_g ||w_g||_2: the norms of group_norms summed in group order, in double.
inline double group_lasso_penalty(dense_view<float const> w, weight_groups const& g) {
  double sum = 0.0;
  for (float n : group_norms(w, g)) sum += static_cast<double>(n);
  return sum;
}

namespace detail {
inline void check_coefficient(float x, char const* what, char const* name) {
  SDNN_EXPECTS(std::isfinite(x) && x >= 0.0f, what, ": ", name, " must be finite and >= 0, got ", x);
}
}  // namespace detail

// The gradient of lambda * group_lasso_penalty added to grad: with norm = group_norms(w, g)[q], for
// every element e of every group q whose norm > 0, grad[e] = grad[e] + lambda * (w[e] / norm), in
// float (a group of norm 0 adds nothing: its subgradient 0). Other elements are left alone.
inline void group_lasso_add_grad(dense_view<float const> w, weight_groups const& g, float lambda,
                                 dense_view<float> grad) {
  detail::check_coefficient(lambda, "group_lasso_add_grad", "lambda");
  detail::check_view_shape(grad, g.rows, g.cols, "group_lasso_add_grad", "grad");
  std::vector<float> const norm = group_norms(w, g);
  for (std::int64_t q = 0; q < g.count(); ++q) {
    float const n = norm[static_cast<std::size_t>(q)];
    if (!(n > 0.0f)) continue;
    for (std::int64_t p = g.ptr[static_cast<std::size_t>(q)]; p < g.ptr[static_cast<std::size_t>(q) + 1]; ++p) {
      std::int64_t const e = g.idx[static_cast<std::size_t>(p)];
      float& d = detail::at_flat(grad, e);
      d = d + lambda * (detail::at_flat(w, e) / n);
    }
  }
}

// The proximal step of step * group_lasso_penalty: with norm = group_norms(w, g)[q], a group with
// norm <= step becomes exactly zero; the others are scaled, w[e] = w[e] * (1 - step / norm), in
// float. Elements in no group are left alone.
inline void group_lasso_prox(dense_view<float> w, weight_groups const& g, float step) {
  detail::check_coefficient(step, "group_lasso_prox", "step");
  std::vector<float> const norm = group_norms(w, g);
  for (std::int64_t q = 0; q < g.count(); ++q) {
    float const n = norm[static_cast<std::size_t>(q)];
    bool const zero = n <= step;
    float const scale = zero ? 0.0f : 1.0f - step / n;
    for (std::int64_t p = g.ptr[static_cast<std::size_t>(q)]; p < g.ptr[static_cast<std::size_t>(q) + 1]; ++p) {
      float& v = detail::at_flat(w, g.idx[static_cast<std::size_t>(p)]);
      v = zero ? 0.0f : v * scale;
    }
  }
}

// Masks: one std::uint8_t per element of w, row-major (flat index i * cols + j), 1 = kept, 0 = pruned.

// Zeroes the round(sparsity * G) groups (never all G) of smallest L2 norm (the float norms of
// group_norms; ties: the lower group id first). Elements in no group are kept. NaN in a group is
// refused, naming the entry.
inline std::vector<std::uint8_t> group_mask(dense_view<float const> w, weight_groups const& g, double sparsity) {
  detail::check_sparsity(sparsity, "group_mask");
  std::vector<float> const norm = group_norms(w, g);
  for (std::int64_t e : g.idx)
    SDNN_EXPECTS(!std::isnan(detail::at_flat(w, e)), "group_mask: w(", e / w.cols, ", ", e % w.cols,
                 ") is NaN (it has no magnitude order)");
  std::int64_t const G = g.count(), z = detail::zero_count(sparsity, G);
  std::vector<std::int64_t> order(static_cast<std::size_t>(G));
  std::iota(order.begin(), order.end(), std::int64_t(0));
  std::nth_element(order.begin(), order.begin() + z, order.end(), [&](std::int64_t a, std::int64_t b) {
    float const x = norm[static_cast<std::size_t>(a)], y = norm[static_cast<std::size_t>(b)];
    return x < y || (x == y && a < b);
  });
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(g.rows * g.cols), 1);
  for (std::int64_t k = 0; k < z; ++k) {
    std::int64_t const q = order[static_cast<std::size_t>(k)];
    for (std::int64_t p = g.ptr[static_cast<std::size_t>(q)]; p < g.ptr[static_cast<std::size_t>(q) + 1]; ++p)
      mask[static_cast<std::size_t>(g.idx[static_cast<std::size_t>(p)])] = 0;
  }
  return mask;
}

// Unstructured: zeroes the round(sparsity * M * K) entries (never all) of smallest |w|; ties: the
// lower flat index first. The entries prune_magnitude (train/op/prune_structured.hpp) zeroes.
inline std::vector<std::uint8_t> magnitude_mask(dense_view<float const> w, double sparsity) {
  detail::check_sparsity(sparsity, "magnitude_mask");
  SDNN_EXPECTS_DIMS(w.rows >= 0 && w.cols >= 0 && (w.rows == 0 || w.ld >= w.cols), "magnitude_mask: a ", w.rows,
                    " x ", w.cols, " view with ld ", w.ld, " is not a valid dense view");
  detail::check_no_nan(w, "magnitude_mask");
  std::int64_t const n = detail::extent(w.rows, w.cols, "magnitude_mask");
  std::int64_t const z = detail::zero_count(sparsity, n);
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t(0));
  std::nth_element(order.begin(), order.begin() + z, order.end(), [&](std::int64_t a, std::int64_t b) {
    float const x = std::fabs(detail::at_flat(w, a)), y = std::fabs(detail::at_flat(w, b));
    return x < y || (x == y && a < b);
  });
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(n), 1);
  for (std::int64_t k = 0; k < z; ++k) mask[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])] = 0;
  return mask;
}

// 2:4 along each row: in every aligned group of 4 columns keeps the 2 of largest |w| (ties: the
// lower column; the last group of a row is padded with zeros, which may take a kept slot). The
// choice ops::prune_sparse24 (train/op/prune_sparse24.hpp) makes. NaN is refused, naming the entry.
inline std::vector<std::uint8_t> sparse24_mask(dense_view<float const> w) {
  SDNN_EXPECTS_DIMS(w.rows >= 0 && w.cols >= 0 && (w.rows == 0 || w.ld >= w.cols), "sparse24_mask: a ", w.rows,
                    " x ", w.cols, " view with ld ", w.ld, " is not a valid dense view");
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(detail::extent(w.rows, w.cols, "sparse24_mask")), 0);
  for (std::int64_t r = 0; r < w.rows; ++r)
    for (std::int64_t c0 = 0; c0 < w.cols; c0 += 4) {
      float mag[4];
      for (int i = 0; i < 4; ++i) {
        std::int64_t const c = c0 + i;
        if (c >= w.cols) {
          mag[i] = 0.0f;
          continue;
        }
        SDNN_EXPECTS(!std::isnan(w(r, c)), "sparse24_mask: w(", r, ", ", c, ") is NaN (it has no magnitude order)");
        mag[i] = std::fabs(w(r, c));
      }
      int best = 0;  // strict > keeps the lower position on a tie
      for (int i = 1; i < 4; ++i)
        if (mag[i] > mag[best]) best = i;
      int second = best == 0 ? 1 : 0;
      for (int i = 0; i < 4; ++i)
        if (i != best && mag[i] > mag[second]) second = i;
      for (int i : {best, second})
        if (c0 + i < w.cols) mask[static_cast<std::size_t>(r * w.cols + c0 + i)] = 1;
    }
  return mask;
}

// Zeroes every element of w whose mask entry is 0 (any other value keeps it).
inline void apply_mask(dense_view<float> w, std::vector<std::uint8_t> const& mask) {
  SDNN_EXPECTS_DIMS(w.rows >= 0 && w.cols >= 0 && (w.rows == 0 || w.ld >= w.cols) &&
                        mask.size() == static_cast<std::size_t>(detail::extent(w.rows, w.cols, "apply_mask")),
                    "apply_mask: the mask has ", mask.size(), " entries, w is ", w.rows, " x ", w.cols);
  for (std::int64_t i = 0; i < w.rows; ++i)
    for (std::int64_t j = 0; j < w.cols; ++j)
      if (mask[static_cast<std::size_t>(i * w.cols + j)] == 0) w(i, j) = 0.0f;
}

// The share of zero entries of a mask (0 for an empty mask).
inline double mask_sparsity(std::vector<std::uint8_t> const& mask) {
  if (mask.empty()) return 0.0;
  auto const zeros = std::count(mask.begin(), mask.end(), std::uint8_t(0));
  return static_cast<double>(zeros) / static_cast<double>(mask.size());
}

// The cubic sparsity schedule of Zhu & Gupta (2017): s = target + (initial - target) * (1 - t)^3
// with t = clamp((step - begin) / (end - begin), 0, 1): exactly initial up to begin and exactly
// target from end on.
inline double sparsity_at(double initial, double target, std::int64_t step, std::int64_t begin, std::int64_t end) {
  SDNN_EXPECTS(initial >= 0.0 && initial < 1.0, "sparsity_at: initial sparsity must be in [0, 1), got ", initial);
  detail::check_sparsity(target, "sparsity_at");
  SDNN_EXPECTS(end > begin, "sparsity_at: the ramp must end after it begins, got begin ", begin, ", end ", end);
  if (step <= begin) return initial;
  if (step >= end) return target;
  double const u = 1.0 - static_cast<double>(step - begin) / static_cast<double>(end - begin);
  return target + (initial - target) * u * u * u;
}

// The settings a structured-sparsity training run checks before it starts.
struct structured_training_options {
  double lr = 0.01;              // learning rate, > 0
  double penalty = 0;            // group-lasso coefficient lambda, >= 0
  double target_sparsity = 0.9;  // in [0, 1)
};

inline void check_options(structured_training_options const& o) {
  SDNN_EXPECTS(std::isfinite(o.lr) && o.lr > 0.0, "check_options: learning rate must be > 0, got ", o.lr);
  SDNN_EXPECTS(std::isfinite(o.penalty) && o.penalty >= 0.0, "check_options: group-lasso penalty must be >= 0, got ",
               o.penalty);
  detail::check_sparsity(o.target_sparsity, "check_options");
}

}  // namespace sdnn::train
