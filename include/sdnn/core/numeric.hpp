// sdnn/core/numeric.hpp - 16-bit floating-point value types that compile without CUDA.
//
// sdnn::bf16 and sdnn::fp16 hold the bits of a bfloat16 / IEEE binary16 number, have the size
// and alignment of CUDA's __nv_bfloat16 / __half (2 bytes), and convert to and from float with
// round-to-nearest-even, as __float2bfloat16_rn / __float2half_rn do. Host formats and references
// use them; device code reinterprets the same bits as the CUDA types (core/numeric.cuh).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "sdnn/core/config.hpp"

namespace sdnn {

namespace detail {
SDNN_HOST_DEVICE inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
SDNN_HOST_DEVICE inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
}  // namespace detail

struct bf16 {
  std::uint16_t bits;  // sign, 8 exponent bits, 7 mantissa bits

  bf16() = default;  // trivial: uninitialised like a float
  SDNN_HOST_DEVICE explicit bf16(float f) : bits(from_float(f)) {}
  SDNN_HOST_DEVICE explicit operator float() const { return detail::bits_float(std::uint32_t(bits) << 16); }
  SDNN_HOST_DEVICE static bf16 from_bits(std::uint16_t b) {
    bf16 v;
    v.bits = b;
    return v;
  }
  // Round to nearest, ties to even; NaN stays a (quiet) NaN with its sign.
  SDNN_HOST_DEVICE static std::uint16_t from_float(float f) {
    std::uint32_t const u = detail::float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
    return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
};

struct fp16 {
  std::uint16_t bits;  // sign, 5 exponent bits, 10 mantissa bits

  fp16() = default;
  SDNN_HOST_DEVICE explicit fp16(float f) : bits(from_float(f)) {}
  SDNN_HOST_DEVICE explicit operator float() const { return detail::bits_float(to_float_bits(bits)); }
  SDNN_HOST_DEVICE static fp16 from_bits(std::uint16_t b) {
    fp16 v;
    v.bits = b;
    return v;
  }
  // Round to nearest, ties to even; overflow gives Inf, tiny values subnormals or zero, NaN a
  // quiet NaN with its sign.
  SDNN_HOST_DEVICE static std::uint16_t from_float(float f) {
    std::uint32_t const u = detail::float_bits(f);
    std::uint16_t const sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
    std::uint32_t const a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: Inf
    if (a < 0x38800000u) {                                                  // below 2^-14: subnormal
      if (a < 0x33000000u) return sign;                                     // below 2^-25: rounds to 0
      std::uint32_t const e = a >> 23;                                      // 102..112
      std::uint32_t const m = (a & 0x7fffffu) | 0x800000u;
      std::uint32_t const shift = 126u - e;  // 14..24: value = m * 2^(e-150), unit 2^-24
      std::uint32_t const q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
      std::uint32_t const r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
      return static_cast<std::uint16_t>(sign | r);
    }
    std::uint32_t const r = a - 0x38000000u;  // rebias the exponent: 127 -> 15
    std::uint32_t const q = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
    return static_cast<std::uint16_t>(sign | q);
  }
  SDNN_HOST_DEVICE static std::uint32_t to_float_bits(std::uint16_t h) {
    std::uint32_t const sign = std::uint32_t(h & 0x8000u) << 16;
    std::uint32_t const e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu) return sign | 0x7f800000u | (m << 13);  // Inf, NaN
    if (e != 0) return sign | ((e + 112u) << 23) | (m << 13);
    if (m == 0) return sign;
    std::uint32_t ee = 113u, mm = m;  // subnormal: normalise
    while (!(mm & 0x400u)) {
      mm <<= 1;
      --ee;
    }
    return sign | (ee << 23) | ((mm & 0x3ffu) << 13);
  }
};

static_assert(sizeof(bf16) == 2 && alignof(bf16) == 2 && std::is_trivially_copyable_v<bf16>);
static_assert(sizeof(fp16) == 2 && alignof(fp16) == 2 && std::is_trivially_copyable_v<fp16>);

// The 16-bit types the tensor-core kernels take as weights and activations.
template <class T>
inline constexpr bool is_16bit_float_v = std::is_same_v<T, bf16> || std::is_same_v<T, fp16>;

// The value of x after a round trip through T (the rounding a kernel's inputs see).
template <class T>
SDNN_HOST_DEVICE inline float round_to(float x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else return static_cast<float>(T(x));
}

template <class T>
constexpr char const* value_type_name() {
  if constexpr (std::is_same_v<T, bf16>) return "bf16";
  else if constexpr (std::is_same_v<T, fp16>) return "fp16";
  else if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else return "?";
}

}  // namespace sdnn
