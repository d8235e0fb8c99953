// sdnn/linear/arch/tc_tma_x.cuh - the activation (X) operand of the sm_90 tensor-core kernels as a
// tensor map: one cp.async.bulk.tensor copies a stage's X tile, either from dense rows (a 2-D map)
// or from a convolution's NHWC input read as its implicit im2col matrix (an im2col map whose box is
// consecutive output pixels x a run of channels at one filter tap). Used by the block kernel
// (linear/kernel/tc_block_tma.cuh) and the warp-specialized 2:4 tiles (sparse24_mma.cuh); the
// host part says where an im2col operand can be read so and builds its map.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cuda/ptx>

#include <cstdint>
#include <type_traits>

#include "sdnn/core/fast_divmod.hpp"
#include "sdnn/core/tma.cuh"
#include "sdnn/linear/arch/mma.cuh"
#include "sdnn/linear/arch/tc_x_operand.cuh"

namespace sdnn::kernels {

// X as dense rows (n x k of 16-bit values, rows 16-byte aligned): a 2-D tensor map; rows past n and
// columns past k read as zeros.
struct tc_tma_rows_x {
  CUtensorMap map;
};

// X as a convolution's NHWC input read as its implicit im2col matrix (row = output pixel (b, oh,
// ow), column = (r * S + s) * C + c): an im2col tensor map over the N x H x W x C input whose box
// is consecutive output pixels x a run of channels. C is a multiple of the run, so a copy's columns
// lie in one tap. Taps read outside the image are zeros (the map's bounding box is the padding).
struct tc_tma_im2col_x {
  CUtensorMap map;
  fast_divmod div_c, div_s, div_ow, div_oh;  // by C, S, OW, OH
  std::int32_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
};

template <class XSrc>
inline constexpr bool is_tc_tma_x_v = std::is_same_v<XSrc, tc_tma_rows_x> || std::is_same_v<XSrc, tc_tma_im2col_x>;

namespace tma_detail {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// The X tile whose columns start at k0, rows from x0: one tensor-map copy onto bar.
__device__ __forceinline__ void copy_x(tc_tma_rows_x const& xs, void* dst, std::uint64_t* bar, int k0, int x0, int4) {
  std::int32_t const c[2] = {k0, x0};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, &xs.map, c, bar);
}
// im2col: the input pixel of output pixel x0 at tap (0, 0) (pix: w, h, b), channel k0 % C, and
// the tap's offset within the filter's window. CCCL's cuda::ptx has no im2col copy: inline PTX.
__device__ __forceinline__ void copy_x(tc_tma_im2col_x const& xs, void* dst, std::uint64_t* bar, int k0, int,
                                       int4 pix) {
  int tap = 0, c0 = 0, r = 0, s = 0;
  xs.div_c.divmod(k0, tap, c0);
  xs.div_s.divmod(tap, r, s);
  auto const ow = static_cast<unsigned short>(s * xs.dil_w), oh = static_cast<unsigned short>(r * xs.dil_h);
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6], {%7, %8};\n" ::"r"(mma::smem_addr(dst)),
      "l"(reinterpret_cast<std::uint64_t>(&xs.map)), "r"(c0), "r"(pix.x), "r"(pix.y), "r"(pix.z),
      "r"(mma::smem_addr(bar)), "h"(ow), "h"(oh)
      : "memory");
}
#endif

// The per-thread-block start of the X copies: im2col's first output pixel as input coordinates.
template <class XSrc>
__device__ __forceinline__ int4 x_start(XSrc const& xs, int x0) {
  if constexpr (std::is_same_v<XSrc, tc_tma_im2col_x>) {
    int t = 0, ow = 0, b = 0, oh = 0;
    xs.div_ow.divmod(x0, t, ow);
    xs.div_oh.divmod(t, b, oh);
    return make_int4(ow * xs.stride_w - xs.pad_w, oh * xs.stride_h - xs.pad_h, b, 0);
  } else {
    (void)xs;
    (void)x0;
    return make_int4(0, 0, 0, 0);
  }
}
}  // namespace tma_detail

// Where the im2col operand xs (n rows, k columns) can be read through an im2col tensor map whose
// copies take `channels` channels at a time: its geometry, encodable() false where it cannot (not
// 16-byte aligned, C not a multiple of `channels`, n not whole images, k not R * S * C, or outside
// TMA's limits).
template <class T>
::sdnn::detail::tma_conv_geometry im2col_tma_geometry(tc_im2col_x<T> const& xs, std::int64_t n, std::int64_t k,
                                                      int channels) {
  ::sdnn::detail::tma_conv_geometry g;
  std::int64_t const pixels = std::int64_t(xs.div_oh.d) * xs.div_ow.d, taps = std::int64_t(xs.div_s.d) * xs.C;
  if (!xs.vec || channels <= 0 || xs.C % channels != 0 || pixels == 0 || n % pixels != 0 || taps == 0 ||
      k % taps != 0)
    return g;
  g.batch = n / pixels;
  g.h = xs.H;
  g.w = xs.W;
  g.c = xs.C;
  g.oh = xs.div_oh.d;
  g.ow = xs.div_ow.d;
  g.stride_h = xs.stride_h;
  g.stride_w = xs.stride_w;
  g.pad_h = xs.pad_h;
  g.pad_w = xs.pad_w;
  g.dil_h = xs.dil_h;
  g.dil_w = xs.dil_w;
  g.r = static_cast<int>(k / taps);
  g.s = static_cast<int>(xs.div_s.d);
  return g;
}

// The im2col tensor-map operand of xs (geometry g, encodable()): boxes of `pixels` output pixels x
// `channels` channels, swizzled as the kernel's X stage reads them.
template <class T>
tc_tma_im2col_x make_tc_tma_im2col_x(tc_im2col_x<T> const& xs, ::sdnn::detail::tma_conv_geometry const& g,
                                     std::uint32_t pixels, std::uint32_t channels, CUtensorMapSwizzle swizzle) {
  tc_tma_im2col_x t{};
  t.map = ::sdnn::detail::make_tma_im2col_nhwc(xs.x, g, pixels, channels, swizzle);
  t.div_c = xs.div_c;
  t.div_s = xs.div_s;
  t.div_ow = xs.div_ow;
  t.div_oh = xs.div_oh;
  t.stride_h = xs.stride_h;
  t.stride_w = xs.stride_w;
  t.pad_h = xs.pad_h;
  t.pad_w = xs.pad_w;
  t.dil_h = xs.dil_h;
  t.dil_w = xs.dil_w;
  return t;
}

}  // namespace sdnn::kernels
