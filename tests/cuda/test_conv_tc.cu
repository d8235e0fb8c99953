// The tensor-core convolution (implicit GEMM over NHWC) on the device: every weight format (2:4
// filters through sparse24_conv_plan included), both value types and both output types against the
// host reference, which builds the im2col matrix
// explicitly (conv::im2col_nhwc) and runs the linear reference on it (the same rounded inputs, sums
// in float). Odd channel counts (the element-wise gather), stride, padding, dilation, 1x1, batch 1
// and 3, K not a multiple of any tile, an empty-block filter; identical bits on a second run;
// refusals. The direct kernel of first layers (small_c_conv_plan) against the same reference.
#include "sdnn_gpu_test.cuh"
#include "sdnn_tc_fixtures.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/conv/nhwc.hpp>
#include <sdnn/conv/op/small_c_conv.cuh>
#include <sdnn/conv/op/sparse24_conv.cuh>
#include <sdnn/conv/op/tc_conv.cuh>
#include <sdnn/formats/block_sparse.hpp>
#include <sdnn/formats/tile_offsets.hpp>
#include <sdnn/linear/reference/tc_linear.hpp>
#include <sdnn/train/op/prune_sparse24.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace sdnn;
using sdnn_test::download;
using sdnn_test::error_text;
using sdnn_test::stream_guard;
using sdnn_test::upload;

namespace {

// Filter GEMM view K x R*S*C with random values; keep: the fraction of (output block x input
// block) channel blocks kept for every tap (1: dense), bk x bc channels a block.
template <class T>
dense_matrix<T> random_filter(conv::conv_shape const& s, unsigned seed, double keep = 1.0, int bk = 32, int bc = 32) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f), pick(0.f, 1.f);
  int const kb = (s.K + bk - 1) / bk, cb = (s.C + bc - 1) / bc;
  std::vector<char> kept(std::size_t(kb) * cb);
  for (auto& k : kept) k = pick(rng) < keep;
  dense_matrix<T> w(s.K, s.filter_size());
  for (int ko = 0; ko < s.K; ++ko)
    for (int tap = 0; tap < s.R * s.S; ++tap)
      for (int c = 0; c < s.C; ++c)
        w(ko, std::int64_t(tap) * s.C + c) = kept[std::size_t(ko / bk) * cb + c / bc] ? T(u(rng)) : T(0.f);
  return w;
}

// Runs a plan (made by make(exec)) on a random NHWC input and checks every output against the
// reference:
//   |y - ref| <= 4 K u S + 2^-p (|ref| + 4 K u S) + 2^-24,   S = sum_k |x_nk w_mk|, u = 2^-24,
// K = R*S*C: both sides add the same exact float products in different orders (each within
// K u S of the exact sum, a factor 4 of margin for truncating tensor-core adds), then one
// rounding to Out (2^-p relative; the inputs are in [-1, 1], so outputs stay normal or are
// within 2^-24 of zero). Returns Y's bits.
template <class T, class Out, class MakePlan>
std::vector<Out> check_conv_with(char const* name, MakePlan&& make, conv::conv_shape const& s, std::int64_t batch,
                                 dense_matrix<T> const& wg, unsigned seed, bool bias_relu, int x_offset) {
  INFO(name << " C=" << s.C << " H=" << s.H << " W=" << s.W << " K=" << s.K << " R=" << s.R << " S=" << s.S
                    << " stride " << s.stride_h << " pad " << s.pad_h << " dil " << s.dil_h << " batch " << batch);
  stream_guard sg;
  auto ex = sg.exec();
  std::int64_t const in_count = batch * s.H * s.W * s.C, n = batch * s.OH() * s.OW(), m = s.K;
  auto hx = sdnn_test::random_vector<T>(in_count, seed);
  std::vector<T> padded(std::size_t(in_count + x_offset + 8), T(0.f));
  std::copy(hx.begin(), hx.end(), padded.begin() + x_offset);
  auto dx = upload(padded, ex);
  std::vector<float> hb(static_cast<std::size_t>(m));
  for (std::int64_t i = 0; i < m; ++i) hb[std::size_t(i)] = 0.25f * float(i % 5) - 0.5f;
  auto db = upload(hb, ex);
  basic_epilogue<float> epi, epi_host;
  if (bias_relu) {
    epi.bias = db.data();
    epi_host.bias = hb.data();
    epi.relu = epi_host.relu = true;
  }
  auto const plan = make(ex);
  INFO(plan.describe(batch));
  buffer<Out, device_space> dy(std::size_t(std::max<std::int64_t>(n * m, 1)), ex);
  SDNN_CUDA_CHECK(cudaMemsetAsync(dy.data(), 0xff, dy.size() * sizeof(Out), ex.stream));  // NaN in every type
  plan.run(ex, dx.data() + x_offset, batch, dy.data(), epi);
  auto y = download(dy.data(), std::size_t(n * m), ex);

  auto const a = conv::im2col_nhwc(s, batch, hx.data());
  dense_matrix<float> ref(n, m);
  reference::tc_linear(a.view(), wg.view(), ref.view(), epi_host);
  double const u = std::ldexp(1.0, -24), rel = std::ldexp(1.0, -sdnn_test::out_bits<Out>());
  std::int64_t const k = s.filter_size();
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < n && bad < 5; ++i)
    for (std::int64_t j = 0; j < m && bad < 5; ++j) {
      double sum = 0;
      for (std::int64_t q = 0; q < k; ++q) sum += std::fabs(double(float(a(i, q))) * double(float(wg(j, q))));
      double const r = ref(i, j), got = double(static_cast<float>(y[std::size_t(i * m + j)]));
      double const acc = 4.0 * double(k) * u * sum;
      if (!(std::fabs(got - r) <= acc + rel * (std::fabs(r) + acc) + u)) {
        ++bad;
        UNSCOPED_INFO("y(" << i << ", " << j << ") = " << got << ", reference " << r << ", sum |x w| " << sum);
      }
    }
  CHECK(bad == 0);
  plan.run(ex, dx.data() + x_offset, batch, dy.data(), epi);
  auto y2 = download(dy.data(), std::size_t(n * m), ex);
  CHECK(std::memcmp(y.data(), y2.data(), y.size() * sizeof(Out)) == 0);
  return y;
}

template <class Policy, class T, class Out>
std::vector<Out> check_conv(conv::conv_shape const& s, std::int64_t batch, dense_matrix<T> const& wg, unsigned seed,
                            bool bias_relu, int br = 32, int bc = 32, int x_offset = 0,
                            policy::tc_shape tiles = policy::tc_shape::automatic) {
  auto make = [&](cuda_exec ex) {
    return ops::tc_conv_plan<Policy, T>(s, sdnn_test::make_tc_weights<Policy, T>(wg, br, bc), ex, plan_options{}, tiles);
  };
  return check_conv_with<T, Out>(Policy::name, make, s, batch, wg, seed, bias_relu, x_offset);
}

// The same for a filter pruned 2:4 along R*S*C (wg: its GEMM view, dense): sparse24_conv_plan.
template <class T, class Out, class Policy = policy::sparse24_auto>
std::vector<Out> check_conv24(conv::conv_shape const& s, std::int64_t batch, dense_matrix<T> const& wg, unsigned seed,
                              bool bias_relu, int x_offset = 0) {
  auto make = [&](cuda_exec ex) {
    return ops::sparse24_conv_plan<T, Out, Policy>(s, sparse24_from_dense(wg.view()), ex);
  };
  return check_conv_with<T, Out>("sparse24", make, s, batch, wg, seed, bias_relu, x_offset);
}

// A random filter pruned 2:4 by magnitude along its GEMM view's rows, as a dense matrix.
template <class T>
dense_matrix<T> random_filter24(conv::conv_shape const& s, unsigned seed) {
  auto const w = random_filter<T>(s, seed);
  return to_dense(ops::prune_sparse24(w.view()));
}

// A layer of the shape lists below and its batch.
struct layer {
  conv::conv_shape s;
  std::int64_t batch;
};

}  // namespace

TEMPLATE_TEST_CASE("tc_conv: every weight format against the im2col reference, odd shapes", "[cuda][tc_conv]", bf16,
                   fp16) {
  using T = TestType;
  std::vector<layer> const layers = {
      {conv::conv_shape::conv2d(32, 9, 7, 40, 3, 3, 1, 1), 3},     // 3x3 pad 1, K not a tile multiple, odd H and W
      {conv::conv_shape::conv2d(64, 12, 10, 64, 3, 3, 2, 0), 1},   // stride 2, no padding
      {conv::conv_shape::conv2d(64, 7, 7, 96, 1, 1), 2},           // 1x1
      {conv::conv_shape::conv2d(16, 11, 13, 24, 3, 3, 1, 2, 2), 2}, // dilation 2, padding 2, C < BK (pieces cross taps)
      {conv::conv_shape::conv2d(12, 8, 9, 20, 3, 3, 1, 1), 2},     // C % 8 != 0: the element-wise gather
      {conv::conv_shape::conv2d(3, 15, 15, 16, 3, 3, 1, 1), 1},    // C = 3 (a first layer)
      {conv::conv_shape::conv2d(32, 5, 5, 32, 5, 5, 1, 2), 1},     // 5x5, batch 1: few pixels (the small tile)
  };
  unsigned seed = 11;
  for (auto const& l : layers) {
    auto const wd = random_filter<T>(l.s, seed++);
    check_conv<policy::tc_dense_mma, T, T>(l.s, l.batch, wd, seed++, true);
    check_conv<policy::tc_dense_mma, T, float>(l.s, l.batch, wd, seed++, false);
    auto const wb = random_filter<T>(l.s, seed++, 0.4, 32, 32);  // about 60 % of the channel blocks empty
    check_conv<policy::tc_block_sparse_mma, T, T>(l.s, l.batch, wb, seed++, true, 32, 32);
    check_conv<policy::tc_block_sparse_mma, T, T>(l.s, l.batch, wb, seed++, true, 16, 16);
    check_conv<policy::tc_tile_offsets_mma, T, T>(l.s, l.batch, wb, seed++, true);
    auto const w24 = random_filter24<T>(l.s, seed++);
    check_conv24<T, T>(l.s, l.batch, w24, seed++, true);
    check_conv24<T, float>(l.s, l.batch, w24, seed++, false);
  }
}

TEMPLATE_TEST_CASE("tc_conv: the TMA block kernel through im2col tensor maps, odd shapes", "[cuda][tc_conv][tma]", bf16,
                   fp16) {
  using T = TestType;
  // C a multiple of 32 (a block's 32 columns in one tap), the rest as odd as the tiled cases.
  std::vector<layer> const layers = {
      {conv::conv_shape::conv2d(32, 9, 7, 40, 3, 3, 1, 1), 3},      // 3x3 pad 1, K not a block multiple, odd H and W
      {conv::conv_shape::conv2d(64, 12, 10, 64, 3, 3, 2, 0), 1},    // stride 2, no padding
      {conv::conv_shape::conv2d(64, 13, 11, 48, 3, 3, 2, 1), 2},    // stride 2, padding 1, odd H and W
      {conv::conv_shape::conv2d(64, 7, 7, 96, 1, 1), 2},            // 1x1
      {conv::conv_shape::conv2d(32, 11, 13, 24, 3, 3, 1, 2, 2), 2},  // dilation 2, padding 2
      {conv::conv_shape::conv2d(64, 14, 14, 64, 3, 3, 1, 1), 5},    // 128-pixel tiles across images
      {conv::conv_shape::conv2d(32, 5, 5, 32, 5, 5, 1, 2), 1},      // 5x5, batch 1
      {conv::conv_shape::conv2d(64, 20, 37, 64, 3, 3, 1, 0), 2},    // 3x3 unpadded, tiles across rows and images
  };
  unsigned seed = 71;
  for (auto const& l : layers) {
    auto const wb = random_filter<T>(l.s, seed++, 0.4, 32, 32);
    check_conv<policy::tc_block_sparse_mma, T, T>(l.s, l.batch, wb, seed++, true, 32, 32, 0, policy::tc_shape::tma);
    check_conv<policy::tc_block_sparse_mma, T, float>(l.s, l.batch, wb, seed++, false, 32, 32, 0,
                                                      policy::tc_shape::tma);
    auto const w64 = random_filter<T>(l.s, seed++, 0.5, 64, 32);
    check_conv<policy::tc_block_sparse_mma, T, T>(l.s, l.batch, w64, seed++, true, 64, 32, 0, policy::tc_shape::tma);
    check_conv<policy::tc_block_sparse_mma, T, T>(l.s, l.batch, w64, seed++, true, 16, 32, 0, policy::tc_shape::tma);
    // An input no tensor map can read (not 16-byte aligned): the tiled kernels, the same answer.
    check_conv<policy::tc_block_sparse_mma, T, T>(l.s, l.batch, wb, seed++, true, 32, 32, 1, policy::tc_shape::tma);
    // A kept channel block whose centre tap is zero (not stored): the other taps' blocks alone.
    dense_matrix<T> wz(wb.rows(), wb.cols());
    std::copy(wb.values().begin(), wb.values().end(), wz.values().begin());
    for (int k = 0; k < l.s.K; ++k)
      for (int c = 0; c < l.s.C; ++c) wz(k, std::int64_t(l.s.R * l.s.S / 2) * l.s.C + c) = T(0.f);
    check_conv<policy::tc_block_sparse_mma, T, T>(l.s, l.batch, wz, seed++, true, 32, 32, 0, policy::tc_shape::tma);
  }
  // 450 tiles of 128 pixels x 2 block rows: more thread blocks than an H100 holds at once; the
  // second block row is empty (its outputs are the epilogue of 0).
  auto const big = conv::conv_shape::conv2d(32, 30, 30, 64, 3, 3, 1, 1);
  auto wbig = random_filter<T>(big, seed++);
  for (int k = 32; k < 64; ++k)
    for (std::int64_t c = 0; c < big.filter_size(); ++c) wbig(k, c) = T(0.f);
  check_conv<policy::tc_block_sparse_mma, T, T>(big, 64, wbig, seed++, true, 32, 32, 0, policy::tc_shape::tma);
  check_conv<policy::tc_block_sparse_mma, T, float>(big, 64, wbig, seed++, false, 16, 32, 0, policy::tc_shape::tma);
  // 150 images: 528 tiles of 256 pixels x 2 block rows, enough units per SM for the wide tile
  // (tuning: tma_wide_units_per_sm); its boxes cross rows and images, the last ends mid-tile.
  check_conv<policy::tc_block_sparse_mma, T, T>(big, 150, wbig, seed++, true, 32, 32, 0, policy::tc_shape::tma);
  stream_guard sg;
  auto ex = sg.exec();
  ops::tc_conv_plan<policy::tc_block_sparse_mma, T> plan(
      big, sdnn_test::make_tc_weights<policy::tc_block_sparse_mma, T>(wbig, 32, 32), ex, plan_options{},
      policy::tc_shape::tma);
  auto const t = policy::tc_tuning_for(detail::current_arch());
  bool const wide = detail::current_arch().sm() >= 90 && t.tma_wide_units_per_sm > 0 &&
                    2 * 528 >= std::int64_t(t.tma_wide_units_per_sm) * detail::sm_count();
  INFO(plan.describe(150));
  CHECK((plan.describe(150).find(" x 256 rows a block") != std::string::npos) == wide);
}

namespace {
// The 2x2 pool fused into the TMA block kernel (tc_conv_plan::run_pool2x2) against run() followed
// by the pool on the host (the fmaxf tree of conv::detail::nhwc_max_pool2x2): the same bits, and
// again on a second run. Both outputs start as NaN, so a pooled value never written shows.
// wide_units: for a case meant for the 256-row tile, its thread blocks at 256 rows a tile; the
// plan must take that tile exactly where the tuning table says (as for the unpooled kernel).
template <class T, class Out>
void check_pool_fused(conv::conv_shape const& s, std::int64_t batch, dense_matrix<T> const& wg, unsigned seed,
                      bool bias_relu, int br = 32, std::int64_t wide_units = 0) {
  INFO("pool: C=" << s.C << " H=" << s.H << " W=" << s.W << " K=" << s.K << " R=" << s.R << " stride " << s.stride_h
                  << " pad " << s.pad_h << " dil " << s.dil_h << " batch " << batch << " blocks " << br << " x 32");
  stream_guard sg;
  auto ex = sg.exec();
  ops::tc_conv_plan<policy::tc_block_sparse_mma, T> plan(
      s, sdnn_test::make_tc_weights<policy::tc_block_sparse_mma, T>(wg, br, 32), ex, plan_options{},
      policy::tc_shape::tma);
  INFO(plan.describe(batch));
  bool const sm90 = detail::current_arch().sm() >= 90;
  REQUIRE(plan.fuses_pool2x2(batch) == sm90);
  if (!sm90) return;
  if (wide_units > 0) {
    auto const t = policy::tc_tuning_for(detail::current_arch());
    bool const wide =
        t.tma_wide_units_per_sm > 0 && wide_units >= std::int64_t(t.tma_wide_units_per_sm) * detail::sm_count();
    CHECK((plan.describe(batch).find(" x 256 rows a block") != std::string::npos) == wide);
  }
  int const OH = s.OH(), OW = s.OW(), PH = OH / 2, PW = OW / 2;
  std::int64_t const n = batch * OH * OW, pooled = batch * PH * PW;
  auto dx = upload(sdnn_test::random_vector<T>(batch * s.H * s.W * s.C, seed), ex);
  std::vector<float> hb(std::size_t(s.K));
  for (int i = 0; i < s.K; ++i) hb[std::size_t(i)] = 0.25f * float(i % 5) - 0.5f;
  auto db = upload(hb, ex);
  basic_epilogue<float> epi;
  if (bias_relu) {
    epi.bias = db.data();
    epi.relu = true;
  }
  buffer<Out, device_space> dy(std::size_t(n * s.K), ex), dp(std::size_t(std::max<std::int64_t>(pooled, 1) * s.K), ex);
  SDNN_CUDA_CHECK(cudaMemsetAsync(dy.data(), 0xff, dy.size() * sizeof(Out), ex.stream));
  SDNN_CUDA_CHECK(cudaMemsetAsync(dp.data(), 0xff, dp.size() * sizeof(Out), ex.stream));
  plan.run(ex, dx.data(), batch, dy.data(), epi);
  plan.run_pool2x2(ex, dx.data(), batch, dp.data(), epi);
  auto const y = download(dy.data(), std::size_t(n * s.K), ex);
  auto const got = download(dp.data(), std::size_t(pooled * s.K), ex);
  std::vector<Out> want(got.size());
  for (std::int64_t b = 0; b < batch; ++b)
    for (int ph = 0; ph < PH; ++ph)
      for (int pw = 0; pw < PW; ++pw)
        for (int k = 0; k < s.K; ++k) {
          auto at = [&](int dr, int dw) {
            return float(y[std::size_t(((b * OH + 2 * ph + dr) * OW + 2 * pw + dw) * s.K + k)]);
          };
          float const m = std::fmax(std::fmax(at(0, 0), at(0, 1)), std::fmax(at(1, 0), at(1, 1)));
          want[std::size_t(((b * PH + ph) * PW + pw) * s.K + k)] = Out(m);
        }
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < got.size() && bad < 5; ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(Out)) != 0) {
      ++bad;
      UNSCOPED_INFO("pooled[" << i << "] = " << float(got[i]) << ", run() then the pool " << float(want[i]));
    }
  CHECK(bad == 0);
  plan.run_pool2x2(ex, dx.data(), batch, dp.data(), epi);
  auto const again = download(dp.data(), got.size(), ex);
  CHECK(std::memcmp(got.data(), again.data(), got.size() * sizeof(Out)) == 0);
}
}  // namespace

TEMPLATE_TEST_CASE("tc_conv: the 2x2 max-pool fused into the TMA block kernel, odd shapes", "[cuda][tc_conv][tma][pool]",
                   bf16, fp16) {
  using T = TestType;
  std::vector<layer> const layers = {
      {conv::conv_shape::conv2d(32, 20, 150, 64, 3, 3, 1, 1), 1},   // row pairs in three tiles, the last 22 wide
      {conv::conv_shape::conv2d(64, 14, 14, 64, 3, 3, 1, 1), 5},    // four row pairs a tile, the last tile three
      {conv::conv_shape::conv2d(32, 9, 7, 40, 3, 3, 1, 1), 3},      // odd H and W (a row and a column dropped), K tail
      {conv::conv_shape::conv2d(64, 12, 10, 64, 3, 3, 2, 0), 1},    // stride 2, no padding, batch 1
      {conv::conv_shape::conv2d(32, 11, 13, 24, 3, 3, 1, 2, 2), 2},  // dilation 2, padding 2
      {conv::conv_shape::conv2d(32, 8, 64, 32, 3, 3, 1, 1), 2},     // one row pair fills the tile exactly
      {conv::conv_shape::conv2d(32, 6, 65, 32, 3, 3, 1, 1), 2},     // split, the second tile only the dropped column
      {conv::conv_shape::conv2d(64, 7, 7, 96, 1, 1), 2},            // 1x1
  };
  unsigned seed = 301;
  for (auto const& l : layers) {
    auto const wb = random_filter<T>(l.s, seed++, 0.4, 32, 32);
    check_conv<policy::tc_block_sparse_mma, T, T>(l.s, l.batch, wb, seed++, true, 32, 32, 0, policy::tc_shape::tma);
    check_pool_fused<T, T>(l.s, l.batch, wb, seed++, true);
    check_pool_fused<T, float>(l.s, l.batch, wb, seed++, false);
    auto const w64 = random_filter<T>(l.s, seed++, 0.5, 64, 32);
    check_pool_fused<T, T>(l.s, l.batch, w64, seed++, true, 64);
    check_pool_fused<T, T>(l.s, l.batch, w64, seed++, true, 16);
  }
  // The wide tile (256 rows, taken at this many units on an H100: 2 block rows x 528 and x 560
  // tiles): whole rows (four row pairs of 30 pixels a tile), and split rows (two boxes of 128
  // pixels, 224 wide).
  auto const big = conv::conv_shape::conv2d(32, 30, 30, 64, 3, 3, 1, 1);
  check_pool_fused<T, T>(big, 150, random_filter<T>(big, seed++, 0.5, 32, 32), seed++, true, 32, 2 * 528);
  auto const wide = conv::conv_shape::conv2d(32, 4, 224, 64, 3, 3, 1, 1);
  check_pool_fused<T, T>(wide, 160, random_filter<T>(wide, seed++, 0.5, 32, 32), seed++, true, 32, 2 * 560);

  // Refused before any launch where the kernel cannot pool: an input a tensor map cannot read.
  stream_guard sg;
  auto ex = sg.exec();
  auto const s = layers[1].s;
  ops::tc_conv_plan<policy::tc_block_sparse_mma, T> plan(
      s, sdnn_test::make_tc_weights<policy::tc_block_sparse_mma, T>(random_filter<T>(s, seed++, 0.5), 32, 32), ex,
      plan_options{}, policy::tc_shape::tma);
  device_buffer<T> x(std::size_t(5 * s.H * s.W * s.C + 8), ex), y(std::size_t(5 * 7 * 7 * s.K), ex);
  CHECK_FALSE(plan.fuses_pool2x2(5, x.data() + 1));
  CHECK(error_text([&] { plan.run_pool2x2(ex, x.data() + 1, 5, y.data(), basic_epilogue<float>{}); })
            .find("fused only into the TMA block kernel") != std::string::npos);
  plan.run_pool2x2(ex, x.data() + 1, 0, y.data(), basic_epilogue<float>{});  // an empty batch runs nothing
  ops::tc_conv_plan<policy::tc_block_sparse_mma, T> tiled(
      s, sdnn_test::make_tc_weights<policy::tc_block_sparse_mma, T>(random_filter<T>(s, seed++, 0.5), 32, 32), ex,
      plan_options{}, policy::tc_shape::tiled);
  CHECK_FALSE(tiled.fuses_pool2x2(5));
}

TEMPLATE_TEST_CASE("sparse24_conv: batches that run every tile, unaligned input, refusals", "[cuda][tc_conv]", bf16,
                   fp16) {
  using T = TestType;
  // 3x3 over 64 channels: 1, 4 and 40 images give 49 .. 1960 pixels (the n8 .. large tiles).
  auto const s = conv::conv_shape::conv2d(64, 7, 7, 72, 3, 3, 1, 1);
  auto const w = random_filter24<T>(s, 41);
  for (std::int64_t batch : {1, 4, 40}) check_conv24<T, T>(s, batch, w, 42 + unsigned(batch), true);
  check_conv24<T, T>(s, 3, w, 50, true, /*x_offset=*/3);  // unaligned input: the element-wise gather
  // Every output is exactly 0 for an all-zero (2:4) filter without bias.
  dense_matrix<T> z(s.K, s.filter_size());
  for (float v : check_conv24<T, float>(s, 2, z, 51, false)) REQUIRE(v == 0.f);

  stream_guard sg;
  auto ex = sg.exec();
  auto not24 = random_filter24<T>(s, 41);  // w again
  not24(5, 8) = T(1.f), not24(5, 9) = T(1.f), not24(5, 10) = T(1.f);  // three nonzeros in group 2 of row 5
  auto const msg = error_text([&] { ops::sparse24_conv_plan<T> p(s, sparse24_from_dense(not24.view()), ex); });
  CHECK(msg.find("row 5") != std::string::npos);
  auto const wrong = conv::conv_shape::conv2d(64, 7, 7, 72, 1, 1);
  CHECK(error_text([&] { ops::sparse24_conv_plan<T> p(wrong, sparse24_from_dense(w.view()), ex); })
            .find("K x R*S*C") != std::string::npos);
  ops::sparse24_conv_plan<T> plan(s, sparse24_from_dense(w.view()), ex);
  T* y = nullptr;
  CHECK(error_text([&] { plan.run(ex, static_cast<T const*>(nullptr), 2, y, {}); }).find("null") != std::string::npos);
  CHECK(error_text([&] { plan.run(ex, static_cast<T const*>(nullptr), std::int64_t(1) << 31, y, {}); })
            .find("2^31") != std::string::npos);
  plan.run(ex, static_cast<T const*>(nullptr), 0, y, {});  // an empty batch runs nothing
}

namespace {
// The warp-specialized 2:4 tiles on layers with C a multiple of 64 (a stage's 64 columns in one
// tap), where each reads the input through an im2col map; an unaligned input takes the same tile's
// gathering loaders, which must give the same bits. Each tile, then the automatic choice.
template <class T>
void check_ws_im2col(std::vector<layer> const& layers, unsigned seed) {
  if (!(policy::sparse24_wgmma_built && detail::current_arch() == arch{9, 0})) {
    WARN("skipped: the warp-specialized 2:4 tiles need an sm_90a build (SDNN_SPARSE24_WGMMA=1) on an sm_90 GPU");
    return;
  }
  for (auto const& l : layers) {
    auto const w = random_filter24<T>(l.s, seed++);
    check_conv24<T, T, policy::sparse24_tile_ws_n32>(l.s, l.batch, w, seed++, true);
    check_conv24<T, T, policy::sparse24_tile_ws_n64>(l.s, l.batch, w, seed++, true);
    check_conv24<T, float, policy::sparse24_tile_ws_n128>(l.s, l.batch, w, seed++, false);
    auto const y = check_conv24<T, T, policy::sparse24_tile_ws_m256_n128>(l.s, l.batch, w, seed, true);
    auto const yg = check_conv24<T, T, policy::sparse24_tile_ws_m256_n128>(l.s, l.batch, w, seed++, true, 1);
    REQUIRE(y.size() == yg.size());
    for (std::size_t i = 0; i < y.size(); ++i) REQUIRE(static_cast<float>(y[i]) == static_cast<float>(yg[i]));
    check_conv24<T, T>(l.s, l.batch, w, seed++, true);
  }
}
}  // namespace

TEMPLATE_TEST_CASE("sparse24_conv: the warp-specialized tiles through im2col tensor maps", "[cuda][tc_conv][tma][ws]",
                   bf16, fp16) {
  check_ws_im2col<TestType>({{conv::conv_shape::conv2d(64, 9, 7, 72, 3, 3, 1, 1), 3},   // K = 576: a padded step skipped
                             {conv::conv_shape::conv2d(64, 9, 9, 64, 1, 1, 2, 0), 2}},  // 1x1 stride 2
                            301);
}

TEMPLATE_TEST_CASE("tc_conv: the warp-specialized 2:4 tiles through im2col tensor maps, odd shapes",
                   "[cuda][tc_conv][tma][ws]", bf16, fp16) {
  check_ws_im2col<TestType>({
                                {conv::conv_shape::conv2d(128, 15, 15, 200, 3, 3, 2, 1), 2},   // stride 2, K not tiled
                                {conv::conv_shape::conv2d(64, 11, 13, 64, 3, 3, 1, 0), 2},     // unpadded, odd H, W
                                {conv::conv_shape::conv2d(64, 12, 12, 64, 3, 3, 1, 2, 2), 2},  // dilation 2, pad 2
                                {conv::conv_shape::conv2d(64, 10, 10, 96, 5, 5, 1, 2), 1},     // 5x5, batch 1
                                {conv::conv_shape::conv2d(192, 7, 7, 136, 1, 1), 3},           // 1x1, 3 x 64 channels
                                {conv::conv_shape::conv2d(64, 14, 14, 64, 3, 3, 1, 1), 7},     // 1372 pixels
                            },
                            331);
}

TEST_CASE("tc_conv: unaligned input, an all-zero filter, a VGG-like layer", "[cuda][tc_conv]") {
  auto const s = conv::conv_shape::conv2d(64, 14, 14, 128, 3, 3, 1, 1);
  auto const w = random_filter<bf16>(s, 5, 0.25, 32, 32);
  check_conv<policy::tc_block_sparse_mma, bf16, bf16>(s, 4, w, 6, true, 32, 32, /*x_offset=*/3);  // gather path
  check_conv<policy::tc_block_sparse_mma, bf16, bf16>(s, 4, w, 7, true, 64, 32);
  auto const z = random_filter<bf16>(s, 8, 0.0, 32, 32);
  auto const y = check_conv<policy::tc_block_sparse_mma, bf16, float>(s, 2, z, 9, false);
  for (float v : y) REQUIRE(v == 0.f);  // no stored block: every output is the (zero) epilogue of 0
}

TEST_CASE("tc_conv: refusals before any launch", "[cuda][tc_conv]") {
  stream_guard sg;
  auto ex = sg.exec();
  auto const s = conv::conv_shape::conv2d(16, 8, 8, 32, 3, 3, 1, 1);
  dense_matrix<bf16> wrong(32, 16 * 9 + 1);
  CHECK(error_text([&] { ops::tc_conv_plan<policy::tc_dense_mma, bf16> p(s, wrong, ex); }).find("K x R*S*C") !=
        std::string::npos);
  dense_matrix<bf16> w(32, 16 * 9);
  ops::tc_conv_plan<policy::tc_dense_mma, bf16> plan(s, w, ex);
  bf16* y = nullptr;
  CHECK(error_text([&] { plan.run(ex, static_cast<bf16 const*>(nullptr), 2, y, {}); }).find("null") != std::string::npos);
  CHECK(error_text([&] { plan.run(ex, static_cast<bf16 const*>(nullptr), std::int64_t(1) << 31, y, {}); })
            .find("2^31") != std::string::npos);
  plan.run(ex, static_cast<bf16 const*>(nullptr), 0, y, {});  // an empty batch runs nothing
}

// The direct kernel of short reductions (R*S*C <= 256: first layers) against the same reference.
template <class T, class Out>
std::vector<Out> check_small_c(conv::conv_shape const& s, std::int64_t batch, dense_matrix<T> const& wg, unsigned seed,
                               bool bias_relu, int x_offset = 0) {
  auto make = [&](cuda_exec ex) { return ops::small_c_conv_plan<T, Out>(s, std::as_const(wg).view(), ex); };
  return check_conv_with<T, Out>("small_c", make, s, batch, wg, seed, bias_relu, x_offset);
}

TEMPLATE_TEST_CASE("small_c_conv: first layers against the im2col reference, odd shapes", "[cuda][tc_conv][small_c]",
                   bf16, fp16) {
  using T = TestType;
  std::vector<layer> const layers = {
      {conv::conv_shape::conv2d(3, 17, 15, 64, 3, 3, 1, 1), 3},      // VGG's first layer, odd H and W, 765 pixels
      {conv::conv_shape::conv2d(3, 23, 23, 64, 7, 7, 2, 3), 2},      // ResNet's: 7x7 stride 2 pad 3, 147 in 10 steps
      {conv::conv_shape::conv2d(1, 13, 12, 8, 5, 5, 1, 2, 2), 1},    // C = 1, dilation 2, padding 2, one n-tile
      {conv::conv_shape::conv2d(5, 11, 9, 72, 3, 3, 2, 0), 2},       // stride 2 unpadded, K = 64 + 8: two chunks
      {conv::conv_shape::conv2d(16, 6, 7, 72, 4, 4, 1, 1), 1},       // R*S*C = 256: 16 steps
      {conv::conv_shape::conv2d(8, 7, 6, 136, 4, 4, 1, 1), 2},       // 8 steps, K = 2 x 64 + 8: three chunks
      {conv::conv_shape::conv2d(4, 9, 8, 16, 3, 3, 2, 1), 3},        // 36 in 3 steps: the last pair has one
      {conv::conv_shape::conv2d(3, 5, 4, 24, 1, 1), 1},              // 1x1: one step, mostly padding; 20 pixels
      {conv::conv_shape::conv2d(3, 1, 1, 16, 1, 1), 1},              // a single pixel
  };
  unsigned seed = 501;
  for (auto const& l : layers) {
    auto const w = random_filter<T>(l.s, seed++);
    check_small_c<T, T>(l.s, l.batch, w, seed++, true);
    check_small_c<T, float>(l.s, l.batch, w, seed++, false);
    check_small_c<T, T>(l.s, l.batch, w, seed++, false, /*x_offset=*/1);  // any input alignment
  }
}

TEST_CASE("small_c_conv: an output that is not 16-byte aligned, Inf and NaN, refusals", "[cuda][tc_conv][small_c]") {
  stream_guard sg;
  auto ex = sg.exec();
  auto const s = conv::conv_shape::conv2d(3, 9, 10, 64, 3, 3, 1, 1);
  std::int64_t const batch = 2, n = batch * s.OH() * s.OW();
  auto const w = random_filter<fp16>(s, 7);
  auto hx = sdnn_test::random_vector<fp16>(batch * s.H * s.W * s.C, 8);
  hx[std::size_t(((1 * s.H + 4) * s.W + 5) * s.C + 1)] = fp16(INFINITY);  // image 1, row 4, column 5, channel 1
  hx[std::size_t((0 * s.H + 0) * s.W * s.C + 2)] = fp16(NAN);              // image 0, row 0, column 0, channel 2
  auto dx = upload(hx, ex);
  ops::small_c_conv_plan<fp16, float> plan(s, std::as_const(w).view(), ex);
  buffer<float, device_space> dy(std::size_t(n * s.K + 1), ex);
  plan.run(ex, dx.data(), batch, dy.data(), {});
  auto const aligned = download(dy.data(), std::size_t(n * s.K), ex);
  plan.run(ex, dx.data(), batch, dy.data() + 1, {});  // 4-byte aligned: the element-wise stores
  auto const shifted = download(dy.data() + 1, std::size_t(n * s.K), ex);
  CHECK(std::memcmp(aligned.data(), shifted.data(), aligned.size() * sizeof(float)) == 0);
  // Non-finite inputs propagate as the host reference's float arithmetic has them: an output is
  // NaN exactly where the reference's is, +-Inf where it is; the rest within the finite bound.
  auto const a = conv::im2col_nhwc(s, batch, hx.data());
  dense_matrix<float> ref(n, s.K);
  reference::tc_linear(a.view(), w.view(), ref.view(), basic_epilogue<float>{});
  std::int64_t nan = 0, inf = 0, bad = 0;
  for (std::int64_t i = 0; i < n * s.K; ++i) {
    float const r = ref.values()[std::size_t(i)], got = aligned[std::size_t(i)];
    if (std::isnan(r)) ++nan, bad += !std::isnan(got);
    else if (std::isinf(r)) ++inf, bad += got != r;
    else bad += !(std::fabs(got - r) <= 1e-3f * (1.f + std::fabs(r)));
  }
  CHECK(bad == 0);
  CHECK(nan > 0);
  CHECK(inf > 0);

  dense_matrix<fp16> wrong(64, 3 * 9 + 1);
  CHECK(error_text([&] { ops::small_c_conv_plan<fp16> p(s, std::as_const(wrong).view(), ex); }).find("K x R*S*C") !=
        std::string::npos);
  auto const s_long = conv::conv_shape::conv2d(29, 8, 8, 16, 3, 3, 1, 1);  // R*S*C = 261
  dense_matrix<fp16> wl(s_long.K, s_long.filter_size());
  CHECK(error_text([&] { ops::small_c_conv_plan<fp16> p(s_long, std::as_const(wl).view(), ex); }).find("at most 256") !=
        std::string::npos);
  auto const s_k = conv::conv_shape::conv2d(3, 8, 8, 12, 3, 3, 1, 1);  // K = 12
  dense_matrix<fp16> wk(s_k.K, s_k.filter_size());
  CHECK(error_text([&] { ops::small_c_conv_plan<fp16> p(s_k, std::as_const(wk).view(), ex); }).find("multiple of 8") !=
        std::string::npos);
  ops::small_c_conv_plan<fp16> half_plan(s, std::as_const(w).view(), ex);
  fp16* y = nullptr;
  CHECK(error_text([&] { half_plan.run(ex, static_cast<fp16 const*>(nullptr), 2, y, {}); }).find("null") !=
        std::string::npos);
  CHECK(error_text([&] { half_plan.run(ex, static_cast<fp16 const*>(nullptr), std::int64_t(1) << 31, y, {}); })
            .find("2^31") != std::string::npos);
  half_plan.run(ex, static_cast<fp16 const*>(nullptr), 0, y, {});  // an empty batch runs nothing
}
