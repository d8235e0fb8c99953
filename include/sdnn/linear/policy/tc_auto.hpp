// sdnn/linear/policy/tc_auto.hpp - the automatic choice of the 16-bit linear layer Y = X W^T
// (linear/op/tc_auto.cuh): the paths it chooses among, the structure of W it reads (density,
// occupied 64 x 64 tiles and 32 x 32 blocks, 2:4-ness), and a cost model per path and GPU whose
// rates come from the grid benchmark (bench_linear16). Host-only.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>

#include "sdnn/core/arch.hpp"
#include "sdnn/core/error.hpp"

namespace sdnn::policy {

// The paths of the automatic 16-bit linear layer.
//   cublas_dense:    W dense on the device, cublasGemmEx (bf16/fp16 in, float compute);
//   tc_block32:      W in 32 x 32 blocks, empty blocks never loaded (tc_block_sparse_mma);
//   tc_tile_offsets: W in 64 x 64 tiles of packed nonzeros, expanded in shared memory (tc_tile_offsets_mma);
//   sparse24:        W 2:4 along K on mma.sp (sparse24_linear_plan).
// Not candidates, by measurement (bench_linear16, benchmarks/results/linear16_*.md): sdnn's own
// dense mma.sync kernel (slower than cuBLAS at every N), the float CUDA-core kernels and cuSPARSE
// (their bf16 CSR runs slower than cuBLAS's dense GEMM at every measured point but the sparsest,
// and need a float or CSR copy of W besides).
enum class tc_path : int { cublas_dense = 0, tc_block32 = 1, tc_tile_offsets = 2, sparse24 = 3 };
inline constexpr int tc_path_count = 4;

constexpr char const* tc_path_name(tc_path p) {
  switch (p) {
    case tc_path::cublas_dense: return "cublas_dense";
    case tc_path::tc_block32: return "tc_block32";
    case tc_path::tc_tile_offsets: return "tc_tile_offsets";
    case tc_path::sparse24: return "sparse24";
  }
  return "?";
}

// What the choice reads of W (M x K): computed once on the host (linear/op/tc_auto.hpp).
struct weight_structure {
  std::int64_t m = 0, k = 0;
  std::int64_t nnz = 0;
  std::int64_t tiles64 = 0, tiles64_total = 0;    // 64 x 64 tiles holding a nonzero, of all
  std::int64_t blocks32 = 0, blocks32_total = 0;  // 32 x 32 blocks holding a nonzero, of all
  bool is_24 = false;  // every aligned group of 4 along K (zero-padded) holds at most 2 nonzeros

  double density() const { return m > 0 && k > 0 ? double(nnz) / (double(m) * double(k)) : 0.0; }
  double block_occupancy() const { return blocks32_total ? double(blocks32) / double(blocks32_total) : 0.0; }
  std::string describe() const {
    return ::sdnn::detail::concat("W ", m, " x ", k, ", ", nnz, " nonzeros (density ", density(), "), ", tiles64,
                                  " of ", tiles64_total, " 64x64 tiles and ", blocks32, " of ", blocks32_total,
                                  " 32x32 blocks occupied, ", is_24 ? "2:4" : "not 2:4");
  }
};

// The modelled time of a path: t(N) = launch + units * rate(N), with rate piecewise linear in
// N between the anchors (and beyond the last, along its last segment). units: cublas_dense and
// sparse24 M*K / 1e6; tc_block32 occupied blocks / 1e3; tc_tile_offsets occupied tiles / 1e3
// weighted by their fill, tiles * (1 + nnz per tile / 960) (a tile's fixed work is worth 960
// nonzeros of expansion, from the N = 8 fit of 50-95 % below).
inline constexpr int tc_anchor_count = 6;
inline constexpr std::array<double, tc_anchor_count> tc_anchors{1, 8, 32, 128, 512, 2048};

struct tc_path_rates {
  double launch_us = 0;                        // fixed cost per run
  std::array<double, tc_anchor_count> rate{};  // us per unit at each anchor N
};

struct tc_auto_tuning {
  arch measured{0, 0};
  char const* gpu = "";
  char const* source = "";  // the benchmark run behind the rates
  std::array<tc_path_rates, tc_path_count> paths{};
  // Build a sparse encoding only when it can win somewhere: tiles while density <= this,
  // blocks while block occupancy <= this.
  double max_tile_density = 0.6;
  double max_block_occupancy = 0.6;
};

// sm_90: NVIDIA H100 80GB HBM3, CUDA 13.0, 2026-11-25, first fit: from bench_linear_tc /
// bench_linear_sparse24 (11008 x 4096, L2 flushed; benchmarks/results/tc_linear_notes.md,
// sparse24_notes.md); anchors not measured there (N = 1, 512) interpolated.
inline constexpr tc_auto_tuning tc_auto_tuning_sm90{
    {9, 0},
    "NVIDIA H100 80GB HBM3 (2026-11-25)",
    "tc_linear_notes.md / sparse24_notes.md, 11008 x 4096",
    {{
        {4.0, {0.95, 0.95, 0.95, 1.0, 1.6, 5.2}},        // cublas_dense, per M*K/1e6
        {3.0, {3.2, 3.45, 5.6, 8.9, 20.0, 74.7}},        // tc_block32, per 1e3 blocks
        {3.0, {2.3, 2.4, 4.44, 15.6, 45.0, 143.0}},      // tc_tile_offsets, per 1e3 weighted tiles
        {3.0, {0.58, 0.60, 0.68, 1.1, 2.4, 7.5}},        // sparse24, per M*K/1e6
    }},
    0.6,
    0.6};
// sm_80 and sm_8x: nothing measured; sm_90's values.
inline constexpr tc_auto_tuning tc_auto_tuning_sm80{{8, 0}, "none measured (sm_90 values)",
                                                    tc_auto_tuning_sm90.source, tc_auto_tuning_sm90.paths,
                                                    tc_auto_tuning_sm90.max_tile_density,
                                                    tc_auto_tuning_sm90.max_block_occupancy};

constexpr tc_auto_tuning tc_auto_tuning_for(arch a) {
  return tc_auto_tuning_sm90.measured <= a ? tc_auto_tuning_sm90 : tc_auto_tuning_sm80;
}

// The work units of a path for W (see tc_path_rates).
inline double tc_path_units(tc_path p, weight_structure const& w) {
  switch (p) {
    case tc_path::cublas_dense:
    case tc_path::sparse24: return double(w.m) * double(w.k) * 1e-6;
    case tc_path::tc_block32: return double(w.blocks32) * 1e-3;
    case tc_path::tc_tile_offsets: {
      double const per_tile = w.tiles64 ? double(w.nnz) / double(w.tiles64) : 0.0;
      return double(w.tiles64) * (1.0 + per_tile / 960.0) * 1e-3;
    }
  }
  return 0;
}

// The modelled microseconds of one run of path p with n rows.
inline double tc_estimate_us(tc_auto_tuning const& t, tc_path p, weight_structure const& w, std::int64_t n) {
  auto const& r = t.paths[std::size_t(p)];
  double const x = double(std::max<std::int64_t>(n, 1));
  double rate = r.rate[0];
  if (x > tc_anchors[0]) {
    int i = 1;
    while (i < tc_anchor_count - 1 && x > tc_anchors[std::size_t(i)]) ++i;
    double const x0 = tc_anchors[std::size_t(i - 1)], x1 = tc_anchors[std::size_t(i)];
    double const r0 = r.rate[std::size_t(i - 1)], r1 = r.rate[std::size_t(i)];
    rate = r0 + (r1 - r0) * (x - x0) / (x1 - x0);
  }
  return r.launch_us + tc_path_units(p, w) * rate;
}

// Which paths can run W: cuBLAS always; sparse24 only for a 2:4 W; the sparse encodings while
// they can pay (tuning thresholds). `allowed`: a mask of 1 << tc_path the caller permits (the
// result may be empty when it excludes cuBLAS).
inline unsigned tc_candidates(tc_auto_tuning const& t, weight_structure const& w, unsigned allowed = 0xfu) {
  unsigned c = 1u << int(tc_path::cublas_dense);
  if (w.nnz > 0 || w.m * w.k == 0) {
    if (w.block_occupancy() <= t.max_block_occupancy) c |= 1u << int(tc_path::tc_block32);
    if (w.density() <= t.max_tile_density) c |= 1u << int(tc_path::tc_tile_offsets);
  }
  if (w.is_24) c |= 1u << int(tc_path::sparse24);
  return c & allowed;
}

// The model's choice for n rows among `candidates` (non-empty), and why, as one line.
struct tc_choice {
  tc_path path = tc_path::cublas_dense;
  std::array<double, tc_path_count> estimate_us{};  // < 0: not a candidate
  std::string reason;
};
inline tc_choice tc_choose(tc_auto_tuning const& t, weight_structure const& w, std::int64_t n, unsigned candidates) {
  SDNN_EXPECTS(candidates != 0, "tc_choose: no candidate path");
  tc_choice c;
  double best = 1e300;
  for (int p = 0; p < tc_path_count; ++p) {
    c.estimate_us[std::size_t(p)] = -1;
    if (!(candidates & (1u << p))) continue;
    double const e = tc_estimate_us(t, tc_path(p), w, n);
    c.estimate_us[std::size_t(p)] = e;
    if (e < best) {
      best = e;
      c.path = tc_path(p);
    }
  }
  c.reason = ::sdnn::detail::concat("N = ", n, ": ", tc_path_name(c.path), " (cost model '", t.gpu, "'; modelled us:");
  for (int p = 0; p < tc_path_count; ++p)
    if (c.estimate_us[std::size_t(p)] >= 0)
      c.reason += ::sdnn::detail::concat(" ", tc_path_name(tc_path(p)), " ", std::round(c.estimate_us[std::size_t(p)] * 10) / 10);
  c.reason += ")";
  return c;
}

}  // namespace sdnn::policy
