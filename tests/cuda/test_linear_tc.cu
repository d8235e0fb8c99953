// The tensor-core linear layer on the device: every policy (dense, block-sparse with each block
// shape, tile_offsets), both value types and both output types against the host reference on
// the same rounded inputs (bound: check_against_reference), at sizes that are multiples of no
// tile, with edge cases, poisoned outputs, repeat runs and refusals.
#include "sdnn_gpu_test.cuh"
#include "sdnn_tc_fixtures.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/formats/block_sparse.hpp>
#include <sdnn/formats/tile_offsets.hpp>
#include <sdnn/linear/op/tc_linear.cuh>
#include <sdnn/linear/reference/tc_linear.hpp>
#include <sdnn/train/op/prune_structured.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using namespace sdnn;
using sdnn_test::download;
using sdnn_test::error_text;
using sdnn_test::has;
using sdnn_test::make_tc_weights;
using sdnn_test::out_bits;
using sdnn_test::pruned;
using sdnn_test::random_matrix;
using sdnn_test::stream_guard;
using sdnn_test::upload;

namespace {

template <class Out>
double max_finite() {
  if constexpr (std::is_same_v<Out, float>) return std::numeric_limits<float>::max();
  else if constexpr (std::is_same_v<Out, bf16>) return 3.3895313892515355e38;
  else return 65504.0;
}
// Half the spacing of Out's subnormals: the most a correct rounding to Out moves a value near 0.
template <class Out>
double half_subnormal_step() {
  if constexpr (std::is_same_v<Out, float>) return std::ldexp(1.0, -150);
  else if constexpr (std::is_same_v<Out, bf16>) return std::ldexp(1.0, -134);
  else return std::ldexp(1.0, -25);
}

template <class T>
dense_view<T const> ref_view(dense_matrix<T> const& w) {
  return w.view();
}
template <class T>
block_sparse_view<T> ref_view(block_sparse_matrix<T> const& w) {
  return w.view();
}
template <class T>
tile_offsets_view<T> ref_view(tile_offsets_matrix<T> const& w) {
  return w.view();
}

struct run_options {
  policy::tc_shape shape = policy::tc_shape::automatic;
  int x_offset = 0;   // elements: X starts this far into its buffer (0: 16-byte aligned)
  std::int64_t ldx_pad = 0;
  std::int64_t ldy_pad = 0;  // Y's row pitch is M + ldy_pad (the padding must stay untouched)
  bool bias = false, relu = false, cap = false;
  bool caller_workspace = false;
  int expect_tma = -1;  // 1 / 0: the plan must / must not describe the run as the TMA kernel's
  int expect_tma_rows = 0;  // > 0: and with this many rows of X a thread block
};

// Runs the plan on X (N x K) and checks every output against the reference; returns Y's bits.
template <class Policy, class T, class Out, class W>
std::vector<Out> check_against_reference(W const& w, std::int64_t m, std::int64_t k, dense_matrix<T> const& x,
                                         run_options o = {}, std::string const& what = "") {
  INFO(what << " M=" << m << " K=" << k << " N=" << x.rows());
  stream_guard sg;
  auto ex = sg.exec();
  std::int64_t const n = x.rows(), ldx = k + o.ldx_pad;
  std::vector<T> hx(std::size_t(n * ldx + o.x_offset + 8), T(0.f));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < k; ++j) hx[std::size_t(o.x_offset + i * ldx + j)] = x(i, j);
  auto dx = upload(hx, ex);
  std::vector<float> hb(static_cast<std::size_t>(m));
  for (std::int64_t i = 0; i < m; ++i) hb[std::size_t(i)] = float(i % 7) - 3.f;
  auto db = upload(hb, ex);
  basic_epilogue<float> epi, epi_host;
  if (o.bias) {
    epi.bias = db.data();
    epi_host.bias = hb.data();
  }
  epi.relu = epi_host.relu = o.relu;
  epi.has_cap = epi_host.has_cap = o.cap;
  epi.cap = epi_host.cap = 2.5f;

  using plan_t = ops::tc_linear_plan<Policy, T>;
  plan_options po;
  po.own_workspace = !o.caller_workspace;
  plan_t plan(w, ex, po, o.shape);
  buffer<unsigned char, device_space> ws(plan.workspace_bytes() + 256, ex);
  workspace wsv{};
  if (o.caller_workspace) wsv = {ws.data(), ws.size()};

  std::int64_t const ldy = m + o.ldy_pad;
  buffer<Out, device_space> dy(std::size_t(std::max<std::int64_t>(n * ldy, 1)), ex);
  SDNN_CUDA_CHECK(cudaMemsetAsync(dy.data(), 0xff, dy.size() * sizeof(Out), ex.stream));  // NaN in every type
  dense_view<T const> xv{n, k, ldx, dx.data() + o.x_offset};
  dense_view<Out> yv{n, m, ldy, dy.data()};
  plan.run(ex, xv, yv, epi, wsv);
  auto const y_padded = download(dy.data(), std::size_t(n * ldy), ex);
  std::vector<Out> y(std::size_t(n * m));
  Out untouched;
  std::memset(&untouched, 0xff, sizeof(Out));  // what the memset left in Y
  std::int64_t pad_written = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    std::copy_n(y_padded.begin() + i * ldy, m, y.begin() + i * m);
    for (std::int64_t j = m; j < ldy; ++j)
      pad_written += std::memcmp(&y_padded[std::size_t(i * ldy + j)], &untouched, sizeof(Out)) != 0;
  }
  CHECK(pad_written == 0);
  INFO(plan.describe(n));
  if (o.expect_tma >= 0) CHECK(has(plan.describe(n), ": tma,") == (o.expect_tma == 1));
  if (o.expect_tma_rows > 0) CHECK(has(plan.describe(n), " x " + std::to_string(o.expect_tma_rows) + " rows a block"));

  // Reference in float (Out = float), the bound from the dense |x| |w| sums.
  dense_matrix<float> ref(n, m);
  reference::tc_linear(x.view(), ref_view(w), ref.view(), epi_host);
  auto wd = [&] {
    if constexpr (std::is_same_v<W, dense_matrix<T>>) {
      dense_matrix<T> c(m, k);
      std::copy(w.values().begin(), w.values().end(), c.values().begin());
      return c;
    } else {
      return to_dense(w);
    }
  }();
  // Asserted bound per output (n, m), S = sum_k |x_nk| |w_mk| (nonzero w), u = 2^-24:
  //   |y - ref| <= 4 K u S + 2^-p (|ref| + 4 K u S) + h
  // Both sides add the same exact float products in different orders: each within K u S of the
  // exact sum with round-to-nearest adds, 2 K u S if the tensor core's adds truncate (and a factor
  // 2 of margin), then one rounding to Out each (half an ulp: 2^-p relative, p = 8 bf16, 11 fp16,
  // 24 float, or in Out's subnormal range h = half its subnormal spacing: 2^-25 fp16, 2^-134
  // bf16, 2^-150 float). NaN must meet NaN, an infinity the same infinity.
  double const u = std::ldexp(1.0, -24), rel = std::ldexp(1.0, -out_bits<Out>());
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < n && bad < 5; ++i)
    for (std::int64_t j = 0; j < m && bad < 5; ++j) {
      double s = 0;
      for (std::int64_t q = 0; q < k; ++q)  // zero weights add nothing (and keep NaN in X out of the bound)
        if (float(wd(j, q)) != 0.f) s += std::fabs(double(float(x(i, q))) * double(float(wd(j, q))));
      double const r = ref(i, j);
      double const got = double(static_cast<float>(y[std::size_t(i * m + j)]));
      bool ok;
      if (std::isnan(r)) ok = std::isnan(got);
      else if (std::isinf(r)) ok = got == r;
      else {
        double const acc = 4.0 * double(k) * u * s;
        // Out rounding: a finite reference may round to an infinity of a 16-bit Out.
        double const tol = acc + rel * (std::fabs(r) + acc) + half_subnormal_step<Out>();
        ok = std::isfinite(got) ? std::fabs(got - r) <= tol : (got > 0) == (r > 0) && std::fabs(r) + tol >= max_finite<Out>();
      }
      if (!ok) {
        ++bad;
        UNSCOPED_INFO("y(" << i << ", " << j << ") = " << got << ", reference " << r << ", sum |x w| " << s);
      }
    }
  CHECK(bad == 0);

  // The same run again: identical bits.
  plan.run(ex, xv, yv, epi, wsv);
  auto y2 = download(dy.data(), std::size_t(n * ldy), ex);
  CHECK(std::memcmp(y_padded.data(), y2.data(), y2.size() * sizeof(Out)) == 0);
  return y;
}

template <class Policy, class T, class Out>
void check_policy(dense_matrix<T> const& w, std::int64_t n, unsigned seed, run_options o = {}, int br = 32, int bc = 32,
                  std::string const& what = "") {
  auto wt = make_tc_weights<Policy, T>(w, br, bc);
  auto x = random_matrix<T>(n, w.cols(), seed);
  check_against_reference<Policy, T, Out>(wt, w.rows(), w.cols(), x, o, what);
}

// W 257 x k, 95 % sparse, with rows 0..63 empty and a fully dense 64 x 64 block at (128, 64).
template <class T>
dense_matrix<T> empty_rows_full_block(std::int64_t k, unsigned seed, unsigned full_seed) {
  auto w = pruned<T>(257, k, 0.95, seed);
  for (std::int64_t i = 0; i < 64; ++i)
    for (std::int64_t j = 0; j < k; ++j) w(i, j) = T(0.f);
  auto full = random_matrix<T>(64, 64, full_seed);
  for (std::int64_t i = 0; i < 64; ++i)
    for (std::int64_t j = 0; j < 64; ++j) w(128 + i, 64 + j) = full(i, j);
  return w;
}

// W 40 x 48 holding T's largest and smallest normal values (+-big on the diagonal, tiny twice,
// big beside a tiny): outputs at the edge of T, and past it.
template <class T>
dense_matrix<T> extreme_weights() {
  float const big = std::is_same_v<T, bf16> ? 3.3895314e38f : 65504.f;
  float const tiny = std::is_same_v<T, bf16> ? 1.17549435e-38f : 6.1035156e-05f;
  dense_matrix<T> e(40, 48);
  for (auto& v : e.values()) v = T(0.f);
  e(0, 0) = T(big);
  e(1, 1) = T(-big);
  e(2, 2) = T(tiny);
  e(3, 3) = T(tiny);
  e(3, 4) = T(big);
  return e;
}

}  // namespace

TEMPLATE_TEST_CASE("tc_linear: every policy against the reference at odd sizes", "[cuda][tc][big]", bf16, fp16) {
  SDNN_REQUIRE_DEVICE();
  using T = TestType;
  // 4000 x 3000: no multiple of any tile; N = 1, 3, 17 (small shape, K split) and 200 (large shape).
  auto w90 = pruned<T>(4000, 3000, 0.9, 1);
  auto const dense_w = random_matrix<T>(4000, 3000, 2);
  auto w_blocks = train::prune_blocks_l2(dense_w.view(), 32, 32, 0.9);
  for (std::int64_t n : {1, 3, 17}) {
    check_policy<policy::tc_tile_offsets_mma, T, T>(w90, n, 10 + unsigned(n), {}, 32, 32, "tiles 90%");
    check_policy<policy::tc_block_sparse_mma, T, T>(w_blocks, n, 20 + unsigned(n), {}, 32, 32, "blocks 32x32 90%");
    check_policy<policy::tc_dense_mma, T, float>(w90, n, 30 + unsigned(n), {}, 32, 32, "dense");
  }
  auto w_small = pruned<T>(300, 520, 0.7, 3);
  auto const dense_small = random_matrix<T>(300, 520, 4);
  auto w_small_blocks = train::prune_blocks_l2(dense_small.view(), 32, 32, 0.75);
  for (std::int64_t n : {200, 1000}) {
    check_policy<policy::tc_tile_offsets_mma, T, float>(w_small, n, 40, {}, 32, 32, "tiles 70% large N");
    check_policy<policy::tc_block_sparse_mma, T, T>(w_small_blocks, n, 41, {}, 32, 32, "blocks large N");
    check_policy<policy::tc_dense_mma, T, T>(w_small, n, 42, {}, 32, 32, "dense large N");
  }
}

TEMPLATE_TEST_CASE("tc_linear: the direct block kernel on MLP-sized layers, every batch width, tails, epilogue",
                   "[cuda][tc]", bf16, fp16) {
  SDNN_REQUIRE_DEVICE();
  using T = TestType;
  // 1024 x 784 at 90 % (K = 24.5 blocks: a half block column), 80 x 100 (M and K tails), all N
  // widths of the three compiled shapes and their edges, T and float out, bias + ReLU + cap.
  auto const big = train::prune_blocks_l2(random_matrix<T>(1024, 784, 91u).view(), 32, 32, 0.9);
  auto const small = train::prune_blocks_l2(random_matrix<T>(80, 100, 92u).view(), 32, 32, 0.5);
  for (std::int64_t n : {1, 5, 8, 9, 32, 33, 130, 1024}) {
    run_options o;
    o.shape = policy::tc_shape::direct;
    check_policy<policy::tc_block_sparse_mma, T, T>(big, n, unsigned(n), o, 32, 32, "direct 1024x784");
    o.bias = o.relu = o.cap = true;
    check_policy<policy::tc_block_sparse_mma, T, float>(small, n, unsigned(n + 1), o, 32, 32, "direct 80x100");
    o.x_offset = 1;  // X not 4-byte aligned: element-wise X loads
    o.ldx_pad = 3;
    check_policy<policy::tc_block_sparse_mma, T, T>(small, n, unsigned(n + 2), o, 32, 32, "direct unaligned X");
  }
}

TEMPLATE_TEST_CASE("tc_linear: the direct block kernel on a block row of more than 32 blocks a warp group",
                   "[cuda][tc]", bf16, fp16) {
  SDNN_REQUIRE_DEVICE();
  using T = TestType;
  // K = 8480 (265 block columns, the last half full): block row 1 is dense, so each warp group of
  // every compiled shape takes 33 or more of its blocks; rows 0 and 2 keep one block column in 10,
  // row 2 (M = 80) is partial.
  auto w = random_matrix<T>(80, 8480, 93u);
  for (std::int64_t i = 0; i < w.rows(); ++i)
    for (std::int64_t j = 0; j < w.cols(); ++j)
      if (i / 32 != 1 && ((j / 32) * 7 + i / 32) % 10 != 0) w(i, j) = T(0.f);
  for (std::int64_t n : {1, 8, 20, 32, 40}) {
    run_options o;
    o.shape = policy::tc_shape::direct;
    check_policy<policy::tc_block_sparse_mma, T, T>(w, n, unsigned(n + 7), o, 32, 32, "direct long row");
  }
}

TEMPLATE_TEST_CASE("tc_linear: every block shape, both tile shapes, tails, unaligned X, epilogue", "[cuda][tc]", bf16,
                   fp16) {
  SDNN_REQUIRE_DEVICE();
  using T = TestType;
  for (int br : {16, 32, 64})
    for (int bc : {16, 32, 64}) {
      auto const dw = random_matrix<T>(150, 230, unsigned(br + bc));
      auto w = train::prune_blocks_l2(dw.view(), br, bc, 0.5);
      for (auto shape : {policy::tc_shape::small, policy::tc_shape::large, policy::tc_shape::stream,
                         policy::tc_shape::direct, policy::tc_shape::tiled}) {  // direct: 32 x 32 only, the others fall back
        run_options o;
        o.shape = shape;
        check_policy<policy::tc_block_sparse_mma, T, float>(w, 37, unsigned(br * bc), o, br, bc,
                                                            "blocks " + std::to_string(br) + "x" + std::to_string(bc));
      }
    }
  // K % 8 != 0 and an X that is not 16-byte aligned: the element-wise X path; M, N tails.
  auto w = pruned<T>(77, 131, 0.5, 5);
  for (auto shape : {policy::tc_shape::small, policy::tc_shape::large, policy::tc_shape::stream}) {
    run_options o;
    o.shape = shape;
    check_policy<policy::tc_tile_offsets_mma, T, T>(w, 33, 6, o, 32, 32, "tiles K=131");
    check_policy<policy::tc_dense_mma, T, T>(w, 33, 7, o, 32, 32, "dense K=131");
    o.x_offset = 3;
    o.ldx_pad = 5;
    check_policy<policy::tc_tile_offsets_mma, T, float>(w, 5, 8, o, 32, 32, "tiles unaligned X");
    check_policy<policy::tc_dense_mma, T, float>(w, 5, 9, o, 32, 32, "dense unaligned X");
  }
  // Bias per output feature, ReLU, cap; a caller-supplied workspace (split counters zeroed by run()).
  auto w2 = pruned<T>(1000, 512, 0.8, 11);
  run_options o;
  o.bias = o.relu = o.cap = true;
  o.caller_workspace = true;
  check_policy<policy::tc_tile_offsets_mma, T, T>(w2, 9, 12, o, 32, 32, "epilogue, caller workspace");
  check_policy<policy::tc_dense_mma, T, T>(w2, 9, 13, o, 32, 32, "epilogue, caller workspace");
}

TEMPLATE_TEST_CASE("tc_linear: the TMA block kernel, every block height, tails, epilogue, edge cases", "[cuda][tc][tma]",
                   bf16, fp16) {
  SDNN_REQUIRE_DEVICE();
  using T = TestType;
  bool const hopper = ::sdnn::detail::current_arch().sm() >= 90;
  // K = 232: 7 blocks and a quarter (columns past K read as zeros); M = 150: a partial block row;
  // N from 1 to past two 128-row tiles.
  for (int br : {16, 32, 64}) {
    auto const w = train::prune_blocks_l2(random_matrix<T>(150, 232, unsigned(br)).view(), br, 32, 0.6);
    for (std::int64_t n : {1, 37, 128, 129, 300}) {
      run_options o;
      o.shape = policy::tc_shape::tma;
      o.expect_tma = hopper ? 1 : 0;
      check_policy<policy::tc_block_sparse_mma, T, T>(w, n, unsigned(br + n), o, br, 32, "tma " + std::to_string(br));
      o.bias = o.relu = o.cap = true;
      check_policy<policy::tc_block_sparse_mma, T, float>(w, n, unsigned(br + n + 1), o, br, 32, "tma epilogue");
    }
    // Y with a row pitch of 160 (16-byte stores; a row's last piece is partial) and of 157 (no
    // 16-byte store: element by element); the padding must stay untouched.
    for (std::int64_t pad : {10, 7}) {
      run_options o;
      o.shape = policy::tc_shape::tma;
      o.expect_tma = hopper ? 1 : 0;
      o.ldy_pad = pad;
      o.bias = true;
      check_policy<policy::tc_block_sparse_mma, T, T>(w, 131, unsigned(br + pad), o, br, 32, "tma padded Y");
      check_policy<policy::tc_block_sparse_mma, T, float>(w, 131, unsigned(br + pad + 1), o, br, 32, "tma padded Y");
    }
    // X that no tensor map can read (not 16-byte aligned, a row pitch of 233): the tiled kernels
    // run (describe(n) cannot know X, so only the answer is checked).
    run_options o;
    o.shape = policy::tc_shape::tma;
    o.x_offset = 1;
    o.ldx_pad = 1;
    check_policy<policy::tc_block_sparse_mma, T, T>(w, 100, 7u, o, br, 32, "tma refused: unaligned X");
  }
  // 10 block rows of 32 (the third empty, the others with 0 to 3 blocks) over 121 tiles of 128 rows
  // of X (more thread blocks than an H100 holds at once), then over 129 tiles of 256, enough units
  // per SM for the wide tile (tuning: tma_wide_units_per_sm), whose tails end mid-tile.
  {
    auto w = train::prune_blocks_l2(random_matrix<T>(320, 96, 41u).view(), 32, 32, 0.6);
    for (std::int64_t r = 64; r < 96; ++r)
      for (std::int64_t c = 0; c < 96; ++c) w(r, c) = T(0.f);
    run_options o;
    o.shape = policy::tc_shape::tma;
    o.expect_tma = hopper ? 1 : 0;
    o.expect_tma_rows = hopper ? 128 : 0;
    check_policy<policy::tc_block_sparse_mma, T, T>(w, 15365, 42u, o, 32, 32, "tma many blocks");
    auto const t = policy::tc_tuning_for(::sdnn::detail::current_arch());
    bool const wide = hopper && 10 * 129 >= std::int64_t(t.tma_wide_units_per_sm) * ::sdnn::detail::sm_count() &&
                      t.tma_wide_units_per_sm > 0;
    o.expect_tma_rows = wide ? 256 : 0;
    o.bias = o.relu = true;
    check_policy<policy::tc_block_sparse_mma, T, float>(w, 32999, 43u, o, 32, 32, "tma many blocks, epilogue");
    check_policy<policy::tc_block_sparse_mma, T, T>(w, 32999, 44u, o, 32, 32, "tma many blocks, epilogue");
  }
  // Blocks 64 wide are not the TMA kernel's: the tiled kernels run.
  {
    auto const w = train::prune_blocks_l2(random_matrix<T>(128, 256, 3u).view(), 32, 64, 0.5);
    run_options o;
    o.shape = policy::tc_shape::tma;
    o.expect_tma = 0;
    check_policy<policy::tc_block_sparse_mma, T, T>(w, 140, 4u, o, 32, 64, "tma refused: 64 wide");
  }
  // Empty block rows (nothing to load: Y = epi(0)), a full block, an all-zero W, NaN and Inf in X.
  auto const w = empty_rows_full_block<T>(320, 31, 32);
  run_options o;
  o.shape = policy::tc_shape::tma;
  o.bias = true;
  o.expect_tma = hopper ? 1 : 0;
  check_policy<policy::tc_block_sparse_mma, T, T>(w, 200, 33, o, 32, 32, "tma empty rows, full block");
  dense_matrix<T> z(100, 96);
  for (auto& v : z.values()) v = T(0.f);
  check_policy<policy::tc_block_sparse_mma, T, float>(z, 130, 34, o, 64, 32, "tma zero W");
  auto wn = pruned<T>(90, 104, 0.7, 35);
  auto xn = random_matrix<T>(140, 104, 36);
  xn(0, 5) = T(std::numeric_limits<float>::quiet_NaN());
  xn(1, 50) = T(std::numeric_limits<float>::infinity());
  xn(130, 99) = T(-std::numeric_limits<float>::infinity());
  run_options on;
  on.shape = policy::tc_shape::tma;
  on.expect_tma = hopper ? 1 : 0;
  check_against_reference<policy::tc_block_sparse_mma, T, float>(make_tc_weights<policy::tc_block_sparse_mma>(wn, 32, 32),
                                                                 90, 104, xn, on, "tma NaN and Inf");
  // The largest and smallest normal weights: outputs at the edge of T, and past it (an infinity).
  auto const e = extreme_weights<T>();
  auto xe = random_matrix<T>(6, 48, 37, 0.5f, 1.f);
  check_against_reference<policy::tc_block_sparse_mma, T, T>(make_tc_weights<policy::tc_block_sparse_mma>(e, 32, 32), 40,
                                                             48, xe, on, "tma extreme values");
}

TEMPLATE_TEST_CASE("tc_linear: empty rows, empty and full blocks, zero matrix, extreme values, NaN and Inf",
                   "[cuda][tc]", bf16, fp16) {
  SDNN_REQUIRE_DEVICE();
  using T = TestType;
  // Rows 0..63 empty, a fully dense 64 x 64 block, the rest 95 % sparse.
  auto const w = empty_rows_full_block<T>(300, 21, 22);
  run_options ob;
  ob.bias = true;  // empty rows give the bias
  check_policy<policy::tc_tile_offsets_mma, T, T>(w, 19, 23, ob, 32, 32, "empty rows, full tile");
  check_policy<policy::tc_block_sparse_mma, T, T>(w, 19, 24, ob, 64, 64, "empty rows, full block");

  // An all-zero W: nothing stored, Y = epi(0) everywhere.
  dense_matrix<T> z(100, 80);
  for (auto& v : z.values()) v = T(0.f);
  check_policy<policy::tc_tile_offsets_mma, T, float>(z, 7, 25, ob, 32, 32, "zero W (tiles)");
  check_policy<policy::tc_block_sparse_mma, T, float>(z, 7, 26, ob, 16, 16, "zero W (blocks)");

  // Largest and smallest normal weights: products within float range, outputs at the edge of T.
  auto const e = extreme_weights<T>();
  auto xe = random_matrix<T>(6, 48, 27, 0.5f, 1.f);
  check_against_reference<policy::tc_tile_offsets_mma, T, T>(make_tc_weights<policy::tc_tile_offsets_mma>(e), 40, 48, xe);
  check_against_reference<policy::tc_block_sparse_mma, T, float>(make_tc_weights<policy::tc_block_sparse_mma>(e, 16, 16), 40,
                                                                 48, xe);
  check_against_reference<policy::tc_dense_mma, T, T>(make_tc_weights<policy::tc_dense_mma>(e), 40, 48, xe);

  // NaN and Inf in X spread as the reference says (through stored blocks and non-empty sub-tiles only).
  auto wn = pruned<T>(90, 100, 0.9, 28);
  auto xn = random_matrix<T>(4, 100, 29);
  xn(0, 5) = T(std::numeric_limits<float>::quiet_NaN());
  xn(1, 50) = T(std::numeric_limits<float>::infinity());
  xn(2, 99) = T(-std::numeric_limits<float>::infinity());
  check_against_reference<policy::tc_tile_offsets_mma, T, float>(make_tc_weights<policy::tc_tile_offsets_mma>(wn), 90, 100, xn);
  check_against_reference<policy::tc_block_sparse_mma, T, T>(make_tc_weights<policy::tc_block_sparse_mma>(wn, 16, 32), 90, 100, xn);
  check_against_reference<policy::tc_dense_mma, T, float>(make_tc_weights<policy::tc_dense_mma>(wn), 90, 100, xn);
}

TEST_CASE("tc_linear: refusals throw before any launch and write nothing", "[cuda][tc]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  auto ex = sg.exec();
  auto w = pruned<bf16>(64, 64, 0.5, 31);
  // A block shape that is not compiled, a tile shape that is not compiled.
  auto b8 = block_sparse_from_dense(w.view(), 8, 16);
  REQUIRE(has(error_text([&] { ops::tc_linear_plan<policy::tc_block_sparse_mma, bf16>(b8, ex); }),
              "blocks of 8 x 16 are not compiled"));
  auto t32 = tile_offsets_from_dense(w.view(), 32, 64);
  REQUIRE(has(error_text([&] { ops::tc_linear_plan<policy::tc_tile_offsets_mma, bf16>(t32, ex); }),
              "tiles of 32 x 64 are not compiled"));

  ops::tc_linear_plan<policy::tc_tile_offsets_mma, bf16> plan(tile_offsets_from_dense(w.view()), ex,
                                                               plan_options{8, true});
  buffer<bf16, device_space> dx(64 * 64, ex), dy(64 * 64, ex);
  SDNN_CUDA_CHECK(cudaMemsetAsync(dy.data(), 0x5a, dy.size() * 2, ex.stream));
  auto untouched = [&] {
    auto y = download(dy.data(), dy.size(), ex);
    for (auto v : y)
      if (v.bits != 0x5a5a) return false;
    return true;
  };
  dense_view<bf16 const> x{4, 64, 64, dx.data()};
  // Shapes that do not fit.
  REQUIRE(has(error_text([&] { plan.run(ex, dense_view<bf16 const>{4, 63, 64, dx.data()}, dense_view<bf16>{4, 64, 64, dy.data()}, epilogue_none<float>()); }),
              "X is 4 x 63 but W has 64 columns"));
  REQUIRE(has(error_text([&] { plan.run(ex, x, dense_view<bf16>{4, 65, 65, dy.data()}, epilogue_none<float>()); }),
              "Y must be 4 x 64, got 4 x 65"));
  // A misaligned Y; a batch larger than the workspace was sized for (a split needs it).
  REQUIRE(has(error_text([&] {
                plan.run(ex, x, dense_view<float>{4, 64, 64, reinterpret_cast<float*>(reinterpret_cast<char*>(dy.data()) + 2)},
                         epilogue_none<float>());
              }),
              "is not aligned to its 4-byte elements"));
  // A caller's workspace that is too small.
  if (plan.shape_for(4).workspace > 0)
    REQUIRE(has(error_text([&] { plan.run(ex, x, dense_view<bf16>{4, 64, 64, dy.data()}, epilogue_none<float>(), workspace{dx.data(), 16}); }),
                "workspace of 16 bytes"));
  REQUIRE(untouched());
}

TEST_CASE("tc_linear: one plan runs batches of several sizes in turn (split counters stay consistent)", "[cuda][tc]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  auto ex = sg.exec();
  auto w = pruned<bf16>(2000, 1024, 0.9, 41);
  auto t = tile_offsets_from_dense(w.view());
  ops::tc_linear_plan<policy::tc_tile_offsets_mma, bf16> plan(t, ex);
  for (std::int64_t n : {5, 30, 1, 100, 5}) {
    INFO(plan.describe(n));
    auto x = random_matrix<bf16>(n, 1024, unsigned(50 + n));
    auto dx = upload(std::vector<bf16>(x.values().begin(), x.values().end()), ex);
    buffer<float, device_space> dy(std::size_t(n * 2000), ex);
    plan.run(ex, dense_view<bf16 const>{n, 1024, 1024, dx.data()}, dense_view<float>{n, 2000, 2000, dy.data()},
             epilogue_none<float>());
    auto y = download(dy.data(), dy.size(), ex);
    dense_matrix<float> ref(n, 2000);
    reference::tc_linear(std::as_const(x).view(), t.view(), ref.view(), epilogue_none<float>());
    std::int64_t bad = 0;
    for (std::int64_t i = 0; i < n * 2000; ++i) {
      double const r = ref.values()[std::size_t(i)];
      if (!(std::fabs(y[std::size_t(i)] - r) <= 1e-3 * (1 + std::fabs(r)))) ++bad;  // |x|, |w| <= 1, K = 1024
    }
    CHECK(bad == 0);
  }
}
