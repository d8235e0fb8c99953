// sdnn/core/numeric.cuh - sdnn::bf16 / sdnn::fp16 as CUDA's __nv_bfloat16 / __half on the device.
//
// The types have the same size, alignment and bits, so device code reads an array of sdnn::bf16
// as __nv_bfloat16 through native_t and to_native(); nothing is converted.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <type_traits>

#include "sdnn/core/numeric.hpp"

namespace sdnn {

template <class T>
struct native_type {
  using type = T;
};
template <>
struct native_type<bf16> {
  using type = __nv_bfloat16;
};
template <>
struct native_type<fp16> {
  using type = __half;
};
// The CUDA type with T's bits: __nv_bfloat16 for bf16, __half for fp16, T otherwise.
template <class T>
using native_t = typename native_type<T>::type;

static_assert(sizeof(native_t<bf16>) == sizeof(bf16) && alignof(native_t<bf16>) == alignof(bf16));
static_assert(sizeof(native_t<fp16>) == sizeof(fp16) && alignof(native_t<fp16>) == alignof(fp16));

template <class T>
SDNN_HOST_DEVICE inline native_t<T> const* to_native(T const* p) {
  return reinterpret_cast<native_t<T> const*>(p);
}
template <class T>
SDNN_HOST_DEVICE inline native_t<T>* to_native(T* p) {
  return reinterpret_cast<native_t<T>*>(p);
}

// Two 16-bit values packed in one 32-bit word (the lower address in the low half), for T =
// __half / sdnn::fp16 or __nv_bfloat16 / sdnn::bf16: widened to float (exact), or rounded from
// float (to nearest, ties to even) by the hardware conversions. Vector loads and stores of the
// CUDA-core kernels go through these, so one kernel body serves both 16-bit formats.
template <class T>
inline constexpr bool is_half_bits_v = std::is_same_v<native_t<T>, __half>;
template <class T>
inline constexpr bool is_bfloat_bits_v = std::is_same_v<native_t<T>, __nv_bfloat16>;

template <class T>
__device__ SDNN_FORCEINLINE float2 unpack2_float(unsigned w) {
  static_assert(is_half_bits_v<T> || is_bfloat_bits_v<T>, "unpack2_float: T must be a 16-bit floating-point type");
  if constexpr (is_half_bits_v<T>) {
    __half2 h;
    std::memcpy(&h, &w, sizeof w);
    return __half22float2(h);
  } else {
    __nv_bfloat162 h;
    std::memcpy(&h, &w, sizeof w);
    return __bfloat1622float2(h);
  }
}
template <class T>
__device__ SDNN_FORCEINLINE unsigned pack2_float(float lo, float hi) {
  static_assert(is_half_bits_v<T> || is_bfloat_bits_v<T>, "pack2_float: T must be a 16-bit floating-point type");
  unsigned w;
  if constexpr (is_half_bits_v<T>) {
    __half2 const h = __floats2half2_rn(lo, hi);
    std::memcpy(&w, &h, sizeof w);
  } else {
    __nv_bfloat162 const h = __floats2bfloat162_rn(lo, hi);
    std::memcpy(&w, &h, sizeof w);
  }
  return w;
}

}  // namespace sdnn
