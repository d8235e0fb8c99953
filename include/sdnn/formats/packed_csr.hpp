// sdnn/formats/packed_csr.hpp - unstructured sparse weights for the small-batch gather kernel
// (linear/kernel/csr_gather.cuh): CSR whose entry is one 32-bit word, the 16-bit value's bits in
// the low half and its column in the high half (so K <= 65536), rows in order and columns ascending
// within a row. Besides the row starts it keeps, per row, where each 4096-column panel begins: the
// kernel stages X a range of panels at a time in shared memory and reads only that range's entries.
// Bytes per weight: 4 (1 - s) + 4 ceil(K / 4096) / K at sparsity s: 2.0 / 1.2 / 0.40 / 0.20 / 0.04
// at 50 / 70 / 90 / 95 / 99 % (dense 16-bit: 2; the bitmap tiles: 1.6 / 1.1 / 0.51 / 0.32 / 0.17).
// A stored entry is a nonzero (NaN and Inf included); the zeros are not stored, so an Inf or NaN of
// X reaches an output only through a nonzero of its row.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/core/numeric.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn {

template <class T>
class packed_csr_matrix {
  static_assert(is_16bit_float_v<T>, "packed_csr_matrix: T must be sdnn::bf16 or sdnn::fp16");

 public:
  static constexpr std::int64_t panel = 4096;        // columns of a panel
  static constexpr std::int64_t max_cols = 65536;    // a column must fit the entry's 16 bits

  packed_csr_matrix() = default;

  std::int64_t rows() const noexcept { return rows_; }
  std::int64_t cols() const noexcept { return cols_; }
  std::int64_t nnz() const noexcept { return static_cast<std::int64_t>(entries_.size()); }
  // Panels per row (one when K is 0).
  std::int64_t panels() const noexcept { return cols_ > 0 ? (cols_ + panel - 1) / panel : 1; }
  // entries()[e]: value bits | column << 16.
  std::vector<std::uint32_t> const& entries() const noexcept { return entries_; }
  // starts()[r * panels() + q]: the first entry of row r at column >= 4096 q (rows * panels + 1
  // words; the last is nnz, so row r's entries end at starts()[(r + 1) * panels()]).
  std::vector<std::uint32_t> const& starts() const noexcept { return starts_; }
  std::size_t bytes() const noexcept { return (entries_.size() + starts_.size()) * 4; }

  static std::uint32_t pack(T v, std::int64_t col) {
    std::uint16_t bits;
    std::memcpy(&bits, &v, 2);
    return std::uint32_t(bits) | (std::uint32_t(col) << 16);
  }
  static T value_of(std::uint32_t e) {
    std::uint16_t const bits = static_cast<std::uint16_t>(e & 0xffffu);
    T v;
    std::memcpy(&v, &bits, 2);
    return v;
  }
  static std::int64_t col_of(std::uint32_t e) { return std::int64_t(e >> 16); }

  template <class U>
  friend packed_csr_matrix<U> packed_csr_from_dense(dense_view<U const> w);

 private:
  std::int64_t rows_ = 0, cols_ = 0;
  std::vector<std::uint32_t> entries_, starts_;
};

// W's nonzeros (+-0 are the zeros; NaN and Inf are stored). Refused: K over 65536, 2^32 or more
// nonzeros.
template <class T>
packed_csr_matrix<T> packed_csr_from_dense(dense_view<T const> w) {
  using M = packed_csr_matrix<T>;
  SDNN_EXPECTS(w.rows >= 0 && w.cols >= 0 && w.cols <= M::max_cols, "packed_csr_from_dense: W is ", w.rows, " x ",
               w.cols, "; the packed entries hold a column in 16 bits, so K must be at most ", M::max_cols);
  SDNN_EXPECTS(w.rows == 0 || w.ld >= w.cols, "packed_csr_from_dense: leading dimension ", w.ld, " below ", w.cols,
               " columns");
  M p;
  p.rows_ = w.rows;
  p.cols_ = w.cols;
  std::int64_t const P = p.panels();
  p.starts_.reserve(static_cast<std::size_t>(w.rows * P + 1));
  for (std::int64_t i = 0; i < w.rows; ++i) {
    T const* row = w.data + i * w.ld;
    for (std::int64_t q = 0; q < P; ++q) {
      SDNN_EXPECTS(p.entries_.size() < std::numeric_limits<std::uint32_t>::max(),
                   "packed_csr_from_dense: W has 2^32 or more nonzeros (32-bit entry offsets)");
      p.starts_.push_back(static_cast<std::uint32_t>(p.entries_.size()));
      std::int64_t const c1 = std::min(w.cols, (q + 1) * M::panel);
      for (std::int64_t j = q * M::panel; j < c1; ++j)
        if (::sdnn::detail::is_nonzero(row[j])) p.entries_.push_back(M::pack(row[j], j));
    }
  }
  SDNN_EXPECTS(p.entries_.size() < std::numeric_limits<std::uint32_t>::max(),
               "packed_csr_from_dense: W has 2^32 or more nonzeros (32-bit entry offsets)");
  p.starts_.push_back(static_cast<std::uint32_t>(p.entries_.size()));
  return p;
}

}  // namespace sdnn
