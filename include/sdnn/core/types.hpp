// sdnn/core/types.hpp - value/index type traits shared by formats and kernels.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "sdnn/core/config.hpp"

namespace sdnn {

// Index types supported by every format.
template <class Index>
inline constexpr bool is_index_type_v = std::is_same_v<Index, std::int32_t> || std::is_same_v<Index, std::int64_t>;

// The type a kernel accumulates T in: float for float and __half, double for double.
template <class T>
struct accumulator {
  using type = float;
};
template <>
struct accumulator<double> {
  using type = double;
};
template <class T>
using accumulator_t = typename accumulator<T>::type;

// Conversions to/from the accumulator that also work for __half (which converts
// through float) when cuda_fp16.h has been included by the caller.
template <class To, class From>
SDNN_HOST_DEVICE inline To value_cast(From v) {
  if constexpr (std::is_same_v<To, From>) return v;
  else if constexpr (std::is_arithmetic_v<To> && std::is_arithmetic_v<From>) return static_cast<To>(v);
  else if constexpr (std::is_arithmetic_v<To>) return static_cast<To>(static_cast<float>(v));
  else return To(static_cast<float>(v));
}

}  // namespace sdnn
