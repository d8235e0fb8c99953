// sdnn/formats/stats.hpp - sparsity statistics of a matrix, the input of policy choice.
//
//   compute_stats(csr[, tile_rows, tile_cols])   host (this header)
//   compute_stats(csr[, tile_rows, tile_cols], cuda_exec)   device (formats/stats.cuh)
// Both reduce to the same integers (counts, sum of squared row lengths) and derive the
// floating-point fields from them with the same host code (detail::finish_stats), so the
// host and device results are equal, not merely close.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/tiled_dense.hpp"

namespace sdnn {

struct matrix_stats {
  std::int64_t rows = 0, cols = 0, nnz = 0;  // nnz = stored entries
  std::int64_t min_row_nnz = 0, max_row_nnz = 0;  // 0 when rows == 0
  double mean_row_nnz = 0;    // nnz / rows (0 when rows == 0)
  double row_nnz_stddev = 0;  // population standard deviation of the row lengths
  std::int64_t empty_rows = 0;
  // Tile occupancy for tile_rows x tile_cols tiles over the matrix (edge tiles partial):
  // a tile is occupied when it holds at least one stored entry.
  std::int64_t tile_rows = 32, tile_cols = 32;
  std::int64_t tiles = 0, occupied_tiles = 0;
  double tile_occupancy = 0;  // occupied_tiles / tiles (0 when there are no tiles)

  double density() const {
    return rows && cols ? static_cast<double>(nnz) / (static_cast<double>(rows) * static_cast<double>(cols)) : 0.0;
  }
  double empty_row_fraction() const { return rows ? static_cast<double>(empty_rows) / static_cast<double>(rows) : 0.0; }
};

namespace detail {
inline void check_tile_shape(std::int64_t tile_rows, std::int64_t tile_cols) {
  SDNN_EXPECTS(tile_rows > 0 && tile_cols > 0, "compute_stats: tile shape must be positive, got ", tile_rows, " x ",
               tile_cols);
}
// The floating-point fields from exact integer reductions (shared by host and device).
inline matrix_stats finish_stats(std::int64_t rows, std::int64_t cols, std::int64_t nnz, std::int64_t min_row,
                                 std::int64_t max_row, std::int64_t sum_sq_row, std::int64_t empty_rows,
                                 std::int64_t tile_rows, std::int64_t tile_cols, std::int64_t occupied_tiles) {
  matrix_stats s;
  s.rows = rows;
  s.cols = cols;
  s.nnz = nnz;
  s.min_row_nnz = rows ? min_row : 0;
  s.max_row_nnz = rows ? max_row : 0;
  s.empty_rows = empty_rows;
  if (rows) {
    double const n = static_cast<double>(rows);
    s.mean_row_nnz = static_cast<double>(nnz) / n;
    double const var = static_cast<double>(sum_sq_row) / n - s.mean_row_nnz * s.mean_row_nnz;
    s.row_nnz_stddev = var > 0 ? std::sqrt(var) : 0.0;
  }
  s.tile_rows = tile_rows;
  s.tile_cols = tile_cols;
  // The tile count saturates at INT64_MAX (a 2^40 x 2^40 matrix of 1 x 1 tiles); the occupancy
  // is then computed from the saturated count.
  std::int64_t const grid_rows = ceil_div(rows, tile_rows), grid_cols = ceil_div(cols, tile_cols);
  s.tiles = grid_rows != 0 && grid_cols > std::numeric_limits<std::int64_t>::max() / grid_rows
                ? std::numeric_limits<std::int64_t>::max()
                : grid_rows * grid_cols;
  s.occupied_tiles = occupied_tiles;
  s.tile_occupancy = s.tiles ? static_cast<double>(occupied_tiles) / static_cast<double>(s.tiles) : 0.0;
  return s;
}
}  // namespace detail

template <class T, class Index>
matrix_stats compute_stats(csr_matrix<T, Index, host_space> const& a, std::int64_t tile_rows, std::int64_t tile_cols,
                           host_exec) {
  detail::check_tile_shape(tile_rows, tile_cols);
  std::int64_t const rows = a.rows();
  std::int64_t min_row = rows ? a.nnz() : 0, max_row = 0, sum_sq = 0, empty = 0, occupied = 0;
  // Occupied tiles per tile row: the distinct tile columns of its entries (sorted), so memory
  // grows with the entries of one tile row, never with the tile grid (a 4 x 2^62 matrix of
  // 1 x 1 tiles has 2^64 tiles).
  std::vector<std::int64_t> tile_cols_seen;
  for (std::int64_t i0 = 0; i0 < rows; i0 += std::min(tile_rows, rows - i0)) {
    std::int64_t const i1 = i0 + std::min(tile_rows, rows - i0);
    tile_cols_seen.clear();
    for (std::int64_t i = i0; i < i1; ++i) {
      std::int64_t const b = a.row_ptr()[static_cast<std::size_t>(i)], e = a.row_ptr()[static_cast<std::size_t>(i) + 1];
      std::int64_t const len = e - b;
      min_row = std::min(min_row, len);
      max_row = std::max(max_row, len);
      sum_sq += len * len;
      empty += len == 0;
      for (std::int64_t k = b; k < e; ++k)
        tile_cols_seen.push_back(static_cast<std::int64_t>(a.col_idx()[static_cast<std::size_t>(k)]) / tile_cols);
    }
    std::sort(tile_cols_seen.begin(), tile_cols_seen.end());
    occupied += std::unique(tile_cols_seen.begin(), tile_cols_seen.end()) - tile_cols_seen.begin();
  }
  return detail::finish_stats(rows, a.cols(), a.nnz(), min_row, max_row, sum_sq, empty, tile_rows, tile_cols, occupied);
}
template <class T, class Index>
matrix_stats compute_stats(csr_matrix<T, Index, host_space> const& a, std::int64_t tile_rows = 32,
                           std::int64_t tile_cols = 32) {
  return compute_stats(a, tile_rows, tile_cols, host_exec{});
}
template <class T, class Index>
matrix_stats compute_stats(csr_matrix<T, Index, host_space> const& a, host_exec e) {
  return compute_stats(a, 32, 32, e);
}

}  // namespace sdnn
