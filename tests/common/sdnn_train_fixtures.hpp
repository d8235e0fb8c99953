// Helpers of the training tests (tests/cuda/test_train_*.cu): seeded uniform floats, their
// rounding to a 16-bit type, bit equality, the "throws an sdnn::error saying ..." check, and the
// mixed_options of a float model (no loss scale).
#pragma once

#include <sdnn/core/error.hpp>
#include <sdnn/train/op/mixed_mlp.cuh>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace sdnn_test {

inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}
template <class T>
std::vector<T> rounded(std::vector<float> const& v) {
  std::vector<T> o(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) o[i] = T(v[i]);
  return o;
}
template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// Runs f; true when it threw an sdnn::error whose message contains `text`.
template <class F>
bool throws_with(F&& f, char const* text) {
  try {
    f();
  } catch (sdnn::error const& e) {
    return std::string(e.what()).find(text) != std::string::npos;
  }
  return false;
}

inline sdnn::train::mixed_options float_options(std::int64_t max_batch) {
  sdnn::train::mixed_options o;
  o.max_batch = max_batch;
  o.loss_scale = {false, 1.0f};
  return o;
}

}  // namespace sdnn_test
