// Structured-sparsity learning on the host (train/op/structured_sparsity.hpp): the group builders
// against the block layouts they name (conv::channel_block_mask for conv channel blocks), norms and
// penalty against a direct double computation, the group-lasso gradient against central finite
// differences of the penalty, the proximal step against its formula, the masks against the pruning
// functions that make the same choice (prune_magnitude, prune_blocks_l2, ops::prune_sparse24), the
// cubic schedule, and every error message.
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/conv/gemm_weights.hpp>
#include <sdnn/train/op/prune_sparse24.hpp>
#include <sdnn/train/op/prune_structured.hpp>
#include <sdnn/train/op/structured_sparsity.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace sdnn;
using namespace sdnn::train;
using sdnn_test::Approx;
using sdnn_test::error_text;
using sdnn_test::has;

namespace {
dense_matrix<float> random_matrix(std::int64_t r, std::int64_t c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  dense_matrix<float> m(r, c);
  for (std::int64_t i = 0; i < r; ++i)
    for (std::int64_t j = 0; j < c; ++j) m(i, j) = u(rng);
  return m;
}

dense_matrix<float> clone(dense_matrix<float> const& m) {
  dense_matrix<float> c(m.rows(), m.cols());
  for (std::int64_t e = 0; e < m.rows() * m.cols(); ++e) c.data()[e] = m.data()[e];
  return c;
}

// Each element of a rows x cols matrix in at most one group, and group members ascending.
void check_partition(weight_groups const& g, bool covers_all) {
  REQUIRE(g.ptr.size() == static_cast<std::size_t>(g.count()) + 1);
  REQUIRE(g.ptr.front() == 0);
  REQUIRE(g.ptr.back() == static_cast<std::int64_t>(g.idx.size()));
  std::vector<int> hits(static_cast<std::size_t>(g.rows * g.cols), 0);
  for (std::int64_t q = 0; q < g.count(); ++q)
    for (std::int64_t p = g.ptr[q]; p < g.ptr[q + 1]; ++p) {
      if (p > g.ptr[q]) REQUIRE(g.idx[p] > g.idx[p - 1]);
      ++hits[static_cast<std::size_t>(g.idx[p])];
    }
  for (int h : hits) {
    if (covers_all) REQUIRE(h == 1);
    else REQUIRE(h <= 1);
  }
}

// The group of each element (-1: none).
std::vector<std::int64_t> group_of(weight_groups const& g) {
  std::vector<std::int64_t> of(static_cast<std::size_t>(g.rows * g.cols), -1);
  for (std::int64_t q = 0; q < g.count(); ++q)
    for (std::int64_t p = g.ptr[q]; p < g.ptr[q + 1]; ++p) of[static_cast<std::size_t>(g.idx[p])] = q;
  return of;
}

// The block groups of a rows x cols matrix with the last group dropped: its elements are in no group.
weight_groups blocks_but_last(std::int64_t rows, std::int64_t cols, std::int32_t br, std::int32_t bc) {
  weight_groups g = block_groups(rows, cols, br, bc);
  g.ptr.pop_back();
  g.idx.resize(static_cast<std::size_t>(g.ptr.back()));
  return g;
}

std::vector<std::uint8_t> nonzero_mask(dense_view<float const> w) {
  std::vector<std::uint8_t> m;
  for (std::int64_t i = 0; i < w.rows; ++i)
    for (std::int64_t j = 0; j < w.cols; ++j) m.push_back(w(i, j) != 0.0f ? 1 : 0);
  return m;
}
}  // namespace

TEST_CASE("block_groups: block row-major numbering, partial edge blocks, full coverage", "[train][structured]") {
  weight_groups const g = block_groups(5, 7, 2, 3);
  REQUIRE(g.rows == 5);
  REQUIRE(g.cols == 7);
  REQUIRE(g.count() == 9);  // 3 block rows x 3 block columns
  check_partition(g, true);
  auto const of = group_of(g);
  for (std::int64_t i = 0; i < 5; ++i)
    for (std::int64_t j = 0; j < 7; ++j) REQUIRE(of[static_cast<std::size_t>(i * 7 + j)] == (i / 2) * 3 + j / 3);
  CHECK(g.ptr[1] - g.ptr[0] == 6);  // a full 2 x 3 block
  CHECK(g.ptr[3] - g.ptr[2] == 2);  // block (0, 2): 2 rows x 1 column
  CHECK(g.ptr[9] - g.ptr[8] == 1);  // block (2, 2): 1 x 1

  weight_groups const empty = block_groups(0, 4, 2, 2);
  CHECK(empty.count() == 0);
  CHECK(empty.ptr == std::vector<std::int64_t>{0});
  CHECK(weight_groups{}.count() == 0);
  CHECK(block_groups(3, 4, 8, 8).count() == 1);  // one block larger than the matrix
}

TEST_CASE("conv_channel_block_groups are conv::channel_block_mask's blocks", "[train][structured]") {
  auto const s = conv::conv_shape::conv2d(/*C*/ 32, 6, 6, /*K*/ 48, /*R*/ 3, /*S*/ 2);
  int const bko = 16, bc = 16;
  weight_groups const g = conv_channel_block_groups(s.K, s.R, s.S, s.C, bko, bc);
  REQUIRE(g.rows == s.K);
  REQUIRE(g.cols == conv::gemm_reduction(s));
  REQUIRE(g.count() == (48 / 16) * (32 / 16));
  check_partition(g, true);
  // Only group q nonzero: channel_block_mask_of keeps exactly block (q / (C/bc), q % (C/bc)).
  for (std::int64_t q = 0; q < g.count(); ++q) {
    CHECK(g.ptr[q + 1] - g.ptr[q] == std::int64_t(bko) * bc * s.R * s.S);
    dense_matrix<float> wg(g.rows, g.cols);
    for (std::int64_t p = g.ptr[q]; p < g.ptr[q + 1]; ++p) wg.data()[g.idx[p]] = 1.0f;
    auto const m = conv::channel_block_mask_of(s, wg.view(), bko, bc);
    for (std::int32_t i = 0; i < m.row_blocks; ++i)
      for (std::int32_t j = 0; j < m.col_blocks; ++j) CHECK(m.at(i, j) == (i * m.col_blocks + j == q));
  }
  // On random weights group_mask drops the blocks prune_channel_blocks drops.
  auto const wg = random_matrix(g.rows, g.cols, 7);
  auto const pruned = conv::prune_channel_blocks(s, wg.view(), bko, bc, 0.5);
  CHECK(group_mask(wg.view(), g, 0.5) == nonzero_mask(pruned.gemm.view()));

  weight_groups const f = conv_filter_groups(4, 3, 3, 2);
  REQUIRE(f.count() == 4);
  REQUIRE(f.cols == 18);
  check_partition(f, true);
  auto const of = group_of(f);
  for (std::int64_t e = 0; e < 4 * 18; ++e) CHECK(of[static_cast<std::size_t>(e)] == e / 18);
}

TEST_CASE("group_norms and group_lasso_penalty against a double computation", "[train][structured]") {
  auto const w = random_matrix(13, 10, 1);
  weight_groups const g = block_groups(13, 10, 4, 3);
  auto const norms = group_norms(w.view(), g);
  REQUIRE(norms.size() == static_cast<std::size_t>(g.count()));
  double total = 0.0;
  for (std::int64_t q = 0; q < g.count(); ++q) {
    double s = 0.0;
    float sf = 0.0f;
    for (std::int64_t p = g.ptr[q]; p < g.ptr[q + 1]; ++p) {
      float const v = w.data()[g.idx[p]];
      s += double(v) * double(v);
      sf = sf + v * v;
    }
    CHECK(double(norms[q]) == Approx(std::sqrt(s)).epsilon(1e-6));
    CHECK(norms[q] == Approx(std::sqrt(sf)).epsilon(1e-7));  // the stated float order
    total += std::sqrt(s);
  }
  CHECK(group_lasso_penalty(w.view(), g) == Approx(total).epsilon(1e-6));

  // A zero group has norm 0; elements in no group do not count.
  dense_matrix<float> z(2, 4);
  z(0, 2) = 3.0f;
  z(1, 3) = 4.0f;
  z(0, 0) = 100.0f;
  weight_groups h = block_groups(2, 4, 2, 2);  // groups {cols 0-1}, {cols 2-3}
  CHECK(group_norms(z.view(), h) == std::vector<float>{100.0f, 5.0f});
  z(0, 0) = 0.0f;
  CHECK(group_norms(z.view(), h) == std::vector<float>{0.0f, 5.0f});
  CHECK(group_lasso_penalty(z.view(), h) == 5.0);
  z(0, 0) = 7.0f;
  h.ptr.pop_back();
  h.idx.resize(static_cast<std::size_t>(h.ptr.back()));  // only the first block
  CHECK(group_lasso_penalty(z.view(), h) == 7.0);
}

TEST_CASE("group_lasso_add_grad is the gradient of lambda * penalty (finite differences)", "[train][structured]") {
  float const lambda = 0.5f;
  double const h = 1e-2;
  for (std::uint32_t seed : {11u, 12u, 13u}) {
    auto w = random_matrix(6, 9, seed);
    weight_groups const g = blocks_but_last(6, 9, 2, 3);  // block (2, 2) is in no group
    for (std::int64_t i = 0; i < 2; ++i)
      for (std::int64_t j = 3; j < 6; ++j) w(i, j) = 0.0f;  // group 1 is zero
    auto const base = random_matrix(6, 9, seed + 100);
    auto grad = clone(base);
    group_lasso_add_grad(w.view(), g, lambda, grad.view());
    auto const of = group_of(g);
    for (std::int64_t e = 0; e < 6 * 9; ++e) {
      std::int64_t const i = e / 9, j = e % 9;
      double const added = double(grad(i, j)) - double(base(i, j));
      std::int64_t const q = of[static_cast<std::size_t>(e)];
      if (q < 0 || q == 1) {  // no group, or a zero group: nothing added
        CHECK(grad(i, j) == base(i, j));
        continue;
      }
      auto wp = clone(w), wm = clone(w);
      wp(i, j) = float(w(i, j) + h);
      wm(i, j) = float(w(i, j) - h);
      double const fd = lambda * (group_lasso_penalty(wp.view(), g) - group_lasso_penalty(wm.view(), g)) /
                        (double(wp(i, j)) - double(wm(i, j)));
      INFO("seed " << seed << " element (" << i << ", " << j << ")");
      CHECK(added == Approx(fd).margin(1e-3));
    }
  }
  // The stated formula, bitwise: grad[e] + lambda * (w[e] / norm).
  dense_matrix<float> w(1, 3), grad(1, 3);
  w(0, 0) = 0.3f, w(0, 1) = -0.7f, w(0, 2) = 1.1f;
  grad(0, 0) = 0.25f, grad(0, 1) = -1.0f, grad(0, 2) = 2.0f;
  weight_groups const g = block_groups(1, 3, 1, 3);
  float const n = group_norms(w.view(), g)[0];
  auto expect = clone(grad);
  for (int j = 0; j < 3; ++j) expect(0, j) = grad(0, j) + 0.125f * (w(0, j) / n);
  group_lasso_add_grad(w.view(), g, 0.125f, grad.view());
  for (int j = 0; j < 3; ++j) CHECK(grad(0, j) == expect(0, j));
}

TEST_CASE("group_lasso_prox zeroes groups with norm <= step and shrinks the others", "[train][structured]") {
  dense_matrix<float> w(2, 8);
  float const vals[2][8] = {{1.0f, 0.0f, 0.3f, 0.4f, 3.0f, 4.0f, 0.5f, 0.5f},
                            {0.0f, 0.0f, 0.1f, -0.2f, 1.0f, -2.0f, 9.0f, 9.0f}};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 8; ++j) w(i, j) = vals[i][j];
  // Groups of 1 x 2; the last one (row 1, cols 6-7) is in no group.
  weight_groups const g = blocks_but_last(2, 8, 1, 2);
  auto const norms = group_norms(w.view(), g);
  CHECK(norms[0] == 1.0f);  // (1, 0): exactly the step
  float const step = 1.0f;
  auto const before = clone(w);
  group_lasso_prox(w.view(), g, step);
  auto const of = group_of(g);
  for (std::int64_t e = 0; e < 16; ++e) {
    std::int64_t const i = e / 8, j = e % 8, q = of[static_cast<std::size_t>(e)];
    if (q < 0) {
      CHECK(w(i, j) == before(i, j));
    } else if (norms[q] <= step) {
      CHECK(w(i, j) == 0.0f);
      CHECK(!std::signbit(w(i, j)));
    } else {
      CHECK(w(i, j) == before(i, j) * (1.0f - step / norms[q]));
    }
  }
  auto const after = group_norms(w.view(), g);
  CHECK(after[0] == 0.0f);                        // norm 1 == step
  CHECK(after[1] == 0.0f);                        // norm 0.5
  CHECK(after[2] == Approx(4.0f).epsilon(1e-6));  // norm 5 shrinks by the step
  CHECK(after[3] == 0.0f);                        // norm 0.707...
  CHECK(after[4] == 0.0f);                        // a zero group stays zero
  CHECK(after[5] == 0.0f);                        // norm 0.224...
  CHECK(after[6] == Approx(std::sqrt(5.0f) - 1.0f).epsilon(1e-6));

  // step 0 changes nothing.
  auto const w2 = random_matrix(3, 4, 5);
  auto w3 = clone(w2);
  group_lasso_prox(w3.view(), block_groups(3, 4, 2, 2), 0.0f);
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j) CHECK(w3(i, j) == w2(i, j));
}

TEST_CASE("magnitude_mask: sparsity, ties, determinism, prune_magnitude's choice", "[train][structured]") {
  auto const w = random_matrix(7, 11, 3);
  auto const m = magnitude_mask(w.view(), 0.3);
  REQUIRE(m.size() == 77u);
  CHECK(mask_sparsity(m) == Approx(23.0 / 77.0));  // round(0.3 * 77) = 23
  CHECK(magnitude_mask(w.view(), 0.3) == m);
  CHECK(nonzero_mask(prune_magnitude(w.view(), 0.3).view()) == m);
  // The pruned ones are the smallest.
  float kept_min = 2.0f, pruned_max = -1.0f;
  for (std::int64_t e = 0; e < 77; ++e) {
    float const a = std::fabs(w.data()[e]);
    if (m[e]) kept_min = std::min(kept_min, a);
    else pruned_max = std::max(pruned_max, a);
  }
  CHECK(pruned_max <= kept_min);

  // Ties (|-1| == |1|) go to the lower flat index; never all entries.
  dense_matrix<float> t(2, 4);
  for (std::int64_t e = 0; e < 8; ++e) t.data()[e] = (e % 2) ? -1.0f : 1.0f;
  CHECK(magnitude_mask(t.view(), 0.5) == std::vector<std::uint8_t>{0, 0, 0, 0, 1, 1, 1, 1});
  CHECK(magnitude_mask(t.view(), 0.99) == std::vector<std::uint8_t>{0, 0, 0, 0, 0, 0, 0, 1});
  CHECK(magnitude_mask(t.view(), 0.0) == std::vector<std::uint8_t>(8, 1));
}

TEST_CASE("group_mask zeroes the weakest groups", "[train][structured]") {
  // 8 x 8 in 2 x 2 blocks, block b scaled by a distinct factor: the 4 weakest are zeroed at 0.25.
  int const perm[16] = {5, 12, 0, 9, 14, 3, 7, 10, 1, 15, 6, 11, 2, 13, 4, 8};  // block -> strength rank
  auto w = random_matrix(8, 8, 21);
  for (std::int64_t i = 0; i < 8; ++i)
    for (std::int64_t j = 0; j < 8; ++j) {
      int const b = int((i / 2) * 4 + j / 2);
      w(i, j) = (w(i, j) >= 0 ? 0.5f : -0.5f) + 0.01f * w(i, j);  // |w| ~ 0.5
      w(i, j) *= float(1 + perm[b]);
    }
  weight_groups const g = block_groups(8, 8, 2, 2);
  auto const m = group_mask(w.view(), g, 0.25);
  CHECK(mask_sparsity(m) == 0.25);
  for (std::int64_t i = 0; i < 8; ++i)
    for (std::int64_t j = 0; j < 8; ++j) CHECK(m[i * 8 + j] == (perm[(i / 2) * 4 + j / 2] >= 4 ? 1 : 0));
  CHECK(group_mask(w.view(), g, 0.25) == m);
  // Same choice as prune_blocks_l2 on random weights.
  auto const r = random_matrix(9, 14, 22);
  for (double s : {0.0, 0.3, 0.5, 0.8})
    CHECK(group_mask(r.view(), block_groups(9, 14, 2, 4), s) ==
          nonzero_mask(prune_blocks_l2(r.view(), 2, 4, s).view()));

  // Ties go to the lower group id; never all groups; elements in no group stay.
  dense_matrix<float> t(2, 6);
  for (std::int64_t e = 0; e < 12; ++e) t.data()[e] = 1.0f;
  weight_groups const tg = blocks_but_last(2, 6, 2, 1);  // 5 groups (columns 0-4); column 5 in none
  CHECK(group_mask(t.view(), tg, 0.4) == std::vector<std::uint8_t>{0, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1});
  CHECK(group_mask(t.view(), tg, 0.99) == std::vector<std::uint8_t>{0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1});
  // NaN outside every group is not looked at.
  t(1, 5) = std::numeric_limits<float>::quiet_NaN();
  CHECK(group_mask(t.view(), tg, 0.4)[11] == 1);
}

TEST_CASE("sparse24_mask keeps what ops::prune_sparse24 keeps", "[train][structured]") {
  for (std::int64_t cols : {8, 9, 10, 11, 12, 1, 3}) {
    auto w = random_matrix(5, cols, std::uint32_t(40 + cols));
    // Zeros and ties among the entries.
    w(0, 0) = 0.0f;
    w(1, 0) = 0.5f;
    if (cols > 2) w(1, 2) = -0.5f;
    for (std::int64_t j = 0; j < cols; ++j) w(2, j) = 0.0f;
    for (std::int64_t j = 0; j < cols; ++j) w(3, j) = (j % 2) ? 0.25f : -0.25f;
    auto const m = sparse24_mask(w.view());
    auto const s = ops::prune_sparse24(w.view());
    std::vector<std::uint8_t> ref(static_cast<std::size_t>(5 * cols), 0);
    for (std::int64_t r = 0; r < 5; ++r)
      for (std::int64_t j = 0; j < s.kept_per_row(); ++j)
        if (s.column(r, j) < cols) ref[static_cast<std::size_t>(r * cols + s.column(r, j))] = 1;
    INFO("cols " << cols);
    CHECK(m == ref);
    CHECK(sparse24_mask(w.view()) == m);
    if (cols % 4 == 0) CHECK(mask_sparsity(m) == 0.5);
  }
  dense_matrix<float> t(3, 4);
  float const v[3][4] = {{1, 1, 1, 1}, {-2, 2, 1, 3}, {0, 0, 0, 0}};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) t(i, j) = v[i][j];
  CHECK(sparse24_mask(t.view()) == std::vector<std::uint8_t>{1, 1, 0, 0, 1, 0, 0, 1, 1, 1, 0, 0});
}

TEST_CASE("apply_mask and mask_sparsity", "[train][structured]") {
  auto w = random_matrix(2, 3, 9);
  auto const before = clone(w);
  apply_mask(w.view(), {1, 0, 1, 0, 0, 2});
  CHECK(w(0, 0) == before(0, 0));
  CHECK(w(0, 1) == 0.0f);
  CHECK(w(0, 2) == before(0, 2));
  CHECK(w(1, 0) == 0.0f);
  CHECK(w(1, 1) == 0.0f);
  CHECK(w(1, 2) == before(1, 2));
  CHECK(mask_sparsity({1, 0, 1, 0, 0, 2}) == 0.5);
  CHECK(mask_sparsity({}) == 0.0);
  CHECK(has(error_text([&] { apply_mask(w.view(), {1, 1}); }), "apply_mask: the mask has 2 entries, w is 2 x 3"));
}

TEST_CASE("sparsity_at: the cubic ramp", "[train][structured]") {
  CHECK(sparsity_at(0.0, 0.9, -5, 10, 110) == 0.0);
  CHECK(sparsity_at(0.0, 0.9, 10, 10, 110) == 0.0);
  CHECK(sparsity_at(0.0, 0.9, 110, 10, 110) == 0.9);
  CHECK(sparsity_at(0.0, 0.9, 1000, 10, 110) == 0.9);
  CHECK(sparsity_at(0.0, 0.9, 60, 10, 110) == Approx(0.9 - 0.9 * 0.125));
  CHECK(sparsity_at(0.2, 0.8, 35, 10, 110) == Approx(0.8 - 0.6 * 0.75 * 0.75 * 0.75));
  double prev = -1.0;
  for (std::int64_t step = 0; step <= 120; ++step) {
    double const s = sparsity_at(0.1, 0.95, step, 10, 110);
    CHECK(s >= prev);
    CHECK(s >= 0.1);
    CHECK(s <= 0.95);
    prev = s;
  }
  CHECK(sparsity_at(0.5, 0.2, 110, 10, 110) == 0.2);  // a falling ramp is allowed
}

TEST_CASE("structured sparsity: error messages", "[train][structured]") {
  auto w = random_matrix(4, 6, 2);
  weight_groups const g = block_groups(4, 6, 2, 3);
  float const nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();

  CHECK(has(error_text([] { block_groups(4, 4, 0, 2); }), "block_groups: the block shape must be positive, got 0 x 2"));
  CHECK(has(error_text([] { block_groups(-1, 4, 2, 2); }), "block_groups: extents must be >= 0"));
  CHECK(has(error_text([] { conv_channel_block_groups(30, 3, 3, 32, 16, 16); }),
            "conv_channel_block_groups: K = 30 output channels is not a multiple of BKo = 16"));
  CHECK(has(error_text([] { conv_channel_block_groups(32, 3, 3, 24, 16, 16); }),
            "conv_channel_block_groups: C = 24 input channels is not a multiple of BC = 16"));
  CHECK(has(error_text([] { conv_channel_block_groups(32, 0, 3, 32, 16, 16); }),
            "conv_channel_block_groups: K, R, S, C must be >= 1, got 32, 0, 3, 32"));
  CHECK(has(error_text([] { conv_filter_groups(0, 3, 3, 2); }), "conv_filter_groups: K, R, S, C must be >= 1"));

  // Malformed groups.
  weight_groups bad = g;
  bad.idx[1] = bad.idx[0];
  CHECK(has(error_text([&] { group_norms(w.view(), bad); }), "group_norms: group 0 is not in ascending element order"));
  bad = g;
  bad.idx[bad.ptr[1]] = g.idx[0];  // group 1 starts with an element of group 0
  CHECK(has(error_text([&] { group_norms(w.view(), bad); }),
            "group_norms: element 0 (0, 0) is in more than one group"));
  bad = g;
  bad.idx.back() = 24;
  CHECK(has(error_text([&] { group_norms(w.view(), bad); }),
            "group_norms: group 3 holds element 24, outside the 4 x 6 matrix"));
  bad = g;
  bad.ptr.back() = 5;
  CHECK(has(error_text([&] { group_lasso_penalty(w.view(), bad); }),
            "group_norms: the groups' ptr must start at 0 and end at idx.size() = 24"));
  CHECK(has(error_text([&] { group_norms(w.view(), weight_groups{}); }),
            "group_norms: the groups' ptr must start at 0"));
  bad = g;
  bad.ptr[1] = 1000;  // past idx: refused before any element is read
  CHECK(has(error_text([&] { group_norms(w.view(), bad); }), "group_norms: group 1 has ptr 1000 > 12"));

  // Shapes.
  dense_matrix<float> other(4, 5);
  CHECK(has(error_text([&] { group_norms(other.view(), g); }),
            "group_norms: w is 4 x 5 (ld 5), the groups are over a 4 x 6 matrix"));
  CHECK(has(error_text([&] { group_lasso_add_grad(w.view(), g, 0.1f, other.view()); }),
            "group_lasso_add_grad: grad is 4 x 5 (ld 5), the groups are over a 4 x 6 matrix"));
  CHECK(has(error_text([&] { group_lasso_prox(other.view(), g, 0.1f); }), "w is 4 x 5"));
  CHECK(has(error_text([&] { group_mask(other.view(), g, 0.5); }), "group_norms: w is 4 x 5"));

  // Coefficients.
  auto grad = clone(w);
  CHECK(has(error_text([&] { group_lasso_add_grad(w.view(), g, -1.0f, grad.view()); }),
            "group_lasso_add_grad: lambda must be finite and >= 0, got -1"));
  CHECK(has(error_text([&] { group_lasso_add_grad(w.view(), g, nan, grad.view()); }),
            "lambda must be finite and >= 0, got nan"));
  CHECK(has(error_text([&] { group_lasso_prox(w.view(), g, -0.5f); }),
            "group_lasso_prox: step must be finite and >= 0, got -0.5"));
  CHECK(has(error_text([&] { group_lasso_prox(w.view(), g, inf); }), "step must be finite and >= 0, got inf"));

  // Target sparsity.
  for (double s : {1.0, -0.1, 1.5, double(nan)}) {
    std::string const what = "target sparsity must be in [0, 1), got " + [&] {
      std::ostringstream os;
      os << s;
      return os.str();
    }();
    CHECK(has(error_text([&] { group_mask(w.view(), g, s); }), "group_mask: " + what));
    CHECK(has(error_text([&] { magnitude_mask(w.view(), s); }), "magnitude_mask: " + what));
    CHECK(has(error_text([&] { sparsity_at(0.0, s, 1, 0, 10); }), "sparsity_at: " + what));
    CHECK(has(error_text([&] { check_options({0.01, 0.0, s}); }), "check_options: " + what));
  }
  CHECK(has(error_text([&] { group_mask(w.view(), g, 1.0); }), "target sparsity must be in [0, 1), got 1"));

  // NaN, naming the entry.
  w(1, 2) = nan;
  CHECK(has(error_text([&] { group_mask(w.view(), g, 0.5); }), "group_mask: w(1, 2) is NaN"));
  CHECK(has(error_text([&] { magnitude_mask(w.view(), 0.5); }), "magnitude_mask: w(1, 2) is NaN"));
  CHECK(has(error_text([&] { sparse24_mask(w.view()); }), "sparse24_mask: w(1, 2) is NaN"));

  // Schedule.
  CHECK(has(error_text([] { sparsity_at(0.0, 0.9, 5, 10, 10); }),
            "sparsity_at: the ramp must end after it begins, got begin 10, end 10"));
  CHECK(has(error_text([] { sparsity_at(1.0, 0.9, 5, 0, 10); }),
            "sparsity_at: initial sparsity must be in [0, 1), got 1"));
  CHECK(has(error_text([] { sparsity_at(-0.5, 0.9, 5, 0, 10); }), "initial sparsity must be in [0, 1), got -0.5"));

  // Options.
  CHECK_NOTHROW(check_options({}));
  CHECK_NOTHROW(check_options({0.1, 1e-4, 0.0}));
  CHECK(has(error_text([] { check_options({0.0, 0.0, 0.5}); }), "check_options: learning rate must be > 0, got 0"));
  CHECK(has(error_text([] { check_options({-0.5, 0.0, 0.5}); }), "learning rate must be > 0, got -0.5"));
  CHECK(has(error_text([] { check_options({std::numeric_limits<double>::infinity(), 0.0, 0.5}); }),
            "learning rate must be > 0, got inf"));
  CHECK(has(error_text([] { check_options({0.1, -1.0, 0.5}); }),
            "check_options: group-lasso penalty must be >= 0, got -1"));
  CHECK(has(error_text([] { check_options({0.1, std::nan(""), 0.5}); }), "group-lasso penalty must be >= 0, got nan"));
}
