// sdnn/formats/tile_offsets.hpp - unstructured sparse weights stored for "load as sparse,
// compute as dense": the matrix is cut into tile_rows x tile_cols tiles (64 x 64 for the
// kernels), only tiles holding a nonzero are stored (tile rows and sorted tile columns, as in
// BSR), and each stored tile is one 16-byte-aligned record that a thread block copies with
// 16-byte loads: the nonzero counts of its 16 x 16 sub-tiles (the mma A tile), the values, and
// each value's 8-bit position inside its sub-tile. The kernel scatters a sub-tile's values into
// a zeroed 16 x 16 tile in shared memory and runs a dense mma on it; empty sub-tiles are skipped.
// The device twin is tile_offsets_matrix<T, device_space> (upload: linear/op/tc_linear.cuh).
#pragma once

// Why 8-bit positions and not a bitmap (16-bit values; d = density; bytes per nonzero):
//   sparsity               50 %   70 %   90 %   95 %   99 %
//   bitmap + values        2.25   2.42   3.25   4.50   14.5   (2 + 1/(8 d); SpInfer)
//   8-bit positions        3.02   3.04   3.12   3.23   4.17   (3 + 48 B header per 64 x 64 tile)
//   16-bit positions       4      4      4      4      4      (Flash-LLM's value + index word)
// The bitmap moves 25-35 % fewer bytes at 50-70 %, the positions 4 % / 28 % / 71 % fewer at
// 90 / 95 / 99 %. Decoding decides it: a bitmap needs a popcount rank per element pair (about
// 50 instructions per 16 x 16 sub-tile per warp, whatever the density), a position one shared
// store per nonzero (about 8 at 90 %), and at 90 % an SM has ~25 issue slots per sub-tile
// before it falls behind HBM (3 TB/s / 132 SMs / 1.75 GHz = 13 B per cycle, 83 B per sub-tile).
// Padding: each record rounds header, values and positions up to 16 bytes.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "sdnn/core/config.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/memory.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn {

// The byte layout of one stored tile (a "record"), for S = (tile_rows/16) * (tile_cols/16)
// sub-tiles numbered row-major, and nnz values of `value_bytes` each:
//   [0, header)                  uint16 start[S + 1]: sub-tile s holds values start[s] .. start[s+1]-1
//   [header, header + vbytes)    the values, by sub-tile, then by position (ascending)
//   [header + vbytes, total)     uint8 position of each value in its sub-tile: row * 16 + column
// with header = round16(2 (S + 1)), vbytes = round16(nnz * value_bytes), total = vbytes +
// round16(nnz) + header.
struct tile_record {
  SDNN_HOST_DEVICE static constexpr std::uint32_t round16(std::uint32_t b) { return (b + 15u) & ~15u; }
  SDNN_HOST_DEVICE static constexpr std::uint32_t header_bytes(std::uint32_t subtiles) {
    return round16(2u * (subtiles + 1u));
  }
  SDNN_HOST_DEVICE static constexpr std::uint32_t value_bytes(std::uint32_t nnz, std::uint32_t vsize) {
    return round16(nnz * vsize);
  }
  SDNN_HOST_DEVICE static constexpr std::uint32_t total_bytes(std::uint32_t subtiles, std::uint32_t nnz,
                                                              std::uint32_t vsize) {
    return header_bytes(subtiles) + value_bytes(nnz, vsize) + round16(nnz);
  }
};

// Non-owning view, passed to kernels by value.
template <class T>
struct tile_offsets_view {
  std::int32_t rows = 0, cols = 0;
  std::int32_t tile_rows = 64, tile_cols = 64;  // multiples of 16
  std::int32_t ntiles = 0;                      // stored tiles
  std::int32_t const* tile_ptr = nullptr;       // [row_tiles() + 1]
  std::int32_t const* tile_col = nullptr;       // [ntiles], strictly increasing within a tile row
  std::uint32_t const* tile_offset = nullptr;   // [ntiles + 1], record starts in 16-byte units
  std::uint8_t const* data = nullptr;           // [tile_offset[ntiles] * 16] record bytes

  SDNN_HOST_DEVICE std::int32_t row_tiles() const { return (rows + tile_rows - 1) / tile_rows; }
  SDNN_HOST_DEVICE std::int32_t col_tiles() const { return (cols + tile_cols - 1) / tile_cols; }
  SDNN_HOST_DEVICE std::int32_t subtiles() const { return (tile_rows / 16) * (tile_cols / 16); }
};

template <class T, class Space = host_space>
class tile_offsets_matrix {
  static_assert(std::is_trivially_copyable_v<T>, "tile_offsets_matrix: T must be trivially copyable");

 public:
  using value_type = T;
  using space = Space;

  // An empty 0 x 0 matrix (host: tile_ptr {0}, tile_offset {0}, valid).
  tile_offsets_matrix() {
    if constexpr (std::is_same_v<Space, host_space>) {
      tile_ptr_ = buffer<std::int32_t, Space>(1);
      tile_offset_ = buffer<std::uint32_t, Space>(1);
    }
  }
  // Storage for ntiles records of `bytes` bytes in all (a multiple of 16).
  template <class... Exec>
  tile_offsets_matrix(std::int32_t rows, std::int32_t cols, std::int32_t tile_rows, std::int32_t tile_cols,
                      std::int32_t ntiles, std::size_t bytes, Exec... exec)
      : rows_(rows), cols_(cols), tr_(tile_rows), tc_(tile_cols),
        tile_ptr_(detail::alloc<std::int32_t, Space>(checked(rows, cols, tile_rows, tile_cols, ntiles) + 1, exec...)),
        tile_col_(detail::alloc<std::int32_t, Space>(static_cast<std::size_t>(ntiles), exec...)),
        tile_offset_(detail::alloc<std::uint32_t, Space>(static_cast<std::size_t>(ntiles) + 1, exec...)),
        data_(detail::alloc<std::uint8_t, Space>(bytes, exec...)) {}

  std::int32_t rows() const noexcept { return rows_; }
  std::int32_t cols() const noexcept { return cols_; }
  std::int32_t tile_rows() const noexcept { return tr_; }
  std::int32_t tile_cols() const noexcept { return tc_; }
  std::int32_t ntiles() const noexcept { return static_cast<std::int32_t>(tile_col_.size()); }
  std::int32_t row_tiles() const noexcept { return view().row_tiles(); }
  std::int32_t col_tiles() const noexcept { return view().col_tiles(); }
  // Bytes of the records plus the tile index arrays: what a kernel reads.
  std::size_t bytes() const noexcept {
    return data_.size() + 4 * (tile_ptr_.size() + tile_col_.size() + tile_offset_.size());
  }

  buffer<std::int32_t, Space>& tile_ptr() noexcept { return tile_ptr_; }
  buffer<std::int32_t, Space>& tile_col() noexcept { return tile_col_; }
  buffer<std::uint32_t, Space>& tile_offset() noexcept { return tile_offset_; }
  buffer<std::uint8_t, Space>& data() noexcept { return data_; }
  buffer<std::int32_t, Space> const& tile_ptr() const noexcept { return tile_ptr_; }
  buffer<std::int32_t, Space> const& tile_col() const noexcept { return tile_col_; }
  buffer<std::uint32_t, Space> const& tile_offset() const noexcept { return tile_offset_; }
  buffer<std::uint8_t, Space> const& data() const noexcept { return data_; }

  tile_offsets_view<T> view() const noexcept {
    return {rows_, cols_, tr_, tc_, ntiles(), tile_ptr_.data(), tile_col_.data(), tile_offset_.data(), data_.data()};
  }

 private:
  static std::size_t checked(std::int32_t rows, std::int32_t cols, std::int32_t tr, std::int32_t tc, std::int32_t n) {
    SDNN_EXPECTS(rows >= 0 && cols >= 0 && n >= 0, "tile_offsets: rows, cols and stored tiles must be >= 0, got ", rows,
                 ", ", cols, ", ", n);
    SDNN_EXPECTS(tr >= 16 && tc >= 16 && tr % 16 == 0 && tc % 16 == 0 && std::int64_t(tr) * tc <= 16384,
                 "tile_offsets: tiles must be multiples of 16 x 16 with at most 16384 elements, got ", tr, " x ", tc);
    return static_cast<std::size_t>((rows + tr - 1) / tr);
  }
  std::int32_t rows_ = 0, cols_ = 0, tr_ = 64, tc_ = 64;
  buffer<std::int32_t, Space> tile_ptr_;
  buffer<std::int32_t, Space> tile_col_;
  buffer<std::uint32_t, Space> tile_offset_;
  buffer<std::uint8_t, Space> data_;
};

namespace detail {
inline std::uint16_t read_u16(std::uint8_t const* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
// The stored entries (row, column, value) of record t of tile row `tile_row`, in record order.
template <class T>
struct tile_entry {
  std::int64_t row, col;
  T value;
};
template <class T>
std::vector<tile_entry<T>> tile_entries(tile_offsets_view<T> const& a, std::int32_t tile_row, std::int32_t t) {
  std::uint8_t const* rec = a.data + std::size_t(a.tile_offset[t]) * 16;
  std::int32_t const S = a.subtiles(), sub_cols = a.tile_cols / 16;
  std::uint32_t const nnz = read_u16(rec + 2 * S);
  std::uint8_t const* vals = rec + tile_record::header_bytes(std::uint32_t(S));
  std::uint8_t const* pos = vals + tile_record::value_bytes(nnz, sizeof(T));
  std::vector<tile_entry<T>> out;
  out.reserve(nnz);
  for (std::int32_t s = 0; s < S; ++s) {
    std::uint32_t const b = read_u16(rec + 2 * s), e = read_u16(rec + 2 * (s + 1));
    for (std::uint32_t k = b; k < e; ++k) {
      tile_entry<T> en;
      std::memcpy(&en.value, vals + std::size_t(k) * sizeof(T), sizeof(T));
      en.row = std::int64_t(tile_row) * a.tile_rows + (s / sub_cols) * 16 + pos[k] / 16;
      en.col = std::int64_t(a.tile_col[t]) * a.tile_cols + (s % sub_cols) * 16 + pos[k] % 16;
      out.push_back(en);
    }
  }
  return out;
}
}  // namespace detail

// Checks every invariant of a host-resident tile_offsets matrix; throws sdnn::error naming the
// first bad entry.
template <class T>
void validate(tile_offsets_view<T> const& a, std::size_t tile_ptr_size, std::size_t tile_col_size,
              std::size_t tile_offset_size, std::size_t data_size) {
  SDNN_EXPECTS(a.rows >= 0 && a.cols >= 0 && a.ntiles >= 0, "tile_offsets: rows, cols and stored tiles must be >= 0, got ",
               a.rows, ", ", a.cols, ", ", a.ntiles);
  SDNN_EXPECTS(a.tile_rows >= 16 && a.tile_cols >= 16 && a.tile_rows % 16 == 0 && a.tile_cols % 16 == 0 &&
                   std::int64_t(a.tile_rows) * a.tile_cols <= 16384,
               "tile_offsets: tiles must be multiples of 16 x 16 with at most 16384 elements, got ", a.tile_rows, " x ",
               a.tile_cols);
  std::int32_t const rt = a.row_tiles(), ct = a.col_tiles(), S = a.subtiles(), sub_cols = a.tile_cols / 16;
  SDNN_EXPECTS(tile_ptr_size == static_cast<std::size_t>(rt) + 1, "tile_offsets: tile_ptr must have row_tiles + 1 = ",
               rt + 1, " entries, got ", tile_ptr_size);
  SDNN_EXPECTS(tile_col_size == static_cast<std::size_t>(a.ntiles), "tile_offsets: tile_col must have ", a.ntiles,
               " entries, got ", tile_col_size);
  SDNN_EXPECTS(tile_offset_size == static_cast<std::size_t>(a.ntiles) + 1, "tile_offsets: tile_offset must have ",
               a.ntiles + 1, " entries, got ", tile_offset_size);
  SDNN_EXPECTS(a.tile_ptr[0] == 0, "tile_offsets: tile_ptr[0] must be 0, got ", a.tile_ptr[0]);
  SDNN_EXPECTS(a.tile_ptr[rt] == a.ntiles, "tile_offsets: tile_ptr[", rt, "] must equal the stored tiles ", a.ntiles,
               ", got ", a.tile_ptr[rt]);
  SDNN_EXPECTS(a.tile_offset[0] == 0, "tile_offsets: tile_offset[0] must be 0, got ", a.tile_offset[0]);
  SDNN_EXPECTS(std::size_t(a.tile_offset[a.ntiles]) * 16 == data_size, "tile_offsets: tile_offset[", a.ntiles,
               "] = ", a.tile_offset[a.ntiles], " (x 16 bytes) must equal the record bytes ", data_size);
  for (std::int32_t r = 0; r < rt; ++r) {
    std::int32_t const b = a.tile_ptr[r], e = a.tile_ptr[r + 1];
    SDNN_EXPECTS(b <= e && e <= a.ntiles, "tile_offsets: tile_ptr must be non-decreasing and <= ", a.ntiles,
                 ", but tile_ptr[", r, "] = ", b, ", tile_ptr[", r + 1, "] = ", e);
    for (std::int32_t t = b; t < e; ++t) {
      std::int32_t const c = a.tile_col[t];
      SDNN_EXPECTS(c >= 0 && c < ct, "tile_offsets: tile row ", r, ": tile_col[", t, "] = ", c, " is out of range for ",
                   ct, " tile columns");
      SDNN_EXPECTS(t == b || a.tile_col[t - 1] < c, "tile_offsets: tile row ", r, ": tile_col[", t, "] = ", c,
                   " must be greater than tile_col[", t - 1, "] = ", a.tile_col[t - 1]);
      SDNN_EXPECTS(a.tile_offset[t] < a.tile_offset[t + 1], "tile_offsets: tile_offset must increase, but tile_offset[",
                   t, "] = ", a.tile_offset[t], " >= tile_offset[", t + 1, "] = ", a.tile_offset[t + 1]);
      std::uint8_t const* rec = a.data + std::size_t(a.tile_offset[t]) * 16;
      std::size_t const rec_bytes = std::size_t(a.tile_offset[t + 1] - a.tile_offset[t]) * 16;
      SDNN_EXPECTS(rec_bytes >= tile_record::header_bytes(std::uint32_t(S)), "tile_offsets: tile ", t, ": record of ",
                   rec_bytes, " bytes is shorter than its header");
      SDNN_EXPECTS(detail::read_u16(rec) == 0, "tile_offsets: tile ", t, ": start[0] must be 0, got ",
                   detail::read_u16(rec));
      for (std::int32_t s = 0; s < S; ++s)
        SDNN_EXPECTS(detail::read_u16(rec + 2 * s) <= detail::read_u16(rec + 2 * (s + 1)), "tile_offsets: tile ", t,
                     ": start[", s, "] = ", detail::read_u16(rec + 2 * s), " > start[", s + 1, "] = ",
                     detail::read_u16(rec + 2 * (s + 1)));
      std::uint32_t const nnz = detail::read_u16(rec + 2 * S);
      SDNN_EXPECTS(rec_bytes == tile_record::total_bytes(std::uint32_t(S), nnz, sizeof(T)), "tile_offsets: tile ", t,
                   ": a record of ", nnz, " values takes ", tile_record::total_bytes(std::uint32_t(S), nnz, sizeof(T)),
                   " bytes, tile_offset gives ", rec_bytes);
      std::uint8_t const* pos = rec + tile_record::header_bytes(std::uint32_t(S)) + tile_record::value_bytes(nnz, sizeof(T));
      for (std::int32_t s = 0; s < S; ++s) {
        std::uint32_t const sb = detail::read_u16(rec + 2 * s), se = detail::read_u16(rec + 2 * (s + 1));
        for (std::uint32_t k = sb; k < se; ++k) {
          SDNN_EXPECTS(k == sb || pos[k - 1] < pos[k], "tile_offsets: tile ", t, ", sub-tile ", s, ": position[", k,
                       "] = ", int(pos[k]), " must be greater than position[", k - 1, "] = ", int(pos[k - 1]));
          std::int64_t const i = std::int64_t(r) * a.tile_rows + (s / sub_cols) * 16 + pos[k] / 16;
          std::int64_t const j = std::int64_t(c) * a.tile_cols + (s % sub_cols) * 16 + pos[k] % 16;
          SDNN_EXPECTS(i < a.rows && j < a.cols, "tile_offsets: tile ", t, ", sub-tile ", s, ": value ", k,
                       " sits at (", i, ", ", j, "), outside the ", a.rows, " x ", a.cols, " matrix");
        }
      }
    }
  }
}

template <class T>
void validate(tile_offsets_matrix<T, host_space> const& a) {
  validate(a.view(), a.tile_ptr().size(), a.tile_col().size(), a.tile_offset().size(), a.data().size());
}

namespace detail {
inline void check_tile_shape_tc(std::int64_t rows, std::int64_t cols, std::int32_t tr, std::int32_t tc,
                                char const* what) {
  SDNN_EXPECTS(tr >= 16 && tc >= 16 && tr % 16 == 0 && tc % 16 == 0 && std::int64_t(tr) * tc <= 16384, what,
               ": tiles must be multiples of 16 x 16 with at most 16384 elements, got ", tr, " x ", tc);
  SDNN_EXPECTS(rows >= 0 && cols >= 0 && rows <= std::numeric_limits<std::int32_t>::max() &&
                   cols <= std::numeric_limits<std::int32_t>::max(),
               what, ": a ", rows, " x ", cols, " matrix does not fit the int32 extents of tile_offsets");
}
// Builds the records from `visit(tile_row, emit)`, which calls emit(row, col, value) for the
// nonzeros of a tile row (any order, no duplicates).
template <class T, class Visit>
tile_offsets_matrix<T> build_tile_offsets(std::int32_t rows, std::int32_t cols, std::int32_t tr, std::int32_t tc,
                                          Visit&& visit) {
  struct entry {
    std::int32_t tile_col;
    std::uint16_t sub;
    std::uint8_t pos;
    T v;
  };
  std::int32_t const rt = (rows + tr - 1) / tr, S = (tr / 16) * (tc / 16), sub_cols = tc / 16;
  std::vector<std::int32_t> tile_ptr{0}, tile_col;
  std::vector<std::uint32_t> tile_offset{0};
  std::vector<std::uint8_t> data;
  std::vector<entry> es;
  std::vector<std::uint16_t> start(static_cast<std::size_t>(S) + 1);
  for (std::int32_t r = 0; r < rt; ++r) {
    es.clear();
    visit(r, [&](std::int64_t i, std::int64_t j, T v) {
      std::int64_t const li = i - std::int64_t(r) * tr, tcol = j / tc, lj = j - tcol * tc;
      es.push_back({static_cast<std::int32_t>(tcol), static_cast<std::uint16_t>((li / 16) * sub_cols + lj / 16),
                    static_cast<std::uint8_t>((li % 16) * 16 + lj % 16), v});
    });
    std::sort(es.begin(), es.end(), [](entry const& x, entry const& y) {
      return x.tile_col != y.tile_col ? x.tile_col < y.tile_col : x.sub != y.sub ? x.sub < y.sub : x.pos < y.pos;
    });
    for (std::size_t b = 0; b < es.size();) {
      std::size_t e = b;
      while (e < es.size() && es[e].tile_col == es[b].tile_col) ++e;
      std::uint32_t const nnz = static_cast<std::uint32_t>(e - b);
      std::fill(start.begin(), start.end(), std::uint16_t(0));
      for (std::size_t k = b; k < e; ++k) ++start[es[k].sub + 1u];
      for (std::int32_t s = 0; s < S; ++s) start[s + 1] = static_cast<std::uint16_t>(start[s + 1] + start[s]);
      std::size_t const at = data.size();
      std::uint32_t const hb = tile_record::header_bytes(std::uint32_t(S)), vb = tile_record::value_bytes(nnz, sizeof(T));
      data.resize(at + tile_record::total_bytes(std::uint32_t(S), nnz, sizeof(T)), 0);
      std::memcpy(data.data() + at, start.data(), 2 * start.size());
      for (std::size_t k = b; k < e; ++k) {
        std::memcpy(data.data() + at + hb + (k - b) * sizeof(T), &es[k].v, sizeof(T));
        data[at + hb + vb + (k - b)] = es[k].pos;
      }
      SDNN_EXPECTS(data.size() / 16 <= std::numeric_limits<std::uint32_t>::max(),
                   "tile_offsets: records exceed 2^32 x 16 bytes");
      tile_col.push_back(es[b].tile_col);
      tile_offset.push_back(static_cast<std::uint32_t>(data.size() / 16));
      b = e;
    }
    SDNN_EXPECTS(tile_col.size() <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()),
                 "tile_offsets: more than 2^31 - 1 stored tiles");
    tile_ptr.push_back(static_cast<std::int32_t>(tile_col.size()));
  }
  tile_offsets_matrix<T> m(rows, cols, tr, tc, static_cast<std::int32_t>(tile_col.size()), data.size());
  std::copy(tile_ptr.begin(), tile_ptr.end(), m.tile_ptr().begin());
  std::copy(tile_col.begin(), tile_col.end(), m.tile_col().begin());
  std::copy(tile_offset.begin(), tile_offset.end(), m.tile_offset().begin());
  std::copy(data.begin(), data.end(), m.data().begin());
  return m;
}
}  // namespace detail

// The nonzeros of a dense host matrix (-0 counts as zero, NaN as nonzero).
template <class T>
tile_offsets_matrix<std::remove_const_t<T>> tile_offsets_from_dense(dense_view<T> a, std::int32_t tile_rows = 64,
                                                                    std::int32_t tile_cols = 64) {
  using V = std::remove_const_t<T>;
  detail::check_tile_shape_tc(a.rows, a.cols, tile_rows, tile_cols, "tile_offsets_from_dense");
  return detail::build_tile_offsets<V>(
      static_cast<std::int32_t>(a.rows), static_cast<std::int32_t>(a.cols), tile_rows, tile_cols,
      [&](std::int32_t r, auto&& emit) {
        std::int64_t const i1 = std::min<std::int64_t>(a.rows, (std::int64_t(r) + 1) * tile_rows);
        for (std::int64_t i = std::int64_t(r) * tile_rows; i < i1; ++i)
          for (std::int64_t j = 0; j < a.cols; ++j)
            if (detail::is_nonzero(a(i, j))) emit(i, j, a(i, j));
      });
}

// The stored entries of a host CSR whose value, converted to T, is nonzero. S may differ from
// T (float CSR -> bf16 tiles: each value rounded to nearest even once).
template <class T, class S, class Index>
tile_offsets_matrix<T> tile_offsets_from_csr(csr_matrix<S, Index> const& a, std::int32_t tile_rows = 64,
                                             std::int32_t tile_cols = 64) {
  detail::check_tile_shape_tc(a.rows(), a.cols(), tile_rows, tile_cols, "tile_offsets_from_csr");
  validate(a);
  auto const& rp = a.row_ptr();
  auto const& ci = a.col_idx();
  auto const& va = a.values();
  return detail::build_tile_offsets<T>(
      static_cast<std::int32_t>(a.rows()), static_cast<std::int32_t>(a.cols()), tile_rows, tile_cols,
      [&](std::int32_t r, auto&& emit) {
        std::int64_t const i1 = std::min<std::int64_t>(a.rows(), (std::int64_t(r) + 1) * tile_rows);
        for (std::int64_t i = std::int64_t(r) * tile_rows; i < i1; ++i)
          for (Index k = rp[static_cast<std::size_t>(i)]; k < rp[static_cast<std::size_t>(i) + 1]; ++k) {
            T const v = T(static_cast<float>(va[static_cast<std::size_t>(k)]));
            if (detail::is_nonzero(v)) emit(i, ci[static_cast<std::size_t>(k)], v);
          }
      });
}

// Back to a dense host matrix.
template <class T>
dense_matrix<T> to_dense(tile_offsets_matrix<T, host_space> const& a) {
  dense_matrix<T> d(a.rows(), a.cols());
  std::fill(d.values().begin(), d.values().end(), T(0.0f));
  auto const v = a.view();
  for (std::int32_t r = 0; r < v.row_tiles(); ++r)
    for (std::int32_t t = v.tile_ptr[r]; t < v.tile_ptr[r + 1]; ++t)
      for (auto const& e : detail::tile_entries(v, r, t)) d(e.row, e.col) = e.value;
  return d;
}

// What the format costs: stored tiles out of all, nonzeros, and bytes per nonzero (records
// plus the tile index arrays).
struct tile_offsets_stats {
  std::int64_t tiles = 0, stored_tiles = 0, nonzeros = 0;
  std::size_t bytes = 0;
  double bytes_per_nonzero = 0;  // 0 when there are no nonzeros
};

template <class T>
tile_offsets_stats compute_tile_stats(tile_offsets_matrix<T, host_space> const& a) {
  tile_offsets_stats s;
  s.tiles = std::int64_t(a.row_tiles()) * a.col_tiles();
  s.stored_tiles = a.ntiles();
  auto const v = a.view();
  for (std::int32_t t = 0; t < v.ntiles; ++t)
    s.nonzeros += detail::read_u16(v.data + std::size_t(v.tile_offset[t]) * 16 + 2 * v.subtiles());
  s.bytes = a.bytes();
  s.bytes_per_nonzero = s.nonzeros ? double(s.bytes) / double(s.nonzeros) : 0.0;
  return s;
}

}  // namespace sdnn
