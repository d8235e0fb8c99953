// sdnn/conv/kernel/small_c_conv.cuh - a dense NHWC convolution on mma.sync for layers whose
// reduction R*S*C is short (at most 256: a network's first layer, 3 input channels): each warp
// gathers the im2col rows of 16 output pixels straight into A fragments (2-byte loads, any C),
// multiplies them by the whole filter, kept in shared memory in fragment order, and writes its
// 16 x 64 outputs through shared memory as 16-byte pieces. Such a layer moves few input bytes and
// many output bytes (64 channels per pixel from 3): writing them is its floor. The
// implicit-GEMM tiles (linear/kernel) gather a C below 8 element by element into tiles padded to
// 32 columns a tap and ran VGG's and ResNet's first layers 3.6-8.5x slower (fp16, H100).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/fast_divmod.hpp"
#include "sdnn/core/numeric.cuh"
#include "sdnn/linear/arch/mma.cuh"

namespace sdnn::kernels {

// One reduction index k of the filter's GEMM view (k = (r * S + s) * C + c) as an input offset:
// off = (r * dil_h * W + s * dil_w) * C + c from the pixel's top-left input element, and the tap's
// spatial displacement (dy = r * dil_h, dx = s * dil_w, each below 2^15) for the bounds check.
// The padding of the last 16-wide step (k >= R*S*C) has dy = dx = -2^15: never inside the input.
struct small_c_tap {
  int off;
  short dy, dx;
};

template <class T, class Out>
struct small_c_conv_params {
  T const* x;                 // NHWC, batch x H x W x C
  uint2 const* w;             // [ksteps][K / 8][32 lanes]: each lane's two B registers of n-tile j
  small_c_tap const* taps;    // [ksteps * 16]
  basic_epilogue<float> epi;  // bias (K floats on the device), ReLU, cap: as the linear kernels apply it
  Out* y;                     // NHWC, batch x OH x OW x K
  int H, W, C, K;
  int stride_h, stride_w, pad_h, pad_w;
  int ksteps;  // ceil(R*S*C / 16)
  int pixels;  // batch * OH * OW (< 2^31; with batch * H * W * C and pixels * K)
  fast_divmod div_ow, div_oh;
  int vec;  // y 16-byte aligned: whole 16-byte stores
};

// Shared memory of a CTA of `warps` warps: the weights, the taps, the bias, and each warp's
// output staging of 16 rows x (64 + 8) values (the 8 of padding put the 8 rows a fragment store
// writes at once in different banks).
template <class Out>
constexpr std::size_t small_c_stage_bytes() {
  return 16 * (64 + 8) * sizeof(Out);
}
inline std::size_t small_c_smem_bytes(int ksteps, int K, int warps, std::size_t stage_bytes) {
  return std::size_t(ksteps) * (K / 8) * 32 * sizeof(uint2) + std::size_t(ksteps) * 16 * sizeof(small_c_tap) +
         std::size_t(K) * sizeof(float) + std::size_t(warps) * stage_bytes;
}

#if defined(__CUDACC__)

namespace small_c_detail {
// The lane's two pixels of a tile (rows g and g + 8): the address of their top-left input element
// (the window's corner, outside the input where padded) and its row and column.
struct pixels2 {
  unsigned short const* at[2];
  int ih0[2], iw0[2];
};
template <class T, class Out>
__device__ __forceinline__ pixels2 locate(small_c_conv_params<T, Out> const& p, int tile, int g) {
  pixels2 q;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int const px = tile * 16 + g + 8 * h;
    q.at[h] = reinterpret_cast<unsigned short const*>(p.x);
    if (px < p.pixels) {
      int r, n, oh, ow;
      p.div_ow.divmod(px, r, ow);
      p.div_oh.divmod(r, n, oh);
      q.ih0[h] = oh * p.stride_h - p.pad_h;
      q.iw0[h] = ow * p.stride_w - p.pad_w;
      q.at[h] += ((n * p.H + q.ih0[h]) * p.W + q.iw0[h]) * p.C;
    } else {  // past the last pixel: a corner no tap reaches, so every element gathers 0
      q.ih0[h] = q.iw0[h] = -(1 << 30);
    }
  }
  return q;
}
// The A fragment registers of one 16-wide step: the elements at taps 2t, 2t+1 (registers 0, 1 for
// pixels g, g+8) and 2t+8, 2t+9 (registers 2, 3); 0 where a tap falls in the padding.
__device__ __forceinline__ void gather_step(std::uint32_t (&a)[4], pixels2 const& q, small_c_tap const* tp, int H,
                                            int W) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    small_c_tap const lo = tp[8 * half], hi = tp[8 * half + 1];  // shared by both pixels
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      std::uint32_t vl = 0, vh = 0;
      if (unsigned(q.ih0[h] + lo.dy) < unsigned(H) && unsigned(q.iw0[h] + lo.dx) < unsigned(W))
        vl = __ldg(q.at[h] + lo.off);
      if (unsigned(q.ih0[h] + hi.dy) < unsigned(H) && unsigned(q.iw0[h] + hi.dx) < unsigned(W))
        vh = __ldg(q.at[h] + hi.off);
      a[2 * half + h] = vl | (vh << 16);
    }
  }
}
}  // namespace small_c_detail

// A persistent grid of Warps-warp CTAs; warp w of CTA b takes the 16-pixel tiles
// b * Warps + w, + gridDim.x * Warps, ... A tile's steps go two at a time (both steps' elements
// loaded before either multiplies); the next tile's first two steps are loaded as soon as this
// tile's last mma has read its registers, so they arrive while its outputs are written. Requires
// (the plan checks): K % 8 == 0, sm_80 or newer, dynamic shared memory of
// small_c_smem_bytes(ksteps, K, Warps, small_c_stage_bytes<Out>()). Every output element is
// written once, by one warp, in a fixed order of float adds: the same bits on every run.
template <class T, class Out, int Warps>
__global__ void __launch_bounds__(Warps * 32) small_c_conv_kernel(small_c_conv_params<T, Out> p) {
#if SDNN_MMA_SYNC_ARCH
  extern __shared__ __align__(16) unsigned char smem[];
  int const nt_all = p.K / 8;
  uint2* w_s = reinterpret_cast<uint2*>(smem);
  small_c_tap* tap_s = reinterpret_cast<small_c_tap*>(w_s + std::size_t(p.ksteps) * nt_all * 32);
  float* bias_s = reinterpret_cast<float*>(tap_s + p.ksteps * 16);
  unsigned char* stage_all = reinterpret_cast<unsigned char*>(bias_s + p.K);

  for (int i = threadIdx.x; i < p.ksteps * nt_all * 32; i += Warps * 32) w_s[i] = p.w[i];
  for (int i = threadIdx.x; i < p.ksteps * 16; i += Warps * 32) tap_s[i] = p.taps[i];
  for (int i = threadIdx.x; i < p.K; i += Warps * 32) bias_s[i] = p.epi.bias_at(i);
  __syncthreads();

  int const warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  constexpr int row_bytes = (64 + 8) * int(sizeof(Out));  // a staging row
  constexpr int per16 = 16 / int(sizeof(Out));            // Out values in 16 bytes
  unsigned char* stage = stage_all + std::size_t(warp) * small_c_stage_bytes<Out>();
  int const tiles = (p.pixels + 15) / 16, stride = gridDim.x * Warps;
  // The epilogue as epi.apply computes it; without a cap and with the bias on every output (the
  // layers' case) it is acc + bias + bias_scalar and the ReLU, here without the general flags.
  bool const plain = p.epi.bias_on_zero && !p.epi.has_cap;
  float const bias_scalar = p.epi.bias_scalar;
  bool const relu = p.epi.relu;

  std::uint32_t a[2][4];
  auto gather2 = [&](small_c_detail::pixels2 const& q, int s0) {
    small_c_detail::gather_step(a[0], q, tap_s + s0 * 16 + 2 * t, p.H, p.W);
    if (s0 + 1 < p.ksteps) small_c_detail::gather_step(a[1], q, tap_s + (s0 + 1) * 16 + 2 * t, p.H, p.W);
  };

  int tile = blockIdx.x * Warps + warp;
  small_c_detail::pixels2 q{};
  if (tile < tiles) {
    q = small_c_detail::locate(p, tile, g);
    gather2(q, 0);
  }
  while (tile < tiles) {
    int const next = tile + stride;
    small_c_detail::pixels2 qn = q;
    for (int n0 = 0; n0 < nt_all; n0 += 8) {  // 64 output channels at a time
      int const nt = nt_all - n0 < 8 ? nt_all - n0 : 8;
      float acc[8][4] = {};
      for (int s0 = 0; s0 < p.ksteps; s0 += 2) {
        // Steps 0 and 1 are in registers from before (the prefetch, or the chunk before when the
        // whole reduction is those two steps).
        if (s0 > 0 || (n0 > 0 && p.ksteps > 2)) gather2(q, s0);
#pragma unroll
        for (int u = 0; u < 2; ++u)
          if (s0 + u < p.ksteps) {
            uint2 const* wb = w_s + (std::size_t(s0 + u) * nt_all + n0) * 32 + lane;
#pragma unroll
            for (int j = 0; j < 8; ++j)
              if (j < nt) {
                uint2 const b = wb[j * 32];
                mma::mma_m16n8k16<T>(acc[j], a[u], b.x, b.y);
              }
          }
      }
      if (n0 + 8 >= nt_all && next < tiles) {
        qn = small_c_detail::locate(p, next, g);
        gather2(qn, 0);
      }
      // Epilogue: epi (each column's bias read once: apply(acc, bias_at(col)) == epi(acc, col)),
      // rounding to Out, into the warp's staging rows, then out in 16-byte pieces (a staging row
      // holds one pixel's 8 * nt channels of this chunk).
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (j < nt) {
          int const ch = (n0 + j) * 8 + 2 * t;
          float const b0 = bias_s[ch], b1 = bias_s[ch + 1];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            float v0, v1;
            if (plain) {
              v0 = acc[j][2 * h] + b0 + bias_scalar;
              v1 = acc[j][2 * h + 1] + b1 + bias_scalar;
              if (relu) {
                v0 = v0 < 0.0f ? 0.0f : v0;
                v1 = v1 < 0.0f ? 0.0f : v1;
              }
            } else {
              v0 = p.epi.apply(acc[j][2 * h], b0);
              v1 = p.epi.apply(acc[j][2 * h + 1], b1);
            }
            unsigned char* o = stage + (g + 8 * h) * row_bytes + (j * 8 + 2 * t) * int(sizeof(Out));
            if constexpr (std::is_same_v<Out, float>) *reinterpret_cast<float2*>(o) = make_float2(v0, v1);
            else *reinterpret_cast<unsigned*>(o) = pack2_float<Out>(v0, v1);
          }
        }
      __syncwarp();
      if (nt == 8 && p.vec && p.pixels - tile * 16 >= 16) {
        // A whole chunk of 16 pixels: 64 / per16 pieces a row, 2048 / 16 / 32 = 4 or 8 a lane.
        constexpr int pieces = 64 / per16, rows_per_pass = 32 / pieces;
        int const r0 = lane / pieces, qq = lane % pieces;
        Out* dst = p.y + std::int64_t(tile * 16 + r0) * p.K + n0 * 8 + qq * per16;
        unsigned char const* src = stage + r0 * row_bytes + qq * 16;
#pragma unroll
        for (int m = 0; m < 16 / rows_per_pass; ++m)
          *reinterpret_cast<uint4*>(dst + std::int64_t(m) * rows_per_pass * p.K) =
              *reinterpret_cast<uint4 const*>(src + m * rows_per_pass * row_bytes);
      } else {
        int const row_chunks = nt * 8 / per16;
        for (int i = lane; i < 16 * row_chunks; i += 32) {
          int const r = i / row_chunks, c = i - r * row_chunks, px = tile * 16 + r;
          if (px >= p.pixels) continue;
          unsigned char const* src = stage + r * row_bytes + c * 16;
          Out* dst = p.y + std::int64_t(px) * p.K + n0 * 8 + c * per16;
          if (p.vec) {
            *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<uint4 const*>(src);
          } else {
#pragma unroll
            for (int e = 0; e < per16; ++e) dst[e] = reinterpret_cast<Out const*>(src)[e];
          }
        }
      }
      __syncwarp();
    }
    q = qn;
    tile = next;
  }
#endif
}

#endif  // __CUDACC__

}  // namespace sdnn::kernels
