// sdnn/formats/csc_tiles.hpp - footprint tiles of a sparse matrix in CSC (B given as its
// transpose bt, n x k CSR), the layout of the tiled dense x sparse product
// (linear/kernel/spmm_dense_csc.cuh, dense_csc_tiled_spmm). csc_tiles_host holds the arrays on
// the host, csc_tiles_view points at device (or host) copies; build_csc_tiles is a host
// conversion (no CUDA needed). What a tile is and why: on csc_tiles_host below.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/formats/csr.hpp"

namespace sdnn {

// Output columns with identical input lists are grouped, and groups are packed into tiles of at
// most `tile_cols` columns whose union of inputs (the footprint) has at most `max_footprint`
// entries. A block stages the footprint of its tile for `Rows` activation rows in shared memory
// (one gather per footprint entry instead of one per nonzero: 16x fewer where 16 columns share
// each list of 32 inputs, as in RadiX-Net layers) and computes the tile's columns from shared
// memory, with the inputs re-indexed into the footprint (16-bit local indices). Works for any
// CSR: without shared input lists a tile simply holds fewer columns.
template <class T>
struct csc_tiles_host {
  std::int32_t n = 0, k = 0, tiles = 0, max_footprint = 0;
  std::vector<std::int32_t> fp_ptr{0}, fp;     // [tiles + 1], footprint input ids (ascending per tile)
  std::vector<std::int32_t> col_ptr{0}, cols;  // [tiles + 1], output columns (ascending per tile)
  std::vector<std::int32_t> nnz_ptr{0};        // [cols.size() + 1] into lidx / vals
  std::vector<std::uint16_t> lidx;             // input position within the tile's footprint
  std::vector<T> vals;
};

template <class T>
struct csc_tiles_view {
  std::int32_t n = 0, k = 0, tiles = 0, max_footprint = 0;
  std::int32_t const *fp_ptr = nullptr, *fp = nullptr, *col_ptr = nullptr, *cols = nullptr, *nnz_ptr = nullptr;
  std::uint16_t const* lidx = nullptr;
  T const* vals = nullptr;
};

// Builds the tiles of bt (n x k CSR, host). Returns false (and leaves `out` unspecified)
// when a single column has more than max_footprint (<= 65536) inputs.
template <class T>
bool build_csc_tiles(csr_view<T, std::int32_t> bt, std::int32_t tile_cols, std::int32_t max_footprint,
                     csc_tiles_host<T>& out) {
  SDNN_EXPECTS(tile_cols > 0 && max_footprint > 0 && max_footprint <= 65536,
               "build_csc_tiles: tile_cols > 0 and max_footprint in (0, 65536] needed, got ", tile_cols, ", ",
               max_footprint);
  out = csc_tiles_host<T>{};
  out.n = bt.rows;
  out.k = bt.cols;
  std::int32_t const n = bt.rows;
  for (std::int32_t j = 0; j < n; ++j)
    if (bt.row_ptr[j + 1] - bt.row_ptr[j] > max_footprint) return false;
  // 1. group columns with identical input lists (hash, then exact compare)
  std::vector<std::uint64_t> h(static_cast<std::size_t>(n));
  for (std::int32_t j = 0; j < n; ++j) {
    std::uint64_t x = 1469598103934665603ull ^ static_cast<std::uint64_t>(bt.row_ptr[j + 1] - bt.row_ptr[j]);
    for (std::int32_t p = bt.row_ptr[j]; p < bt.row_ptr[j + 1]; ++p)
      x = (x ^ static_cast<std::uint64_t>(bt.col_idx[p])) * 1099511628211ull;
    h[static_cast<std::size_t>(j)] = x;
  }
  std::vector<std::int32_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return h[static_cast<std::size_t>(a)] != h[static_cast<std::size_t>(b)] ? h[static_cast<std::size_t>(a)] < h[static_cast<std::size_t>(b)]
                                                                              : a < b;
  });
  auto same = [&](std::int32_t a, std::int32_t b) {
    std::int32_t const la = bt.row_ptr[a + 1] - bt.row_ptr[a], lb = bt.row_ptr[b + 1] - bt.row_ptr[b];
    return la == lb && std::equal(bt.col_idx + bt.row_ptr[a], bt.col_idx + bt.row_ptr[a + 1], bt.col_idx + bt.row_ptr[b]);
  };
  std::vector<std::vector<std::int32_t>> groups;
  for (std::size_t i = 0; i < order.size();) {
    std::size_t e = i;
    while (e < order.size() && h[static_cast<std::size_t>(order[e])] == h[static_cast<std::size_t>(order[i])]) ++e;
    std::size_t const first_group = groups.size();
    for (std::size_t q = i; q < e; ++q) {
      bool placed = false;
      for (std::size_t g = first_group; g < groups.size() && !placed; ++g)
        if (same(groups[g][0], order[q])) {
          groups[g].push_back(order[q]);
          placed = true;
        }
      if (!placed) groups.push_back({order[q]});
    }
    i = e;
  }
  std::sort(groups.begin(), groups.end(), [](auto const& a, auto const& b) { return a[0] < b[0]; });
  // 2. pack groups into tiles
  std::vector<std::int32_t> stamp(static_cast<std::size_t>(bt.cols), -1), local(static_cast<std::size_t>(bt.cols), 0);
  std::vector<std::int32_t> tile_cols_v, tile_fp;
  auto close_tile = [&]() {
    if (tile_cols_v.empty()) return;
    std::sort(tile_cols_v.begin(), tile_cols_v.end());
    std::sort(tile_fp.begin(), tile_fp.end());
    for (std::size_t f = 0; f < tile_fp.size(); ++f) local[static_cast<std::size_t>(tile_fp[f])] = static_cast<std::int32_t>(f);
    out.fp.insert(out.fp.end(), tile_fp.begin(), tile_fp.end());
    out.fp_ptr.push_back(static_cast<std::int32_t>(out.fp.size()));
    for (std::int32_t j : tile_cols_v) {
      out.cols.push_back(j);
      for (std::int32_t p = bt.row_ptr[j]; p < bt.row_ptr[j + 1]; ++p) {
        out.lidx.push_back(static_cast<std::uint16_t>(local[static_cast<std::size_t>(bt.col_idx[p])]));
        out.vals.push_back(bt.values[p]);
      }
      out.nnz_ptr.push_back(static_cast<std::int32_t>(out.lidx.size()));
    }
    out.col_ptr.push_back(static_cast<std::int32_t>(out.cols.size()));
    out.max_footprint = std::max(out.max_footprint, static_cast<std::int32_t>(tile_fp.size()));
    ++out.tiles;
    tile_cols_v.clear();
    tile_fp.clear();
  };
  for (auto const& g : groups) {
    std::int32_t const rep = g[0];
    for (std::size_t c0 = 0; c0 < g.size(); c0 += static_cast<std::size_t>(tile_cols)) {
      std::size_t const c1 = std::min(g.size(), c0 + static_cast<std::size_t>(tile_cols));
      std::int32_t const tile_id = out.tiles;
      std::int32_t fresh = 0;
      for (std::int32_t p = bt.row_ptr[rep]; p < bt.row_ptr[rep + 1]; ++p)
        fresh += stamp[static_cast<std::size_t>(bt.col_idx[p])] != tile_id;
      if (tile_cols_v.size() + (c1 - c0) > static_cast<std::size_t>(tile_cols) ||
          tile_fp.size() + static_cast<std::size_t>(fresh) > static_cast<std::size_t>(max_footprint))
        close_tile();
      std::int32_t const id = out.tiles;
      for (std::int32_t p = bt.row_ptr[rep]; p < bt.row_ptr[rep + 1]; ++p) {
        auto const kk = static_cast<std::size_t>(bt.col_idx[p]);
        if (stamp[kk] != id) {
          stamp[kk] = id;
          tile_fp.push_back(bt.col_idx[p]);
        }
      }
      tile_cols_v.insert(tile_cols_v.end(), g.begin() + static_cast<std::ptrdiff_t>(c0), g.begin() + static_cast<std::ptrdiff_t>(c1));
    }
  }
  close_tile();
  return true;
}

}  // namespace sdnn
