// sdnn/linear/arch/staged_store.cuh - the last step of the tensor-core kernels that stage their
// output tile in shared memory (linear/kernel/tc_block_tma.cuh, sparse24_mma.cuh): rows of Out,
// or of float accumulators that the epilogue finishes on the way, copied to Y in 16-byte pieces;
// or a convolution's outputs max-pooled 2x2 on the way.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
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

namespace staged_detail {
// An Out value as float and back (exact for a value that came from Out).
template <class Out>
__device__ __forceinline__ float widen(Out v) {
  if constexpr (std::is_same_v<Out, float>) {
    return v;
  } else {
    unsigned short b;
    std::memcpy(&b, &v, sizeof b);
    return unpack2_float<Out>(b).x;
  }
}
template <class Out>
__device__ __forceinline__ Out narrow(float v) {
  if constexpr (std::is_same_v<Out, float>) {
    return v;
  } else {
    auto const b = static_cast<unsigned short>(pack2_float<Out>(v, 0.0f));
    Out o;
    std::memcpy(&o, &b, sizeof b);
    return o;
  }
}
// The 2x2 max of one 32-bit word of each window position: the fmaxf tree of
// conv::detail::nhwc_max_pool2x2 (the upper row's pair, the lower row's, then the two).
template <class Out>
__device__ __forceinline__ unsigned max4_word(unsigned a, unsigned b, unsigned c, unsigned d) {
  if constexpr (std::is_same_v<Out, float>) {
    return __float_as_uint(fmaxf(fmaxf(__uint_as_float(a), __uint_as_float(b)),
                                 fmaxf(__uint_as_float(c), __uint_as_float(d))));
  } else {
    float2 const x = unpack2_float<Out>(a), y = unpack2_float<Out>(b), z = unpack2_float<Out>(c),
                 w = unpack2_float<Out>(d);
    return pack2_float<Out>(fmaxf(fmaxf(x.x, y.x), fmaxf(z.x, w.x)), fmaxf(fmaxf(x.y, y.y), fmaxf(z.y, w.y)));
  }
}
}  // namespace staged_detail

// The last step of a kernel with the 2x2 stride-2 max-pool fused: a tile of convolution outputs
// staged as Out (row r at s + r * pitch elements; s and pitch multiples of 16 bytes), output
// (oh0 + dr, w0 + dw) of image img at staged row dr * rs + dw (oh0, w0 even). Pooled pixel
// (ph0 + i, pw0 + j), i < rows, j < cols, is the max of its window by the tree of
// conv::detail::nhwc_max_pool2x2, so its bits are the unfused pool's (each value is exact in
// float); it goes to Y row (img * ph + ph0 + i) * pw + pw0 + j (ld elements a row) from column
// col0 on. Pooled pixels from ph / pw on and columns from m on are not written; a 16-byte piece is
// one store where vec and it ends within m.
template <int Cols, class Out>
__device__ __forceinline__ void store_pooled_rows(Out const* s, int pitch, int rs, int rows, int cols, Out* y,
                                                  std::int64_t ld, int img, int ph0, int pw0, int ph, int pw, int col0,
                                                  int m, bool vec, int first, int step) {
  constexpr int PER = 16 / static_cast<int>(sizeof(Out)), PIECES = Cols / PER;
  static_assert(Cols % PER == 0, "store_pooled_rows: rows of whole 16-byte pieces");
#pragma unroll 1
  for (int q = first; q < rows * cols * PIECES; q += step) {
    int const pix = q / PIECES, c = (q % PIECES) * PER, i = pix / cols, j = pix % cols;
    int const prow = ph0 + i, pcol = pw0 + j, col = col0 + c;
    if (prow >= ph || pcol >= pw || col >= m) continue;
    Out const* const a = s + (2 * i * rs + 2 * j) * pitch + c;  // the window's upper-left value
    Out const* const b = a + pitch;
    Out const* const d = a + rs * pitch;
    Out const* const e = d + pitch;
    Out* const dst = y + ((std::int64_t(img) * ph + prow) * pw + pcol) * ld + col;
    if (vec && col + PER <= m) {
      uint4 const va = *reinterpret_cast<uint4 const*>(a), vb = *reinterpret_cast<uint4 const*>(b),
                  vd = *reinterpret_cast<uint4 const*>(d), ve = *reinterpret_cast<uint4 const*>(e);
      using staged_detail::max4_word;
      *reinterpret_cast<uint4*>(dst) =
          make_uint4(max4_word<Out>(va.x, vb.x, vd.x, ve.x), max4_word<Out>(va.y, vb.y, vd.y, ve.y),
                     max4_word<Out>(va.z, vb.z, vd.z, ve.z), max4_word<Out>(va.w, vb.w, vd.w, ve.w));
    } else {
      for (int t = 0; t < PER && col + t < m; ++t)
        dst[t] = staged_detail::narrow<Out>(fmaxf(fmaxf(staged_detail::widen(a[t]), staged_detail::widen(b[t])),
                                                  fmaxf(staged_detail::widen(d[t]), staged_detail::widen(e[t]))));
    }
  }
}

}  // namespace sdnn::kernels
