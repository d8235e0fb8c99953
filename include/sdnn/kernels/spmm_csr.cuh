// sdnn/kernels/spmm_csr.cuh - sparse x dense products with a CSR left operand.
//
//   C[M x N] = epi(A_csr[M x K] * B[K x N]), B and C row-major, T = float or __half
//   (float accumulation).
//
// Work unit: one warp per (row, column slab). A slab is 32 lanes x U 16-byte vectors
// (float: 128*U columns, __half: 256*U columns); lane l owns vectors l, l+32, ... so each
// B-row read is U fully coalesced 512-byte transactions. The warp loads 32 (col, value)
// pairs of its row at once (one coalesced load each), broadcasts them by shuffle, and
// unrolls the nonzero loop by 4 so 4*U independent B loads are in flight. The slab index
// is blockIdx.x (fastest), so the warps of all slabs of a row run together and A's row is
// read from L1/L2 once per row in practice.
//
// Row maps (which rows a launch covers):
//  - row_split: warp slot w -> row w, or rows[w] for w < *num_rows (compacted live rows);
//  - nnz_balanced: warp slot w -> rows [bounds[w], bounds[w+1]) (plan-time cut of row_ptr
//    into ranges of ~equal nnz, see csr_nnz_bounds()).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <thrust/binary_search.h>
#include <thrust/execution_policy.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cstdint>
#include <type_traits>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/kernels/gemm_tiled.cuh"

namespace sdnn::kernels {

namespace detail {

// Stores V (16 bytes of T) floats after the epilogue; vector store when `vec`.
template <class T, int V, class Acc>
__device__ SDNN_FORCEINLINE void store_slab_vector(T* crow, std::int64_t col, std::int64_t n, float const (&acc)[V],
                                                   basic_epilogue<Acc> const& epi, bool vec) {
  float v[V];
#pragma unroll
  for (int e = 0; e < V; ++e)  // the epilogue reads bias[col]: only for columns that exist
    v[e] = col + e < n ? static_cast<float>(epi(static_cast<Acc>(acc[e]), col + e)) : 0.f;
  if (vec && col + V <= n) {
    if constexpr (std::is_same_v<T, float>) {
      *reinterpret_cast<float4*>(crow + col) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
      uint4 u;
      unsigned* w = reinterpret_cast<unsigned*>(&u);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        __half2 const h = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
        w[i] = *reinterpret_cast<unsigned const*>(&h);
      }
      *reinterpret_cast<uint4*>(crow + col) = u;
    }
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e)
      if (col + e < n) crow[col + e] = value_cast<T>(v[e]);
  }
}

// acc[u][e] += value * B[col][lane column (u, e)] for one slab.
template <class T, int U, int V>
__device__ SDNN_FORCEINLINE void axpy_slab(dense_view<T const> b, std::int64_t col, float value, std::int64_t n0,
                                           int lane, float (&acc)[U][V], bool vec) {
  T const* brow = b.data + col * b.ld;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    std::int64_t const j = n0 + (static_cast<std::int64_t>(u) * 32 + lane) * V;
    float x[V];
    if (vec && j + V <= b.cols) {
      load_vec16<T, V>(brow + j, x);
    } else {
#pragma unroll
      for (int e = 0; e < V; ++e) x[e] = j + e < b.cols ? value_cast<float>(brow[j + e]) : 0.f;
    }
#pragma unroll
    for (int e = 0; e < V; ++e) acc[u][e] = fmaf(value, x[e], acc[u][e]);
  }
}

// One warp: acc = sum over the (col, value) pairs [begin, end) of value * B[col][slab].
// `col_of(p)` / `value_of(p)` read entry p (CSR: col_idx[p]; ELL: a strided slot).
template <class T, int U, int V, class ColOf, class ValOf>
__device__ SDNN_FORCEINLINE void warp_row_product(std::int64_t begin, std::int64_t end, ColOf col_of, ValOf value_of,
                                                  dense_view<T const> b, std::int64_t n0, int lane,
                                                  float (&acc)[U][V], bool vec) {
  for (std::int64_t base = begin; base < end; base += 32) {
    std::int64_t const p = base + lane;
    std::int64_t my_col = 0;
    float my_val = 0.f;
    if (p < end) {
      my_col = static_cast<std::int64_t>(col_of(p));
      my_val = value_cast<float>(value_of(p));
    }
    int const cnt = end - base < 32 ? static_cast<int>(end - base) : 32;
#pragma unroll 4
    for (int j = 0; j < cnt; ++j) {
      std::int64_t const col = __shfl_sync(0xffffffffu, my_col, j);
      float const val = __shfl_sync(0xffffffffu, my_val, j);
      axpy_slab<T, U, V>(b, col, val, n0, lane, acc, vec);
    }
  }
}

template <class T, int U, int V, class Acc>
__device__ SDNN_FORCEINLINE void warp_store_row(dense_view<T> c, std::int64_t row, std::int64_t n0, int lane,
                                                float const (&acc)[U][V], basic_epilogue<Acc> const& epi, bool vec) {
  T* crow = c.data + row * c.ld;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    std::int64_t const j = n0 + (static_cast<std::int64_t>(u) * 32 + lane) * V;
    if (j < c.cols) store_slab_vector<T, V>(crow, j, c.cols, acc[u], epi, vec);
  }
}

// rows_in_x: the grid is (row groups, slabs) instead of (slabs, row groups), so blocks
// scheduled together share a column slab of B rather than a row of A.
template <class T, class Index, class Acc, int U, int Warps>
__global__ void __launch_bounds__(Warps * 32)
    csr_row_split_kernel(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> epi,
                         Index const* rows, Index const* num_rows, std::int64_t launch_rows, bool vec,
                         bool rows_in_x) {
  constexpr int V = vec_width<T>;
  int const lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  std::int64_t const m = rows ? static_cast<std::int64_t>(num_rows ? *num_rows : launch_rows) : launch_rows;
  std::int64_t const slab = rows_in_x ? blockIdx.y : blockIdx.x, group = rows_in_x ? blockIdx.x : blockIdx.y;
  std::int64_t const groups = rows_in_x ? gridDim.x : gridDim.y;
  std::int64_t const n0 = slab * (32 * U * V);
  for (std::int64_t w = group * Warps + warp; w < m; w += groups * Warps) {
    std::int64_t const row = rows ? static_cast<std::int64_t>(rows[w]) : w;
    float acc[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int e = 0; e < V; ++e) acc[u][e] = 0.f;
    warp_row_product<T, U, V>(
        a.row_ptr[row], a.row_ptr[row + 1], [&](std::int64_t p) { return a.col_idx[p]; },
        [&](std::int64_t p) { return a.values[p]; }, b, n0, lane, acc, vec);
    warp_store_row<T, U, V>(c, row, n0, lane, acc, epi, vec);
  }
}

template <class T, class Index, class Acc, int U, int Warps>
__global__ void __launch_bounds__(Warps * 32)
    csr_nnz_balanced_kernel(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> epi,
                            Index const* bounds, std::int64_t ranges, bool vec) {
  constexpr int V = vec_width<T>;
  int const lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  std::int64_t const n0 = static_cast<std::int64_t>(blockIdx.x) * (32 * U * V);
  for (std::int64_t w = static_cast<std::int64_t>(blockIdx.y) * Warps + warp; w < ranges;
       w += static_cast<std::int64_t>(gridDim.y) * Warps) {
    for (std::int64_t row = bounds[w]; row < bounds[w + 1]; ++row) {
      float acc[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int e = 0; e < V; ++e) acc[u][e] = 0.f;
      warp_row_product<T, U, V>(
          a.row_ptr[row], a.row_ptr[row + 1], [&](std::int64_t p) { return a.col_idx[p]; },
          [&](std::int64_t p) { return a.values[p]; }, b, n0, lane, acc, vec);
      warp_store_row<T, U, V>(c, row, n0, lane, acc, epi, vec);
    }
  }
}

// Staged-B CSR SpMM (policy::csr_staged_b<R, KC>): one block of 8 warps per (R rows,
// column slab of 32 lanes x 16 bytes). The K axis is walked in chunks of KC rows of B;
// each chunk's KC x slab tile of B is loaded once into shared memory (16-byte loads,
// zero outside B) and then used by every nonzero of the block's R rows whose column
// falls in the chunk, so a B element read from L2 serves about R * density rows instead
// of one (the row-split kernel's reuse). Each warp owns R/8 rows and keeps a cursor per
// row into its sorted column list; per chunk it stages up to 32 (col, value) pairs of a
// row, takes the prefix that lies in the chunk (ballot) and broadcasts it by shuffle.
// Chunks that no row of the block touches are skipped (block-wide vote).
template <class T, class Index, class Acc, int R, int KC>
__global__ void __launch_bounds__(256)
    csr_staged_b_kernel(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> epi,
                        Index const* rows, Index const* num_rows, std::int64_t launch_rows, bool vec) {
  constexpr int V = vec_width<T>, W = 32 * V, RW = R / 8;
  static_assert(R % 8 == 0, "csr_staged_b: rows per block must be a multiple of the 8 warps");
  constexpr int row_vecs = W / V;                     // 16-byte vectors per tile row (32)
  constexpr int tile_vecs = KC * row_vecs;            // per chunk
  static_assert(tile_vecs % 256 == 0, "csr_staged_b: KC * 32 must be a multiple of 256");
  __shared__ __align__(16) T bs[KC][W];
  int const lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  std::int64_t const m = rows ? static_cast<std::int64_t>(num_rows ? *num_rows : launch_rows) : launch_rows;
  std::int64_t const r0 = static_cast<std::int64_t>(blockIdx.y) * R;
  if (r0 >= m) return;  // uniform per block
  std::int64_t const n0 = static_cast<std::int64_t>(blockIdx.x) * W;
  std::int64_t row[RW], cur[RW], end[RW];
#pragma unroll
  for (int i = 0; i < RW; ++i) {
    std::int64_t const tr = r0 + warp * RW + i;
    row[i] = tr < m ? (rows ? static_cast<std::int64_t>(rows[tr]) : tr) : -1;
    cur[i] = row[i] >= 0 ? static_cast<std::int64_t>(a.row_ptr[row[i]]) : 0;
    end[i] = row[i] >= 0 ? static_cast<std::int64_t>(a.row_ptr[row[i] + 1]) : 0;
  }
  float acc[RW][V];
#pragma unroll
  for (int i = 0; i < RW; ++i)
#pragma unroll
    for (int e = 0; e < V; ++e) acc[i][e] = 0.f;

  for (std::int64_t k0 = 0; k0 < a.cols; k0 += KC) {
    std::int64_t const k1 = k0 + KC;
    // Does any row of the block have its next entry in this chunk? (lane i checks row i)
    bool need = false;
#pragma unroll
    for (int i = 0; i < RW; ++i)
      if (lane == i && cur[i] < end[i]) need = static_cast<std::int64_t>(a.col_idx[cur[i]]) < k1;
    if (!__syncthreads_or(need)) continue;
    // Stage B[k0 .. k1) x [n0 .. n0 + W) (zero outside B).
#pragma unroll
    for (int t = 0; t < tile_vecs / 256; ++t) {
      int const v = threadIdx.x + t * 256, kr = v / row_vecs, nc = (v % row_vecs) * V;
      std::int64_t const k = k0 + kr, n = n0 + nc;
      T* dst = &bs[kr][nc];
      if (vec && k < b.rows && n + V <= b.cols) {
        *reinterpret_cast<uint4*>(dst) = __ldg(reinterpret_cast<uint4 const*>(b.data + k * b.ld + n));
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e)
          dst[e] = (k < b.rows && n + e < b.cols) ? b.data[k * b.ld + n + e] : value_cast<T>(0.f);
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < RW; ++i) {
      while (cur[i] < end[i]) {  // warp-uniform
        std::int64_t const p = cur[i] + lane;
        std::int64_t my_col = k1;
        float my_val = 0.f;
        if (p < end[i]) {
          my_col = static_cast<std::int64_t>(a.col_idx[p]);
          my_val = value_cast<float>(a.values[p]);
        }
        // Columns are sorted: the entries inside the chunk are a prefix of the window.
        int const cnt = __popc(__ballot_sync(0xffffffffu, my_col < k1));
#pragma unroll 4
        for (int j = 0; j < cnt; ++j) {
          int const kk = static_cast<int>(__shfl_sync(0xffffffffu, my_col, j) - k0);
          float const val = __shfl_sync(0xffffffffu, my_val, j);
          float x[V];
          if constexpr (std::is_same_v<T, float>) {
            float4 const q = *reinterpret_cast<float4 const*>(&bs[kk][lane * V]);
            x[0] = q.x, x[1] = q.y, x[2] = q.z, x[3] = q.w;
          } else {
#pragma unroll
            for (int e = 0; e < V; e += 2) {
              float2 const f = __half22float2(*reinterpret_cast<__half2 const*>(&bs[kk][lane * V + e]));
              x[e] = f.x, x[e + 1] = f.y;
            }
          }
#pragma unroll
          for (int e = 0; e < V; ++e) acc[i][e] = fmaf(val, x[e], acc[i][e]);
        }
        cur[i] += cnt;
        if (cnt < 32) break;  // the row's next entry lies beyond this chunk (or the row ended)
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < RW; ++i) {
    if (row[i] < 0) continue;
    std::int64_t const j = n0 + static_cast<std::int64_t>(lane) * V;
    if (j < c.cols) store_slab_vector<T, V>(c.data + row[i] * c.ld, j, c.cols, acc[i], epi, vec);
  }
}

template <class Index>
struct nnz_share_target {
  std::int64_t share, ranges, nnz;
  __host__ __device__ Index operator()(std::int64_t w) const {
    // Range w starts at the first row whose row_ptr >= w * share; the end sentinel (w ==
    // ranges) is one past every row_ptr, so it lands on `rows`.
    return w == ranges ? static_cast<Index>(nnz + 1) : static_cast<Index>(w * share);
  }
};

inline bool slab_vectorisable(std::int64_t b_ld, std::int64_t c_ld, void const* b, void const* c, int v) {
  return b_ld % v == 0 && c_ld % v == 0 && aligned16(b) && aligned16(c);
}

inline unsigned row_groups(std::int64_t work, int warps) {
  std::int64_t const g = (work + warps - 1) / warps;
  return static_cast<unsigned>(g < 65535 ? (g > 0 ? g : 1) : 65535);
}

}  // namespace detail

// Columns covered by one warp of the CSR/ELL kernels.
template <class T, int U>
inline constexpr int spmm_slab_columns = 32 * U * detail::vec_width<T>;

// Row-split CSR SpMM over `launch_rows` rows (a.rows, or the capacity of the `rows` list
// whose device-side length is *num_rows). Enqueued on `stream`.
template <int U, int Warps, class T, class Index, class Acc>
void spmm_csr_row_split(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
                        Index const* rows, Index const* num_rows, std::int64_t launch_rows, cudaStream_t stream,
                        bool rows_in_x = false) {
  if (launch_rows <= 0 || b.cols <= 0) return;
  constexpr int slab = spmm_slab_columns<T, U>;
  bool const vec = detail::slab_vectorisable(b.ld, c.ld, b.data, c.data, detail::vec_width<T>);
  unsigned const slabs = static_cast<unsigned>((b.cols + slab - 1) / slab);
  std::int64_t const g = (launch_rows + Warps - 1) / Warps;
  dim3 const grid = rows_in_x ? dim3(static_cast<unsigned>(g < 0x7fffffff ? g : 0x7fffffff), slabs)
                              : dim3(slabs, detail::row_groups(launch_rows, Warps));
  detail::csr_row_split_kernel<T, Index, Acc, U, Warps>
      <<<grid, Warps * 32, 0, stream>>>(a, b, c, epi, rows, num_rows, launch_rows, vec, rows_in_x);
  SDNN_CUDA_CHECK_LAUNCH();
}

// Staged-B CSR SpMM over `launch_rows` rows (or the live-row list), see
// csr_staged_b_kernel. Enqueued on `stream`.
template <int R, int KC, class T, class Index, class Acc>
void spmm_csr_staged_b(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
                       Index const* rows, Index const* num_rows, std::int64_t launch_rows, cudaStream_t stream) {
  if (launch_rows <= 0 || b.cols <= 0) return;
  constexpr int W = 32 * detail::vec_width<T>;
  bool const vec = detail::slab_vectorisable(b.ld, c.ld, b.data, c.data, detail::vec_width<T>);
  std::int64_t const groups = (launch_rows + R - 1) / R;
  SDNN_EXPECTS(groups <= 65535, "spmm(csr_staged_b): ", launch_rows, " rows need ", groups,
               " row blocks, more than the grid's 65535");
  dim3 const grid(static_cast<unsigned>((b.cols + W - 1) / W), static_cast<unsigned>(groups));
  detail::csr_staged_b_kernel<T, Index, Acc, R, KC><<<grid, 256, 0, stream>>>(a, b, c, epi, rows, num_rows,
                                                                              launch_rows, vec);
  SDNN_CUDA_CHECK_LAUNCH();
}

// Plan-time cut of a device CSR into `ranges` contiguous row ranges of about
// ceil(nnz / ranges) nonzeros each: bounds[0 .. ranges] (device, ranges + 1 entries),
// bounds[0] = 0, bounds[ranges] = rows. Uses thrust::lower_bound on row_ptr[0 .. rows).
template <class T, class Index>
void csr_nnz_bounds(csr_view<T, Index> a, std::int64_t ranges, Index* bounds, cudaStream_t stream) {
  std::int64_t const share = (static_cast<std::int64_t>(a.nnz) + ranges - 1) / (ranges > 0 ? ranges : 1);
  auto targets = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                                 detail::nnz_share_target<Index>{share > 0 ? share : 1, ranges, a.nnz});
  thrust::lower_bound(thrust::cuda::par_nosync.on(stream), a.row_ptr, a.row_ptr + a.rows, targets,
                      targets + ranges + 1, bounds);
  SDNN_CUDA_CHECK_LAUNCH();
}

template <int U, int Warps, class T, class Index, class Acc>
void spmm_csr_nnz_balanced(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c,
                           basic_epilogue<Acc> const& epi, Index const* bounds, std::int64_t ranges,
                           cudaStream_t stream) {
  if (a.rows <= 0 || b.cols <= 0 || ranges <= 0) return;
  constexpr int slab = spmm_slab_columns<T, U>;
  bool const vec = detail::slab_vectorisable(b.ld, c.ld, b.data, c.data, detail::vec_width<T>);
  dim3 const grid(static_cast<unsigned>((b.cols + slab - 1) / slab), detail::row_groups(ranges, Warps));
  detail::csr_nnz_balanced_kernel<T, Index, Acc, U, Warps>
      <<<grid, Warps * 32, 0, stream>>>(a, b, c, epi, bounds, ranges, vec);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace sdnn::kernels
