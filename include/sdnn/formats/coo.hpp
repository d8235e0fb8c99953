// sdnn/formats/coo.hpp - coordinate-list sparse matrix: owning container, view, validation.
//
// Invariants (checked by validate()): row_idx, col_idx and values all have nnz entries;
// every (row, col) is in [0, rows) x [0, cols); entries are in canonical order, i.e.
// sorted by (row, col) with no duplicates. Every sdnn conversion relies on (and
// produces) the canonical order, so a canonical COO and its CSR hold the same entries in
// the same order.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "sdnn/core/config.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/memory.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn {

// Non-owning view, passed to kernels by value.
template <class T, class Index = std::int32_t>
struct coo_view {
  Index rows = 0, cols = 0, nnz = 0;
  Index const* row_idx = nullptr;  // [nnz], non-decreasing
  Index const* col_idx = nullptr;  // [nnz], strictly increasing within a row
  T const* values = nullptr;       // [nnz]
};

template <class T, class Index = std::int32_t, class Space = host_space>
class coo_matrix {
  static_assert(is_index_type_v<Index>, "coo_matrix: Index must be int32_t or int64_t");

 public:
  using value_type = T;
  using index_type = Index;
  using space = Space;

  coo_matrix() = default;
  // Allocates a rows x cols matrix with room for nnz entries. Host storage is
  // zero-initialised (not canonical unless nnz <= 1); device storage is uninitialised.
  // Device: pass the cuda_exec ordering the allocation.
  template <class... Exec>
  coo_matrix(Index rows, Index cols, Index nnz, Exec... exec)
      : rows_(rows), cols_(cols),
        row_idx_(detail::alloc<Index, Space>(checked(rows, cols, nnz), exec...)),
        col_idx_(detail::alloc<Index, Space>(static_cast<std::size_t>(nnz), exec...)),
        values_(detail::alloc<T, Space>(static_cast<std::size_t>(nnz), exec...)) {}

  Index rows() const noexcept { return rows_; }
  Index cols() const noexcept { return cols_; }
  Index nnz() const noexcept { return static_cast<Index>(col_idx_.size()); }

  buffer<Index, Space>& row_idx() noexcept { return row_idx_; }
  buffer<Index, Space>& col_idx() noexcept { return col_idx_; }
  buffer<T, Space>& values() noexcept { return values_; }
  buffer<Index, Space> const& row_idx() const noexcept { return row_idx_; }
  buffer<Index, Space> const& col_idx() const noexcept { return col_idx_; }
  buffer<T, Space> const& values() const noexcept { return values_; }

  coo_view<T, Index> view() const noexcept {
    return {rows_, cols_, nnz(), row_idx_.data(), col_idx_.data(), values_.data()};
  }

 private:
  static std::size_t checked(Index rows, Index cols, Index nnz) {
    SDNN_EXPECTS(rows >= 0 && cols >= 0 && nnz >= 0, "coo_matrix: rows, cols and nnz must be >= 0, got ",
                 rows, ", ", cols, ", ", nnz);
    return static_cast<std::size_t>(nnz);
  }
  Index rows_ = 0, cols_ = 0;
  buffer<Index, Space> row_idx_;
  buffer<Index, Space> col_idx_;
  buffer<T, Space> values_;
};

// Checks every invariant of a host-resident COO; throws sdnn::error naming the first
// offending entry, e.g. "coo: entry 5 (row 2, col 9): col 9 is out of range for 8 columns".
template <class T, class Index>
void validate(coo_view<T, Index> const& a, std::size_t row_idx_size, std::size_t col_idx_size,
              std::size_t values_size) {
  SDNN_EXPECTS(a.rows >= 0 && a.cols >= 0 && a.nnz >= 0, "coo: rows, cols and nnz must be >= 0, got ", a.rows,
               ", ", a.cols, ", ", a.nnz);
  auto const n = static_cast<std::size_t>(a.nnz);
  SDNN_EXPECTS(row_idx_size == n, "coo: row_idx must have nnz = ", a.nnz, " entries, got ", row_idx_size);
  SDNN_EXPECTS(col_idx_size == n, "coo: col_idx must have nnz = ", a.nnz, " entries, got ", col_idx_size);
  SDNN_EXPECTS(values_size == n, "coo: values must have nnz = ", a.nnz, " entries, got ", values_size);
  for (Index k = 0; k < a.nnz; ++k) {
    Index const r = a.row_idx[k], c = a.col_idx[k];
    SDNN_EXPECTS(r >= 0 && r < a.rows, "coo: entry ", k, " (row ", r, ", col ", c, "): row ", r,
                 " is out of range for ", a.rows, " rows");
    SDNN_EXPECTS(c >= 0 && c < a.cols, "coo: entry ", k, " (row ", r, ", col ", c, "): col ", c,
                 " is out of range for ", a.cols, " columns");
    if (k > 0) {
      Index const pr = a.row_idx[k - 1], pc = a.col_idx[k - 1];
      SDNN_EXPECTS(pr != r || pc != c, "coo: entry ", k, " (row ", r, ", col ", c,
                   "): duplicates entry ", k - 1);
      SDNN_EXPECTS(pr < r || (pr == r && pc < c), "coo: entry ", k, " (row ", r, ", col ", c,
                   "): comes after entry ", k - 1, " (row ", pr, ", col ", pc,
                   "); entries must be sorted by (row, col)");
    }
  }
}

template <class T, class Index>
void validate(coo_matrix<T, Index, host_space> const& a) {
  validate(a.view(), a.row_idx().size(), a.col_idx().size(), a.values().size());
}

// Builds a canonical host COO from raw triplets in any order: checks ranges (naming the
// input position), sorts by (row, col) (stable, so values follow their coordinates), and
// rejects duplicate coordinates (naming both input positions).
template <class T, class Index>
coo_matrix<T, Index> make_coo(Index rows, Index cols, std::vector<Index> const& row_idx,
                              std::vector<Index> const& col_idx, std::vector<T> const& values) {
  SDNN_EXPECTS(rows >= 0 && cols >= 0, "coo: rows and cols must be >= 0, got ", rows, ", ", cols);
  SDNN_EXPECTS(row_idx.size() == col_idx.size() && col_idx.size() == values.size(), "coo: row_idx, col_idx and ",
               "values must have the same length, got ", row_idx.size(), ", ", col_idx.size(), ", ",
               values.size());
  std::size_t const n = row_idx.size();
  SDNN_EXPECTS(n <= static_cast<std::size_t>(std::numeric_limits<Index>::max()), "coo: ", n,
               " entries do not fit the index type");
  for (std::size_t k = 0; k < n; ++k) {
    Index const r = row_idx[k], c = col_idx[k];
    SDNN_EXPECTS(r >= 0 && r < rows, "coo: entry ", k, " (row ", r, ", col ", c, "): row ", r,
                 " is out of range for ", rows, " rows");
    SDNN_EXPECTS(c >= 0 && c < cols, "coo: entry ", k, " (row ", r, ", col ", c, "): col ", c,
                 " is out of range for ", cols, " columns");
  }
  std::vector<std::size_t> perm(n);
  std::iota(perm.begin(), perm.end(), std::size_t{0});
  std::stable_sort(perm.begin(), perm.end(), [&](std::size_t x, std::size_t y) {
    return row_idx[x] < row_idx[y] || (row_idx[x] == row_idx[y] && col_idx[x] < col_idx[y]);
  });
  coo_matrix<T, Index> a(rows, cols, static_cast<Index>(n));
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t const p = perm[k];
    if (k > 0) {
      std::size_t const q = perm[k - 1];
      SDNN_EXPECTS(row_idx[q] != row_idx[p] || col_idx[q] != col_idx[p], "coo: entries ", q, " and ", p,
                   " are duplicates (row ", row_idx[p], ", col ", col_idx[p], ")");
    }
    a.row_idx()[k] = row_idx[p];
    a.col_idx()[k] = col_idx[p];
    a.values()[k] = values[p];
  }
  return a;
}

}  // namespace sdnn
