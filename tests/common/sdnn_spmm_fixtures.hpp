// Shared generators and device helpers for the sparse-product tests: seeded random CSR,
// block-sparse (tiled) and dense matrices with small integer values, device copies of
// them, and an exact comparison against a float reference.
//
// Data are small integers, so float sums are exact (every partial sum is an integer far
// below 2^24) and float results compare with ==. __half inputs are exact too; kernels
// accumulate in float and round once on store, so __half compares within 2^tol_exp
// relative (-10: one half ulp at the top of a binade; see check_against).
// The generators are host-only; the device helpers need nvcc (tests/cuda/*.cu).
#pragma once

#include <sdnn/core/epilogue.hpp>
#include <sdnn/core/types.hpp>
#include <sdnn/formats/convert.hpp>
#include <sdnn/formats/csr.hpp>
#include <sdnn/formats/dense.hpp>
#include <sdnn/formats/tiled_dense.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#ifdef __CUDACC__
#include <cmath>
#include <type_traits>

#include <sdnn/core/memory.cuh>

#include "sdnn_catch.hpp"
#include "sdnn_gpu_test.cuh"
#endif

namespace sdnn_test {

struct csr_case {
  std::string name;
  std::int64_t m, k, n;
  double density;              // of the non-empty rows
  double empty_rows;           // fraction of rows forced empty
  std::int64_t long_row = -1;  // this row gets min(k, 3000) entries
  std::int64_t ld_pad = 0;     // B and C leading dimension = cols + ld_pad
};

// The CSR edge cases every sparse x dense policy runs on: empty shapes, one row / column,
// all rows empty, odd sizes, a padded leading dimension, 90 % empty rows, row lengths from 0
// to 3000, and N not a multiple of any column slab.
inline std::vector<csr_case> csr_edge_cases() {
  return {
      {"empty matrix", 0, 5, 7, 0.5, 0},
      {"no columns of B", 9, 5, 0, 0.5, 0},
      {"1x1x1", 1, 1, 1, 1.0, 0},
      {"one column", 37, 53, 1, 0.3, 0.1},
      {"all rows empty", 40, 30, 20, 0.5, 1.0},
      {"odd sizes", 131, 77, 133, 0.2, 0.2},
      {"wide B, padded ld", 70, 90, 300, 0.1, 0.3, -1, 3},
      {"90% empty rows", 500, 200, 96, 0.1, 0.9},
      {"row lengths 0..3000", 120, 4000, 40, 0.01, 0.3, 7},
      {"half-slab columns", 64, 64, 517, 0.15, 0.0},
  };
}

// Host CSR with small nonzero integer values in [-3, 3].
inline sdnn::csr_matrix<float, int> random_csr(csr_case const& c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::uniform_int_distribution<int> v(1, 3);
  std::vector<int> rp{0}, ci;
  std::vector<float> vals;
  for (std::int64_t i = 0; i < c.m; ++i) {
    bool const empty = u(rng) < c.empty_rows;
    for (std::int64_t j = 0; j < c.k && !empty; ++j) {
      bool take = i == c.long_row ? j < 3000 : u(rng) < c.density;
      if (take) {
        ci.push_back(static_cast<int>(j));
        vals.push_back(static_cast<float>(v(rng) * (u(rng) < 0.5 ? -1 : 1)));
      }
    }
    rp.push_back(static_cast<int>(ci.size()));
  }
  return sdnn::make_csr<float, int>(static_cast<int>(c.m), static_cast<int>(c.k), rp, ci, vals);
}

// A block-sparse matrix for the tiled-dense format: square tiles of `tile` x `tile`.
struct tiled_case {
  std::string name;
  std::int64_t m, k, n;
  std::int64_t tile;
  double tile_density;              // probability that a tile is occupied
  double elem_density;              // nonzeros inside an occupied tile
  double empty_tile_rows = 0;       // fraction of tile rows with no tile at all
  std::int64_t full_tile_row = -1;  // this tile row gets every tile, all elements nonzero
  std::int64_t ld_pad = 0;          // B and C leading dimension = cols + ld_pad
};

// Host CSR whose nonzeros lie in randomly occupied tiles (values in [-3, 3] \ {0}).
inline sdnn::csr_matrix<float, int> random_block_csr(tiled_case const& c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::uniform_int_distribution<int> v(1, 3);
  std::int64_t const gr = c.tile > 0 ? (c.m + c.tile - 1) / c.tile : 0;
  std::int64_t const gc = c.tile > 0 ? (c.k + c.tile - 1) / c.tile : 0;
  std::vector<char> on(static_cast<std::size_t>(gr * gc), 0);
  for (std::int64_t ti = 0; ti < gr; ++ti) {
    bool const empty = ti != c.full_tile_row && u(rng) < c.empty_tile_rows;
    for (std::int64_t tj = 0; tj < gc; ++tj)
      on[static_cast<std::size_t>(ti * gc + tj)] = ti == c.full_tile_row || (!empty && u(rng) < c.tile_density);
  }
  std::vector<int> rp{0}, ci;
  std::vector<float> vals;
  for (std::int64_t i = 0; i < c.m; ++i) {
    std::int64_t const ti = i / c.tile;
    for (std::int64_t j = 0; j < c.k; ++j) {
      if (!on[static_cast<std::size_t>(ti * gc + j / c.tile)]) continue;
      if (ti != c.full_tile_row && u(rng) >= c.elem_density) continue;
      ci.push_back(static_cast<int>(j));
      vals.push_back(static_cast<float>(v(rng) * (u(rng) < 0.5 ? -1 : 1)));
    }
    rp.push_back(static_cast<int>(ci.size()));
  }
  return sdnn::make_csr<float, int>(static_cast<int>(c.m), static_cast<int>(c.k), rp, ci, vals);
}

// Dense host matrix with integer values in [-4, 4].
inline sdnn::dense_matrix<float> random_dense(std::int64_t r, std::int64_t c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> v(-4, 4);
  sdnn::dense_matrix<float> d(r, c);
  for (std::size_t i = 0; i < d.size(); ++i) d.values()[i] = static_cast<float>(v(rng));
  return d;
}

template <class T>
std::vector<T> convert(float const* p, std::size_t n) {
  std::vector<T> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = sdnn::value_cast<T>(p[i]);
  return out;
}

#ifdef __CUDACC__

// upload / download: tests/common/sdnn_gpu_test.cuh.

// A device copy of a host float CSR, values converted to T.
template <class T>
struct device_csr {
  sdnn::buffer<int, sdnn::device_space> rp, ci;
  sdnn::buffer<T, sdnn::device_space> v;
  int rows, cols, nnz;
  device_csr(sdnn::csr_matrix<float, int> const& h, sdnn::cuda_exec e)
      : rp(upload(std::vector<int>(h.row_ptr().begin(), h.row_ptr().end()), e)),
        ci(upload(std::vector<int>(h.col_idx().begin(), h.col_idx().end()), e)),
        v(upload(convert<T>(h.values().data(), h.values().size()), e)), rows(h.rows()), cols(h.cols()),
        nnz(h.nnz()) {}
  sdnn::csr_view<T, int> view() const { return {rows, cols, nnz, rp.data(), ci.data(), v.data()}; }
};

// A device copy of a host float COO (canonical order), values converted to T.
template <class T>
struct device_coo {
  sdnn::buffer<int, sdnn::device_space> ri, ci;
  sdnn::buffer<T, sdnn::device_space> v;
  int rows, cols, nnz;
  device_coo(sdnn::coo_matrix<float, int> const& h, sdnn::cuda_exec e)
      : ri(upload(std::vector<int>(h.row_idx().begin(), h.row_idx().end()), e)),
        ci(upload(std::vector<int>(h.col_idx().begin(), h.col_idx().end()), e)),
        v(upload(convert<T>(h.values().data(), h.values().size()), e)), rows(h.rows()), cols(h.cols()),
        nnz(h.nnz()) {}
  sdnn::coo_view<T, int> view() const { return {rows, cols, nnz, ri.data(), ci.data(), v.data()}; }
};

// A device copy of a host float tiled-dense matrix, values converted to T.
template <class T>
struct device_tiled {
  sdnn::tiled_dense_view<float const> h;  // shape fields (pointers are host)
  sdnn::buffer<T, sdnn::device_space> vals;
  sdnn::buffer<std::uint8_t, sdnn::device_space> occ;
  sdnn::buffer<std::int64_t, sdnn::device_space> trp, tc;
  device_tiled(sdnn::tiled_dense_matrix<float> const& t, sdnn::cuda_exec e)
      : h(t.view()), vals(upload(convert<T>(t.values().data(), t.values().size()), e)),
        occ(upload(std::vector<std::uint8_t>(t.occupied().begin(), t.occupied().end()), e)),
        trp(upload(std::vector<std::int64_t>(t.tile_row_ptr().begin(), t.tile_row_ptr().end()), e)),
        tc(upload(std::vector<std::int64_t>(t.tile_col().begin(), t.tile_col().end()), e)) {}
  sdnn::tiled_dense_view<T const> view() const {
    return {h.rows,           h.cols,      h.tile_rows, h.tile_cols, h.grid_rows, h.grid_cols,
            h.occupied_tiles, vals.data(), occ.data(),  trp.data(),  tc.data()};
  }
};

// A device dense matrix with leading dimension ld >= cols (padding filled with 99).
template <class T>
struct device_dense {
  sdnn::buffer<T, sdnn::device_space> d;
  std::int64_t rows, cols, ld;
  device_dense(sdnn::dense_matrix<float> const& h, std::int64_t ld_, sdnn::cuda_exec e)
      : rows(h.rows()), cols(h.cols()), ld(ld_) {
    std::vector<float> p(static_cast<std::size_t>(rows * ld), 99.f);
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) p[static_cast<std::size_t>(i * ld + j)] = h(i, j);
    d = upload(convert<T>(p.data(), p.size()), e);
  }
  sdnn::dense_view<T const> cview() const { return {rows, cols, ld, d.data()}; }
  sdnn::dense_view<T> view() { return {rows, cols, ld, d.data()}; }
};

// The three epilogues every product test runs: none; bias per column (also on empty rows)
// + ReLU + cap 20; the Graph Challenge rule (bias -1, cap 16). get(i, device) gives the
// host or the device form (the bias lives in host or device memory).
struct epilogue_set {
  std::vector<float> bias;
  sdnn::buffer<float, sdnn::device_space> dbias;
  epilogue_set(std::int64_t n, sdnn::cuda_exec e) : bias(static_cast<std::size_t>(n)) {
    for (std::int64_t j = 0; j < n; ++j) bias[static_cast<std::size_t>(j)] = static_cast<float>(j % 5) - 2.f;
    dbias = upload(bias, e);
  }
  static constexpr int count = 3;
  sdnn::basic_epilogue<float> get(int which, bool device) const {
    sdnn::basic_epilogue<float> ep;
    if (which == 1) {  // bias per column (also on empty rows) + ReLU + cap
      ep.bias = device ? dbias.data() : bias.data();
      ep.relu = true;
      ep.has_cap = true;
      ep.cap = 20.f;
    } else if (which == 2) {
      ep = sdnn::epilogue_capped_relu<float>(-1.f, 16.f);
    }
    return ep;
  }
};

// Compares a device result (rows x cols, ld) against the float reference: float exactly,
// __half within |d - r| <= 2^tol_exp |r|; the padding beyond cols must still be 99.
template <class T>
void check_against(sdnn::dense_matrix<float> const& ref, device_dense<T> const& out, sdnn::cuda_exec e,
                   std::string const& what, int tol_exp = -10) {
  auto h = download(out.d.data(), out.d.size(), e);
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < ref.rows(); ++i)
    for (std::int64_t j = 0; j < ref.cols(); ++j) {
      double const d = sdnn::value_cast<double>(h[static_cast<std::size_t>(i * out.ld + j)]), r = ref(i, j);
      bool ok = std::is_same_v<T, float> ? d == r : std::abs(d - r) <= std::ldexp(std::abs(r), tol_exp);
      if (!ok && bad++ < 3) UNSCOPED_INFO(what << ": C(" << i << ", " << j << ") = " << d << ", expected " << r);
    }
  for (std::int64_t i = 0; i < ref.rows(); ++i)
    for (std::int64_t j = ref.cols(); j < out.ld; ++j)
      if (sdnn::value_cast<double>(h[static_cast<std::size_t>(i * out.ld + j)]) != 99.0 && bad++ < 3)
        UNSCOPED_INFO(what << ": padding C(" << i << ", " << j << ") overwritten");
  CHECK(bad == 0);
}

#endif  // __CUDACC__

}  // namespace sdnn_test
