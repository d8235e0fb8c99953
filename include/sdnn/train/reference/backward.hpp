// sdnn/train/reference/backward.hpp - host reference of the training primitives of a sparse MLP: the
// backward pass of sparse_linear (Y = epi(X * W), X dense B x in, W CSR in x out) and of its
// epilogue (bias, ReLU, cap, bias only on nonzero products), a softmax cross-entropy loss, and
// an SGD/momentum step that keeps W's sparsity pattern. The oracle of the device kernels
// (train/kernel/backward.cuh): the gradients, the subgradients at the kinks and the orders of
// summation are in docs/train.md#backward-pass.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn::reference {

namespace detail {
template <class T>
struct non_deduced {
  using type = T;
};
}  // namespace detail

// Y = epi(P) elementwise (the forward epilogue applied to a stored pre-activation).
template <class T, class Acc>
void apply_epilogue(dense_view<T const> p, basic_epilogue<Acc> const& epi, dense_view<T> y) {
  SDNN_EXPECTS_DIMS(p.rows == y.rows && p.cols == y.cols, "apply_epilogue: P is ", p.rows, " x ", p.cols,
                    " but Y is ", y.rows, " x ", y.cols);
  for (std::int64_t r = 0; r < p.rows; ++r)
    for (std::int64_t j = 0; j < p.cols; ++j) y(r, j) = value_cast<T>(epi(value_cast<Acc>(p(r, j)), j));
}

// dP = dY * epi'(P). dbias: [cols] or nullptr (then not computed); dbias_scalar: nullptr or a
// scalar receiving the gradient of epi.bias_scalar; both sum over the entries where the bias is
// applied (all of them, or P != 0 when !epi.bias_on_zero), r ascending, in Acc. dP may alias dY.
// Subgradients, with a = P + bias where the bias is applied, else a = P: ReLU passes the
// gradient where a > 0 (0 at a == 0); the cap passes it where a < cap (0 at a == cap); so the
// gradient flows exactly where the output is strictly between the clamps. With the bias only
// on nonzero products, y jumps at P == 0 when bias != 0; this takes the one-sided derivative
// of the branch actually evaluated: at P == 0 no bias is added, so a = 0 and ReLU blocks it (dP
// = 0 there, no bias gradient); everywhere else it is the ordinary bias + ReLU + cap.
template <class T, class Acc>
void epilogue_backward(dense_view<T const> p, dense_view<T const> dy, basic_epilogue<Acc> const& epi,
                       dense_view<T> dp, typename detail::non_deduced<Acc>::type* dbias = nullptr,
                       typename detail::non_deduced<Acc>::type* dbias_scalar = nullptr) {
  SDNN_EXPECTS_DIMS(p.rows == dy.rows && p.cols == dy.cols && dp.rows == p.rows && dp.cols == p.cols,
                    "epilogue_backward: P, dY and dP must have one shape, got ", p.rows, " x ", p.cols, ", ",
                    dy.rows, " x ", dy.cols, ", ", dp.rows, " x ", dp.cols);
  if (dbias)
    for (std::int64_t j = 0; j < p.cols; ++j) dbias[j] = Acc(0);
  if (dbias_scalar) *dbias_scalar = Acc(0);
  for (std::int64_t r = 0; r < p.rows; ++r) {
    for (std::int64_t j = 0; j < p.cols; ++j) {
      Acc a = value_cast<Acc>(p(r, j));
      bool const biased = epi.bias_on_zero || a != Acc(0);
      if (biased) {
        if (epi.bias) a += epi.bias[j];
        a += epi.bias_scalar;
      }
      bool const pass = (!epi.relu || a > Acc(0)) && (!epi.has_cap || a < epi.cap);
      Acc const g = pass ? value_cast<Acc>(dy(r, j)) : Acc(0);
      dp(r, j) = value_cast<T>(g);
      if (biased) {
        if (dbias) dbias[j] += g;
        if (dbias_scalar) *dbias_scalar += g;
      }
    }
  }
}

// dX[B x in] = dP[B x out] * W^T: dX[r, i] = sum over the stored (i, j) of W(i, j) * dP[r, j],
// per (r, i) p ascending over row i of W, in Acc = accumulator_t<T>.
template <class T, class Index>
void sparse_linear_backward_input(dense_view<T const> dp, csr_view<T, Index> w, dense_view<T> dx) {
  using Acc = accumulator_t<T>;
  SDNN_EXPECTS_DIMS(dp.cols == w.cols, "sparse_linear_backward_input: dY has ", dp.cols, " columns but W is ",
                    w.rows, " x ", w.cols);
  SDNN_EXPECTS_DIMS(dx.rows == dp.rows && dx.cols == w.rows, "sparse_linear_backward_input: dX must be ",
                    dp.rows, " x ", w.rows, ", got ", dx.rows, " x ", dx.cols);
  for (std::int64_t r = 0; r < dp.rows; ++r) {
    T const* g = dp.row(r);
    T* out = dx.row(r);
    for (Index i = 0; i < w.rows; ++i) {
      Acc s(0);
      for (Index q = w.row_ptr[i]; q < w.row_ptr[i + 1]; ++q)
        s += value_cast<Acc>(w.values[q]) * value_cast<Acc>(g[w.col_idx[q]]);
      out[i] = value_cast<T>(s);
    }
  }
}

// dW on W's pattern: dw_values[q] = sum_r X[r, i] * dP[r, j] for every stored q = (i, j) of W
// (w.nnz entries; an SDDMM: the dense X^T * dP sampled on W's pattern), r ascending, zero
// X[r, i] skipped, in Acc.
template <class T, class Index>
void sparse_linear_backward_weight(dense_view<T const> x, dense_view<T const> dp, csr_view<T, Index> w,
                                   T* dw_values) {
  using Acc = accumulator_t<T>;
  SDNN_EXPECTS_DIMS(x.rows == dp.rows && x.cols == w.rows && dp.cols == w.cols,
                    "sparse_linear_backward_weight: X is ", x.rows, " x ", x.cols, ", dY is ", dp.rows, " x ",
                    dp.cols, ", W is ", w.rows, " x ", w.cols);
  std::vector<Acc> acc(static_cast<std::size_t>(w.nnz), Acc(0));
  // r ascending for every entry: loop rows of X outside, so X and dP are read row by row.
  for (std::int64_t r = 0; r < x.rows; ++r) {
    T const* xr = x.row(r);
    T const* g = dp.row(r);
    for (Index i = 0; i < w.rows; ++i) {
      Acc const xi = value_cast<Acc>(xr[i]);
      if (xi == Acc(0)) continue;
      for (Index q = w.row_ptr[i]; q < w.row_ptr[i + 1]; ++q)
        acc[static_cast<std::size_t>(q)] += xi * value_cast<Acc>(g[w.col_idx[q]]);
    }
  }
  for (Index q = 0; q < w.nnz; ++q) dw_values[q] = value_cast<T>(acc[static_cast<std::size_t>(q)]);
}

// dbias[j] = sum_r dP[r, j], r ascending in Acc (for a bias applied everywhere;
// epilogue_backward computes it too).
template <class T>
void bias_backward(dense_view<T const> dp, T* dbias) {
  using Acc = accumulator_t<T>;
  std::vector<Acc> acc(static_cast<std::size_t>(dp.cols), Acc(0));
  for (std::int64_t r = 0; r < dp.rows; ++r)
    for (std::int64_t j = 0; j < dp.cols; ++j) acc[static_cast<std::size_t>(j)] += value_cast<Acc>(dp(r, j));
  for (std::int64_t j = 0; j < dp.cols; ++j) dbias[j] = value_cast<T>(acc[static_cast<std::size_t>(j)]);
}

// Mean softmax cross-entropy over the B rows of `logits` (B x C), labels[r] in [0, C):
//   L = (1/B) sum_r [ logsumexp(z_r) - z_r[label_r] ],  computed stably (max subtracted), in
//   double. dlogits (B x C, may be {} to skip; may alias logits) = (softmax(z_r) - onehot) / B.
// B == 0 gives 0 (and nothing to write). C must be >= 1.
template <class T, class Label>
double softmax_cross_entropy(dense_view<T const> logits, Label const* labels, dense_view<T> dlogits = {}) {
  std::int64_t const B = logits.rows, C = logits.cols;
  SDNN_EXPECTS(B == 0 || C >= 1, "softmax_cross_entropy: need at least one class, got ", C);
  bool const grad = dlogits.data != nullptr;
  if (grad)
    SDNN_EXPECTS_DIMS(dlogits.rows == B && dlogits.cols == C, "softmax_cross_entropy: dlogits must be ", B, " x ",
                      C, ", got ", dlogits.rows, " x ", dlogits.cols);
  if (B == 0) return 0.0;
  double total = 0.0;
  std::vector<double> e(static_cast<std::size_t>(C));
  for (std::int64_t r = 0; r < B; ++r) {
    std::int64_t const y = static_cast<std::int64_t>(labels[r]);
    SDNN_EXPECTS(y >= 0 && y < C, "softmax_cross_entropy: label of row ", r, " is ", y, ", not in [0, ", C, ")");
    double m = -std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j < C; ++j) m = std::max(m, value_cast<double>(logits(r, j)));
    double s = 0.0;
    for (std::int64_t j = 0; j < C; ++j) s += (e[static_cast<std::size_t>(j)] = std::exp(value_cast<double>(logits(r, j)) - m));
    total += std::log(s) - (value_cast<double>(logits(r, y)) - m);
    if (grad)
      for (std::int64_t j = 0; j < C; ++j)
        dlogits(r, j) = value_cast<T>((e[static_cast<std::size_t>(j)] / s - (j == y ? 1.0 : 0.0)) / double(B));
  }
  return total / double(B);
}

// Index of the largest logit of row r (first on ties): the predicted class.
template <class T>
std::int64_t argmax_row(dense_view<T const> logits, std::int64_t r) {
  std::int64_t best = 0;
  for (std::int64_t j = 1; j < logits.cols; ++j)
    if (logits(r, j) > logits(r, best)) best = j;
  return best;
}

struct sgd_options {
  double lr = 0.01;            // learning rate
  double momentum = 0.0;       // mu; 0 = plain SGD
  double weight_decay = 0.0;   // L2 coefficient lambda, added to the gradient: g + lambda * w
  bool nesterov = false;
};

// One SGD step on n parameters (the stored values of a CSR W, or a bias):
//   g' = g + lambda * w;  v = mu * v + g';  w -= lr * (nesterov ? g' + mu * v : v)
// computed in double per element, stored as T. velocity: n entries (zero before the first
// step); may be nullptr when momentum == 0. Only the n values change, so applied to a CSR's
// values the pattern (row_ptr, col_idx) is kept exactly; an entry that reaches 0 stays stored.
template <class T>
void sgd_step(T* w, T const* g, T* velocity, std::size_t n, sgd_options const& o) {
  SDNN_EXPECTS(velocity != nullptr || n == 0 || (o.momentum == 0.0 && !o.nesterov),
               "sgd_step: momentum needs a velocity buffer");
  for (std::size_t k = 0; k < n; ++k) {
    double const wk = value_cast<double>(w[k]);
    double const gk = value_cast<double>(g[k]) + o.weight_decay * wk;
    double step = gk;
    if (velocity) {
      double const v = o.momentum * value_cast<double>(velocity[k]) + gk;
      velocity[k] = value_cast<T>(v);
      step = o.nesterov ? gk + o.momentum * v : v;
    }
    w[k] = value_cast<T>(wk - o.lr * step);
  }
}

// The CSR form: dw and velocity are given on W's pattern (W.nnz values each).
template <class T, class Index>
void sgd_step(csr_matrix<T, Index>& w, std::vector<T> const& dw, std::vector<T>& velocity, sgd_options const& o) {
  auto const n = static_cast<std::size_t>(w.nnz());
  SDNN_EXPECTS(dw.size() == n, "sgd_step: the gradient has ", dw.size(), " values but W stores ", n);
  if (velocity.size() != n) {
    SDNN_EXPECTS(velocity.empty(), "sgd_step: the velocity has ", velocity.size(), " values but W stores ", n);
    velocity.assign(n, T(0));
  }
  sgd_step(w.values().data(), dw.data(), velocity.data(), n, o);
}

}  // namespace sdnn::reference
