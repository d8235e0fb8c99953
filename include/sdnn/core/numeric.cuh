// sdnn/core/numeric.cuh - sdnn::bf16 / sdnn::fp16 as CUDA's __nv_bfloat16 / __half on the device.
//
// The types have the same size, alignment and bits, so device code reads an array of sdnn::bf16
// as __nv_bfloat16 through native_t and to_native(); nothing is converted.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

}  // namespace sdnn
