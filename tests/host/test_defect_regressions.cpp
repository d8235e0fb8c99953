// Host-side defects a review found, one test case each: the trigger that read out of bounds,
// overflowed or answered wrongly, and the behaviour now. This file is also built alone with
// -fsanitize=address,undefined (CTest host_sanitized.*, tests/CMakeLists.txt), so every
// trigger runs under ASan and UBSan in CI.
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/conv/op/direct_sparse.hpp>
#include <sdnn/conv/quantized_weights.hpp>
#include <sdnn/conv/reference/convolution.hpp>
#include <sdnn/conv/reference/quantized.hpp>
#include <sdnn/conv/weights.hpp>
#include <sdnn/core/epilogue.hpp>
#include <sdnn/formats/convert.hpp>
#include <sdnn/io/matrix_market.hpp>
#include <sdnn/linear/op/gemm.hpp>
#include <sdnn/linear/op/spmm.hpp>
#include <sdnn/linear/reference/gemm.hpp>
#include <sdnn/linear/reference/spmm.hpp>
#include <sdnn/train/op/backward.hpp>
#include <sdnn/train/op/prune_uniform.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

using namespace sdnn;
using sdnn_test::error_text;
using sdnn_test::has;

namespace {
bool accepted(conv::sparse_conv_weights<float> const& w) {
  try {
    conv::validate(w);
    return true;
  } catch (error const&) {
    return false;
  }
}
bool accepted(conv::quantized_conv_weights<int8_encoding> const& w) {
  try {
    conv::validate(w);
    return true;
  } catch (error const&) {
    return false;
  }
}
// One output channel with one entry at `offset`.
conv::sparse_conv_weights<float> one_entry(conv::conv_shape const& sh, std::int32_t offset) {
  conv::sparse_conv_weights<float> w;
  w.shape = sh;
  w.shape.K = 1;
  w.nnz_per_channel = 1;
  w.offsets = {offset};
  w.values = {1.0f};
  return w;
}
}  // namespace

// ---------------------------------------------------------------------------------------
// Convolution weights: validate() accepts exactly the offsets of a dense filter.

TEST_CASE("conv validate accepts exactly the (c, r, s) offsets of the filter", "[conv][validate]") {
  std::int64_t shapes = 0, checked = 0;
  std::string first_wrong;
  for (int C : {1, 2})
    for (int H : {1, 2, 4})
      for (int W : {1, 3})
        for (int R : {1, 2, 3})
          for (int S : {1, 2, 3})
            for (int ph : {0, 1})
              for (int pw : {0, 2})
                for (int dh : {1, 2})
                  for (int dw : {1, 3}) {
                    conv::conv_shape sh;
                    sh.C = C, sh.H = H, sh.W = W, sh.K = 1, sh.R = R, sh.S = S;
                    sh.pad_h = ph, sh.pad_w = pw, sh.dil_h = dh, sh.dil_w = dw;
                    try {
                      sh.check();
                    } catch (error const&) {
                      continue;  // the dilated kernel is larger than the padded input
                    }
                    ++shapes;
                    std::int64_t const Hp = sh.Hp(), Wp = sh.Wp(), limit = C * Hp * Wp;
                    std::set<std::int64_t> filter;
                    for (int c = 0; c < C; ++c)
                      for (int r = 0; r < R; ++r)
                        for (int s = 0; s < S; ++s) filter.insert(c * Hp * Wp + r * dh * Wp + s * dw);
                    // Every offset in range, and one past each end.
                    auto q = conv::quantize_int8(one_entry(sh, 0));
                    for (std::int64_t o = -1; o <= limit; ++o) {
                      bool const want = filter.count(o) == 1;
                      auto w = one_entry(sh, static_cast<std::int32_t>(o));
                      q.offsets[0] = static_cast<std::int32_t>(o);
                      ++checked;
                      if ((accepted(w) != want || accepted(q) != want) && first_wrong.empty())
                        first_wrong = sdnn::detail::concat("C=", C, " H=", H, " W=", W, " R=", R, " S=", S, " pad ", ph,
                                                           "x", pw, " dil ", dh, "x", dw, ": offset ", o, " expected ",
                                                           want ? "accepted" : "refused");
                    }
                    // The whole dense filter, in increasing order, as make_conv_weights builds it.
                    conv::sparse_conv_weights<float> dense;
                    dense.shape = sh;
                    dense.nnz_per_channel = static_cast<std::int32_t>(filter.size());
                    for (auto o : filter) dense.offsets.push_back(static_cast<std::int32_t>(o));
                    dense.values.assign(filter.size(), 1.0f);
                    if (!accepted(dense) && first_wrong.empty()) first_wrong = "a dense filter was refused";
                  }
  INFO(first_wrong);
  REQUIRE(first_wrong.empty());
  REQUIRE(shapes > 500);
  REQUIRE(checked > 20000);
}

TEST_CASE("conv: a 1 x 1 filter with offset 15 on a 4 x 4 image is refused, not read", "[conv][validate]") {
  auto const sh = conv::conv_shape::conv2d(1, 4, 4, 1, 1, 1);
  auto const w = one_entry(sh, 15);  // in [0, C*Hp*Wp = 16), but row 3, column 3 of a 1 x 1 filter
  std::vector<float> in(16, 1.0f);
  // The host references read in_padded[offset + (oy*Wp + ox)] up to 15 + 15 (a heap overflow
  // under ASan before); they now validate first.
  auto q = conv::quantize_int8(one_entry(sh, 0));
  q.offsets[0] = 15;
  REQUIRE_THROWS_AS(conv::conv_reference(q, 1, in.data()), error);
  REQUIRE_THROWS_AS(conv::conv_reference(w, 1, in.data()), error);
  REQUIRE(has(error_text([&] { conv::validate(w); }),
              "offsets[0] = 15 is not a filter position: it is row 3, column 3 of channel 0's 4 x 4 padded map"));
  REQUIRE(has(error_text([&] { conv::validate(q); }),
              "quantized_conv_weights: offsets[0] = 15 is not a filter position"));
  auto ok = one_entry(sh, 0);
  REQUIRE(conv::conv_reference(ok, 1, in.data()) == std::vector<double>(16, 1.0));
}

// ---------------------------------------------------------------------------------------
// Convolution geometry and pruning: checked arithmetic.

TEST_CASE("conv geometry_of refuses a window that overflows int", "[conv][geometry]") {
  // Variant 0 has 4 pixels per thread: th = 32 -> 128 output rows per tile, 127 strides of 2^30.
  auto const sh = conv::conv_shape::conv2d(1, 1, 1, 1, 1, 1, 1 << 30);
  conv::direct_conv_config c;
  c.variant = 0;
  c.tw = 8;
  c.th = 32;
  std::string const m = error_text([&] { conv::geometry_of(sh, c); });
  REQUIRE(has(m, "direct_conv_config: the input window of a 128 x 8 output tile at stride 1073741824 x 1073741824 is "
                 "136365211649 x 7516192769 elements, expected fewer than 2^31"));
  REQUIRE_THROWS_AS(conv::direct_conv_candidates(sh, sizeof(float)), error);
  // C, OW and K near INT_MAX: the ceil divisions must not overflow either (C + cc - 1 did).
  int const big = std::numeric_limits<int>::max();
  conv::direct_conv_config const d;
  REQUIRE(conv::geometry_of(conv::conv_shape::conv2d(big, 1, 1, 1, 1, 1), d).nchunks == (big - 1) / 64 + 1);
  REQUIRE(conv::geometry_of(conv::conv_shape::conv2d(1, 1, big, 1, 1, 1), d).tiles_x == (big - 1) / 32 + 1);
  REQUIRE(conv::geometry_of(conv::conv_shape::conv2d(1, 1, 1, big - 7, 1, 1), d).kper == big - 7);
  auto const wide = conv::conv_shape::conv2d(1, 1, 1, big, 1, 1);
  REQUIRE(has(error_text([&] { conv::geometry_of(wide, d); }),
              "output channels per k-split, expected fewer than 2^31"));
  conv::direct_conv_config huge;
  huge.tw = 1 << 20;
  huge.th = 1 << 20;  // kw*tw*th would overflow int in the check itself
  REQUIRE(has(error_text([&] { conv::geometry_of(wide, huge); }), "kw*tw*th must be in [1, 256]"));
  // A normal layer keeps its geometry.
  auto const l = conv::conv_shape::conv2d(64, 56, 56, 64, 3, 3, 1, 1);
  auto const gl = conv::geometry_of(l, conv::direct_conv_config{});
  REQUIRE(gl.sh == 4 * 4 - 1 + 2 + 1);  // toh = th * pixels = 16, (16 - 1) * 1 + 2 + 1
  REQUIRE(gl.sw == 32 - 1 + 2 + 1);
}

TEST_CASE("conv make_tiled_entries refuses a tile whose offsets overflow int32", "[conv][geometry]") {
  auto const sh = conv::conv_shape::conv2d(1, 4, 4, 1, 1, 1);
  auto const w = one_entry(sh, 0);
  REQUIRE(has(error_text([&] { conv::make_tiled_entries(w, 1 << 20, 1 << 11, 1 << 11); }),
              "has more than 2^31 - 1 elements"));
  REQUIRE(conv::make_tiled_entries(w, 1, 4, 4).tile_offset == std::vector<std::int32_t>{0});
}

TEST_CASE("prune_uniform refuses K x F that overflows before touching w", "[conv][prune]") {
  float w = 1.0f;  // K * F = 2^80 entries claimed: refused before the loop reads past w
  std::int64_t const big = std::int64_t(1) << 40;
  REQUIRE(has(error_text([&] { conv::prune_uniform(&w, big, big, 0.5); }),
              "prune_uniform: a K x F = 1099511627776 x 1099511627776 tensor is too large"));
  REQUIRE_THROWS_AS(conv::prune_uniform(&w, 1, std::int64_t(1) << 31, 0.5), error);  // int32 filter indices
  REQUIRE(conv::prune_uniform(&w, 1, 1, 0.0).kept == 1);
}

// ---------------------------------------------------------------------------------------
// Epilogue: zero_preserving() is true only when f(0) == 0 in every column.

TEST_CASE("zero_preserving agrees with the epilogue and the host reference", "[epilogue]") {
  float const zero_bias[2] = {0.0f, 0.0f}, bias[2] = {1.0f, -1.0f};
  float const nan = std::numeric_limits<float>::quiet_NaN();
  // W: 2 x 2; Y: row 0 all zero (what skip policies skip), row 1 nonzero.
  auto const w = make_csr<float, std::int32_t>(2, 2, {0, 1, 2}, {0, 1}, {2.0f, 3.0f});
  dense_matrix<float> y(2, 2), out(2, 2);
  y.view()(1, 0) = 1.0f;
  int count = 0;
  for (float const* b : {static_cast<float const*>(nullptr), zero_bias, bias})
    for (float scalar : {0.0f, 2.0f, -3.0f})
      for (bool on_zero : {true, false})
        for (bool relu : {false, true})
          for (bool has_cap : {false, true})
            for (float cap : {-1.0f, -0.0f, 0.0f, 5.0f, nan}) {
              basic_epilogue<float> e;
              e.bias = b, e.bias_scalar = scalar, e.bias_on_zero = on_zero, e.relu = relu, e.has_cap = has_cap;
              e.cap = cap;
              dense_view<float const> const yv = y.view();
              reference::dense_sparse_spmm(yv, w.view(), out.view(), e);
              bool const f0_zero = e(0.0f, 0) == 0.0f && e(0.0f, 1) == 0.0f;
              bool const row_zero = out.view()(0, 0) == 0.0f && out.view()(0, 1) == 0.0f;
              INFO("bias " << (b == nullptr ? "none" : b == bias ? "{1,-1}" : "{0,0}") << " scalar " << scalar
                           << " on_zero " << on_zero << " relu " << relu << " cap " << has_cap << " " << cap);
              CHECK(f0_zero == row_zero);                // the reference applies f(0) to a zero row
              if (e.zero_preserving()) CHECK(row_zero);  // so skipping it is exact
              ++count;
            }
  REQUIRE(count == 3 * 3 * 2 * 2 * 2 * 5);
  basic_epilogue<float> capped;
  capped.has_cap = true;
  capped.cap = -1.0f;  // f(0) = -1: the rows cannot be skipped
  REQUIRE_FALSE(capped.zero_preserving());
  REQUIRE(capped(0.0f, 0) == -1.0f);
  capped.has_cap = false;
  REQUIRE(capped.zero_preserving());
}

// ---------------------------------------------------------------------------------------
// MatrixMarket: exact round trips for every integer type and long double.

namespace {
template <class T>
void round_trip(std::vector<T> const& values) {
  sdnn_test::temp_dir dir;
  auto const n = static_cast<std::int32_t>(values.size());
  std::vector<std::int32_t> rp{0}, ci;
  for (std::int32_t i = 0; i < n; ++i) {
    ci.push_back(i % 3);
    rp.push_back(i + 1);
  }
  auto const a = make_csr<T, std::int32_t>(n, 3, rp, ci, values);
  io::write_matrix_market(dir.file("a.mtx"), a.view());
  auto const b = io::read_matrix_market<T, std::int32_t>(dir.file("a.mtx"));
  REQUIRE(b.nnz() == a.nnz());
  for (std::size_t k = 0; k < values.size(); ++k) {
    INFO("value " << k);
    REQUIRE(b.values()[k] == values[k]);
    if constexpr (std::is_floating_point_v<T>) REQUIRE(std::signbit(b.values()[k]) == std::signbit(values[k]));
  }
}
template <class T>
void integer_round_trip() {
  using L = std::numeric_limits<T>;
  std::vector<T> v{L::lowest(), L::max(), T(0), T(1), T(L::max() - 1), T(L::lowest() + 1), T(L::max() / 3)};
  if constexpr (std::is_signed_v<T>) v.push_back(T(-1));
  round_trip(v);
}
template <class T>
void floating_round_trip() {
  using L = std::numeric_limits<T>;
  round_trip<T>({L::max(), L::lowest(), L::min(), -L::min(), L::denorm_min(), -L::denorm_min(), L::epsilon(),
                 T(1) + L::epsilon(), T(0.1), T(-1) / T(3), T(-0.0), T(0)});
}
}  // namespace

TEST_CASE("MatrixMarket round trip is exact for every integer type and long double", "[io]") {
  SECTION("int8") { integer_round_trip<std::int8_t>(); }
  SECTION("uint8") { integer_round_trip<std::uint8_t>(); }
  SECTION("int16") { integer_round_trip<std::int16_t>(); }
  SECTION("uint16") { integer_round_trip<std::uint16_t>(); }
  SECTION("int32") { integer_round_trip<std::int32_t>(); }
  SECTION("uint32") { integer_round_trip<std::uint32_t>(); }
  SECTION("int64") { integer_round_trip<std::int64_t>(); }  // INT64_MIN was refused on reading
  SECTION("uint64") { integer_round_trip<std::uint64_t>(); }
  SECTION("char") { integer_round_trip<char>(); }
  SECTION("long long") { integer_round_trip<long long>(); }
  SECTION("unsigned long long") { integer_round_trip<unsigned long long>(); }
  SECTION("uint64 2^63 + 5") { round_trip<std::uint64_t>({(std::uint64_t(1) << 63) + 5}); }  // was written negative
  SECTION("float") { floating_round_trip<float>(); }
  SECTION("double") { floating_round_trip<double>(); }
  SECTION("long double") { floating_round_trip<long double>(); }  // was narrowed to double
}

TEST_CASE("MatrixMarket reads integer values exactly, or refuses them", "[io]") {
  sdnn_test::temp_dir dir;
  auto one = [&](std::string const& field, std::string const& value) {
    return dir.write("v.mtx", "%%MatrixMarket matrix coordinate " + field + " general\n1 1 1\n1 1 " + value + "\n");
  };
  auto i64 = [&](std::string const& field, std::string const& value) {
    return io::read_matrix_market<std::int64_t, std::int32_t>(one(field, value)).values()[0];
  };
  auto u64 = [&](std::string const& field, std::string const& value) {
    return io::read_matrix_market<std::uint64_t, std::int32_t>(one(field, value)).values()[0];
  };
  REQUIRE(u64("integer", "18446744073709551615") == std::numeric_limits<std::uint64_t>::max());
  REQUIRE(u64("real", "18446744073709551615") == std::numeric_limits<std::uint64_t>::max());
  REQUIRE(i64("integer", "-9223372036854775808") == std::numeric_limits<std::int64_t>::lowest());
  REQUIRE(i64("real", "9007199254740993.0") == 9007199254740993);  // 2^53 + 1: not a double
  REQUIRE(i64("real", "1e3") == 1000);
  REQUIRE(i64("real", "-2.50e1") == -25);
  REQUIRE(i64("real", "0.0e-400") == 0);
  REQUIRE(io::read_matrix_market<double, std::int32_t>(one("integer", "18446744073709551615")).values()[0] ==
          18446744073709551615.0);
  auto bad = [&](auto read) { return error_text(read); };
  REQUIRE(has(bad([&] { u64("integer", "18446744073709551616"); }),
              "is not a valid integer (or does not fit 64 bits)"));
  REQUIRE(has(bad([&] { u64("integer", "-1"); }), "does not fit the value type"));
  REQUIRE(has(bad([&] { i64("integer", "9223372036854775808"); }), "does not fit the value type"));
  REQUIRE(has(bad([&] { i64("real", "-9223372036854775809"); }), "does not fit the value type"));
  REQUIRE(has(bad([&] { i64("real", "1.5"); }), "is not an integer"));
  REQUIRE(has(bad([&] { i64("real", "1e-1"); }), "is not an integer"));
  REQUIRE(has(bad([&] { i64("real", "nan"); }), "is not finite"));
  REQUIRE(has(bad([&] { i64("real", "1e99999999999"); }), "does not fit the value type"));
  REQUIRE(has(bad([&] { i64("integer", "2.0"); }), "is not a valid integer"));
  REQUIRE(has(bad([&] { i64("real", "1e"); }), "is not a valid real number"));
}

// ---------------------------------------------------------------------------------------
// Shape mismatches are dimension_mismatch.

TEST_CASE("spmm and gemm shape mismatches throw dimension_mismatch", "[ops][errors]") {
  auto const a = make_csr<float, std::int32_t>(2, 3, {0, 1, 2}, {0, 2}, {1.0f, 2.0f});  // 2 x 3
  auto const coo = to_coo(a);
  auto const ell = to_ell(a);
  auto const tiled = to_tiled_dense(a, 32, 32);
  dense_matrix<float> b(3, 4), b_bad(2, 4), c(2, 4), c_rows(3, 4), c_cols(2, 5);
  basic_epilogue<float> const e;
  auto views = [](dense_matrix<float> const& m) { return m.view(); };
  for (auto* bb : {&b, &b_bad})
    for (auto* cc : {&c, &c_rows, &c_cols}) {
      if (bb == &b && cc == &c) continue;
      dense_view<float const> const bv = views(*bb);
      dense_view<float> const cv = cc->view();
      REQUIRE_THROWS_AS(ops::spmm(host_exec{}, policy::csr_row_split<>{}, a.view(), bv, cv, e), dimension_mismatch);
      REQUIRE_THROWS_AS(ops::spmm(host_exec{}, policy::automatic{}, coo.view(), bv, cv, e), dimension_mismatch);
      REQUIRE_THROWS_AS(ops::spmm(host_exec{}, policy::automatic{}, ell.view(), bv, cv, e), dimension_mismatch);
      REQUIRE_THROWS_AS(ops::spmm(host_exec{}, policy::automatic{}, tiled.view(), bv, cv, e), dimension_mismatch);
      REQUIRE_THROWS_AS(reference::spmm(a.view(), bv, cv, e), dimension_mismatch);
      REQUIRE_THROWS_AS(reference::spmm(coo.view(), bv, cv, e), dimension_mismatch);
      REQUIRE_THROWS_AS(reference::spmm(ell.view(), bv, cv, e), dimension_mismatch);
      REQUIRE_THROWS_AS(reference::spmm(tiled.view(), bv, cv, e), dimension_mismatch);
    }
  REQUIRE(has(error_text([&] {
                ops::spmm(host_exec{}, policy::automatic{}, a.view(), views(b_bad), c.view(), e);
              }),
              "spmm: A is 2 x 3 but B has 2 rows (expected 3)"));
  // gemm: A 2 x 3.
  dense_matrix<float> ad(2, 3);
  for (auto* bb : {&b, &b_bad})
    for (auto* cc : {&c, &c_rows, &c_cols}) {
      if (bb == &b && cc == &c) continue;
      dense_view<float const> const av = views(ad), bv = views(*bb);
      REQUIRE_THROWS_AS(ops::gemm(host_exec{}, policy::automatic{}, av, bv, cc->view(), e), dimension_mismatch);
      REQUIRE_THROWS_AS(reference::gemm(av, bv, cc->view(), e), dimension_mismatch);
    }
  // Not a mismatch between operands: a plain sdnn::error still.
  dense_view<float> const short_ld{2, 4, 3, c.view().data};
  std::string const m =
      error_text([&] { ops::spmm(host_exec{}, policy::automatic{}, a.view(), views(b), short_ld, e); });
  REQUIRE(has(m, "leading dimensions must be >= cols"));
  REQUIRE_NOTHROW(ops::spmm(host_exec{}, policy::automatic{}, a.view(), views(b), c.view(), e));
  REQUIRE_NOTHROW(ops::gemm(host_exec{}, policy::automatic{}, views(ad), views(b), c.view(), e));
}

// ---------------------------------------------------------------------------------------
// prune_csr_magnitude: NaN has no magnitude order.

TEST_CASE("prune_csr_magnitude refuses NaN, naming the entry", "[train][prune]") {
  float const nan = std::numeric_limits<float>::quiet_NaN();
  auto const w = make_csr<float, std::int32_t>(2, 3, {0, 2, 4}, {0, 2, 0, 1}, {1.0f, -4.0f, nan, nan});
  // Before: nth_element with a comparator that is no strict weak order for NaN kept one of
  // the two NaNs (or anything else); now an error.
  REQUIRE(has(error_text([&] { ops::prune_csr_magnitude(w, 0.5); }),
              "prune_csr_magnitude: entry 2 (row 1, column 0) is NaN"));
  REQUIRE(has(error_text([&] { ops::prune_csr_magnitude(w, 0.5, ops::csr_prune::uniform_rows); }), "is NaN"));
  auto const ok = make_csr<float, std::int32_t>(2, 3, {0, 2, 3}, {0, 2, 0}, {1.0f, -4.0f, 2.0f});
  REQUIRE(ops::prune_csr_magnitude(ok, 0.5).w.nnz() == 3);
}

// ---------------------------------------------------------------------------------------
// Quantizers: NaN and +-Inf are refused with the entry named; finite values near the float
// limits keep every scale and every decoded value finite.

namespace {
float const f_max = std::numeric_limits<float>::max();
float const f_inf = std::numeric_limits<float>::infinity();
float const f_nan = std::numeric_limits<float>::quiet_NaN();

// 2 x 3 with entry 3 = (row 1, column 2) set to x.
csr_matrix<float, std::int32_t> with_entry3(float x) {
  return make_csr<float, std::int32_t>(2, 3, {0, 1, 4}, {0, 0, 1, 2}, {0.5f, -1.0f, 2.0f, x});
}
// One row holding v.
csr_matrix<float, std::int32_t> one_row(std::vector<float> const& v) {
  std::vector<std::int32_t> cols(v.size());
  for (std::size_t j = 0; j < v.size(); ++j) cols[j] = static_cast<std::int32_t>(j);
  return make_csr<float, std::int32_t>(1, static_cast<std::int32_t>(v.size()), {0, static_cast<std::int32_t>(v.size())},
                                       cols, v);
}
std::vector<int8_options> all_int8_options() {
  std::vector<int8_options> r;
  for (auto gr : {quant_granularity::per_layer, quant_granularity::per_channel})
    for (bool sym : {true, false})
      for (auto clip : {int8_clip::none, int8_clip::percentile, int8_clip::mse}) {
        int8_options o;
        o.granularity = gr;
        o.symmetric = sym;
        o.clip = clip;
        r.push_back(o);
      }
  return r;
}
}  // namespace

TEST_CASE("quantize_int8 refuses NaN and +-Inf, naming the entry", "[quant][int8]") {
  // Before: NaN became a code without a word (lround(NaN)); one Inf made the group's scale
  // infinite and every other value of the group decode to NaN.
  for (auto const& o : all_int8_options()) {
    REQUIRE(has(error_text([&] { quantize_int8(with_entry3(f_nan), o); }),
                "quantize_int8: entry 3 (row 1, column 2) is nan; only finite weights can be quantized"));
    REQUIRE(has(error_text([&] { quantize_int8(with_entry3(f_inf), o); }), "quantize_int8: entry 3 (row 1, column 2) is inf"));
    REQUIRE(has(error_text([&] { quantize_int8(with_entry3(-f_inf), o); }), "quantize_int8: entry 3 (row 1, column 2) is -inf"));
    REQUIRE(dequantize(quantize_int8(with_entry3(3.0f), o)).values()[3] == sdnn_test::Approx(3.0f).epsilon(0.01));
  }
  // The conv quantizers name the conv entry: entry 1 = output channel 1.
  conv::sparse_conv_weights<float> w;
  w.shape = conv::conv_shape::conv2d(1, 4, 4, 2, 1, 1);
  w.nnz_per_channel = 1;
  w.offsets = {0, 0};
  w.values = {1.0f, f_nan};
  REQUIRE(has(error_text([&] { conv::quantize_int8(w); }),
              "quantize: entry 1 (output channel 1, offset 0) is nan; only finite weights can be quantized"));
  w.values = {-f_inf, 1.0f};
  REQUIRE(has(error_text([&] { conv::quantize_codebook4(w); }), "quantize: entry 0 (output channel 0, offset 0) is -inf"));
  w.values = {-2.0f, 1.0f};
  auto const d = conv::dequantize(conv::quantize_int8(w)).values;
  REQUIRE(d[0] == sdnn_test::Approx(-2.0f).epsilon(0.01));
  REQUIRE(d[1] == sdnn_test::Approx(1.0f).epsilon(0.01));
}

TEST_CASE("quantize_int8 keeps scales and decoded values finite near the float limits", "[quant][int8]") {
  float const tiny = std::numeric_limits<float>::denorm_min();
  std::vector<std::vector<float>> const rows = {{3e38f, -3e38f, 1.0f, -1.0f},
                                                {f_max, -f_max, 1.0f, -1.0f},
                                                {f_max, 0.0f, 2.0f},
                                                {-f_max, 0.0f, -2.0f},
                                                {tiny, -tiny, 0.0f}};
  for (auto const& v : rows)
    for (auto const& o : all_int8_options()) {
      auto const q = quantize_int8(one_row(v), o);
      for (std::size_t g = 0; g < q.enc.scale.size(); ++g) {
        REQUIRE(std::isfinite(q.enc.scale[g]));
        REQUIRE(q.enc.scale[g] > 0.0f);
      }
      for (std::int32_t p = 0; p < q.nnz(); ++p) {
        float const x = v[static_cast<std::size_t>(p)], y = q.decode(p);
        float const s = q.enc.scale[q.enc.group(q.col_idx[static_cast<std::size_t>(p)])];
        INFO("value " << x << " -> " << y << " (scale " << s << ", symmetric " << o.symmetric << ")");
        REQUIRE(std::isfinite(y));
        if (x == 0.0f) REQUIRE(y == 0.0f);
        if (o.clip == int8_clip::none) {  // within s / 2 (up to float rounding); one step where +-FLT_MAX clamps
          double const steps = std::fabs(x) <= 3e38f ? 0.5 : 1.0;
          REQUIRE(std::fabs(double(x) - double(y)) <= steps * double(s) * (1 + 1e-4));
        }
      }
    }
  // Symmetric per layer: 3e38 and -3e38 are the end codes, exactly as the scheme gives them.
  auto const q = quantize_int8(one_row({3e38f, -3e38f, 1.0f, -1.0f}));
  REQUIRE(q.enc.scale[0] == static_cast<float>(3e38f / 127.0));
  REQUIRE(q.enc.q == std::vector<std::int8_t>{127, -127, 0, 0});
  // +-FLT_MAX symmetric: 127 * scale would round to inf; the scale is lowered so it does not.
  auto const m = quantize_int8(one_row({f_max, -f_max}));
  REQUIRE(std::isfinite(m.enc.scale[0] * 127.0f));
  REQUIRE(m.decode(0) == sdnn_test::Approx(f_max).epsilon(1e-6));
  REQUIRE(m.decode(1) == sdnn_test::Approx(-f_max).epsilon(1e-6));
  // The smallest subnormal survives (a scale of 0 would divide by zero).
  auto const t = quantize_int8(one_row({tiny, -tiny}));
  REQUIRE(t.decode(0) == tiny);
  REQUIRE(t.decode(1) == -tiny);
  // An all-zero group: scale 1 (zero point 0 symmetric, -128 asymmetric), zeros decode to 0;
  // the other channel keeps its own scale.
  for (bool sym : {true, false}) {
    int8_options pc;
    pc.granularity = quant_granularity::per_channel;
    pc.symmetric = sym;
    auto const z =
        quantize_int8(make_csr<float, std::int32_t>(2, 2, {0, 2, 4}, {0, 1, 0, 1}, {0.0f, 1.0f, 0.0f, -1.0f}), pc);
    REQUIRE(z.enc.scale[0] == 1.0f);
    REQUIRE(z.enc.zero[0] == (sym ? 0 : -128));
    REQUIRE(z.decode(0) == 0.0f);
    REQUIRE(z.decode(2) == 0.0f);
    REQUIRE(z.decode(1) == sdnn_test::Approx(1.0f).epsilon(0.01));
    REQUIRE(z.decode(3) == sdnn_test::Approx(-1.0f).epsilon(0.01));
  }
  auto const all0 = quantize_int8(one_row({0.0f, 0.0f}));
  REQUIRE(all0.enc.scale[0] == 1.0f);
  REQUIRE(all0.decode(1) == 0.0f);
}

TEST_CASE("quantize_codebook4 refuses NaN and +-Inf, naming the entry", "[quant][codebook]") {
  // Before: one NaN or Inf made the whole codebook non-finite.
  REQUIRE(has(error_text([&] { quantize_codebook4(with_entry3(f_nan)); }),
              "quantize_codebook4: entry 3 (row 1, column 2) is nan; only finite weights can be quantized"));
  REQUIRE(has(error_text([&] { quantize_codebook4(with_entry3(f_inf)); }), "quantize_codebook4: entry 3 (row 1, column 2) is inf"));
  REQUIRE(has(error_text([&] { quantize_codebook4(with_entry3(-f_inf)); }), "quantize_codebook4: entry 3 (row 1, column 2) is -inf"));
  REQUIRE(dequantize(quantize_codebook4(with_entry3(3.0f))).values()[3] == 3.0f);
}

TEST_CASE("quantize_codebook4 stores centroids beyond the half range with an exponent", "[quant][codebook]") {
  // Before: +-3e38 rounded to half infinities and every value (3e38 too) decoded to 0.
  auto nearest = [](codebook4_encoding const& e, float x, unsigned idx) {
    double const mine = std::fabs(double(x) - double(e.centroid(idx)));
    for (unsigned c = 0; c < 16; ++c) {
      if (std::fabs(double(x) - double(e.centroid(c))) < mine) return false;
    }
    return true;
  };
  for (auto const& v : std::vector<std::vector<float>>{{3e38f, -3e38f, 1.0f, -1.0f},
                                                       {f_max, -f_max, 1.0f, -1.0f},
                                                       {1e5f, -7e4f, 2.0f, 0.5f}}) {
    auto const q = quantize_codebook4(one_row(v));
    REQUIRE(q.enc.codebook.exp > 0);
    for (unsigned c = 0; c < 16; ++c) REQUIRE(std::isfinite(q.enc.centroid(c)));
    for (std::int32_t p = 0; p < q.nnz(); ++p) {
      float const x = v[static_cast<std::size_t>(p)], y = q.decode(p);
      INFO("value " << x << " -> " << y << ", exponent " << q.enc.codebook.exp);
      REQUIRE(std::isfinite(y));
      REQUIRE(nearest(q.enc, x, q.enc.index(p)));
      if (std::fabs(x) >= 7e4f) REQUIRE(std::fabs(double(y) - double(x)) <= std::fabs(double(x)) / 1024);  // half precision
    }
  }
  auto const q = quantize_codebook4(one_row({3e38f, -3e38f, 1.0f, -1.0f}));
  REQUIRE(q.decode(0) == sdnn_test::Approx(3e38f).epsilon(1.0 / 2048));
  REQUIRE(q.decode(1) == sdnn_test::Approx(-3e38f).epsilon(1.0 / 2048));
  REQUIRE(q.decode(2) == 0.0f);  // 1 and -1 share a centroid at 0 (the nearest entry)
  REQUIRE(q.decode(3) == 0.0f);
  // A copy of the codebook (as the device uploads make) carries its exponent.
  codebook4_encoding copy;
  copy.codebook = q.enc.codebook;
  for (unsigned c = 0; c < 16; ++c) REQUIRE(copy.centroid(c) == q.enc.centroid(c));
  // Centroids within the half range: exponent 0, centroids are the half values themselves.
  auto const n = quantize_codebook4(one_row({6e4f, -6e4f, 1.0f, -1.0f}));
  REQUIRE(n.enc.codebook.exp == 0);
  REQUIRE(n.decode(0) == round_to_half(6e4f));
  REQUIRE(n.decode(1) == round_to_half(-6e4f));
}

TEST_CASE("prune_uniform refuses K x F beyond its storage before touching w or allocating", "[conv][prune]") {
  float w = 1.0f;  // any read past w or allocation of K * F floats would be reported (ASan) or fail
  std::int64_t const two31 = std::int64_t(1) << 31;
  // K * F = 2^62 - 2^31 fits int64 but not a host vector (at most 2^60 entries).
  REQUIRE(has(error_text([&] { conv::prune_uniform(&w, two31, two31 - 1, 0.5); }),
              "prune_uniform: a K x F = 2147483648 x 2147483647 tensor is too large (F must fit int32 filter indices "
              "and K * F must be at most 1152921504606846976 entries)"));
  // K * F overflows int64.
  REQUIRE(has(error_text([&] { conv::prune_uniform(&w, std::numeric_limits<std::int64_t>::max(), 2, 0.5); }),
              "tensor is too large"));
  REQUIRE(has(error_text([&] { conv::prune_uniform(&w, 3, std::numeric_limits<std::int64_t>::max() / 2, 0.5); }),
              "tensor is too large"));
  // The device limit (int32 flat indices), checked by the device calls before any allocation:
  // K * F = 2^31 overflows int32; 2^31 - 1 does not.
  auto const dev = conv::detail::prune_device_max_entries;
  auto check = [&](std::int64_t K, std::int64_t F, std::int64_t limit) {
    return error_text([&] { conv::detail::check_prune_args(K, F, 0.5, conv::prune_rule::global, -1, limit); });
  };
  REQUIRE(has(check(2, std::int64_t(1) << 30, dev), "K * F must be at most 2147483647 entries"));
  REQUIRE(has(check(std::int64_t(1) << 40, 1, dev), "a K x F = 1099511627776 x 1 tensor is too large"));
  REQUIRE(has(check(std::int64_t(1) << 16, std::int64_t(1) << 16, dev), "too large"));
  REQUIRE(check(1, two31 - 1, dev) == "no throw");
  REQUIRE(check(std::int64_t(1) << 16, std::int64_t(1) << 16, conv::detail::prune_host_max_entries) == "no throw");
  REQUIRE(conv::prune_uniform(&w, 1, 1, 0.0).kept == 1);
}
