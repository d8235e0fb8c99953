// sdnn/linear/op/dense_sparse.hpp - the dense x sparse product, the one path for Y * W:
//
//   C[M x N] = epi(A[M x K] * W[K x N])      A dense row-major (activations), W sparse CSR
//                                            (row = input neuron, column = output neuron)
//
// ops::spmm_dense_sparse runs it once (host_exec: the reference; cuda_exec: a plan run once);
// ops::dense_sparse_plan (linear/op/dense_sparse.cuh) is the plan that layers::sparse_linear
// and layer pipelines run. Policies: linear/policy/dense_sparse.hpp.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "sdnn/core/config.hpp"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/plan.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/linear/policy/dense_sparse.hpp"
#include "sdnn/linear/reference/spmm.hpp"

namespace sdnn::ops {

// The device plan (linear/op/dense_sparse.cuh). Declared here so host code can hold pointers to it.
// Every policy sums each output in the reference's order (k ascending, one rounding per add in
// the accumulator type; reference::dense_sparse_spmm), except the cuSPARSE baselines, whose
// order is cuSPARSE's.
template <class Policy, class T>
class dense_sparse_plan;

// Which rows of A and C a dense_sparse_plan::run_rows() touches (pipelines that keep one list
// of live rows for a whole network).
struct listed_rows {
  std::int32_t const* list = nullptr;   // device, [max_live] row ids; nullptr: rows 0..max_live-1
  std::int32_t const* count = nullptr;  // device scalar; nullptr: max_live
  std::int32_t max_live = 0;            // an upper bound of the count
};

// Whether a dense x sparse plan can be made for W (k x n, nnz nonzeros, 32-bit indices).
inline plan_status dense_sparse_can_implement(std::int64_t k, std::int64_t n, std::int64_t nnz) {
  constexpr std::int64_t imax = std::numeric_limits<std::int32_t>::max();
  if (k < 0 || n < 0 || nnz < 0)
    return plan_status::failure(::sdnn::detail::concat("dense x sparse: W is ", k, " x ", n, " with ", nnz,
                                               " nonzeros: sizes must be >= 0"));
  if (k > imax || n > imax || nnz > imax)
    return plan_status::failure(::sdnn::detail::concat("dense x sparse: W is ", k, " x ", n, " with ", nnz,
                                               " nonzeros: the plans index W with int32 (at most ", imax, ")"));
  return {};
}

namespace detail {
template <class TA, class T, class Index>
void check_dense_sparse_args(dense_view<TA> a, csr_view<T, Index> w, dense_view<T> c) {
  SDNN_EXPECTS_DIMS(a.rows >= 0 && a.cols == w.rows, "spmm_dense_sparse: A is ", a.rows, " x ", a.cols, " but W has ",
                    w.rows, " rows");
  SDNN_EXPECTS_DIMS(c.rows == a.rows && c.cols == w.cols, "spmm_dense_sparse: C must be ", a.rows, " x ", w.cols,
                    ", got ", c.rows, " x ", c.cols);
}
// A bias that carries its length (epi.bias_count >= 0) has one value per column of C.
template <class Acc, class T>
void check_dense_sparse_bias(basic_epilogue<Acc> const& epi, dense_view<T> c) {
  SDNN_EXPECTS_DIMS(epi.bias_count < 0 || epi.bias_count == c.cols, "spmm_dense_sparse: the bias has ",
                    epi.bias_count, " values, C has ", c.cols, " columns");
}
}  // namespace detail

// C = epi(A * W) on the host: the reference, for every policy. W is validated first (its
// arrays as the view states them: the first bad entry is named), and a bias that carries its
// length (epi.bias_count) must have one value per column of C.
template <class Policy, class TA, class T, class Index, class Acc = accumulator_t<T>>
void spmm_dense_sparse(host_exec, Policy, dense_view<TA> a, csr_view<T, Index> w, dense_view<T> c,
                       basic_epilogue<Acc> const& epi = {}) {
  static_assert(std::is_same_v<std::remove_const_t<TA>, T>, "spmm_dense_sparse: A and C must have the same value type");
  detail::check_dense_sparse_args(a, w, c);
  detail::check_dense_sparse_bias(epi, c);
  SDNN_EXPECTS(w.row_ptr && (w.nnz <= 0 || (w.col_idx && w.values)), "spmm_dense_sparse: W (", w.rows, " x ", w.cols,
               ", ", w.nnz, " nonzeros) has a null array");
  validate(w, static_cast<std::size_t>(w.rows) + 1, static_cast<std::size_t>(w.nnz), static_cast<std::size_t>(w.nnz));
  reference::dense_sparse_spmm(dense_view<T const>{a.rows, a.cols, a.ld, a.data}, w, c, epi);
}

}  // namespace sdnn::ops
