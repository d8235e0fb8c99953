// sdnn/core/tma.cuh - tensor maps for the Hopper tensor memory accelerator (TMA): the descriptor of a
// row-major 2-D array in global memory that one cp.async.bulk.tensor copies a box of into shared
// memory, with the box's 16-byte pieces swizzled as the tensor-core kernels read them. Encoded on the
// host by the driver's cuTensorMapEncodeTiled, found through the runtime (no link to libcuda).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/error.hpp"

namespace sdnn::detail {

using tma_encode_tiled_fn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, cuuint64_t const*,
                                         cuuint64_t const*, cuuint32_t const*, cuuint32_t const*, CUtensorMapInterleave,
                                         CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

inline tma_encode_tiled_fn tma_encoder() {
  static tma_encode_tiled_fn const fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    SDNN_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
    SDNN_EXPECTS(q == cudaDriverEntryPointSuccess && p != nullptr,
                 "tma: the driver has no cuTensorMapEncodeTiled (needs a CUDA 12 driver)");
    return reinterpret_cast<tma_encode_tiled_fn>(p);
  }();
  return fn;
}

// The map of a rows x cols array of elem_bytes-sized elements (2 or 4) at base, rows row_bytes apart,
// copied in boxes of box_rows x box_cols; reads past the array give zeros. TMA's own limits, checked
// here: base 16-byte aligned, row_bytes a multiple of 16, box_cols * elem_bytes <= the swizzle span.
inline CUtensorMap make_tma_2d(void const* base, int elem_bytes, std::uint64_t rows, std::uint64_t cols,
                               std::uint64_t row_bytes, std::uint32_t box_rows, std::uint32_t box_cols,
                               CUtensorMapSwizzle swizzle) {
  SDNN_EXPECTS((reinterpret_cast<std::uintptr_t>(base) & 15) == 0 && row_bytes % 16 == 0,
               "tma: base and row pitch must be multiples of 16 bytes (row pitch ", row_bytes, " bytes)");
  SDNN_EXPECTS(elem_bytes == 2 || elem_bytes == 4, "tma: 2- or 4-byte elements");
  CUtensorMap map{};
  cuuint64_t const dims[2] = {cols, rows};
  cuuint64_t const strides[1] = {row_bytes};
  cuuint32_t const box[2] = {box_cols, box_rows};
  cuuint32_t const estrides[2] = {1, 1};
  CUresult const r = tma_encoder()(
      &map, elem_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_UINT16 : CU_TENSOR_MAP_DATA_TYPE_UINT32, 2, const_cast<void*>(base),
      dims, strides, box, estrides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  SDNN_EXPECTS(r == CUDA_SUCCESS, "tma: cuTensorMapEncodeTiled failed (error ", static_cast<int>(r), ") for a ", rows,
               " x ", cols, " array, box ", box_rows, " x ", box_cols);
  return map;
}

}  // namespace sdnn::detail
