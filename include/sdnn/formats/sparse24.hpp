// sdnn/formats/sparse24.hpp - a 2:4 structured-sparse matrix (N:M sparsity with N = 2, M = 4):
// every aligned group of 4 consecutive entries of a row holds at most 2 nonzeros, and exactly 2
// entries per group are stored (a value and its 2-bit position), so a rows x cols matrix keeps
// rows x cols_padded / 2 values. This is the canonical, user-visible form (host only, no op, no
// kernel): the hardware metadata order of the tensor-core kernels is built from it at plan time
// (linear/op/sparse24_linear.cuh). Conversion from a dense matrix that already is 2:4 refuses
// one that is not, naming the first offending row and group; magnitude pruning of an arbitrary
// dense matrix is train/op/prune_sparse24.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "sdnn/core/config.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/memory.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn {

// The structure: at most sparse24_kept nonzeros in each aligned group of sparse24_group entries.
inline constexpr int sparse24_group = 4;
inline constexpr int sparse24_kept = 2;

namespace detail {
// True when v is zero (+0 or -0). Any arithmetic type, and sdnn::bf16 / sdnn::fp16 through float.
template <class T>
inline bool sparse24_is_zero(T const& v) {
  return !is_nonzero(v);
}
// The nibble of a group that keeps positions i0 < i1 (each 0..3): i0 in bits 0-1, i1 in bits 2-3.
constexpr std::uint8_t sparse24_nibble(int i0, int i1) { return static_cast<std::uint8_t>(i0 | (i1 << 2)); }
}  // namespace detail

// Layout (canonical; validate() checks every rule):
//   cols_padded = cols rounded up to a multiple of 4 (the last group is completed with zeros);
//   groups = cols_padded / 4 per row; kept = 2 * groups values per row.
//   values: [rows x kept], row-major. Kept value j of row r is the (j % 2)-th stored entry of
//     group j / 2, at column 4 * (j / 2) + index(r, j).
//   meta:   [rows x meta_ld] bytes, meta_ld = ceil(groups / 2). Group g of row r is the nibble
//     (meta[r * meta_ld + g / 2] >> (4 * (g % 2))) & 0xF: bits 0-1 the position (0..3) of its
//     first kept value, bits 2-3 that of its second. Positions are strictly increasing within a
//     group (i0 < i1), so a group has one of 6 nibbles: 0x4 (0,1), 0x8 (0,2), 0xC (0,3),
//     0x9 (1,2), 0xD (1,3), 0xE (2,3). The high nibble of a row's last byte when groups is odd
//     is 0.
//   A group with fewer than 2 nonzeros stores zeros at the smallest free positions (one nonzero
//   at p: positions {p, the smallest other}, sorted; none: (0, 1)). A kept position in the
//   padding of the last group (column >= cols) holds a zero value.
template <class T>
class sparse24_matrix {
 public:
  using value_type = T;

  // An empty 0 x 0 matrix.
  sparse24_matrix() = default;
  // The all-zero rows x cols matrix: every group keeps positions (0, 1) with zero values.
  sparse24_matrix(std::int64_t rows, std::int64_t cols)
      : rows_(checked_rows(rows, cols)), cols_(cols),
        values_(detail::checked_extent(rows, kept_per_row(), "sparse24_matrix values")),
        meta_(detail::checked_extent(rows, meta_ld(), "sparse24_matrix metadata")) {
    for (std::int64_t r = 0; r < rows_; ++r)
      for (std::int64_t g = 0; g < groups_per_row(); ++g) set_nibble(r, g, detail::sparse24_nibble(0, 1));
  }

  std::int64_t rows() const noexcept { return rows_; }
  std::int64_t cols() const noexcept { return cols_; }
  // cols rounded up to a multiple of the group.
  std::int64_t cols_padded() const noexcept { return (cols_ + sparse24_group - 1) / sparse24_group * sparse24_group; }
  std::int64_t groups_per_row() const noexcept { return cols_padded() / sparse24_group; }
  std::int64_t kept_per_row() const noexcept { return groups_per_row() * sparse24_kept; }
  // Bytes of metadata per row (two groups per byte).
  std::int64_t meta_ld() const noexcept { return (groups_per_row() + 1) / 2; }

  host_buffer<T>& values() noexcept { return values_; }
  host_buffer<T> const& values() const noexcept { return values_; }
  host_buffer<std::uint8_t>& meta() noexcept { return meta_; }
  host_buffer<std::uint8_t> const& meta() const noexcept { return meta_; }

  // The nibble of group g of row r (see the layout above).
  std::uint8_t nibble(std::int64_t r, std::int64_t g) const noexcept {
    return static_cast<std::uint8_t>((meta_[static_cast<std::size_t>(r * meta_ld() + g / 2)] >> (4 * (g % 2))) & 0xF);
  }
  // Position (0..3) inside its group of kept value j of row r.
  int index(std::int64_t r, std::int64_t j) const noexcept { return (nibble(r, j / 2) >> (2 * (j % 2))) & 0x3; }
  // Column of kept value j of row r (may be >= cols() in the padding of the last group).
  std::int64_t column(std::int64_t r, std::int64_t j) const noexcept { return (j / 2) * sparse24_group + index(r, j); }
  T const& value(std::int64_t r, std::int64_t j) const noexcept {
    return values_[static_cast<std::size_t>(r * kept_per_row() + j)];
  }

  // Sets group g of row r to keep positions i0 < i1 with values v0, v1 (checked).
  void set_group(std::int64_t r, std::int64_t g, int i0, T v0, int i1, T v1) {
    SDNN_EXPECTS(r >= 0 && r < rows_ && g >= 0 && g < groups_per_row(), "sparse24_matrix::set_group: row ", r,
                 ", group ", g, " is outside the ", rows_, " x ", groups_per_row(), " groups");
    SDNN_EXPECTS(0 <= i0 && i0 < i1 && i1 < sparse24_group, "sparse24_matrix::set_group: row ", r, ", group ", g,
                 ": positions ", i0, " and ", i1, " must satisfy 0 <= i0 < i1 <= 3");
    set_nibble(r, g, detail::sparse24_nibble(i0, i1));
    values_[static_cast<std::size_t>(r * kept_per_row() + 2 * g)] = v0;
    values_[static_cast<std::size_t>(r * kept_per_row() + 2 * g + 1)] = v1;
  }

  // Checks every rule of the layout; throws sdnn::error naming the first bad row and group.
  void validate() const {
    SDNN_EXPECTS(rows_ >= 0 && cols_ >= 0, "sparse24: shape must be >= 0, got ", rows_, " x ", cols_);
    SDNN_EXPECTS(values_.size() == static_cast<std::size_t>(rows_ * kept_per_row()), "sparse24: ", values_.size(),
                 " values for ", rows_, " rows of ", kept_per_row(), " kept values");
    SDNN_EXPECTS(meta_.size() == static_cast<std::size_t>(rows_ * meta_ld()), "sparse24: ", meta_.size(),
                 " metadata bytes for ", rows_, " rows of ", meta_ld());
    for (std::int64_t r = 0; r < rows_; ++r) {
      for (std::int64_t g = 0; g < groups_per_row(); ++g) {
        int const i0 = nibble(r, g) & 0x3, i1 = nibble(r, g) >> 2;
        SDNN_EXPECTS(i0 < i1, "sparse24: row ", r, ", group ", g, " (columns ", g * sparse24_group, "..",
                     g * sparse24_group + 3, "): positions ", i0, " and ", i1,
                     " are not strictly increasing");
        for (int s = 0; s < sparse24_kept; ++s) {
          std::int64_t const c = g * sparse24_group + (s ? i1 : i0);
          SDNN_EXPECTS(c < cols_ || detail::sparse24_is_zero(value(r, 2 * g + s)), "sparse24: row ", r, ", group ", g,
                       ": kept value at column ", c, " is nonzero but lies past the last column (", cols_, " columns)");
        }
      }
      if (groups_per_row() % 2 == 1)
        SDNN_EXPECTS((meta_[static_cast<std::size_t>(r * meta_ld() + meta_ld() - 1)] >> 4) == 0, "sparse24: row ", r,
                     ": the unused high nibble of the last metadata byte must be 0");
    }
  }

 private:
  static std::int64_t checked_rows(std::int64_t rows, std::int64_t cols) {
    SDNN_EXPECTS(rows >= 0 && cols >= 0, "sparse24_matrix: shape must be >= 0, got ", rows, " x ", cols);
    return rows;
  }
  void set_nibble(std::int64_t r, std::int64_t g, std::uint8_t nib) {
    auto& b = meta_[static_cast<std::size_t>(r * meta_ld() + g / 2)];
    int const sh = 4 * static_cast<int>(g % 2);
    b = static_cast<std::uint8_t>((b & ~(0xF << sh)) | (nib << sh));
  }

  std::int64_t rows_ = 0, cols_ = 0;
  host_buffer<T> values_;        // [rows x kept_per_row()]
  host_buffer<std::uint8_t> meta_;  // [rows x meta_ld()]
};

// The 2:4 form of a dense matrix that already is 2:4 (at most 2 nonzeros, +0 and -0 counting as
// zero, in every aligned group of 4 of a row; NaN and Inf count as nonzeros). Throws sdnn::error
// naming the first offending row and group otherwise. Nonzeros keep their bits; a group with
// fewer than 2 nonzeros keeps its dense entries (zeros) at the smallest free positions.
template <class T>
sparse24_matrix<std::remove_const_t<T>> sparse24_from_dense(dense_view<T> a) {
  using V = std::remove_const_t<T>;
  SDNN_EXPECTS(a.rows >= 0 && a.cols >= 0 && (a.rows == 0 || a.ld >= a.cols), "sparse24_from_dense: a ", a.rows,
               " x ", a.cols, " view with ld ", a.ld, " is not a valid dense view");
  sparse24_matrix<V> w(a.rows, a.cols);
  for (std::int64_t r = 0; r < a.rows; ++r) {
    for (std::int64_t g = 0; g < w.groups_per_row(); ++g) {
      int pos[sparse24_group];
      int nnz = 0;
      for (int i = 0; i < sparse24_group; ++i) {
        std::int64_t const c = g * sparse24_group + i;
        if (c < a.cols && !detail::sparse24_is_zero(a(r, c))) {
          if (nnz == sparse24_kept)
            SDNN_FAIL("sparse24_from_dense: row ", r, ", group ", g, " (columns ", g * sparse24_group, "..",
                      g * sparse24_group + 3, ") has more than 2 nonzeros (the third at column ", c,
                      "): the matrix is not 2:4; prune it first (train/op/prune_sparse24.hpp)");
          pos[nnz++] = i;
        }
      }
      // Complete with the smallest free positions, then sort.
      for (int i = 0; nnz < sparse24_kept; ++i)
        if (!(nnz > 0 && pos[0] == i)) pos[nnz++] = i;
      if (pos[0] > pos[1]) std::swap(pos[0], pos[1]);
      auto at = [&](int i) {
        std::int64_t const c = g * sparse24_group + i;
        return c < a.cols ? V(a(r, c)) : V{};
      };
      w.set_group(r, g, pos[0], at(pos[0]), pos[1], at(pos[1]));
    }
  }
  return w;
}

// The dense rows x cols matrix of w (zeros where nothing is stored).
template <class T>
dense_matrix<T> to_dense(sparse24_matrix<T> const& w) {
  dense_matrix<T> d(w.rows(), w.cols());  // host storage is value-initialised: all zero bits
  for (std::int64_t r = 0; r < w.rows(); ++r)
    for (std::int64_t j = 0; j < w.kept_per_row(); ++j) {
      std::int64_t const c = w.column(r, j);
      if (c < w.cols()) d(r, c) = w.value(r, j);
    }
  return d;
}

}  // namespace sdnn
