// Quantized direct sparse convolution weights (conv/quantized_weights.hpp) and their host
// reference (conv/reference/quantized.hpp): quantize / dequantize round trips (int8 within
// scale / 2 per group = output channel, zeros exact; codebook4 values are nearest codebook
// entries), layout kept (shape, nnz per channel, offsets), footprints, bad input errors, and
// the reference equal to the float reference on the dequantized weights bit for bit.
#include "sdnn_catch.hpp"

#include <sdnn/conv/weights.hpp>
#include <sdnn/conv/quantized_weights.hpp>
#include <sdnn/train/op/prune_uniform.hpp>
#include <sdnn/conv/reference/convolution.hpp>
#include <sdnn/conv/reference/quantized.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

using namespace sdnn;
using namespace sdnn::conv;

namespace {
sparse_conv_weights<float> random_conv(conv_shape const& s, double sparsity, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> w(static_cast<std::size_t>(s.weight_count()));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = d(g) * float(1 + i % 7);  // channels of different ranges
  return make_conv_weights<float>(s, prune_uniform(w.data(), s.K, s.filter_size(), sparsity));
}
void same_layout(sparse_conv_weights<float> const& a, sparse_conv_weights<float> const& b) {
  REQUIRE(a.shape == b.shape);
  REQUIRE(a.nnz_per_channel == b.nnz_per_channel);
  REQUIRE(a.offsets == b.offsets);
  REQUIRE(a.values.size() == b.values.size());
}
}  // namespace

TEST_CASE("quantized conv weights: int8 round trip within scale / 2 per output channel", "[conv_quantized]") {
  auto const s = conv_shape::conv2d(6, 9, 8, 5, 3, 3, 1, 1);
  auto const w = random_conv(s, 0.7, 1);
  for (auto gr : {quant_granularity::per_layer, quant_granularity::per_channel})
    for (bool sym : {true, false}) {
      int8_options o;
      o.granularity = gr;
      o.symmetric = sym;
      auto const q = quantize_int8(w, o);
      validate(q);
      std::size_t const groups = gr == quant_granularity::per_layer ? 1 : static_cast<std::size_t>(s.K);
      REQUIRE(q.enc.scale.size() == groups);
      REQUIRE(q.enc.q.size() == static_cast<std::size_t>(w.nnz()));
      auto const d = dequantize(q);
      same_layout(w, d);
      for (std::int64_t e = 0; e < w.nnz(); ++e) {
        std::size_t const g = gr == quant_granularity::per_layer ? 0 : static_cast<std::size_t>(e / w.nnz_per_channel);
        float const x = w.values[static_cast<std::size_t>(e)], y = d.values[static_cast<std::size_t>(e)];
        INFO("entry " << e << " group " << g << " " << x << " -> " << y);
        REQUIRE(std::fabs(double(x) - double(y)) <= 0.5 * q.enc.scale[g] * (1 + 1e-5));
        if (x == 0.0f) REQUIRE(y == 0.0f);
        REQUIRE(y == q.decode(e));
      }
      if (gr == quant_granularity::per_channel) {  // a channel's scale is its own max |w| / 127 (symmetric)
        for (int k = 0; k < s.K && sym; ++k) {
          float m = 0;
          for (std::int64_t e = std::int64_t(k) * w.nnz_per_channel; e < std::int64_t(k + 1) * w.nnz_per_channel; ++e)
            m = std::max(m, std::fabs(w.values[static_cast<std::size_t>(e)]));
          REQUIRE(q.enc.scale[static_cast<std::size_t>(k)] == sdnn_test::Approx(m / 127.0f));
        }
      }
      auto const f = footprint(q);
      REQUIRE(f.index_bytes == w.offsets.size() * 4);
      REQUIRE(f.value_bytes == static_cast<std::size_t>(w.nnz()));
      REQUIRE(footprint(w).value_bytes == 4 * f.value_bytes);
    }
}

TEST_CASE("quantized conv weights: codebook4 values are the nearest of 16 half centroids", "[conv_quantized]") {
  auto const s = conv_shape::conv2d(5, 7, 7, 7, 3, 3, 2, 1);
  auto const w = random_conv(s, 0.6, 2);
  auto const q = quantize_codebook4(w);
  validate(q);
  REQUIRE(q.enc.packed.size() == static_cast<std::size_t>((w.nnz() + 1) / 2));
  auto const d = dequantize(q);
  same_layout(w, d);
  for (std::int64_t e = 0; e < w.nnz(); ++e) {
    float const x = w.values[static_cast<std::size_t>(e)], y = d.values[static_cast<std::size_t>(e)];
    REQUIRE(round_to_half(y) == y);
    for (unsigned c = 0; c < 16; ++c) REQUIRE(std::fabs(double(x) - double(y)) <= std::fabs(double(x) - double(q.enc.centroid(c))));
  }
  auto const f = footprint(q);
  REQUIRE(f.value_bytes == static_cast<std::size_t>((w.nnz() + 1) / 2));
  REQUIRE(f.param_bytes == 32);
  // quantizing the decoded weights again gives the same values (every value is a centroid)
  auto const d2 = dequantize(quantize_codebook4(d));
  REQUIRE(d2.values == d.values);
}

TEST_CASE("quantized conv weights: edge cases and bad input", "[conv_quantized]") {
  auto const s = conv_shape::conv2d(3, 6, 6, 4, 3, 3, 1, 1);
  // all-zero weights (every entry padding, or none)
  std::vector<float> const zeros(static_cast<std::size_t>(s.weight_count()), 0.0f);
  for (double sp : {0.5, 1.0}) {
    auto const wz = make_conv_weights<float>(s, prune_uniform(zeros.data(), s.K, s.filter_size(), sp));
    int8_options asym;
    asym.symmetric = false;
    asym.granularity = quant_granularity::per_channel;
    for (auto const& d : {dequantize(quantize_int8(wz)), dequantize(quantize_int8(wz, asym)),
                          dequantize(quantize_codebook4(wz))}) {
      same_layout(wz, d);
      for (float v : d.values) REQUIRE(v == 0.0f);
    }
  }
  auto const w = random_conv(s, 0.5, 3);
  auto bad = w;
  bad.offsets.pop_back();
  REQUIRE_THROWS_AS(quantize_int8(bad), sdnn::error);
  REQUIRE_THROWS_AS(quantize_codebook4(bad), sdnn::error);
  bad = w;
  bad.offsets[1] = bad.offsets[0];  // not increasing
  REQUIRE_THROWS_AS(quantize_int8(bad), sdnn::error);
  int8_options po;
  po.clip = int8_clip::percentile;
  po.percentile = 1.5;
  REQUIRE_THROWS_AS(quantize_int8(w, po), sdnn::error);

  auto q = quantize_int8(w);
  auto qb = q;
  qb.enc.q.pop_back();
  REQUIRE_THROWS_AS(dequantize(qb), sdnn::error);
  qb = q;
  qb.enc.scale[0] = 0.0f;
  REQUIRE_THROWS_AS(dequantize(qb), sdnn::error);
  qb = q;
  qb.enc.zero[0] = 3;  // symmetric needs zero points of 0
  REQUIRE_THROWS_AS(validate(qb), sdnn::error);
  qb = q;
  qb.enc.granularity = quant_granularity::per_channel;  // one scale for K channels
  REQUIRE_THROWS_AS(validate(qb), sdnn::error);
  auto c4 = quantize_codebook4(w);
  c4.enc.packed.push_back(0);
  REQUIRE_THROWS_AS(dequantize(c4), sdnn::error);
  c4 = quantize_codebook4(w);
  c4.offsets[0] = -1;
  REQUIRE_THROWS_AS(validate(c4), sdnn::error);
}

TEST_CASE("quantized conv host reference == float reference on the dequantized weights, bit for bit",
          "[conv_quantized]") {
  std::mt19937 g(5);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (auto const& s : {conv_shape::conv2d(4, 10, 9, 6, 3, 3, 1, 1), conv_shape::conv2d(8, 7, 7, 3, 1, 1, 2, 0),
                        conv_shape::conv1d(5, 40, 4, 3, 1, 1)}) {
    int const N = 2;
    std::vector<float> in(static_cast<std::size_t>(N * s.in_features()));
    for (auto& x : in) x = d(g);
    std::vector<float> bias(static_cast<std::size_t>(s.K), 0.5f);
    auto const w = random_conv(s, 0.8, 7);
    auto const q8 = quantize_int8(w);
    auto const q4 = quantize_codebook4(w);
    for (bool relu : {false, true}) {
      auto const r8 = conv_reference(q8, N, in.data(), bias.data(), relu);
      auto const f8 = conv_reference(dequantize(q8), N, in.data(), bias.data(), relu);
      REQUIRE(std::memcmp(r8.data(), f8.data(), r8.size() * sizeof(double)) == 0);
      auto const r4 = conv_reference(q4, N, in.data(), bias.data(), relu);
      auto const f4 = conv_reference(dequantize(q4), N, in.data(), bias.data(), relu);
      REQUIRE(std::memcmp(r4.data(), f4.data(), r4.size() * sizeof(double)) == 0);
    }
  }
}
