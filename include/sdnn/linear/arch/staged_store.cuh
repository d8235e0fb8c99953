// sdnn/linear/arch/staged_store.cuh - the last step of the tensor-core kernels that stage their
// output tile in shared memory (linear/kernel/tc_block_tma.cuh, sparse24_mma.cuh): rows of Out
// copied to Y in 16-byte pieces.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

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

}  // namespace sdnn::kernels
