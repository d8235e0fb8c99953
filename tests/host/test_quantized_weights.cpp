// Quantized CSR weights (formats/quantized.hpp) and their host products
// (linear/op/quantized_spmm.hpp): the host half conversion, int8 linear quantization (per layer /
// per channel, symmetric / asymmetric, the three clip rules) within scale / 2, the 4-bit
// codebook (nearest centroid, monotone k-means, packing), products equal to the products of
// the dequantized float matrix bit for bit, and the footprint of each format.
#include "sdnn_catch.hpp"

#include <sdnn/formats/quantized.hpp>
#include <sdnn/linear/op/quantized_spmm.hpp>
#include <sdnn/linear/reference/spmm.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <vector>

using namespace sdnn;

namespace {
// rows x cols, density d, values ~ Laplace-like (a few large ones), row 1 empty when rows > 1.
csr_matrix<float, int> random_weights(int rows, int cols, double d, std::uint32_t seed, double outlier = 0.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<int> rp{0}, ci;
  std::vector<float> v;
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j)
      if (i != 1 && u(rng) < d) {
        ci.push_back(j);
        double const e = -std::log(1.0 - u(rng)) * 0.05 * (u(rng) < 0.5 ? -1 : 1);
        v.push_back(static_cast<float>(e + 0.01 * (j % 3)));  // channels differ a little
      }
    rp.push_back(static_cast<int>(ci.size()));
  }
  if (outlier != 0.0 && !v.empty()) v[v.size() / 2] = static_cast<float>(outlier);
  return make_csr<float, int>(rows, cols, rp, ci, v);
}
dense_matrix<float> random_dense(std::int64_t r, std::int64_t c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f), z(0.f, 1.f);
  dense_matrix<float> m(r, c);
  for (auto& x : m.values()) x = z(rng) < 0.3f ? 0.f : u(rng);
  return m;
}
std::uint32_t bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
}  // namespace

TEST_CASE("host half conversion: every half round-trips; round to nearest even", "[quant][half]") {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    float const f = half_bits_to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) {
      REQUIRE(((h >> 10) & 0x1F) == 0x1F);
      REQUIRE(std::isnan(half_bits_to_float(float_to_half_bits(f))));
      continue;
    }
    REQUIRE(float_to_half_bits(f) == h);
  }
  REQUIRE(float_to_half_bits(1.0f) == 0x3C00);
  REQUIRE(float_to_half_bits(-2.0f) == 0xC000);
  REQUIRE(float_to_half_bits(65504.f) == 0x7BFF);
  REQUIRE(float_to_half_bits(65519.f) == 0x7BFF);
  REQUIRE(float_to_half_bits(65520.f) == 0x7C00);
  REQUIRE(float_to_half_bits(1e30f) == 0x7C00);
  REQUIRE(float_to_half_bits(std::ldexp(1.f, -24)) == 0x0001);
  REQUIRE(float_to_half_bits(std::ldexp(1.f, -25)) == 0x0000);       // tie -> even (0)
  REQUIRE(float_to_half_bits(std::ldexp(3.f, -25)) == 0x0002);       // tie -> even (2)
  REQUIRE(float_to_half_bits(std::ldexp(1023.5f, -24)) == 0x0400);   // tie -> the smallest normal
  REQUIRE(float_to_half_bits(1.f + std::ldexp(1.f, -11)) == 0x3C00); // tie -> even
  REQUIRE(float_to_half_bits(1.f + std::ldexp(3.f, -11)) == 0x3C02);
  REQUIRE(float_to_half_bits(1.f + std::ldexp(1.f, -11) + std::ldexp(1.f, -20)) == 0x3C01);
  REQUIRE(bits(round_to_half(-0.f)) == bits(-0.f));
}

TEST_CASE("int8: |w - dequant(quant(w))| <= scale / 2 inside the clip range, every variant", "[quant][int8]") {
  auto const w = random_weights(60, 24, 0.4, 7, /*outlier=*/1.5);
  for (auto gran : {quant_granularity::per_layer, quant_granularity::per_channel})
    for (bool sym : {true, false})
      for (auto clip : {int8_clip::none, int8_clip::percentile, int8_clip::mse}) {
        int8_options o;
        o.granularity = gran;
        o.symmetric = sym;
        o.clip = clip;
        o.percentile = 0.99;
        auto const q = quantize_int8(w, o);
        INFO("per_channel " << (gran == quant_granularity::per_channel) << " symmetric " << sym << " clip "
                            << int(clip));
        REQUIRE(q.enc.scale.size() == (gran == quant_granularity::per_layer ? 1u : 24u));
        REQUIRE(q.row_ptr == std::vector<int>(w.row_ptr().begin(), w.row_ptr().end()));
        REQUIRE(q.col_idx == std::vector<int>(w.col_idx().begin(), w.col_idx().end()));
        auto const d = dequantize(q);
        validate(d);
        std::size_t inside = 0;
        for (int p = 0; p < w.nnz(); ++p) {
          std::size_t const g = q.enc.group(w.col_idx()[p]);
          float const s = q.enc.scale[g], x = w.values()[p], y = d.values()[p];
          REQUIRE(y == q.decode(p));
          if (sym) REQUIRE(q.enc.zero[g] == 0);
          if (sym) REQUIRE(q.enc.q[static_cast<std::size_t>(p)] >= -127);
          if (x >= q.enc.clip_lo[g] && x <= q.enc.clip_hi[g]) {
            ++inside;
            REQUIRE(std::fabs(double(x) - double(y)) <= 0.5 * double(s) * (1 + 1e-5) + 1e-7);
          } else {  // saturated: the nearest end of the representable range
            REQUIRE(std::fabs(y) <= std::max(std::fabs(q.enc.clip_lo[g]), std::fabs(q.enc.clip_hi[g])) + s);
          }
        }
        REQUIRE(inside >= static_cast<std::size_t>(0.95 * w.nnz()));
        if (clip == int8_clip::none) REQUIRE(inside == static_cast<std::size_t>(w.nnz()));
      }
}

TEST_CASE("int8: clip rules: percentile cuts an outlier, mse never beats none by losing; 0 exact", "[quant][int8]") {
  auto const w = random_weights(100, 40, 0.5, 9, /*outlier=*/3.0);
  int8_options none, pct, mse;
  pct.clip = int8_clip::percentile;
  pct.percentile = 0.999;
  mse.clip = int8_clip::mse;
  auto const qn = quantize_int8(w, none), qp = quantize_int8(w, pct), qm = quantize_int8(w, mse);
  REQUIRE(qn.enc.clip_hi[0] == sdnn_test::Approx(3.0));
  REQUIRE(qp.enc.clip_hi[0] < 1.0f);  // the outlier (one of about 2000 values) is clipped
  REQUIRE(qm.enc.scale[0] <= qn.enc.scale[0]);
  auto mse_of = [&](quantized_csr<int8_encoding> const& q) {
    double e = 0;
    for (int p = 0; p < w.nnz(); ++p) e += std::pow(double(w.values()[p]) - double(q.decode(p)), 2);
    return e / w.nnz();
  };
  REQUIRE(mse_of(qm) <= mse_of(qn) * 1.05);
  // Asymmetric per channel: a stored 0 decodes to exactly 0.
  auto z = make_csr<float, int>(2, 3, {0, 3, 5}, {0, 1, 2, 0, 2}, {0.f, 0.7f, -0.2f, 0.3f, 0.f});
  int8_options a;
  a.symmetric = false;
  a.granularity = quant_granularity::per_channel;
  auto const qz = quantize_int8(z, a);
  REQUIRE(qz.decode(0) == 0.f);
  REQUIRE(qz.decode(4) == 0.f);
  // All-zero and empty matrices.
  auto zeros = make_csr<float, int>(1, 2, {0, 2}, {0, 1}, {0.f, 0.f});
  REQUIRE(dequantize(quantize_int8(zeros)).values()[1] == 0.f);
  csr_matrix<float, int> empty;
  REQUIRE(quantize_int8(empty, mse).nnz() == 0);
}

TEST_CASE("codebook4: nearest centroid of the stored half codebook, monotone k-means, packing", "[quant][codebook]") {
  auto const w = random_weights(50, 31, 0.5, 11, 0.9);
  auto const q = quantize_codebook4(w);
  REQUIRE(q.enc.packed.size() == static_cast<std::size_t>((w.nnz() + 1) / 2));
  REQUIRE(q.enc.kmeans_iterations >= 1);
  for (std::size_t k = 1; k < q.enc.kmeans_sse.size(); ++k)
    REQUIRE(q.enc.kmeans_sse[k] <= q.enc.kmeans_sse[k - 1] * (1 + 1e-12));
  std::set<float> distinct;
  for (int p = 0; p < w.nnz(); ++p) {
    unsigned const idx = q.enc.index(p);
    REQUIRE(idx < 16);
    float const x = w.values()[p];
    double const mine = std::fabs(double(x) - double(q.enc.centroid(idx)));
    for (unsigned c = 0; c < 16; ++c) {
      double const other = std::fabs(double(x) - double(q.enc.centroid(c)));
      REQUIRE(mine <= other);
      if (other == mine) REQUIRE(idx <= c);  // ties: the lower index
    }
    distinct.insert(q.decode(p));
  }
  REQUIRE(distinct.size() <= 16);
  // The final error (half codebook, reassigned) is no worse than after the first Lloyd step.
  double sse = 0;
  for (int p = 0; p < w.nnz(); ++p) sse += std::pow(double(w.values()[p]) - double(q.decode(p)), 2);
  REQUIRE(sse <= q.enc.kmeans_sse.front() * 1.01);

  // At most 16 distinct half-exact values: reproduced exactly; odd nnz packs the last nibble low.
  auto small = make_csr<float, int>(2, 3, {0, 2, 3}, {0, 2, 1}, {0.5f, -0.25f, 0.5f});
  auto const qs = quantize_codebook4(small);
  REQUIRE(qs.enc.packed.size() == 2);
  REQUIRE((qs.enc.packed[1] >> 4) == 0);
  auto const ds = dequantize(qs);
  REQUIRE(std::vector<float>(ds.values().begin(), ds.values().end()) == std::vector<float>{0.5f, -0.25f, 0.5f});
  // One value; an empty matrix.
  auto one = make_csr<float, int>(1, 1, {0, 1}, {0}, {0.3f});
  REQUIRE(quantize_codebook4(one).decode(0) == round_to_half(0.3f));
  csr_matrix<float, int> empty;
  REQUIRE(quantize_codebook4(empty).enc.packed.empty());
}

TEST_CASE("quantized products equal the products of the dequantized float matrix, bit for bit", "[quant][spmm]") {
  auto const w = random_weights(37, 29, 0.3, 21, 0.8);  // in x out, row 1 empty
  auto const x = random_dense(9, 37, 22);
  auto const b = random_dense(29, 5, 23);
  std::vector<float> bias(29);
  for (int j = 0; j < 29; ++j) bias[static_cast<std::size_t>(j)] = 0.01f * float(j % 7) - 0.03f;
  auto const epi = epilogue_relu<float>(bias.data());
  auto check = [&](auto const& q) {
    auto const d = dequantize(q);
    dense_matrix<float> y1(9, 29), y2(9, 29);
    ops::quantized_dense_sparse_spmm(host_exec{}, x.view(), q, y1.view(), epi);
    reference::dense_sparse_spmm<float, int, float>(x.view(), d.view(), y2.view(), epi);
    for (std::size_t k = 0; k < y1.size(); ++k) REQUIRE(bits(y1.values()[k]) == bits(y2.values()[k]));
    // A * B with A = W^T's shape reversed: W is 37 x 29 and B 29 x 5.
    dense_matrix<float> c1(37, 5), c2(37, 5);
    ops::quantized_spmm(host_exec{}, q, b.view(), c1.view(), epilogue_none<float>());
    reference::spmm<float, int, float>(d.view(), b.view(), c2.view(), epilogue_none<float>());
    for (std::size_t k = 0; k < c1.size(); ++k) REQUIRE(bits(c1.values()[k]) == bits(c2.values()[k]));
    for (int j = 0; j < 5; ++j) REQUIRE(c1(1, j) == 0.f);  // the empty row
  };
  int8_options o;
  check(quantize_int8(w, o));
  o.granularity = quant_granularity::per_channel;
  o.symmetric = false;
  o.clip = int8_clip::mse;
  check(quantize_int8(w, o));
  check(quantize_codebook4(w));
  // Empty W: Y = epi(0) = relu(bias).
  auto const we = make_csr<float, int>(37, 29, std::vector<int>(38, 0), {}, {});
  auto const qe = quantize_codebook4(we);
  dense_matrix<float> ye(9, 29);
  ops::quantized_dense_sparse_spmm(host_exec{}, x.view(), qe, ye.view(), epi);
  REQUIRE(ye(3, 3) == 0.0f);
  REQUIRE(ye(3, 6) == 0.03f);
  dense_matrix<float> bad(9, 30);
  REQUIRE_THROWS_AS(ops::quantized_dense_sparse_spmm(host_exec{}, x.view(), qe, bad.view(), epi), sdnn::error);
}

TEST_CASE("weight footprint per format", "[quant][footprint]") {
  auto const w = random_weights(64, 32, 0.1, 31);
  std::size_t const nnz = static_cast<std::size_t>(w.nnz()), idx = (65 + nnz) * 4;
  auto const f = footprint(w);
  REQUIRE(f.index_bytes == idx);
  REQUIRE(f.value_bytes == nnz * 4);
  REQUIRE(f.total() == idx + nnz * 4);
  auto const i8 = footprint(quantize_int8(w));
  REQUIRE(i8.index_bytes == idx);
  REQUIRE(i8.value_bytes == nnz);
  REQUIRE(i8.param_bytes == 4);
  int8_options o;
  o.granularity = quant_granularity::per_channel;
  o.symmetric = false;
  REQUIRE(footprint(quantize_int8(w, o)).param_bytes == 32 * 8);
  auto const cb = footprint(quantize_codebook4(w));
  REQUIRE(cb.value_bytes == (nnz + 1) / 2);
  REQUIRE(cb.param_bytes == 32);
  REQUIRE(dense_footprint(64, 32).total() == 64 * 32 * 4);
}
