// Shared helpers of the 16-bit tensor-core linear tests (test_linear_tc.cu, test_linear_tc_auto.cu):
// seeded random dense matrices and the significand bits of each output type. Host-only.
#pragma once

#include <sdnn/core/numeric.hpp>
#include <sdnn/formats/dense.hpp>

#include <cstdint>
#include <random>
#include <type_traits>

namespace sdnn_test {

// rows x cols, every entry drawn uniformly from [lo, hi) and rounded to T.
template <class T>
sdnn::dense_matrix<T> random_matrix(std::int64_t rows, std::int64_t cols, unsigned seed, float lo = -1.f,
                                    float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  sdnn::dense_matrix<T> a(rows, cols);
  for (auto& v : a.values()) v = T(u(rng));
  return a;
}

// The significand bits p of Out (its unit roundoff is 2^-p).
template <class Out>
constexpr int out_bits() {
  if constexpr (std::is_same_v<Out, float>) return 24;
  else if constexpr (std::is_same_v<Out, sdnn::bf16>) return 8;
  else return 11;
}

}  // namespace sdnn_test
