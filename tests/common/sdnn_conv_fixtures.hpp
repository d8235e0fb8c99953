// Shared inputs for the host and device convolution / pruning tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include <sdnn/core/types.hpp>

namespace sdnn_test {

// Float values converted to T (one rounding each), and back.
template <class T>
std::vector<T> to_t(std::vector<float> const& v) {
  std::vector<T> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = sdnn::value_cast<T>(v[i]);
  return r;
}
template <class T>
std::vector<float> to_f(std::vector<T> const& v) {
  std::vector<float> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = sdnn::value_cast<float>(v[i]);
  return r;
}

// n integers in [lo, hi] as floats (sums of their products are exact: tests compare with ==).
inline std::vector<float> small_ints(std::size_t n, int lo, int hi, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = float(d(g));
  return v;
}

// n reals uniform in [-1, 1).
inline std::vector<float> reals(std::size_t n, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// K x F weights with many ties: values from {0, -0, +-0.5, +-1, +-2}; about one channel in
// six is all zero. Pruning must break the ties by flat index and never keep a zero.
inline std::vector<float> tie_heavy(std::int64_t K, std::int64_t F, std::uint32_t seed) {
  std::mt19937 g(seed);
  float const vals[] = {0.0f, -0.0f, 0.5f, -0.5f, 1.0f, -1.0f, 2.0f, -2.0f};
  std::uniform_int_distribution<int> d(0, 7), zc(0, 5);
  std::vector<float> w(static_cast<std::size_t>(K * F));
  for (std::int64_t k = 0; k < K; ++k) {
    bool const zero = zc(g) == 0;
    for (std::int64_t f = 0; f < F; ++f) w[static_cast<std::size_t>(k * F + f)] = zero ? 0.0f : vals[d(g)];
  }
  return w;
}

}  // namespace sdnn_test
