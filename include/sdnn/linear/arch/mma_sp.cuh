// sdnn/linear/arch/mma_sp.cuh - warp-level sparse tensor-core MMA (mma.sp, sm_80+) for 2:4
// weights: m16n8k32 with bf16 or fp16 operands and float accumulators, the lane layout of its
// metadata register, and the few cp.async / ldmatrix wrappers the 2:4 kernel needs (private to
// sp_detail until they merge with linear/kernel/mma.cuh). Inline PTX: CCCL's cuda::ptx (CUDA 13.0)
// has no mma, mma.sp or wgmma.
// Fragment layouts follow the PTX ISA ("Matrix fragments for mma.sp ... m16n8k32 .f16/.bf16");
// the metadata layout is described at sparse24_meta_lane below and built on the host by the plan
// (linear/op/sparse24_linear.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "sdnn/core/config.hpp"

namespace sdnn::kernels {

// Metadata register of mma.sp m16n8k32 (16-bit types), per PTX ISA: a 16 x 32 tile of A (16
// rows, 32 logical K = 8 groups of 4) has 16 x 8 nibbles, each the two positions (bits 0-1 the
// first kept value's, bits 2-3 the second's; increasing, as ::ordered_metadata requires) of one
// group. With sparsity selector s (0 or 1), lanes 4g + 2s + h (g = lane / 4 in 0..7, h in 0..1)
// supply them: bits 4c..4c+3 hold group 4h + c (K 16h + 4c .. +3) of row g, bits 16 + 4c.. the
// same group of row g + 8; the other two lanes of each quad are ignored.
//
// sdnn stores one 32-bit word per lane for a 16 x 64 block (two k32 steps): lane 4g + t holds
// k32 step t / 2 (used with selector t / 2) and half h = t % 2. These give, for a word of that
// block, which row and which group of the block (0..15) nibble c of its low (hi = 0) or high
// (hi = 1) half describes.
struct sparse24_meta_lane {
  SDNN_HOST_DEVICE static constexpr int row(int lane, int hi) { return lane / 4 + 8 * hi; }
  SDNN_HOST_DEVICE static constexpr int group(int lane, int c) { return 8 * ((lane % 4) / 2) + 4 * (lane % 2) + c; }
};

namespace sp_detail {

#if defined(__CUDACC__)
__device__ __forceinline__ std::uint32_t smem_addr(void const* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronous, L1 bypassed; bytes past src_bytes (0..16) are zero.
__device__ __forceinline__ void cp_async_16(std::uint32_t dst, void const* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8 x 8 b16 matrices from shared memory: lanes 8i..8i+7 give the row addresses of matrix i,
// r[i] receives this lane's pair of matrix i (row lane / 4, columns 2 (lane % 4) and + 1).
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
#endif

}  // namespace sp_detail

#if defined(__CUDACC__)
// D = A * B + D for one m16n8k32 tile, A 2:4-sparse. T: __nv_bfloat16 or __half.
//   a: the compressed 16 x 16 A fragment (the dense m16n8k16 A layout: a[0] row g, values 2t, 2t+1;
//      a[1] row g + 8; a[2], a[3] the same at values 8 + 2t, + 1; g = lane / 4, t = lane % 4);
//   b: the 32 x 8 B fragment (column g; b[i] holds K rows 8i + 2t and + 1);
//   d: rows g (d[0], d[1]) and g + 8 (d[2], d[3]), columns 2t and 2t + 1;
//   e: the metadata register (sparse24_meta_lane), Selector 0 or 1.
template <class T, int Selector>
__device__ __forceinline__ void mma_sp_16832(float (&d)[4], std::uint32_t const (&a)[4], std::uint32_t const (&b)[4],
                                             std::uint32_t e) {
  static_assert(Selector == 0 || Selector == 1, "mma.sp m16n8k32 (16-bit): sparsity selector 0 or 1");
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "mma_sp_16832: __nv_bfloat16 or __half");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // TYPE: the PTX type of A and B, "bf16" or "f16" (inline asm takes one literal string).
#define SDNN_MMA_SP_16832(TYPE)                                                                                        \
  asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32." TYPE "." TYPE ".f32 "                     \
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, %13;\n"                 \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                                        \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(e),       \
                 "n"(Selector))
  if constexpr (std::is_same_v<T, __nv_bfloat16>) SDNN_MMA_SP_16832("bf16");
  else SDNN_MMA_SP_16832("f16");
#undef SDNN_MMA_SP_16832
#else
  (void)d, (void)a, (void)b, (void)e;
  __trap();  // the plan refuses GPUs below sm_80 before any launch
#endif
}
#endif


// --- wgmma.sp (sm_90a): the Hopper warpgroup path -------------------------------------------------
// Used by tiles with Wgmma = true (policy/sparse24.hpp) in builds for sm_90a with
// SDNN_SPARSE24_WGMMA=1. A (the compressed W tile) comes from registers: each warp of the
// warpgroup holds its 16 rows in the mma.sp m16n8k32 A layout (ldmatrix, as above); B (X rows,
// K contiguous) from shared memory through a descriptor; the metadata register has the mma.sp
// m16n8k32 lane layout within each warp's 16 rows (sparse24_meta_lane), the selector picking the
// lane pair. D: d[4 j + c] is row 16 (warp % 4) + lane / 4 + 8 (c / 2), column 8 j + 2 (lane % 4)
// + c % 2 of the m64 x N tile, the m16n8 accumulator layout repeated over N / 8.
namespace sp_detail {
#if defined(__CUDACC__)
// Descriptor of a K-major B tile with 128-byte rows (64 bf16/fp16 of K) in the 128-byte swizzle
// (16-byte chunk j of row r at r * 128 + ((j ^ (r % 8)) << 4), tile base 1024-byte aligned): 8-row
// groups 1024 bytes apart (stride byte offset), the leading offset unused. Advancing the start
// address by 64 bytes selects the second k32 half of each row.
__device__ __forceinline__ std::uint64_t wgmma_desc_sw128(std::uint32_t smem_addr) {
  return static_cast<std::uint64_t>((smem_addr & 0x3FFFFu) >> 4) | (std::uint64_t{1} << 16) |
         (std::uint64_t{1024 >> 4} << 32) | (std::uint64_t{1} << 62);
}
__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Shared memory written by cp.async or st.shared, read next by wgmma (the async proxy).
__device__ __forceinline__ void fence_proxy_async_shared() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Moves registers between the warpgroups of a CTA (every thread of the warpgroup executes it): a
// loading warpgroup gives up what the multiplying ones take. No cuda::ptx wrapper in CUDA 13.0.
template <int Regs>
__device__ __forceinline__ void setmaxnreg_dec() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Regs));
#endif
}
template <int Regs>
__device__ __forceinline__ void setmaxnreg_inc() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Regs));
#endif
}
// Keeps the compiler from moving accumulator reads or writes across the asynchronous wgmma.
template <int K>
__device__ __forceinline__ void fence_operands(float (&r)[K]) {
#pragma unroll
  for (int i = 0; i < K; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
#endif
}  // namespace sp_detail

#if defined(__CUDACC__)
// D (m64 x N, float) += A (m64 x k32, 2:4, registers) * B (k32 x N, shared memory, b_desc); one
// warpgroup, asynchronous: wgmma_fence before, wgmma_commit / wgmma_wait after.
template <class T, int N, int Selector>
__device__ __forceinline__ void wgmma_sp_m64k32(float (&d)[N / 2], std::uint32_t const (&a)[4], std::uint64_t b_desc,
                                                std::uint32_t e) {
  static_assert(N == 32 || N == 64 || N == 128, "wgmma_sp_m64k32: N is 32, 64 or 128");
  static_assert(Selector == 0 || Selector == 1, "wgmma_sp_m64k32 (16-bit): sparsity selector 0 or 1");
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>,
                "wgmma_sp_m64k32: __nv_bfloat16 or __half");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // One wgmma.mma_async.sp per N; TYPE is the PTX type of A and B, "bf16" or "f16" (inline asm
  // takes one literal string). Operands: the N / 2 accumulators, a[0..3], b_desc, e, Selector,
  // then scale-d (1: D += A * B); the trailing 1, 1, 0 are imm-scale-a, imm-scale-b and
  // imm-trans-b (B K-major, not transposed).
#define SDNN_WGMMA_SP_IN "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(e), "n"(Selector), "r"(1)
#define SDNN_WGMMA_SP_M64N32K32(TYPE)                                                                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %23, 0;\n"                                                            \
               "wgmma.mma_async.sp.sync.aligned.m64n32k32.f32." TYPE "." TYPE " "                                      \
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "                              \
               "{%16, %17, %18, %19}, %20, %21, %22, p, 1, 1, 0;\n}\n"                                                 \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),                   \
                 "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),               \
                 "+f"(d[14]), "+f"(d[15])                                                                              \
               : SDNN_WGMMA_SP_IN)
#define SDNN_WGMMA_SP_M64N64K32(TYPE)                                                                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %39, 0;\n"                                                            \
               "wgmma.mma_async.sp.sync.aligned.m64n64k32.f32." TYPE "." TYPE " "                                      \
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                               \
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                     \
               "{%32, %33, %34, %35}, %36, %37, %38, p, 1, 1, 0;\n}\n"                                                 \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),                   \
                 "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),               \
                 "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),            \
                 "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),            \
                 "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                                    \
               : SDNN_WGMMA_SP_IN)
#define SDNN_WGMMA_SP_M64N128K32(TYPE)                                                                                 \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %71, 0;\n"                                                            \
               "wgmma.mma_async.sp.sync.aligned.m64n128k32.f32." TYPE "." TYPE " "                                     \
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                               \
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                      \
               "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                      \
               "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "                     \
               "{%64, %65, %66, %67}, %68, %69, %70, p, 1, 1, 0;\n}\n"                                                 \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),                   \
                 "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),               \
                 "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),            \
                 "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),            \
                 "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),            \
                 "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),            \
                 "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),            \
                 "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),            \
                 "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),            \
                 "+f"(d[63])                                                                                           \
               : SDNN_WGMMA_SP_IN)
  constexpr bool is_bf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (N == 32) {
    if constexpr (is_bf16) SDNN_WGMMA_SP_M64N32K32("bf16");
    else SDNN_WGMMA_SP_M64N32K32("f16");
  } else if constexpr (N == 64) {
    if constexpr (is_bf16) SDNN_WGMMA_SP_M64N64K32("bf16");
    else SDNN_WGMMA_SP_M64N64K32("f16");
  } else {
    if constexpr (is_bf16) SDNN_WGMMA_SP_M64N128K32("bf16");
    else SDNN_WGMMA_SP_M64N128K32("f16");
  }
#undef SDNN_WGMMA_SP_M64N128K32
#undef SDNN_WGMMA_SP_M64N64K32
#undef SDNN_WGMMA_SP_M64N32K32
#undef SDNN_WGMMA_SP_IN
#else
  (void)d, (void)a, (void)b_desc, (void)e;
  __trap();  // compiled without sm_90a: the plan never selects these tiles then
#endif
}
#endif

}  // namespace sdnn::kernels
