// sdnn/core/tma.cuh - tensor maps for the Hopper tensor memory accelerator (TMA): the descriptor of a
// row-major 2-D array in global memory that one cp.async.bulk.tensor copies a box of into shared
// memory, with the box's 16-byte pieces swizzled as the tensor-core kernels read them, and the
// im2col descriptor of an NHWC activation tensor (a box of consecutive output pixels of a
// convolution at one filter tap). Encoded on the host by the driver's cuTensorMapEncodeTiled /
// cuTensorMapEncodeIm2col, found through the runtime (no link to libcuda).
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

using tma_encode_im2col_fn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, cuuint64_t const*,
                                          cuuint64_t const*, int const*, int const*, cuuint32_t, cuuint32_t,
                                          cuuint32_t const*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                          CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// The driver's entry point `name` as a Fn, looked up once through the runtime.
template <class Fn>
Fn tma_driver_entry(char const* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  SDNN_CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q));
  SDNN_EXPECTS(q == cudaDriverEntryPointSuccess && p != nullptr, "tma: the driver has no ", name,
               " (needs a CUDA 12 driver)");
  return reinterpret_cast<Fn>(p);
}
inline tma_encode_tiled_fn tma_encoder() {
  static tma_encode_tiled_fn const fn = tma_driver_entry<tma_encode_tiled_fn>("cuTensorMapEncodeTiled");
  return fn;
}
inline tma_encode_im2col_fn tma_im2col_encoder() {
  static tma_encode_im2col_fn const fn = tma_driver_entry<tma_encode_im2col_fn>("cuTensorMapEncodeIm2col");
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

// A convolution's geometry as an im2col tensor map sees it: the input (batch x h x w x c, 16-bit,
// NHWC, dense), the output's oh x ow pixels, stride, padding and dilation per axis.
struct tma_conv_geometry {
  std::int64_t batch = 0, h = 0, w = 0, c = 0, oh = 0, ow = 0;
  int stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1, r = 1, s = 1;

  // The window of tap (0, 0) along one axis: output pixel o reads input o * stride - pad; the
  // last output pixel bounds the box, inclusive, as an offset from the last input pixel.
  static constexpr int lower(int pad) { return -pad; }
  static constexpr std::int64_t upper(std::int64_t in, std::int64_t out, int stride, int pad) {
    return (out - 1) * stride - pad - (in - 1);
  }
  // What the hardware takes (cuTensorMapEncodeIm2col, 4-D): corners in [-128, 127], traversal
  // strides <= 8, tap offsets below 2^16, extents below 2^32, rows of 16-byte multiples.
  bool encodable() const {
    auto corner = [](std::int64_t v) { return v >= -128 && v <= 127; };
    return batch > 0 && oh > 0 && ow > 0 && c % 8 == 0 && corner(lower(pad_h)) && corner(lower(pad_w)) &&
           corner(upper(h, oh, stride_h, pad_h)) && corner(upper(w, ow, stride_w, pad_w)) && stride_h >= 1 &&
           stride_h <= 8 && stride_w >= 1 && stride_w <= 8 && std::int64_t(r - 1) * dil_h < 65536 &&
           std::int64_t(s - 1) * dil_w < 65536 && batch < (std::int64_t(1) << 32) && h < (std::int64_t(1) << 32) &&
           w < (std::int64_t(1) << 32) && c < (std::int64_t(1) << 32);
  }
};

// The im2col map of NHWC input x (geometry g, encodable()): a copy at tap offsets (s dil_w, r dil_h)
// from the input coordinates of output pixel p (p's row and column times the stride, minus the
// padding) brings `pixels` consecutive output pixels x `channels` channels, zeros where the tap
// falls in the padding or past the last image.
inline CUtensorMap make_tma_im2col_nhwc(void const* x, tma_conv_geometry const& g, std::uint32_t pixels,
                                        std::uint32_t channels, CUtensorMapSwizzle swizzle) {
  SDNN_EXPECTS((reinterpret_cast<std::uintptr_t>(x) & 15) == 0 && g.encodable(),
               "tma: an im2col map needs a 16-byte aligned input, C % 8 == 0 and a geometry within TMA's limits");
  CUtensorMap map{};
  cuuint64_t const dims[4] = {cuuint64_t(g.c), cuuint64_t(g.w), cuuint64_t(g.h), cuuint64_t(g.batch)};
  cuuint64_t const strides[3] = {cuuint64_t(g.c) * 2, cuuint64_t(g.c * g.w) * 2, cuuint64_t(g.c * g.w * g.h) * 2};
  int const lo[2] = {g.lower(g.pad_w), g.lower(g.pad_h)};  // innermost spatial axis first: W, H
  int const hi[2] = {int(g.upper(g.w, g.ow, g.stride_w, g.pad_w)), int(g.upper(g.h, g.oh, g.stride_h, g.pad_h))};
  cuuint32_t const estrides[4] = {1, cuuint32_t(g.stride_w), cuuint32_t(g.stride_h), 1};
  CUresult const r = tma_im2col_encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, const_cast<void*>(x), dims, strides,
                                          lo, hi, channels, pixels, estrides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  SDNN_EXPECTS(r == CUDA_SUCCESS, "tma: cuTensorMapEncodeIm2col failed (error ", static_cast<int>(r), ") for input ",
               g.batch, " x ", g.h, " x ", g.w, " x ", g.c, ", ", pixels, " pixels x ", channels, " channels");
  return map;
}

}  // namespace sdnn::detail
