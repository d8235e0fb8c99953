// Plan-time structure proofs of the depth-first engine (challenge/structure.hpp) on the
// official and generated RadiX-Net networks, on networks built to break each proof, the soundness of the
// retirement rule against the host reference, and the distinct benchmark inputs
// (challenge/distinct_inputs.hpp).
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/challenge/inputs.hpp>
#include <sdnn/challenge/distinct_inputs.hpp>
#include <sdnn/challenge/radixnet.hpp>
#include <sdnn/challenge/tsv.hpp>
#include <sdnn/io/mnist_idx.hpp>
#include <sdnn/challenge/structure.hpp>
#include <sdnn/challenge/reference.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace sdnn;
using sdnn_test::error_text;
using sdnn_test::has;
using matrix = csr_matrix<float, std::int32_t>;

namespace {

std::vector<matrix> official_layers(std::int32_t count) {
  std::vector<matrix> l;
  for (std::int32_t i = 0; i < count; ++i) l.push_back(data::official_1024_layer(i));
  return l;
}

struct csr_vectors {
  std::int32_t rows = 0, cols = 0;
  std::vector<std::int32_t> rp, ci;
  std::vector<float> v;
  explicit csr_vectors(matrix const& a)
      : rows(a.rows()), cols(a.cols()), rp(a.row_ptr().begin(), a.row_ptr().end()),
        ci(a.col_idx().begin(), a.col_idx().end()), v(a.values().begin(), a.values().end()) {}
  matrix build() const { return make_csr<float, std::int32_t>(rows, cols, rp, ci, v); }
};

// A copy of w with W(k, j) (an existing entry) set to value.
matrix with_value(matrix const& w, std::int32_t k, std::int32_t j, float value) {
  csr_vectors c(w);
  for (std::int32_t a = c.rp[k]; a < c.rp[k + 1]; ++a)
    if (c.ci[a] == j) {
      c.v[a] = value;
      return c.build();
    }
  FAIL("with_value: no entry (" << k << ", " << j << ")");
  return c.build();
}

// A copy of w without any entry in column j.
matrix without_column(matrix const& w, std::int32_t j) {
  csr_vectors c(w), out(w);
  out.ci.clear();
  out.v.clear();
  out.rp.assign(1, 0);
  for (std::int32_t k = 0; k < c.rows; ++k) {
    for (std::int32_t a = c.rp[k]; a < c.rp[k + 1]; ++a)
      if (c.ci[a] != j) out.ci.push_back(c.ci[a]), out.v.push_back(c.v[a]);
    out.rp.push_back(static_cast<std::int32_t>(out.ci.size()));
  }
  return out.build();
}

// The first stored entry of column j: its row.
std::int32_t some_row_of_column(matrix const& w, std::int32_t j) {
  for (std::int32_t k = 0; k < w.rows(); ++k)
    for (std::int32_t a = w.row_ptr()[k]; a < w.row_ptr()[k + 1]; ++a)
      if (w.col_idx()[a] == j) return k;
  return -1;
}

bool all_cap_row(matrix const& y, std::int32_t i, float cap) {
  if (y.row_ptr()[i + 1] - y.row_ptr()[i] != y.cols()) return false;
  for (std::int32_t a = y.row_ptr()[i]; a < y.row_ptr()[i + 1]; ++a)
    if (y.values()[a] != cap) return false;
  return true;
}

matrix all_cap_rows(std::int32_t rows, std::int32_t n, float cap) {
  std::vector<std::int32_t> rp, ci;
  std::vector<float> v;
  rp.push_back(0);
  for (std::int32_t i = 0; i < rows; ++i) {
    for (std::int32_t j = 0; j < n; ++j) ci.push_back(j), v.push_back(cap);
    rp.push_back(static_cast<std::int32_t>(ci.size()));
  }
  return make_csr<float, std::int32_t>(rows, n, rp, ci, v);
}

// Deterministic 0/1 inputs: each pixel set with probability ~density (raw mt19937 output,
// which the standard fixes, unlike its distributions).
// density_step > 0 raises the density row by row (density + i x density_step).
matrix random_binary(std::int32_t rows, std::int32_t n, double density, std::uint32_t seed, double density_step = 0) {
  std::mt19937 g(seed);
  std::vector<std::int32_t> rp{0}, ci;
  std::vector<float> v;
  for (std::int32_t i = 0; i < rows; ++i) {
    auto const threshold = static_cast<std::uint32_t>(std::min(1.0, density + i * density_step) * 4294967295.0);
    for (std::int32_t j = 0; j < n; ++j)
      if (g() < threshold) ci.push_back(j), v.push_back(1.f);
    rp.push_back(static_cast<std::int32_t>(ci.size()));
  }
  return make_csr<float, std::int32_t>(rows, n, rp, ci, v);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The official network: every proof holds.

TEST_CASE("challenge structure: the official 1024 x 120 network satisfies every proof", "[challenge][structure]") {
  auto const layers = official_layers(120);
  float const bias = data::challenge_bias(1024);

  auto const sat = challenge::prove_saturation(layers, bias, 32.f);
  REQUIRE(sat.status.ok());
  REQUIRE(sat.layers.size() == 120);
  REQUIRE(sat.suffix_fixed.size() == 121);
  for (std::size_t l = 0; l < 120; ++l) {
    INFO("layer " << l << ": " << sat.layers[l].why);
    REQUIRE(sat.layer_fixed[l] == 1);
    REQUIRE(sat.suffix_fixed[l] == 1);
    REQUIRE(sat.layers[l].why.empty());
  }
  REQUIRE(sat.suffix_fixed[120] == 1);
  REQUIRE(sat.retire_from() == 0);

  // Fold factor 16 (W(i, j) depends on j only through j mod 64) on every layer, and 32 on the
  // last layer of each 6-layer block: there the stride s = 32 = M / 2, so column q draws from
  // the rows of residues {q, q + 32} and column q + 32 from {q + 32, q + 64 = q}: the same rows.
  auto const fold = challenge::find_duplicate_columns(layers);
  REQUIRE(fold.size() == 120);
  for (std::size_t l = 0; l < 120; ++l) {
    INFO("layer " << l);
    std::int32_t const period = l % 6 == 5 ? 32 : 64;
    REQUIRE(fold[l].status.ok());
    REQUIRE(fold[l].distinct == period);
    REQUIRE(fold[l].fold_factor() == 1024.0 / period);
    REQUIRE(fold[l].fold_factor() >= 16.0);
    REQUIRE(fold[l].period == period);
    for (std::int32_t j = 0; j < 1024; ++j) REQUIRE(fold[l].representative[j] == j % period);
  }

  auto const first = challenge::prove_sparse_first_layer(layers[0]);
  REQUIRE(first.status.ok());
  REQUIRE(first.min_exponent == -4);  // 1/16
  REQUIRE(first.max_units == 32.0);   // 32 terms of one unit per column

  auto const all = challenge::analyze_structure(layers, bias, 32.f);
  REQUIRE(all.saturation.status.ok());
  REQUIRE(all.folding.size() == 120);
  REQUIRE(all.first_layer.status.ok());
  REQUIRE(all.may_retire_on_entry(0));
  REQUIRE(all.may_retire_on_entry(120));
  REQUIRE(all.summary() ==
          "retirement: every layer maps all-cap to all-cap; folding: fold factor 16 .. 32; sparse first layer: order-free");

  auto const off = challenge::analyze_structure(layers, bias, 32.f, {false, false, false});
  REQUIRE(!off.saturation.status.ok());
  REQUIRE(has(off.saturation.status.why(), "disabled"));
  REQUIRE(off.folding.empty());
  REQUIRE(has(off.first_layer.status.why(), "disabled"));
  REQUIRE(!off.may_retire_on_entry(5));
  REQUIRE(off.saturation.retire_from() == -1);
  REQUIRE(off.summary() == "retirement: off; folding: off; sparse first layer: off");
}

TEST_CASE("challenge structure: generated 4096-neuron layers fold 16-fold and saturate", "[challenge][structure]") {
  std::vector<matrix> layers;
  for (std::int32_t l = 0; l < 10; ++l) layers.push_back(data::radixnet_layer(4096, l, 42));  // blocks 0 and 1
  auto const fold = challenge::find_duplicate_columns(layers);
  for (std::size_t l = 0; l < layers.size(); ++l) {
    INFO("layer " << l);
    std::int32_t const period = l % 8 == 7 ? 128 : 256;  // K = 8; the block's last layer folds 32-fold
    REQUIRE(fold[l].distinct == period);
    REQUIRE(fold[l].fold_factor() == 4096.0 / period);
    REQUIRE(fold[l].period == period);
  }
  auto const sat = challenge::prove_saturation(layers, data::challenge_bias(4096), 32.f);
  REQUIRE(sat.status.ok());
  REQUIRE(challenge::prove_sparse_first_layer(layers[0]).status.ok());
}

// ---------------------------------------------------------------------------------------------
// Networks built to break the saturation proof.

TEST_CASE("challenge structure: a negative weight breaks the suffix proof from that layer back",
          "[challenge][structure][saturation]") {
  auto layers = official_layers(6);
  std::int32_t const j = 300, k = some_row_of_column(layers[3], j);
  REQUIRE(k >= 0);
  // Column 300 of layer 3: 31 x (32 x 1/16) + 32 x (-1) = 30, + bias = 29.7 < 32.
  layers[3] = with_value(layers[3], k, j, -1.f);
  auto const sat = challenge::prove_saturation(layers, -0.3f, 32.f);
  REQUIRE(!sat.status.ok());
  REQUIRE(std::vector<std::uint8_t>(sat.layer_fixed.begin(), sat.layer_fixed.end()) ==
          std::vector<std::uint8_t>{1, 1, 1, 0, 1, 1});
  REQUIRE(std::vector<std::uint8_t>(sat.suffix_fixed.begin(), sat.suffix_fixed.end()) ==
          std::vector<std::uint8_t>{0, 0, 0, 0, 1, 1, 1});
  REQUIRE(sat.retire_from() == 4);
  REQUIRE(sat.layers[3].failing_columns == 1);
  REQUIRE(sat.layers[3].first_failing_column == 300);
  INFO(sat.status.why());
  REQUIRE(has(sat.layers[3].why, "layer 3 (0-based)"));
  REQUIRE(has(sat.layers[3].why, "column 300"));
  REQUIRE(has(sat.layers[3].why, "Z = 30"));
  REQUIRE(has(sat.status.why(), "entry to layer 4"));

  // And the broken layer really does move an all-cap row (the proof was right to fail).
  auto const out = reference::challenge_layer(all_cap_rows(1, 1024, 32.f), layers[3], -0.3f, 32.f);
  REQUIRE(!all_cap_row(out, 0, 32.f));
  float v300 = 0;
  for (std::int32_t a = 0; a < out.nnz(); ++a)
    if (out.col_idx()[a] == 300) v300 = out.values()[a];
  REQUIRE(v300 == 30.f + -0.3f);

  // A negative weight that does not pull the sum below the cap keeps the proof:
  // 31 x 2 + 32 x (-0.5) = 46, - 0.3 -> capped to 32.
  auto ok = official_layers(6);
  ok[3] = with_value(ok[3], k, j, -0.5f);
  REQUIRE(challenge::prove_saturation(ok, -0.3f, 32.f).status.ok());
}

TEST_CASE("challenge structure: a column with no entries breaks the proof", "[challenge][structure][saturation]") {
  auto layers = official_layers(3);
  layers[1] = without_column(layers[1], 17);
  auto const sat = challenge::prove_saturation(layers, -0.3f, 32.f);
  REQUIRE(std::vector<std::uint8_t>(sat.suffix_fixed.begin(), sat.suffix_fixed.end()) ==
          std::vector<std::uint8_t>{0, 0, 1, 1});
  REQUIRE(sat.layers[1].first_failing_column == 17);
  REQUIRE(has(sat.layers[1].why, "column 17 has no nonzeros"));
  // The emptied column's class no longer matches its 15 siblings (and is the only empty one).
  auto const f = challenge::find_duplicate_columns(layers[1], 1);
  REQUIRE(f.distinct == 65);
  REQUIRE(f.representative[17] == 17);
  REQUIRE(f.representative[17 + 64] == 17 + 64);  // the smallest remaining member of 17's class
}

TEST_CASE("challenge structure: NaN and Inf weights break the proofs of their layer", "[challenge][structure]") {
  float const nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (float bad : {nan, inf, -inf}) {
    INFO("weight " << bad);
    auto layers = official_layers(4);
    std::int32_t const k = some_row_of_column(layers[2], 5);
    layers[2] = with_value(layers[2], k, 5, bad);
    auto const sat = challenge::prove_saturation(layers, -0.3f, 32.f);
    REQUIRE(std::vector<std::uint8_t>(sat.layer_fixed.begin(), sat.layer_fixed.end()) ==
            std::vector<std::uint8_t>{1, 1, 0, 1});
    REQUIRE(sat.retire_from() == 3);
    REQUIRE(has(sat.layers[2].why, "column 5 has the non-finite weight"));
    // Folding compares bits: the changed column leaves its class, nothing else changes.
    auto const f = challenge::find_duplicate_columns(layers[2], 2);
    REQUIRE(f.distinct == 65);
    REQUIRE(f.representative[5] == 5);
    REQUIRE(f.representative[5 + 64] == 5 + 64);
    // In layer 0 it also breaks the sparse-first-layer proof.
    layers[0] = with_value(layers[0], some_row_of_column(layers[0], 9), 9, bad);
    auto const first = challenge::prove_sparse_first_layer(layers[0]);
    REQUIRE(!first.status.ok());
    REQUIRE(has(first.status.why(), "column 9"));
    REQUIRE(has(first.status.why(), "not finite"));
  }
  // A NaN bias or cap, or a cap <= 0: no layer is proven.
  auto const layers = official_layers(2);
  REQUIRE(!challenge::prove_saturation(layers, nan, 32.f).layer_fixed[0]);
  REQUIRE(!challenge::prove_saturation(layers, -0.3f, nan).layer_fixed[1]);
  REQUIRE(has(challenge::prove_saturation(layers, -0.3f, 0.f).layers[0].why, "finite cap > 0"));
}

TEST_CASE("challenge structure: the proof uses the exact epilogue at the threshold", "[challenge][structure][saturation]") {
  // 1 x 2 layers (one input neuron): Z_j = cap x w_j. cap 32, bias -0.3.
  // w = 1.0078125 (129/128): Z = 32.25, Z + bias = 31.95 < 32: not a fixed point.
  // w = 1.015625 (65/64):   Z = 32.5,  Z + bias = 32.2 -> capped: a fixed point.
  auto one = [](float w0) {
    return make_csr<float, std::int32_t>(1, 1, {0, 1}, {0}, {w0});
  };
  REQUIRE(!challenge::prove_layer_saturation(one(1.0078125f), -0.3f, 32.f).fixed);
  REQUIRE(challenge::prove_layer_saturation(one(1.015625f), -0.3f, 32.f).fixed);
  // Z + bias exactly the cap (float 32.3f - 0.3f rounds to exactly 32? checked both ways against the
  // epilogue itself, so the proof and the reference cannot disagree).
  float const w = 32.3f / 32.f;
  bool const holds = epilogue_capped_relu<float>(-0.3f, 32.f)(32.f * w, 0) == 32.f;
  REQUIRE(challenge::prove_layer_saturation(one(w), -0.3f, 32.f).fixed == holds);
  auto const out = reference::challenge_layer(all_cap_rows(1, 1, 32.f), one(w), -0.3f, 32.f);
  REQUIRE(all_cap_row(out, 0, 32.f) == holds);
}

// ---------------------------------------------------------------------------------------------
// Folding, built to break.

TEST_CASE("challenge structure: two columns differing in one value fold apart", "[challenge][structure][folding]") {
  auto w = data::official_1024_layer(0);
  std::int32_t const j = 64 * 5 + 7;  // class 7: columns 7, 71, ..., 967
  w = with_value(w, some_row_of_column(w, j), j, 0.125f);
  auto const f = challenge::find_duplicate_columns(w, 0);
  REQUIRE(f.status.ok());
  REQUIRE(f.distinct == 65);
  REQUIRE(f.fold_factor() == sdnn_test::Approx(1024.0 / 65.0));
  REQUIRE(f.period == 0);
  REQUIRE(f.representative[j] == j);
  for (std::int32_t t = 0; t < 16; ++t)
    if (7 + 64 * t != j) REQUIRE(f.representative[7 + 64 * t] == 7);
  REQUIRE(f.representative[8] == 8);
  REQUIRE(f.representative[8 + 64 * 9] == 8);

  // Bitwise: +0 and -0 stored zeros differ; identical columns fold; a per-column bias splits.
  // 2 x 4: columns 0, 2 = {(0, +0), (1, 1)}, column 1 = {(0, -0), (1, 1)}, column 3 = {(1, 1)}.
  auto const z = make_csr<float, std::int32_t>(2, 4, {0, 3, 7}, {0, 1, 2, 0, 1, 2, 3},
                                               {0.f, -0.f, 0.f, 1.f, 1.f, 1.f, 1.f});
  auto const fz = challenge::find_duplicate_columns(z);
  REQUIRE(fz.distinct == 3);
  REQUIRE(fz.representative == std::vector<std::int32_t>{0, 1, 0, 3});
  float const bias_same[4] = {-0.3f, -0.3f, -0.3f, -0.3f}, bias_split[4] = {-0.3f, -0.3f, -0.2f, -0.3f};
  REQUIRE(challenge::find_duplicate_columns(z, 0, bias_same).distinct == 3);
  REQUIRE(challenge::find_duplicate_columns(z, 0, bias_split).representative == std::vector<std::int32_t>{0, 1, 2, 3});
  // All columns distinct: the fold proof reports nothing to fold.
  auto const d = challenge::find_duplicate_columns(make_csr<float, std::int32_t>(1, 2, {0, 2}, {0, 1}, {1.f, 2.f}), 4);
  REQUIRE(d.distinct == 2);
  REQUIRE(!d.status.ok());
  REQUIRE(has(d.status.why(), "layer 4"));
  REQUIRE(has(d.status.why(), "nothing to fold"));
}

TEST_CASE("challenge structure: folding is bit-identical on the reference", "[challenge][structure][folding]") {
  // Every output column equals its representative's, bitwise, on real activations.
  auto const layers = official_layers(8);
  auto y = random_binary(40, 1024, 0.12, 7);
  for (std::size_t l = 0; l < layers.size(); ++l) {
    auto const f = challenge::find_duplicate_columns(layers[l], static_cast<std::int32_t>(l));
    y = reference::challenge_layer(y, layers[l], -0.3f, 32.f);
    for (std::int32_t i = 0; i < y.rows(); ++i) {
      std::vector<float> dense(1024, 0.f);
      for (std::int32_t a = y.row_ptr()[i]; a < y.row_ptr()[i + 1]; ++a) dense[y.col_idx()[a]] = y.values()[a];
      for (std::int32_t j = 0; j < 1024; ++j)
        REQUIRE(std::memcmp(&dense[j], &dense[f.representative[j]], sizeof(float)) == 0);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Sparse first layer.

TEST_CASE("challenge structure: binary inputs and the order-free first layer", "[challenge][structure][first]") {
  auto const good = make_csr<float, std::int32_t>(2, 4, {0, 2, 3}, {0, 3, 1}, {1.f, 1.f, 1.f});
  REQUIRE(challenge::check_binary_inputs(good).ok());
  auto const two = make_csr<float, std::int32_t>(2, 4, {0, 2, 3}, {0, 3, 1}, {1.f, 1.f, 2.f});
  auto const st = challenge::check_binary_inputs(two);
  REQUIRE(!st.ok());
  REQUIRE(has(st.why(), "input row 1 (0-based), column 1 holds 2"));
  auto const zero = make_csr<float, std::int32_t>(1, 4, {0, 1}, {2}, {0.f});
  REQUIRE(!challenge::check_binary_inputs(zero).ok());
  if (io::has_zlib()) {
    auto const official =
        io::read_challenge_images(std::string(sdnn_test::data_dir()) + "/sparse-images-1024-first1200.tsv.gz", 1024);
    REQUIRE(challenge::check_binary_inputs(official).ok());
  }

  // Weights that are not on a coarse enough grid: 0.1f = 13421773 x 2^-27; two of them in a
  // column are 26843546 > 2^24 units, so a partial sum could round.
  auto const tenth = make_csr<float, std::int32_t>(2, 2, {0, 2, 3}, {0, 1, 0}, {0.1f, 0.1f, 0.1f});
  auto const p = challenge::prove_sparse_first_layer(tenth, 0);
  REQUIRE(!p.status.ok());
  REQUIRE(has(p.status.why(), "column 0"));
  REQUIRE(has(p.status.why(), "more than 2^24"));
  // One 0.1f per column is fine (a single term cannot round).
  REQUIRE(challenge::prove_sparse_first_layer(make_csr<float, std::int32_t>(2, 2, {0, 1, 2}, {0, 1}, {0.1f, 0.1f}))
              .status.ok());
  // 1 and 2^-30 need 2^30 + 1 units: fails; 1 and 2^-20: 2^20 + 1 units, holds.
  REQUIRE(!challenge::prove_sparse_first_layer(
               make_csr<float, std::int32_t>(2, 1, {0, 1, 2}, {0, 0}, {1.f, std::ldexp(1.f, -30)}))
               .status.ok());
  REQUIRE(challenge::prove_sparse_first_layer(
              make_csr<float, std::int32_t>(2, 1, {0, 1, 2}, {0, 0}, {1.f, std::ldexp(1.f, -20)}))
              .status.ok());
  // Mixed signs and magnitudes on the grid: still order-free.
  auto const mixed = make_csr<float, std::int32_t>(3, 1, {0, 1, 2, 3}, {0, 0, 0}, {-0.75f, 1024.f, 0.0625f});
  auto const pm = challenge::prove_sparse_first_layer(mixed);
  REQUIRE(pm.status.ok());
  REQUIRE(pm.min_exponent == -4);
  REQUIRE(pm.max_units == 12.0 + 16384.0 + 1.0);

  // What the proof promises, checked: with 0/1 inputs, summing each output's terms in a
  // shuffled order gives the reference's bits on the official first layer.
  auto const w = data::official_1024_layer(0);
  REQUIRE(challenge::prove_sparse_first_layer(w).status.ok());
  auto const y = random_binary(30, 1024, 0.12, 11);
  auto const ref = reference::challenge_layer(y, w, -0.3f, 32.f);
  auto const ep = epilogue_capped_relu<float>(-0.3f, 32.f);
  std::mt19937 g(3);
  for (std::int32_t i = 0; i < y.rows(); ++i) {
    std::vector<std::vector<float>> terms(1024);
    for (std::int32_t a = y.row_ptr()[i]; a < y.row_ptr()[i + 1]; ++a) {
      std::int32_t const k = y.col_idx()[a];
      for (std::int32_t b = w.row_ptr()[k]; b < w.row_ptr()[k + 1]; ++b) terms[w.col_idx()[b]].push_back(w.values()[b]);
    }
    std::vector<float> expect(1024, 0.f);
    for (std::int32_t a = ref.row_ptr()[i]; a < ref.row_ptr()[i + 1]; ++a) expect[ref.col_idx()[a]] = ref.values()[a];
    for (std::int32_t j = 0; j < 1024; ++j) {
      auto& t = terms[j];
      for (std::size_t s = t.size(); s > 1; --s) std::swap(t[s - 1], t[g() % s]);
      float z = 0.f;
      for (float x : t) z += 1.f * x;
      REQUIRE(ep(z, j) == expect[j]);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Retirement is sound on the reference.

TEST_CASE("challenge structure: rows all-cap on entry to a proven suffix stay all-cap to the end",
          "[challenge][structure][saturation]") {
  std::int32_t const depth = 36;
  auto const layers = official_layers(depth);
  auto const sat = challenge::prove_saturation(layers, -0.3f, 32.f);
  REQUIRE(sat.status.ok());
  // Random rows of density 0.10 .. 0.55 (the sparse ones die, the dense ones saturate after a
  // few layers), plus the first official images where zlib can read them (they saturate by
  // layer ~18).
  auto y0 = random_binary(64, 1024, 0.10, 5, 0.007);
  if (io::has_zlib()) {
    auto const official =
        io::read_challenge_images(std::string(sdnn_test::data_dir()) + "/sparse-images-1024-first1200.tsv.gz", 1024);
    csr_vectors a(y0), b(official);
    for (std::size_t r = 1; r < b.rp.size(); ++r) a.rp.push_back(b.rp[r] + static_cast<std::int32_t>(a.ci.size()));
    a.ci.insert(a.ci.end(), b.ci.begin(), b.ci.end());
    a.v.insert(a.v.end(), b.v.begin(), b.v.end());
    a.rows += b.rows;
    y0 = a.build();
  }
  std::vector<matrix> after;  // after[l] = Y after layer l
  after.push_back(reference::challenge_layer(y0, layers[0], -0.3f, 32.f));
  for (std::int32_t l = 1; l < depth; ++l) after.push_back(reference::challenge_layer(after.back(), layers[l], -0.3f, 32.f));
  auto const final_y = reference::challenge_infer(y0, layers, -0.3f, 32.f);
  std::int64_t retired_early = 0;
  for (std::int32_t l = 0; l + 1 < depth; ++l)
    for (std::int32_t i = 0; i < y0.rows(); ++i)
      if (sat.suffix_fixed[l + 1] && all_cap_row(after[l], i, 32.f)) {
        INFO("row " << i << " is all-cap after layer " << l);
        REQUIRE(all_cap_row(final_y, i, 32.f));
        if (l + 1 < depth - 1) ++retired_early;
      }
  INFO("(row, layer) pairs where a row could retire before the last layer: " << retired_early);
  REQUIRE(retired_early > 0);  // the check is not vacuous: some rows saturate before the end
}

// ---------------------------------------------------------------------------------------------
// Distinct benchmark inputs.

TEST_CASE("distinct inputs: find_duplicate_rows is exact", "[challenge][inputs][distinct]") {
  // rows: 0 = {1, 2}, 1 = {3}, 2 = {1, 2}, 3 = {3}, 4 = {3} with value 2, 5 = {}, 6 = {}
  auto const y = make_csr<float, std::int32_t>(7, 4, {0, 2, 3, 5, 6, 7, 7, 7}, {1, 2, 3, 1, 2, 3, 3},
                                               {1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 2.f});
  auto const d = data::find_duplicate_rows(y);
  REQUIRE(d.duplicate_rows == 3);
  REQUIRE(d.first == 0);
  REQUIRE(d.second == 2);
  REQUIRE(!d.distinct());
  REQUIRE(data::find_duplicate_rows(make_csr<float, std::int32_t>(2, 4, {0, 1, 2}, {1, 1}, {1.f, 2.f})).distinct());
}

TEST_CASE("distinct inputs: collisions move to the next offset, deterministically", "[challenge][inputs][distinct]") {
  io::idx_images m;
  m.count = 2;
  m.rows = m.cols = 28;
  m.pixels.assign(2 * 784, 0);
  for (int r = 8; r < 20; ++r)
    for (int c = 12; c < 16; ++c) m.pixels[r * 28 + c] = m.pixels[784 + r * 28 + c] = 255;  // two equal digits
  data::distinct_inputs_info info;
  auto const y = data::distinct_challenge_inputs(m, 1024, 6, 0.7f, &info);
  REQUIRE(data::find_duplicate_rows(y).distinct());
  REQUIRE(info.source == std::vector<std::int32_t>{0, 1, 0, 1, 0, 1});
  // Image 1 collides with image 0 at offset 0 and takes offset 1; image 2 (default 1) then
  // collides with it and takes 2, and so on.
  REQUIRE(info.offset_index == std::vector<std::int32_t>{0, 1, 2, 3, 4, 5});
  REQUIRE(info.moved == 5);
  auto const again = data::distinct_challenge_inputs(m, 1024, 6, 0.7f);
  REQUIRE(std::vector<std::int32_t>(again.col_idx().begin(), again.col_idx().end()) ==
          std::vector<std::int32_t>(y.col_idx().begin(), y.col_idx().end()));
  // Image 0 is challenge_inputs_from_mnist's image 0.
  auto const plain = data::challenge_inputs_from_mnist(m, 1024, 1);
  REQUIRE(std::equal(plain.col_idx().begin(), plain.col_idx().end(), y.col_idx().begin()));

  // Bad input: an empty digit cannot give two distinct images; too many images for the offsets.
  io::idx_images empty = m;
  empty.count = 1;
  empty.pixels.assign(784, 0);
  REQUIRE(has(error_text([&] { data::distinct_challenge_inputs(empty, 1024, 2); }), "every one of the 49 offsets"));
  REQUIRE(has(error_text([&] { data::distinct_challenge_inputs(m, 1024, 2 * 49 + 1); }), "need more than the 49"));
  REQUIRE(data::distinct_challenge_inputs(m, 1024, 0).rows() == 0);
}

TEST_CASE("distinct inputs: 60000 distinct images from the 10000 shipped digits at N = 1024",
          "[challenge][inputs][distinct]") {
  std::string const dir = sdnn_test::data_dir();
  if (!io::has_zlib()) {
    REQUIRE(has(error_text([&] { io::read_idx_images(dir + "/mnist-10k-images-idx3-ubyte.gz"); }), "without zlib"));
    return;
  }
  auto const mnist = io::read_idx_images(dir + "/mnist-10k-images-idx3-ubyte.gz");
  REQUIRE(mnist.count == 10000);
  data::distinct_inputs_info info;
  auto const y = data::distinct_challenge_inputs(mnist, 1024, 60000, 0.7f, &info);
  validate(y);
  REQUIRE(y.rows() == 60000);
  REQUIRE(y.cols() == 1024);
  REQUIRE(challenge::check_binary_inputs(y).ok());
  auto const d = data::find_duplicate_rows(y);
  INFO("duplicate pair " << d.first << ", " << d.second << "; images moved to a later offset: " << info.moved);
  REQUIRE(d.distinct());
  CHECK(info.moved < 100);  // collisions are rare (5 measured)
  // The cyclic generator repeats every digit 6 times: 50000 duplicates.
  auto const cyclic = data::challenge_inputs_from_mnist(mnist, 1024, 60000);
  REQUIRE(data::find_duplicate_rows(cyclic).duplicate_rows == 50000);
  // Images at offset (0, 0) are the cyclic generator's images.
  for (std::int32_t n = 0; n < 60000; n += 997)
    if (info.offset_index[n] == 0) {
      REQUIRE(std::equal(y.col_idx().begin() + y.row_ptr()[n], y.col_idx().begin() + y.row_ptr()[n + 1],
                         cyclic.col_idx().begin() + cyclic.row_ptr()[n], cyclic.col_idx().begin() + cyclic.row_ptr()[n + 1]));
    }
}
