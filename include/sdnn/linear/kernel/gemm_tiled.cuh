// sdnn/linear/kernel/gemm_tiled.cuh - tiled shared-memory dense GEMM with a fused epilogue,
// and its launcher.
//
//   C[M x N] = epi(A[M x K] * B[K x N]), row-major views, T = float or a 16-bit type (float
//   accumulation), optionally over a subset of A's rows (empty-row skipping).
//
// Also the 16-byte load/store helpers the sparse kernels share. Tiling:
// docs/linear.md#tiled-dense-and-tiled-gemm.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/numeric.cuh"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn::kernels {

namespace detail {

// Elements of T in a 16-byte vector.
template <class T>
inline constexpr int vec_width = 16 / static_cast<int>(sizeof(T));

// Loads V consecutive elements (16 bytes, aligned) and widens them to float. T: float, or a
// 16-bit type (__half, sdnn::fp16, __nv_bfloat16, sdnn::bf16; core/numeric.cuh).
template <class T, int V>
__device__ SDNN_FORCEINLINE void load_vec16(T const* p, float (&out)[V]) {
  static_assert(V * sizeof(T) == 16, "load_vec16: 16-byte vectors only");
  if constexpr (std::is_same_v<T, float>) {
    float4 const v = __ldg(reinterpret_cast<float4 const*>(p));
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
  } else {
    uint4 const v = __ldg(reinterpret_cast<uint4 const*>(p));
    unsigned const w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float2 const f = unpack2_float<T>(w[i]);
      out[2 * i] = f.x, out[2 * i + 1] = f.y;
    }
  }
}

// Stores 4 floats as 4 consecutive T (16 bytes for float, 8 for a 16-bit T), aligned.
template <class T>
__device__ SDNN_FORCEINLINE void store_vec4(T* p, float const (&v)[4]) {
  if constexpr (std::is_same_v<T, float>) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    uint2 u;
    u.x = pack2_float<T>(v[0], v[1]);
    u.y = pack2_float<T>(v[2], v[3]);
    *reinterpret_cast<uint2*>(p) = u;
  }
}

inline bool aligned16(void const* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

}  // namespace detail

// policy::tiled_gemm<BM, BN, BK>: a block of (BM/8)*(BN/8) threads computes a BM x BN tile
// of C. Each thread owns an 8x8 register tile made of two 4-row groups BM/2 apart and two
// 4-column groups BN/2 apart, so its per-k fragments are 4 x 16-byte shared-memory loads.
// The K loop walks BK-deep slices: while slice t is multiplied out of shared buffer t&1,
// slice t+1 is fetched into registers with 16-byte global loads and written (A transposed,
// as float) into buffer (t+1)&1 after the multiply: one barrier per slice. Out-of-range
// elements load as zero, so every size is handled.
// Row subsets: with `rows` != nullptr, tile row r of the launch is A/C row rows[r] for
// r < *num_rows (compacted live rows; tiles past *num_rows exit at once). With `row_counts`
// != nullptr (mask form), an A row whose count is 0 is not read (it loads as zero) and a
// tile whose rows are all empty skips its K loop; its C rows still get epi(0).
template <class T, class Index, class Acc, int BM, int BN, int BK, bool Vec>
__global__ void __launch_bounds__((BM / 8) * (BN / 8), 2)
    gemm_tiled_kernel(dense_view<T const> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> epi,
                      Index const* rows, Index const* num_rows, Index const* row_counts) {
  constexpr int threads = (BM / 8) * (BN / 8);
  constexpr int V = detail::vec_width<T>;
  static_assert(BK % V == 0 && BN % V == 0, "gemm_tiled: BK and BN must be multiples of the 16-byte vector width");
  constexpr int a_vecs = BM * BK / V, b_vecs = BK * BN / V;
  static_assert(a_vecs % threads == 0 && b_vecs % threads == 0,
                "gemm_tiled: each thread must load a whole number of 16-byte vectors per slice");
  constexpr int na = a_vecs / threads, nb = b_vecs / threads;
  constexpr int pad = 4;  // keeps float4 alignment, breaks the 2-way conflict of the transposed A store

  __shared__ __align__(16) float as[2][BK][BM + pad];
  __shared__ __align__(16) float bs[2][BK][BN + pad];

  std::int64_t const m_launch = rows ? static_cast<std::int64_t>(num_rows ? *num_rows : a.rows) : a.rows;
  std::int64_t const tile_m0 = static_cast<std::int64_t>(blockIdx.y) * BM;
  if (tile_m0 >= m_launch) return;  // past the live rows (uniform per block)
  std::int64_t const n0 = static_cast<std::int64_t>(blockIdx.x) * BN;
  std::int64_t const K = a.cols, N = b.cols;

  int const tid = threadIdx.x;
  int const tx = tid % (BN / 8), ty = tid / (BN / 8);

  // The A rows this thread loads (fixed over the K loop).
  T const* a_row[na];
  int a_k[na], a_r[na];
  bool a_ok[na];
  bool any_live = false;
#pragma unroll
  for (int i = 0; i < na; ++i) {
    int const v = tid + i * threads;
    a_r[i] = v / (BK / V);
    a_k[i] = (v % (BK / V)) * V;
    std::int64_t const tr = tile_m0 + a_r[i];
    bool ok = tr < m_launch;
    std::int64_t gr = 0;
    if (ok) gr = rows ? static_cast<std::int64_t>(rows[tr]) : tr;
    if (ok && row_counts) ok = row_counts[gr] != 0;
    a_ok[i] = ok;
    a_row[i] = a.data + gr * a.ld;
    any_live |= ok;
  }
  int b_k[nb], b_n[nb];
#pragma unroll
  for (int i = 0; i < nb; ++i) {
    int const v = tid + i * threads;
    b_k[i] = v / (BN / V);
    b_n[i] = (v % (BN / V)) * V;
  }

  float ra[na][V], rb[nb][V];
  auto load_slice = [&](std::int64_t k0) {
#pragma unroll
    for (int i = 0; i < na; ++i) {
      std::int64_t const k = k0 + a_k[i];
      if (Vec && a_ok[i] && k + V <= K) {
        detail::load_vec16<T, V>(a_row[i] + k, ra[i]);
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e) ra[i][e] = (a_ok[i] && k + e < K) ? value_cast<float>(a_row[i][k + e]) : 0.f;
      }
    }
#pragma unroll
    for (int i = 0; i < nb; ++i) {
      std::int64_t const k = k0 + b_k[i], n = n0 + b_n[i];
      T const* p = b.data + k * b.ld + n;
      if (Vec && k < K && n + V <= N) {
        detail::load_vec16<T, V>(p, rb[i]);
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e) rb[i][e] = (k < K && n + e < N) ? value_cast<float>(p[e]) : 0.f;
      }
    }
  };
  auto store_slice = [&](int buf) {
#pragma unroll
    for (int i = 0; i < na; ++i)
#pragma unroll
      for (int e = 0; e < V; ++e) as[buf][a_k[i] + e][a_r[i]] = ra[i][e];
#pragma unroll
    for (int i = 0; i < nb; ++i)
#pragma unroll
      for (int e = 0; e < V; e += 4)
        *reinterpret_cast<float4*>(&bs[buf][b_k[i]][b_n[i] + e]) =
            make_float4(rb[i][e], rb[i][e + 1], rb[i][e + 2], rb[i][e + 3]);
  };

  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

  // Mask/list forms: a tile with no live row reads nothing and multiplies nothing.
  bool const tile_live = __syncthreads_or(any_live);
  std::int64_t const slices = tile_live ? (K + BK - 1) / BK : 0;
  if (slices > 0) {
    load_slice(0);
    store_slice(0);
    __syncthreads();
  }
  for (std::int64_t t = 0; t < slices; ++t) {
    int const buf = static_cast<int>(t & 1);
    bool const more = t + 1 < slices;
    if (more) load_slice((t + 1) * BK);
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float af[8], bf[8];
      float4 const a0 = *reinterpret_cast<float4 const*>(&as[buf][k][ty * 4]);
      float4 const a1 = *reinterpret_cast<float4 const*>(&as[buf][k][BM / 2 + ty * 4]);
      float4 const b0 = *reinterpret_cast<float4 const*>(&bs[buf][k][tx * 4]);
      float4 const b1 = *reinterpret_cast<float4 const*>(&bs[buf][k][BN / 2 + tx * 4]);
      af[0] = a0.x, af[1] = a0.y, af[2] = a0.z, af[3] = a0.w;
      af[4] = a1.x, af[5] = a1.y, af[6] = a1.z, af[7] = a1.w;
      bf[0] = b0.x, bf[1] = b0.y, bf[2] = b0.z, bf[3] = b0.w;
      bf[4] = b1.x, bf[5] = b1.y, bf[6] = b1.z, bf[7] = b1.w;
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(af[i], bf[j], acc[i][j]);
    }
    if (more) store_slice(buf ^ 1);
    __syncthreads();
  }

  // Epilogue: evaluated in Acc (float here), converted once on store.
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    std::int64_t const tr = tile_m0 + (i < 4 ? ty * 4 + i : BM / 2 + ty * 4 + (i - 4));
    if (tr >= m_launch) continue;
    std::int64_t const gr = rows ? static_cast<std::int64_t>(rows[tr]) : tr;
    T* crow = c.data + gr * c.ld;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      std::int64_t const col = n0 + h * (BN / 2) + tx * 4;
      float v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j)  // the epilogue reads bias[col]: only for columns that exist
        v[j] = col + j < N ? static_cast<float>(epi(static_cast<Acc>(acc[i][h * 4 + j]), col + j)) : 0.f;
      if (Vec && col + 4 <= N) {
        detail::store_vec4<T>(crow + col, v);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (col + j < N) crow[col + j] = value_cast<T>(v[j]);
      }
    }
  }
}

// Launches the tiled GEMM over `launch_rows` rows (a.rows, or the capacity of the `rows`
// list whose device-side length is *num_rows). The 16-byte path (Vec) is taken when every
// leading dimension is a multiple of the vector width and every base pointer is 16-byte
// aligned, else 1-element loads. Enqueued on exec.stream; no synchronisation.
template <class Policy, class T, class Index, class Acc>
void gemm_tiled(dense_view<T const> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
                Index const* rows, Index const* num_rows, std::int64_t launch_rows, Index const* row_counts,
                cuda_exec exec) {
  constexpr int BM = Policy::tile_m, BN = Policy::tile_n, BK = Policy::tile_k;
  if (launch_rows <= 0 || b.cols <= 0) return;
  constexpr int V = detail::vec_width<T>;
  bool const vec = a.ld % V == 0 && b.ld % V == 0 && c.ld % V == 0 && detail::aligned16(a.data) &&
                   detail::aligned16(b.data) && detail::aligned16(c.data);
  std::int64_t const gy = (launch_rows + BM - 1) / BM, gx = (b.cols + BN - 1) / BN;
  SDNN_EXPECTS(gy <= 65535, "gemm_tiled: ", launch_rows, " rows need ", gy, " row tiles, more than 65535");
  dim3 const grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
  if (vec)
    gemm_tiled_kernel<T, Index, Acc, BM, BN, BK, true>
        <<<grid, Policy::threads, 0, exec.stream>>>(a, b, c, epi, rows, num_rows, row_counts);
  else
    gemm_tiled_kernel<T, Index, Acc, BM, BN, BK, false>
        <<<grid, Policy::threads, 0, exec.stream>>>(a, b, c, epi, rows, num_rows, row_counts);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace sdnn::kernels
