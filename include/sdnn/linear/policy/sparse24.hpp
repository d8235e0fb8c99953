// sdnn/linear/policy/sparse24.hpp - policies of the 2:4 sparse linear layer on the tensor cores
// (linear/op/sparse24_linear.cuh): sparse24_tile<...> forces one tile configuration of the
// mma.sp kernel (linear/kernel/sparse24_mma.cuh); sparse24_auto picks one per run from the batch
// size N through a tuning table keyed by architecture (the newest measured one not newer than the
// GPU, as in linear/policy/tuning.hpp). Host-safe: constants only.
#pragma once

#include <cstdint>

#include "sdnn/core/arch.hpp"

namespace sdnn::policy {

// One CTA computes a BM (output features, rows of W) x BN (batch rows of X) tile of Y^T over a
// range of K, BK logical K per pipeline stage, with WarpsM x WarpsN warps and Stages cp.async
// stages in flight. Wgmma: the tensor-core step is wgmma.sp (sm_90a builds with
// SDNN_SPARSE24_WGMMA=1, linear/arch/mma_sp.cuh): every warpgroup multiplies its 64 rows by all BN
// columns from shared memory, so WarpsM = BM / 16, WarpsN = 1, BK = 64 (128-byte X rows, the
// swizzle wgmma reads) and BN is 32, 64 or 128; otherwise mma.sp m16n8k32 per warp.
// WarpSpecialized (wgmma tiles only): one more warpgroup only loads (one of its threads through
// TMA tensor maps for dense aligned X rows, all 128 with cp.async otherwise), the WarpsM warps only
// multiply; stages are handed over through shared-memory barriers instead of CTA barriers, and one
// wgmma batch stays in flight while the next stage is waited for. WarpsM = BM / 32 gives each
// multiplying warpgroup two 64-row slices.
template <int BM, int BN, int BK, int WarpsM, int WarpsN, int Stages, bool Wgmma = false, bool WarpSpecialized = false>
struct sparse24_tile {
  static constexpr int bm = BM, bn = BN, bk = BK, warps_m = WarpsM, warps_n = WarpsN, stages = Stages;
  static constexpr bool wgmma = Wgmma, warp_specialized = WarpSpecialized;
  static constexpr int mma_threads = 32 * WarpsM * WarpsN;                      // the warps that multiply
  static constexpr int load_threads = WarpSpecialized ? 128 : mma_threads;      // the threads that load a stage
  static constexpr int threads = mma_threads + (WarpSpecialized ? 128 : 0);
  // Registers a thread while the warpgroups trade them (setmaxnreg; 0: no trade): a warpgroup with
  // two 64-row slices holds 128 accumulators, more than the 168 the launch gives 384 threads, so
  // the loaders drop to 40 and the multipliers take 232 (232 x 256 + 40 x 128 <= 64 K).
  static constexpr int load_regs = WarpSpecialized && BM == 32 * WarpsM ? 40 : 0;
  static constexpr int mma_regs = load_regs ? 232 : 0;
  static constexpr int launch_regs = 65536 / threads / 8 * 8;  // what both return to for the epilogue
  static constexpr int warp_m = BM / WarpsM, warp_n = BN / WarpsN;  // one warp's tile
  static constexpr int mi = warp_m / 16, ni = warp_n / 8;           // its m16n8k32 tiles
  // __launch_bounds__ occupancy target: 16 warps, or 8+ warps holding 64 x 64 accumulator tiles,
  // need up to 128 or 255 registers a thread, so one CTA an SM; anything smaller two.
  static constexpr int min_blocks = WarpSpecialized || threads >= 512 || (threads >= 256 && mi * ni >= 32) ? 1 : 2;
  // Shared memory of one stage: W values (BM x BK/2 x 2 bytes), metadata (BM x BK/8 bytes: one
  // 32-bit word per lane per 16 x 64 block), X (BN x BK x 2 bytes). wgmma tiles also align the
  // pipeline to 1024 bytes (the swizzle's period), hence the extra 1024.
  static constexpr int a_stage_bytes = BM * BK, e_stage_bytes = BM * BK / 8, b_stage_bytes = BN * BK * 2;
  static constexpr int stage_bytes = a_stage_bytes + e_stage_bytes + b_stage_bytes;
  static constexpr int pipeline_bytes = Stages * stage_bytes;
  static constexpr int align_bytes = Wgmma ? 1024 : 0;

  static_assert(BM % (16 * WarpsM) == 0 && BN % (8 * WarpsN) == 0, "sparse24_tile: a warp covers whole m16 x n8 tiles");
  static_assert(256 % BM == 0, "sparse24_tile: BM divides 256 (the plan pads M to a multiple of 256)");
  static_assert(BK == 64 || BK == 128, "sparse24_tile: BK is 64 or 128 (the plan pads K to a multiple of 128)");
  static_assert(Stages >= 2, "sparse24_tile: at least 2 stages");
  static_assert(threads <= 1024, "sparse24_tile: at most 32 warps");
  static_assert(!Wgmma || (BK == 64 && WarpsN == 1 && WarpsM % 4 == 0 &&
                           (WarpsM * 16 == BM || (WarpSpecialized && WarpsM * 32 == BM)) &&
                           (BN == 32 || BN == 64 || BN == 128) && (a_stage_bytes + e_stage_bytes) % 1024 == 0 &&
                           stage_bytes % 1024 == 0),
                "sparse24_tile: a wgmma tile is BM (128 or 256) x BN (32, 64, 128) x 64, BM / 16 warps (BM / 32: "
                "warp-specialized, two 64-row slices a warpgroup)");
  static_assert(!WarpSpecialized || (Wgmma && Stages >= 3),
                "sparse24_tile: a warp-specialized tile is a wgmma tile with at least 3 stages");
};

// The configurations sparse24_auto chooses from (each compiled in by the plan).
using sparse24_tile_n8 = sparse24_tile<128, 8, 128, 8, 1, 4>;     // N <= 8: streams W, 256 threads
using sparse24_tile_n32 = sparse24_tile<128, 32, 128, 4, 2, 4>;   // N <= 32
using sparse24_tile_n64 = sparse24_tile<128, 64, 64, 4, 2, 4>;    // N <= 64
using sparse24_tile_n128 = sparse24_tile<128, 128, 64, 2, 2, 4>;  // 64 x 64 warp tiles, 4 warps
// Candidates of the sm_90 sweep (benchmarks/bench_linear_sparse24.cu): 8 warps, and 256-row tiles
// that halve how often X is read per W row (X is 2 bytes per K, a W row 1.125).
using sparse24_tile_n128_w8 = sparse24_tile<128, 128, 64, 4, 2, 4>;         // 32 x 64 warp tiles
using sparse24_tile_m256_n64 = sparse24_tile<256, 64, 64, 4, 2, 4>;         // 64 x 32 warp tiles
using sparse24_tile_m256_n128 = sparse24_tile<256, 128, 64, 4, 2, 4>;       // 64 x 64, one CTA an SM
using sparse24_tile_m256_n128_k128 = sparse24_tile<256, 128, 128, 4, 2, 3>; // the same, BK 128
// wgmma.sp tiles (sm_90a): one warpgroup per 64 rows of W.
using sparse24_tile_w_n32 = sparse24_tile<128, 32, 64, 8, 1, 4, true>;
using sparse24_tile_w_n64 = sparse24_tile<128, 64, 64, 8, 1, 4, true>;
using sparse24_tile_w_n128 = sparse24_tile<128, 128, 64, 8, 1, 4, true>;
using sparse24_tile_w_m256_n128 = sparse24_tile<256, 128, 64, 16, 1, 4, true>;
// Warp-specialized wgmma.sp tiles (sm_90a): a loading warpgroup, one CTA an SM.
using sparse24_tile_ws_n32 = sparse24_tile<128, 32, 64, 8, 1, 8, true, true>;      // 104 KB of stages
using sparse24_tile_ws_n64 = sparse24_tile<128, 64, 64, 8, 1, 8, true, true>;      // 136 KB
using sparse24_tile_ws_n128 = sparse24_tile<128, 128, 64, 8, 1, 8, true, true>;    // 200 KB
using sparse24_tile_ws_m256_n128 = sparse24_tile<256, 128, 64, 8, 1, 6, true, true>;  // 204 KB, 2 slices a warpgroup

// Chooses the tile per run from N (sparse24_pick), and the split of K from the SM count.
struct sparse24_auto {};

template <class P>
inline constexpr bool is_sparse24_tile_v = false;
template <int BM, int BN, int BK, int WM, int WN, int S, bool G, bool WS>
inline constexpr bool is_sparse24_tile_v<sparse24_tile<BM, BN, BK, WM, WN, S, G, WS>> = true;

// Whether this build has the wgmma.sp path: define SDNN_SPARSE24_WGMMA=1 only when compiling the
// device code for sm_90a (-gencode=arch=compute_90a,code=sm_90a); sparse24_auto then runs the
// wgmma tiles on sm_90 GPUs and the mma.sp tiles elsewhere.
#ifndef SDNN_SPARSE24_WGMMA
#define SDNN_SPARSE24_WGMMA 0
#endif
inline constexpr bool sparse24_wgmma_built = SDNN_SPARSE24_WGMMA != 0;

// Which tile sparse24_auto runs for a batch of n rows: the first whose bound is >= n, on the
// mma.sp path or (wgmma built, sm_90) the wgmma path, which keeps the mma.sp n8 and n32 tiles for
// small N; dense, 16-byte aligned X rows (tensor maps) take the warp-specialized tiles there, which
// keep the mma.sp n8 tile. The order is the order of the plan's tiles.
enum class sparse24_choice { n8, n32, n64, mid, large, w_n64, w_mid, w_large, ws_n32, ws_n64, ws_mid, ws_large };
using sparse24_auto_mid = sparse24_tile_m256_n64;  // unused by the sm_90 table (mid_max == n64_max)
using sparse24_auto_large = sparse24_tile_m256_n64;
using sparse24_auto_w_mid = sparse24_tile_w_n128;
using sparse24_auto_w_large = sparse24_tile_w_m256_n128;
using sparse24_auto_ws_mid = sparse24_tile_ws_n128;
using sparse24_auto_ws_large = sparse24_tile_ws_m256_n128;

// sm_90 (H100 SXM 80 GB, 132 SMs, CUDA 13.0), from the tile sweeps of
// benchmarks/bench_linear_sparse24.cu on 11008 x 4096 with the clean L2 flush, two runs
// (benchmarks/results/sparse24_notes.md, v2 and v3), us:
//   mma.sp: N = 8: n8 23.9 / 24.2 (n32 26.6); N = 32: n32 26.7 / 27.1 (n8 33.7, n64 34.4); N = 64: n64
//   34.6, n32 36.0 / 36.3; N = 128: n32 51.6 / 52.5 (n64 56.2, m256_n64 56.4); N = 256: n64 82.5
//   (m256_n64 87.5); N = 512: m256_n64 137.6 / 136.6 (n128_w8 138.5); N = 2048: m256_n64 465 / 480.
//   wgmma.sp (sm_90a): N = 32: w_n32 30.8 (n32 27.1 kept); N = 64: w_n64 34.1 (n64 34.7); N = 128:
//   w_n128 43.2 (w_m256_n128 44.3); N = 256: w_m256_n128 62.3 (w_n128 71.0); N = 512: w_m256_n128
//   99.7 (w_n128 108.7); N = 2048: w_m256_n128 342 (w_n128 373).
//   warp-specialized wgmma.sp with tensor maps (sm_90a, linear_sparse24_ws_NVIDIA-H100_2026-11-26.jsonl):
//   N = 8: n8 24.1 (ws_n32 23.5); N = 16: n8 23.7 (ws_n32 24.2); N = 32: ws_n32 23.7 (ws_n64 27.0, n32
//   27.0); N = 64: ws_n64 25.0 (ws_n32 32.6, w_n64 35.1); N = 128: ws_n128 29.5 (ws_n64 38.2); N = 256:
//   ws_n128 51.4 (ws_n64 55.4); N = 512: ws_n128 76.9 (ws_n64 104.1); N = 2048: ws_n128 325 (w_m256_n128
//   360); with the 256-row tile (a later run, same file name of the results): N = 512: ws_n128 77.6
//   (ws_m256_n128 113: 1.3 waves of tiles); N = 1024: ws_m256_n128 135 (ws_n128 168); N = 2048:
//   ws_m256_n128 295 (ws_n128 322).
struct sparse24_tuning_sm90 {
  static constexpr arch measured{9, 0};
  static constexpr char const* gpu = "NVIDIA H100 80GB HBM3";
  static constexpr std::int64_t n8_max = 8, n32_max = 128, n64_max = 256, mid_max = 256;
  static constexpr std::int64_t w_n8_max = 8, w_n32_max = 32, w_n64_max = 64, w_mid_max = 128;
  static constexpr std::int64_t ws_n8_max = 8, ws_n32_max = 32, ws_n64_max = 64, ws_mid_max = 512;
};
// The n8 tile's K split fills at most this many CTAs per SM (its two resident CTAs an SM would
// otherwise take twice as many splits). Measured on H100 (sm_90a build, L2 flushed, two rounds,
// us at N = 1 / 8; sparse24_notes.md v7): 11008 x 4096 (86 tiles) no split 29.9 / 29.8 against 3
// splits 30.7 / 30.8; 8192 x 8192 (64 tiles) 2 splits 41.0 / 41.1 against 4: 41.2 / 41.2; 4096 x
// 11008 and 4096 x 4096 (32 tiles) 4 splits 30.5 / 30.6 and 15.7 / 15.8 against 8: 30.9 / 30.8
// and 16.1 / 16.2.
inline constexpr int sparse24_n8_split_ctas_per_sm = 1;
// Older GPUs (sm_80 .. sm_89): not measured; bounds from the tile shapes alone (no wgmma there).
struct sparse24_tuning_default {
  static constexpr arch measured{8, 0};
  static constexpr char const* gpu = "none (sm_80 .. sm_89, not measured)";
  static constexpr std::int64_t n8_max = 8, n32_max = 32, n64_max = 64, mid_max = 256;
  static constexpr std::int64_t w_n8_max = 8, w_n32_max = 32, w_n64_max = 64, w_mid_max = 128;
  static constexpr std::int64_t ws_n8_max = 8, ws_n32_max = 32, ws_n64_max = 64, ws_mid_max = 512;
};

// m: W's rows when known (0: many). The 256-row wgmma tiles read X half as often per W row as the
// 128-row ones, which matters only where W has more rows than one tile: up to 128 rows (a
// convolution's 64 or 128 filters) they would multiply padding, so the 128-row tile runs there.
template <class Table>
constexpr sparse24_choice sparse24_pick(std::int64_t n, bool wgmma, bool tma_x = false, std::int64_t m = 0) {
  bool const small = m > 0 && m <= 128;
  if (wgmma && tma_x)
    return n <= Table::ws_n8_max             ? sparse24_choice::n8
           : n <= Table::ws_n32_max          ? sparse24_choice::ws_n32
           : n <= Table::ws_n64_max          ? sparse24_choice::ws_n64
           : n <= Table::ws_mid_max || small ? sparse24_choice::ws_mid
                                             : sparse24_choice::ws_large;
  if (wgmma)
    return n <= Table::w_n8_max             ? sparse24_choice::n8
           : n <= Table::w_n32_max          ? sparse24_choice::n32
           : n <= Table::w_n64_max          ? sparse24_choice::w_n64
           : n <= Table::w_mid_max || small ? sparse24_choice::w_mid
                                            : sparse24_choice::w_large;
  return n <= Table::n8_max    ? sparse24_choice::n8
         : n <= Table::n32_max ? sparse24_choice::n32
         : n <= Table::n64_max ? sparse24_choice::n64
         : n <= Table::mid_max ? sparse24_choice::mid
                               : sparse24_choice::large;
}
// wgmma_built: the plan holds the wgmma tiles; they run on sm_90 only (an sm_90a binary). tma_x: X
// is an operand the tensor maps can read (K > 0; dense 16-byte aligned rows, or a convolution's
// aligned NHWC input with C a multiple of 64); otherwise the wgmma tiles whose threads gather X.
constexpr sparse24_choice sparse24_pick(arch a, std::int64_t n, bool wgmma_built = sparse24_wgmma_built,
                                        bool tma_x = true, std::int64_t m = 0) {
  bool const w = wgmma_built && a == arch{9, 0};
  return sparse24_tuning_sm90::measured <= a ? sparse24_pick<sparse24_tuning_sm90>(n, w, tma_x, m)
                                             : sparse24_pick<sparse24_tuning_default>(n, w, tma_x, m);
}

}  // namespace sdnn::policy
