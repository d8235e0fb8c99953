// sdnn/linear/arch/mma.cuh - warp-level tensor-core building blocks (sm_80 and newer; they
// run unchanged on sm_90): ldmatrix x1/x2/x4 (plain and .trans), mma.sync m16n8k16 on bf16 or
// fp16 with float accumulators, 16-byte cp.async with zero-fill, and its commit / wait. Inline
// PTX, since CCCL's cuda::ptx (CUDA 13.0) has no mma or ldmatrix. Fragment layouts are PTX's
// ("Matrix Fragments for mma.m16n8k16"): lane = 4 * g + t; A (16 x 16, row-major): a0 a1 =
// (g, 2t..2t+1), a2 a3 = (g+8, ...), a4 a5 = (g, 2t+8..), a6 a7 = (g+8, 2t+8..); B (16 x 8,
// column-major): b0 b1 = (k 2t..2t+1, n g), b2 b3 = (k 2t+8.., n g); C (16 x 8): c0 c1 =
// (g, 2t..2t+1), c2 c3 = (g+8, 2t..2t+1).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "sdnn/core/numeric.hpp"

namespace sdnn::kernels::mma {

// Callers compile their use of these for sm_80 and newer only (SDNN_MMA_SYNC_ARCH below):
// PTX for older targets never references them.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define SDNN_MMA_SYNC_ARCH 1
#else
#define SDNN_MMA_SYNC_ARCH 0
#endif

// A shared-memory address as the 32-bit value PTX's .shared instructions take.
__device__ __forceinline__ std::uint32_t smem_addr(void const* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// ldmatrix: lanes 8i..8i+7 give the row addresses (16 bytes each) of matrix i; each lane gets
// (row lane/4, elements 2 (lane%4), +1) of every matrix, one register per matrix.
__device__ __forceinline__ void ldmatrix_x1(std::uint32_t& r0, void const* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r0) : "r"(smem_addr(row)));
}
__device__ __forceinline__ void ldmatrix_x2(std::uint32_t& r0, std::uint32_t& r1, void const* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(smem_addr(row)));
}
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], void const* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row)));
}
// The same with each 8 x 8 matrix transposed (lane gets (rows 2 (lane%4), +1; column lane/4)).
__device__ __forceinline__ void ldmatrix_x1_trans(std::uint32_t& r0, void const* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r0) : "r"(smem_addr(row)));
}
__device__ __forceinline__ void ldmatrix_x2_trans(std::uint32_t& r0, std::uint32_t& r1, void const* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r0), "=r"(r1)
               : "r"(smem_addr(row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], void const* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row)));
}

// d += a * b on one m16n8k16 tile, T = sdnn::bf16 or sdnn::fp16, float accumulators.
template <class T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], std::uint32_t const (&a)[4], std::uint32_t b0,
                                             std::uint32_t b1) {
  static_assert(is_16bit_float_v<T>, "mma_m16n8k16: T must be sdnn::bf16 or sdnn::fp16");
  if constexpr (std::is_same_v<T, bf16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// The same, executed only when `on` (warp-uniform): a guard predicate on the mma, no branch, so
// the compiler keeps a tile's mma chains interleaved (skipped empty sub-tiles).
template <class T>
__device__ __forceinline__ void mma_m16n8k16_if(bool on, float (&d)[4], std::uint32_t const (&a)[4], std::uint32_t b0,
                                                std::uint32_t b1) {
  static_assert(is_16bit_float_v<T>, "mma_m16n8k16_if: T must be sdnn::bf16 or sdnn::fp16");
  if constexpr (std::is_same_v<T, bf16>) {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %10, 0;\n"
        " @p mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(int(on)));
  } else {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %10, 0;\n"
        " @p mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(int(on)));
  }
}

// 16 bytes global -> shared, asynchronous; src_bytes < 16 zero-fills the rest (0: all zero, and
// src is not read). Both addresses 16-byte aligned. .cg: cached in L2 only (streamed operands).
__device__ __forceinline__ void cp_async_16(void* dst, void const* src, int src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// The same for a run-time n (uniform or not): waits for at most min(n, 7) groups in flight, so
// n >= 7 waits for more than needed, never for less.
__device__ __forceinline__ void cp_async_wait_dyn(int n) {
  switch (n < 0 ? 0 : n) {
    case 0: cp_async_wait<0>(); break;
    case 1: cp_async_wait<1>(); break;
    case 2: cp_async_wait<2>(); break;
    case 3: cp_async_wait<3>(); break;
    case 4: cp_async_wait<4>(); break;
    case 5: cp_async_wait<5>(); break;
    case 6: cp_async_wait<6>(); break;
    default: cp_async_wait<7>(); break;
  }
}

}  // namespace sdnn::kernels::mma
