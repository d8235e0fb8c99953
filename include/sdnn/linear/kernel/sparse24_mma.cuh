// sdnn/linear/kernel/sparse24_mma.cuh - the 2:4 sparse linear kernel on the tensor cores:
//
//   Y[N x M] = epi(X[N x K] * W^T)  as  Y^T = W * X^T with mma.sp m16n8k32 row.col: A = W (kept values
//                                   + metadata), B = X rows (K contiguous), C = a Y^T tile
//
// One body for bf16 and fp16, output T or float, and every X operand of tc_x_operand.cuh (dense rows,
// or a convolution's NHWC input as its implicit im2col matrix); tile, stages and warps from
// policy::sparse24_tile. A cp.async pipeline feeds swizzled shared memory, ldmatrix the fragments; Y
// goes out through shared memory. Tiles with Wgmma (sm_90a) run wgmma.sp per warpgroup instead, B read from the same
// swizzled stage by descriptor. Warp-specialized wgmma tiles add a loading warpgroup: it fills the
// stages (one thread through tensor maps when X is dense aligned rows or a convolution's input with
// C a multiple of 64, else all 128 with cp.async)
// and hands each over through a "full" shared-memory barrier; the multiplying warpgroups hand it
// back through an "empty" one and keep one wgmma batch in flight. Operand layout:
// linear/op/sparse24_linear.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cuda.h>
#include <cuda/ptx>

#include <cstdint>
#include <type_traits>

#include "sdnn/core/config.hpp"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/linear/arch/mma_sp.cuh"
#include "sdnn/linear/arch/staged_store.cuh"
#include "sdnn/linear/arch/tc_tma_x.cuh"
#include "sdnn/linear/arch/tc_x_operand.cuh"

namespace sdnn::kernels {

// The padding the plan applies and the kernel relies on.
inline constexpr int sparse24_m_align = 256;  // M padded to this: every BM divides it, A loads stay in bounds
inline constexpr int sparse24_k_align = 128;  // K padded to this: every BK divides it, no partial A tile
// A convolution's input goes through an im2col tensor map (warp-specialized tiles, BK = 64) where C
// is a multiple of this: a step's columns are then one tap's channels.
inline constexpr int sparse24_im2col_channels = 64;

// Arguments of one launch (built by the plan). Work units: whole tiles first, then the tiles of the
// last partial wave split along K; each split writes a float partial, and the last split of a tile to
// finish (elected by an atomic counter) adds them in split order: deterministic.
struct sparse24_args {
  void const* values = nullptr;          // [m_pad x k_pad/2] of T: W's kept values, row-major (row = k_pad bytes)
  std::uint32_t const* meta = nullptr;   // [m_pad/16][k_pad/64][32] metadata words (sparse24_meta_lane order)
  void* y = nullptr;                     // [n x y_ld] of Out, row-major
  std::int64_t y_ld = 0;                 // elements
  bool y_vec = false;                    // Y stored in 16-byte pieces (staged_rows_vec)
  int m = 0, n = 0, k = 0;               // logical extents: W is m x k, X is n x k
  int k_pad = 0;                         // K rounded up to sparse24_k_align (0 when k == 0)
  int n_tiles = 0;                       // ceil(n / BN); tile t covers m tile t / n_tiles, n tile t % n_tiles
  int full_tiles = 0;                    // units [0, full_tiles): tile = unit, all of K
  int splits = 1;                        // units past full_tiles: tile full_tiles + v / splits, split v % splits
  int k_tiles_per_split = 0;             // BK steps per split, of ceil(k / BK) (the last may have fewer, never 0)
  float* partial = nullptr;              // [(tiles - full_tiles) * splits][BM * BN] (splits > 1)
  int* counters = nullptr;               // [tiles - full_tiles]: 0 before the launch, 0 again after it
  basic_epilogue<float> epi{};           // bias indexed by the output feature m (a device pointer)
};

namespace sp_detail {

// Physical 16-byte chunk of logical chunk c in a row of a shared tile whose rows have
// ChunksPerRow chunks: an XOR swizzle under which the 8 rows read by one ldmatrix phase (rows
// r0..r0+7, r0 a multiple of 8, same logical chunk) fall in 8 different 16-byte bank groups.
template <int ChunksPerRow>
__device__ __forceinline__ int swizzle(int row) {
  static_assert(ChunksPerRow == 4 || ChunksPerRow >= 8, "swizzle: 64-byte rows or multiples of 128 bytes");
  if constexpr (ChunksPerRow >= 8) return row & 7;
  else return (row >> 1) & 3;  // 64-byte rows: two rows share a 128-byte bank line
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Spins until the phase of bar with this parity has completed (acquire: what the arrivals
// released is visible afterwards).
__device__ __forceinline__ void mbarrier_wait(std::uint64_t* bar, int parity) {
  while (!cuda::ptx::mbarrier_try_wait_parity(bar, static_cast<std::uint32_t>(parity))) {
  }
}
#endif

}  // namespace sp_detail

// The X tile of a stage as an X operand fills it (tc_x_operand.cuh): BN rows of BK entries, the
// 16-byte pieces of row r XOR-swizzled as ldmatrix and wgmma read them.
template <class Tile>
struct sparse24_x_cfg {
  static constexpr int BK = Tile::bk, BN = Tile::bn, threads = Tile::load_threads;
  struct x_layout {
    __device__ static int at(int r, int c) {
      return r * BK + (((c >> 3) ^ sp_detail::swizzle<BK / 8>(r)) << 3);
    }
  };
};

// The operands of a warp-specialized tile as tensor maps (core/tma.cuh, linear/arch/tc_tma_x.cuh),
// taking the place of the X operand: one thread then copies a whole stage with three
// cp.async.bulk.tensor. a: W's values ([m_pad][k_pad/2] 16-bit, boxes of BM rows x 32, the 64-byte
// swizzle of the A stage); e: its metadata ([m_pad/16][k_pad/2] words, boxes of BM/16 x 32); x: X,
// boxes of BN rows x 64 columns with the 128-byte swizzle, zeros past n and k: dense rows
// (tc_tma_rows_x) or a convolution's NHWC input as its im2col matrix (tc_tma_im2col_x, C a
// multiple of 64 so that a stage's 64 columns lie in one tap).
template <class XMap>
struct sparse24_tma {
  CUtensorMap a, e;
  XMap x;
};
using sparse24_tma_x = sparse24_tma<tc_tma_rows_x>;
template <class XSrc>
inline constexpr bool is_sparse24_tma_x_v = false;
template <class XMap>
inline constexpr bool is_sparse24_tma_x_v<sparse24_tma<XMap>> = true;

// Dynamic shared memory of one CTA: the pipeline, reused by the transposed epilogue tile (float,
// rows of BM + 4, whatever the output type).
template <class Tile>
constexpr int sparse24_smem_bytes() {
  constexpr int epi = Tile::bn * (Tile::bm + 4) * 4;
  return (Tile::pipeline_bytes > epi ? Tile::pipeline_bytes : epi) + Tile::align_bytes;
}

// One CTA per work unit (blockIdx.x); see sparse24_args for the unit order. xs: the N x K X
// operand (n = p.n, K = p.k), e.g. tc_rows_x (16-byte copies when its rows are aligned, 2-byte
// loads otherwise) or tc_im2col_x.
template <class T, class Out, class Tile, class XSrc>
__global__ void __launch_bounds__(Tile::threads, Tile::min_blocks) sparse24_mma_kernel(sparse24_args p,
                                                                                        __grid_constant__ XSrc const xs) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "sparse24_mma_kernel: bf16 or fp16");
  constexpr int BM = Tile::bm, BN = Tile::bn, BK = Tile::bk, STAGES = Tile::stages, THREADS = Tile::threads;
  constexpr int MI = Tile::mi, NI = Tile::ni, WM = Tile::warps_m;
  // Warp-specialized tiles: warps [0, MMA_THREADS / 32) multiply, the last warpgroup loads.
  constexpr bool WS = Tile::warp_specialized;
  constexpr int MMA_THREADS = Tile::mma_threads, LOAD_THREADS = Tile::load_threads;
  constexpr bool TMA = is_sparse24_tma_x_v<XSrc>;  // one thread loads a stage through tensor maps
  static_assert(!TMA || WS, "sparse24_mma_kernel: tensor-map operands need a warp-specialized tile");
  constexpr int A_PITCH = BK, B_PITCH = 2 * BK;              // bytes per shared row: BK/2 values, BK X entries
  constexpr int A_ROW_CHUNKS = A_PITCH / 16, B_ROW_CHUNKS = B_PITCH / 16;
  constexpr int KB = BK / 64;                                // 16 x 64 metadata blocks per 16 rows per stage
  constexpr int A_CHUNKS = BM * A_ROW_CHUNKS, E_CHUNKS = BM / 16 * KB * 8;
  constexpr int A_ROUNDS = (A_CHUNKS + LOAD_THREADS - 1) / LOAD_THREADS;
  using XCfg = sparse24_x_cfg<Tile>;
  static_assert(B_ROW_CHUNKS == BK / 8, "sparse24_mma_kernel: X rows of BK 16-bit entries");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ int is_last_split;
  // wgmma tiles: the pipeline starts at a 1024-byte boundary (align_bytes of slack were allocated).
  unsigned char* smem = smem_raw;
  if constexpr (Tile::align_bytes > 0)
    smem += (Tile::align_bytes - (sp_detail::smem_addr(smem_raw) & (Tile::align_bytes - 1))) & (Tile::align_bytes - 1);

  int const tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  int const wm = warp % WM, wn = warp / WM;
  bool const is_loader = WS && tid >= MMA_THREADS, is_mma = !WS || tid < MMA_THREADS;
  int const ltid = WS ? (is_loader ? tid - MMA_THREADS : 0) : tid;  // the thread's index among the loaders

  // The unit: a tile and a range of BK steps.
  int const unit = static_cast<int>(blockIdx.x);
  // BK steps up to K: a step wholly in K's padding would multiply zeros (padded values, zero-filled
  // X). Every sum starts at +0, which adding +0 leaves unchanged, so skipping it keeps the bits.
  int const k_tiles = (p.k + BK - 1) / BK;
  int tile, split = 0, kt_begin = 0, kt_end = k_tiles;
  bool const is_split = unit >= p.full_tiles;
  if (is_split) {
    int const v = unit - p.full_tiles;
    tile = p.full_tiles + v / p.splits;
    split = v % p.splits;
    kt_begin = split * p.k_tiles_per_split;
    kt_end = min(k_tiles, kt_begin + p.k_tiles_per_split);
  } else {
    tile = unit;
  }
  int const m0 = (tile / p.n_tiles) * BM, n0 = (tile % p.n_tiles) * BN;
  int const nk = kt_end - kt_begin;

  auto const* vals = static_cast<unsigned char const*>(p.values) + static_cast<std::int64_t>(m0) * p.k_pad;
  std::uint32_t const* meta = p.meta + static_cast<std::int64_t>(m0 / 16) * (p.k_pad / 64) * 32;
  auto const xstate = [&] {
    if constexpr (TMA) return 0;
    else return xs.template start<XCfg>(n0, p.n, ltid);
  }();

  // Stage s: [A: BM rows x A_PITCH][E: BM/16 x KB blocks x 128 bytes][B: BN rows x B_PITCH].
  auto stage_a = [&](int s) { return smem + s * Tile::stage_bytes; };
  auto stage_e = [&](int s) { return smem + s * Tile::stage_bytes + Tile::a_stage_bytes; };
  auto stage_b = [&](int s) { return smem + s * Tile::stage_bytes + Tile::a_stage_bytes + Tile::e_stage_bytes; };

  auto load_stage = [&](int s, int kt) {  // the cp.async loaders (tensor maps: see the warp-specialized loop)
    std::uint32_t const sa = sp_detail::smem_addr(stage_a(s));
#pragma unroll
    for (int i = 0; i < A_ROUNDS; ++i) {
      int const c = ltid + i * LOAD_THREADS, r = c / A_ROW_CHUNKS, j = c % A_ROW_CHUNKS;
      if (A_CHUNKS % LOAD_THREADS != 0 && c >= A_CHUNKS) break;
      // Rows m0 + r < m_pad and bytes kt * BK + 16 j + 16 <= k_pad: in bounds by the padding.
      sp_detail::cp_async_16(sa + r * A_PITCH + ((j ^ sp_detail::swizzle<A_ROW_CHUNKS>(r)) << 4),
                             vals + static_cast<std::int64_t>(r) * p.k_pad + kt * BK + j * 16, 16);
    }
    std::uint32_t const se = sp_detail::smem_addr(stage_e(s));
    for (int c = ltid; c < E_CHUNKS; c += LOAD_THREADS) {
      int const blk = c >> 3, q = c & 7, mb = blk / KB, kb = blk % KB;
      sp_detail::cp_async_16(se + (c << 4),
                             meta + (static_cast<std::int64_t>(mb) * (p.k_pad / 64) + kt * KB + kb) * 32 + q * 4, 16);
    }
    if constexpr (!TMA) xs.template issue<XCfg>(xstate, kt * BK, p.k, reinterpret_cast<std::uint16_t*>(stage_b(s)), ltid);
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;

  // Per-lane parts of the ldmatrix addresses. A (m16 x 16 kept values = 2 chunks per row):
  // matrices (rows 0-7, chunk 0), (rows 8-15, chunk 0), (rows 0-7, chunk 1), (rows 8-15, chunk 1)
  // give a[0..3]. B (8 X rows x 32 K = 4 chunks per row): matrix i is chunk i, giving b[i].
  // Tile row bases are multiples of 8, so the swizzle depends on the lane only.
  int const a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_chunk = lane >> 4;
  int const a_swz = sp_detail::swizzle<A_ROW_CHUNKS>(a_row);
  int const b_row = lane & 7, b_chunk = lane >> 3, b_swz = sp_detail::swizzle<B_ROW_CHUNKS>(b_row);
  int const warp_m0 = wm * Tile::warp_m, warp_n0 = wn * Tile::warp_n;
  // First W row of the warp's m16 slice i: consecutive in the warp's rows, except on
  // warp-specialized tiles with two slices a warpgroup, where slice i of warpgroup g is the
  // wgmma's 64-row block 2 g + i and the warp its 16 rows (warp % 4).
  auto slice_row0 = [&](int i) {
    if constexpr (WS && MI > 1) return (warp / 4) * 64 * MI + 64 * i + 16 * (warp % 4);
    else return warp_m0 + 16 * i;
  };

  auto compute_stage = [&](int s) {
    std::uint32_t const sa = sp_detail::smem_addr(stage_a(s)), sb = sp_detail::smem_addr(stage_b(s));
    auto const* se = reinterpret_cast<std::uint32_t const*>(stage_e(s));
    if constexpr (Tile::wgmma) {
      // The warp's 16 rows of A for both k32 steps, its metadata word, then one wgmma.sp per k32
      // step for the warpgroup's 64 rows x BN, B read from the stage by descriptor; waited for
      // before the stage is refilled.
      static_assert((WS || MI == 1) && BK == 64, "wgmma tiles: one m16 slice per warp, BK 64");  // WS: not run
      std::uint32_t a[2][4];
#pragma unroll
      for (int ks = 0; ks < 2; ++ks) {
        int const r = warp_m0 + a_row;
        sp_detail::ldmatrix_x4(a[ks], sa + r * A_PITCH + (((2 * ks + a_chunk) ^ a_swz) << 4));
      }
      std::uint32_t const ew = se[(warp_m0 >> 4) * KB * 32 + lane];
      std::uint64_t const desc = sp_detail::wgmma_desc_sw128(sb);
      auto& d = reinterpret_cast<float(&)[NI * 4]>(acc[0]);
      sp_detail::fence_operands(d);
      sp_detail::wgmma_fence();
      wgmma_sp_m64k32<T, BN, 0>(d, a[0], desc, ew);
      wgmma_sp_m64k32<T, BN, 1>(d, a[1], desc + (64 >> 4), ew);
      sp_detail::wgmma_commit();
      sp_detail::wgmma_wait<0>();
      sp_detail::fence_operands(d);
    } else {
      std::uint32_t e[MI];
#pragma unroll
      for (int ks = 0; ks < BK / 32; ++ks) {
        std::uint32_t a[MI][4], b[NI][4];
#pragma unroll
        for (int i = 0; i < MI; ++i) {
          int const r = warp_m0 + i * 16 + a_row;
          sp_detail::ldmatrix_x4(a[i], sa + r * A_PITCH + (((2 * ks + a_chunk) ^ a_swz) << 4));
          // One metadata word per lane covers two k32 steps (selector = ks % 2).
          if (ks % 2 == 0) e[i] = se[(((warp_m0 >> 4) + i) * KB + ks / 2) * 32 + lane];
        }
#pragma unroll
        for (int j = 0; j < NI; ++j) {
          int const r = warp_n0 + j * 8 + b_row;
          sp_detail::ldmatrix_x4(b[j], sb + r * B_PITCH + (((4 * ks + b_chunk) ^ b_swz) << 4));
        }
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
          for (int j = 0; j < NI; ++j) {
            if (ks % 2 == 0) mma_sp_16832<T, 0>(acc[i][j], a[i], b[j], e[i]);
            else mma_sp_16832<T, 1>(acc[i][j], a[i], b[j], e[i]);
          }
      }
    }
  };

  if constexpr (WS) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    static_assert(Tile::wgmma && MI <= 2 && BK == 64, "warp-specialized tiles: wgmma, one or two 64-row slices a warpgroup, BK 64");
    // full[s] completes when stage s has landed (one arrival per loading thread, or the tensor-map
    // thread's one arrival and the stage's bytes), empty[s] when every multiplying warp is done
    // with it (one arrival per warp).
    __shared__ std::uint64_t full[STAGES], empty[STAGES];
    if (tid == 0) {
      for (int s = 0; s < STAGES; ++s) {
        cuda::ptx::mbarrier_init(&full[s], TMA ? 1 : LOAD_THREADS);
        cuda::ptx::mbarrier_init(&empty[s], MMA_THREADS / 32);
      }
    }
    __syncthreads();
    if (is_loader) {
      if constexpr (Tile::load_regs > 0) sp_detail::setmaxnreg_dec<Tile::load_regs>();
      if constexpr (TMA) {
        // One thread: the stage's bytes announced on full, then the three copies that complete
        // them. Stage i reuses the buffer of stage i - STAGES once its empty phase completed.
        if (ltid == 0) {
          int4 const pix = tma_detail::x_start(xs.x, n0);
          for (int i = 0; i < nk; ++i) {
            int const s = i % STAGES, kt = kt_begin + i;
            if (i >= STAGES) sp_detail::mbarrier_wait(&empty[s], (i / STAGES - 1) & 1);
            cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                                 &full[s], static_cast<std::uint32_t>(Tile::stage_bytes));
            std::int32_t const ca[2] = {kt * (BK / 2), m0}, ce[2] = {kt * (BK / 2), m0 / 16};
            cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, stage_a(s), &xs.a, ca,
                                            &full[s]);
            cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, stage_e(s), &xs.e, ce,
                                            &full[s]);
            tma_detail::copy_x(xs.x, stage_b(s), &full[s], kt * BK, n0, pix);
          }
        }
      } else {
        // Stage i reuses the buffer of stage i - STAGES once every multiplying warp arrived on its
        // empty barrier; each loading thread's arrival on full is triggered when its copies of the
        // stage have landed (cp.async.mbarrier.arrive.noinc: counted in full's LOAD_THREADS). No
        // fence between these writes and wgmma's reads, as in CUTLASS's cp.async-fed wgmma
        // mainloops; plain shared stores (an X operand without 16-byte copies) are fenced by their
        // writer. No deadlock: the empty arrival for stage i - STAGES comes with the multiplication
        // of stage i - STAGES + 1, whose full arrival was issued at iteration i - STAGES + 1 < i.
        for (int i = 0; i < nk; ++i) {
          int const s = i % STAGES;
          if (i >= STAGES) sp_detail::mbarrier_wait(&empty[s], (i / STAGES - 1) & 1);
          load_stage(s, kt_begin + i);
          if (!xs.vec) sp_detail::fence_proxy_async_shared();
          cuda::ptx::cp_async_mbarrier_arrive_noinc(&full[s]);
        }
      }
      if constexpr (Tile::load_regs > 0) sp_detail::setmaxnreg_inc<Tile::launch_regs>();  // for the epilogue
    } else {
      // Two register sets for A and the metadata, alternating by stage: wgmma reads them
      // asynchronously, so stage i's must stay untouched until its batch completes (the
      // wait_group 1 of stage i + 1). MI 64-row slices a warpgroup, one wgmma each per k32.
      if constexpr (Tile::mma_regs > 0) sp_detail::setmaxnreg_inc<Tile::mma_regs>();
      std::uint32_t a[2][MI][2][4] = {}, ew[2][MI] = {};
      auto step = [&](int i, auto buf) {
        constexpr int b = decltype(buf)::value;
        int const s = i % STAGES;
        sp_detail::mbarrier_wait(&full[s], (i / STAGES) & 1);
        std::uint32_t const sa = sp_detail::smem_addr(stage_a(s)), sb = sp_detail::smem_addr(stage_b(s));
#pragma unroll
        for (int sl = 0; sl < MI; ++sl) {
#pragma unroll
          for (int ks = 0; ks < 2; ++ks)
            sp_detail::ldmatrix_x4(a[b][sl][ks],
                                   sa + (slice_row0(sl) + a_row) * A_PITCH + (((2 * ks + a_chunk) ^ a_swz) << 4));
          ew[b][sl] = reinterpret_cast<std::uint32_t const*>(stage_e(s))[(slice_row0(sl) >> 4) * KB * 32 + lane];
        }
        std::uint64_t const desc = sp_detail::wgmma_desc_sw128(sb);
#pragma unroll
        for (int sl = 0; sl < MI; ++sl) sp_detail::fence_operands(reinterpret_cast<float(&)[NI * 4]>(acc[sl]));
        sp_detail::wgmma_fence();
#pragma unroll
        for (int sl = 0; sl < MI; ++sl) {
          auto& d = reinterpret_cast<float(&)[NI * 4]>(acc[sl]);
          wgmma_sp_m64k32<T, BN, 0>(d, a[b][sl][0], desc, ew[b][sl]);
          wgmma_sp_m64k32<T, BN, 1>(d, a[b][sl][1], desc + (64 >> 4), ew[b][sl]);
        }
        sp_detail::wgmma_commit();
        sp_detail::wgmma_wait<1>();  // stage i - 1's batch is done: its stage goes back to the loaders
#pragma unroll
        for (int sl = 0; sl < MI; ++sl) sp_detail::fence_operands(reinterpret_cast<float(&)[NI * 4]>(acc[sl]));
        if (i > 0 && lane == 0) cuda::ptx::mbarrier_arrive(&empty[(i - 1) % STAGES]);
      };
      for (int i = 0; i < nk; i += 2) {
        step(i, std::integral_constant<int, 0>{});
        if (i + 1 < nk) step(i + 1, std::integral_constant<int, 1>{});
      }
      sp_detail::wgmma_wait<0>();
#pragma unroll
      for (int sl = 0; sl < MI; ++sl) sp_detail::fence_operands(reinterpret_cast<float(&)[NI * 4]>(acc[sl]));
      // Back to the launch's registers for the epilogue, which both roles run.
      if constexpr (Tile::mma_regs > 0) sp_detail::setmaxnreg_dec<Tile::launch_regs>();
    }
    __syncthreads();  // every stage consumed: shared memory is free for the epilogue tile
#else
    __trap();  // compiled without sm_90a: the plan never selects these tiles then
#endif
  } else {
    // Pipeline. Invariant at the top of iteration i: STAGES - 1 + i groups committed by every
    // thread (empty ones included), so wait<STAGES - 2> leaves stage i complete for this thread and
    // the barrier makes it complete for all; the barrier also retires every read of stage
    // (i - 1) % STAGES, which iteration i refills.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < nk) load_stage(s, kt_begin + s);
      sp_detail::cp_async_commit();
    }
    for (int i = 0; i < nk; ++i) {
      sp_detail::cp_async_wait<STAGES - 2>();
      if constexpr (Tile::wgmma) sp_detail::fence_proxy_async_shared();  // this thread's writes, then wgmma's reads
      __syncthreads();
      int const next = i + STAGES - 1;
      if (next < nk) load_stage(next % STAGES, kt_begin + next);
      sp_detail::cp_async_commit();
      compute_stage(i % STAGES);
    }
    sp_detail::cp_async_wait<0>();
    __syncthreads();  // shared memory is free for the epilogue tile
  }

  if (is_split && p.splits > 1) {
    // Partial of this split, in fragment order: every CTA of the tile writes and reads the same
    // positions with the same thread, so the sum below needs no shared memory.
    int const slot0 = (tile - p.full_tiles) * p.splits;
    auto* mine = reinterpret_cast<float4*>(p.partial + static_cast<std::int64_t>(slot0 + split) * BM * BN);
    if (is_mma)
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
          __stcg(mine + (i * NI + j) * MMA_THREADS + tid,
                 make_float4(acc[i][j][0], acc[i][j][1], acc[i][j][2], acc[i][j][3]));
    __threadfence();
    __syncthreads();
    if (tid == 0) is_last_split = atomicAdd(p.counters + (tile - p.full_tiles), 1) == p.splits - 1;
    __syncthreads();
    if (!is_last_split) return;
    __threadfence();
    // Sum in split order 0, 1, ..., whichever CTA finished last: the same bits on every run. Each
    // split's partial is read whole (MI x NI independent loads a thread) before the next: a tile
    // split 9 ways waits 9 round trips, not MI x NI x 9.
    if (is_mma) {
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
          for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;
      for (int q = 0; q < p.splits; ++q) {
        auto const* part =
            reinterpret_cast<float4 const*>(p.partial + static_cast<std::int64_t>(slot0 + q) * BM * BN) + tid;
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
          for (int j = 0; j < NI; ++j) {
            float4 const v = __ldcg(part + (i * NI + j) * MMA_THREADS);
            acc[i][j][0] += v.x, acc[i][j][1] += v.y, acc[i][j][2] += v.z, acc[i][j][3] += v.w;
          }
      }
    }
    if (tid == 0) p.counters[tile - p.full_tiles] = 0;  // ready for the next launch (stream order)
  }

  // Epilogue: the accumulators staged transposed (Y rows = n) in shared memory as float, then
  // finished by epi, rounded once to Out and stored as 16-byte row segments by every thread
  // (store_staged_float_rows). Accumulator (i, j, c) is W row (m) slice_row0(i) + lane / 4 +
  // 8 (c / 2) and X row (n) warp_n0 + 8 j + 2 (lane % 4) + c % 2. Pitch BM + 4 floats: rows stay
  // 16-byte aligned, and a warp's 32 stores (8 rows m x 4 rows n) fall in 32 different banks.
  constexpr int Y_PITCH = BM + 4;
  float* const sy = reinterpret_cast<float*>(smem);
  if (is_mma)
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < NI; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          int const ml = slice_row0(i) + (lane >> 2) + 8 * (c >> 1);
          int const nl = warp_n0 + j * 8 + 2 * (lane & 3) + (c & 1);
          sy[nl * Y_PITCH + ml] = acc[i][j][c];
        }
  __syncthreads();
  store_staged_float_rows<BN, BM>(sy, Y_PITCH, static_cast<Out*>(p.y), p.y_ld, n0, m0, p.n, p.m, p.y_vec, p.epi, tid,
                                  THREADS);
}

}  // namespace sdnn::kernels
