// sdnn/conv/gemm_weights.hpp - structured-sparse weights of the implicit-GEMM convolution (host):
// magnitude pruning of the GEMM view Wg (K x R*S*C, conv/nhwc.hpp) to channel blocks (BKo output
// x BC input channels shared by all R*S taps) or to 2:4 along the reduction, the check that a
// GEMM view has a given channel-block structure, and the tensor-core formats built from them
// (block_sparse_matrix, sparse24_matrix). Pruning is deterministic: ties go to the lower index.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "sdnn/conv/nhwc.hpp"
#include "sdnn/conv/shape.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/formats/block_sparse.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/formats/sparse24.hpp"

namespace sdnn::conv {

// Which channel blocks of a layer are kept. Block (i, j) covers output channels [i*bko, (i+1)*bko)
// and input channels [j*bc, (j+1)*bc) at every tap (r, s): in the GEMM view, the R*S blocks of
// bko x bc at block row i and block columns tap*(C/bc) + j.
struct channel_block_mask {
  int bko = 16, bc = 16;
  std::int32_t row_blocks = 0, col_blocks = 0;  // K/bko, C/bc
  std::vector<std::uint8_t> kept;               // [row_blocks * col_blocks], row-major over (i, j)

  bool at(std::int32_t i, std::int32_t j) const {
    return kept[static_cast<std::size_t>(i) * static_cast<std::size_t>(col_blocks) + static_cast<std::size_t>(j)] != 0;
  }
  std::int64_t kept_count() const { return std::count(kept.begin(), kept.end(), std::uint8_t(1)); }
  std::int64_t blocks() const { return std::int64_t(row_blocks) * col_blocks; }
};

// Refuses a block shape the tensor-core kernels do not take (bko, bc in {16, 32, 64}) or one that
// does not divide the layer (K % bko, C % bc; such a layer stays dense).
inline void check_channel_blocks(conv_shape const& s, int bko, int bc) {
  s.check();
  auto ok = [](int b) { return b == 16 || b == 32 || b == 64; };
  SDNN_EXPECTS(ok(bko) && ok(bc), "conv channel blocks: BKo and BC must be 16, 32 or 64, got ", bko, " x ", bc);
  SDNN_EXPECTS(s.K % bko == 0, "conv channel blocks: K = ", s.K, " output channels is not a multiple of BKo = ", bko,
               " (keep this layer dense)");
  SDNN_EXPECTS(s.C % bc == 0, "conv channel blocks: C = ", s.C, " input channels is not a multiple of BC = ", bc,
               " (keep this layer dense)");
}

namespace detail {
template <class T>
void check_gemm_view(conv_shape const& s, dense_view<T> wg, char const* what) {
  SDNN_EXPECTS_DIMS(wg.rows == s.K && wg.cols == gemm_reduction(s) && (wg.rows == 0 || wg.ld >= wg.cols), what,
                    ": the GEMM view is ", wg.rows, " x ", wg.cols, " (ld ", wg.ld, "), the shape needs K x R*S*C = ",
                    s.K, " x ", gemm_reduction(s));
}
// Calls f(ko, k) for every element of channel block (i, j) of the GEMM view (all taps).
template <class F>
void for_each_in_channel_block(conv_shape const& s, int bko, int bc, std::int32_t i, std::int32_t j, F&& f) {
  std::int64_t const taps = std::int64_t(s.R) * s.S;
  for (std::int64_t ko = std::int64_t(i) * bko; ko < std::int64_t(i + 1) * bko; ++ko)
    for (std::int64_t t = 0; t < taps; ++t)
      for (std::int64_t c = std::int64_t(j) * bc; c < std::int64_t(j + 1) * bc; ++c) f(ko, t * s.C + c);
}
}  // namespace detail

// The channel-block mask of a GEMM view: a block is kept when any of its entries (any tap) is
// nonzero (-0 counts as zero).
template <class T>
channel_block_mask channel_block_mask_of(conv_shape const& s, dense_view<T> wg, int bko, int bc) {
  check_channel_blocks(s, bko, bc);
  detail::check_gemm_view(s, wg, "channel_block_mask_of");
  channel_block_mask m{bko, bc, s.K / bko, s.C / bc, {}};
  m.kept.assign(static_cast<std::size_t>(m.blocks()), 0);
  for (std::int32_t i = 0; i < m.row_blocks; ++i)
    for (std::int32_t j = 0; j < m.col_blocks; ++j) {
      bool any = false;
      detail::for_each_in_channel_block(s, bko, bc, i, j,
                                        [&](std::int64_t r, std::int64_t k) { any = any || ::sdnn::detail::is_nonzero(wg(r, k)); });
      m.kept[static_cast<std::size_t>(i) * m.col_blocks + j] = any ? 1 : 0;
    }
  return m;
}

// The result of channel-block pruning: the GEMM view with every dropped block zeroed, and the mask.
template <class T>
struct channel_block_pruning {
  dense_matrix<T> gemm;  // K x R*S*C
  channel_block_mask mask;
};

// Magnitude pruning to channel blocks: keeps the max(1, round((1 - sparsity) * blocks)) blocks of
// largest L2 norm (over all taps and entries, summed in double), ties to the lower block index
// i*col_blocks + j; zeroes the others. sparsity in [0, 1]; NaN weights are refused.
template <class T>
channel_block_pruning<std::remove_const_t<T>> prune_channel_blocks(conv_shape const& s, dense_view<T> wg, int bko, int bc,
                                                                   double sparsity) {
  using V = std::remove_const_t<T>;
  check_channel_blocks(s, bko, bc);
  detail::check_gemm_view(s, wg, "prune_channel_blocks");
  SDNN_EXPECTS(sparsity >= 0.0 && sparsity <= 1.0, "prune_channel_blocks: sparsity must be in [0, 1], got ", sparsity);
  channel_block_pruning<V> p{dense_matrix<V>(wg.rows, wg.cols), channel_block_mask{bko, bc, s.K / bko, s.C / bc, {}}};
  auto& m = p.mask;
  std::int64_t const nb = m.blocks();
  std::vector<double> norm(static_cast<std::size_t>(nb), 0.0);
  for (std::int32_t i = 0; i < m.row_blocks; ++i)
    for (std::int32_t j = 0; j < m.col_blocks; ++j)
      detail::for_each_in_channel_block(s, bko, bc, i, j, [&](std::int64_t r, std::int64_t k) {
        double const v = static_cast<double>(static_cast<float>(wg(r, k)));
        SDNN_EXPECTS(!std::isnan(v), "prune_channel_blocks: Wg(", r, ", ", k, ") is NaN (it has no magnitude order)");
        norm[static_cast<std::size_t>(i) * m.col_blocks + j] += v * v;
      });
  std::int64_t const keep =
      std::clamp<std::int64_t>(std::llround((1.0 - sparsity) * static_cast<double>(nb)), std::int64_t(1), nb);
  std::vector<std::int64_t> order(static_cast<std::size_t>(nb));
  std::iota(order.begin(), order.end(), std::int64_t(0));
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return norm[static_cast<std::size_t>(a)] > norm[static_cast<std::size_t>(b)];
  });
  m.kept.assign(static_cast<std::size_t>(nb), 0);
  for (std::int64_t q = 0; q < keep; ++q) m.kept[static_cast<std::size_t>(order[static_cast<std::size_t>(q)])] = 1;
  V const zero = value_cast<V>(0.0f);
  for (std::int64_t r = 0; r < wg.rows; ++r)
    for (std::int64_t k = 0; k < wg.cols; ++k) {
      std::int32_t const i = static_cast<std::int32_t>(r / bko), j = static_cast<std::int32_t>((k % s.C) / bc);
      p.gemm(r, k) = m.at(i, j) ? V(wg(r, k)) : zero;
    }
  return p;
}

// Checks that the GEMM view has the structure of the mask: every entry of a block the mask drops
// is zero (-0 counts as zero). Throws sdnn::error naming the first offending block and entry.
template <class T>
void validate_channel_blocks(conv_shape const& s, dense_view<T> wg, channel_block_mask const& m) {
  check_channel_blocks(s, m.bko, m.bc);
  detail::check_gemm_view(s, wg, "validate_channel_blocks");
  SDNN_EXPECTS(m.row_blocks == s.K / m.bko && m.col_blocks == s.C / m.bc &&
                   m.kept.size() == static_cast<std::size_t>(m.blocks()),
               "validate_channel_blocks: the mask is ", m.row_blocks, " x ", m.col_blocks, " blocks (", m.kept.size(),
               " flags), the layer has ", s.K / m.bko, " x ", s.C / m.bc);
  for (std::int32_t i = 0; i < m.row_blocks; ++i)
    for (std::int32_t j = 0; j < m.col_blocks; ++j) {
      if (m.at(i, j)) continue;
      detail::for_each_in_channel_block(s, m.bko, m.bc, i, j, [&](std::int64_t r, std::int64_t k) {
        if (!::sdnn::detail::is_nonzero(wg(r, k))) return;
        std::int64_t const tap = k / s.C;
        SDNN_FAIL("validate_channel_blocks: channel block (", i, ", ", j, ") (output channels ", i * m.bko, "..",
                  (i + 1) * m.bko - 1, ", input channels ", j * m.bc, "..", (j + 1) * m.bc - 1,
                  ") is dropped by the mask but Wg(", r, ", ", k, ") (tap r = ", tap / s.S, ", s = ", tap % s.S,
                  ", c = ", k % s.C, ") = ", static_cast<float>(wg(r, k)), " is nonzero");
      });
    }
}

// The block-sparse form (blocks bko x bc) of the GEMM view with the mask's structure (checked
// first by validate_channel_blocks): a kept channel block (i, j) is stored as R*S GEMM blocks, at
// block row i and block columns tap*(C/bc) + j, tap = r*S + s, each even where its entries are all
// zero, so every kept channel block has all its taps; dropped blocks are not stored.
template <class T>
block_sparse_matrix<std::remove_const_t<T>> channel_block_gemm_weights(conv_shape const& s, dense_view<T> wg,
                                                                       channel_block_mask const& m) {
  using V = std::remove_const_t<T>;
  validate_channel_blocks(s, wg, m);
  SDNN_EXPECTS(wg.cols <= INT32_MAX && wg.rows <= INT32_MAX, "channel_block_gemm_weights: a ", wg.rows, " x ",
               wg.cols, " GEMM view does not fit the int32 extents of block_sparse");
  std::int64_t const taps = std::int64_t(s.R) * s.S;
  return ::sdnn::detail::build_block_sparse<V>(
      static_cast<std::int32_t>(wg.rows), static_cast<std::int32_t>(wg.cols), m.bko, m.bc,
      [&](std::int32_t i, auto&& emit) {
        for (std::int32_t j = 0; j < m.col_blocks; ++j) {
          if (!m.at(i, j)) continue;
          for (std::int64_t ko = std::int64_t(i) * m.bko; ko < std::int64_t(i + 1) * m.bko; ++ko)
            for (std::int64_t t = 0; t < taps; ++t)
              for (std::int64_t c = std::int64_t(j) * m.bc; c < std::int64_t(j + 1) * m.bc; ++c)
                emit(ko, t * s.C + c, wg(ko, t * s.C + c));  // zeros too: the block is stored whole
        }
      });
}

// The same with the mask read off the GEMM view (channel_block_mask_of).
template <class T>
block_sparse_matrix<std::remove_const_t<T>> channel_block_gemm_weights(conv_shape const& s, dense_view<T> wg, int bko,
                                                                       int bc) {
  return channel_block_gemm_weights(s, wg, channel_block_mask_of(s, wg, bko, bc));
}

// Magnitude 2:4 pruning of the GEMM view along the reduction: in every aligned group of 4
// consecutive k of a row (4 consecutive channels of one tap when C % 4 == 0; a group spans two
// taps otherwise) keeps the 2 entries of largest |w|, ties to the lower position (+0 and -0 tie),
// and zeroes the other 2. The last group of a row with R*S*C % 4 != 0 is completed with zeros.
// NaN weights are refused. The result is accepted by sparse24_from_dense.
template <class T>
dense_matrix<std::remove_const_t<T>> prune_gemm_sparse24(conv_shape const& s, dense_view<T> wg) {
  using V = std::remove_const_t<T>;
  detail::check_gemm_view(s, wg, "prune_gemm_sparse24");
  dense_matrix<V> out(wg.rows, wg.cols);
  V const zero = value_cast<V>(0.0f);
  for (std::int64_t r = 0; r < wg.rows; ++r)
    for (std::int64_t g0 = 0; g0 < wg.cols; g0 += sparse24_group) {
      float mag[sparse24_group];
      for (int i = 0; i < sparse24_group; ++i) {
        std::int64_t const k = g0 + i;
        if (k >= wg.cols) {
          mag[i] = -1.0f;  // past the last column: never chosen over a real entry
          continue;
        }
        float const v = static_cast<float>(wg(r, k));
        SDNN_EXPECTS(!std::isnan(v), "prune_gemm_sparse24: Wg(", r, ", ", k, ") is NaN (it has no magnitude order)");
        mag[i] = std::fabs(v);
      }
      int best = 0;  // strict > keeps the lower position on a tie
      for (int i = 1; i < sparse24_group; ++i)
        if (mag[i] > mag[best]) best = i;
      int second = best == 0 ? 1 : 0;
      for (int i = 0; i < sparse24_group; ++i)
        if (i != best && mag[i] > mag[second]) second = i;
      for (int i = 0; i < sparse24_group && g0 + i < wg.cols; ++i)
        out(r, g0 + i) = (i == best || i == second) ? V(wg(r, g0 + i)) : zero;
    }
  return out;
}

// The 2:4 format of the GEMM view after prune_gemm_sparse24.
template <class T>
sparse24_matrix<std::remove_const_t<T>> gemm_sparse24_weights(conv_shape const& s, dense_view<T> wg) {
  auto const pruned = prune_gemm_sparse24(s, wg);
  return sparse24_from_dense(pruned.view());
}

}  // namespace sdnn::conv
