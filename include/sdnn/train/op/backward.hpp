// sdnn/train/op/backward.hpp - training entry points on the host executor
// (train/reference/backward.hpp holds the primitives and their rules): one sparse_linear layer's
// backward pass, and magnitude pruning of a CSR weight matrix for iterative prune + fine-tune
// (ops::prune_csr_magnitude, which keeps the largest |w| of the STORED entries and says where
// each kept entry came from, so optimizer state can follow). docs/train.md#csr-magnitude-pruning.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/train/reference/backward.hpp"

namespace sdnn::ops {

template <class T>
struct sparse_linear_grads {
  dense_view<T> dp;        // B x out scratch for dP (required; may be the caller's dY storage)
  T* dw = nullptr;         // [W.nnz] (required)
  T* dbias = nullptr;      // [out] or nullptr (needs epi.bias semantics: per column)
  dense_view<T> dx{};      // B x in, or {} to skip (the first layer needs no input gradient)
};

// One sparse_linear layer's backward pass (Y = epi(X * W), P = X * W the stored pre-activation):
// dP = dY * epi'(P); dW on W's pattern; dbias; dX = dP * W^T (when grads.dx is set).
template <class T, class Index>
void sparse_linear_backward(host_exec, dense_view<T const> x, dense_view<T const> p, dense_view<T const> dy,
                            csr_view<T, Index> w, basic_epilogue<accumulator_t<T>> const& epi,
                            sparse_linear_grads<T> const& g) {
  using Acc = accumulator_t<T>;
  SDNN_EXPECTS(g.dw != nullptr || w.nnz == 0, "sparse_linear_backward: the weight gradient buffer is required");
  std::vector<Acc> db;
  if (g.dbias) db.resize(static_cast<std::size_t>(p.cols));
  reference::epilogue_backward(p, dy, epi, g.dp, g.dbias ? db.data() : nullptr);
  if (g.dbias)
    for (std::int64_t j = 0; j < p.cols; ++j) g.dbias[j] = value_cast<T>(db[static_cast<std::size_t>(j)]);
  dense_view<T const> const dp = g.dp;
  reference::sparse_linear_backward_weight(x, dp, w, g.dw);
  if (g.dx.data) reference::sparse_linear_backward_input(dp, w, g.dx);
}

// layer:        round((1 - s) * rows * cols) entries in the whole matrix (one threshold per
//               layer, rows differ);
// uniform_rows: round((1 - s) * cols) entries in every row (equal nnz per row, what row-split
//               kernels like).
enum class csr_prune { layer, uniform_rows };

template <class T, class Index>
struct csr_prune_result {
  csr_matrix<T, Index> w;
  std::vector<Index> kept;  // [w.nnz()]: the position in the input of each kept entry
};

// Keeps the largest |w| of the STORED entries by `rule`; ties broken by the lower storage
// position; a row with fewer stored entries keeps them all; a NaN entry is an error (it has
// no magnitude order). Sparsity counts against the dense rows x cols, so pruning a 90 %
// matrix to 95 % keeps half of it. The result keeps the kept entries' values and says where
// each came from (kept[p_new] = p_old) so optimizer state (momentum) can follow (gather_kept).
template <class T, class Index>
csr_prune_result<T, Index> prune_csr_magnitude(csr_matrix<T, Index> const& w, double sparsity,
                                               csr_prune rule = csr_prune::layer) {
  SDNN_EXPECTS(sparsity >= 0.0 && sparsity <= 1.0, "prune_csr_magnitude: sparsity must be in [0, 1], got ", sparsity);
  Index const nnz = w.nnz();
  auto const& rp = w.row_ptr();
  auto const& v = w.values();
  // NaN has no magnitude order (by_magnitude would not be a strict weak order).
  for (Index i = 0; i < w.rows(); ++i)
    for (Index q = rp[i]; q < rp[i + 1]; ++q)
      SDNN_EXPECTS(!std::isnan(value_cast<double>(v[q])), "prune_csr_magnitude: entry ", q, " (row ", i, ", column ",
                   w.col_idx()[q], ") is NaN");
  auto by_magnitude = [&v](Index a, Index b) {
    double const x = std::fabs(value_cast<double>(v[a])), y = std::fabs(value_cast<double>(v[b]));
    return x > y || (x == y && a < b);
  };
  std::vector<char> keep(static_cast<std::size_t>(nnz), 0);
  auto keep_top = [&](std::vector<Index>& cand, std::int64_t n) {
    n = std::min<std::int64_t>(n, static_cast<std::int64_t>(cand.size()));
    std::nth_element(cand.begin(), cand.begin() + n, cand.end(), by_magnitude);
    for (std::int64_t i = 0; i < n; ++i) keep[static_cast<std::size_t>(cand[static_cast<std::size_t>(i)])] = 1;
  };
  if (rule == csr_prune::layer) {
    std::vector<Index> cand(static_cast<std::size_t>(nnz));
    std::iota(cand.begin(), cand.end(), Index(0));
    keep_top(cand, std::llround((1.0 - sparsity) * double(w.rows()) * double(w.cols())));
  } else {
    std::int64_t const per_row = std::llround((1.0 - sparsity) * double(w.cols()));
    for (Index i = 0; i < w.rows(); ++i) {
      std::vector<Index> cand(static_cast<std::size_t>(rp[i + 1] - rp[i]));
      std::iota(cand.begin(), cand.end(), rp[i]);
      keep_top(cand, per_row);
    }
  }
  csr_prune_result<T, Index> r;
  for (Index q = 0; q < nnz; ++q)
    if (keep[static_cast<std::size_t>(q)]) r.kept.push_back(q);
  r.w = csr_matrix<T, Index>(w.rows(), w.cols(), static_cast<Index>(r.kept.size()));
  Index out = 0;
  for (Index i = 0; i < w.rows(); ++i) {
    for (Index q = rp[i]; q < rp[i + 1]; ++q) {
      if (!keep[static_cast<std::size_t>(q)]) continue;
      r.w.col_idx()[out] = w.col_idx()[q];
      r.w.values()[out] = v[q];
      ++out;
    }
    r.w.row_ptr()[i + 1] = out;
  }
  return r;
}

// Carries per-entry optimizer state through a pruning step: out[p_new] = in[kept[p_new]].
template <class T, class Index>
std::vector<T> gather_kept(std::vector<T> const& in, std::vector<Index> const& kept) {
  std::vector<T> out(kept.size());
  for (std::size_t p = 0; p < kept.size(); ++p) out[p] = in.empty() ? T(0) : in[static_cast<std::size_t>(kept[p])];
  return out;
}

}  // namespace sdnn::ops
