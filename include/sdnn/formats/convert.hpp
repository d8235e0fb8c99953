// sdnn/formats/convert.hpp - host conversions among COO, CSR, ELL, tiled-dense and dense.
//
// The result format is the function name and the source the argument: to_csr(x), to_coo(x),
// to_ell(x[, width]), to_dense(x), to_tiled_dense(x[, tile_rows, tile_cols]), transpose(csr);
// each takes an optional trailing host_exec (formats/convert.cuh has the same names with a
// trailing cuda_exec). Where the source carries no index type (dense, tiled-dense) the CSR/COO
// index type is the first template argument, default int32_t: to_csr<std::int64_t>(dense).
// Every conversion is exact (docs/foundation.md#conversions).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/memory.hpp"
#include "sdnn/formats/coo.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/formats/ell.hpp"
#include "sdnn/formats/tiled_dense.hpp"

namespace sdnn {

namespace detail {
template <class Index>
Index checked_index(std::int64_t v, char const* what, char const* fn) {
  SDNN_EXPECTS(v >= 0 && v <= static_cast<std::int64_t>(std::numeric_limits<Index>::max()), fn, ": ", what, " = ", v,
               " does not fit the index type (max ", std::numeric_limits<Index>::max(), ")");
  return static_cast<Index>(v);
}
inline std::size_t uz(std::int64_t v) { return static_cast<std::size_t>(v); }
// Keeps a parameter out of template argument deduction (to_ell(a, 4) with int64 indices).
template <class T>
struct type_identity {
  using type = T;
};
template <class T>
using type_identity_t = typename type_identity<T>::type;
}  // namespace detail

// ---------------------------------------------------------------------------------------
// COO <-> CSR

// A canonical COO (sorted by (row, col)) becomes a CSR with the same entry order.
template <class T, class Index>
csr_matrix<T, Index> to_csr(coo_matrix<T, Index, host_space> const& a, host_exec = {}) {
  csr_matrix<T, Index> r(a.rows(), a.cols(), a.nnz());
  for (Index k = 0; k < a.nnz(); ++k) ++r.row_ptr()[detail::uz(a.row_idx()[detail::uz(k)]) + 1];
  for (Index i = 0; i < a.rows(); ++i) r.row_ptr()[detail::uz(i) + 1] += r.row_ptr()[detail::uz(i)];
  std::copy(a.col_idx().begin(), a.col_idx().end(), r.col_idx().begin());
  std::copy(a.values().begin(), a.values().end(), r.values().begin());
  return r;
}

template <class T, class Index>
coo_matrix<T, Index> to_coo(csr_matrix<T, Index, host_space> const& a, host_exec = {}) {
  coo_matrix<T, Index> r(a.rows(), a.cols(), a.nnz());
  for (Index i = 0; i < a.rows(); ++i)
    for (Index k = a.row_ptr()[detail::uz(i)]; k < a.row_ptr()[detail::uz(i) + 1]; ++k) r.row_idx()[detail::uz(k)] = i;
  std::copy(a.col_idx().begin(), a.col_idx().end(), r.col_idx().begin());
  std::copy(a.values().begin(), a.values().end(), r.values().begin());
  return r;
}

// ---------------------------------------------------------------------------------------
// CSR <-> ELL

// width = 0 picks the longest row's nnz; a larger width pads every row further. A width
// smaller than the longest row is an error.
template <class T, class Index>
ell_matrix<T, Index> to_ell(csr_matrix<T, Index, host_space> const& a, detail::type_identity_t<Index> width, host_exec) {
  auto const rp = a.row_ptr().data();
  Index longest = 0, longest_row = 0;
  for (Index i = 0; i < a.rows(); ++i)
    if (rp[i + 1] - rp[i] > longest) longest = rp[i + 1] - rp[i], longest_row = i;
  SDNN_EXPECTS(width >= 0, "to_ell: width must be >= 0 (0 = longest row), got ", width);
  SDNN_EXPECTS(width == 0 || width >= longest, "to_ell: requested width ", width, " is smaller than the longest row (row ",
               longest_row, " has ", longest, " entries)");
  if (width == 0) width = longest;
  ell_matrix<T, Index> r(a.rows(), a.cols(), width, a.nnz());  // all padding
  auto const v = r.view();
  for (Index i = 0; i < a.rows(); ++i)
    for (Index k = rp[i]; k < rp[i + 1]; ++k) {
      r.col_idx()[v.slot(i, k - rp[i])] = a.col_idx()[detail::uz(k)];
      r.values()[v.slot(i, k - rp[i])] = a.values()[detail::uz(k)];
    }
  return r;
}
template <class T, class Index>
ell_matrix<T, Index> to_ell(csr_matrix<T, Index, host_space> const& a, detail::type_identity_t<Index> width = 0) {
  return to_ell(a, width, host_exec{});
}
template <class T, class Index>
ell_matrix<T, Index> to_ell(csr_matrix<T, Index, host_space> const& a, host_exec e) {
  return to_ell(a, Index(0), e);
}

template <class T, class Index>
csr_matrix<T, Index> to_csr(ell_matrix<T, Index, host_space> const& a, host_exec = {}) {
  auto const v = a.view();
  csr_matrix<T, Index> r(a.rows(), a.cols(), a.nnz());
  Index n = 0;
  for (Index i = 0; i < a.rows(); ++i) {
    for (Index k = 0; k < a.width() && v.col_idx[v.slot(i, k)] != ell_padding<Index>; ++k, ++n) {
      SDNN_EXPECTS(n < a.nnz(), "to_csr: the ELL holds more than its nnz = ", a.nnz(), " entries");
      r.col_idx()[detail::uz(n)] = v.col_idx[v.slot(i, k)];
      r.values()[detail::uz(n)] = v.values[v.slot(i, k)];
    }
    r.row_ptr()[detail::uz(i) + 1] = n;
  }
  SDNN_EXPECTS(n == a.nnz(), "to_csr: the ELL holds ", n, " entries, its nnz says ", a.nnz());
  return r;
}

// ---------------------------------------------------------------------------------------
// CSR <-> dense. From a dense source an entry is stored when its value is nonzero (-0 counts
// as zero); to a dense result, stored zeros of a sparse source are just zeros.

template <class T, class Index>
dense_matrix<T> to_dense(csr_matrix<T, Index, host_space> const& a, host_exec = {}) {
  dense_matrix<T> r(a.rows(), a.cols());  // zero-initialised
  for (Index i = 0; i < a.rows(); ++i)
    for (Index k = a.row_ptr()[detail::uz(i)]; k < a.row_ptr()[detail::uz(i) + 1]; ++k)
      r(i, a.col_idx()[detail::uz(k)]) = a.values()[detail::uz(k)];
  return r;
}

// The nonzeros of a host dense view (any ld >= cols), in row-major order.
template <class Index = std::int32_t, class T>
csr_matrix<std::remove_const_t<T>, Index> to_csr(dense_view<T> const& a, host_exec) {
  using V = std::remove_const_t<T>;
  Index const rows = detail::checked_index<Index>(a.rows, "rows", "to_csr"),
              cols = detail::checked_index<Index>(a.cols, "cols", "to_csr");
  std::int64_t nnz = 0;
  for (std::int64_t i = 0; i < a.rows; ++i)
    for (std::int64_t j = 0; j < a.cols; ++j) nnz += detail::is_nonzero(a(i, j)) ? 1 : 0;
  csr_matrix<V, Index> r(rows, cols, detail::checked_index<Index>(nnz, "nnz", "to_csr"));
  Index n = 0;
  for (std::int64_t i = 0; i < a.rows; ++i) {
    for (std::int64_t j = 0; j < a.cols; ++j)
      if (detail::is_nonzero(a(i, j))) {
        r.col_idx()[detail::uz(n)] = static_cast<Index>(j);
        r.values()[detail::uz(n)] = a(i, j);
        ++n;
      }
    r.row_ptr()[detail::uz(i) + 1] = n;
  }
  return r;
}
template <class Index = std::int32_t, class T>
csr_matrix<T, Index> to_csr(dense_matrix<T, host_space> const& a, host_exec e = {}) {
  return to_csr<Index>(a.view(), e);
}

// ---------------------------------------------------------------------------------------
// COO <-> dense (through CSR)

template <class T, class Index>
dense_matrix<T> to_dense(coo_matrix<T, Index, host_space> const& a, host_exec = {}) {
  dense_matrix<T> r(a.rows(), a.cols());
  for (Index k = 0; k < a.nnz(); ++k) r(a.row_idx()[detail::uz(k)], a.col_idx()[detail::uz(k)]) = a.values()[detail::uz(k)];
  return r;
}
template <class Index = std::int32_t, class T>
coo_matrix<T, Index> to_coo(dense_matrix<T, host_space> const& a, host_exec e = {}) {
  return to_coo(to_csr<Index>(a, e), e);
}

// ---------------------------------------------------------------------------------------
// CSR <-> tiled-dense (and dense <-> tiled-dense). A tile is occupied only if it holds a nonzero
// value (a stored zero of a sparse source occupies nothing); back to CSR, an entry is stored
// when its value is nonzero.

template <class T, class Index>
tiled_dense_matrix<T> to_tiled_dense(csr_matrix<T, Index, host_space> const& a, std::int64_t tile_rows,
                                     std::int64_t tile_cols, host_exec) {
  tiled_dense_matrix<T> r(a.rows(), a.cols(), tile_rows, tile_cols);  // all zero
  for (Index i = 0; i < a.rows(); ++i)
    for (Index k = a.row_ptr()[detail::uz(i)]; k < a.row_ptr()[detail::uz(i) + 1]; ++k)
      r(i, a.col_idx()[detail::uz(k)]) = a.values()[detail::uz(k)];
  update_tile_index(r);
  return r;
}
template <class T, class Index>
tiled_dense_matrix<T> to_tiled_dense(csr_matrix<T, Index, host_space> const& a, std::int64_t tile_rows = 32,
                                     std::int64_t tile_cols = 32) {
  return to_tiled_dense(a, tile_rows, tile_cols, host_exec{});
}
template <class T, class Index>
tiled_dense_matrix<T> to_tiled_dense(csr_matrix<T, Index, host_space> const& a, host_exec e) {
  return to_tiled_dense(a, 32, 32, e);
}

template <class T>
tiled_dense_matrix<T> to_tiled_dense(dense_matrix<T, host_space> const& a, std::int64_t tile_rows = 32,
                                     std::int64_t tile_cols = 32, host_exec = {}) {
  tiled_dense_matrix<T> r(a.rows(), a.cols(), tile_rows, tile_cols);
  for (std::int64_t i = 0; i < a.rows(); ++i)
    for (std::int64_t j = 0; j < a.cols(); ++j) r(i, j) = a(i, j);
  update_tile_index(r);
  return r;
}

template <class T>
dense_matrix<T> to_dense(tiled_dense_matrix<T, host_space> const& a, host_exec = {}) {
  dense_matrix<T> r(a.rows(), a.cols());
  for (std::int64_t i = 0; i < a.rows(); ++i)
    for (std::int64_t j = 0; j < a.cols(); ++j) r(i, j) = a(i, j);
  return r;
}

// Walks only the occupied tiles (through the tile index), row by row.
template <class Index = std::int32_t, class T>
csr_matrix<T, Index> to_csr(tiled_dense_matrix<T, host_space> const& a, host_exec = {}) {
  auto const v = a.view();
  Index const rows = detail::checked_index<Index>(a.rows(), "rows", "to_csr"),
              cols = detail::checked_index<Index>(a.cols(), "cols", "to_csr");
  auto for_each_nonzero = [&](auto&& f) {
    for (std::int64_t i = 0; i < v.rows; ++i) {
      std::int64_t const ti = i / v.tile_rows;
      for (std::int64_t t = v.tile_row_ptr[ti]; t < v.tile_row_ptr[ti + 1]; ++t) {
        std::int64_t const j0 = v.tile_col[t] * v.tile_cols, j1 = std::min(j0 + v.tile_cols, v.cols);
        for (std::int64_t j = j0; j < j1; ++j)
          if (detail::is_nonzero(v(i, j))) f(i, j);
      }
    }
  };
  std::int64_t nnz = 0;
  for_each_nonzero([&](std::int64_t, std::int64_t) { ++nnz; });
  csr_matrix<T, Index> r(rows, cols, detail::checked_index<Index>(nnz, "nnz", "to_csr"));
  Index n = 0;
  for_each_nonzero([&](std::int64_t i, std::int64_t j) {
    r.col_idx()[detail::uz(n)] = static_cast<Index>(j);
    r.values()[detail::uz(n)] = v(i, j);
    ++n;
    r.row_ptr()[detail::uz(i) + 1] = n;
  });
  // Rows without nonzeros were skipped above: carry the running count forward.
  for (Index i = 0; i < rows; ++i)
    r.row_ptr()[detail::uz(i) + 1] = std::max(r.row_ptr()[detail::uz(i) + 1], r.row_ptr()[detail::uz(i)]);
  return r;
}

// ---------------------------------------------------------------------------------------
// Other conversions completing the set (host).

template <class T, class Index>
dense_matrix<T> to_dense(ell_matrix<T, Index, host_space> const& a, host_exec e = {}) {
  return to_dense(to_csr(a, e), e);
}

// ---------------------------------------------------------------------------------------
// Transpose: the CSR of A^T, i.e. the CSC of A. Counting sort by column; within a
// column, rows come out increasing because A is traversed row by row.
template <class T, class Index>
csr_matrix<T, Index> transpose(csr_matrix<T, Index, host_space> const& a, host_exec = {}) {
  csr_matrix<T, Index> r(a.cols(), a.rows(), a.nnz());
  auto& rp = r.row_ptr();
  for (Index k = 0; k < a.nnz(); ++k) ++rp[detail::uz(a.col_idx()[detail::uz(k)]) + 1];
  for (Index j = 0; j < a.cols(); ++j) rp[detail::uz(j) + 1] += rp[detail::uz(j)];
  std::vector<Index> next(rp.begin(), rp.end() - 1);
  for (Index i = 0; i < a.rows(); ++i)
    for (Index k = a.row_ptr()[detail::uz(i)]; k < a.row_ptr()[detail::uz(i) + 1]; ++k) {
      Index const dst = next[detail::uz(a.col_idx()[detail::uz(k)])]++;
      r.col_idx()[detail::uz(dst)] = i;
      r.values()[detail::uz(dst)] = a.values()[detail::uz(k)];
    }
  return r;
}

}  // namespace sdnn
