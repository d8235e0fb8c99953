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
// stages in flight.
template <int BM, int BN, int BK, int WarpsM, int WarpsN, int Stages>
struct sparse24_tile {
  static constexpr int bm = BM, bn = BN, bk = BK, warps_m = WarpsM, warps_n = WarpsN, stages = Stages;
  static constexpr int threads = 32 * WarpsM * WarpsN;
  static constexpr int warp_m = BM / WarpsM, warp_n = BN / WarpsN;  // one warp's tile
  static constexpr int mi = warp_m / 16, ni = warp_n / 8;           // its m16n8k32 tiles
  static constexpr int min_blocks = 2;                              // __launch_bounds__ occupancy target
  // Shared memory of one stage: W values (BM x BK/2 x 2 bytes), metadata (BM x BK/8 bytes: one
  // 32-bit word per lane per 16 x 64 block), X (BN x BK x 2 bytes).
  static constexpr int a_stage_bytes = BM * BK, e_stage_bytes = BM * BK / 8, b_stage_bytes = BN * BK * 2;
  static constexpr int stage_bytes = a_stage_bytes + e_stage_bytes + b_stage_bytes;
  static constexpr int pipeline_bytes = Stages * stage_bytes;

  static_assert(BM % (16 * WarpsM) == 0 && BN % (8 * WarpsN) == 0, "sparse24_tile: a warp covers whole m16 x n8 tiles");
  static_assert(128 % BM == 0, "sparse24_tile: BM divides 128 (the plan pads M to a multiple of 128)");
  static_assert(BK == 64 || BK == 128, "sparse24_tile: BK is 64 or 128 (the plan pads K to a multiple of 128)");
  static_assert(Stages >= 2, "sparse24_tile: at least 2 stages");
  static_assert(threads <= 1024, "sparse24_tile: at most 32 warps");
};

// The configurations sparse24_auto chooses from (each compiled in by the plan).
using sparse24_tile_n8 = sparse24_tile<128, 8, 128, 8, 1, 4>;     // N <= 8: streams W, 256 threads
using sparse24_tile_n32 = sparse24_tile<128, 32, 128, 4, 2, 4>;   // N <= 32
using sparse24_tile_n64 = sparse24_tile<128, 64, 64, 4, 2, 4>;    // N <= 64
using sparse24_tile_n128 = sparse24_tile<128, 128, 64, 2, 2, 4>;  // larger N: 64 x 64 warp tiles

// Chooses the tile per run from N (sparse24_pick), and the split of K from the SM count.
struct sparse24_auto {};

template <class P>
inline constexpr bool is_sparse24_tile_v = false;
template <int BM, int BN, int BK, int WM, int WN, int S>
inline constexpr bool is_sparse24_tile_v<sparse24_tile<BM, BN, BK, WM, WN, S>> = true;

// Which tile sparse24_auto runs for a batch of n rows: the first whose bound is >= n.
enum class sparse24_choice { n8, n32, n64, n128 };

// sm_90 (H100 SXM 80 GB, 132 SMs, CUDA 13.0). NOT YET MEASURED: the bounds are the smallest tile
// that holds N (a choice from the tile shapes, not from a timing). The evidence is the tile sweep of
// benchmarks/bench_linear_sparse24.cu (rows sdnn_24_tile_n8 .. n128 on 11008 x 4096, every N); replace
// these with the crossovers it shows and cite the results file (benchmarks/results/sparse24_notes.md).
struct sparse24_tuning_sm90 {
  static constexpr arch measured{9, 0};
  static constexpr char const* gpu = "NVIDIA H100 80GB HBM3 (bounds not yet measured)";
  static constexpr std::int64_t n8_max = 8, n32_max = 32, n64_max = 64;
};
// Older GPUs (sm_80 .. sm_89): not measured; the same bounds, from the tile shapes alone.
struct sparse24_tuning_default {
  static constexpr arch measured{8, 0};
  static constexpr char const* gpu = "none (sm_80 .. sm_89, not measured)";
  static constexpr std::int64_t n8_max = 8, n32_max = 32, n64_max = 64;
};

template <class Table>
constexpr sparse24_choice sparse24_pick(std::int64_t n) {
  return n <= Table::n8_max    ? sparse24_choice::n8
         : n <= Table::n32_max ? sparse24_choice::n32
         : n <= Table::n64_max ? sparse24_choice::n64
                               : sparse24_choice::n128;
}
constexpr sparse24_choice sparse24_pick(arch a, std::int64_t n) {
  return sparse24_tuning_sm90::measured <= a ? sparse24_pick<sparse24_tuning_sm90>(n)
                                             : sparse24_pick<sparse24_tuning_default>(n);
}

}  // namespace sdnn::policy
