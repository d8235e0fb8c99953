// The 2:4 format (formats/sparse24.hpp), magnitude 2:4 pruning (train/op/prune_sparse24.hpp) and
// the host reference of the 2:4 linear layer (linear/reference/sparse24.hpp) on hand-computed
// cases: layout and round trips, every refusal, ties and NaN in pruning, Y = epi(X W^T).
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/core/epilogue.hpp>
#include <sdnn/core/numeric.hpp>
#include <sdnn/formats/dense.hpp>
#include <sdnn/formats/sparse24.hpp>
#include <sdnn/linear/op/sparse24_linear.hpp>
#include <sdnn/linear/reference/sparse24.hpp>
#include <sdnn/train/op/prune_sparse24.hpp>

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

namespace {
template <class T>
dense_matrix<T> dense_of(std::int64_t rows, std::int64_t cols, std::vector<float> const& v) {
  dense_matrix<T> d(rows, cols);
  for (std::int64_t i = 0; i < rows * cols; ++i) d.data()[i] = T(v[static_cast<std::size_t>(i)]);
  return d;
}
template <class T>
bool same_values(dense_matrix<T> const& a, dense_matrix<T> const& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return false;
  for (std::int64_t i = 0; i < a.rows() * a.cols(); ++i)
    if (static_cast<float>(a.data()[i]) != static_cast<float>(b.data()[i])) return false;
  return true;
}
}  // namespace

// The running example (2 x 8, two groups per row):
//   row 0: [0 5 0 7 | 3 0 0 0]     groups (1, 3) and (0, 1) (one nonzero: the smallest free position)
//   row 1: [0 0 0 0 | 0 0 -2 4]    groups (0, 1) (empty) and (2, 3)
TEMPLATE_TEST_CASE("sparse24_from_dense: canonical layout, round trip", "[formats][sparse24]", float, bf16, fp16) {
  using T = TestType;
  auto d = dense_of<T>(2, 8, {0, 5, 0, 7, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, -2, 4});
  auto w = sparse24_from_dense(d.view());
  w.validate();
  REQUIRE(w.rows() == 2);
  REQUIRE(w.cols() == 8);
  REQUIRE(w.cols_padded() == 8);
  REQUIRE(w.kept_per_row() == 4);
  REQUIRE(w.meta_ld() == 1);
  // Nibbles: (1,3) = 1 | 3 << 2 = 0xD, (0,1) = 0x4, (2,3) = 0xE; two groups per byte, low first.
  REQUIRE(int(w.meta()[0]) == (0xD | 0x4 << 4));
  REQUIRE(int(w.meta()[1]) == (0x4 | 0xE << 4));
  std::vector<float> vals;
  for (auto v : w.values()) vals.push_back(static_cast<float>(v));
  REQUIRE(vals == std::vector<float>{5, 7, 3, 0, 0, 0, -2, 4});
  REQUIRE(w.column(0, 0) == 1);
  REQUIRE(w.column(0, 1) == 3);
  REQUIRE(w.column(0, 2) == 4);
  REQUIRE(w.column(0, 3) == 5);
  REQUIRE(w.column(1, 2) == 6);
  REQUIRE(w.column(1, 3) == 7);
  REQUIRE(same_values(to_dense(w), d));
}

TEST_CASE("sparse24_from_dense: a last partial group is padded with zeros", "[formats][sparse24]") {
  // 2 x 6: the second group of each row has columns 4, 5 and padding 6, 7.
  auto d = dense_of<float>(2, 6, {1, 0, 0, 2, 0, 9, 0, 0, 0, 0, 0, 0});
  auto w = sparse24_from_dense(d.view());
  w.validate();
  REQUIRE(w.cols_padded() == 8);
  REQUIRE(w.groups_per_row() == 2);
  REQUIRE(w.column(0, 2) == 4);  // (0, 1) of the second group: 9 at column 5 and a zero at 4
  REQUIRE(w.column(0, 3) == 5);
  REQUIRE(w.value(0, 3) == 9.0f);
  REQUIRE(same_values(to_dense(w), d));
  // An odd number of groups: 1 x 3 has one group, the high nibble of its byte stays 0.
  auto w1 = sparse24_from_dense(dense_of<float>(1, 3, {0, 0, 4}).view());
  w1.validate();
  REQUIRE(w1.meta_ld() == 1);
  REQUIRE(int(w1.meta()[0]) == 0x8);  // positions (0, 2)
  REQUIRE(same_values(to_dense(w1), dense_of<float>(1, 3, {0, 0, 4})));
  // Empty shapes.
  REQUIRE(sparse24_from_dense(dense_of<float>(0, 5, {}).view()).rows() == 0);
  auto w0 = sparse24_from_dense(dense_of<float>(3, 0, {}).view());
  REQUIRE(w0.kept_per_row() == 0);
  w0.validate();
}

TEST_CASE("sparse24_from_dense refuses a matrix that is not 2:4, naming the group", "[formats][sparse24]") {
  auto d = dense_of<float>(3, 8, {1, 1, 0, 0, 0, 0, 0, 0,  //
                                  0, 0, 0, 0, 0, 0, 0, 0,  //
                                  1, 0, 0, 0, 2, 3, 0, 4});
  auto msg = error_text([&] { sparse24_from_dense(d.view()); });
  INFO(msg);
  REQUIRE(has(msg, "row 2, group 1 (columns 4..7)"));
  REQUIRE(has(msg, "the third at column 7"));
  REQUIRE(has(msg, "not 2:4"));
  // -0 is zero; NaN and Inf are nonzeros.
  float const nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  REQUIRE_NOTHROW(sparse24_from_dense(dense_of<float>(1, 4, {-0.0f, 1, -0.0f, 2}).view()));
  REQUIRE(has(error_text([&] { sparse24_from_dense(dense_of<float>(1, 4, {nan, inf, 0, 1}).view()); }),
              "row 0, group 0"));
  auto w = sparse24_from_dense(dense_of<float>(1, 4, {nan, 0, 0, -inf}).view());
  REQUIRE(std::isnan(w.value(0, 0)));
  REQUIRE(w.value(0, 1) == -inf);
}

TEST_CASE("sparse24_matrix::validate names the first bad row and group", "[formats][sparse24]") {
  auto w = sparse24_from_dense(dense_of<float>(2, 8, {0, 5, 0, 7, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, -2, 4}).view());
  {
    auto bad = sparse24_from_dense(dense_of<float>(2, 8, {0, 5, 0, 7, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, -2, 4}).view());
    bad.meta()[1] = static_cast<std::uint8_t>(0x4 | 0x5 << 4);  // row 1, group 1: positions (1, 1)
    auto msg = error_text([&] { bad.validate(); });
    INFO(msg);
    REQUIRE(has(msg, "row 1, group 1"));
    REQUIRE(has(msg, "not strictly increasing"));
  }
  {
    auto bad = sparse24_from_dense(dense_of<float>(1, 6, {0, 0, 0, 0, 1, 0}).view());
    bad.set_group(0, 1, 2, 3.0f, 3, 0.0f);  // column 6 is padding: its value must be zero
    REQUIRE(has(error_text([&] { bad.validate(); }), "column 6 is nonzero but lies past the last column"));
  }
  {
    auto bad = sparse24_from_dense(dense_of<float>(1, 4, {0, 0, 0, 1}).view());
    bad.meta()[0] = static_cast<std::uint8_t>(bad.meta()[0] | 0x40);
    REQUIRE(has(error_text([&] { bad.validate(); }), "unused high nibble"));
  }
  REQUIRE(has(error_text([&] { w.set_group(0, 0, 2, 1.0f, 2, 1.0f); }), "0 <= i0 < i1 <= 3"));
  REQUIRE(has(error_text([&] { w.set_group(0, 2, 0, 1.0f, 1, 1.0f); }), "outside"));
  REQUIRE(has(error_text([] { sparse24_matrix<float>(-1, 4); }), "must be >= 0"));
  // The all-zero constructor is valid.
  sparse24_matrix<bf16> z(3, 10);
  z.validate();
  REQUIRE(z.nibble(2, 2) == 0x4);
}

TEST_CASE("prune_sparse24 keeps the two largest magnitudes, ties to the lower column", "[train][sparse24]") {
  auto d = dense_of<float>(3, 8, {1, -4, 3, 2,   5, 5, 5, 5,  //
                                  0, 0, -0.0f, 0, 0, 0, 7, 0,  //
                                  -1, 1, -1, 1,  2, -3, 3, -2});
  auto w = ops::prune_sparse24(d.view());
  w.validate();
  auto kept = [&](std::int64_t r, std::int64_t g) { return std::vector<std::int64_t>{w.column(r, 2 * g), w.column(r, 2 * g + 1)}; };
  REQUIRE(kept(0, 0) == std::vector<std::int64_t>{1, 2});  // |-4|, 3
  REQUIRE(kept(0, 1) == std::vector<std::int64_t>{4, 5});  // four ties: the two lowest
  REQUIRE(kept(1, 0) == std::vector<std::int64_t>{0, 1});  // all zero
  REQUIRE(kept(1, 1) == std::vector<std::int64_t>{4, 6});  // 7 and the smallest free position
  REQUIRE(kept(2, 0) == std::vector<std::int64_t>{0, 1});
  REQUIRE(kept(2, 1) == std::vector<std::int64_t>{5, 6});  // |-3| and 3 beat 2 and -2
  REQUIRE(w.value(0, 0) == -4.0f);
  REQUIRE(w.value(2, 2) == -3.0f);
  // A 2:4 matrix is unchanged, and prunes to exactly what sparse24_from_dense gives.
  auto e = dense_of<float>(2, 6, {0, 5, 0, 7, 0, 1, 0, 0, 0, 0, -2, 0});
  auto pe = ops::prune_sparse24(e.view());
  auto fe = sparse24_from_dense(e.view());
  REQUIRE(std::vector<std::uint8_t>(pe.meta().begin(), pe.meta().end()) ==
          std::vector<std::uint8_t>(fe.meta().begin(), fe.meta().end()));
  REQUIRE(same_values(to_dense(pe), e));
  // Inf is the largest magnitude; NaN is refused, naming the entry.
  float const inf = std::numeric_limits<float>::infinity();
  auto wi = ops::prune_sparse24(dense_of<float>(1, 4, {1, -inf, 2, 0}).view());
  REQUIRE(wi.column(0, 0) == 1);
  REQUIRE(wi.column(0, 1) == 2);
  auto msg = error_text([&] {
    ops::prune_sparse24(dense_of<float>(2, 5, {0, 0, 0, 0, 0, 1, 2, 3, 4, std::nanf("")}).view());
  });
  REQUIRE(has(msg, "entry (1, 4) is NaN"));
}

TEST_CASE("prune_sparse24 on random bf16 matrices matches a brute-force choice", "[train][sparse24]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> v(-6, 6);
  for (std::int64_t cols : {1, 4, 7, 33}) {
    dense_matrix<bf16> d(5, cols);
    for (std::int64_t i = 0; i < d.rows() * cols; ++i) d.data()[i] = bf16(float(v(rng)) * 0.25f);
    auto w = ops::prune_sparse24(d.view());
    w.validate();
    auto back = to_dense(w);
    for (std::int64_t r = 0; r < 5; ++r)
      for (std::int64_t g = 0; g < w.groups_per_row(); ++g) {
        // Every dropped entry is no larger than both kept ones, and dropped entries become zero.
        float kmin = 1e30f;
        for (int s = 0; s < 2; ++s) kmin = std::min(kmin, std::fabs(static_cast<float>(w.value(r, 2 * g + s))));
        for (int i = 0; i < 4; ++i) {
          std::int64_t const c = 4 * g + i;
          if (c >= cols) continue;
          bool const is_kept = w.column(r, 2 * g) == c || w.column(r, 2 * g + 1) == c;
          if (!is_kept) {
            REQUIRE(std::fabs(static_cast<float>(d(r, c))) <= kmin);
            REQUIRE(static_cast<float>(back(r, c)) == 0.0f);
          } else {
            REQUIRE(static_cast<float>(back(r, c)) == static_cast<float>(d(r, c)));
          }
        }
      }
  }
}

TEST_CASE("reference sparse24_linear on hand-computed cases", "[linear][sparse24]") {
  // W (2 x 8) as in the running example; X (3 x 8).
  auto w = sparse24_from_dense(dense_of<float>(2, 8, {0, 5, 0, 7, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, -2, 4}).view());
  auto x = dense_of<float>(3, 8, {1, 1, 1, 1, 1, 1, 1, 1,  //
                                  0, 2, 0, 1, -1, 0, 3, 0.5f,  //
                                  9, 0, 9, 0, 0, 9, 0, 0});
  dense_matrix<float> y(3, 2);
  ops::sparse24_linear(host_exec{}, x.view(), w, y.view());
  // y(n, m) = x_n . w_m: w_0 = (0 5 0 7 3 0 0 0), w_1 = (0 0 0 0 0 0 -2 4).
  REQUIRE(y(0, 0) == 15.0f);
  REQUIRE(y(0, 1) == 2.0f);
  REQUIRE(y(1, 0) == 14.0f);  // 10 + 7 - 3
  REQUIRE(y(1, 1) == -4.0f);  // -6 + 2
  REQUIRE(y(2, 0) == 0.0f);
  REQUIRE(y(2, 1) == 0.0f);
  // Epilogue: bias per output feature m, ReLU, cap; output rounded once to bf16.
  float bias[2] = {-14.5f, 10.0f};
  basic_epilogue<float> epi;
  epi.bias = bias;
  epi.relu = true;
  epi.has_cap = true;
  epi.cap = 11.0f;
  dense_matrix<bf16> yb(3, 2);
  dense_matrix<bf16> xb(3, 8);
  for (std::int64_t i = 0; i < 24; ++i) xb.data()[i] = bf16(x.data()[i]);
  auto wb = sparse24_from_dense(dense_of<bf16>(2, 8, {0, 5, 0, 7, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, -2, 4}).view());
  reference::sparse24_linear(dense_view<bf16 const>(xb.view()), wb, yb.view(), epi);
  std::vector<float> got;
  for (std::int64_t i = 0; i < 6; ++i) got.push_back(static_cast<float>(yb.data()[i]));
  REQUIRE(got == std::vector<float>{0.5f, 11.0f, 0.0f, 6.0f, 0.0f, 10.0f});
  // Shapes are checked.
  dense_matrix<float> wrong(3, 3);
  REQUIRE(has(error_text([&] { ops::sparse24_linear(host_exec{}, x.view(), w, wrong.view()); }), "Y must be 3 x 2"));
}

TEST_CASE("reference sparse24_linear: stored zeros multiply, K not a multiple of 4", "[linear][sparse24]") {
  float const inf = std::numeric_limits<float>::infinity();
  // W (1 x 5): [2 0 0 0 | 3], the first group stores (0, 1) = (2, 0): a stored zero at column 1.
  auto w = sparse24_from_dense(dense_of<float>(1, 5, {2, 0, 0, 0, 3}).view());
  REQUIRE(w.column(0, 1) == 1);
  auto x = dense_of<float>(3, 5, {1, 1, 1, 1, 1,  //
                                  1, inf, 1, 1, 1,  // Inf times the stored zero: NaN
                                  1, 1, inf, 1, 1});  // Inf where nothing is stored: no effect
  dense_matrix<float> y(3, 1);
  reference::sparse24_linear(dense_view<float const>(x.view()), w, y.view(), epilogue_none());
  REQUIRE(y(0, 0) == 5.0f);
  REQUIRE(std::isnan(y(1, 0)));
  REQUIRE(y(2, 0) == 5.0f);
}

TEST_CASE("sparse24_linear_can_implement", "[linear][sparse24]") {
  REQUIRE(ops::sparse24_linear_can_implement(11008, 4096));
  REQUIRE(ops::sparse24_linear_can_implement(0, 0));
  REQUIRE(has(ops::sparse24_linear_can_implement(-1, 4).why(), "must be >= 0"));
  REQUIRE(has(ops::sparse24_linear_can_implement(4, std::int64_t(1) << 31).why(), "at most"));
  // The sm_90 table, mma.sp path and (sm_90a builds) wgmma path; wgmma only on sm_90 itself.
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 1, false) == policy::sparse24_choice::n8);
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 128, false) == policy::sparse24_choice::n32);
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 256, false) == policy::sparse24_choice::n64);
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 2048, false) == policy::sparse24_choice::large);
  // wgmma built, X gathered by the threads (a convolution's im2col): the wgmma tiles.
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 8, true, false) == policy::sparse24_choice::n8);
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 32, true, false) == policy::sparse24_choice::n32);
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 64, true, false) == policy::sparse24_choice::w_n64);
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 128, true, false) == policy::sparse24_choice::w_mid);
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 2048, true, false) == policy::sparse24_choice::w_large);
  // Dense rows through tensor maps: the warp-specialized tiles.
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 8, true) == policy::sparse24_choice::n8);
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 9, true) == policy::sparse24_choice::ws_n32);
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 64, true) == policy::sparse24_choice::ws_n64);
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 65, true) == policy::sparse24_choice::ws_mid);
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 512, true) == policy::sparse24_choice::ws_mid);
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 513, true) == policy::sparse24_choice::ws_large);
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 2048, true) == policy::sparse24_choice::ws_large);
  REQUIRE(policy::sparse24_pick(arch{10, 0}, 2048, true) == policy::sparse24_choice::large);
  REQUIRE(policy::sparse24_pick(arch{8, 0}, 64, true) == policy::sparse24_choice::n64);
  // W of at most 128 rows (a convolution's filters): the 128-row wgmma tiles at any N.
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 2048, true, true, 64) == policy::sparse24_choice::ws_mid);
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 2048, true, true, 128) == policy::sparse24_choice::ws_mid);
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 2048, true, true, 129) == policy::sparse24_choice::ws_large);
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 2048, true, false, 128) == policy::sparse24_choice::w_mid);
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 2048, true, false, 256) == policy::sparse24_choice::w_large);
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 32, true, true, 64) == policy::sparse24_choice::ws_n32);
  REQUIRE(policy::sparse24_pick(arch{9, 0}, 2048, false, true, 64) == policy::sparse24_choice::large);
}
