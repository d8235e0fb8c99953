// sdnn/linear/kernel/csr_gather.cuh - the small-batch unstructured kernel Y = epi(X W^T) on the CUDA
// cores, W in packed CSR (formats/packed_csr.hpp), 16-bit inputs, float accumulation, NB <= 16
// rows of X a launch. A thread block (one per SM) stages its range of X's columns transposed in
// shared memory, NB 16-bit values per column, so that a nonzero of W costs one shared load of
// NB * 2 bytes whatever the alignment of X, and NB fused multiply-adds. Each warp owns a contiguous
// run of rows (balanced by nonzeros at plan time) and reads a row's entries 256 at a time with
// 16-byte loads; at a row's end it folds its NB sums over the lanes in a fixed order:
// deterministic. With more than one column range (grid.y: K over what shared memory
// holds at this NB) each range writes float partial sums and csr_gather_finish adds them in order.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cuda/ptx>

#include <cstdint>
#include <type_traits>

#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/numeric.cuh"

namespace sdnn::kernels {

struct csr_gather_args {
  std::uint32_t const* entries = nullptr;  // value bits | column << 16; readable up to nnz rounded up to 4
  std::uint32_t const* starts = nullptr;   // [m * panels + 1]: where each row's 4096-column panel begins
  std::int32_t const* warp_rows = nullptr; // [gridDim.x * Warps + 1]: each warp's first row
  std::uint16_t const* x = nullptr;        // [n x ldx]: this launch's rows of X
  std::int64_t ldx = 0;
  void* y = nullptr;  // [n x ldy] of T, or of float when y_float (one column range)
  std::int64_t ldy = 0;
  bool y_float = false;
  float* partial = nullptr;  // [ranges][n][m] (more than one column range)
  std::int32_t m = 0, k = 0, n = 0;  // W m x k; n <= NB
  std::int32_t panels = 0;           // 4096-column panels of a row
  std::int32_t range_panels = 0;     // panels a block stages (blockIdx.y: which range)
  basic_epilogue<float> epi{};
};

namespace detail {
template <class T>
__device__ SDNN_FORCEINLINE float gather_value(std::uint32_t e) {
  if constexpr (is_bfloat_bits_v<T>) return __uint_as_float(e << 16);
  else return __half2float(__ushort_as_half(static_cast<unsigned short>(e & 0xffffu)));
}
// acc[i] += w * (the NB 16-bit values at xs)
template <class T, int NB>
__device__ SDNN_FORCEINLINE void gather_fma(float (&acc)[NB], float w, std::uint16_t const* xs) {
  if constexpr (NB == 1) {
    acc[0] = fmaf(w, gather_value<T>(*xs), acc[0]);
  } else {
    constexpr int words = NB / 2;
    std::uint32_t v[words];
    if constexpr (words >= 4) {
#pragma unroll
      for (int q = 0; q < words / 4; ++q) {
        uint4 const u = reinterpret_cast<uint4 const*>(xs)[q];
        v[4 * q] = u.x, v[4 * q + 1] = u.y, v[4 * q + 2] = u.z, v[4 * q + 3] = u.w;
      }
    } else if constexpr (words == 2) {
      uint2 const u = *reinterpret_cast<uint2 const*>(xs);
      v[0] = u.x, v[1] = u.y;
    } else {
      v[0] = *reinterpret_cast<std::uint32_t const*>(xs);
    }
#pragma unroll
    for (int q = 0; q < words; ++q) {
      float lo, hi;
      if constexpr (is_bfloat_bits_v<T>) {  // a bf16 is a float's upper half: two integer ops a pair
        lo = __uint_as_float(v[q] << 16);
        hi = __uint_as_float(v[q] & 0xffff0000u);
      } else {
        float2 const f = unpack2_float<T>(v[q]);
        lo = f.x, hi = f.y;
      }
      acc[2 * q] = fmaf(w, lo, acc[2 * q]);
      acc[2 * q + 1] = fmaf(w, hi, acc[2 * q + 1]);
    }
  }
}
// Output (n, r): y = epi(s) rounded to Out, or the column range's partial sum s.
template <class T>
__device__ SDNN_FORCEINLINE void gather_store(float s, int n, int r, csr_gather_args const& p) {
  if (p.partial) {
    p.partial[(std::int64_t(blockIdx.y) * p.n + n) * p.m + r] = s;
    return;
  }
  float const v = p.epi(s, r);
  std::int64_t const at = std::int64_t(n) * p.ldy + r;
  if (p.y_float) static_cast<float*>(p.y)[at] = v;
  else if constexpr (is_bfloat_bits_v<T>) static_cast<__nv_bfloat16*>(p.y)[at] = __float2bfloat16_rn(v);
  else static_cast<__half*>(p.y)[at] = __float2half_rn(v);
}

// The warp's NB sums of row r folded over its lanes and stored (y after the epilogue, or the
// column range's partial sums). Halving butterfly: at offset o a lane keeps half of its sums (the
// upper half where bit o of the lane is set) and adds its partner's copy of that half; log2 NB steps
// from o = 16 leave a lane one sum, of row n = its bits 4, 3, .. read as a number, and the remaining
// offsets add it over the lanes that share those bits. A fixed order: deterministic.
template <class T, int NB>
__device__ SDNN_FORCEINLINE void gather_store_row(float (&acc)[NB], int lane, int r, csr_gather_args const& p) {
  int o = 16, n = 0;
#pragma unroll
  for (int c = NB; c > 1; c /= 2, o /= 2) {
    bool const upper = (lane & o) != 0;
    if (upper) n += c / 2;
#pragma unroll
    for (int i = 0; i < c / 2; ++i) {
      float const send = upper ? acc[i] : acc[i + c / 2];
      float const keep = upper ? acc[i + c / 2] : acc[i];
      acc[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
    }
  }
#pragma unroll
  for (int d = 16 / NB; d >= 1; d /= 2) acc[0] += __shfl_xor_sync(0xffffffffu, acc[0], d);
  if ((lane & (32 / NB - 1)) == 0 && n < p.n) gather_store<T>(acc[0], n, r, p);
#pragma unroll
  for (int i = 0; i < NB; ++i) acc[i] = 0.f;
}
}  // namespace detail

// Launch: grid (blocks, column ranges), Warps * 32 threads, dynamic shared memory of the range's
// columns + 1 (a zero column) x NB x 2 bytes. A warp takes its rows one after the other, a row's
// entries 256 at a time (two 16-byte loads a lane), the next row's bounds read while this row is
// summed. Entries of a chunk outside its row (at the row's two ends) read the zero column with a
// zero weight: no branch in the sum. The kernel is bound by its instructions and their latency,
// not by DRAM (tc_linear_notes.md, v7): streaming a warp's chunks across row ends with more in
// flight took more registers, so half the warps, and ran 30-65 % slower at 90 %; prefetching the
// entries into L2 ahead of the loads ran 4-24 % slower; X staged in float (no widening, twice the
// shared-memory traffic) ran 50 % slower at 8 rows.
template <class T, int NB, int Warps>
__global__ void __launch_bounds__(Warps * 32, 1) csr_gather_kernel(csr_gather_args p) {
  static_assert(NB == 1 || NB == 2 || NB == 4 || NB == 8 || NB == 16, "csr_gather_kernel: NB a power of two <= 16");
  extern __shared__ uint4 csr_gather_smem[];
  std::uint16_t* const xs = reinterpret_cast<std::uint16_t*>(csr_gather_smem);
  int const lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  int const q0 = int(blockIdx.y) * p.range_panels, q1 = min(q0 + p.range_panels, p.panels);
  int const c0 = q0 * 4096, c1 = min(q1 * 4096, p.k);
  int const gw = int(blockIdx.x) * Warps + warp;
  int const r0 = __ldg(p.warp_rows + gw), r1 = __ldg(p.warp_rows + gw + 1);
  // Row r's entries [e0, e1) in this column range (q1 == panels: the next row's start ends it).
  auto bounds = [&](int r) {
    return r < r1 ? make_uint2(__ldg(p.starts + std::int64_t(r) * p.panels + q0),
                               __ldg(p.starts + std::int64_t(r) * p.panels + q1))
                  : make_uint2(0u, 0u);
  };
  uint2 next = bounds(r0);

  // X's columns c0 .. c1 - 1, transposed: xs[(c - c0) NB + n] = X(n, c), zero for n >= p.n, and the
  // zero column after them. A thread a column, U columns' loads in flight; each row's loads are
  // consecutive across the warp.
  constexpr int U = NB >= 16 ? 2 : 4;
  for (int cb = c0 + int(threadIdx.x); cb <= c1; cb += U * Warps * 32) {
    std::uint16_t v[U][NB];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      int const c = cb + u * Warps * 32;
#pragma unroll
      for (int n = 0; n < NB; ++n)
        v[u][n] = n < p.n && c < c1 ? __ldg(p.x + std::int64_t(n) * p.ldx + c) : std::uint16_t(0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      int const c = cb + u * Warps * 32;
      if (c > c1) break;
      std::uint16_t* const dst = xs + std::int64_t(c - c0) * NB;
      if constexpr (NB >= 8) {
#pragma unroll
        for (int q = 0; q < NB / 8; ++q) {
          uint4 w;
          w.x = v[u][8 * q] | (std::uint32_t(v[u][8 * q + 1]) << 16);
          w.y = v[u][8 * q + 2] | (std::uint32_t(v[u][8 * q + 3]) << 16);
          w.z = v[u][8 * q + 4] | (std::uint32_t(v[u][8 * q + 5]) << 16);
          w.w = v[u][8 * q + 6] | (std::uint32_t(v[u][8 * q + 7]) << 16);
          reinterpret_cast<uint4*>(dst)[q] = w;
        }
      } else {
#pragma unroll
        for (int n = 0; n < NB; ++n) dst[n] = v[u][n];
      }
    }
  }
  __syncthreads();

  std::uint16_t const* const xcol = xs - std::int64_t(c0) * NB;  // X(n, c) at xcol[c NB + n]
  std::uint32_t const zero_col = std::uint32_t(c1);
  float acc[NB];
#pragma unroll
  for (int i = 0; i < NB; ++i) acc[i] = 0.f;
  // 128 entries from base (4-aligned) of the row [e0, e1), as loaded into u by this lane.
  auto sum_chunk = [&](uint4 const& u, std::uint32_t base, std::uint32_t e0, std::uint32_t e1) {
    std::uint32_t const e[4] = {u.x, u.y, u.z, u.w};
    if (base >= e0 && base + 128u <= e1) {  // inside the row (warp-uniform): every entry counts
#pragma unroll
      for (int q = 0; q < 4; ++q) detail::gather_fma<T, NB>(acc, detail::gather_value<T>(e[q]), xcol + (e[q] >> 16) * NB);
    } else {
      std::uint32_t const at = base + 4u * unsigned(lane);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        bool const in = at + q >= e0 && at + q < e1;
        detail::gather_fma<T, NB>(acc, in ? detail::gather_value<T>(e[q]) : 0.f, xcol + (in ? e[q] >> 16 : zero_col) * NB);
      }
    }
  };
  for (int r = r0; r < r1; ++r) {
    uint2 const b = next;
    next = bounds(r + 1);
    for (std::uint32_t base = b.x & ~3u; base < b.y; base += 256u) {
      std::uint32_t const at = base + 4u * unsigned(lane);
      // The entries are read once: loaded without allocating in L1 (on the grid shapes 0.86-1.00x the
      // time at 50-90 %, 0.97-1.01x at 95-99 %; tc_linear_notes.md v15).
      auto const* ev = reinterpret_cast<uint4 const*>(p.entries + at);
      uint4 const u0 = at < b.y ? cuda::ptx::ld_nc_L1_no_allocate(cuda::ptx::space_global, ev) : make_uint4(0u, 0u, 0u, 0u);
      bool const two = base + 128u < b.y;  // warp-uniform
      uint4 u1 = make_uint4(0u, 0u, 0u, 0u);
      if (two && at + 128u < b.y) u1 = cuda::ptx::ld_nc_L1_no_allocate(cuda::ptx::space_global, ev + 32);
      sum_chunk(u0, base, b.x, b.y);
      if (two) sum_chunk(u1, base + 128u, b.x, b.y);
    }
    detail::gather_store_row<T, NB>(acc, lane, r, p);
  }
}

// The column ranges' partial sums added in range order, the epilogue, one rounding to Out.
template <class T>
__global__ void __launch_bounds__(256) csr_gather_finish(csr_gather_args p, int ranges) {
  std::int64_t const i = std::int64_t(blockIdx.x) * 256 + threadIdx.x;
  if (i >= std::int64_t(p.n) * p.m) return;
  int const n = int(i / p.m), r = int(i % p.m);
  float s = 0.f;
  for (int q = 0; q < ranges; ++q) s += p.partial[(std::int64_t(q) * p.n + n) * p.m + r];
  p.partial = nullptr;  // now the output
  detail::gather_store<T>(s, n, r, p);
}

}  // namespace sdnn::kernels
