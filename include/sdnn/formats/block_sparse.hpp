// sdnn/formats/block_sparse.hpp - block-sparse rows (BSR): a rows x cols matrix cut into
// br x bc blocks, of which only the blocks holding a nonzero are stored, each dense and
// row-major, block rows in order and block columns sorted within a block row. The
// tensor-core kernels (linear/kernel/tc_spmm.cuh) multiply a stored block as one dense mma
// tile and never touch the others. Edge blocks are stored whole; their elements outside the
// matrix must be zero. The device twin is block_sparse_matrix<T, device_space> (upload:
// linear/op/tc_linear.cuh).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "sdnn/core/config.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/memory.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn {

// Non-owning view, passed to kernels by value.
template <class T>
struct block_sparse_view {
  std::int32_t rows = 0, cols = 0;              // element extents
  std::int32_t block_rows = 1, block_cols = 1;  // br, bc
  std::int32_t nnzb = 0;                        // stored blocks
  std::int32_t const* row_ptr = nullptr;        // [row_blocks() + 1]
  std::int32_t const* col_idx = nullptr;        // [nnzb] block columns, strictly increasing in a block row
  T const* values = nullptr;                    // [nnzb * br * bc]: block b at b * br * bc, row-major

  SDNN_HOST_DEVICE std::int32_t row_blocks() const { return (rows + block_rows - 1) / block_rows; }
  SDNN_HOST_DEVICE std::int32_t col_blocks() const { return (cols + block_cols - 1) / block_cols; }
  SDNN_HOST_DEVICE std::int64_t block_size() const { return std::int64_t(block_rows) * block_cols; }
};

template <class T, class Space = host_space>
class block_sparse_matrix {
 public:
  using value_type = T;
  using space = Space;

  // An empty 0 x 0 matrix (host: row_ptr {0}, valid; device: no storage until assigned).
  block_sparse_matrix() {
    if constexpr (std::is_same_v<Space, host_space>) row_ptr_ = buffer<std::int32_t, Space>(1);
  }
  // Storage for nnzb blocks of br x bc (host: zero-initialised, row_ptr all 0; device:
  // uninitialised, pass the cuda_exec ordering the allocation).
  template <class... Exec>
  block_sparse_matrix(std::int32_t rows, std::int32_t cols, std::int32_t br, std::int32_t bc, std::int32_t nnzb,
                      Exec... exec)
      : rows_(rows), cols_(cols), br_(br), bc_(bc),
        row_ptr_(detail::alloc<std::int32_t, Space>(checked(rows, cols, br, bc, nnzb) + 1, exec...)),
        col_idx_(detail::alloc<std::int32_t, Space>(static_cast<std::size_t>(nnzb), exec...)),
        values_(detail::alloc<T, Space>(detail::checked_extent(nnzb, std::int64_t(br) * bc, "block_sparse_matrix"),
                                        exec...)) {}

  std::int32_t rows() const noexcept { return rows_; }
  std::int32_t cols() const noexcept { return cols_; }
  std::int32_t block_rows() const noexcept { return br_; }
  std::int32_t block_cols() const noexcept { return bc_; }
  std::int32_t nnzb() const noexcept { return static_cast<std::int32_t>(col_idx_.size()); }
  std::int32_t row_blocks() const noexcept { return view().row_blocks(); }
  std::int32_t col_blocks() const noexcept { return view().col_blocks(); }

  buffer<std::int32_t, Space>& row_ptr() noexcept { return row_ptr_; }
  buffer<std::int32_t, Space>& col_idx() noexcept { return col_idx_; }
  buffer<T, Space>& values() noexcept { return values_; }
  buffer<std::int32_t, Space> const& row_ptr() const noexcept { return row_ptr_; }
  buffer<std::int32_t, Space> const& col_idx() const noexcept { return col_idx_; }
  buffer<T, Space> const& values() const noexcept { return values_; }

  block_sparse_view<T> view() const noexcept {
    return {rows_, cols_, br_, bc_, nnzb(), row_ptr_.data(), col_idx_.data(), values_.data()};
  }

 private:
  static std::size_t checked(std::int32_t rows, std::int32_t cols, std::int32_t br, std::int32_t bc,
                             std::int32_t nnzb) {
    SDNN_EXPECTS(rows >= 0 && cols >= 0 && nnzb >= 0, "block_sparse: rows, cols and stored blocks must be >= 0, got ",
                 rows, ", ", cols, ", ", nnzb);
    SDNN_EXPECTS(br >= 1 && bc >= 1, "block_sparse: the block shape must be positive, got ", br, " x ", bc);
    return static_cast<std::size_t>((rows + br - 1) / br);
  }
  std::int32_t rows_ = 0, cols_ = 0, br_ = 1, bc_ = 1;
  buffer<std::int32_t, Space> row_ptr_;
  buffer<std::int32_t, Space> col_idx_;
  buffer<T, Space> values_;
};

// Checks every invariant of a host-resident BSR; throws sdnn::error naming the first bad entry.
template <class T>
void validate(block_sparse_view<T> const& a, std::size_t row_ptr_size, std::size_t col_idx_size,
              std::size_t values_size) {
  SDNN_EXPECTS(a.rows >= 0 && a.cols >= 0 && a.nnzb >= 0, "block_sparse: rows, cols and stored blocks must be >= 0, got ",
               a.rows, ", ", a.cols, ", ", a.nnzb);
  SDNN_EXPECTS(a.block_rows >= 1 && a.block_cols >= 1, "block_sparse: the block shape must be positive, got ",
               a.block_rows, " x ", a.block_cols);
  std::int32_t const rb = a.row_blocks(), cb = a.col_blocks();
  SDNN_EXPECTS(row_ptr_size == static_cast<std::size_t>(rb) + 1, "block_sparse: row_ptr must have row_blocks + 1 = ",
               rb + 1, " entries, got ", row_ptr_size);
  SDNN_EXPECTS(col_idx_size == static_cast<std::size_t>(a.nnzb), "block_sparse: col_idx must have ", a.nnzb,
               " entries (one per stored block), got ", col_idx_size);
  SDNN_EXPECTS(values_size == static_cast<std::size_t>(a.nnzb) * static_cast<std::size_t>(a.block_size()),
               "block_sparse: values must have ", a.nnzb, " blocks x ", a.block_rows, " x ", a.block_cols, " = ",
               static_cast<std::size_t>(a.nnzb) * static_cast<std::size_t>(a.block_size()), " entries, got ",
               values_size);
  SDNN_EXPECTS(a.row_ptr[0] == 0, "block_sparse: row_ptr[0] must be 0, got ", a.row_ptr[0]);
  SDNN_EXPECTS(a.row_ptr[rb] == a.nnzb, "block_sparse: row_ptr[", rb, "] must equal the stored blocks ", a.nnzb,
               ", got ", a.row_ptr[rb]);
  for (std::int32_t r = 0; r < rb; ++r) {
    std::int32_t const b = a.row_ptr[r], e = a.row_ptr[r + 1];
    SDNN_EXPECTS(b <= e, "block_sparse: row_ptr must be non-decreasing, but row_ptr[", r, "] = ", b, " > row_ptr[",
                 r + 1, "] = ", e);
    SDNN_EXPECTS(e <= a.nnzb, "block_sparse: row_ptr[", r + 1, "] = ", e, " exceeds the stored blocks ", a.nnzb);
    for (std::int32_t k = b; k < e; ++k) {
      std::int32_t const c = a.col_idx[k];
      SDNN_EXPECTS(c >= 0 && c < cb, "block_sparse: block row ", r, ": col_idx[", k, "] = ", c,
                   " is out of range for ", cb, " block columns");
      SDNN_EXPECTS(k == b || a.col_idx[k - 1] < c, "block_sparse: block row ", r, ": col_idx[", k, "] = ", c,
                   " must be greater than col_idx[", k - 1, "] = ", a.col_idx[k - 1],
                   " (block columns sorted and unique within a block row)");
      // Elements of an edge block outside the matrix are multiplied by the kernels: they must be 0.
      bool const edge = (r + 1) * std::int64_t(a.block_rows) > a.rows || (c + 1) * std::int64_t(a.block_cols) > a.cols;
      if (!edge) continue;
      T const* blk = a.values + std::int64_t(k) * a.block_size();
      for (std::int32_t i = 0; i < a.block_rows; ++i)
        for (std::int32_t j = 0; j < a.block_cols; ++j) {
          std::int64_t const gi = std::int64_t(r) * a.block_rows + i, gj = std::int64_t(c) * a.block_cols + j;
          if (gi < a.rows && gj < a.cols) continue;
          SDNN_EXPECTS(!detail::is_nonzero(blk[i * a.block_cols + j]), "block_sparse: block ", k, " (block row ", r,
                       ", block column ", c, "): element (", i, ", ", j, ") lies outside the ", a.rows, " x ", a.cols,
                       " matrix and must be 0");
        }
    }
  }
}

template <class T>
void validate(block_sparse_matrix<T, host_space> const& a) {
  validate(a.view(), a.row_ptr().size(), a.col_idx().size(), a.values().size());
}

namespace detail {
inline void check_block_shape(std::int64_t rows, std::int64_t cols, std::int32_t br, std::int32_t bc, char const* what) {
  SDNN_EXPECTS(br >= 1 && bc >= 1, what, ": the block shape must be positive, got ", br, " x ", bc);
  SDNN_EXPECTS(rows >= 0 && cols >= 0 && rows <= std::numeric_limits<std::int32_t>::max() &&
                   cols <= std::numeric_limits<std::int32_t>::max(),
               what, ": a ", rows, " x ", cols, " matrix does not fit the int32 extents of block_sparse");
}
// Builds the BSR from a per-block-row list of (block column, element) callbacks: `visit(r, emit)`
// calls emit(row, col, value) for the nonzeros of block row r in any order.
template <class T, class Visit>
block_sparse_matrix<T> build_block_sparse(std::int32_t rows, std::int32_t cols, std::int32_t br, std::int32_t bc,
                                          Visit&& visit) {
  std::int32_t const rb = (rows + br - 1) / br, cb = (cols + bc - 1) / bc;
  std::vector<std::int32_t> row_ptr{0}, col_idx;
  std::vector<T> values;
  std::vector<std::int32_t> slot(static_cast<std::size_t>(cb), -1);  // block column -> block in this row
  std::vector<std::int32_t> used;
  std::size_t const bs = static_cast<std::size_t>(br) * static_cast<std::size_t>(bc);
  for (std::int32_t r = 0; r < rb; ++r) {
    // Two passes: which blocks, then fill them (sorted by column).
    used.clear();
    visit(r, [&](std::int64_t, std::int64_t j, T) {
      std::int32_t const c = static_cast<std::int32_t>(j / bc);
      if (slot[static_cast<std::size_t>(c)] < 0) {
        slot[static_cast<std::size_t>(c)] = 0;
        used.push_back(c);
      }
    });
    std::sort(used.begin(), used.end());
    std::size_t const first = col_idx.size();
    for (std::size_t u = 0; u < used.size(); ++u) {
      slot[static_cast<std::size_t>(used[u])] = static_cast<std::int32_t>(first + u);
      col_idx.push_back(used[u]);
    }
    SDNN_EXPECTS(col_idx.size() <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()),
                 "block_sparse: more than 2^31 - 1 stored blocks");
    values.resize(col_idx.size() * bs, T(0.0f));
    visit(r, [&](std::int64_t i, std::int64_t j, T v) {
      std::int32_t const c = static_cast<std::int32_t>(j / bc);
      std::size_t const blk = static_cast<std::size_t>(slot[static_cast<std::size_t>(c)]);
      values[blk * bs + static_cast<std::size_t>((i - std::int64_t(r) * br) * bc + (j - std::int64_t(c) * bc))] = v;
    });
    for (auto c : used) slot[static_cast<std::size_t>(c)] = -1;
    row_ptr.push_back(static_cast<std::int32_t>(col_idx.size()));
  }
  block_sparse_matrix<T> m(rows, cols, br, bc, static_cast<std::int32_t>(col_idx.size()));
  std::copy(row_ptr.begin(), row_ptr.end(), m.row_ptr().begin());
  std::copy(col_idx.begin(), col_idx.end(), m.col_idx().begin());
  std::copy(values.begin(), values.end(), m.values().begin());
  return m;
}
}  // namespace detail

// The blocks of a dense host matrix that hold a nonzero (-0 counts as zero, NaN as nonzero).
template <class T>
block_sparse_matrix<std::remove_const_t<T>> block_sparse_from_dense(dense_view<T> a, std::int32_t br, std::int32_t bc) {
  using V = std::remove_const_t<T>;
  detail::check_block_shape(a.rows, a.cols, br, bc, "block_sparse_from_dense");
  return detail::build_block_sparse<V>(
      static_cast<std::int32_t>(a.rows), static_cast<std::int32_t>(a.cols), br, bc, [&](std::int32_t r, auto&& emit) {
        std::int64_t const i1 = std::min<std::int64_t>(a.rows, (std::int64_t(r) + 1) * br);
        for (std::int64_t i = std::int64_t(r) * br; i < i1; ++i)
          for (std::int64_t j = 0; j < a.cols; ++j)
            if (detail::is_nonzero(a(i, j))) emit(i, j, a(i, j));
      });
}

// The blocks of a host CSR that hold a stored entry whose value, converted to T, is nonzero.
// S may differ from T (float CSR -> bf16 blocks: each value rounded to nearest even once).
template <class T, class S, class Index>
block_sparse_matrix<T> block_sparse_from_csr(csr_matrix<S, Index> const& a, std::int32_t br, std::int32_t bc) {
  detail::check_block_shape(a.rows(), a.cols(), br, bc, "block_sparse_from_csr");
  validate(a);
  auto const& rp = a.row_ptr();
  auto const& ci = a.col_idx();
  auto const& va = a.values();
  return detail::build_block_sparse<T>(
      static_cast<std::int32_t>(a.rows()), static_cast<std::int32_t>(a.cols()), br, bc,
      [&](std::int32_t r, auto&& emit) {
        std::int64_t const i1 = std::min<std::int64_t>(a.rows(), (std::int64_t(r) + 1) * br);
        for (std::int64_t i = std::int64_t(r) * br; i < i1; ++i)
          for (Index k = rp[static_cast<std::size_t>(i)]; k < rp[static_cast<std::size_t>(i) + 1]; ++k) {
            T const v = T(static_cast<float>(va[static_cast<std::size_t>(k)]));
            if (detail::is_nonzero(v)) emit(i, ci[static_cast<std::size_t>(k)], v);
          }
      });
}

// Back to a dense host matrix (blocks not stored are zero).
template <class T>
dense_matrix<T> to_dense(block_sparse_matrix<T, host_space> const& a) {
  dense_matrix<T> d(a.rows(), a.cols());
  std::fill(d.values().begin(), d.values().end(), T(0.0f));
  auto const v = a.view();
  for (std::int32_t r = 0; r < v.row_blocks(); ++r)
    for (std::int32_t k = v.row_ptr[r]; k < v.row_ptr[r + 1]; ++k)
      for (std::int32_t i = 0; i < v.block_rows; ++i)
        for (std::int32_t j = 0; j < v.block_cols; ++j) {
          std::int64_t const gi = std::int64_t(r) * v.block_rows + i, gj = std::int64_t(v.col_idx[k]) * v.block_cols + j;
          if (gi < v.rows && gj < v.cols) d(gi, gj) = v.values[std::int64_t(k) * v.block_size() + i * v.block_cols + j];
        }
  return d;
}

// Block occupancy: what a block-skipping kernel saves (stored / all blocks) and how full the
// stored blocks are (nonzeros / stored elements, edge blocks counted whole).
struct block_sparse_stats {
  std::int64_t blocks = 0, stored_blocks = 0, nonzeros = 0;
  double occupancy = 0;  // stored_blocks / blocks (0 when there are no blocks)
  double fill = 0;       // nonzeros / (stored_blocks * br * bc) (0 when nothing is stored)
};

template <class T>
block_sparse_stats compute_block_stats(block_sparse_matrix<T, host_space> const& a) {
  block_sparse_stats s;
  s.blocks = std::int64_t(a.row_blocks()) * a.col_blocks();
  s.stored_blocks = a.nnzb();
  for (auto const& v : a.values()) s.nonzeros += detail::is_nonzero(v) ? 1 : 0;
  s.occupancy = s.blocks ? double(s.stored_blocks) / double(s.blocks) : 0.0;
  double const stored = double(s.stored_blocks) * a.block_rows() * a.block_cols();
  s.fill = stored > 0 ? double(s.nonzeros) / stored : 0.0;
  return s;
}

}  // namespace sdnn
