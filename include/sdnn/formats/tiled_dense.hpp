// sdnn/formats/tiled_dense.hpp - a dense matrix stored tile by tile (default 32 x 32 tiles,
// each contiguous and row-major), with an index of the tiles that hold any nonzero so kernels
// can skip all-zero tiles. The layout and its invariants are on tiled_dense_matrix below.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "sdnn/core/config.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/memory.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn {

// Non-owning view, passed to kernels by value. T may be const-qualified.
template <class T>
struct tiled_dense_view {
  std::int64_t rows = 0, cols = 0;
  std::int64_t tile_rows = 32, tile_cols = 32;
  std::int64_t grid_rows = 0, grid_cols = 0;  // tiles per column / per row of the grid
  std::int64_t occupied_tiles = 0;            // entries of tile_col
  T* data = nullptr;                          // [grid_rows * grid_cols * tile_rows * tile_cols]
  std::uint8_t const* occupied = nullptr;     // [grid_rows * grid_cols], 1 = holds a nonzero
  std::int64_t const* tile_row_ptr = nullptr; // [grid_rows + 1]
  std::int64_t const* tile_col = nullptr;     // [occupied_tiles], increasing within a tile row

  SDNN_HOST_DEVICE std::int64_t tile_size() const { return tile_rows * tile_cols; }
  // First element of tile (ti, tj) of the grid.
  SDNN_HOST_DEVICE T* tile(std::int64_t ti, std::int64_t tj) const {
    return data + (ti * grid_cols + tj) * tile_size();
  }
  // Position of element (i, j) in data.
  SDNN_HOST_DEVICE std::int64_t offset(std::int64_t i, std::int64_t j) const {
    return ((i / tile_rows) * grid_cols + j / tile_cols) * tile_size() + (i % tile_rows) * tile_cols + j % tile_cols;
  }
  SDNN_HOST_DEVICE T& operator()(std::int64_t i, std::int64_t j) const { return data[offset(i, j)]; }
  // Mutable -> read-only view (only declared for non-const T, so no self-conversion).
  template <class U = T, class = std::enable_if_t<!std::is_const_v<U>>>
  operator tiled_dense_view<U const>() const {
    return {rows, cols, tile_rows, tile_cols, grid_rows, grid_cols, occupied_tiles, data, occupied, tile_row_ptr,
            tile_col};
  }
};

namespace detail {
// ceil(a / b) for a >= 0, b > 0 (0 otherwise), without overflow for any a.
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return b > 0 && a > 0 ? a / b + (a % b != 0) : 0; }
}  // namespace detail

// Layout for a rows x cols matrix with tile_rows x tile_cols tiles (default 32 x 32):
//   grid_rows = ceil(rows / tile_rows), grid_cols = ceil(cols / tile_cols);
//   data: grid_rows * grid_cols tiles, the tile grid in row-major order, each tile
//     contiguous and row-major (tile_rows * tile_cols values); element (i, j) lives in
//     tile (i / tile_rows, j / tile_cols) at (i % tile_rows) * tile_cols + j % tile_cols;
//     edge tiles are zero-padded beyond rows / cols;
//   occupied: one uint8 per tile, 1 if the tile holds any nonzero, else 0;
//   tile_row_ptr [grid_rows + 1], tile_col [occupied tiles]: CSR over the tile grid
//     listing the occupied tiles of each tile row in increasing tile column.
// validate() checks every one of these invariants; update_tile_index() rebuilds the
// occupancy and the tile lists after the data was written directly (host).
template <class T, class Space = host_space>
class tiled_dense_matrix {
 public:
  using value_type = T;
  using space = Space;

  // An empty 0 x 0 matrix (32 x 32 tiles); on the host its tile_row_ptr is {0}.
  tiled_dense_matrix() {
    if constexpr (std::is_same_v<Space, host_space>) tile_row_ptr_ = buffer<std::int64_t, Space>(1);
  }
  // Allocates a rows x cols matrix of tile_rows x tile_cols tiles. Host storage is an
  // all-zero matrix with a consistent (empty) tile index. Device storage is
  // uninitialised, tile_col is empty; the producer fills data, occupied, tile_row_ptr
  // and assigns tile_col. Device: pass the cuda_exec ordering the allocation.
  template <class... Exec>
  tiled_dense_matrix(std::int64_t rows, std::int64_t cols, std::int64_t tile_rows, std::int64_t tile_cols,
                     Exec... exec)
      : rows_(rows), cols_(cols), tile_rows_(tile_rows), tile_cols_(tile_cols),
        grid_rows_(checked_grid(rows, cols, tile_rows, tile_cols)), grid_cols_(detail::ceil_div(cols, tile_cols)),
        data_(detail::alloc<T, Space>(checked_data(grid_rows_, grid_cols_, tile_rows, tile_cols), exec...)),
        occupied_(detail::alloc<std::uint8_t, Space>(static_cast<std::size_t>(grid_rows_ * grid_cols_), exec...)),
        tile_row_ptr_(detail::alloc<std::int64_t, Space>(static_cast<std::size_t>(grid_rows_) + 1, exec...)) {}

  std::int64_t rows() const noexcept { return rows_; }
  std::int64_t cols() const noexcept { return cols_; }
  std::int64_t tile_rows() const noexcept { return tile_rows_; }
  std::int64_t tile_cols() const noexcept { return tile_cols_; }
  std::int64_t grid_rows() const noexcept { return grid_rows_; }
  std::int64_t grid_cols() const noexcept { return grid_cols_; }
  std::int64_t num_tiles() const noexcept { return grid_rows_ * grid_cols_; }
  std::int64_t occupied_tiles() const noexcept { return static_cast<std::int64_t>(tile_col_.size()); }

  buffer<T, Space>& values() noexcept { return data_; }
  buffer<std::uint8_t, Space>& occupied() noexcept { return occupied_; }
  buffer<std::int64_t, Space>& tile_row_ptr() noexcept { return tile_row_ptr_; }
  buffer<std::int64_t, Space>& tile_col() noexcept { return tile_col_; }
  buffer<T, Space> const& values() const noexcept { return data_; }
  buffer<std::uint8_t, Space> const& occupied() const noexcept { return occupied_; }
  buffer<std::int64_t, Space> const& tile_row_ptr() const noexcept { return tile_row_ptr_; }
  buffer<std::int64_t, Space> const& tile_col() const noexcept { return tile_col_; }

  tiled_dense_view<T> view() noexcept { return make_view(data_.data()); }
  tiled_dense_view<T const> view() const noexcept { return make_view(data_.data()); }

  // Host only: element access (logical coordinates).
  T& operator()(std::int64_t i, std::int64_t j) { return data_[static_cast<std::size_t>(view().offset(i, j))]; }
  T const& operator()(std::int64_t i, std::int64_t j) const {
    return data_[static_cast<std::size_t>(view().offset(i, j))];
  }

 private:
  template <class P>
  tiled_dense_view<P> make_view(P* data) const noexcept {
    return {rows_,     cols_, tile_rows_,        tile_cols_,          grid_rows_,         grid_cols_,
            occupied_tiles(), data, occupied_.data(), tile_row_ptr_.data(), tile_col_.data()};
  }
  static std::int64_t checked_grid(std::int64_t rows, std::int64_t cols, std::int64_t tr, std::int64_t tc) {
    SDNN_EXPECTS(rows >= 0 && cols >= 0, "tiled_dense_matrix: shape must be non-negative, got ", rows, " x ", cols);
    SDNN_EXPECTS(tr > 0 && tc > 0, "tiled_dense_matrix: tile shape must be positive, got ", tr, " x ", tc);
    return detail::ceil_div(rows, tr);
  }
  // Elements of data (every size below 2^60, so the products above cannot wrap).
  static std::size_t checked_data(std::int64_t grid_rows, std::int64_t grid_cols, std::int64_t tr, std::int64_t tc) {
    detail::checked_extent(grid_rows, 1, "tiled_dense_matrix: tile rows of the grid");
    auto const tiles = detail::checked_extent(grid_rows, grid_cols, "tiled_dense_matrix: tile grid");
    auto const tile = detail::checked_extent(tr, tc, "tiled_dense_matrix: tile_rows x tile_cols");
    return detail::checked_extent(static_cast<long long>(tiles), static_cast<long long>(tile),
                                  "tiled_dense_matrix: tiles x tile size");
  }
  std::int64_t rows_ = 0, cols_ = 0, tile_rows_ = 32, tile_cols_ = 32, grid_rows_ = 0, grid_cols_ = 0;
  buffer<T, Space> data_;
  buffer<std::uint8_t, Space> occupied_;
  buffer<std::int64_t, Space> tile_row_ptr_;
  buffer<std::int64_t, Space> tile_col_;
};

// Host: recomputes occupied, tile_row_ptr and tile_col from the data (after writing
// elements directly). Edge padding is not inspected (it must stay zero).
template <class T>
void update_tile_index(tiled_dense_matrix<T, host_space>& a) {
  auto const v = a.view();
  std::int64_t count = 0;
  for (std::int64_t t = 0; t < a.num_tiles(); ++t) {
    T const* p = a.values().data() + t * v.tile_size();
    a.occupied()[static_cast<std::size_t>(t)] =
        std::any_of(p, p + v.tile_size(), [](T const& x) { return detail::is_nonzero(x); }) ? 1 : 0;
    count += a.occupied()[static_cast<std::size_t>(t)];
  }
  buffer<std::int64_t, host_space> tile_col(static_cast<std::size_t>(count));
  std::int64_t k = 0;
  for (std::int64_t ti = 0; ti < a.grid_rows(); ++ti) {
    a.tile_row_ptr()[static_cast<std::size_t>(ti)] = k;
    for (std::int64_t tj = 0; tj < a.grid_cols(); ++tj)
      if (a.occupied()[static_cast<std::size_t>(ti * a.grid_cols() + tj)]) tile_col[static_cast<std::size_t>(k++)] = tj;
  }
  a.tile_row_ptr()[static_cast<std::size_t>(a.grid_rows())] = k;
  a.tile_col() = std::move(tile_col);
}

// Checks every invariant of a host-resident tiled-dense matrix; throws sdnn::error
// naming the first offending tile or element, e.g.
// "tiled_dense: tile (1, 2): occupied = 0 but element (40, 70) is nonzero".
template <class T>
void validate(tiled_dense_view<T const> const& a, std::size_t data_size, std::size_t occupied_size,
              std::size_t tile_row_ptr_size, std::size_t tile_col_size) {
  SDNN_EXPECTS(a.rows >= 0 && a.cols >= 0, "tiled_dense: shape must be non-negative, got ", a.rows, " x ", a.cols);
  SDNN_EXPECTS(a.tile_rows > 0 && a.tile_cols > 0, "tiled_dense: tile shape must be positive, got ", a.tile_rows,
               " x ", a.tile_cols);
  SDNN_EXPECTS(a.grid_rows == detail::ceil_div(a.rows, a.tile_rows) &&
                   a.grid_cols == detail::ceil_div(a.cols, a.tile_cols),
               "tiled_dense: tile grid must be ", detail::ceil_div(a.rows, a.tile_rows), " x ",
               detail::ceil_div(a.cols, a.tile_cols), " for ", a.rows, " x ", a.cols, " with ", a.tile_rows, " x ",
               a.tile_cols, " tiles, got ", a.grid_rows, " x ", a.grid_cols);
  auto const tiles = detail::checked_extent(a.grid_rows, a.grid_cols, "tiled_dense: tile grid");
  auto const tile = detail::checked_extent(a.tile_rows, a.tile_cols, "tiled_dense: tile_rows x tile_cols");
  auto const elements = detail::checked_extent(static_cast<long long>(tiles), static_cast<long long>(tile),
                                               "tiled_dense: tiles x tile size");
  SDNN_EXPECTS(data_size == elements, "tiled_dense: data must have ", elements, " entries (", tiles, " tiles of ", tile,
               "), got ", data_size);
  SDNN_EXPECTS(occupied_size == tiles, "tiled_dense: occupied must have one entry per tile = ", tiles,
               ", got ", occupied_size);
  SDNN_EXPECTS(tile_row_ptr_size == static_cast<std::size_t>(a.grid_rows) + 1,
               "tiled_dense: tile_row_ptr must have grid_rows + 1 = ", static_cast<std::size_t>(a.grid_rows) + 1,
               " entries, got ", tile_row_ptr_size);
  SDNN_EXPECTS(tile_col_size == static_cast<std::size_t>(a.occupied_tiles), "tiled_dense: tile_col must have ",
               a.occupied_tiles, " entries, got ", tile_col_size);
  SDNN_EXPECTS(a.tile_row_ptr[0] == 0, "tiled_dense: tile_row_ptr[0] must be 0, got ", a.tile_row_ptr[0]);
  std::int64_t listed = 0;  // next expected position in tile_col
  for (std::int64_t ti = 0; ti < a.grid_rows; ++ti) {
    SDNN_EXPECTS(a.tile_row_ptr[ti] == listed, "tiled_dense: tile_row_ptr[", ti, "] must be ", listed,
                 " (occupied tiles before tile row ", ti, "), got ", a.tile_row_ptr[ti]);
    for (std::int64_t tj = 0; tj < a.grid_cols; ++tj) {
      std::int64_t const t = ti * a.grid_cols + tj;
      std::uint8_t const occ = a.occupied[t];
      SDNN_EXPECTS(occ <= 1, "tiled_dense: tile (", ti, ", ", tj, "): occupied must be 0 or 1, got ", int(occ));
      T const* p = a.tile(ti, tj);
      bool any = false;
      std::int64_t nz_i = -1, nz_j = -1;
      for (std::int64_t r = 0; r < a.tile_rows; ++r)
        for (std::int64_t c = 0; c < a.tile_cols; ++c) {
          if (!detail::is_nonzero(p[r * a.tile_cols + c])) continue;
          std::int64_t const i = ti * a.tile_rows + r, j = tj * a.tile_cols + c;
          SDNN_EXPECTS(i < a.rows && j < a.cols, "tiled_dense: tile (", ti, ", ", tj, "): padding element (", i,
                       ", ", j, ") outside the ", a.rows, " x ", a.cols, " matrix must be 0");
          if (!any) nz_i = i, nz_j = j;
          any = true;
        }
      SDNN_EXPECTS(any || occ == 0, "tiled_dense: tile (", ti, ", ", tj, "): occupied = 1 but the tile is all zero");
      SDNN_EXPECTS(!any || occ == 1, "tiled_dense: tile (", ti, ", ", tj, "): occupied = 0 but element (", nz_i,
                   ", ", nz_j, ") is nonzero");
      if (!occ) continue;
      SDNN_EXPECTS(listed < a.occupied_tiles, "tiled_dense: tile (", ti, ", ", tj,
                   ") is occupied but tile_col has only ", a.occupied_tiles, " entries");
      SDNN_EXPECTS(a.tile_col[listed] == tj, "tiled_dense: tile_col[", listed, "] must be ", tj,
                   " (the next occupied tile of tile row ", ti, "), got ", a.tile_col[listed]);
      ++listed;
    }
  }
  SDNN_EXPECTS(a.tile_row_ptr[a.grid_rows] == listed && listed == a.occupied_tiles, "tiled_dense: tile_row_ptr[",
               a.grid_rows, "] and the tile_col length must equal the ", listed, " occupied tiles, got ",
               a.tile_row_ptr[a.grid_rows], " and ", a.occupied_tiles);
}

template <class T>
void validate(tiled_dense_matrix<T, host_space> const& a) {
  validate<T>(a.view(), a.values().size(), a.occupied().size(), a.tile_row_ptr().size(), a.tile_col().size());
}

}  // namespace sdnn
