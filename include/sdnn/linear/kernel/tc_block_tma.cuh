// sdnn/linear/kernel/tc_block_tma.cuh - the block-sparse tensor-core kernel for many X rows (sm_90):
//
//   Y[N x M] = epi(X[N x K] * W^T), W in BR x 32 blocks, X as the mma A operand (rows = batch rows
//   or a convolution's output pixels), a W block as the B operand
//
// A thread block owns BX rows of X and one block row of W (BR output features) and runs over that
// row's stored blocks only. One producer thread copies each stage with the tensor memory
// accelerator: the W block (its swizzled 16-byte pieces, verbatim, through a tensor map over the
// stored blocks) and the X tile of the block's 32 columns (a 2-D tensor map over dense rows, or an
// im2col tensor map over a convolution's NHWC input: tc_tma_rows_x, tc_tma_im2col_x), and hands it
// over through a "full" shared-memory barrier; the multiplying warps (mma.sync m16n8k16, ldmatrix)
// hand it back through an "empty" one. No K split: each output is one thread's sum in block order
// (deterministic). Y leaves through shared memory in 16-byte pieces; with Pool (a convolution)
// each thread block's rows are whole 2x2 pooling windows and Y leaves pooled. Operand layout and
// the checks the plan makes before a launch: linear/op/tc_linear.cuh.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cuda/ptx>

#include <cstdint>
#include <type_traits>

#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/numeric.cuh"
#include "sdnn/linear/arch/mma.cuh"
#include "sdnn/linear/arch/staged_store.cuh"
#include "sdnn/linear/arch/tc_tma_x.cuh"
#include "sdnn/linear/kernel/tc_stream.cuh"

namespace sdnn::kernels {

// The 2x2 stride-2 max-pool fused into the kernel (Pool): a thread block's X rows are whole
// pooling windows of the convolution's output (oh x ow pixels an image). Either a tile is `pairs`
// row pairs of whole output rows, one box of bx pixels from pixel (b, 2 pairs g, 0) (where
// 2 ow <= bx), or (`split`) one row pair from column w0 = c bx / 2: two boxes of bx / 2 pixels
// from (b, 2p, w0) and (b, 2p + 1, w0), the second in the stage's lower half. Pixels a box reads
// past the rows it is for are multiplied and dropped. Tile t: c = t % tiles_w, the tile row
// g = t / tiles_w % tiles_h, the image t / (tiles_w tiles_h).
struct tc_tma_pool {
  std::int32_t oh = 0, ow = 0;  // the convolution's output, before the pool
  std::int32_t pairs = 1;       // output row pairs a tile (1 when split)
  std::int32_t tiles_w = 1;     // tiles across a row pair: ceil(ow / (bx / 2)) when split, else 1
  std::int32_t tiles_h = 0;     // tiles down an image: ceil((oh / 2) / pairs)
  bool split = false;
};

// The pooled tiling of oh x ow outputs with bx rows a tile: whole rows where two fit a tile
// (balanced: the same number of row pairs in every tile of an image but the last), else split.
inline tc_tma_pool make_tc_tma_pool(int oh, int ow, int bx) {
  tc_tma_pool q;
  q.oh = oh;
  q.ow = ow;
  int const ph = oh / 2;
  if (ph == 0 || ow / 2 == 0) return q;  // no pooled output: no tile
  if (2 * ow <= bx) {
    int const most = bx / (2 * ow);
    q.tiles_h = (ph + most - 1) / most;
    q.pairs = (ph + q.tiles_h - 1) / q.tiles_h;
  } else {
    q.split = true;
    q.tiles_w = (ow + bx / 2 - 1) / (bx / 2);
    q.tiles_h = ph;
  }
  return q;
}

template <class T>
struct tc_block_tma_params {
  CUtensorMap w;                          // the stored blocks as nnzb * BR rows of 64 bytes (16-byte
                                          // pieces swizzled: tc_swizzle16), boxes of BR rows, no swizzle
  std::int32_t const* row_ptr = nullptr;  // [row_blocks + 1]
  std::int32_t const* col_idx = nullptr;  // [nnzb]
  void* y = nullptr;                      // [n x y_ld] of Out
  std::int64_t y_ld = 0;
  bool y_vec = false;                     // y stored in 16-byte pieces (staged_rows_vec)
  std::int32_t m = 0, n = 0;              // W rows (output features), X rows
  std::int32_t row_blocks = 0;            // ceil(m / BR): unit u is block row u % row_blocks,
                                          // X tile u / row_blocks (the block rows of a tile together)
  basic_epilogue<float> epi{};
  tc_tma_pool pool{};  // Pool kernels: the tiling; y is then the pooled output, (b, ph, pw) at row
                       // (b * (oh / 2) + ph) * (ow / 2) + pw
};

namespace tma_detail {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void wait(std::uint64_t* bar, int parity) {
  while (!cuda::ptx::mbarrier_try_wait_parity(bar, static_cast<std::uint32_t>(parity))) {
  }
}
#endif

// The multiplying warps (warps 0 .. Warps - 1) meet at named barrier 1; the producer warp never does.
template <int Warps>
__device__ __forceinline__ void sync_mma_warps() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(Warps * 32) : "memory");
}
}  // namespace tma_detail

// One thread block per unit (blockIdx.x; see tc_block_tma_params for the order). Cfg:
// policy::tc_block_tma_tile. Pool: the fused 2x2 max-pool (tc_tma_pool; an im2col operand whose
// map's boxes are bx / 2 pixels when the tiling is split, bx otherwise).
template <class Cfg, class T, class Out, class XSrc, bool Pool = false>
__global__ void __launch_bounds__(Cfg::threads) tc_block_tma_kernel(__grid_constant__ tc_block_tma_params<T> const p,
                                                                    __grid_constant__ XSrc const xs) {
  static_assert(is_16bit_float_v<T>, "tc_block_tma_kernel: T must be sdnn::bf16 or sdnn::fp16");
  static_assert(is_tc_tma_x_v<XSrc>, "tc_block_tma_kernel: X through a tensor map");
  static_assert(!Pool || std::is_same_v<XSrc, tc_tma_im2col_x>, "tc_block_tma_kernel: the pool needs a convolution");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int BR = Cfg::br, BX = Cfg::bx, STAGES = Cfg::stages, WARPS = Cfg::mma_warps;
  constexpr int MI = Cfg::mi, NJ = Cfg::nj;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ std::uint64_t full[STAGES], empty[STAGES];
  unsigned char* const smem = smem_raw + ((1024 - (mma::smem_addr(smem_raw) & 1023)) & 1023);
  auto stage_x = [&](int s) { return smem + s * Cfg::stage_bytes; };
  auto stage_w = [&](int s) { return smem + s * Cfg::stage_bytes + Cfg::x_stage_bytes; };

  int const tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  int const unit = static_cast<int>(blockIdx.x);
  int const rb = unit % p.row_blocks, m0 = rb * BR;
  int const b0 = p.row_ptr[rb], nk = p.row_ptr[rb + 1] - b0;
  // The tile's first X row (Pool: its first box's; x1 the second box's when split) and, with Pool,
  // its image, first output row and first column.
  int x0 = 0, x1 = 0, img = 0, oh0 = 0, w0 = 0;
  if constexpr (Pool) {
    int const t = unit / p.row_blocks, tw = p.pool.tiles_w, th = p.pool.tiles_h;
    img = t / (tw * th);
    oh0 = 2 * p.pool.pairs * (t / tw % th);
    w0 = t % tw * (BX / 2);
    x0 = (img * p.pool.oh + oh0) * p.pool.ow + w0;
    x1 = x0 + p.pool.ow;
  } else {
    x0 = (unit / p.row_blocks) * BX;
  }

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      cuda::ptx::mbarrier_init(&full[s], 1);
      cuda::ptx::mbarrier_init(&empty[s], WARPS);
    }
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  __syncthreads();

  // Stage i lives in buffer i % STAGES; its full and empty barriers complete their (i / STAGES)-th
  // phase when it has landed and when every multiplying warp has read it.
  if (warp == WARPS) {
    // The producer: stage i reuses the buffers of stage i - STAGES once that one's empty phase
    // completed; the block's column is read one stage ahead.
    if (lane == 0) {
      int4 const pix = tma_detail::x_start(xs, x0);
      int4 const pix1 = Pool ? tma_detail::x_start(xs, x1) : pix;
      int col = nk > 0 ? p.col_idx[b0] : 0;
      for (int i = 0; i < nk; ++i) {
        int const s = i % STAGES, next = i + 1 < nk ? p.col_idx[b0 + i + 1] : 0;
        if (i >= STAGES) tma_detail::wait(&empty[s], (i / STAGES - 1) & 1);
        cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                             &full[s], static_cast<std::uint32_t>(Cfg::stage_bytes));
        std::int32_t const cw[2] = {0, (b0 + i) * BR};
        cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, stage_w(s), &p.w, cw,
                                        &full[s]);
        if (Pool && p.pool.split) {  // two boxes of BX / 2 pixels (the map's box), one a row
          tma_detail::copy_x(xs, stage_x(s), &full[s], col * 32, x0, pix);
          tma_detail::copy_x(xs, stage_x(s) + (BX / 2) * 64, &full[s], col * 32, x1, pix1);
        } else {
          tma_detail::copy_x(xs, stage_x(s), &full[s], col * 32, x0, pix);
        }
        col = next;
      }
    }
  } else {
    // ldmatrix rows of this lane. A (X, m16 x k16, row-major): matrices (rows 0-7, k 0-7), (rows
    // 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15); in the 64-byte swizzle, 16-byte chunk
    // q of row r sits at chunk q ^ ((r / 2) % 4). B (a W block's 8 rows x 32 columns): matrix q is
    // chunk q, so registers (0, 1) serve k16 step 0 and (2, 3) step 1; piece r * 4 + q of a block
    // sits at tc_swizzle16 of it.
    int const a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_half = lane >> 4;
    int const wrow0 = warp * Cfg::warp_rows;
    int const b_row = lane & 7, b_chunk = lane >> 3;
    float acc[MI][NJ][4];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < NJ; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;

    for (int i = 0; i < nk; ++i) {
      int const s = i % STAGES;
      tma_detail::wait(&full[s], (i / STAGES) & 1);
      unsigned char const* sx = stage_x(s);
      unsigned char const* sw = stage_w(s);
      std::uint32_t b[NJ][4];
#pragma unroll
      for (int j = 0; j < NJ; ++j) mma::ldmatrix_x4(b[j], sw + 16 * tc_swizzle16((8 * j + b_row) * 4 + b_chunk));
#pragma unroll
      for (int ks = 0; ks < 2; ++ks) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          int const r = wrow0 + 16 * mi + a_row;
          std::uint32_t a[4];
          mma::ldmatrix_x4(a, sx + r * 64 + (((2 * ks + a_half) ^ ((r >> 1) & 3)) << 4));
#pragma unroll
          for (int j = 0; j < NJ; ++j) mma::mma_m16n8k16<T>(acc[mi][j], a, b[j][2 * ks], b[j][2 * ks + 1]);
        }
      }
      __syncwarp();
      if (lane == 0) cuda::ptx::mbarrier_arrive(&empty[s]);
    }

    // Epilogue: accumulator (mi, j, c) is X row x0 + wrow0 + 16 mi + lane / 4 + 8 (c / 2) and
    // output feature m0 + 8 j + 2 (lane % 4) + c % 2. The epilogue runs on the accumulators (this
    // lane's biases read once), the warp's rows go through shared memory as Out, and leave in
    // 16-byte pieces. The stages are free once every multiplying warp has left the main loop (all
    // copies landed: each warp waited on every stage's full barrier).
    float col_bias[NJ][2];
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        int const col = m0 + 8 * j + 2 * (lane & 3) + e;
        col_bias[j][e] = col < p.m ? p.epi.bias_at(col) : 0.0f;
      }
    tma_detail::sync_mma_warps<WARPS>();
    constexpr int PITCH = Cfg::out_pitch;
    Out* const sy = reinterpret_cast<Out*>(smem) + wrow0 * PITCH;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        Out* const syr = sy + (16 * mi + (lane >> 2) + 8 * h) * PITCH;
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
          float const v0 = p.epi.apply(acc[mi][j][2 * h], col_bias[j][0]);
          float const v1 = p.epi.apply(acc[mi][j][2 * h + 1], col_bias[j][1]);
          Out* const at = syr + 8 * j + 2 * (lane & 3);
          if constexpr (std::is_same_v<Out, float>) *reinterpret_cast<float2*>(at) = make_float2(v0, v1);
          else *reinterpret_cast<unsigned*>(at) = pack2_float<Out>(v0, v1);
        }
      }
    __syncwarp();
    if constexpr (Pool) {
      // Every warp's rows are staged (the tile from smem on, row r at r * PITCH): the window of
      // output (oh0 + dr, w0 + dw) lies at staged row dr * rs + dw.
      tma_detail::sync_mma_warps<WARPS>();
      int const ph = p.pool.oh / 2, pw = p.pool.ow / 2;
      int const rs = p.pool.split ? BX / 2 : p.pool.ow;
      store_pooled_rows<BR>(reinterpret_cast<Out const*>(smem), PITCH, rs, p.pool.split ? 1 : p.pool.pairs,
                            p.pool.split ? BX / 4 : pw, static_cast<Out*>(p.y), p.y_ld, img, oh0 / 2, w0 / 2, ph, pw,
                            m0, p.m, p.y_vec, tid, WARPS * 32);
    } else {
      store_staged_rows<Cfg::warp_rows, BR>(sy, PITCH, static_cast<Out*>(p.y), p.y_ld, x0 + wrow0, m0, p.n, p.m,
                                           p.y_vec, lane, 32);
    }
  }
#else
  __trap();  // compiled for an architecture without tensor maps: the plan never launches it there
#endif
}

}  // namespace sdnn::kernels
