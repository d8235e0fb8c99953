// sdnn/linear/arch/staged_store.cuh - the last step of the tensor-core kernels that stage their
// output tile in shared memory (linear/kernel/tc_block_tma.cuh, sparse24_mma.cuh): rows of Out,
// or of float accumulators that the epilogue finishes on the way, copied to Y in 16-byte pieces.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "sdnn/core/numeric.cuh"

namespace sdnn::kernels {

// Whether Y (row pitch ld elements of elem_bytes) takes store_staged_rows' 16-byte pieces: Y and
// ld * elem_bytes multiples of 16 bytes. Computed once per launch by the plan.
inline bool staged_rows_vec(void const* y, std::int64_t ld, std::size_t elem_bytes) {
  return reinterpret_cast<std::uintptr_t>(y) % 16 == 0 && (static_cast<std::uint64_t>(ld) * elem_bytes) % 16 == 0;
}

// Copies Rows x Cols values of Out staged in shared memory (row r at s + r * pitch elements; rows
// and pitch multiples of 16 bytes) to Y (row pitch ld elements): staged row r goes to Y row
// row0 + r from column col0 on; rows from n and columns from m on are not written. A 16-byte piece
// is one store where vec (Y and ld * sizeof(Out) multiples of 16 bytes) and it ends within m,
// element by element otherwise. The pieces go to threads first, first + step, ...
template <int Rows, int Cols, class Out>
__device__ __forceinline__ void store_staged_rows(Out const* s, int pitch, Out* y, std::int64_t ld, int row0, int col0,
                                                  int n, int m, bool vec, int first, int step) {
  constexpr int PER = 16 / static_cast<int>(sizeof(Out)), PIECES = Cols / PER;  // a row's 16-byte pieces
  static_assert(Cols % PER == 0, "store_staged_rows: rows of whole 16-byte pieces");
  for (int q = first; q < Rows * PIECES; q += step) {
    int const r = q / PIECES, c = (q % PIECES) * PER, row = row0 + r, col = col0 + c;
    if (row >= n || col >= m) continue;
    Out const* const src = s + r * pitch + c;
    Out* const dst = y + static_cast<std::int64_t>(row) * ld + col;
    if (vec && col + PER <= m) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<uint4 const*>(src);
    } else {
      for (int e = 0; e < PER && col + e < m; ++e) dst[e] = src[e];
    }
  }
}

namespace staged_detail {
template <class Out>
__device__ __forceinline__ Out round_to(float v) {
  if constexpr (std::is_same_v<Out, float>) return v;
  else if constexpr (std::is_same_v<Out, __nv_bfloat16>) return __float2bfloat16_rn(v);
  else return __float2half_rn(v);
}
}  // namespace staged_detail

// store_staged_rows for a tile staged as float accumulators (row r at s + r * pitch floats; s and
// pitch multiples of 16 bytes): each value goes through epi in its two steps (bias_at(col),
// apply), the same bits as epi(value, col), and is rounded once to Out. The loop is kept rolled:
// unrolled over every accumulator of a thread, the same work was straight-line code that ran
// once a tile and missed the instruction cache all the way (ncu, the 2:4 kernel at 128 columns).
template <int Rows, int Cols, class Out, class Epi>
__device__ __forceinline__ void store_staged_float_rows(float const* s, int pitch, Out* y, std::int64_t ld, int row0,
                                                        int col0, int n, int m, bool vec, Epi const& epi, int first,
                                                        int step) {
  constexpr int PER = 16 / static_cast<int>(sizeof(Out)), PIECES = Cols / PER;
  static_assert(Cols % PER == 0, "store_staged_float_rows: rows of whole 16-byte pieces");
#pragma unroll 1
  for (int q = first; q < Rows * PIECES; q += step) {
    int const r = q / PIECES, c = (q % PIECES) * PER, row = row0 + r, col = col0 + c;
    if (row >= n || col >= m) continue;
    float const* const src = s + r * pitch + c;
    Out* const dst = y + static_cast<std::int64_t>(row) * ld + col;
    if (vec && col + PER <= m) {
      float v[PER];
#pragma unroll
      for (int e = 0; e < PER; e += 4) {
        float4 const f = *reinterpret_cast<float4 const*>(src + e);
        v[e] = f.x, v[e + 1] = f.y, v[e + 2] = f.z, v[e + 3] = f.w;
      }
#pragma unroll
      for (int e = 0; e < PER; ++e) v[e] = epi.apply(v[e], epi.bias_at(col + e));
      uint4 w;
      if constexpr (std::is_same_v<Out, float>) {
        w = make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3]));
      } else {
        w = make_uint4(pack2_float<Out>(v[0], v[1]), pack2_float<Out>(v[2], v[3]),
                       pack2_float<Out>(v[4], v[5]), pack2_float<Out>(v[6], v[7]));
      }
      *reinterpret_cast<uint4*>(dst) = w;
    } else {
      for (int e = 0; e < PER && col + e < m; ++e)
        dst[e] = staged_detail::round_to<Out>(epi.apply(src[e], epi.bias_at(col + e)));
    }
  }
}

}  // namespace sdnn::kernels
