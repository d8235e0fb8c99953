// sdnn/linear/kernel/blocked_ell.cuh - the device build of cuSPARSE's Blocked-ELL arrays from a
// tiled-dense matrix (launched by linear/vendor/cusparse_blocked_ell.cuh at plan time).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "sdnn/core/config.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/tiled_dense.hpp"

namespace sdnn::vendor {
namespace detail {

// Occupied tiles in tile row i.
struct tiles_in_row {
  std::int64_t const* tile_row_ptr;
  SDNN_HOST_DEVICE std::int64_t operator()(std::int64_t i) const { return tile_row_ptr[i + 1] - tile_row_ptr[i]; }
};

// One CUDA block per (tile row, slot) job, grid-strided: writes the slot's block column
// index (or pad) and copies its tile (or zeros) into the row-major ellValue. Consecutive
// threads write consecutive columns of one ellValue row.
template <class T>
__global__ void tiled_to_blocked_ell_kernel(tiled_dense_view<T const> a, std::int64_t slots, T* values,
                                            std::int32_t* col_ind, std::int32_t pad) {
  std::int64_t const bs = a.tile_rows, ell_cols = slots * bs;
  for (std::int64_t job = blockIdx.x; job < a.grid_rows * slots; job += gridDim.x) {
    std::int64_t const ti = job / slots, s = job % slots;
    std::int64_t const first = a.tile_row_ptr[ti], count = a.tile_row_ptr[ti + 1] - first;
    bool const live = s < count;
    std::int64_t const tj = live ? a.tile_col[first + s] : 0;
    if (threadIdx.x == 0) col_ind[job] = live ? static_cast<std::int32_t>(tj) : pad;
    T const* src = a.tile(ti, tj);
    T* dst = values + ti * bs * ell_cols + s * bs;
    for (std::int64_t e = threadIdx.x; e < bs * bs; e += blockDim.x) {
      std::int64_t const r = e / bs, c = e % bs;
      dst[r * ell_cols + c] = live ? src[e] : value_cast<T>(0.0f);
    }
  }
}

}  // namespace detail
}  // namespace sdnn::vendor
