// sdnn/formats/ell.hpp - ELLPACK sparse matrix: a fixed number of slots per row, stored
// column-major so that a one-thread-per-row kernel reading slot k across a warp touches
// consecutive addresses (coalesced); rows shorter than the width end in padding slots.
// Owning container, view, validation; the layout and invariants are on ell_matrix below.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "sdnn/core/config.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/memory.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn {

// Non-owning view, passed to kernels by value. Slot k of row i: col_idx[k * rows + i].
template <class T, class Index = std::int32_t>
struct ell_view {
  Index rows = 0, cols = 0, width = 0, nnz = 0;
  Index const* col_idx = nullptr;  // [width * rows], column-major, -1 = padding
  T const* values = nullptr;       // [width * rows], column-major, 0 at padding

  // Position of slot k of row i in col_idx / values.
  SDNN_HOST_DEVICE std::size_t slot(Index i, Index k) const {
    return static_cast<std::size_t>(k) * static_cast<std::size_t>(rows) + static_cast<std::size_t>(i);
  }
};

// The col_idx value that marks a padding slot.
template <class Index>
inline constexpr Index ell_padding = Index(-1);

// Layout: width slots per row, column-major: slot k of row i is at k * rows + i.
// Invariants (checked by validate()):
//   col_idx and values have width * rows entries;
//   in each row, the stored entries come first with strictly increasing columns in
//   [0, cols), followed only by padding slots, marked col_idx = -1 and value 0, so
//   kernels may stop (or skip) at the first padding slot and padding adds nothing;
//   nnz equals the number of non-padding slots.
// Converting from CSR uses width = max row nnz unless a larger width is requested.
template <class T, class Index = std::int32_t, class Space = host_space>
class ell_matrix {
  static_assert(is_index_type_v<Index>, "ell_matrix: Index must be int32_t or int64_t");

 public:
  using value_type = T;
  using index_type = Index;
  using space = Space;

  ell_matrix() = default;
  // Allocates a rows x cols matrix with width slots per row that will hold nnz entries.
  // Host storage starts as all padding (col_idx = -1, values = 0), which is a valid
  // matrix when nnz == 0; device storage is uninitialised. Device: pass the cuda_exec
  // ordering the allocation.
  template <class... Exec>
  ell_matrix(Index rows, Index cols, Index width, Index nnz, Exec... exec)
      : rows_(rows), cols_(cols), width_(width), nnz_(nnz),
        col_idx_(detail::alloc<Index, Space>(checked(rows, cols, width, nnz), exec...)),
        values_(detail::alloc<T, Space>(col_idx_.size(), exec...)) {
    if constexpr (is_host_accessible_v<Space>) std::fill(col_idx_.begin(), col_idx_.end(), ell_padding<Index>);
  }

  Index rows() const noexcept { return rows_; }
  Index cols() const noexcept { return cols_; }
  Index width() const noexcept { return width_; }
  Index nnz() const noexcept { return nnz_; }

  buffer<Index, Space>& col_idx() noexcept { return col_idx_; }
  buffer<T, Space>& values() noexcept { return values_; }
  buffer<Index, Space> const& col_idx() const noexcept { return col_idx_; }
  buffer<T, Space> const& values() const noexcept { return values_; }

  ell_view<T, Index> view() const noexcept { return {rows_, cols_, width_, nnz_, col_idx_.data(), values_.data()}; }

 private:
  static std::size_t checked(Index rows, Index cols, Index width, Index nnz) {
    SDNN_EXPECTS(rows >= 0 && cols >= 0 && width >= 0 && nnz >= 0,
                 "ell_matrix: rows, cols, width and nnz must be >= 0, got ", rows, ", ", cols, ", ", width, ", ",
                 nnz);
    std::size_t const slots = detail::checked_extent(rows, width, "ell_matrix: rows x width");
    SDNN_EXPECTS(static_cast<std::size_t>(nnz) <= slots, "ell_matrix: nnz = ", nnz,
                 " does not fit in rows * width = ", rows, " * ", width);
    return slots;
  }
  Index rows_ = 0, cols_ = 0, width_ = 0, nnz_ = 0;
  buffer<Index, Space> col_idx_;
  buffer<T, Space> values_;
};

// Checks every invariant of a host-resident ELL; throws sdnn::error naming the first
// offending slot, e.g. "ell: row 2, slot 1 (col_idx[7]): col 9 is out of range for 8 columns".
template <class T, class Index>
void validate(ell_view<T, Index> const& a, std::size_t col_idx_size, std::size_t values_size) {
  SDNN_EXPECTS(a.rows >= 0 && a.cols >= 0 && a.width >= 0 && a.nnz >= 0,
               "ell: rows, cols, width and nnz must be >= 0, got ", a.rows, ", ", a.cols, ", ", a.width, ", ", a.nnz);
  std::size_t const slots = detail::checked_extent(a.rows, a.width, "ell: rows x width");
  SDNN_EXPECTS(col_idx_size == slots, "ell: col_idx must have width * rows = ", slots, " entries, got ",
               col_idx_size);
  SDNN_EXPECTS(values_size == slots, "ell: values must have width * rows = ", slots, " entries, got ", values_size);
  std::size_t stored = 0;
  // With width 0 there is nothing to look at (and rows may be huge): the loop is bounded by
  // the slots the arrays hold.
  for (Index i = 0; i < a.rows && a.width > 0; ++i) {
    bool padding_seen = false;
    for (Index k = 0; k < a.width; ++k) {
      std::size_t const s = a.slot(i, k);
      Index const c = a.col_idx[s];
      if (c == ell_padding<Index>) {
        SDNN_EXPECTS(!detail::is_nonzero(a.values[s]), "ell: row ", i, ", slot ", k, " (values[", s,
                     "]): padding slot must hold value 0, got ", value_cast<double>(a.values[s]));
        padding_seen = true;
        continue;
      }
      SDNN_EXPECTS(c >= 0 && c < a.cols, "ell: row ", i, ", slot ", k, " (col_idx[", s, "]): col ", c,
                   " is out of range for ", a.cols, " columns (padding is -1)");
      SDNN_EXPECTS(!padding_seen, "ell: row ", i, ", slot ", k, " (col_idx[", s, "]): col ", c,
                   " follows a padding slot; padding must come after every stored entry of a row");
      if (k > 0) {
        Index const p = a.col_idx[a.slot(i, k - 1)];
        SDNN_EXPECTS(p < c, "ell: row ", i, ", slot ", k, " (col_idx[", s, "]): col ", c,
                     " must be greater than slot ", k - 1, "'s col ", p, " (columns sorted and unique within a row)");
      }
      ++stored;
    }
  }
  SDNN_EXPECTS(stored == static_cast<std::size_t>(a.nnz), "ell: nnz = ", a.nnz, " but ", stored,
               " slots hold entries");
}

template <class T, class Index>
void validate(ell_matrix<T, Index, host_space> const& a) {
  validate(a.view(), a.col_idx().size(), a.values().size());
}

}  // namespace sdnn
