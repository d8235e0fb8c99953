// Helpers of the training tests (tests/cuda/test_train_*.cu): seeded uniform floats, their
// rounding to a 16-bit type, bit equality, the "throws an sdnn::error saying ..." check, the
// mixed_options of a float model (no loss scale), one set of bf16-exact weights for a 16-bit and a
// float model, and the relative Frobenius distance of two gradients.
#pragma once

#include <sdnn/core/error.hpp>
#include <sdnn/train/op/mixed_mlp.cuh>

#include <cmath>
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

// m16's initial weights rounded to bf16, given to both models (biases kept), so that the float
// model computes with exactly the 16-bit model's weights. M16 and M32: mixed_mlp or mixed_cnn.
template <class M16, class M32>
void share_bf16_weights(M16& m16, M32& m32, sdnn::cuda_exec ex) {
  for (std::size_t l = 0; l < m16.layer_count(); ++l) {
    auto w = m16.layer(l).weights(ex);
    for (std::int64_t i = 0; i < w.rows(); ++i)
      for (std::int64_t j = 0; j < w.cols(); ++j) w(i, j) = float(sdnn::bf16(w(i, j)));
    m16.layer(l).set_weights(ex, w.view(), {});
    m32.layer(l).set_weights(ex, w.view(), {});
  }
}

// ||a - b||_F / ||b||_F, in double.
inline double relative_frobenius(sdnn::dense_matrix<float> const& a, sdnn::dense_matrix<float> const& b) {
  double num = 0, den = 0;
  for (std::int64_t i = 0; i < a.rows(); ++i)
    for (std::int64_t j = 0; j < a.cols(); ++j) {
      num += (double(a(i, j)) - b(i, j)) * (double(a(i, j)) - b(i, j));
      den += double(b(i, j)) * b(i, j);
    }
  return std::sqrt(num / den);
}

}  // namespace sdnn_test
