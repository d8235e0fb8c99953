// sdnn/conv/kernel/direct_sparse.cuh - direct sparse convolution kernel (uniform-nnz rows)
// and its launcher; the device weights, the variant dispatch and the checks are in
// conv/op/direct_sparse.cuh. A block stages the input window of its output tile once per
// channel chunk and reuses it for every output channel of its range, bias + ReLU fused into
// the store. Grid, block, staging and how sums cross channel chunks:
// docs/conv.md#direct-sparse-kernel.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/types.hpp"

namespace sdnn::conv {

// One staged weight entry: 8 bytes, read by the whole block as a broadcast. For __half the
// weight is stored twice so it loads as a __half2 for paired (image, image) FMAs.
template <class T>
struct tile_entry;
template <>
struct alignas(8) tile_entry<float> {
  std::int32_t off;
  float w;
};
template <>
struct alignas(8) tile_entry<__half> {
  std::int32_t off;
  __half w[2];
};

struct direct_conv_params {
  int N, C, H, W, K, OH, OW;
  int stride_h, stride_w, pad_h, pad_w;
  int tw, th, rows_mode, toh, tow, kw, kper;
  int cc, sh, sw, nchunks, tiles_x;
  float inv_tiles_x;
  // staging: window rows (c, r) of segs_per_row segments (32 / NB columns x NB images)
  int segs_per_row, nsegs;
  float inv_spr, inv_sh;
};

namespace detail {

template <class T, int NB>
struct alignas((NB * sizeof(T)) >= 16 ? 16 : (NB * sizeof(T))) vec_pack {
  T v[NB];
};

template <class T>
SDNN_DEVICE SDNN_FORCEINLINE T zero_value() {
  if constexpr (std::is_same_v<T, __half>) return __float2half(0.0f);
  else return T(0);
}

// q = n / d, r = n % d for 0 <= n < 2^22 through a float reciprocal and one correction.
SDNN_DEVICE SDNN_FORCEINLINE void divmod(int n, int d, float inv, int& q, int& r) {
  q = __float2int_rz(__int2float_rn(n) * inv);
  r = n - q * d;
  if (r >= d) { ++q; r -= d; }
  else if (r < 0) { --q; r += d; }
}

// Weight sources: where the kernel body gets the entries of chunk j for output channel k.
// channel(k) is called once per channel of a k-group before its entries (per-channel
// parameters, or nothing) and entry(i, ch) gives entry i as a tile_entry (tile offset * NB,
// weight). This one reads the stored tile_entry<T>; conv/kernel/direct_sparse_quantized.cuh
// decodes quantized codes.
template <class T>
struct tile_entry_source {
  struct channel_type {};
  tile_entry<T> const* ent;
  SDNN_DEVICE SDNN_FORCEINLINE channel_type channel(int) const { return {}; }
  SDNN_DEVICE SDNN_FORCEINLINE tile_entry<T> entry(int i, channel_type) const { return ent[i]; }
};

// The body of every direct sparse convolution kernel (docs/conv.md#direct-sparse-kernel), for
// any weight source; the __global__ functions are thin wrappers that build the source from
// their parameters. Its first barrier (stage()'s) comes before the first src.entry().
// Grid: x = output tile (toh x tow pixels), y = sub-batch (NB images), z = k-split. Block: kw
// slots x (tw x th) pixel threads; slot w walks the k-groups w, w + kw, ... of KG channels with
// acc[KG][P][NB] in registers.
// Invariants: entries of (chunk j, channel k) only address channels [j*cc, (j+1)*cc) of the
// window; every position a pixel + entry reaches lies inside the window (host-tested by
// tests/host/test_conv.cpp, which emulates this index arithmetic).
template <class T, class Acc, int NB, int KG, int P, bool SumsInRegisters, class Source>
SDNN_DEVICE SDNN_FORCEINLINE void direct_sparse_conv_block(direct_conv_params const& p, T const* in,
                                                           Source const& src, std::int32_t const* ptr,
                                                           float const* bias, int relu, T* out) {
  constexpr bool half_acc = std::is_same_v<Acc, __half>;
  static_assert(!half_acc || std::is_same_v<T, __half>, "half accumulation needs half data");
  static_assert(NB % 2 == 0 && 32 % NB == 0, "images are paired and a warp stages whole positions");
  using acc_t = std::conditional_t<half_acc, __half2, float>;
  constexpr int NA = half_acc ? NB / 2 : NB;
  constexpr int COLS = 32 / NB;  // window columns one warp stages per segment

  extern __shared__ __align__(16) unsigned char smem[];
  T* s_in = reinterpret_cast<T*>(smem);  // [cc][sh][sw][NB]

  int const tid = threadIdx.x, nthreads = blockDim.x, lane = tid & 31, warp = tid >> 5, nwarps = nthreads >> 5;
  int const npx = p.tw * p.th;
  int tile_y, tile_x;
  divmod(static_cast<int>(blockIdx.x), p.tiles_x, p.inv_tiles_x, tile_y, tile_x);
  int const n0 = blockIdx.y * NB;
  int const kbeg = blockIdx.z * p.kper, kend = min(p.K, kbeg + p.kper);
  int const oy0 = tile_y * p.toh, ox0 = tile_x * p.tow;
  int const iy0 = oy0 * p.stride_h - p.pad_h, ix0 = ox0 * p.stride_w - p.pad_w;
  int const ptid = tid % npx, kslot = tid / npx;
  bool const active = kslot < p.kw;
  int const tx = ptid % p.tw, ty = ptid / p.tw;

  int ly[P], lx[P], pbase[P];
#pragma unroll
  for (int q = 0; q < P; ++q) {
    ly[q] = p.rows_mode ? ty + q * p.th : ty;
    lx[q] = p.rows_mode ? tx : tx + q * p.tw;
    pbase[q] = (ly[q] * p.stride_h * p.sw + lx[q] * p.stride_w) * NB;
  }

  // staging geometry: rows (c, r), segments of COLS columns x NB images
  int const img = lane % NB, colo = lane / NB;
  int const n = n0 + img;
  std::size_t const plane = std::size_t(p.H) * p.W;

  // Stages channel chunk j into s_in (every thread of the block takes part): images
  // interleaved, so one vector load gives one position of all NB images and consecutive lanes
  // store consecutive words; zero outside the image; loads issued 4 segments at a time so
  // several are in flight.
  auto stage = [&](int j) {
    int const c0 = j * p.cc;
    __syncthreads();  // the previous chunk's reads are done
    for (int s0 = warp; s0 < p.nsegs; s0 += 4 * nwarps) {
      T v[4];
      int dst[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        int const seg = s0 + u * nwarps;
        dst[u] = -1;
        v[u] = zero_value<T>();
        if (seg < p.nsegs) {
          int row, cs, c, r;
          divmod(seg, p.segs_per_row, p.inv_spr, row, cs);
          divmod(row, p.sh, p.inv_sh, c, r);
          int const col = cs * COLS + colo, cg = c0 + c, gy = iy0 + r, gx = ix0 + col;
          if (col < p.sw) {
            dst[u] = ((c * p.sh + r) * p.sw + col) * NB + img;
            if (n < p.N && cg < p.C && gy >= 0 && gy < p.H && gx >= 0 && gx < p.W)
              v[u] = in[(std::size_t(n) * p.C + cg) * plane + std::size_t(gy) * p.W + gx];
          }
        }
      }
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (dst[u] >= 0) s_in[dst[u]] = v[u];
    }
    __syncthreads();
  };

  auto zero = [&](acc_t (&acc)[KG][P][NA]) {
#pragma unroll
    for (int kk = 0; kk < KG; ++kk)
#pragma unroll
      for (int q = 0; q < P; ++q)
#pragma unroll
        for (int b = 0; b < NA; ++b) {
          if constexpr (half_acc) acc[kk][q][b] = __float2half2_rn(0.0f);
          else acc[kk][q][b] = 0.0f;
        }
  };

  // acc += the entries of chunk j for channels [kg, kg + KG) over the staged window: per entry
  // (an 8-byte load every thread of the block reads, a broadcast served by L1) one vector load
  // per pixel and NB FMAs per pixel.
  auto accumulate = [&](int j, int kg, acc_t (&acc)[KG][P][NA]) {
    std::int32_t const* pk = ptr + std::size_t(j) * p.K + kg;
#pragma unroll
    for (int kk = 0; kk < KG; ++kk) {
      if (kg + kk >= kend) break;
      auto const ch = src.channel(kg + kk);
      int const b0 = __ldg(pk + kk), b1 = __ldg(pk + kk + 1);
#pragma unroll 4
      for (int i = b0; i < b1; ++i) {
        auto const e = src.entry(i, ch);
#pragma unroll
        for (int q = 0; q < P; ++q) {
          vec_pack<T, NB> const x = *reinterpret_cast<vec_pack<T, NB> const*>(s_in + e.off + pbase[q]);
          if constexpr (std::is_same_v<T, float>) {
#pragma unroll
            for (int b = 0; b < NB; ++b) acc[kk][q][b] = fmaf(e.w, x.v[b], acc[kk][q][b]);
          } else if constexpr (half_acc) {
            __half2 const w2 = __halves2half2(e.w[0], e.w[1]);
#pragma unroll
            for (int b = 0; b < NA; ++b)
              acc[kk][q][b] = __hfma2(w2, __halves2half2(x.v[2 * b], x.v[2 * b + 1]), acc[kk][q][b]);
          } else {
            float const w = __half2float(e.w[0]);
#pragma unroll
            for (int b = 0; b < NB / 2; ++b) {
              float2 const f = __half22float2(__halves2half2(x.v[2 * b], x.v[2 * b + 1]));
              acc[kk][q][2 * b] = fmaf(w, f.x, acc[kk][q][2 * b]);
              acc[kk][q][2 * b + 1] = fmaf(w, f.y, acc[kk][q][2 * b + 1]);
            }
          }
        }
      }
    }
  };

  // Stores acc for channels [kg, kg + KG), in float: adds the value already in the output
  // when add_previous (an earlier chunk's partial sums), bias + ReLU when last.
  // Consecutive tx store consecutive ox (coalesced).
  auto store = [&](int kg, acc_t const (&acc)[KG][P][NA], bool add_previous, bool last) {
#pragma unroll
    for (int kk = 0; kk < KG; ++kk) {
      int const k = kg + kk;
      if (k >= kend) break;
      float const bk = (last && bias) ? bias[k] : 0.0f;
#pragma unroll
      for (int q = 0; q < P; ++q) {
        int const oy = oy0 + ly[q], ox = ox0 + lx[q];
        if (oy >= p.OH || ox >= p.OW || ly[q] >= p.toh || lx[q] >= p.tow) continue;
#pragma unroll
        for (int b = 0; b < NB; ++b) {
          int const nn = n0 + b;
          if (nn >= p.N) break;
          float v;
          if constexpr (half_acc) v = b % 2 == 0 ? __low2float(acc[kk][q][b / 2]) : __high2float(acc[kk][q][b / 2]);
          else v = acc[kk][q][b];
          T* o = out + ((std::size_t(nn) * p.K + k) * p.OH + oy) * p.OW + ox;
          if (add_previous) v += value_cast<float>(*o);
          if (last) {
            v += bk;
            if (relu && v < 0.0f) v = 0.0f;
          }
          *o = value_cast<T>(v);
        }
      }
    }
  };

  if constexpr (SumsInRegisters) {
    // Pass t: slot kslot owns k-group t*kw + kslot of the block's range and keeps its sums
    // in registers over all chunks; odd passes walk the chunks backwards, so the chunk
    // staged last by the previous pass is still in the window (jj == 0 skips staging).
    // The pass and chunk loops are block-uniform (every thread stages).
    int const npasses = ((kend - kbeg + KG - 1) / KG + p.kw - 1) / p.kw;
    for (int pass = 0; pass < npasses; ++pass) {
      int const kg = kbeg + (pass * p.kw + kslot) * KG;
      bool const work = active && kg < kend;
      acc_t acc[KG][P][NA];
      zero(acc);
      for (int jj = 0; jj < p.nchunks; ++jj) {
        int const j = (pass & 1) ? p.nchunks - 1 - jj : jj;
        if (pass == 0 || jj > 0) stage(j);
        if (work) accumulate(j, kg, acc);
      }
      if (work) store(kg, acc, false, true);
    }
  } else {
    // Chunks outer: each window staged once and used by every k-group of the block; the
    // partial sums of chunk j > 0 are added to the value stored by chunk j-1 (same block,
    // same thread: no race).
    for (int j = 0; j < p.nchunks; ++j) {
      stage(j);
      if (!active) continue;
      bool const last = j + 1 == p.nchunks;
      for (int kg = kbeg + kslot * KG; kg < kend; kg += p.kw * KG) {
        acc_t acc[KG][P][NA];
        zero(acc);
        accumulate(j, kg, acc);
        store(kg, acc, j > 0, last);
      }
    }
  }
}

template <class T, class Acc, int NB, int KG, int P, bool SumsInRegisters>
__global__ void __launch_bounds__(256) direct_sparse_conv_kernel(direct_conv_params p, T const* __restrict__ in,
                                                                 tile_entry<T> const* __restrict__ ent,
                                                                 std::int32_t const* __restrict__ ptr,
                                                                 float const* __restrict__ bias, int relu,
                                                                 T* __restrict__ out) {
  direct_sparse_conv_block<T, Acc, NB, KG, P, SumsInRegisters>(p, in, tile_entry_source<T>{ent}, ptr, bias, relu,
                                                               out);
}

}  // namespace detail

// Launches the kernel of one compiled variant (NB images per sub-batch, KG channels per
// k-group, P pixels per thread) and chunk mode on exec.stream: grid, block threads and the
// dynamic shared memory (the input window) come from the plan (conv/op/direct_sparse.cuh computes them
// from direct_conv_geometry). Never synchronises.
template <class T, class Acc, int NB, int KG, int P, bool SumsInRegisters>
void launch_direct_sparse_conv(direct_conv_params const& p, dim3 grid, int threads, std::size_t smem_bytes,
                               T const* in, tile_entry<T> const* entries, std::int32_t const* ptr, float const* bias,
                               bool relu, T* out, cuda_exec exec) {
  auto kernel = detail::direct_sparse_conv_kernel<T, Acc, NB, KG, P, SumsInRegisters>;
  ::sdnn::detail::allow_dynamic_smem(kernel, smem_bytes);
  kernel<<<grid, threads, smem_bytes, exec.stream>>>(p, in, entries, ptr, bias, relu ? 1 : 0, out);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace sdnn::conv
