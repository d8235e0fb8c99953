// sdnn/linear/op/spmm.hpp - sparse product entry points: argument checks, then dispatch on
// (executor, policy).
//
//   ops::spmm(exec, policy, a, b, c, epi)               C[M x N] = epi(A_sparse * B)
//       a: csr_view, coo_view, ell_view or tiled_dense_view<T const>
// (the dense x sparse product A * W_csr is ops::spmm_dense_sparse, linear/op/dense_sparse.hpp)
// host_exec runs the reference (linear/reference/spmm.hpp) for every policy; cuda_exec
// implementations and the reusable plans live in linear/op/spmm.cuh.
#pragma once

#include <cstdint>
#include <type_traits>

#include "sdnn/core/config.hpp"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/coo.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/formats/ell.hpp"
#include "sdnn/formats/tiled_dense.hpp"
#include "sdnn/linear/policy/automatic.hpp"
#include "sdnn/linear/policy/spmm.hpp"
#include "sdnn/linear/reference/spmm.hpp"

namespace sdnn::ops {

template <class Exec, class Policy>
struct spmm_impl {
  static_assert(::sdnn::detail::dependent_false<Exec, Policy>,
                "ops::spmm: no implementation for this (executor, policy); for cuda_exec include sdnn/linear/op/spmm.cuh");
};

// The host executor: every policy is the reference.
template <class Policy>
struct spmm_impl<host_exec, Policy> {
  template <class SparseView, class T, class Acc>
  static void run(host_exec, SparseView a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi) {
    reference::spmm(a, b, c, epi);
  }
};

namespace detail {
template <class T>
void check_spmm_args(std::int64_t m, std::int64_t k, dense_view<T const> b, dense_view<T> c, char const* what) {
  SDNN_EXPECTS(m >= 0 && k >= 0 && b.cols >= 0, what, ": shapes must be non-negative");
  SDNN_EXPECTS_DIMS(b.rows == k, what, ": A is ", m, " x ", k, " but B has ", b.rows, " rows (expected ", k, ")");
  SDNN_EXPECTS_DIMS(c.rows == m && c.cols == b.cols, what, ": C must be ", m, " x ", b.cols, ", got ", c.rows, " x ",
                    c.cols);
  SDNN_EXPECTS(b.ld >= b.cols && c.ld >= c.cols, what, ": leading dimensions must be >= cols, got ", b.ld, ", ",
               c.ld);
  SDNN_EXPECTS((b.data != nullptr || b.rows == 0 || b.cols == 0) && (c.data != nullptr || c.rows == 0 || c.cols == 0),
               what, ": a non-empty dense operand has a null data pointer");
}
template <class T, class Index>
std::int64_t rows_of(csr_view<T, Index> const& a) { return a.rows; }
template <class T, class Index>
std::int64_t cols_of(csr_view<T, Index> const& a) { return a.cols; }
template <class T, class Index>
std::int64_t rows_of(coo_view<T, Index> const& a) { return a.rows; }
template <class T, class Index>
std::int64_t cols_of(coo_view<T, Index> const& a) { return a.cols; }
template <class T, class Index>
std::int64_t rows_of(ell_view<T, Index> const& a) { return a.rows; }
template <class T, class Index>
std::int64_t cols_of(ell_view<T, Index> const& a) { return a.cols; }
template <class T>
std::int64_t rows_of(tiled_dense_view<T> const& a) { return a.rows; }
template <class T>
std::int64_t cols_of(tiled_dense_view<T> const& a) { return a.cols; }

// Read-only forms of the operand views (callers may pass mutable views).
template <class V>
V const& readonly(V const& v) { return v; }
template <class T>
tiled_dense_view<T const> readonly(tiled_dense_view<T> const& v) { return v; }
template <class T>
dense_view<T const> readonly(dense_view<T> const& v) { return {v.rows, v.cols, v.ld, v.data}; }
}  // namespace detail

// C = epi(A * B), A sparse. Device: builds the policy's plan (linear/op/spmm.cuh) and runs it
// once; to run many times with the same A, keep a plan instead.
template <class Exec, class Policy, class SparseView, class TB, class T, class Acc = accumulator_t<T>>
void spmm(Exec exec, Policy, SparseView a, dense_view<TB> b, dense_view<T> c, basic_epilogue<Acc> const& epi = {}) {
  static_assert(std::is_same_v<std::remove_const_t<TB>, T>, "spmm: B and C must have the same value type");
  detail::check_spmm_args(detail::rows_of(a), detail::cols_of(a), detail::readonly(b), c, "spmm");
  spmm_impl<Exec, Policy>::run(exec, detail::readonly(a), detail::readonly(b), c, epi);
}

}  // namespace sdnn::ops
