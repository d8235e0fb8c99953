// sdnn/formats/csr.hpp - compressed sparse row matrix: owning container, view, validation.
//
// Invariants (checked by validate()):
//   row_ptr has rows + 1 entries, row_ptr[0] == 0, non-decreasing, row_ptr[rows] == nnz;
//   within each row, col_idx is strictly increasing (sorted, unique) and in [0, cols).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
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
struct csr_view {
  Index rows = 0, cols = 0, nnz = 0;
  Index const* row_ptr = nullptr;  // [rows + 1]
  Index const* col_idx = nullptr;  // [nnz], sorted and unique within a row
  T const* values = nullptr;       // [nnz]
};

template <class T, class Index = std::int32_t, class Space = host_space>
class csr_matrix {
  static_assert(is_index_type_v<Index>, "csr_matrix: Index must be int32_t or int64_t");

 public:
  using value_type = T;
  using index_type = Index;
  using space = Space;

  // An empty 0 x 0 matrix. On the host its row_ptr is {0} (valid); a device one holds no
  // storage until assigned (no allocation without a stream).
  csr_matrix() {
    if constexpr (std::is_same_v<Space, host_space>) row_ptr_ = buffer<Index, Space>(1);
  }
  // Allocates a rows x cols matrix with room for nnz entries. Host storage is
  // zero-initialised (row_ptr all 0 means "all rows empty" only when nnz == 0);
  // device storage is uninitialised. Device: pass the cuda_exec ordering the allocation.
  template <class... Exec>
  csr_matrix(Index rows, Index cols, Index nnz, Exec... exec)
      : rows_(rows), cols_(cols),
        row_ptr_(detail::alloc<Index, Space>(checked(rows, cols, nnz) + 1, exec...)),
        col_idx_(detail::alloc<Index, Space>(static_cast<std::size_t>(nnz), exec...)),
        values_(detail::alloc<T, Space>(static_cast<std::size_t>(nnz), exec...)) {}

  Index rows() const noexcept { return rows_; }
  Index cols() const noexcept { return cols_; }
  Index nnz() const noexcept { return static_cast<Index>(col_idx_.size()); }

  buffer<Index, Space>& row_ptr() noexcept { return row_ptr_; }
  buffer<Index, Space>& col_idx() noexcept { return col_idx_; }
  buffer<T, Space>& values() noexcept { return values_; }
  buffer<Index, Space> const& row_ptr() const noexcept { return row_ptr_; }
  buffer<Index, Space> const& col_idx() const noexcept { return col_idx_; }
  buffer<T, Space> const& values() const noexcept { return values_; }

  csr_view<T, Index> view() const noexcept {
    return {rows_, cols_, nnz(), row_ptr_.data(), col_idx_.data(), values_.data()};
  }

 private:
  static std::size_t checked(Index rows, Index cols, Index nnz) {
    SDNN_EXPECTS(rows >= 0 && cols >= 0 && nnz >= 0, "csr_matrix: rows, cols and nnz must be >= 0, got ",
                 rows, ", ", cols, ", ", nnz);
    return detail::checked_extent(rows, 1, "csr_matrix: rows");  // rows + 1 row pointers cannot wrap
  }
  Index rows_ = 0, cols_ = 0;
  buffer<Index, Space> row_ptr_;
  buffer<Index, Space> col_idx_;
  buffer<T, Space> values_;
};

// Checks every invariant of a host-resident CSR; throws sdnn::error naming the first
// offending entry, e.g. "csr: row 3: col_idx[17] = 1030 is out of range for 1024 columns".
template <class T, class Index>
void validate(csr_view<T, Index> const& a, std::size_t row_ptr_size, std::size_t col_idx_size,
              std::size_t values_size) {
  SDNN_EXPECTS(a.rows >= 0 && a.cols >= 0 && a.nnz >= 0, "csr: rows, cols and nnz must be >= 0, got ",
               a.rows, ", ", a.cols, ", ", a.nnz);
  SDNN_EXPECTS(row_ptr_size == static_cast<std::size_t>(a.rows) + 1, "csr: row_ptr must have rows + 1 = ",
               static_cast<std::size_t>(a.rows) + 1, " entries, got ", row_ptr_size);
  SDNN_EXPECTS(col_idx_size == static_cast<std::size_t>(a.nnz), "csr: col_idx must have nnz = ", a.nnz,
               " entries, got ", col_idx_size);
  SDNN_EXPECTS(values_size == static_cast<std::size_t>(a.nnz), "csr: values must have nnz = ", a.nnz,
               " entries, got ", values_size);
  SDNN_EXPECTS(a.row_ptr[0] == 0, "csr: row_ptr[0] must be 0, got ", a.row_ptr[0]);
  SDNN_EXPECTS(a.row_ptr[a.rows] == a.nnz, "csr: row_ptr[", a.rows, "] must equal nnz = ", a.nnz, ", got ",
               a.row_ptr[a.rows]);
  for (Index i = 0; i < a.rows; ++i) {
    Index const b = a.row_ptr[i], e = a.row_ptr[i + 1];
    SDNN_EXPECTS(b <= e, "csr: row_ptr must be non-decreasing, but row_ptr[", i, "] = ", b, " > row_ptr[",
                 i + 1, "] = ", e);
    SDNN_EXPECTS(e <= a.nnz, "csr: row_ptr[", i + 1, "] = ", e, " exceeds nnz = ", a.nnz);
    for (Index k = b; k < e; ++k) {
      Index const c = a.col_idx[k];
      SDNN_EXPECTS(c >= 0 && c < a.cols, "csr: row ", i, ": col_idx[", k, "] = ", c, " is out of range for ",
                   a.cols, " columns");
      SDNN_EXPECTS(k == b || a.col_idx[k - 1] < c, "csr: row ", i, ": col_idx[", k, "] = ", c,
                   " must be greater than col_idx[", k - 1, "] = ", a.col_idx[k - 1],
                   " (columns sorted and unique within a row)");
    }
  }
}

template <class T, class Index>
void validate(csr_matrix<T, Index, host_space> const& a) {
  validate(a.view(), a.row_ptr().size(), a.col_idx().size(), a.values().size());
}

// Builds a host CSR from raw arrays and validates it (throws sdnn::error on bad input).
template <class T, class Index>
csr_matrix<T, Index> make_csr(Index rows, Index cols, std::vector<Index> const& row_ptr,
                              std::vector<Index> const& col_idx, std::vector<T> const& values) {
  SDNN_EXPECTS(rows >= 0 && cols >= 0, "csr: rows and cols must be >= 0, got ", rows, ", ", cols);
  SDNN_EXPECTS(row_ptr.size() == static_cast<std::size_t>(rows) + 1, "csr: row_ptr must have rows + 1 = ",
               static_cast<std::size_t>(rows) + 1, " entries, got ", row_ptr.size());
  SDNN_EXPECTS(col_idx.size() == values.size(), "csr: col_idx has ", col_idx.size(), " entries but values has ",
               values.size());
  SDNN_EXPECTS(col_idx.size() <= static_cast<std::size_t>(std::numeric_limits<Index>::max()), "csr: ",
               col_idx.size(), " entries do not fit the index type");
  csr_matrix<T, Index> a(rows, cols, static_cast<Index>(col_idx.size()));
  std::copy(row_ptr.begin(), row_ptr.end(), a.row_ptr().begin());
  std::copy(col_idx.begin(), col_idx.end(), a.col_idx().begin());
  std::copy(values.begin(), values.end(), a.values().begin());
  validate(a);
  return a;
}

}  // namespace sdnn
