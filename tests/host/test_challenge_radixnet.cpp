// The RadiX-Net challenge network generator: the official 1024 network's block 0 against
// the formula, 32 nonzeros per row and per column at every size, permutations.
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/challenge/radixnet.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

using namespace sdnn;
using sdnn_test::error_text;

namespace {
std::vector<std::int32_t> column_counts(csr_matrix<float, std::int32_t> const& w) {
  std::vector<std::int32_t> c(static_cast<std::size_t>(w.cols()), 0);
  for (std::int32_t k = 0; k < w.nnz(); ++k) ++c[static_cast<std::size_t>(w.col_idx()[k])];
  return c;
}
bool is_permutation_of_iota(std::vector<std::int32_t> p) {
  std::sort(p.begin(), p.end());
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<std::int32_t>(i)) return false;
  return true;
}
}  // namespace

TEST_CASE("challenge_bias and radixnet_block_layers", "[challenge][radixnet]") {
  CHECK(data::challenge_bias(1024) == -0.30f);
  CHECK(data::challenge_bias(4096) == -0.35f);
  CHECK(data::challenge_bias(16384) == -0.40f);
  CHECK(data::challenge_bias(65536) == -0.45f);
  REQUIRE(error_text([] { data::challenge_bias(2048); }).find("got 2048") != std::string::npos);
  CHECK(data::radixnet_block_layers(1024) == 6);
  CHECK(data::radixnet_block_layers(4096) == 8);
  CHECK(data::radixnet_block_layers(16384) == 10);
  CHECK(data::radixnet_block_layers(65536) == 12);
  CHECK(data::radixnet_block_layers(32) == 1);
  REQUIRE_THROWS_AS(data::radixnet_block_layers(1000), sdnn::error);
  REQUIRE_THROWS_AS(data::radixnet_block_layers(16), sdnn::error);
}

TEST_CASE("official_1024_layer: block 0 (layers 0..5) is the RadiX-Net formula", "[challenge][radixnet]") {
  std::int32_t const n = 1024, m = 64;
  for (std::int32_t l = 0; l < 6; ++l) {
    auto const w = data::official_1024_layer(l);
    validate(w);
    REQUIRE(w.nnz() == n * 32);
    std::int32_t const s = 1 << l;
    // Dense check of every (i, j): W(i, j) = 1/16 iff (i mod M - j mod M) mod M in {0, s}.
    std::vector<float> dense(static_cast<std::size_t>(n) * n, 0.f);
    for (std::int32_t i = 0; i < n; ++i)
      for (std::int32_t k = w.row_ptr()[i]; k < w.row_ptr()[i + 1]; ++k)
        dense[static_cast<std::size_t>(i) * n + w.col_idx()[k]] = w.values()[k];
    std::int64_t mismatches = 0;
    for (std::int32_t i = 0; i < n; ++i)
      for (std::int32_t j = 0; j < n; ++j) {
        std::int32_t const d = ((i % m - j % m) % m + m) % m;
        float const want = (d == 0 || d == s) ? 0.0625f : 0.f;
        mismatches += dense[static_cast<std::size_t>(i) * n + j] != want;
      }
    CHECK(mismatches == 0);
    // The official layer 1 starts "1 1", "2 1", "65 1", "66 1" (column 1 holds rows 1, 2, 65, 66...).
    if (l == 0) {
      CHECK(dense[0] == 0.0625f);
      CHECK(dense[static_cast<std::size_t>(1) * n] == 0.0625f);
      CHECK(dense[static_cast<std::size_t>(64) * n] == 0.0625f);
      CHECK(dense[static_cast<std::size_t>(65) * n] == 0.0625f);
      CHECK(dense[static_cast<std::size_t>(2) * n] == 0.f);
    }
  }
}

TEST_CASE("official_1024_layer: every layer has 32 nonzeros per row and column; blocks permute rows only",
          "[challenge][radixnet]") {
  for (std::int32_t b = 0; b < 20; ++b) {
    auto const perm = data::official_1024_permutation(b);
    REQUIRE(is_permutation_of_iota(perm));
    if (b == 0) CHECK(perm[5] == 5);
  }
  // Spot values of the official files: layer 7 (block 1, t = 1) starts "91 1", "141 1", "146 1".
  auto const w6 = data::official_1024_layer(6);
  std::vector<std::int32_t> col0_rows;
  for (std::int32_t i = 0; i < 1024 && col0_rows.size() < 3; ++i)
    for (std::int32_t k = w6.row_ptr()[i]; k < w6.row_ptr()[i + 1]; ++k)
      if (w6.col_idx()[k] == 0) col0_rows.push_back(i + 1);
  CHECK(col0_rows == std::vector<std::int32_t>{91, 141, 146});
  for (std::int32_t l : {6, 11, 59, 60, 119}) {
    auto const w = data::official_1024_layer(l);
    validate(w);
    std::int64_t bad = 0;
    for (std::int32_t i = 0; i < 1024; ++i) bad += w.row_ptr()[i + 1] - w.row_ptr()[i] != 32;
    for (auto c : column_counts(w)) bad += c != 32;
    // Row i of block b equals row perm_b(i) of block 0's layer with the same t.
    auto const base = data::official_1024_layer(l % 6);
    auto const perm = data::official_1024_permutation(l / 6);
    for (std::int32_t i = 0; i < 1024; ++i)
      for (std::int32_t k = 0; k < 32; ++k)
        bad += w.col_idx()[i * 32 + k] != base.col_idx()[perm[static_cast<std::size_t>(i)] * 32 + k];
    INFO("layer " << l);
    CHECK(bad == 0);
  }
  REQUIRE_THROWS_AS(data::official_1024_layer(120), sdnn::error);
  REQUIRE_THROWS_AS(data::official_1024_layer(-1), sdnn::error);
}

TEST_CASE("radixnet_layer: exactly 32 nonzeros in every row and column at every challenge size",
          "[challenge][radixnet]") {
  for (std::int32_t n : {32, 64, 1024, 4096, 16384, 65536}) {  // 32, 64: the smallest (K = 1, 2)
    std::int32_t const k = data::radixnet_block_layers(n);
    // Several blocks (0, 1, 7) and both ends of each block.
    for (std::int32_t l : {0, k - 1, k, 2 * k - 1, 7 * k + 2}) {
      auto const w = data::radixnet_layer(n, l, 42);
      validate(w);
      REQUIRE(w.rows() == n);
      REQUIRE(w.cols() == n);
      REQUIRE(w.nnz() == 32 * n);
      // Count violations instead of one assertion per entry (keeps Debug builds fast).
      std::int64_t bad_rows = 0, bad_cols = 0, bad_values = 0;
      for (std::int32_t i = 0; i < n; ++i) bad_rows += w.row_ptr()[i + 1] - w.row_ptr()[i] != 32;
      for (auto c : column_counts(w)) bad_cols += c != 32;
      for (std::int32_t e = 0; e < w.nnz(); ++e) bad_values += w.values()[e] != 0.0625f;
      INFO("N = " << n << ", layer " << l);
      CHECK(bad_rows == 0);
      CHECK(bad_cols == 0);
      CHECK(bad_values == 0);
    }
  }
}

TEST_CASE("radixnet_layer: block 0 equals the official block 0; permutations are seeded and deterministic",
          "[challenge][radixnet]") {
  for (std::int32_t l = 0; l < 6; ++l) {
    auto const a = data::radixnet_layer(1024, l, 7);
    auto const b = data::official_1024_layer(l);
    REQUIRE(std::equal(a.col_idx().begin(), a.col_idx().end(), b.col_idx().begin()));
  }
  auto const p1 = data::radixnet_permutation(4096, 3, 1);
  auto const p1again = data::radixnet_permutation(4096, 3, 1);
  auto const p2 = data::radixnet_permutation(4096, 3, 2);
  auto const p3 = data::radixnet_permutation(4096, 4, 1);
  REQUIRE(is_permutation_of_iota(p1));
  CHECK(p1 == p1again);
  CHECK(p1 != p2);
  CHECK(p1 != p3);
  auto const id = data::radixnet_permutation(4096, 0, 99);
  std::vector<std::int32_t> iota(4096);
  std::iota(iota.begin(), iota.end(), 0);
  CHECK(id == iota);
  // Pinned values: the PRNG (splitmix64 + Fisher-Yates) is part of the API; a change here
  // changes every generated network.
  auto const q = data::radixnet_permutation(1024, 1, 0);
  CHECK(std::vector<std::int32_t>(q.begin(), q.begin() + 4) == std::vector<std::int32_t>{933, 165, 1018, 321});
  CHECK(sdnn::splitmix64{0}.next() == 0xE220A8397B1DCDAFull);
  REQUIRE_THROWS_AS(data::radixnet_permutation(1024, -1, 0), sdnn::error);
  REQUIRE_THROWS_AS(data::radixnet_layer(1024, -1, 0), sdnn::error);
}
