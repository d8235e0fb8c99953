// Networks and helpers shared by the engine's device tests (tests/cuda/test_challenge_engine.cu)
// and its host layout tests (tests/host/test_challenge_engine_layout.cpp). Host code only.
#pragma once

#include <sdnn/formats/csr.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace sdnn_test {

using engine_layer = sdnn::csr_matrix<float, std::int32_t>;

// Rows x cols dense copy of a CSR (zeros elsewhere).
inline std::vector<float> dense_of(engine_layer const& y) {
  std::vector<float> d(static_cast<std::size_t>(y.rows()) * static_cast<std::size_t>(y.cols()), 0.f);
  for (std::int32_t i = 0; i < y.rows(); ++i)
    for (std::int32_t p = y.row_ptr()[i]; p < y.row_ptr()[i + 1]; ++p)
      d[static_cast<std::size_t>(i) * static_cast<std::size_t>(y.cols()) + y.col_idx()[p]] = y.values()[p];
  return d;
}

// The first k rows of a CSR.
inline engine_layer first_rows(engine_layer const& y, std::int32_t k) {
  engine_layer c(k, y.cols(), y.row_ptr()[k]);
  std::copy(y.row_ptr().begin(), y.row_ptr().begin() + k + 1, c.row_ptr().begin());
  std::copy(y.col_idx().begin(), y.col_idx().begin() + c.nnz(), c.col_idx().begin());
  std::copy(y.values().begin(), y.values().begin() + c.nnz(), c.values().begin());
  return c;
}

// Layer l of an N-neuron network with 40 random inputs per output: two weights (1/16, 1/8) in
// every layer but layer 2, which has one random weight per entry (about 80 k distinct at N =
// 2048: more than a compact term's 16-bit index holds).
inline engine_layer many_weights_layer(std::int32_t n, std::int32_t l) {
  std::mt19937 g(static_cast<unsigned>(100 + l));
  std::uniform_int_distribution<int> col(0, n - 1);
  std::uniform_real_distribution<float> u(-0.05f, 0.12f);
  std::vector<std::int32_t> rp{0}, ci;
  std::vector<float> v;
  for (std::int32_t i = 0; i < n; ++i) {
    std::vector<int> cs;
    for (int e = 0; e < 40; ++e) cs.push_back(col(g));
    std::sort(cs.begin(), cs.end());
    cs.erase(std::unique(cs.begin(), cs.end()), cs.end());
    for (int c : cs) {
      ci.push_back(c);
      v.push_back(l == 2 ? u(g) : (c % 2 ? 0.0625f : 0.125f));
    }
    rp.push_back(static_cast<std::int32_t>(ci.size()));
  }
  return sdnn::make_csr<float, std::int32_t>(n, n, rp, ci, v);
}

// `rows` 0/1 input rows over n neurons, spread by row number.
inline engine_layer spread_inputs(std::int32_t rows, std::int32_t n) {
  std::vector<std::int32_t> rp{0}, ci;
  std::vector<float> v;
  for (int i = 0; i < rows; ++i) {
    for (int c = i % 7; c < n; c += 5 + i % 11) {
      ci.push_back(c);
      v.push_back(1.f);
    }
    rp.push_back(static_cast<std::int32_t>(ci.size()));
  }
  return sdnn::make_csr<float, std::int32_t>(rows, n, rp, ci, v);
}

}  // namespace sdnn_test
