// sdnn/linear/kernel/spmm_quantized.cuh - products with quantized CSR weights (formats/quantized.hpp)
// that decode the stored codes on the fly and accumulate in float:
//
//   quantized_dense_csc_spmm:  Y[M x N] = epi(X[M x K] * W[K x N])   (the sparse_linear forward)
//                              W given as W^T (N x K, CSR of codes = W in CSC; see below)
//   quantized_csr_spmm:        C[M x N] = epi(A[M x K] * B[K x N])   A quantized CSR, B dense
//
// Kernels and launchers. All pointers are device pointers; launches enqueue on exec.stream,
// no synchronisation. Encodings and exactness: docs/linear.md#quantized-products.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn::kernels {

// ---- device views ------------------------------------------------------------------------
// Device views of the host encodings of formats/quantized.hpp, uploaded by
// linear/op/quantized_spmm.cuh.

// int8: q[p], scale[g], zero[g] per group g (one group, or one per output channel = column
// of W); value = scale * float(q - zero), one float rounding, exactly int8_encoding::decode.
struct int8_values_view {
  std::int8_t const* q = nullptr;       // [nnz]
  float const* scale = nullptr;         // [groups]
  std::int32_t const* zero = nullptr;   // [groups] (0 when symmetric)
  bool per_channel = false;             // groups = channels (else one group)
};

// codebook4: a 4-bit index per entry (entry p in byte p / 2, low nibble when p is even)
// into 16 float entries (the half codebook widened, exact); the kernels copy the codebook
// into shared memory.
struct codebook4_values_view {
  std::uint8_t const* packed = nullptr;  // [(nnz + 1) / 2]
  float codebook[16] = {};               // by value: the kernels copy it into shared memory
};

// A CSR of quantized codes (32-bit indices). For the dense x sparse kernel it holds W^T
// (rows = N output channels, cols = K inputs) and an int8 channel is a row; for the sparse
// x dense kernel it holds A and an int8 channel is a column (as quantized_csr).
template <class Values>
struct quantized_csr_view {
  std::int32_t rows = 0, cols = 0, nnz = 0;
  std::int32_t const* row_ptr = nullptr;  // [rows + 1]
  std::int32_t const* col_idx = nullptr;  // [nnz]
  Values values;
};

namespace detail {

// Decoders: channel(g) reads the parameters of channel g once, value(p, ch) decodes entry p.
struct int8_channel {
  float scale = 1.f;
  int zero = 0;
};
struct int8_decoder {
  int8_values_view v;
  __device__ SDNN_FORCEINLINE int8_channel channel(std::int64_t g) const {
    std::int64_t const i = v.per_channel ? g : 0;
    return {v.scale[i], static_cast<int>(v.zero[i])};
  }
  __device__ SDNN_FORCEINLINE float value(std::int64_t p, int8_channel ch) const {
    return __fmul_rn(ch.scale, __int2float_rn(static_cast<int>(v.q[p]) - ch.zero));
  }
};

struct no_channel {};
struct codebook4_decoder {
  std::uint8_t const* packed;
  float const* cb;  // shared memory, 16 entries
  __device__ SDNN_FORCEINLINE no_channel channel(std::int64_t) const { return {}; }
  __device__ SDNN_FORCEINLINE float value(std::int64_t p, no_channel) const {
    unsigned const b = packed[p >> 1];
    return cb[(p & 1) ? (b >> 4) : (b & 0x0Fu)];
  }
};

// Fills the shared codebook (codebook4; no-op for int8) and returns the block's decoder.
// Called by every thread of the block before the first barrier of the kernel.
__device__ SDNN_FORCEINLINE int8_decoder make_decoder(int8_values_view const& v, float*) { return {v}; }
__device__ SDNN_FORCEINLINE codebook4_decoder make_decoder(codebook4_values_view const& v, float* cb) {
  if (threadIdx.x < 16) cb[threadIdx.x] = v.codebook[threadIdx.x];
  return {v.packed, cb};
}

// Floats per staged input: Rows, padded so the stride in 16-byte units is odd (see
// spmm_dense_csc.cuh: conflict-free 16-byte reads).
template <int Rows>
inline constexpr int q_stage_stride = (Rows / 4) % 2 == 1 ? Rows : Rows + 4;

// Shared memory for staged activation rows (as spmm_dense_csc.cuh).
inline constexpr std::size_t q_stage_bytes_limit = 96 * 1024;

// Bitwise equal to the host reference ops::quantized_dense_sparse_spmm (host_exec): every
// output (r, j) sums the entries of column j of W in ascending k (W^T's row j must list its
// entries in the order the host reference meets them: k ascending, storage order among
// duplicates), skips zero inputs (x[r, k] == 0), and rounds once per product and once per
// add (__fmul_rn / __fadd_rn, so nvcc cannot contract them into an FMA). Structure as
// dense_csc_spmm_kernel (linear/kernel/spmm_dense_csc.cuh): one thread per output column
// and Rows activation rows (register blocking); the Rows rows of X are staged in shared
// memory ([k][stride], 16-byte reads) when they fit, else gathered from global memory. The
// per-channel scale and zero point of a thread's column are read once.
template <int Rows, int Threads, bool Staged, class Values>
__global__ void __launch_bounds__(Threads)
    quantized_dense_csc_kernel(dense_view<float const> a, quantized_csr_view<Values> wt, dense_view<float> c,
                               basic_epilogue<float> epi) {
  static_assert(Rows % 4 == 0, "quantized_dense_csc_kernel: Rows must be a multiple of 4");
  extern __shared__ float4 q_stage4[];
  float* stage = reinterpret_cast<float*>(q_stage4);  // Staged: [k][q_stage_stride<Rows>]
  constexpr int SR = q_stage_stride<Rows>;
  __shared__ float cb[16];
  auto const dec = make_decoder(wt.values, cb);
  __syncthreads();

  std::int64_t const m = a.rows, n = wt.rows, k = wt.cols;
  std::int64_t const groups = (m + Rows - 1) / Rows;
  // Column tiles: staged, as few as keep every resident block busy (each tile re-stages its
  // rows); unstaged, one tile per Threads columns.
  std::int64_t const max_tiles = (n + Threads - 1) / Threads;
  std::int64_t col_tiles = max_tiles;
  if (Staged) {
    std::int64_t const want = groups > 0 ? (static_cast<std::int64_t>(gridDim.x) + groups - 1) / groups : 1;
    col_tiles = want < 1 ? 1 : (want > max_tiles ? max_tiles : want);
  }
  std::int64_t const cols_per_tile = ((max_tiles + col_tiles - 1) / col_tiles) * Threads;
  std::int64_t const items = groups * col_tiles;

  for (std::int64_t w = blockIdx.x; w < items; w += gridDim.x) {
    std::int64_t const g = w / col_tiles, tile = w % col_tiles;
    std::int64_t const r0 = g * Rows;
    int const here = static_cast<int>(m - r0 < Rows ? m - r0 : Rows);
    if constexpr (Staged) {
      __syncthreads();  // the previous item's reads of the stage are done
      for (int r = 0; r < Rows; ++r) {
        float const* src = r < here ? a.data + (r0 + r) * a.ld : nullptr;
        for (std::int64_t kk = threadIdx.x; kk < k; kk += Threads) stage[kk * SR + r] = src ? src[kk] : 0.f;
      }
      __syncthreads();
    }
    float const* src[Rows];
    if constexpr (!Staged) {
#pragma unroll
      for (int r = 0; r < Rows; ++r) src[r] = a.data + (r0 + (r < here ? r : here - 1)) * a.ld;  // dead rows: discarded
    }
    std::int64_t const j1 = min(n, (tile + 1) * cols_per_tile);
    for (std::int64_t j = tile * cols_per_tile + threadIdx.x; j < j1; j += Threads) {
      float acc[Rows];
#pragma unroll
      for (int r = 0; r < Rows; ++r) acc[r] = 0.f;
      std::int64_t const pb = wt.row_ptr[j], pe = wt.row_ptr[j + 1];
      // A column without entries reads no parameters (a container may hold none for it).
      auto const ch = pb < pe ? dec.channel(j) : decltype(dec.channel(j)){};
#pragma unroll 2
      for (std::int64_t p = pb; p < pe; ++p) {
        std::int64_t const kk = wt.col_idx[p];
        float const wv = dec.value(p, ch);
        float x[Rows];
        if constexpr (Staged) {
          float4 const* s = reinterpret_cast<float4 const*>(stage + kk * SR);
#pragma unroll
          for (int q = 0; q < Rows / 4; ++q) {
            float4 const v = s[q];
            x[4 * q + 0] = v.x;
            x[4 * q + 1] = v.y;
            x[4 * q + 2] = v.z;
            x[4 * q + 3] = v.w;
          }
        } else {
#pragma unroll
          for (int r = 0; r < Rows; ++r) x[r] = src[r][kk];
        }
#pragma unroll
        for (int r = 0; r < Rows; ++r)  // zero inputs skipped, as the host reference
          acc[r] = x[r] != 0.f ? __fadd_rn(acc[r], __fmul_rn(x[r], wv)) : acc[r];
      }
#pragma unroll
      for (int r = 0; r < Rows; ++r)
        if (r < here) c.data[(r0 + r) * c.ld + j] = epi(acc[r], j);
    }
  }
}

template <int Rows, int Threads, bool Staged, class Values>
void launch_quantized_dense_csc(dense_view<float const> a, quantized_csr_view<Values> wt, dense_view<float> c,
                                basic_epilogue<float> const& epi, cuda_exec exec) {
  auto kernel = quantized_dense_csc_kernel<Rows, Threads, Staged, Values>;
  std::size_t const smem =
      Staged ? static_cast<std::size_t>(wt.cols) * q_stage_stride<Rows> * sizeof(float) : std::size_t(0);
  ::sdnn::detail::allow_dynamic_smem(kernel, smem);  // here, by the launch: see core/cuda.cuh
  int per_sm = 0;
  SDNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Threads, smem));
  per_sm = std::max(per_sm, 1);
  std::int64_t const groups = (a.rows + Rows - 1) / Rows;
  std::int64_t const tiles = (static_cast<std::int64_t>(wt.rows) + Threads - 1) / Threads;
  std::int64_t const grid =
      std::min<std::int64_t>(groups * tiles, static_cast<std::int64_t>(sdnn::detail::sm_count()) * per_sm);
  if (grid <= 0) return;
  kernel<<<static_cast<unsigned>(grid), Threads, smem, exec.stream>>>(a, wt, c, epi);
  SDNN_CUDA_CHECK_LAUNCH();
}

// One warp per row of A and slab of 32 * U columns of B; the warp decodes 32 entries of its
// row at once (one per lane) and broadcasts them by shuffle; each lane accumulates its U
// columns with fmaf. Its float sums differ from the host reference (which sums in double and
// rounds once) only by float rounding: at most about nnz(row) * 2^-24 * sum_k |a_ik b_kj|
// (plus one rounding of the epilogue's adds).
template <int U, int Warps, class Values>
__global__ void __launch_bounds__(Warps * 32)
    quantized_csr_spmm_kernel(quantized_csr_view<Values> a, dense_view<float const> b, dense_view<float> c,
                              basic_epilogue<float> epi) {
  __shared__ float cb[16];
  auto const dec = make_decoder(a.values, cb);
  __syncthreads();
  int const lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  std::int64_t const n0 = static_cast<std::int64_t>(blockIdx.x) * (32 * U);
  for (std::int64_t row = static_cast<std::int64_t>(blockIdx.y) * Warps + warp; row < a.rows;
       row += static_cast<std::int64_t>(gridDim.y) * Warps) {
    float acc[U];
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] = 0.f;
    std::int64_t const pb = a.row_ptr[row], pe = a.row_ptr[row + 1];
    for (std::int64_t base = pb; base < pe; base += 32) {
      std::int64_t const p = base + lane;
      std::int32_t my_col = 0;
      float my_val = 0.f;
      if (p < pe) {
        my_col = a.col_idx[p];
        my_val = dec.value(p, dec.channel(my_col));
      }
      int const cnt = pe - base < 32 ? static_cast<int>(pe - base) : 32;
#pragma unroll 4
      for (int t = 0; t < cnt; ++t) {
        std::int64_t const col = __shfl_sync(0xffffffffu, my_col, t);
        float const val = __shfl_sync(0xffffffffu, my_val, t);
        float const* brow = b.data + col * b.ld;
#pragma unroll
        for (int u = 0; u < U; ++u) {
          std::int64_t const j = n0 + u * 32 + lane;
          if (j < b.cols) acc[u] = fmaf(val, brow[j], acc[u]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      std::int64_t const j = n0 + u * 32 + lane;
      if (j < c.cols) c.data[row * c.ld + j] = epi(acc[u], j);
    }
  }
}

}  // namespace detail

// Y = epi(X * W), W (K x N) given as wt = W^T (N x K quantized CSR view, device; int8 channel
// = row of wt). X: M x K, Y: M x N (row-major, any ld >= cols). Bitwise equal to the host
// reference (see quantized_dense_csc_kernel). epi.bias: device pointer (or nullptr).
template <class Values>
void quantized_dense_csc_spmm(dense_view<float const> x, quantized_csr_view<Values> wt, dense_view<float> y,
                              basic_epilogue<float> const& epi, cuda_exec exec) {
  SDNN_EXPECTS_DIMS(x.cols == wt.cols && y.rows == x.rows && y.cols == wt.rows, "quantized_dense_csc_spmm: X ",
                    x.rows, " x ", x.cols, ", W ", wt.cols, " x ", wt.rows, ", Y ", y.rows, " x ", y.cols);
  if (x.rows == 0 || wt.rows == 0) return;
  std::size_t const row_bytes = static_cast<std::size_t>(wt.cols) * sizeof(float);
  using detail::q_stage_bytes_limit;
  using detail::q_stage_stride;
  if (row_bytes * q_stage_stride<8> <= q_stage_bytes_limit)
    return detail::launch_quantized_dense_csc<8, 256, true>(x, wt, y, epi, exec);
  if (row_bytes * q_stage_stride<4> <= q_stage_bytes_limit)
    return detail::launch_quantized_dense_csc<4, 256, true>(x, wt, y, epi, exec);
  detail::launch_quantized_dense_csc<4, 256, false>(x, wt, y, epi, exec);
}

// C = epi(A * B), A (M x K quantized CSR view, device; int8 channel = column), B: K x N,
// C: M x N (row-major, any ld >= cols). Float accumulation (see quantized_csr_spmm_kernel).
template <class Values>
void quantized_csr_spmm(quantized_csr_view<Values> a, dense_view<float const> b, dense_view<float> c,
                        basic_epilogue<float> const& epi, cuda_exec exec) {
  SDNN_EXPECTS_DIMS(b.rows == a.cols && c.rows == a.rows && c.cols == b.cols, "quantized_csr_spmm: A ", a.rows, " x ",
                    a.cols, ", B ", b.rows, " x ", b.cols, ", C ", c.rows, " x ", c.cols);
  constexpr int U = 4, Warps = 4;
  if (a.rows == 0 || b.cols == 0) return;
  std::int64_t const slabs = (b.cols + 32 * U - 1) / (32 * U);
  std::int64_t const row_groups = std::min<std::int64_t>((a.rows + Warps - 1) / Warps, 65535);
  SDNN_EXPECTS(slabs <= 0x7FFFFFFF, "quantized_csr_spmm: ", b.cols, " columns are too many for one launch");
  dim3 const grid(static_cast<unsigned>(slabs), static_cast<unsigned>(row_groups));
  detail::quantized_csr_spmm_kernel<U, Warps><<<grid, Warps * 32, 0, exec.stream>>>(a, b, c, epi);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace sdnn::kernels
