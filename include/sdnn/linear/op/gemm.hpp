// sdnn/linear/op/gemm.hpp - the dense product entry point: argument checks, then dispatch on
// (executor, policy).
//
//   ops::gemm(exec, policy, a, b, c, epi):  C[M x N] = epi(A[M x K] * B[K x N])
// host_exec runs the reference (linear/reference/gemm.hpp) for every policy; cuda_exec
// implementations live in linear/op/gemm.cuh (include it, or sdnn.hpp under nvcc).
#pragma once

#include <type_traits>

#include "sdnn/core/config.hpp"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/linear/policy/automatic.hpp"
#include "sdnn/linear/policy/gemm.hpp"
#include "sdnn/linear/reference/gemm.hpp"

namespace sdnn::ops {

template <class Exec, class Policy>
struct gemm_impl {
  static_assert(::sdnn::detail::dependent_false<Exec, Policy>,
                "ops::gemm: no implementation for this (executor, policy); for cuda_exec include sdnn/linear/op/gemm.cuh");
};

// The host executor: every policy is the reference.
template <class Policy>
struct gemm_impl<host_exec, Policy> {
  template <class T, class Acc>
  static void run(host_exec, dense_view<T const> a, dense_view<T const> b, dense_view<T> c,
                  basic_epilogue<Acc> const& epi) {
    reference::gemm(a, b, c, epi);
  }
};

namespace detail {
template <class T>
void check_gemm_args(dense_view<T const> a, dense_view<T const> b, dense_view<T> c) {
  SDNN_EXPECTS(a.rows >= 0 && a.cols >= 0 && b.cols >= 0, "gemm: shapes must be non-negative, got A ", a.rows, " x ",
               a.cols, ", B ", b.rows, " x ", b.cols);
  SDNN_EXPECTS_DIMS(a.cols == b.rows, "gemm: A is ", a.rows, " x ", a.cols, " but B has ", b.rows,
                    " rows (expected ", a.cols, ")");
  SDNN_EXPECTS_DIMS(c.rows == a.rows && c.cols == b.cols, "gemm: C must be ", a.rows, " x ", b.cols, ", got ",
                    c.rows, " x ", c.cols);
  SDNN_EXPECTS(a.ld >= a.cols && b.ld >= b.cols && c.ld >= c.cols, "gemm: leading dimensions must be >= cols, got ",
               a.ld, ", ", b.ld, ", ", c.ld);
  SDNN_EXPECTS((a.data != nullptr || a.rows == 0 || a.cols == 0) && (b.data != nullptr || b.rows == 0 || b.cols == 0) &&
                   (c.data != nullptr || c.rows == 0 || c.cols == 0),
               "gemm: a non-empty operand has a null data pointer");
}
}  // namespace detail

// C = epi(A * B). Device: enqueued on exec.stream; see each policy in linear/op/gemm.cuh for
// what it synchronises (only policy::automatic does, once, to read the empty-row count).
template <class Exec, class Policy, class TA, class TB, class T, class Acc = accumulator_t<T>>
void gemm(Exec exec, Policy, dense_view<TA> a, dense_view<TB> b, dense_view<T> c, basic_epilogue<Acc> const& epi = {}) {
  static_assert(std::is_same_v<std::remove_const_t<TA>, T> && std::is_same_v<std::remove_const_t<TB>, T>,
                "gemm: A, B and C must have the same value type");
  dense_view<T const> const ca{a.rows, a.cols, a.ld, a.data}, cb{b.rows, b.cols, b.ld, b.data};
  detail::check_gemm_args(ca, cb, c);
  gemm_impl<Exec, Policy>::run(exec, ca, cb, c, epi);
}

}  // namespace sdnn::ops
