// sdnn/linear/reference/gemm.hpp - the host oracle for dense products (plain loops).
//
//   C[M x N] = epi(A[M x K] * B[K x N])
// Products are accumulated in double, then converted to the epilogue's Acc type and
// passed through the epilogue, then converted to T. This is also the host executor's
// implementation of every gemm policy.
#pragma once

#include <cstdint>

#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn::reference {

template <class T, class Acc>
void gemm(dense_view<T const> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi) {
  SDNN_EXPECTS_DIMS(a.cols == b.rows, "gemm: A is ", a.rows, " x ", a.cols, " but B has ", b.rows,
                    " rows (expected ", a.cols, ")");
  SDNN_EXPECTS_DIMS(c.rows == a.rows && c.cols == b.cols, "gemm: C must be ", a.rows, " x ", b.cols, ", got ",
                    c.rows, " x ", c.cols);
  for (std::int64_t i = 0; i < a.rows; ++i) {
    for (std::int64_t j = 0; j < b.cols; ++j) {
      double s = 0;
      for (std::int64_t k = 0; k < a.cols; ++k) s += value_cast<double>(a(i, k)) * value_cast<double>(b(k, j));
      c(i, j) = value_cast<T>(epi(static_cast<Acc>(s), j));
    }
  }
}

// Number of nonzeros of each row of a dense matrix: counts[i] = #{j : a(i, j) != 0}.
template <class T, class Index>
void row_nonzero_counts(dense_view<T const> a, Index* counts) {
  for (std::int64_t i = 0; i < a.rows; ++i) {
    Index n = 0;
    for (std::int64_t j = 0; j < a.cols; ++j) n += value_cast<double>(a(i, j)) != 0.0 ? 1 : 0;
    counts[i] = n;
  }
}

}  // namespace sdnn::reference
