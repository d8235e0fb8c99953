// sdnn/train/op/backward.cuh - the training primitives on the device: cuda_exec overloads of the
// host calls of train/op/backward.hpp and train/reference/backward.hpp (same names, arguments and
// rules; every pointer and view here is device memory, the epilogue's bias included). Only
// softmax_cross_entropy (the one returning the loss) synchronises; everything else is enqueued
// on exec.stream. Gradients and the SGD step are bitwise the host reference's, the loss within
// rounding: docs/train.md#orders-of-summation. Shapes are checked on the host, as by the host
// calls; not checked: W's row_ptr/col_idx (device data) and, in the async loss, the labels.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/train/kernel/backward.cuh"
#include "sdnn/train/op/backward.hpp"
#include "sdnn/train/reference/backward.hpp"

namespace sdnn::ops {

namespace detail {
template <class T>
using train_non_deduced_t = typename reference::detail::non_deduced<T>::type;
}  // namespace detail

// dP = dY * epi'(P) (dP may alias dY); dbias [cols] (device, nullptr: skipped) = the column
// sums of dP over the biased entries, in Acc, r ascending (bitwise the host's).
template <class T, class Acc>
void epilogue_backward(cuda_exec exec, dense_view<T const> p, dense_view<T const> dy, basic_epilogue<Acc> const& epi,
                       dense_view<T> dp, detail::train_non_deduced_t<Acc>* dbias = nullptr) {
  SDNN_EXPECTS_DIMS(p.rows == dy.rows && p.cols == dy.cols && dp.rows == p.rows && dp.cols == p.cols,
                    "epilogue_backward: P, dY and dP must have one shape, got ", p.rows, " x ", p.cols, ", ",
                    dy.rows, " x ", dy.cols, ", ", dp.rows, " x ", dp.cols);
  kernels::epilogue_backward(p, dy, epi, dp, dbias, exec);
}

// dX[B x in] = dP[B x out] * W^T.
template <class T, class Index>
void sparse_linear_backward_input(cuda_exec exec, dense_view<T const> dp, csr_view<T, Index> w, dense_view<T> dx) {
  SDNN_EXPECTS_DIMS(dp.cols == w.cols, "sparse_linear_backward_input: dY has ", dp.cols, " columns but W is ",
                    w.rows, " x ", w.cols);
  SDNN_EXPECTS_DIMS(dx.rows == dp.rows && dx.cols == w.rows, "sparse_linear_backward_input: dX must be ",
                    dp.rows, " x ", w.rows, ", got ", dx.rows, " x ", dx.cols);
  kernels::sparse_linear_backward_input(dp, w, dx, exec);
}

// dW on W's pattern: dw_values[q] for every stored q (w.nnz device values).
template <class T, class Index>
void sparse_linear_backward_weight(cuda_exec exec, dense_view<T const> x, dense_view<T const> dp,
                                   csr_view<T, Index> w, T* dw_values) {
  SDNN_EXPECTS_DIMS(x.rows == dp.rows && x.cols == w.rows && dp.cols == w.cols,
                    "sparse_linear_backward_weight: X is ", x.rows, " x ", x.cols, ", dY is ", dp.rows, " x ",
                    dp.cols, ", W is ", w.rows, " x ", w.cols);
  kernels::sparse_linear_backward_weight(x, dp, w, dw_values, exec);
}

// dbias[j] = sum_r dP[r, j] (r ascending, in accumulator_t<T>).
template <class T>
void bias_backward(cuda_exec exec, dense_view<T const> dp, T* dbias) {
  kernels::bias_backward(dp, dbias, exec);
}

// One sparse_linear layer's backward pass on the device (the host call's rules, train/op/backward.hpp):
// every view and pointer (grads included) is device memory. Never synchronises.
template <class T, class Index>
void sparse_linear_backward(cuda_exec exec, dense_view<T const> x, dense_view<T const> p, dense_view<T const> dy,
                            csr_view<T, Index> w, basic_epilogue<accumulator_t<T>> const& epi,
                            sparse_linear_grads<T> const& g) {
  // (a W without entries has no gradient: an empty device buffer's null data() is fine then)
  SDNN_EXPECTS(g.dw != nullptr || w.nnz == 0, "sparse_linear_backward: the weight gradient buffer is required");
  SDNN_EXPECTS_DIMS(p.rows == dy.rows && p.cols == dy.cols && g.dp.rows == p.rows && g.dp.cols == p.cols,
                    "sparse_linear_backward: P, dY and dP must have one shape, got ", p.rows, " x ", p.cols, ", ",
                    dy.rows, " x ", dy.cols, ", ", g.dp.rows, " x ", g.dp.cols);
  // dbias (T) straight from the Acc column sums: one conversion, as the host's
  kernels::epilogue_backward(p, dy, epi, g.dp, g.dbias, exec);
  dense_view<T const> const dp = g.dp;
  sparse_linear_backward_weight(exec, x, dp, w, g.dw);
  if (g.dx.data) sparse_linear_backward_input(exec, dp, w, g.dx);
}

// Mean softmax cross-entropy of logits (B x C) with labels[r] in [0, C), enqueued: *loss (a
// device double) receives the mean, dlogits (may be {} or alias logits) the gradient
// (softmax - onehot) / B. Within rounding of the host's (device exp/log and a different
// summation order, both deterministic). A label outside [0, C) gives NaN (loss and that
// gradient row); labels are not checked here. Allocates B doubles of stream-ordered scratch.
// Never synchronises.
template <class T, class Label>
void softmax_cross_entropy_async(cuda_exec exec, dense_view<T const> logits, Label const* labels, double* loss,
                                 dense_view<T> dlogits = {}, unsigned long long* bad_row = nullptr) {
  std::int64_t const B = logits.rows, C = logits.cols;
  SDNN_EXPECTS(B == 0 || C >= 1, "softmax_cross_entropy: need at least one class, got ", C);
  if (dlogits.data)
    SDNN_EXPECTS_DIMS(dlogits.rows == B && dlogits.cols == C, "softmax_cross_entropy: dlogits must be ", B, " x ",
                      C, ", got ", dlogits.rows, " x ", dlogits.cols);
  device_buffer<double> rows(static_cast<std::size_t>(B), exec);
  device_buffer<unsigned long long> bad;
  if (!bad_row) {
    bad = device_buffer<unsigned long long>(1, exec);
    bad_row = bad.data();
    SDNN_CUDA_CHECK(cudaMemsetAsync(bad_row, 0xff, sizeof(unsigned long long), exec.stream));
  }
  kernels::softmax_cross_entropy(logits, labels, loss, dlogits, rows.data(), bad_row, exec);
}

// The same, returning the loss as the host call does; throws as the host on a label outside
// [0, C) (naming the lowest such row). SYNCHRONISES exec.stream.
template <class T, class Label>
double softmax_cross_entropy(cuda_exec exec, dense_view<T const> logits, Label const* labels,
                             dense_view<T> dlogits = {}) {
  device_buffer<double> loss(1, exec);
  device_buffer<unsigned long long> bad(1, exec);
  SDNN_CUDA_CHECK(cudaMemsetAsync(bad.data(), 0xff, sizeof(unsigned long long), exec.stream));
  softmax_cross_entropy_async(exec, logits, labels, loss.data(), dlogits, bad.data());
  double h_loss = 0.0;
  unsigned long long h_bad = 0;
  SDNN_CUDA_CHECK(cudaMemcpyAsync(&h_loss, loss.data(), sizeof(double), cudaMemcpyDeviceToHost, exec.stream));
  SDNN_CUDA_CHECK(cudaMemcpyAsync(&h_bad, bad.data(), sizeof(h_bad), cudaMemcpyDeviceToHost, exec.stream));
  SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
  if (h_bad != ~0ull) {
    Label y{};
    SDNN_CUDA_CHECK(cudaMemcpy(&y, labels + h_bad, sizeof(Label), cudaMemcpyDeviceToHost));
    SDNN_EXPECTS(false, "softmax_cross_entropy: label of row ", h_bad, " is ", static_cast<std::int64_t>(y),
                 ", not in [0, ", logits.cols, ")");
  }
  return h_loss;
}

// One SGD step on n device values (reference::sgd_step's rule, bitwise: no FMA contraction on
// the device; a host compiler that contracts a*b+c into an FMA, e.g. g++ -ffp-contract=fast on
// a target with FMA, makes the host differ in the last bits): velocity may be nullptr when
// momentum == 0 and not nesterov. The CSR pattern is untouched by construction.
template <class T>
void sgd_step(cuda_exec exec, T* w, T const* g, T* velocity, std::size_t n, reference::sgd_options const& o) {
  SDNN_EXPECTS(velocity != nullptr || n == 0 || (o.momentum == 0.0 && !o.nesterov),
               "sgd_step: momentum needs a velocity buffer");
  kernels::sgd_step(w, g, velocity, static_cast<std::int64_t>(n), o.lr, o.momentum, o.weight_decay, o.nesterov, exec);
}

// The device CSR form: dw and velocity hold W.nnz device values each; an empty velocity is
// allocated and zeroed (before the first step), as by the host call.
template <class T, class Index>
void sgd_step(cuda_exec exec, csr_matrix<T, Index, device_space>& w, device_buffer<T> const& dw,
              device_buffer<T>& velocity, reference::sgd_options const& o) {
  auto const n = static_cast<std::size_t>(w.nnz());
  SDNN_EXPECTS(dw.size() == n, "sgd_step: the gradient has ", dw.size(), " values but W stores ", n);
  if (velocity.size() != n) {
    SDNN_EXPECTS(velocity.empty(), "sgd_step: the velocity has ", velocity.size(), " values but W stores ", n);
    velocity = device_buffer<T>(n, exec);
    if (n) SDNN_CUDA_CHECK(cudaMemsetAsync(velocity.data(), 0, n * sizeof(T), exec.stream));
  }
  sgd_step(exec, w.values().data(), dw.data(), velocity.data(), n, o);
}

}  // namespace sdnn::ops
