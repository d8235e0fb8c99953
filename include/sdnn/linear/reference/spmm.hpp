// sdnn/linear/reference/spmm.hpp - the host oracle for sparse products (plain loops), also the
// host executor's implementation of every spmm and dense x sparse policy.
//
//   spmm:              C[M x N] = epi(A_sparse[M x K] * B[K x N])   (CSR, COO, ELL, tiled)
//   dense_sparse_spmm: C[M x N] = epi(Y[M x K] * W_csr[K x N])       (one row: dense_sparse_row)
//
// An empty row yields epi(0, col). Orders of summation: docs/linear.md#orders-of-summation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/coo.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/formats/ell.hpp"
#include "sdnn/formats/tiled_dense.hpp"

namespace sdnn::reference {

namespace detail {
template <class T>
void check_spmm_shapes(std::int64_t m, std::int64_t k, dense_view<T const> b, dense_view<T> c, char const* what) {
  SDNN_EXPECTS_DIMS(b.rows == k, what, ": A is ", m, " x ", k, " but B has ", b.rows, " rows (expected ", k, ")");
  SDNN_EXPECTS_DIMS(c.rows == m && c.cols == b.cols, what, ": C must be ", m, " x ", b.cols, ", got ", c.rows, " x ",
                    c.cols);
}
// Applies the epilogue to one accumulated row and stores it.
template <class T, class Acc>
void store_row(std::vector<double> const& acc, std::int64_t i, dense_view<T> c, basic_epilogue<Acc> const& epi) {
  for (std::int64_t j = 0; j < c.cols; ++j) c(i, j) = value_cast<T>(epi(static_cast<Acc>(acc[j]), j));
}
}  // namespace detail

// spmm (every format): sums are accumulated in double in storage order, converted to the
// epilogue's Acc type, passed through the epilogue and converted to T.
template <class T, class Index, class Acc>
void spmm(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi) {
  detail::check_spmm_shapes(a.rows, a.cols, b, c, "spmm(csr)");
  std::vector<double> acc(static_cast<std::size_t>(b.cols));
  for (Index i = 0; i < a.rows; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (Index p = a.row_ptr[i]; p < a.row_ptr[i + 1]; ++p) {
      double const v = value_cast<double>(a.values[p]);
      for (std::int64_t j = 0; j < b.cols; ++j) acc[j] += v * value_cast<double>(b(a.col_idx[p], j));
    }
    detail::store_row(acc, i, c, epi);
  }
}

template <class T, class Index, class Acc>
void spmm(coo_view<T, Index> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi) {
  detail::check_spmm_shapes(a.rows, a.cols, b, c, "spmm(coo)");
  std::vector<double> acc(static_cast<std::size_t>(a.rows) * static_cast<std::size_t>(b.cols));
  for (Index p = 0; p < a.nnz; ++p) {
    double const v = value_cast<double>(a.values[p]);
    double* row = acc.data() + static_cast<std::size_t>(a.row_idx[p]) * static_cast<std::size_t>(b.cols);
    for (std::int64_t j = 0; j < b.cols; ++j) row[j] += v * value_cast<double>(b(a.col_idx[p], j));
  }
  std::vector<double> r(static_cast<std::size_t>(b.cols));
  for (Index i = 0; i < a.rows; ++i) {
    std::copy(acc.begin() + i * b.cols, acc.begin() + (i + 1) * b.cols, r.begin());
    detail::store_row(r, i, c, epi);
  }
}

template <class T, class Index, class Acc>
void spmm(ell_view<T, Index> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi) {
  detail::check_spmm_shapes(a.rows, a.cols, b, c, "spmm(ell)");
  std::vector<double> acc(static_cast<std::size_t>(b.cols));
  for (Index i = 0; i < a.rows; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (Index k = 0; k < a.width; ++k) {
      Index const col = a.col_idx[a.slot(i, k)];
      if (col == ell_padding<Index>) break;
      double const v = value_cast<double>(a.values[a.slot(i, k)]);
      for (std::int64_t j = 0; j < b.cols; ++j) acc[j] += v * value_cast<double>(b(col, j));
    }
    detail::store_row(acc, i, c, epi);
  }
}

template <class T, class Acc>
void spmm(tiled_dense_view<T const> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi) {
  detail::check_spmm_shapes(a.rows, a.cols, b, c, "spmm(tiled_dense)");
  std::vector<double> acc(static_cast<std::size_t>(b.cols));
  for (std::int64_t i = 0; i < a.rows; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    std::int64_t const ti = i / a.tile_rows;
    for (std::int64_t p = a.tile_row_ptr[ti]; p < a.tile_row_ptr[ti + 1]; ++p) {
      std::int64_t const tj = a.tile_col[p];
      for (std::int64_t kk = 0; kk < a.tile_cols; ++kk) {
        std::int64_t const k = tj * a.tile_cols + kk;
        if (k >= a.cols) break;
        double const v = value_cast<double>(a(i, k));
        if (v == 0.0) continue;
        for (std::int64_t j = 0; j < b.cols; ++j) acc[j] += v * value_cast<double>(b(k, j));
      }
    }
    detail::store_row(acc, i, c, epi);
  }
}

// The Y * W accumulation step: acc[j] += y * W(k, j) over the stored entries of row k of W,
// in Acc; touch(j) is called for each column before its add. Callers pass the nonzero inputs
// y = Y(i, k) of one row in ascending k. This is the one host Y * W order, shared by
// dense_sparse_spmm, layers::sparse_linear's host path and every other host Y * W built on
// this step: each sum is taken in the epilogue's accumulator type Acc (float for float and
// __half, double for double), k ascending, zero inputs skipped, one Acc rounding per add.
// Bit-exact comparisons of device results with the host rely on it.
template <class Acc, class T, class Index, class Touch>
void add_scaled_row(Acc y, csr_view<T, Index> const& w, Index k, Acc* acc, Touch&& touch) {
  for (Index p = w.row_ptr[k]; p < w.row_ptr[k + 1]; ++p) {
    touch(w.col_idx[p]);
    acc[w.col_idx[p]] += y * value_cast<Acc>(w.values[p]);
  }
}
template <class Acc, class T, class Index>
void add_scaled_row(Acc y, csr_view<T, Index> const& w, Index k, Acc* acc) {
  add_scaled_row(y, w, k, acc, [](Index) {});
}

// One row of Y * W: out_row[j] = epi(sum_k in_row[k] * W(k, j)) for j < w.cols, in_row having
// w.rows entries. acc is scratch (resized here), so a caller looping over rows allocates once.
template <class T, class Index, class Acc>
void dense_sparse_row(T const* in_row, csr_view<T, Index> const& w, basic_epilogue<Acc> const& epi,
                      std::vector<Acc>& acc, T* out_row) {
  acc.assign(static_cast<std::size_t>(w.cols), Acc(0));
  for (Index k = 0; k < w.rows; ++k) {
    Acc const y = value_cast<Acc>(in_row[k]);
    if (y == Acc(0)) continue;
    add_scaled_row(y, w, k, acc.data());
  }
  for (Index j = 0; j < w.cols; ++j) out_row[j] = value_cast<T>(epi(acc[static_cast<std::size_t>(j)], j));
}

// C[M x N] = epi(Y[M x K] * W[K x N]), W in CSR.
template <class T, class Index, class Acc>
void dense_sparse_spmm(dense_view<T const> a, csr_view<T, Index> w, dense_view<T> c,
                       basic_epilogue<Acc> const& epi) {
  SDNN_EXPECTS_DIMS(a.cols == w.rows, "dense_sparse_spmm: A is ", a.rows, " x ", a.cols, " but W has ", w.rows,
                    " rows");
  SDNN_EXPECTS_DIMS(c.rows == a.rows && c.cols == w.cols, "dense_sparse_spmm: C must be ", a.rows, " x ", w.cols,
                    ", got ", c.rows, " x ", c.cols);
  std::vector<Acc> acc;
  for (std::int64_t i = 0; i < a.rows; ++i) dense_sparse_row(a.row(i), w, epi, acc, c.row(i));
}

}  // namespace sdnn::reference
