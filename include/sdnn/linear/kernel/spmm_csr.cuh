// sdnn/linear/kernel/spmm_csr.cuh - sparse x dense products with a CSR left operand and their
// launchers:
//
//   C[M x N] = epi(A_csr[M x K] * B[K x N]), B and C row-major, T = float or a 16-bit type
//   (float accumulation).
//
// Row-split, staged-B and nnz-balanced kernels, and the nnz-split machinery the COO kernel
// shares. How each maps warps to rows and nonzeros: docs/linear.md#csr-kernels.
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
#include "sdnn/core/numeric.cuh"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/linear/kernel/gemm_tiled.cuh"

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
      for (int i = 0; i < 4; ++i) w[i] = pack2_float<T>(v[2 * i], v[2 * i + 1]);
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

// Row split (policy::csr_row_split): one warp per (row, column slab). A slab is 32 lanes x U
// 16-byte vectors (float: 128*U columns, __half: 256*U columns); lane l owns vectors l, l+32,
// ..., so each B-row read is U fully coalesced 512-byte transactions. The warp loads 32 (col,
// value) pairs of its row at once (one coalesced load each), broadcasts them by shuffle, and
// unrolls the nonzero loop by 4 so 4*U independent B loads are in flight. Warp slot w takes
// row w, or rows[w] for w < *num_rows (compacted live rows). The slab index is blockIdx.x
// (fastest), so the warps of all slabs of a row run together and A's row is read from L1/L2
// once per row in practice.
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

// ---------------------------------------------------------------------------------------
// nnz-split machinery, shared by csr_nnz_balanced_kernel (below) and coo_nnz_split_kernel
// (spmm_coo.cuh). The idea is the carry-out fix-up of merge-path SpMV (Merrill & Garland;
// CUB's DeviceSpmv), made deterministic:
//
// The nonzeros [0, nnz) are cut into `chunks` chunks of `chunk` entries (the last one
// shorter); one warp takes a (chunk, column slab). A row's entries are contiguous, so a
// chunk is a sequence of row runs, each accumulated in registers. A run that is a whole
// row gets the epilogue and goes straight to C (fused). Only the first run can have begun
// in an earlier chunk and only the last can go on into the next one; their partial sums
// go to a float carry buffer of two rows (ld = nnz_split_carry_ld(N)) per chunk:
//   slot 0 (row 2 * chunk):     the first run, when its row began in an earlier chunk
//                               (also when that row goes on past this chunk);
//   slot 1 (row 2 * chunk + 1): the last run, when its row begins in this chunk and goes on.
// nnz_split_fixup_kernel then takes each row that crosses a chunk boundary once (from the
// chunk where it begins), sums slot 1 of that chunk and slot 0 of each later chunk the row
// reaches, in a fixed order (so results are bitwise reproducible), applies the epilogue
// and stores. Every element of C is written exactly once, by one of the two kernels.
//
// Rows without entries get epi(0) from the warp that owns the place where they sit: rows
// between two runs from the chunk holding the later run's first entry, rows before the
// first entry from chunk 0, rows after the last entry from the last chunk (nnz = 0:
// fill_epilogue_zero_kernel over all of C). A gap of g empty rows costs that warp g row
// stores spread over its 32 lanes; a huge gap is therefore written by a single warp.
//
// The format-specific part is a `Crossing` functor: crossing(c) = the row that has entries
// on both sides of the boundary between chunks c and c + 1, else -1 (also for c >= chunks - 1).

// Carry row length: N rounded up to 4 floats so every lane stores 16-byte vectors.
inline std::int64_t nnz_split_carry_ld(std::int64_t n) { return (n + 3) / 4 * 4; }

template <int U, int V>
__device__ SDNN_FORCEINLINE void zero_acc(float (&acc)[U][V]) {
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int e = 0; e < V; ++e) acc[u][e] = 0.f;
}

// The warp's slab of a partial row sum into carry row `krow` (no epilogue).
template <int U, int V>
__device__ SDNN_FORCEINLINE void warp_store_carry(float* krow, std::int64_t n, std::int64_t n0, int lane,
                                                  float const (&acc)[U][V]) {
  static_assert(V % 4 == 0, "warp_store_carry: whole float4 groups");
#pragma unroll
  for (int u = 0; u < U; ++u) {
    std::int64_t const j = n0 + (static_cast<std::int64_t>(u) * 32 + lane) * V;
#pragma unroll
    for (int g = 0; g < V; g += 4)  // j + g < n implies j + g + 3 < ld (a multiple of 4)
      if (j + g < n)
        *reinterpret_cast<float4*>(krow + j + g) = make_float4(acc[u][g], acc[u][g + 1], acc[u][g + 2], acc[u][g + 3]);
  }
}

// epi(0) into rows [r0, r1) of the warp's slab. The (row, vector) pairs are spread over
// the lanes, so a narrow C (few vectors per row) still uses every lane.
template <class T, int U, int V, class Acc>
__device__ SDNN_FORCEINLINE void warp_fill_rows(dense_view<T> c, std::int64_t r0, std::int64_t r1, std::int64_t n0,
                                                int lane, basic_epilogue<Acc> const& epi, bool vec) {
  if (r1 <= r0) return;
  std::int64_t const width = c.cols - n0 < 32 * U * V ? c.cols - n0 : 32 * U * V;
  std::int64_t const per_row = (width + V - 1) / V;
  float const zero[V] = {};
  for (std::int64_t i = lane; i < (r1 - r0) * per_row; i += 32) {
    std::int64_t const r = r0 + i / per_row, j = n0 + (i % per_row) * V;
    store_slab_vector<T, V>(c.data + r * c.ld, j, c.cols, zero, epi, vec);
  }
}

// Ends the run of `row` held in acc: a whole row (it neither began in an earlier chunk nor
// goes on) is stored through the epilogue; a partial one goes to the chunk's carry slot
// (`slots` = carry row 2 * chunk). acc is zeroed for the next run.
template <class T, int U, int V, class Acc>
__device__ SDNN_FORCEINLINE void nnz_split_end_run(dense_view<T> c, std::int64_t row, bool began_before, bool goes_on,
                                                   float* slots, std::int64_t ldk, std::int64_t n0, int lane,
                                                   float (&acc)[U][V], basic_epilogue<Acc> const& epi, bool vec) {
  if (!began_before && !goes_on)
    warp_store_row<T, U, V>(c, row, n0, lane, acc, epi, vec);
  else
    warp_store_carry<U, V>(slots + (began_before ? 0 : ldk), c.cols, n0, lane, acc);
  zero_acc<U, V>(acc);
}

// The fix-up after an nnz-split kernel. One block of 256 threads per (column tile of 128
// columns, chunk c); blocks whose chunk is not the first chunk of a boundary-crossing row
// leave at once. For a crossing row the partials are slot 1 of c, then slot 0 of c + 1 ..
// last. The tile's G column groups (4 columns each) get S = 256 / G threads each: thread k
// of a group sums partials k, k + S, k + 2S, ... in order, then the group's first thread
// adds the S sums in order, applies the epilogue and stores. The order depends only on
// the structure and N, so results are reproducible, and a row spread over thousands of
// chunks is summed by all 256 threads of the block (a narrow C puts them on the partials).
template <class T, class Acc, class Crossing>
__global__ void __launch_bounds__(256)
    nnz_split_fixup_kernel(Crossing crossing, std::int64_t chunks, float const* carry, std::int64_t ldk,
                           dense_view<T> c, basic_epilogue<Acc> epi) {
  __shared__ float4 sums[256];
  int const t = threadIdx.x, lane = t & 31;
  std::int64_t const j0 = static_cast<std::int64_t>(blockIdx.x) * 128;
  int const groups = c.cols - j0 >= 128 ? 32 : static_cast<int>((c.cols - j0 + 3) / 4);
  int const per_group = 256 / groups, g = t % groups, k = t / groups;
  std::int64_t const j = j0 + 4 * g;
  for (std::int64_t ch = blockIdx.y; ch + 1 < chunks; ch += gridDim.y) {
    std::int64_t const row = crossing(ch);
    if (row < 0 || (ch > 0 && crossing(ch - 1) == row)) continue;  // block-uniform
    // last = the first chunk after ch that the row does not cross out of. The chunks the
    // row crosses out of are contiguous, so this is a search for the first true of a
    // monotone predicate; each warp runs it (32 probes per step, cached loads).
    std::int64_t lo = ch + 1, hi = chunks - 1, last = -1;  // crossing(chunks - 1) = -1
    while (last < 0) {
      std::int64_t const step = (hi - lo + 32) / 32, probe = lo + lane * step;
      unsigned const m = __ballot_sync(0xffffffffu, probe >= hi || crossing(probe) != row);
      if (m == 0) {
        lo += 31 * step + 1;
        continue;
      }
      int const f = __ffs(static_cast<int>(m)) - 1;
      if (f == 0 || step == 1) {
        last = lo + f * step < hi ? lo + f * step : hi;
      } else {
        std::int64_t const nlo = lo + (f - 1) * step + 1;
        hi = lo + f * step < hi ? lo + f * step : hi;
        lo = nlo;
      }
    }
    std::int64_t const parts = last - ch + 1;  // partial 0: slot 1 of ch; partial i: slot 0 of ch + i
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
    if (k < per_group) {
      for (std::int64_t i = k; i < parts; i += per_group) {
        float4 const x = *reinterpret_cast<float4 const*>(carry + (i == 0 ? 2 * ch + 1 : 2 * (ch + i)) * ldk + j);
        s.x += x.x, s.y += x.y, s.z += x.z, s.w += x.w;
      }
    }
    sums[t] = s;
    __syncthreads();
    if (t < groups) {  // t == g, k == 0
      for (int q = 1; q < per_group; ++q) {
        float4 const x = sums[q * groups + t];
        s.x += x.x, s.y += x.y, s.z += x.z, s.w += x.w;
      }
      float const v[4] = {s.x, s.y, s.z, s.w};
      T* const crow = c.data + row * c.ld;
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (j + e < c.cols) crow[j + e] = value_cast<T>(epi(static_cast<Acc>(v[e]), j + e));
    }
    __syncthreads();  // sums is reused for the next chunk
  }
}

// C = epi(0) everywhere (an operand without nonzeros).
template <class T, class Acc>
__global__ void fill_epilogue_zero_kernel(dense_view<T> c, basic_epilogue<Acc> epi) {
  for (std::int64_t i = blockIdx.x; i < c.rows; i += gridDim.x)
    for (std::int64_t j = threadIdx.x; j < c.cols; j += blockDim.x)
      c.data[i * c.ld + j] = value_cast<T>(epi(Acc(0), j));
}

// CSR crossing: bounds[c + 1] is the first row that begins at or after q = (c + 1) * chunk,
// so the row before it crosses q exactly when it ends after q.
template <class Index>
struct csr_crossing {
  Index const* row_ptr;
  Index const* bounds;
  std::int64_t chunk, chunks;
  __device__ std::int64_t operator()(std::int64_t c) const {
    if (c + 1 >= chunks) return -1;
    std::int64_t const r = bounds[c + 1];  // >= 1: row_ptr[0] = 0 < q
    return static_cast<std::int64_t>(row_ptr[r]) > (c + 1) * chunk ? r - 1 : -1;
  }
};

// nnz-balanced CSR: warp w takes the nonzeros [w * share, (w + 1) * share) of a column
// slab. Its rows are the one that began earlier and reaches into the share (partial, slot
// 0), then rows [bounds[w], bounds[w + 1]) - those that begin in the share, empty ones
// included - walked through row_ptr; the last may go on (partial, slot 1). A row longer
// than the share is thus spread over many warps.
template <class T, class Index, class Acc, int U, int Warps>
__global__ void __launch_bounds__(Warps * 32)
    csr_nnz_balanced_kernel(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> epi,
                            Index const* bounds, std::int64_t share, std::int64_t ranges, float* carry,
                            std::int64_t ldk, bool vec) {
  constexpr int V = vec_width<T>;
  int const lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  std::int64_t const n0 = static_cast<std::int64_t>(blockIdx.x) * (32 * U * V);
  std::int64_t const nnz = a.nnz;
  auto const col_of = [&](std::int64_t p) { return a.col_idx[p]; };
  auto const value_of = [&](std::int64_t p) { return a.values[p]; };
  for (std::int64_t w = static_cast<std::int64_t>(blockIdx.y) * Warps + warp; w < ranges;
       w += static_cast<std::int64_t>(gridDim.y) * Warps) {
    std::int64_t const begin = w * share, end = begin + share < nnz ? begin + share : nnz;
    std::int64_t const r_lo = bounds[w], r_hi = bounds[w + 1];
    float* const slots = carry + 2 * w * ldk;
    float acc[U][V];
    zero_acc<U, V>(acc);
    // Row r_lo - 1 began in an earlier share and reaches into this one when the first row
    // that begins here begins after `begin`: start the walk one row early, at `begin`.
    // (One call site of the product loop keeps the kernel's registers down.)
    std::int64_t const first_start = a.row_ptr[r_lo];
    bool const continued = first_start > begin;
    std::int64_t row = continued ? r_lo - 1 : r_lo, s = continued ? begin : first_start;
    std::int64_t gap = r_lo;  // first row of the current run of empty rows
    for (; row < r_hi; ++row) {
      std::int64_t const t = row < r_lo ? first_start : static_cast<std::int64_t>(a.row_ptr[row + 1]);
      if (t != s) {
        warp_fill_rows<T, U, V>(c, gap, row, n0, lane, epi, vec);
        gap = row + 1;
        warp_row_product<T, U, V>(s, t < end ? t : end, col_of, value_of, b, n0, lane, acc, vec);
        nnz_split_end_run<T, U, V>(c, row, row < r_lo, t > end, slots, ldk, n0, lane, acc, epi, vec);
      }
      s = t;
    }
    warp_fill_rows<T, U, V>(c, gap, r_hi, n0, lane, epi, vec);
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
              float2 const f = unpack2_float<T>(*reinterpret_cast<unsigned const*>(&bs[kk][lane * V + e]));
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
  __host__ __device__ std::int64_t operator()(std::int64_t w) const {
    // Share w's rows start at the first row whose row_ptr >= w * share (the rows that
    // begin in the share, empty ones included); the end sentinel (w == ranges) is one past
    // every row_ptr, so it lands on `rows`. In 64 bits, compared with the Index row_ptr:
    // nnz + 1 does not fit an int32 Index when nnz = INT32_MAX.
    return w == ranges ? nnz + 1 : w * share;
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
// whose device-side length is *num_rows); rows_in_x puts the row groups on grid x (policy::
// csr_row_split's X). Enqueued on exec.stream.
template <int U, int Warps, class T, class Index, class Acc>
void spmm_csr_row_split(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
                        Index const* rows, Index const* num_rows, std::int64_t launch_rows, bool rows_in_x,
                        cuda_exec exec) {
  if (launch_rows <= 0 || b.cols <= 0) return;
  constexpr int slab = spmm_slab_columns<T, U>;
  bool const vec = detail::slab_vectorisable(b.ld, c.ld, b.data, c.data, detail::vec_width<T>);
  // One block column per slab, no loop over slabs: the slabs must fit grid y (rows_in_x) or x.
  std::int64_t const slab_count = (b.cols + slab - 1) / slab;
  SDNN_EXPECTS(slab_count <= (rows_in_x ? 65535 : 0x7fffffff), "spmm(csr_row_split): N = ", b.cols, " needs ",
               slab_count, " column slabs of ", slab, ", more than grid ",
               rows_in_x ? "y (65535; use rows in y)" : "x");
  unsigned const slabs = static_cast<unsigned>(slab_count);
  std::int64_t const g = (launch_rows + Warps - 1) / Warps;
  dim3 const grid = rows_in_x ? dim3(static_cast<unsigned>(g < 0x7fffffff ? g : 0x7fffffff), slabs)
                              : dim3(slabs, detail::row_groups(launch_rows, Warps));
  detail::csr_row_split_kernel<T, Index, Acc, U, Warps>
      <<<grid, Warps * 32, 0, exec.stream>>>(a, b, c, epi, rows, num_rows, launch_rows, vec, rows_in_x);
  SDNN_CUDA_CHECK_LAUNCH();
}

// Staged-B CSR SpMM over `launch_rows` rows (or the live-row list), see
// csr_staged_b_kernel. Enqueued on exec.stream.
template <int R, int KC, class T, class Index, class Acc>
void spmm_csr_staged_b(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
                       Index const* rows, Index const* num_rows, std::int64_t launch_rows, cuda_exec exec) {
  if (launch_rows <= 0 || b.cols <= 0) return;
  constexpr int W = 32 * detail::vec_width<T>;
  bool const vec = detail::slab_vectorisable(b.ld, c.ld, b.data, c.data, detail::vec_width<T>);
  std::int64_t const groups = (launch_rows + R - 1) / R;
  SDNN_EXPECTS(groups <= 65535, "spmm(csr_staged_b): ", launch_rows, " rows need ", groups,
               " row blocks, more than the grid's 65535");
  dim3 const grid(static_cast<unsigned>((b.cols + W - 1) / W), static_cast<unsigned>(groups));
  detail::csr_staged_b_kernel<T, Index, Acc, R, KC><<<grid, 256, 0, exec.stream>>>(a, b, c, epi, rows, num_rows,
                                                                              launch_rows, vec);
  SDNN_CUDA_CHECK_LAUNCH();
}

// The cut of nnz nonzeros into chunks for the nnz-split kernels: about `target` chunks of
// at least `min_chunk` entries; chunks = ceil(nnz / chunk), so none is empty (0 if nnz = 0).
struct nnz_split_shape {
  std::int64_t chunk = 1, chunks = 0;
};
inline nnz_split_shape nnz_split_cut(std::int64_t nnz, std::int64_t target, std::int64_t min_chunk) {
  SDNN_EXPECTS(nnz >= 0 && min_chunk >= 1, "nnz_split_cut: nnz ", nnz, ", min_chunk ", min_chunk);
  std::int64_t const t = target > 0 ? target : 1;
  std::int64_t const even = (nnz + t - 1) / t;
  nnz_split_shape s;
  s.chunk = even > min_chunk ? even : min_chunk;
  s.chunks = (nnz + s.chunk - 1) / s.chunk;
  return s;
}

// Chunk count for the nnz-split plans: about 64 warps per SM (the H100/H200 residency
// limit) over all column slabs of an N-column product, at least one chunk per SM. Fewer
// chunks than nnz / 32 only make chunks longer (still balanced) and keep the carry at
// O(SMs * slab width) floats. Not yet tuned by measurement.
inline std::int64_t nnz_split_target_chunks(std::int64_t n, std::int64_t slab_columns) {
  std::int64_t const sms = ::sdnn::detail::sm_count();
  std::int64_t const slabs = n > 0 ? (n + slab_columns - 1) / slab_columns : 1;
  std::int64_t const t = sms * 64 / slabs;
  return t > sms ? t : sms;
}

// Floats of carry the nnz-split kernels need for `chunks` chunks and N columns (two rows
// per chunk, see the nnz-split notes above).
inline std::size_t nnz_split_carry_elements(std::int64_t chunks, std::int64_t n) {
  return static_cast<std::size_t>(2 * chunks) * static_cast<std::size_t>(detail::nnz_split_carry_ld(n));
}

namespace detail {
// The fix-up pass after an nnz-split kernel (nothing to do with a single chunk).
template <class T, class Acc, class Crossing>
void nnz_split_fixup(Crossing crossing, std::int64_t chunks, float const* carry, dense_view<T> c,
                     basic_epilogue<Acc> const& epi, cuda_exec exec) {
  if (chunks < 2 || c.cols <= 0) return;
  dim3 const grid(static_cast<unsigned>((c.cols + 127) / 128),
                  static_cast<unsigned>(chunks - 1 < 65535 ? chunks - 1 : 65535));
  nnz_split_fixup_kernel<<<grid, 256, 0, exec.stream>>>(crossing, chunks, carry, nnz_split_carry_ld(c.cols), c, epi);
  SDNN_CUDA_CHECK_LAUNCH();
}
template <class T, class Acc>
void fill_epilogue_zero(dense_view<T> c, basic_epilogue<Acc> const& epi, cuda_exec exec) {
  std::int64_t const blocks = c.rows < 65535 ? c.rows : 65535;
  fill_epilogue_zero_kernel<<<static_cast<unsigned>(blocks), 256, 0, exec.stream>>>(c, epi);
  SDNN_CUDA_CHECK_LAUNCH();
}
}  // namespace detail

// Plan-time cut of a device CSR for the nnz-balanced kernel: shares of `share` nonzeros
// (ranges = ceil(nnz / share), from nnz_split_cut), bounds[w] = the first row whose
// row_ptr >= w * share (device, ranges + 1 entries; bounds[0] = 0, bounds[ranges] = rows).
// One thrust::lower_bound on row_ptr[0 .. rows), enqueued on exec.stream, no synchronisation.
template <class T, class Index>
void csr_nnz_bounds(csr_view<T, Index> a, std::int64_t share, std::int64_t ranges, Index* bounds,
                    cuda_exec exec) {
  SDNN_EXPECTS(share >= 1 && ranges >= 1, "csr_nnz_bounds: share ", share, ", ranges ", ranges);
  auto targets = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                                 detail::nnz_share_target<Index>{share, ranges, a.nnz});
  thrust::lower_bound(thrust::cuda::par_nosync.on(exec.stream), a.row_ptr, a.row_ptr + a.rows, targets,
                      targets + ranges + 1, bounds);
  SDNN_CUDA_CHECK_LAUNCH();
}

// nnz-balanced CSR SpMM: csr_nnz_balanced_kernel over the shares, then the fix-up of rows
// that cross shares. bounds / share / ranges from csr_nnz_bounds (ranges = ceil(nnz /
// share)); carry: nnz_split_carry_elements(ranges, b.cols) floats of device workspace
// (contents need no initialisation; a plan's runs must not overlap). Enqueued on exec.stream.
template <int U, int Warps, class T, class Index, class Acc>
void spmm_csr_nnz_balanced(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c,
                           basic_epilogue<Acc> const& epi, Index const* bounds, std::int64_t share,
                           std::int64_t ranges, float* carry, cuda_exec exec) {
  if (a.rows <= 0 || b.cols <= 0) return;
  if (a.nnz == 0) return detail::fill_epilogue_zero(c, epi, exec);
  SDNN_EXPECTS(share >= 1 && ranges == (static_cast<std::int64_t>(a.nnz) + share - 1) / share,
               "spmm(csr_nnz_balanced): ", ranges, " shares of ", share, " do not cut ", a.nnz, " nonzeros");
  constexpr int slab = spmm_slab_columns<T, U>;
  bool const vec = detail::slab_vectorisable(b.ld, c.ld, b.data, c.data, detail::vec_width<T>);
  std::int64_t const ldk = detail::nnz_split_carry_ld(b.cols);
  dim3 const grid(static_cast<unsigned>((b.cols + slab - 1) / slab), detail::row_groups(ranges, Warps));
  detail::csr_nnz_balanced_kernel<T, Index, Acc, U, Warps>
      <<<grid, Warps * 32, 0, exec.stream>>>(a, b, c, epi, bounds, share, ranges, carry, ldk, vec);
  SDNN_CUDA_CHECK_LAUNCH();
  detail::nnz_split_fixup(detail::csr_crossing<Index>{a.row_ptr, bounds, share, ranges}, ranges, carry, c, epi,
                          exec);
}

}  // namespace sdnn::kernels
