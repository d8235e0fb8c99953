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
#include "sdnn/linear/policy/sparse24.hpp"

namespace sdnn::policy {

// The paths of the automatic 16-bit linear layer.
//   cublas_dense:    W dense on the device, cublasGemmEx (bf16/fp16 in, float compute);
//   tc_block32:      W in 32 x 32 blocks, empty blocks never loaded (tc_block_sparse_mma);
//   tc_tile_offsets: W in 64 x 64 tiles of packed nonzeros, expanded in shared memory (tc_tile_offsets_mma);
//   sparse24:        W 2:4 along K on mma.sp (sparse24_linear_plan);
//   cusparse_csr:    W in CSR with 16-bit values, cusparseSpMM (float compute), for one row only:
//                    the fastest path there from 90 % unstructured sparsity; at more rows its
//                    16-bit SpMM was measured neither within the float-accumulation bound nor
//                    deterministic (and 10-1000x slower).
//   cusparselt:      W 2:4 through cuSPARSELt (cusparseLtMatmul, float compute), a plan per batch
//                    size; only where the program has cuSPARSELt (linear/vendor/cusparselt.cuh
//                    built with SDNN_HAS_CUSPARSELT) and Y is 16-bit. Fastest for 2:4 at 512+ rows.
//   tc_bitmap:       W in 16 x 16 bitmap tiles of stored value pairs, decoded in registers
//                    (tc_bitmap_plan): unstructured sparsity at small N.
//   csr_gather:      W in packed CSR (4 bytes a nonzero), X staged in shared memory, a fused
//                    multiply-add per nonzero and row of X on the CUDA cores (csr_gather_plan):
//                    unstructured sparsity from about 70 % at 1-16 rows; K <= 65536.
// Not candidates, by measurement (bench_linear16, benchmarks/results/linear16_*.md): sdnn's own
// dense mma.sync kernel (slower than cuBLAS at every point) and the float CUDA-core kernels
// (they compute a float layer; on float copies they beat every 16-bit path only at 99 % sparsity
// and 32-128 rows).
enum class tc_path : int {
  cublas_dense = 0,
  tc_block32 = 1,
  tc_tile_offsets = 2,
  sparse24 = 3,
  cusparse_csr = 4,
  cusparselt = 5,
  tc_bitmap = 6,
  csr_gather = 7
};
inline constexpr int tc_path_count = 8;
inline constexpr unsigned tc_all_paths = (1u << tc_path_count) - 1;  // a mask of every path

constexpr char const* tc_path_name(tc_path p) {
  switch (p) {
    case tc_path::cublas_dense: return "cublas_dense";
    case tc_path::tc_block32: return "tc_block32";
    case tc_path::tc_tile_offsets: return "tc_tile_offsets";
    case tc_path::sparse24: return "sparse24";
    case tc_path::cusparse_csr: return "cusparse_csr";
    case tc_path::cusparselt: return "cusparselt";
    case tc_path::tc_bitmap: return "tc_bitmap";
    case tc_path::csr_gather: return "csr_gather";
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
  std::int64_t pairs = 0;  // aligned column pairs (2c, 2c + 1) of a row holding a nonzero

  // The 16 x 16 tiles tc_bitmap stores: 16-row panels x 4 per 64-column group.
  std::int64_t tiles16() const { return (m + 15) / 16 * ((k + 63) / 64 * 4); }
  double density() const { return m > 0 && k > 0 ? double(nnz) / (double(m) * double(k)) : 0.0; }
  double block_occupancy() const { return blocks32_total ? double(blocks32) / double(blocks32_total) : 0.0; }
  std::string describe() const {
    return ::sdnn::detail::concat("W ", m, " x ", k, ", ", nnz, " nonzeros (density ", density(), ") in ", pairs,
                                  " column pairs, ", tiles64, " of ", tiles64_total, " 64x64 tiles and ", blocks32,
                                  " of ", blocks32_total, " 32x32 blocks occupied, ", is_24 ? "2:4" : "not 2:4");
  }
};

// The modelled time of a path: t(N) = launch(N) + units * rate(N) + units2 * rate2(N), each
// piecewise linear in N between the anchors (and beyond the last, along its last segment). units:
// cublas_dense and cusparselt M*K / 1e6; sparse24 M*(K + 1000) / 1e6 (a row of W costs 1000 columns
// more: its tiles' fixed work; without it the model could not tell 11008 x 4096 from 4096 x 11008,
// and of 0, 500, 1000, 2000, 3000 and 4000 columns, 500-1000 replayed both builds' 2:4 grids without
// a miss); tc_block32 occupied blocks / 1e3; tc_tile_offsets occupied tiles / 1e3 weighted by their
// fill, tiles * (1 + nnz per tile / 960) (a tile's fixed work is worth 960 nonzeros of expansion,
// from the N = 8 fit of 50-95 % below); cusparse_csr nonzeros / 1e6; tc_bitmap its 16 x 16 tiles /
// 1e3, at N <= 8 rounded up to whole waves of its thread blocks (tc_bitmap_wave); csr_gather
// nonzeros / 1e6. Three paths have a second count, units2, each with its own fitted rate:
// tc_bitmap its stored pairs / 1e6 (the decode and value loads), csr_gather K / 1e3 (each thread
// block stages X's K columns: it ran up to 1.2x slower on 4096 x 11008 than on 11008 x 4096 at the
// same nonzeros), tc_block32 the occupied blocks one resident thread block walks, blocks over
// min(block rows, 3 x SMs) (tc_block32_chain: up to 32 rows a thread block walks one block row,
// three an SM; 4096 rows make 128 such blocks on 132 SMs, each a long serial walk). One fixed
// weight for these (the 96 pairs a tile and 32 nonzeros a row used before) could not follow the
// bitmap kernel's measured cost at both 50 % and 99 %; with M K as
// csr_gather's second count and no waves, the model chose csr_gather on 4096 x 11008 at 70 %, N = 1,
// where the bitmap tiles ran 1.12-1.18x faster in every grid run.
inline constexpr int tc_anchor_count = 6;
inline constexpr std::array<double, tc_anchor_count> tc_anchors{1, 8, 32, 128, 512, 2048};

struct tc_path_rates {
  std::array<double, tc_anchor_count> launch{};  // us per run at each anchor N
  std::array<double, tc_anchor_count> rate{};    // us per unit at each anchor N
  std::array<double, tc_anchor_count> rate2{};   // us per second unit (tc_path_units2; 0 where none)
};

struct tc_auto_tuning {
  arch measured{0, 0};
  char const* gpu = "";
  char const* source = "";  // the benchmark run behind the rates
  std::array<tc_path_rates, tc_path_count> paths{};
  // Build a sparse encoding only when it can win somewhere: tiles while density <= this,
  // blocks while block occupancy <= this, CSR while density <= this.
  double max_tile_density = 0.6;
  double max_block_occupancy = 0.6;
  double max_csr_density = 0.3;
  int sms = 132;  // streaming multiprocessors of the GPU measured (the waves of tc_bitmap_wave)
};

// sm_90: NVIDIA H100 80GB HBM3, CUDA 13.0: benchmarks/fit_tc_auto.py on the bench_linear16 grid
// (4 shapes x 6 N x 9 structures, L2 flushed): tc_tile_offsets, sparse24 and cusparse_csr from the
// full run of 2026-11-25 (benchmarks/results/linear16_fit_NVIDIA-H100_2026-11-25.jsonl), cusparselt
// from the 2:4 rows of a cuSPARSELt build of it (linear16_lt_NVIDIA-H100_2026-11-25.jsonl), and
// cublas_dense and tc_block32 from the grid rerun for those two paths on 2026-11-26 after the direct
// block kernel went to 3 thread blocks an SM (linear16_block32_direct3_NVIDIA-H100_2026-11-26.jsonl),
// tc_bitmap and csr_gather from their grid run of 2026-11-27, after both kernels began to load the
// streamed weights without allocating in L1 (linear16_stream_hint_NVIDIA-H100_2026-11-27.jsonl,
// unstructured and blocks, N up to 2048). CTest host.tc_auto_table checks that the rows below are
// that fit. Replayed on those points (with tc_runnable's limits), the modelled choice is within 5 %
// of the fastest measured path at 215 of 216 (the miss: 11008 x 4096 2:4 at N = 128, cuBLAS
// modelled and cuSPARSELt 1.12x faster; 213 with M K as csr_gather's second count, no waves and
// one count for tc_block32, 208 with one count a path), and on the points of three later grid runs
// it was not fitted to, all that are not 2:4: 192 of 192 of the grid with read floors
// (linear16_floors_90a_NVIDIA-H100_2026-11-27.jsonl), 128 of 128 of
// linear16_auto_waves_90a_NVIDIA-H100_2026-11-27.jsonl and 144 of 144 of
// linear16_auto_unstr_hint_NVIDIA-H100_2026-11-27.jsonl (with one count for tc_block32: 192, 127
// and 144; with M K for csr_gather and no waves either: 191, - and 143).
inline constexpr tc_auto_tuning tc_auto_tuning_sm90{
    {9, 0},
    "NVIDIA H100 80GB HBM3 (2026-11-25)",
    "bench_linear16 grid, linear16_fit_NVIDIA-H100_2026-11-25.jsonl",
    {{
        // N:        1        8        32       128      512      2048
        {{8.91, 9.033, 7.22, 9.026, 10.91, 5.104}, {0.7933, 0.7863, 0.8321, 0.8197, 1.231, 4.995}},   // cublas_dense
        {{6.189, 6.643, 8.774, 8.753, 7.791, 8.837}, {0.6691, 0.6591, 0.7741, 1.489, 6.005, 25.07},
         {0.05733, 0.06349, 0.1578, 0.05882, 0.2282, 0.146}},  // tc_block32
        {{15.87, 15.86, 31.86, 22.62, 63.03, 153.7}, {1.616, 1.73, 2.591, 10.02, 25.54, 100.3}},     // tc_tile_offsets
        {{6.373, 6.545, 9.681, 9.051, 31.16, 0}, {0.4629, 0.4605, 0.4592, 0.7803, 1.874, 8.562}},    // sparse24
        {{18.11, 0, 0, 0, 0, 0}, {2.229, 110.3, 261.1, 913, 3488, 14060}},                          // cusparse_csr
        {{15.55, 14.62, 14.8, 15.53, 18.5, 8.457}, {0.6894, 0.7074, 0.7042, 0.6883, 0.8489, 3.522}},  // cusparselt
        {{4.932, 5.001, 4.68, 14, 49.67, 193.5}, {0.1092, 0.08822, 0.1498, 0.5989, 2.401, 9.616},
         {0.5646, 0.7784, 0.5403, 1.807, 6.673, 24.41}},  // tc_bitmap
        {{6.607, 7.729, 4.832, 9.575, 29.36, 118.2}, {1.721, 1.878, 8.462, 33.95, 135.3, 544.7},
         {0.1681, 0.5405, 5.86, 23.6, 94.6, 371.1}},  // csr_gather
    }},
    0.6,
    0.6,
    0.3};
// sm_80 and sm_8x: nothing measured; sm_90's values.
inline constexpr tc_auto_tuning tc_auto_tuning_sm80{{8, 0},
                                                    "none measured (sm_90 values)",
                                                    tc_auto_tuning_sm90.source,
                                                    tc_auto_tuning_sm90.paths,
                                                    tc_auto_tuning_sm90.max_tile_density,
                                                    tc_auto_tuning_sm90.max_block_occupancy,
                                                    tc_auto_tuning_sm90.max_csr_density,
                                                    tc_auto_tuning_sm90.sms};

// sparse24 on sm_90 in a build with the wgmma.sp tiles (90a, SDNN_SPARSE24_WGMMA=1): its own row,
// fitted by benchmarks/fit_tc_auto.py to the 2:4 grid run of such a build on 2026-11-27, after the
// reduction of K splits read each split's partial whole (linear16_s24_split_90a_NVIDIA-H100_2026-11-27.jsonl,
// 42da5ed; CTest host.tc_auto_table_90a checks it). With the row before (fitted to c0c37b6's kernel)
// that run's automatic layer chose the bitmap tiles on 4096 x 4096 at N = 32 (a modelled tie), 1.09x
// the 2:4 kernel's time; with this one the model picks the 2:4 kernel there. Replayed on the final
// grid (835faed, every path, the 2:4 kernel's times from the new run), within 5 % of the fastest path
// at 215 of 216 points (4096 x 11008 at N = 512: cuSPARSELt, 1.07x the 2:4 kernel, as before).
inline constexpr tc_path_rates tc_sparse24_rates_sm90a{{6.107, 6.288, 8.503, 13.32, 0, 0},
                                                       {0.4557, 0.4541, 0.436, 0.4179, 1.225, 3.943}};

// The tuning for GPU `a`; sparse24_wgmma: the program holds the wgmma.sp tiles (they run on sm_90).
constexpr tc_auto_tuning tc_auto_tuning_for(arch a, bool sparse24_wgmma = sparse24_wgmma_built) {
  if (!(tc_auto_tuning_sm90.measured <= a)) return tc_auto_tuning_sm80;
  tc_auto_tuning t = tc_auto_tuning_sm90;
  if (sparse24_wgmma && a == arch{9, 0}) {
    t.paths[std::size_t(tc_path::sparse24)] = tc_sparse24_rates_sm90a;
    t.gpu = "NVIDIA H100 80GB HBM3 (2026-11-25; sparse24 of a 90a build, 2026-11-27)";
  }
  return t;
}

// The bitmap kernel's 16-row panels (a thread block each) over the slots they fill, as a factor
// >= 1 on its tiles: at n <= 8 it runs 16 warps a block, two blocks an SM (64 registers a thread),
// so a last partial wave of panels leaves SMs idle (688 panels of 11008 rows take 3 waves of 264 on
// 132 SMs, 256 panels of 4096 rows one). Beyond 8 rows (8 warps a block, the slots not measured)
// no rounding.
inline double tc_bitmap_wave(std::int64_t m, std::int64_t n, int sms) {
  if (n > 8 || sms <= 0) return 1.0;
  std::int64_t const panels = (m + 15) / 16, slots = 2 * std::int64_t(sms);
  return panels > 0 ? double((panels + slots - 1) / slots * slots) / double(panels) : 1.0;
}

// The work units of a path for W and n rows on t's GPU (see tc_path_rates).
inline double tc_path_units(tc_auto_tuning const& t, tc_path p, weight_structure const& w, std::int64_t n) {
  switch (p) {
    case tc_path::cublas_dense:
    case tc_path::cusparselt: return double(w.m) * double(w.k) * 1e-6;
    case tc_path::sparse24: return double(w.m) * (double(w.k) + 1000.0) * 1e-6;
    case tc_path::tc_block32: return double(w.blocks32) * 1e-3;
    case tc_path::tc_tile_offsets: {
      double const per_tile = w.tiles64 ? double(w.nnz) / double(w.tiles64) : 0.0;
      return double(w.tiles64) * (1.0 + per_tile / 960.0) * 1e-3;
    }
    case tc_path::cusparse_csr: return double(w.nnz) * 1e-6;
    case tc_path::tc_bitmap: return double(w.tiles16()) * tc_bitmap_wave(w.m, n, t.sms) * 1e-3;
    case tc_path::csr_gather: return double(w.nnz) * 1e-6;
  }
  return 0;
}
// Occupied 32 x 32 blocks a resident thread block of the direct block kernel walks on average:
// one thread block a block row, three an SM, so below 3 x SMs block rows each runs alone on its row.
inline double tc_block32_chain(weight_structure const& w, int sms) {
  std::int64_t const rows = (w.m + 31) / 32, slots = 3 * std::int64_t(std::max(sms, 1));
  return rows > 0 ? double(w.blocks32) / double(std::min(rows, slots)) : 0.0;
}
// The second count of a path (tc_path_rates::rate2), 0 for the paths with one.
inline double tc_path_units2(tc_auto_tuning const& t, tc_path p, weight_structure const& w) {
  switch (p) {
    case tc_path::tc_bitmap: return double(w.pairs) * 1e-6;
    case tc_path::csr_gather: return double(w.k) * 1e-3;
    case tc_path::tc_block32: return tc_block32_chain(w, t.sms);
    default: return 0;
  }
}

// The modelled microseconds of one run of path p with n rows.
inline double tc_interpolate(std::array<double, tc_anchor_count> const& v, std::int64_t n) {
  double const x = double(std::max<std::int64_t>(n, 1));
  if (x <= tc_anchors[0]) return v[0];
  int i = 1;
  while (i < tc_anchor_count - 1 && x > tc_anchors[std::size_t(i)]) ++i;
  double const x0 = tc_anchors[std::size_t(i - 1)], x1 = tc_anchors[std::size_t(i)];
  return v[std::size_t(i - 1)] + (v[std::size_t(i)] - v[std::size_t(i - 1)]) * (x - x0) / (x1 - x0);
}
inline double tc_estimate_us(tc_auto_tuning const& t, tc_path p, weight_structure const& w, std::int64_t n) {
  auto const& r = t.paths[std::size_t(p)];
  return tc_interpolate(r.launch, n) + tc_path_units(t, p, w, n) * tc_interpolate(r.rate, n) +
         tc_path_units2(t, p, w) * tc_interpolate(r.rate2, n);
}

// Which paths can run W: cuBLAS always; sparse24 and cusparselt only for a 2:4 W (the plan also
// drops cusparselt where the program lacks cuSPARSELt); the other sparse encodings while they can
// pay (tuning thresholds). `allowed`: a mask of 1 << tc_path the caller permits (the
// result may be empty when it excludes cuBLAS).
inline unsigned tc_candidates(tc_auto_tuning const& t, weight_structure const& w, unsigned allowed = tc_all_paths) {
  unsigned c = 1u << int(tc_path::cublas_dense);
  if (w.nnz > 0 || w.m * w.k == 0) {
    if (w.block_occupancy() <= t.max_block_occupancy) c |= 1u << int(tc_path::tc_block32);
    if (w.density() <= t.max_tile_density) c |= (1u << int(tc_path::tc_tile_offsets)) | (1u << int(tc_path::tc_bitmap));
    if (w.density() <= t.max_tile_density && w.k <= 65536) c |= 1u << int(tc_path::csr_gather);
    if (w.density() <= t.max_csr_density) c |= 1u << int(tc_path::cusparse_csr);
  }
  if (w.is_24) c |= (1u << int(tc_path::sparse24)) | (1u << int(tc_path::cusparselt));
  return c & allowed;
}

// The candidates that can run n rows: cusparse_csr only for one; csr_gather up to 16 (one launch:
// beyond, each 16 rows read W again, and the model, which does not see the extra launches and
// column ranges, chose it at 32 rows where it ran 1.3x slower than tc_bitmap).
constexpr unsigned tc_runnable(unsigned candidates, std::int64_t n) {
  if (n > 1) candidates &= ~(1u << int(tc_path::cusparse_csr));
  if (n > 16) candidates &= ~(1u << int(tc_path::csr_gather));
  return candidates;
}

// The model's choice for n rows among `candidates` (those that can run n rows); no allocation
// (run() calls it).
inline tc_path tc_pick(tc_auto_tuning const& t, weight_structure const& w, std::int64_t n, unsigned candidates) {
  candidates = tc_runnable(candidates, n);
  tc_path best_path = tc_path::cublas_dense;
  double best = 1e300;
  for (int p = 0; p < tc_path_count; ++p) {
    if (!(candidates & (1u << p))) continue;
    double const e = tc_estimate_us(t, tc_path(p), w, n);
    if (e < best) {
      best = e;
      best_path = tc_path(p);
    }
  }
  return best_path;
}

// The same choice, with every candidate's estimate and why, as one line.
struct tc_choice {
  tc_path path = tc_path::cublas_dense;
  std::array<double, tc_path_count> estimate_us{};  // < 0: not a candidate
  std::string reason;
};
inline tc_choice tc_choose(tc_auto_tuning const& t, weight_structure const& w, std::int64_t n, unsigned candidates) {
  candidates = tc_runnable(candidates, n);
  SDNN_EXPECTS(candidates != 0, "tc_choose: no candidate path for ", n, " rows");
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
