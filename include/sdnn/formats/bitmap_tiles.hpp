// sdnn/formats/bitmap_tiles.hpp - unstructured sparse weights for the small-batch tensor-core
// kernel (linear/kernel/tc_bitmap.cuh): W (M x K) cut into 16-row panels and 64-column groups, a
// group into 4 mma tiles of 16 x 16, every tile stored (empty ones too: at the sparsities this
// serves, 50-99 %, a tile is rarely empty), each as a 32-byte record with a 128-bit mask and the
// tile's values in pairs, in the order of the mma.m16n8k16 A fragment: lane l of a warp (g = l / 4,
// t = l % 4) holds in register j = 0..3 of tile u = 0..3 the pair of row g + 8 (j % 2), columns c
// and c + 1 of the group, c = 16 t + 4 u + 2 (j / 2). (The mma's k index 2 t + 8 (j / 2) is column
// 16 t + 4 u + 2 (j / 2): so each lane reads its X fragments of the 4 tiles as 16 consecutive
// values, and K is summed in another order than the columns'.) A pair is stored (both values, one
// 32-bit word) when either of its values is nonzero. The mask is kept per register (bit l of
// mask[j]: lane l's pair j is stored) and the pairs register by register, lane by lane within a
// register: lane l finds its pair j at start + before[j] + popcount(mask[j] & (2^l - 1)), the lanes
// of a warp read register j from consecutive words, and the word is the A register as it is.
#pragma once

// Record of tile (p, q) (tile rows p, tile columns q, row-major, p * tile_cols + q):
//   uint32 mask[4]    bit l of mask[j]: pair j of lane l is stored
//   uint8  before[4]  before[j]: the tile's stored pairs of the registers 0 .. j-1 (at most 96)
//   uint32 start      the tile's first pair in values() (pairs: values 2 start, 2 start + 1)
//   uint32 count      the tile's stored pairs (0: the kernel skips the tile)
//   uint32 zero       padding to 32 bytes
// Why pairs: the decode of a tile (a popcount, an address and a load per stored unit and lane) is
// the kernel's cost at small N, not the bytes, so a pair halves it against single values (ncu:
// about 120 instructions per tile and warp with values, the time of dense cuBLAS). Bytes per
// weight: 32 / 256 + 2 P, P = 1 - s^2 the share of stored pairs at sparsity s (random positions):
// 1.6 / 1.1 / 0.51 / 0.32 / 0.17 at 50 / 70 / 90 / 95 / 99 % (dense: 2).

#include <bitset>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/core/numeric.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn {

struct bitmap_tile_record {
  std::uint32_t mask[4];
  std::uint8_t before[4];
  std::uint32_t start;
  std::uint32_t count;
  std::uint32_t zero;
};
static_assert(sizeof(bitmap_tile_record) == 32, "bitmap_tile_record: 32 bytes, 16-byte aligned records");

namespace detail {
// Row (in the panel) and first column (in the 64-column group) of register j (0..3) of lane l's
// A fragment of tile u (0..3) of the group.
constexpr int bitmap_row(int lane, int j) { return lane / 4 + 8 * (j % 2); }
constexpr int bitmap_col(int lane, int j, int u) { return 16 * (lane % 4) + 4 * u + 2 * (j / 2); }
}  // namespace detail

template <class T>
class bitmap_tiles_matrix {
 public:
  static constexpr int tile = 16, group = 64;  // a tile's rows; a group's columns (4 tiles)

  bitmap_tiles_matrix() = default;
  std::int64_t rows() const noexcept { return rows_; }
  std::int64_t cols() const noexcept { return cols_; }
  std::int64_t tile_rows() const noexcept { return (rows_ + tile - 1) / tile; }
  // Tiles per panel: 4 per 64-column group (the last group's tiles past K are empty).
  std::int64_t tile_cols() const noexcept { return (cols_ + group - 1) / group * 4; }
  // Stored pairs (each two values, one of them possibly zero).
  std::int64_t pairs() const noexcept { return std::int64_t(values_.size() / 2); }
  std::vector<bitmap_tile_record> const& records() const noexcept { return records_; }
  std::vector<T> const& values() const noexcept { return values_; }
  // Bytes as stored on the device (records and values).
  std::size_t bytes() const noexcept { return records_.size() * sizeof(bitmap_tile_record) + values_.size() * sizeof(T); }

  // Entry (i, j), 0 where nothing is stored.
  T at(std::int64_t i, std::int64_t j) const {
    SDNN_EXPECTS(i >= 0 && i < rows_ && j >= 0 && j < cols_, "bitmap_tiles_matrix::at: (", i, ", ", j,
                 ") outside ", rows_, " x ", cols_);
    // The inverse of bitmap_row / bitmap_col: lane 4 g + t holds it in register j of tile u.
    int const row = int(i % tile), col = int(j % group), u = (col % 16) / 4;
    int const lane = 4 * (row % 8) + col / 16, reg = row / 8 + 2 * ((col % 4) / 2);
    auto const& r = records_[std::size_t((i / tile) * tile_cols() + (j / group) * 4 + u)];
    if (!((r.mask[reg] >> lane) & 1u)) return T(0.f);
    // The pair's place: as the kernel finds it, start + before[reg] + the lanes below with reg stored.
    std::size_t const pair = std::size_t(r.start) + r.before[reg] + std::bitset<32>(r.mask[reg] & ((1u << lane) - 1u)).count();
    return values_[2 * pair + std::size_t(col % 2)];
  }

  template <class U>
  friend bitmap_tiles_matrix<std::remove_const_t<U>> bitmap_tiles_from_dense(dense_view<U> w);

 private:
  std::int64_t rows_ = 0, cols_ = 0;
  std::vector<bitmap_tile_record> records_;
  std::vector<T> values_;  // pairs: values 2 k and 2 k + 1
};

// W as bitmap tiles: a pair is stored when either value is nonzero (detail::is_nonzero: NaN and
// -0 count). Refused: 2^32 or more stored pairs (the records' 32-bit starts).
template <class U>
bitmap_tiles_matrix<std::remove_const_t<U>> bitmap_tiles_from_dense(dense_view<U> w) {
  using T = std::remove_const_t<U>;
  SDNN_EXPECTS(w.rows >= 0 && w.cols >= 0 && (w.rows == 0 || w.ld >= w.cols), "bitmap_tiles_from_dense: a ", w.rows,
               " x ", w.cols, " view with ld ", w.ld, " is not a valid dense view");
  bitmap_tiles_matrix<T> b;
  b.rows_ = w.rows;
  b.cols_ = w.cols;
  std::int64_t const tr = b.tile_rows(), tc = b.tile_cols();
  b.records_.resize(std::size_t(tr * tc));
  std::uint64_t count = 0;
  auto value = [&](std::int64_t i, std::int64_t j) { return i < w.rows && j < w.cols ? w(i, j) : T(0.f); };
  for (std::int64_t p = 0; p < tr; ++p)
    for (std::int64_t q = 0; q < tc; ++q) {
      auto& r = b.records_[std::size_t(p * tc + q)];
      std::memset(&r, 0, sizeof r);
      r.start = std::uint32_t(count);
      for (int reg = 0; reg < 4; ++reg) {
        r.before[reg] = std::uint8_t(count - r.start);
        for (int lane = 0; lane < 32; ++lane) {
          std::int64_t const i = p * 16 + detail::bitmap_row(lane, reg);
          std::int64_t const j = (q / 4) * 64 + detail::bitmap_col(lane, reg, int(q % 4));
          T const v0 = value(i, j), v1 = value(i, j + 1);
          if (!::sdnn::detail::is_nonzero(v0) && !::sdnn::detail::is_nonzero(v1)) continue;
          r.mask[reg] |= 1u << lane;
          SDNN_EXPECTS(count < std::numeric_limits<std::uint32_t>::max(), "bitmap_tiles_from_dense: 2^32 or more "
                       "stored pairs (a ", w.rows, " x ", w.cols, " matrix); the records' starts are 32-bit");
          b.values_.push_back(v0);
          b.values_.push_back(v1);
          ++count;
        }
      }
      r.count = std::uint32_t(count - r.start);
    }
  return b;
}

template <class T>
dense_matrix<T> to_dense(bitmap_tiles_matrix<T> const& b) {
  dense_matrix<T> d(b.rows(), b.cols());
  for (std::int64_t i = 0; i < b.rows(); ++i)
    for (std::int64_t j = 0; j < b.cols(); ++j) d(i, j) = b.at(i, j);
  return d;
}

}  // namespace sdnn
