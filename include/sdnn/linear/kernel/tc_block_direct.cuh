// sdnn/linear/kernel/tc_block_direct.cuh - the block-sparse tensor-core linear kernel for layers
// whose whole work is a few microseconds, Y = epi(X W^T) with W in 32 x 32 blocks: no pipeline,
// no shared-memory staging of operands, no split across thread blocks. A thread block owns one
// block row of W (32 output features) and WN * NT * 8 batch rows; its WK warp groups take the
// block row's stored blocks in turn (group wk: blocks wk, wk + WK, ...), each warp building its
// mma fragments straight from global memory (W's swizzled pieces, X's rows) and multiplying them
// with m16n8k16; the groups' sums meet in shared memory in group order (deterministic), and the
// epilogue and the one rounding to Out follow. Where the pipelined kernels (tc_spmm.cuh,
// tc_stream.cuh) pay their fixed costs (prologue, counters, cross-block fix-up) this one pays
// one dependent round of loads per block it visits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/numeric.cuh"
#include "sdnn/linear/arch/mma.cuh"
#include "sdnn/linear/kernel/tc_stream.cuh"

namespace sdnn::kernels {

// WN warps along the batch, each NT n8 tiles wide; WK warp groups along the blocks of the row;
// MinBlocks thread blocks an SM for __launch_bounds__ (caps the registers, so that a grid of one
// block per block row fits one wave).
template <int WN_, int WK_, int NT_, int MinBlocks_ = 1>
struct tc_direct_tile {
  static constexpr int WN = WN_, WK = WK_, NT = NT_, min_blocks = MinBlocks_;
  static constexpr int warps = WN * WK, threads = 32 * warps;
  static constexpr int BN = WN * NT * 8;  // batch rows of a thread block
  static_assert(warps >= 1 && warps <= 16 && NT >= 1 && NT <= 8, "tc_direct_tile: 1..16 warps, 1..8 n8 tiles");
  // shared memory: the partial sums of groups 1..WK-1 (2 m16 x NT n8 tiles x 4 floats per lane)
  static constexpr int smem = WK > 1 ? (WK - 1) * WN * 32 * 2 * NT * 4 * 4 : 4;
};

template <class T>
struct tc_direct_params {
  std::int32_t const* row_ptr = nullptr;  // [M / 32 + 1]
  std::int32_t const* col_idx = nullptr;  // [nnzb]
  T const* values = nullptr;              // [nnzb][32 * 32], 16-byte pieces swizzled (tc_swizzle16)
  T const* x = nullptr;                   // [N x ldx]
  std::int64_t ldx = 0;
  bool x_pair = false;                    // x 4-byte aligned, ldx and K even: 32-bit X loads
  void* y = nullptr;                      // [N x ldy] of T, or of float when y_float
  std::int64_t ldy = 0;
  bool y_float = false;
  std::int32_t M = 0, N = 0, K = 0;
  basic_epilogue<float> epi{};
};

namespace direct_detail {
// The 32-bit A-fragment register holding W-block elements (r, c), (r, c + 1) (c even) of a
// 32 x 32 block stored as swizzled 16-byte pieces: piece i = r * 4 + c / 8 at tc_swizzle16(i).
__device__ __forceinline__ std::uint32_t a_pair(unsigned short const* blk, int r, int c) {
  int const i = r * 4 + (c >> 3);
  return __ldg(reinterpret_cast<unsigned const*>(blk + 8 * tc_swizzle16(i) + (c & 7)));
}
}  // namespace direct_detail

template <class Cfg, class T>
__global__ void __launch_bounds__(Cfg::threads, Cfg::min_blocks) tc_block_direct_kernel(tc_direct_params<T> p) {
#if SDNN_MMA_SYNC_ARCH
  constexpr int NT = Cfg::NT, WN = Cfg::WN, WK = Cfg::WK;
  extern __shared__ __align__(16) float tc_direct_shared[];
  int const lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int const wn = warp % WN, wk = warp / WN;
  int const g = lane >> 2, t = lane & 3;
  int const panel = blockIdx.x;
  std::int64_t const n_base = std::int64_t(blockIdx.y) * Cfg::BN + std::int64_t(wn) * NT * 8;
  auto const* xs = reinterpret_cast<unsigned short const*>(p.x);
  auto const* ws = reinterpret_cast<unsigned short const*>(p.values);

  float acc[2][NT][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.0f;

  // this lane's batch rows: n_base + nt * 8 + g (the B fragments' column)
  unsigned short const* xrow[NT];
  bool n_in[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    std::int64_t const n = n_base + nt * 8 + g;
    n_in[nt] = n < p.N;
    xrow[nt] = xs + (n_in[nt] ? n : 0) * p.ldx;
  }
  int const b0 = __ldg(p.row_ptr + panel), b1 = __ldg(p.row_ptr + panel + 1);
  for (int b = b0 + wk; b < b1; b += WK) {
    int const kb = __ldg(p.col_idx + b) * 32;
    unsigned short const* blk = ws + std::int64_t(b) * 1024;
    // A: W rows mt * 16 + (g, g + 8), columns ks * 16 + 2t (+8)
    std::uint32_t a[2][2][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int ks = 0; ks < 2; ++ks) {
        int const r = mt * 16 + g, c = ks * 16 + 2 * t;
        a[mt][ks][0] = direct_detail::a_pair(blk, r, c);
        a[mt][ks][1] = direct_detail::a_pair(blk, r + 8, c);
        a[mt][ks][2] = direct_detail::a_pair(blk, r, c + 8);
        a[mt][ks][3] = direct_detail::a_pair(blk, r + 8, c + 8);
      }
    // B: X rows (batch) n, columns kb + ks * 16 + 2t (+8); zero outside N x K
    std::uint32_t bf[NT][2][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int ks = 0; ks < 2; ++ks) {
        int const k = kb + ks * 16 + 2 * t;
        bf[nt][ks][0] = detail::stream_x_pair(xrow[nt], n_in[nt], k, p.K, p.x_pair);
        bf[nt][ks][1] = detail::stream_x_pair(xrow[nt], n_in[nt], k + 8, p.K, p.x_pair);
      }
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) mma::mma_m16n8k16<T>(acc[mt][nt], a[mt][ks], bf[nt][ks][0], bf[nt][ks][1]);
  }

  // groups 1..WK-1 leave their sums in shared memory; group 0 adds them in group order
  constexpr int per_lane = 2 * NT * 4;
  if constexpr (WK > 1) {
    if (wk > 0) {
      float* dst = tc_direct_shared + ((std::int64_t(wk - 1) * WN + wn) * 32 + lane) * per_lane;
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) dst[(mt * NT + nt) * 4 + e] = acc[mt][nt][e];
    }
    __syncthreads();
    if (wk > 0) return;
    for (int q = 1; q < WK; ++q) {
      float const* src = tc_direct_shared + ((std::int64_t(q - 1) * WN + wn) * 32 + lane) * per_lane;
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[mt][nt][e] += src[(mt * NT + nt) * 4 + e];
    }
  }
  // C tile (mt, nt): (feature panel * 32 + mt * 16 + g (+8), batch n_base + nt * 8 + 2t (+1)).
  // A lane's 4 features and 2 NT batch rows are fixed: their bias values and row pointers are
  // read once; the epilogue is basic_epilogue's in two steps (bias_at, apply).
  basic_epilogue<float> const& epi = p.epi;
  int o[4];
  float bias[4];
  bool o_in[4];
#pragma unroll
  for (int h = 0; h < 4; ++h) {  // h = mt * 2 + (e >= 2)
    o[h] = panel * 32 + (h >> 1) * 16 + g + (h & 1) * 8;
    o_in[h] = o[h] < p.M;
    bias[h] = o_in[h] ? epi.bias_at(o[h]) : 0.0f;
  }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e1 = 0; e1 < 2; ++e1) {
      std::int64_t const n = n_base + nt * 8 + 2 * t + e1;
      if (n >= p.N) continue;
      std::int64_t const row = n * p.ldy;
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        if (!o_in[h]) continue;
        float const v = epi.apply(acc[h >> 1][nt][(h & 1) * 2 + e1], bias[h]);
        if (p.y_float) static_cast<float*>(p.y)[row + o[h]] = v;
        else static_cast<T*>(p.y)[row + o[h]] = value_cast<T>(v);
      }
    }
#endif
}

}  // namespace sdnn::kernels
