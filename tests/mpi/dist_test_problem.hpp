// A small Graph-Challenge-like problem for the sdnn::dist tests (host and MPI): a 256-neuron
// RadiX-Net of 24 layers (seed 42), bias -0.2, and `inputs` random binary images of 0..64
// pixels each (so the nonzeros per input vary, and nnz_partition differs from
// block_partition). About a fifth of the inputs survive the 24 layers, so a category list is
// neither empty nor everything. Deterministic on every platform (splitmix64, no <random>
// distributions), so every MPI rank builds the same problem.
#pragma once

#include <sdnn/challenge/radixnet.hpp>
#include <sdnn/formats/csr.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace sdnn_test {

struct dist_problem {
  std::vector<sdnn::csr_matrix<float, std::int32_t>> layers;
  sdnn::csr_matrix<float, std::int32_t> inputs;
  float bias = -0.2f;
  float cap = 32.f;
};

inline std::uint64_t splitmix64(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline dist_problem make_dist_problem(std::int32_t inputs, std::uint64_t seed = 7) {
  constexpr std::int32_t neurons = 256, layers = 24;
  dist_problem p;
  for (std::int32_t l = 0; l < layers; ++l) p.layers.push_back(sdnn::data::radixnet_layer(neurons, l, 42));
  std::uint64_t s = seed;
  std::vector<std::int32_t> row_ptr{0}, col_idx;
  std::vector<float> values;
  std::vector<std::int32_t> cols(neurons);
  for (std::int32_t i = 0; i < inputs; ++i) {
    auto const k = static_cast<std::int32_t>(splitmix64(s) % (neurons / 4 + 1));
    for (std::int32_t j = 0; j < neurons; ++j) cols[static_cast<std::size_t>(j)] = j;
    for (std::int32_t j = 0; j < k; ++j) {  // partial Fisher-Yates: k distinct pixels
      auto const r = j + static_cast<std::int32_t>(splitmix64(s) % static_cast<std::uint64_t>(neurons - j));
      std::swap(cols[static_cast<std::size_t>(j)], cols[static_cast<std::size_t>(r)]);
    }
    std::vector<std::int32_t> pick(cols.begin(), cols.begin() + k);
    std::sort(pick.begin(), pick.end());
    for (std::int32_t c : pick) {
      col_idx.push_back(c);
      values.push_back(1.f);
    }
    row_ptr.push_back(static_cast<std::int32_t>(col_idx.size()));
  }
  p.inputs = sdnn::make_csr<float, std::int32_t>(inputs, neurons, row_ptr, col_idx, values);
  return p;
}

}  // namespace sdnn_test
