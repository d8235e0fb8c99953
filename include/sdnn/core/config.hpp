// sdnn/core/config.hpp - compiler and platform macros shared by every header.
//
// Every .hpp in sdnn compiles with a plain C++17 compiler. Device code lives in .cuh
// files, which need nvcc (or another CUDA compiler defining __CUDACC__).
#pragma once

#define SDNN_VERSION_MAJOR 0
#define SDNN_VERSION_MINOR 1
#define SDNN_VERSION_PATCH 0

#if defined(__CUDACC__)
#define SDNN_HOST_DEVICE __host__ __device__
#define SDNN_DEVICE __device__
#define SDNN_FORCEINLINE __forceinline__
#else
#define SDNN_HOST_DEVICE
#define SDNN_DEVICE
#define SDNN_FORCEINLINE inline
#endif

namespace sdnn::detail {
// For static_assert in primary templates that must never be instantiated.
template <class...>
inline constexpr bool dependent_false = false;
}  // namespace sdnn::detail
