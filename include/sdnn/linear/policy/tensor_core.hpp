// sdnn/linear/policy/tensor_core.hpp - the tensor-core linear layer's algorithms (policy tags),
// their tile shapes, and the per-architecture tuning table that picks a shape and a K split
// for a batch size N. Host-only: the kernels are linear/kernel/tc_spmm.cuh, the plan
// linear/op/tc_linear.hpp.
#pragma once

#include <cstdint>

#include "sdnn/core/arch.hpp"

namespace sdnn::policy {

// Dense W, mma.sync m16n8k16 (the baseline that every sparse path is measured against, besides cuBLAS).
struct tc_dense_mma {
  static constexpr char const* name = "tc_dense_mma";
};
// Block-sparse W (formats/block_sparse.hpp, blocks of 16/32/64 x 16/32/64): a stored block is
// one dense mma tile, blocks not stored are never loaded.
struct tc_block_sparse_mma {
  static constexpr char const* name = "tc_block_sparse_mma";
};
// Unstructured W (formats/tile_offsets.hpp, 64 x 64 tiles): "load as sparse, compute as dense".
struct tc_tile_offsets_mma {
  static constexpr char const* name = "tc_tile_offsets_mma";
};

// A thread block computes a BM x BN tile of Y^T (BM output features x BN batch rows), walking K
// in steps of BK through a Stages-deep cp.async pipeline. Warps: WarpsM x WarpsN over the tile,
// and WarpsK over the k16 steps of one BK step (summed through shared memory at the end, in
// warp order: deterministic).
template <int BM_, int BN_, int BK_, int Stages_, int WarpsM_, int WarpsN_, int WarpsK_>
struct tc_tile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, Stages = Stages_;
  static constexpr int WarpsM = WarpsM_, WarpsN = WarpsN_, WarpsK = WarpsK_;
  static constexpr int warps = WarpsM * WarpsN * WarpsK, threads = 32 * warps;
  static constexpr int WM = BM / WarpsM, WN = BN / WarpsN;  // a warp's tile
  static constexpr int MT = WM / 16, NT = WN / 8;           // its m16 and n8 mma tiles
  static constexpr int KSteps = BK / 16;                    // k16 steps per BK step
  static constexpr int LDS = BK + 8;  // shared-memory row in elements: 16 bytes of padding make
                                      // the 8 row addresses of an ldmatrix hit distinct banks
  static_assert(BM % (16 * WarpsM) == 0 && BN % (16 * WarpsN) == 0 && BK % 16 == 0, "tc_tile: tile / warp shape");
  static_assert(KSteps % WarpsK == 0, "tc_tile: WarpsK must divide the k16 steps of BK");
  static_assert(Stages >= 2 && Stages <= 8, "tc_tile: 2..8 stages (cp.async groups waited on by count)");
};

// The streaming shape for small batches (linear/kernel/tc_stream.cuh): a unit is one BR x BC
// weight tile (a tile_offsets record or a stored block). Each of the Warps warps of a block
// streams its own contiguous run of units through a private Ring-byte shared-memory ring, in
// Chunk-byte cp.async groups (Ring / Chunk <= 8 groups in flight), and multiplies them with BN
// batch rows (n8 mma tiles); N > BN runs ceil(N / BN) passes. One block per SM, one wave.
template <int BR_, int BC_, int BN_, int Warps_ = 8, int Ring_ = 16384, int Chunk_ = 2048>
struct tc_stream_tile {
  static constexpr int BR = BR_, BC = BC_, BN = BN_, Warps = Warps_, Ring = Ring_, Chunk = Chunk_;
  static constexpr int threads = 32 * Warps;
  static constexpr int MT = BR / 16, KT = BC / 16, NT = BN / 8;  // m16, k16 and n8 tiles of a unit
  static_assert(BR % 16 == 0 && BC % 16 == 0 && BN % 8 == 0, "tc_stream_tile: unit / batch shape");
  static_assert((Ring & (Ring - 1)) == 0 && Ring % Chunk == 0 && Ring / Chunk <= 8 && Chunk % 512 == 0,
                "tc_stream_tile: a power-of-two ring of at most 8 chunks of 512-byte multiples");
  static_assert(2 * BR * BN * 4 <= Ring, "tc_stream_tile: the ring holds a warp's two partial sums at the end");
  static_assert(BR * BC * 2 <= Ring, "tc_stream_tile: a unit fits the ring");
};

// The TMA block kernel's shape (linear/kernel/tc_block_tma.cuh, sm_90): a thread block owns BR
// output features (one block row of BR x 32 blocks) and BX rows of X, read through tensor maps
// into Stages stages of one block each; Warps warps multiply (BX / Warps rows each), one more loads.
template <int BR_, int BX_, int Stages_, int Warps_>
struct tc_block_tma_tile {
  static constexpr int br = BR_, bk = 32, bx = BX_, stages = Stages_, mma_warps = Warps_;
  static constexpr int threads = (Warps_ + 1) * 32;
  static constexpr int warp_rows = BX_ / Warps_;
  static constexpr int mi = warp_rows / 16, nj = BR_ / 8;  // a warp's m16 (X rows) and n8 (features) tiles
  static constexpr int x_stage_bytes = BX_ * 64, w_stage_bytes = BR_ * 64;
  static constexpr int stage_bytes = x_stage_bytes + w_stage_bytes;
  static constexpr int smem = Stages_ * stage_bytes + 1024;  // + slack to align the stages to 1024 bytes
  // The epilogue's rows of Out in the freed stages (elements), padded by 8 values: the pairs an
  // accumulator store writes (8 rows x 4 lanes) fall on distinct banks.
  static constexpr int out_pitch = BR_ + 8;
  static_assert(BX_ * out_pitch * 4 <= Stages_ * stage_bytes, "tc_block_tma_tile: the output tile fits the stages");
  static_assert(BR_ == 16 || BR_ == 32 || BR_ == 64, "tc_block_tma_tile: blocks of 16, 32 or 64 rows");
  static_assert(BX_ % (16 * Warps_) == 0 && BX_ <= 256, "tc_block_tma_tile: BX a multiple of 16 rows a warp, <= 256");
  // The X stage must start on a 512-byte boundary for the 64-byte swizzle pattern to be the one
  // the fragments are read with: every stage size is a multiple of 512.
  static_assert(stage_bytes % 512 == 0, "tc_block_tma_tile: stages of whole swizzle atoms");
  static_assert(Stages_ >= 2, "tc_block_tma_tile: at least two stages");
};

// The tile shapes compiled for each algorithm: `small` for memory-bound batches (N up to a
// tuning entry; weights stream once, K split across blocks to fill the GPU), `large` for
// compute-bound ones; `stream<BN>` (tile_offsets and square blocks) for batches up to the
// tuning table's stream_n_max.
struct tc_dense_tiles {
  using small = tc_tile<64, 32, 64, 8, 4, 1, 2>;
  using large = tc_tile<128, 128, 32, 4, 2, 2, 1>;
};
template <int BR, int BC>
struct tc_block_tiles {
  static constexpr int wm = BR / 16;                                        // warps along M (small)
  static constexpr int wk = (BC / 16) < (8 / wm) ? (BC / 16) : (8 / wm > 0 ? 8 / wm : 1);
  using small = tc_tile<BR, 32, BC, 8, wm, 1, wk>;
  using large = tc_tile<BR, (BR == 64 ? 128 : 256), BC, 4, (BR == 64 ? 2 : 1), (BR == 64 ? 2 : 4), 1>;
  static constexpr bool has_stream = BR == BC;  // square blocks: compiled streaming shapes
  template <int BN>
  using stream = tc_stream_tile<BR, BC, BN>;
  static constexpr bool has_tma = BC == 32;  // the TMA kernel reads blocks 32 columns wide
  using tma = tc_block_tma_tile<BR, 128, 6, 4>;
  // 256 rows of X a block where there are many units (tuning: tma_wide_units_per_sm); measured
  // with blocks of 32 rows only (with 64, its 120 KB of stages leave one block an SM: it lost).
  static constexpr bool has_tma_wide = BR == 32 && BC == 32;
  using tma_wide = tc_block_tma_tile<BR, 256, 6, 8>;
};
struct tc_tile_offsets_tiles {
  static constexpr int tile_rows = 64, tile_cols = 64;  // the format's tile = the kernel's BM x BK
  using small = tc_tile<64, 32, 64, 8, 4, 1, 2>;
  using large = tc_tile<64, 128, 64, 4, 2, 2, 1>;
  static constexpr bool has_stream = true;
  template <int BN>
  using stream = tc_stream_tile<64, 64, BN>;
};

// The compiled batch widths of the streaming shape: 8 (one n8 tile) for N <= 8, else 32 (and
// ceil(N / 32) passes).
constexpr int tc_stream_bn(std::int64_t n) { return n <= 8 ? 8 : 32; }

// Which compiled shape a plan runs (automatic: by the tuning table; tiled: the small or large tile
// by the tuning table, never the streaming, direct or TMA kernels).
enum class tc_shape { automatic, small, large, stream, direct, tma, tiled };

// Per-architecture tuning of the tensor-core plans, keyed as linear/policy/tuning.hpp's tables.
struct tc_tuning {
  arch measured{0, 0};
  char const* gpu = "";
  std::int64_t small_n_max = 0;  // the small shape for N <= this
  int max_splits = 1;            // K split across thread blocks (small shape only), at most
  std::int64_t split_n_max = 0;  // split K only for N <= this (the partials are N x M floats per split)
  double split_cost = 0;         // extra cost per split in the split model (partials through L2)
  std::int64_t stream_n_max = 0; // the streaming shape for N <= this (tile_offsets, square blocks)
  int stream_unit_cost = 0;      // bytes a unit costs beside its own when the stream schedule balances warps
  std::int64_t direct_n_max = 0;     // 32 x 32 blocks: the direct kernel (tc_block_direct.cuh) for N <= this,
  std::int64_t direct_work_max = 0;  // and beyond while the stored blocks x ceil(N / 128) is at most this
  std::int64_t tma_n_min = 0;        // blocks 32 wide: the TMA kernel (tc_block_tma.cuh) for N >= this (0: never)
  int tma_wide_units_per_sm = 0;     // its wide tile (tma_wide) where that makes at least this many units
                                     // (block rows x 256-row tiles) per SM (0: never)
};

// sm_90: NVIDIA H100 80GB HBM3 (SXM, 132 SMs), CUDA 13.0, 2026-11-25, bench_linear_tc, 11008 x 4096,
// bf16, L2 flushed (benchmarks/results/tc_linear_notes.md, versions v2-v4):
//   stream_n_max = 32: the streaming kernel at N = 8 / 32 (v4: tile_offsets 90 % 40.7 / 72.7 us,
//     v1's tiled kernel 67.3 / 74.7; blocks 32 x 32 90 % 18.2 / 27.6 us, v1 23.1 / 28.5), the
//     small shape at N = 128, where the streaming kernel's 4 passes lose (v3: tile_offsets 90 %
//     stream 277.5 us, small 247.5 us; blocks stream 90.4 us, small 42.2 us).
//   stream_unit_cost = 192: bytes a unit's fixed work (X fragments, header, mma) is worth when
//     runs are balanced; not swept (one value measured).
//   small_n_max = 128, max_splits = 8, split_n_max = 32, split_cost = 0.02: the first version's
//     values, unchanged; the small shape now serves 32 < N <= 128 and dense W (not re-swept).
// 2026-11-26, bench_linear_tc --shape=direct against the automatic shapes, 32 x 32 blocks at
// 75/90/95 %, W 1024x784, 1024x1024, 4096^2, 11008x4096, N 1..2048
// (benchmarks/results/tc_direct_NVIDIA-H100_2026-11-26.jsonl):
//   direct_n_max = 128: the direct kernel was the fastest block shape at every N <= 32 and on the
//     big shapes at N = 128 (11008 x 4096 at 90 %: 11.2 / 16.8 / 34.2 us at N = 1 / 32 / 128
//     against the streaming kernel's 18.1 / 27.5 and the small tile's 42.4); on the 1024-wide
//     layers at N = 128 the small tile is 10-20 % faster, but cuBLAS beats both there. From
//     N = 512 on the big shapes the pipelined large tile wins (N = 1024: 160.3 against 155.0 us).
//   direct_work_max = 2048 blocks x 128-row tiles: the small layers, where the pipelined kernels'
//     fixed cost is the whole run (1024 x 1024 at 90 %, N = 1024: 13.5 us direct, 16.0 the small
//     tile, 19.5 the large).
// 2026-11-26, bench_linear_tc --shape=tma against the automatic shapes, 32 x 32 blocks at 75/90 %,
// W 11008x4096, 4096x11008, 8192^2, 4096^2, N 32..128 (benchmarks/results/tc_tma_n_NVIDIA-H100_2026-11-26.jsonl):
//   tma_n_min = 33: the TMA kernel was the faster at every N of 48, 64, 96 and 128 on every shape
//     and sparsity (11008 x 4096 at 90 %: 19.7 against 30.7 us at N = 48, 17.7 against 34.2 at
//     128), the streaming and direct kernels at N = 32 on 6 of the 8 (17.5 against 20.8 us).
// 2026-11-27, bench_conv16 --tma=1 (the TMA kernel forced) with its tile of 128 rows x 4 warps (the
// only one before) against 256 x 8, 64 x 2 and 128 x 8 in one call, VGG-16 at 90 % (32 x 32 and
// 64 x 32 blocks), fp16, batch 16 and 128
// (benchmarks/results/conv16_tma_tiles_exp_NVIDIA-H100_2026-11-27.jsonl):
//   tma_wide_units_per_sm = 8: with 32-row blocks 256 x 8 was 1.02-1.18x faster at every point
//     of 3136 units or more (conv1_2: 130.9 against 146.3 us at batch 16, 935.9 against 1108.9
//     at 128), 0.98-1.05x at 1568 units (12 an SM), 0.98-1.02x at 784 and 0.79x at 208 (conv5_1,
//     batch 16). With 64-row blocks it lost (0.77-1.03x), as did 64 x 2 and 128 x 8 (0.68-1.00x).
inline constexpr tc_tuning tc_tuning_sm90{{9, 0}, "NVIDIA H100 80GB HBM3 (2026-11-27)", 128, 8, 32, 0.02, 32, 192, 128, 2048, 33, 8};
// sm_80 and sm_8x: nothing measured; sm_90's values (the TMA kernel needs sm_90: never there).
inline constexpr tc_tuning tc_tuning_sm80{{8, 0}, "none measured (sm_90 values)", 128, 8, 32, 0.02, 32, 192, 128, 2048, 0, 0};

// The newest measured table not newer than `a` (a 10.0 part uses sm_90's); none below sm_80,
// where the kernels do not run (can_implement refuses).
constexpr tc_tuning tc_tuning_for(arch a) { return tc_tuning_sm90.measured <= a ? tc_tuning_sm90 : tc_tuning_sm80; }

// The K split of the small shape: the s in [1, max_splits] that minimises the modelled time
// ceil(blocks * s / slots) / s + split_cost * s (waves of equal thread blocks, each doing 1/s of
// a panel), with at least 4 k-blocks per split. blocks = panels x n-tiles, slots = resident
// thread blocks on the GPU.
constexpr int tc_choose_splits(std::int64_t blocks, std::int64_t slots, std::int64_t kblocks, tc_tuning const& t) {
  if (blocks <= 0 || slots <= 0) return 1;
  int best = 1;
  double best_cost = 1e300;
  for (int s = 1; s <= t.max_splits; ++s) {
    if (s > 1 && kblocks < 4 * s) break;
    std::int64_t const waves = (blocks * s + slots - 1) / slots;
    double const cost = double(waves) / s + t.split_cost * s;
    if (cost < best_cost - 1e-12) {
      best_cost = cost;
      best = s;
    }
  }
  return best;
}

}  // namespace sdnn::policy
