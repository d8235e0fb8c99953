// sdnn/core/config.hpp - compiler and platform macros shared by every header.
//
// Every .hpp in sdnn compiles with a plain C++17 compiler. Device code lives in .cuh
// files, which need nvcc (or another CUDA compiler defining __CUDACC__).
#pragma once

#define SDNN_VERSION_MAJOR 0
#define SDNN_VERSION_MINOR 1
#define SDNN_VERSION_PATCH 0

// SDNN_HAS_CUDA is 1 when the program contains sdnn's device code: the sdnn::sdnn CMake target
// of a CUDA-enabled build defines it for every translation unit, .cpp and .cu alike. It must be
// the same in every translation unit of a program. It selects where the device members of a
// class are defined (in the class's .cuh when 1; as bodies that throw sdnn::not_compiled when
// 0), never what a class declares: every class has the same members, bases and layout in every
// compiler. (__CUDACC__ only says which compiler reads a file, and is used for no declaration.)
#ifndef SDNN_HAS_CUDA
#define SDNN_HAS_CUDA 0
#endif

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
