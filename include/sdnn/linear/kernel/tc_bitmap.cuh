// sdnn/linear/kernel/tc_bitmap.cuh - the small-batch unstructured kernel Y = epi(X W^T) with W in
// bitmap tiles (formats/bitmap_tiles.hpp), 16-bit inputs, float accumulation, up to 8 NT rows of X
// a launch. A thread block owns a panel of 16 rows of W; its Warps warps split the panel's 64-column
// groups along K. A warp takes a group a step: each lane reads its X fragments of the group's 4
// tiles as 16 consecutive values (two 16-byte loads per 8 rows of X; the format orders K so), and
// decodes its A fragments from the tiles' records straight into registers (a popcount and a 32-bit
// load per register; the lanes read a register's stored pairs from consecutive words). No block
// barrier in the main loop. With Stages > 1 a warp's next groups' records are copied
// ahead into its shared-memory slots (cp.async, no registers held), so a step waits for its values
// only; with Stages = 1 it reads them itself as the step begins. The warps' partial sums are added
// in warp order through shared memory at the end: deterministic.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cuda/ptx>

#include <cstdint>
#include <type_traits>

#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/numeric.cuh"
#include "sdnn/formats/bitmap_tiles.hpp"
#include "sdnn/linear/arch/mma.cuh"

namespace sdnn::kernels {

struct tc_bitmap_args {
  bitmap_tile_record const* records = nullptr;  // [tile_rows][tile_cols]
  std::uint32_t const* values = nullptr;        // the stored pairs (two 16-bit values a word)
  std::uint16_t const* x = nullptr;             // [n x ldx]: this launch's rows of X
  std::int64_t ldx = 0;
  void* y = nullptr;  // [n x ldy] of T, or of float when y_float
  std::int64_t ldy = 0;
  bool y_float = false;
  std::int32_t m = 0, k = 0, n = 0;  // W m x k; n <= 8 NT rows
  std::int32_t tile_cols = 0;        // 4 per 64-column group
  basic_epilogue<float> epi{};
};

// XVec: x 16-byte aligned and ldx % 8 == 0, so a lane's 16 values of a group are two 16-byte loads
// (element loads where they would pass K).
// Stages: 1, each step reads its group's records from global memory; S > 1, a warp holds S record
// slots in shared memory, the next S - 1 groups' copies in flight. Two thread blocks an SM cap the
// registers at 128 for 8 warps (the 32-row kernel with element-wise X loads took 144 without).
template <class T, int NT, int Warps, bool XVec, int Stages = 1>
__global__ void __launch_bounds__(Warps * 32, 2) tc_bitmap_kernel(tc_bitmap_args p) {
#if SDNN_MMA_SYNC_ARCH
  static_assert(NT >= 1 && NT <= 4 && Warps >= 1, "tc_bitmap_kernel: 8 to 32 rows of X a launch");
  static_assert(Stages >= 1 && Stages <= 8, "tc_bitmap_kernel: 1..8 record stages");
  __shared__ float red[Warps][NT * 8][17];  // the warps' partial sums, [n][m], a padded row per n
  constexpr int slot_warps = Stages > 1 ? Warps : 1;  // Stages = 1: one unused 128-byte slot
  __shared__ __align__(16) bitmap_tile_record slots[slot_warps][Stages][4];

  int const lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  int const g = lane >> 2, t = lane & 3;
  int const panel = int(blockIdx.x);
  int const groups = p.tile_cols / 4;
  int const G0 = int(std::int64_t(groups) * warp / Warps), G1 = int(std::int64_t(groups) * (warp + 1) / Warps);
  std::uint32_t const lane_bit = 1u << lane, lanes_below = lane_bit - 1u;
  bitmap_tile_record const* rec = p.records + std::int64_t(panel) * p.tile_cols;

  float acc[NT][4];
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[i][c] = 0.f;

  // Stages > 1: group G's 4 records (128 bytes) are copied into the warp's slot (G - G0) % Stages
  // by lanes 0-7 (cp.async, 16 bytes each) Stages - 1 steps ahead. Every step commits one copy
  // group (empty past G1), so waiting until Stages - 1 are in flight leaves step G's landed.
  auto stage = [&](int G) {
    if (G < G1 && lane < 8)
      mma::cp_async_16(reinterpret_cast<unsigned char*>(slots[warp % slot_warps][(G - G0) % Stages]) + 16 * lane,
                       reinterpret_cast<unsigned char const*>(rec + 4 * G) + 16 * lane);
    mma::cp_async_commit();
  };
  if constexpr (Stages > 1) {
#pragma unroll
    for (int s = 0; s < Stages - 1; ++s) stage(G0 + s);
  }
  for (int G = G0; G < G1; ++G) {
    // The 4 records of group G (32 bytes each, the same for every lane: broadcast loads).
    uint4 cur[4][2];
    if constexpr (Stages > 1) {
      stage(G + Stages - 1);  // into the slot step G - 1 read (its lanes met at that step's end)
      mma::cp_async_wait<Stages - 1>();
      __syncwarp();
      uint4 const* src = reinterpret_cast<uint4 const*>(slots[warp % slot_warps][(G - G0) % Stages]);
#pragma unroll
      for (int u = 0; u < 4; ++u) cur[u][0] = src[2 * u], cur[u][1] = src[2 * u + 1];
      __syncwarp();  // every lane holds the records before a later step refills the slot
    } else {
      uint4 const* src = reinterpret_cast<uint4 const*>(rec + 4 * G);
#pragma unroll
      for (int u = 0; u < 4; ++u) cur[u][0] = __ldg(src + 2 * u), cur[u][1] = __ldg(src + 2 * u + 1);
    }
    // X: this lane's 16 values X(n, 64 G + 16 t .. + 15), n = 8 nt + g, as 8 words; tile u takes
    // words 2u (its b0) and 2u + 1 (its b1).
    std::uint32_t xw[NT][8];
    int const k0 = 64 * G + 16 * t;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      int const n = nt * 8 + g;
      std::uint16_t const* xr = p.x + std::int64_t(n) * p.ldx + k0;
      if (XVec && n < p.n && k0 + 16 <= p.k) {
        uint4 const lo = __ldg(reinterpret_cast<uint4 const*>(xr)), hi = __ldg(reinterpret_cast<uint4 const*>(xr) + 1);
        xw[nt][0] = lo.x, xw[nt][1] = lo.y, xw[nt][2] = lo.z, xw[nt][3] = lo.w;
        xw[nt][4] = hi.x, xw[nt][5] = hi.y, xw[nt][6] = hi.z, xw[nt][7] = hi.w;
      } else {
#pragma unroll
        for (int w = 0; w < 8; ++w) {
          std::uint32_t const e0 = n < p.n && k0 + 2 * w < p.k ? __ldg(xr + 2 * w) : 0u;
          std::uint32_t const e1 = n < p.n && k0 + 2 * w + 1 < p.k ? __ldg(xr + 2 * w + 1) : 0u;
          xw[nt][w] = e0 | (e1 << 16);
        }
      }
    }
    // A fragments: register j of tile u, when bit `lane` of its mask[j] is set, is the stored pair
    // start + before[j] + (lanes below this one with register j stored). The pairs are read once:
    // loaded without allocating in L1, leaving it to X's fragments, read again by every panel
    // (on the grid shapes 0.84-0.94x the time at 50-70 %, 0.94-1.01x at 90-95 %, 1.02-1.03x at
    // 99 %; tc_linear_notes.md v15).
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      std::uint32_t const mask[4] = {cur[u][0].x, cur[u][0].y, cur[u][0].z, cur[u][0].w};
      std::uint32_t const* pairs = p.values + cur[u][1].y;
      std::uint32_t a[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        std::uint32_t const before = __byte_perm(cur[u][1].x, 0u, 0x4440u | j);
        a[j] = (mask[j] & lane_bit) ? cuda::ptx::ld_nc_L1_no_allocate(cuda::ptx::space_global,
                                                                      pairs + (before + __popc(mask[j] & lanes_below)))
                                    : 0u;
      }
      if (cur[u][1].z != 0) {  // an empty tile adds nothing: skip its mma (uniform)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma::mma_m16n8k16<T>(acc[nt], a, xw[nt][2 * u], xw[nt][2 * u + 1]);
      }
    }
  }

  // acc[nt][c]: W row m = g + 8 (c / 2) of the panel, X row n = 8 nt + 2 t + c % 2.
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) red[warp][nt * 8 + 2 * t + (c & 1)][g + 8 * (c >> 1)] = acc[nt][c];
  __syncthreads();
  for (int i = int(threadIdx.x); i < NT * 8 * 16; i += Warps * 32) {
    int const n = i >> 4, m = i & 15, gm = panel * 16 + m;
    if (n >= p.n || gm >= p.m) continue;
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < Warps; ++w) s += red[w][n][m];
    s = p.epi(s, gm);
    std::int64_t const at = std::int64_t(n) * p.ldy + gm;
    if (p.y_float) static_cast<float*>(p.y)[at] = s;
    else if constexpr (std::is_same_v<T, bf16>) static_cast<__nv_bfloat16*>(p.y)[at] = __float2bfloat16_rn(s);
    else static_cast<__half*>(p.y)[at] = __float2half_rn(s);
  }
#else
  __trap();  // sm_80 and newer only: the plan refuses older GPUs before launching
#endif
}

}  // namespace sdnn::kernels
