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

// The tile shapes compiled for each algorithm: `small` for memory-bound batches (N up to a
// tuning entry; weights stream once, K split across blocks to fill the GPU), `large` for
// compute-bound ones.
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
};
struct tc_tile_offsets_tiles {
  static constexpr int tile_rows = 64, tile_cols = 64;  // the format's tile = the kernel's BM x BK
  using small = tc_tile<64, 32, 64, 8, 4, 1, 2>;
  using large = tc_tile<64, 128, 64, 4, 2, 2, 1>;
};

// Which compiled shape a plan runs (automatic: by the tuning table).
enum class tc_shape { automatic, small, large };

// Per-architecture tuning of the tensor-core plans, keyed as linear/policy/tuning.hpp's tables.
struct tc_tuning {
  arch measured{0, 0};
  char const* gpu = "";
  std::int64_t small_n_max = 0;  // the small shape for N <= this
  int max_splits = 1;            // K split across thread blocks (small shape only), at most
  std::int64_t split_n_max = 0;  // split K only for N <= this (the partials are N x M floats per split)
  double split_cost = 0;         // extra cost per split in the split model (partials through L2)
};

// sm_90 (H100 SXM, CUDA 13.0). NOT YET MEASURED with these kernels (no device run in the session
// that wrote them; benchmarks/results/tc_linear_notes.md): each entry is derived from byte and
// block counts. small_n_max = 128: at N = 128 the product is still bound by the weight bytes
// (11008 x 4096 dense: cuBLAS 36 us at N = 8 and at N = 128, tensor-cores notes) and the small
// shape keeps the 4 n-tiles of a panel together in L2. split_n_max = 32: a split writes and reads
// N x M floats, at N = 32 on 11008 x 4096 1.4 MB per split against 14 MB of 90 % weights.
inline constexpr tc_tuning tc_tuning_sm90{{9, 0}, "NVIDIA H100 80GB HBM3 (derived, unmeasured)", 128, 8, 32, 0.02};
// sm_80 and sm_8x: nothing measured; the same rules (they follow from byte and block counts).
inline constexpr tc_tuning tc_tuning_sm80{{8, 0}, "none measured (sm_90 rules)", 128, 8, 32, 0.02};

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
