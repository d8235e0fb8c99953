// sdnn/kernels/direct_sparse_conv_quantized.cuh - direct sparse convolution (float data, float
// sums) with quantized weights decoded on the fly, and its launcher; the device weights, the
// variant dispatch and the checks are in ops/conv_quantized.cuh.
//
// The algorithm, grid, block, staging and chunk modes are those of the float kernel of
// kernels/direct_sparse_conv.cuh (its file comment; same direct_conv_params, same variants
// (NB, KG, P) and both SumsInRegisters modes); the only change is the weight of an entry:
// instead of one 8-byte tile_entry<float> {offset, weight} the kernel reads the tile offset
// (int32, already times NB) and the entry's code, and decodes it with the decoders of
// kernels/spmm_quantized.cuh:
//   int8:      w = __fmul_rn(scale[k], float(q[i] - zero[k])), (scale, zero) of the output
//              channel k read once per k-group pass (one group when per layer);
//   codebook4: w = codebook[nibble i of packed], the 16 float centroids (half widened, exact)
//              copied into shared memory by the block (16 threads, before the first barrier).
// Both give exactly the float int8_encoding / codebook4_encoding::decode computes on the host,
// and every sum is then the float kernel's: the same fmaf(w, x, acc) in the same order, the
// same store (partial sums through the output, bias, ReLU). So for every config this kernel
// is BITWISE equal to the float kernel run on dequantize(weights) (tests/cuda/
// test_conv_quantized.cu checks that with ==).
// Entries are read in the tiled, chunk-major order of formats/conv_weights.hpp
// (tiled_conv_entries); the codes were permuted to that order at plan time.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/exec.hpp"
#include "sdnn/kernels/direct_sparse_conv.cuh"
#include "sdnn/kernels/spmm_quantized.cuh"

namespace sdnn::conv {

namespace detail {

template <class Values, int NB, int KG, int P, bool SumsInRegisters>
__global__ void __launch_bounds__(256)
    direct_sparse_conv_quantized_kernel(direct_conv_params p, float const* __restrict__ in,
                                        std::int32_t const* __restrict__ off, Values vals,
                                        std::int32_t const* __restrict__ ptr, float const* __restrict__ bias,
                                        int relu, float* __restrict__ out) {
  static_assert(NB % 2 == 0 && 32 % NB == 0, "images are paired and a warp stages whole positions");
  constexpr int COLS = 32 / NB;  // window columns one warp stages per segment

  extern __shared__ __align__(16) unsigned char smem[];
  float* s_in = reinterpret_cast<float*>(smem);  // [cc][sh][sw][NB]
  __shared__ float s_codebook[16];
  auto const dec = ::sdnn::kernels::detail::make_decoder(vals, s_codebook);  // read after stage()'s barrier

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

  int const img = lane % NB, colo = lane / NB;
  int const n = n0 + img;
  std::size_t const plane = std::size_t(p.H) * p.W;

  // Stages channel chunk j into s_in (as the float kernel).
  auto stage = [&](int j) {
    int const c0 = j * p.cc;
    __syncthreads();
    for (int s0 = warp; s0 < p.nsegs; s0 += 4 * nwarps) {
      float v[4];
      int dst[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        int const seg = s0 + u * nwarps;
        dst[u] = -1;
        v[u] = 0.0f;
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

  auto zero = [&](float (&acc)[KG][P][NB]) {
#pragma unroll
    for (int kk = 0; kk < KG; ++kk)
#pragma unroll
      for (int q = 0; q < P; ++q)
#pragma unroll
        for (int b = 0; b < NB; ++b) acc[kk][q][b] = 0.0f;
  };

  // acc += the entries of chunk j for channels [kg, kg + KG), weights decoded on the fly.
  auto accumulate = [&](int j, int kg, float (&acc)[KG][P][NB]) {
    std::int32_t const* pk = ptr + std::size_t(j) * p.K + kg;
#pragma unroll
    for (int kk = 0; kk < KG; ++kk) {
      if (kg + kk >= kend) break;
      auto const ch = dec.channel(kg + kk);
      int const b0 = __ldg(pk + kk), b1 = __ldg(pk + kk + 1);
#pragma unroll 4
      for (int i = b0; i < b1; ++i) {
        int const o = __ldg(off + i);
        float const w = dec.value(i, ch);
#pragma unroll
        for (int q = 0; q < P; ++q) {
          vec_pack<float, NB> const x = *reinterpret_cast<vec_pack<float, NB> const*>(s_in + o + pbase[q]);
#pragma unroll
          for (int b = 0; b < NB; ++b) acc[kk][q][b] = fmaf(w, x.v[b], acc[kk][q][b]);
        }
      }
    }
  };

  // Stores as the float kernel (partial sums of earlier chunks, bias + ReLU when last).
  auto store = [&](int kg, float const (&acc)[KG][P][NB], bool add_previous, bool last) {
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
          float v = acc[kk][q][b];
          float* o = out + ((std::size_t(nn) * p.K + k) * p.OH + oy) * p.OW + ox;
          if (add_previous) v += *o;
          if (last) {
            v += bk;
            if (relu && v < 0.0f) v = 0.0f;
          }
          *o = v;
        }
      }
    }
  };

  if constexpr (SumsInRegisters) {
    int const npasses = ((kend - kbeg + KG - 1) / KG + p.kw - 1) / p.kw;
    for (int pass = 0; pass < npasses; ++pass) {
      int const kg = kbeg + (pass * p.kw + kslot) * KG;
      bool const work = active && kg < kend;
      float acc[KG][P][NB];
      zero(acc);
      for (int jj = 0; jj < p.nchunks; ++jj) {
        int const j = (pass & 1) ? p.nchunks - 1 - jj : jj;
        if (pass == 0 || jj > 0) stage(j);
        if (work) accumulate(j, kg, acc);
      }
      if (work) store(kg, acc, false, true);
    }
  } else {
    for (int j = 0; j < p.nchunks; ++j) {
      stage(j);
      if (!active) continue;
      bool const last = j + 1 == p.nchunks;
      for (int kg = kbeg + kslot * KG; kg < kend; kg += p.kw * KG) {
        float acc[KG][P][NB];
        zero(acc);
        accumulate(j, kg, acc);
        store(kg, acc, j > 0, last);
      }
    }
  }
}

}  // namespace detail

// Launches one compiled variant with the encoding's device view (kernels::int8_values_view or
// kernels::codebook4_values_view, indexed by tiled entry) on exec.stream; grid, threads and
// the dynamic shared memory (the input window) come from the plan (ops/conv_quantized.cuh).
// Never synchronises.
template <class Values, int NB, int KG, int P, bool SumsInRegisters>
void launch_direct_sparse_conv_quantized(direct_conv_params const& p, dim3 grid, int threads,
                                         std::size_t smem_bytes, float const* in, std::int32_t const* offsets,
                                         Values const& values, std::int32_t const* ptr, float const* bias, bool relu,
                                         float* out, cuda_exec exec) {
  auto kernel = detail::direct_sparse_conv_quantized_kernel<Values, NB, KG, P, SumsInRegisters>;
  SDNN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem_bytes)));
  kernel<<<grid, threads, smem_bytes, exec.stream>>>(p, in, offsets, values, ptr, bias, relu ? 1 : 0, out);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace sdnn::conv
