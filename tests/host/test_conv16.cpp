// The NHWC implicit-GEMM view of a convolution, host side: layout conversions, the GEMM view of a
// filter, the 16-bit reference convolution (against an explicit im2col GEMM and the NCHW double
// oracle), channel-block / 2:4 / whole-filter pruning and their formats, and the int32 extent check.
// Small-integer data compare exactly (==); real-valued data compare exactly where the arithmetic
// is the same sequence of float operations (the im2col GEMM), as stated at each check.
#include "sdnn_catch.hpp"
#include "sdnn_conv_fixtures.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/conv/filter_removal.hpp>
#include <sdnn/conv/gemm_weights.hpp>
#include <sdnn/conv/nhwc.hpp>
#include <sdnn/conv/reference/conv2d_nhwc.hpp>
#include <sdnn/conv/reference/convolution.hpp>
#include <sdnn/core/numeric.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

using namespace sdnn;
using namespace sdnn::conv;

namespace {
using sdnn_test::reals;
using sdnn_test::to_t;
using sdnn_test::to_f;
using sdnn_test::has;
using sdnn_test::small_ints;

template <class T>
std::uint16_t bits_of(T v) {
  std::uint16_t b;
  std::memcpy(&b, &v, 2);
  return b;
}

// The layers of the tests: 3x3 pad 1 stride 1, stride 2, 1x1, dilation 2, odd H/W, C = 3.
std::vector<conv_shape> layers() {
  conv_shape dil = conv_shape::conv2d(4, 9, 8, 5, 3, 3, 1, 2, 2);
  conv_shape asym = conv_shape::conv2d(6, 7, 10, 3, 3, 2, 1, 1);
  asym.stride_h = 2;
  asym.pad_w = 0;
  asym.check();
  return {conv_shape::conv2d(3, 8, 8, 8, 3, 3, 1, 1),  conv_shape::conv2d(8, 9, 7, 4, 3, 3, 2, 1),
          conv_shape::conv2d(16, 5, 6, 8, 1, 1, 1, 0), conv_shape::conv2d(5, 7, 5, 6, 3, 3, 1, 0), dil, asym};
}

// A plain GEMM over the explicit im2col: y(n, ko) = sum_k X(n, k) * Wg(ko, k), k ascending, + bias, ReLU.
template <class T>
std::vector<float> im2col_gemm(conv_shape const& s, std::int64_t batch, std::vector<T> const& x,
                               dense_matrix<T> const& wg, std::vector<float> const& bias, bool relu) {
  auto const X = im2col_nhwc(s, batch, x.data());
  std::vector<float> y(static_cast<std::size_t>(X.rows() * s.K));
  for (std::int64_t n = 0; n < X.rows(); ++n)
    for (std::int64_t ko = 0; ko < s.K; ++ko) {
      float a = 0.0f;
      for (std::int64_t k = 0; k < X.cols(); ++k) {
        float const xv = static_cast<float>(X(n, k));
        if (xv == 0.0f) continue;  // the reference skips outside taps: +-0 products leave the sum unchanged
        a += static_cast<float>(wg(ko, k)) * xv;
      }
      if (!bias.empty()) a += bias[static_cast<std::size_t>(ko)];
      if (relu && a < 0.0f) a = 0.0f;
      y[static_cast<std::size_t>(n * s.K + ko)] = a;
    }
  return y;
}

template <class T>
void check_reference_against_im2col(conv_shape const& s, std::int64_t batch, std::uint32_t seed) {
  auto const x = to_t<T>(reals(static_cast<std::size_t>(batch * s.in_features()), seed));
  auto const f = to_t<T>(reals(static_cast<std::size_t>(s.weight_count()), seed + 1));
  auto const bias = reals(static_cast<std::size_t>(s.K), seed + 2);
  auto const wg = filter_to_gemm<T>(s, f.data());
  for (bool relu : {false, true}) {
    auto const ref = reference::conv2d_nhwc<T, float>(s, batch, x.data(), wg.view(), bias, relu, false);
    auto const gem = im2col_gemm(s, batch, x, wg, bias, relu);
    REQUIRE(ref.size() == gem.size());
    for (std::size_t i = 0; i < ref.size(); ++i) REQUIRE(ref[i] == gem[i]);  // the same float operations
    // Out = T rounds the float result once.
    auto const rt = reference::conv2d_nhwc<T, T>(s, batch, x.data(), wg.view(), bias, relu, false);
    for (std::size_t i = 0; i < ref.size(); ++i) REQUIRE(bits_of(rt[i]) == bits_of(T(ref[i])));
  }
}
}  // namespace

TEST_CASE("conv16: NCHW <-> NHWC and filter <-> GEMM view round trips", "[conv16][nhwc]") {
  std::int64_t const B = 2, C = 3, H = 4, W = 5;
  auto const x = small_ints(static_cast<std::size_t>(B * C * H * W), -9, 9, 1);
  auto const xh = nchw_to_nhwc(x.data(), B, C, H, W);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t w = 0; w < W; ++w)
          REQUIRE(xh[static_cast<std::size_t>(((b * H + h) * W + w) * C + c)] ==
                  x[static_cast<std::size_t>(((b * C + c) * H + h) * W + w)]);
  REQUIRE(nhwc_to_nchw(xh.data(), B, C, H, W) == x);

  auto const s = conv_shape::conv2d(3, 6, 6, 5, 3, 2, 1, 1);
  auto const f = to_t<bf16>(small_ints(static_cast<std::size_t>(s.weight_count()), -50, 50, 2));
  auto const wg = filter_to_gemm<bf16>(s, f.data());
  REQUIRE(wg.rows() == 5);
  REQUIRE(wg.cols() == 3 * 2 * 3);
  for (int ko = 0; ko < s.K; ++ko)
    for (int c = 0; c < s.C; ++c)
      for (int r = 0; r < s.R; ++r)
        for (int q = 0; q < s.S; ++q)
          REQUIRE(bits_of(wg(ko, (r * s.S + q) * s.C + c)) ==
                  bits_of(f[static_cast<std::size_t>(((ko * s.C + c) * s.R + r) * s.S + q)]));
  auto const back = gemm_to_filter(s, wg.view());
  for (std::size_t i = 0; i < f.size(); ++i) REQUIRE(bits_of(back[i]) == bits_of(f[i]));
  // float filter -> bf16 GEMM view rounds each value once.
  auto const ff = reals(static_cast<std::size_t>(s.weight_count()), 3);
  auto const wgr = filter_to_gemm<fp16>(s, ff.data());
  REQUIRE(bits_of(wgr(1, 2 * s.C + 1)) == bits_of(fp16(ff[static_cast<std::size_t>(((1 * s.C + 1) * s.R + 0) * s.S + 2)])));
  REQUIRE_THROWS_AS(gemm_to_filter(conv_shape::conv2d(3, 6, 6, 4, 3, 2, 1, 1), wg.view()), sdnn::dimension_mismatch);
}

TEST_CASE("conv16: the reference equals a plain GEMM over the explicit im2col (float, bf16, fp16)", "[conv16][reference]") {
  std::uint32_t seed = 10;
  for (auto const& s : layers())
    for (std::int64_t batch : {1, 3}) {
      INFO("C " << s.C << " " << s.H << "x" << s.W << " K " << s.K << " " << s.R << "x" << s.S << " stride "
                << s.stride_h << "x" << s.stride_w << " pad " << s.pad_h << "x" << s.pad_w << " dil " << s.dil_h
                << " batch " << batch);
      check_reference_against_im2col<float>(s, batch, seed);
      check_reference_against_im2col<bf16>(s, batch, seed + 10);
      check_reference_against_im2col<fp16>(s, batch, seed + 20);
      seed += 3;
    }
}

TEST_CASE("conv16: the reference equals the NCHW double oracle on small integers, pool included", "[conv16][reference]") {
  std::uint32_t seed = 40;
  for (auto const& s : layers())
    for (std::int64_t batch : {1, 3}) {
      auto const x = small_ints(static_cast<std::size_t>(batch * s.in_features()), -3, 3, seed);
      auto const f = small_ints(static_cast<std::size_t>(s.weight_count()), -3, 3, seed + 1);
      auto const bias = small_ints(static_cast<std::size_t>(s.K), -20, 20, seed + 2);
      seed += 3;
      auto const oracle = conv_reference(s, batch, x.data(), f.data(), bias.data(), true);  // NCHW, double
      auto const xh = to_t<bf16>(nchw_to_nhwc(x.data(), batch, s.C, s.H, s.W));
      auto const wg = filter_to_gemm<bf16>(s, f.data());
      // |sums| <= 9*3*3*16 + 20 < 256: exact in bf16 (8 significant bits) once |y| < 256.
      auto const y = reference::conv2d_nhwc<bf16, float>(s, batch, xh.data(), wg.view(), bias, true, false);
      std::int64_t const OH = s.OH(), OW = s.OW();
      for (std::int64_t b = 0; b < batch; ++b)
        for (std::int64_t k = 0; k < s.K; ++k)
          for (std::int64_t oh = 0; oh < OH; ++oh)
            for (std::int64_t ow = 0; ow < OW; ++ow)
              REQUIRE(double(y[static_cast<std::size_t>(((b * OH + oh) * OW + ow) * s.K + k)]) ==
                      oracle[static_cast<std::size_t>(((b * s.K + k) * OH + oh) * OW + ow)]);
      if (OH < 2 || OW < 2) continue;
      auto const p = reference::conv2d_nhwc<bf16, float>(s, batch, xh.data(), wg.view(), bias, true, true);
      std::int64_t const PH = OH / 2, PW = OW / 2;
      REQUIRE(p.size() == static_cast<std::size_t>(batch * PH * PW * s.K));
      for (std::int64_t b = 0; b < batch; ++b)
        for (std::int64_t ph = 0; ph < PH; ++ph)
          for (std::int64_t pw = 0; pw < PW; ++pw)
            for (std::int64_t k = 0; k < s.K; ++k) {
              float m = -1e30f;
              for (int dy = 0; dy < 2; ++dy)
                for (int dx = 0; dx < 2; ++dx)
                  m = std::max(m, y[static_cast<std::size_t>(((b * OH + 2 * ph + dy) * OW + 2 * pw + dx) * s.K + k)]);
              REQUIRE(p[static_cast<std::size_t>(((b * PH + ph) * PW + pw) * s.K + k)] == m);
            }
    }
  auto const s1 = conv_shape::conv2d(2, 3, 3, 2, 3, 3, 1, 0);  // 1 x 1 output: no 2x2 pool
  std::vector<float> x(18, 1.0f);
  auto const wg = filter_to_gemm<float>(s1, std::vector<float>(36, 1.0f).data());
  REQUIRE_THROWS_AS(reference::conv2d_nhwc<float>(s1, 1, x.data(), wg.view(), {}, false, true), sdnn::error);
  REQUIRE_THROWS_AS(reference::conv2d_nhwc<float>(s1, 1, x.data(), wg.view(), {1.0f}, false, false),
                    sdnn::dimension_mismatch);
}

TEST_CASE("conv16: channel-block pruning keeps the exact count of largest blocks and builds the GEMM blocks",
          "[conv16][prune]") {
  auto const s = conv_shape::conv2d(64, 6, 6, 64, 3, 3, 1, 1);
  auto const f = to_t<bf16>(reals(static_cast<std::size_t>(s.weight_count()), 7));
  auto const wg = filter_to_gemm<bf16>(s, f.data());
  for (int bko : {16, 32, 64})
    for (int bc : {16, 32, 64})
      for (double sp : {0.0, 0.3, 0.5, 0.75, 0.9, 1.0}) {
        INFO("blocks " << bko << " x " << bc << " sparsity " << sp);
        auto const p = prune_channel_blocks(s, wg.view(), bko, bc, sp);
        std::int64_t const nb = std::int64_t(s.K / bko) * (s.C / bc);
        REQUIRE(p.mask.blocks() == nb);
        REQUIRE(p.mask.kept_count() == std::max<std::int64_t>(1, std::llround((1.0 - sp) * double(nb))));
        // Every kept block's norm >= every dropped block's; entries kept as they were or zeroed.
        std::vector<double> norm(static_cast<std::size_t>(nb), 0.0);
        for (std::int64_t r = 0; r < wg.rows(); ++r)
          for (std::int64_t k = 0; k < wg.cols(); ++k) {
            std::int64_t const i = r / bko, j = (k % s.C) / bc;
            double const v = double(float(wg(r, k)));
            norm[static_cast<std::size_t>(i * (s.C / bc) + j)] += v * v;
            bool const kept = p.mask.at(static_cast<std::int32_t>(i), static_cast<std::int32_t>(j));
            REQUIRE(bits_of(p.gemm(r, k)) == (kept ? bits_of(wg(r, k)) : bits_of(bf16(0.0f))));
          }
        double min_kept = 1e300, max_dropped = -1;
        for (std::int64_t b = 0; b < nb; ++b)
          (p.mask.kept[static_cast<std::size_t>(b)] ? min_kept : max_dropped) =
              p.mask.kept[static_cast<std::size_t>(b)] ? std::min(min_kept, norm[static_cast<std::size_t>(b)])
                                                       : std::max(max_dropped, norm[static_cast<std::size_t>(b)]);
        REQUIRE(min_kept >= max_dropped);
        // The format: R*S GEMM blocks per kept channel block, at block columns tap*(C/bc) + j.
        auto const bsr = channel_block_gemm_weights(s, p.gemm.view(), p.mask);
        validate(bsr);
        REQUIRE(bsr.block_rows() == bko);
        REQUIRE(bsr.block_cols() == bc);
        REQUIRE(bsr.nnzb() == p.mask.kept_count() * s.R * s.S);
        auto const v = bsr.view();
        for (std::int32_t i = 0; i < v.row_blocks(); ++i) {
          std::vector<std::int32_t> expect;
          for (int t = 0; t < s.R * s.S; ++t)
            for (std::int32_t j = 0; j < p.mask.col_blocks; ++j)
              if (p.mask.at(i, j)) expect.push_back(t * (s.C / bc) + j);
          std::vector<std::int32_t> got(v.col_idx + v.row_ptr[i], v.col_idx + v.row_ptr[i + 1]);
          REQUIRE(got == expect);
        }
        auto const dense = to_dense(bsr);
        for (std::int64_t r = 0; r < wg.rows(); ++r)
          for (std::int64_t k = 0; k < wg.cols(); ++k) REQUIRE(bits_of(dense(r, k)) == bits_of(p.gemm(r, k)));
        // The mask read off the pruned view is the pruning's mask (reals: no all-zero kept block).
        REQUIRE(channel_block_mask_of(s, p.gemm.view(), bko, bc).kept == p.mask.kept);
      }
}

TEST_CASE("conv16: channel-block ties go to the lower block index; refusals; the validator names a broken block",
          "[conv16][prune]") {
  auto const s = conv_shape::conv2d(32, 4, 4, 32, 3, 3, 1, 1);
  dense_matrix<fp16> ones(s.K, gemm_reduction(s));
  for (auto& v : ones.values()) v = fp16(1.0f);
  auto const p = prune_channel_blocks(s, ones.view(), 16, 16, 0.5);  // 4 equal blocks, keep 2: (0,0), (0,1)
  REQUIRE(p.mask.kept == std::vector<std::uint8_t>{1, 1, 0, 0});
  REQUIRE(prune_channel_blocks(s, ones.view(), 16, 16, 1.0).mask.kept == std::vector<std::uint8_t>{1, 0, 0, 0});

  // A zero filter keeps one block (at least one overall); its stored GEMM blocks hold zeros.
  dense_matrix<fp16> zeros(s.K, gemm_reduction(s));
  auto const pz = prune_channel_blocks(s, zeros.view(), 32, 32, 0.0);
  REQUIRE(pz.mask.kept_count() == 1);
  REQUIRE(channel_block_gemm_weights(s, pz.gemm.view(), pz.mask).nnzb() == 9);
  REQUIRE(channel_block_mask_of(s, zeros.view(), 32, 32).kept_count() == 0);

  auto const bad_c = conv_shape::conv2d(24, 4, 4, 32, 3, 3, 1, 1);
  dense_matrix<fp16> wc(bad_c.K, gemm_reduction(bad_c));
  {
    auto const e = sdnn_test::error_text([&] { prune_channel_blocks(bad_c, wc.view(), 16, 16, 0.5); });
    INFO(e);
    REQUIRE((has(e, "C = 24 input channels is not a multiple of BC = 16")));
  }
  auto const bad_k = conv_shape::conv2d(32, 4, 4, 48, 3, 3, 1, 1);
  dense_matrix<fp16> wk(bad_k.K, gemm_reduction(bad_k));
  {
    auto const e = sdnn_test::error_text([&] { prune_channel_blocks(bad_k, wk.view(), 32, 16, 0.5); });
    INFO(e);
    REQUIRE((has(e, "K = 48 output channels is not a multiple of BKo = 32")));
  }
  {
    auto const e = sdnn_test::error_text([&] { prune_channel_blocks(s, ones.view(), 8, 16, 0.5); });
    INFO(e);
    REQUIRE((has(e, "must be 16, 32 or 64")));
  }
  REQUIRE_THROWS_AS(prune_channel_blocks(s, ones.view(), 16, 16, 1.5), sdnn::error);
  dense_matrix<fp16> wrong(s.K, 9);
  REQUIRE_THROWS_AS(prune_channel_blocks(s, wrong.view(), 16, 16, 0.5), sdnn::dimension_mismatch);

  // One nonzero in a dropped block, at tap (2, 1), channel 20 of output channel 17: block (1, 1).
  auto broken = prune_channel_blocks(s, ones.view(), 16, 16, 0.5);
  validate_channel_blocks(s, broken.gemm.view(), broken.mask);  // as pruned: has the structure
  broken.gemm(17, (2 * 3 + 1) * s.C + 20) = fp16(0.5f);
  {
    auto const e = sdnn_test::error_text([&] { validate_channel_blocks(s, broken.gemm.view(), broken.mask); });
    INFO(e);
    REQUIRE((has(e, "channel block (1, 1)") && has(e, "Wg(17, 244)") && has(e, "tap r = 2, s = 1, c = 20")));
  }
  {
    auto const e = sdnn_test::error_text([&] { channel_block_gemm_weights(s, broken.gemm.view(), broken.mask); });
    INFO(e);
    REQUIRE((has(e, "channel block (1, 1)")));
  }
  // -0 is zero for the structure.
  broken.gemm(17, (2 * 3 + 1) * s.C + 20) = fp16(-0.0f);
  validate_channel_blocks(s, broken.gemm.view(), broken.mask);
}

TEST_CASE("conv16: 2:4 pruning of the GEMM view keeps the 2 largest of every 4 consecutive k", "[conv16][prune]") {
  for (auto const& s : {conv_shape::conv2d(8, 5, 5, 6, 3, 3, 1, 1), conv_shape::conv2d(3, 5, 5, 4, 3, 3, 1, 1)}) {
    auto const f = to_t<bf16>(reals(static_cast<std::size_t>(s.weight_count()), 21));
    auto const wg = filter_to_gemm<bf16>(s, f.data());
    auto const pruned = prune_gemm_sparse24(s, wg.view());
    for (std::int64_t r = 0; r < wg.rows(); ++r)
      for (std::int64_t g0 = 0; g0 < wg.cols(); g0 += 4) {
        std::int64_t const n = std::min<std::int64_t>(4, wg.cols() - g0);
        int kept = 0;
        float min_kept = 1e30f, max_dropped = -1.0f;
        for (std::int64_t i = 0; i < n; ++i) {
          float const a = std::fabs(float(wg(r, g0 + i)));
          if (bits_of(pruned(r, g0 + i)) == bits_of(wg(r, g0 + i)) && a != 0.0f) {
            ++kept;
            min_kept = std::min(min_kept, a);
          } else {
            REQUIRE(float(pruned(r, g0 + i)) == 0.0f);
            max_dropped = std::max(max_dropped, a);
          }
        }
        REQUIRE(kept == std::min<std::int64_t>(2, n));
        REQUIRE(min_kept >= max_dropped);
      }
    auto const w24 = gemm_sparse24_weights(s, wg.view());  // sparse24_from_dense accepts it
    w24.validate();
    auto const d = to_dense(w24);
    for (std::int64_t r = 0; r < wg.rows(); ++r)
      for (std::int64_t k = 0; k < wg.cols(); ++k) REQUIRE(bits_of(d(r, k)) == bits_of(pruned(r, k)));
  }
  // Ties: the lower positions win.
  auto const s = conv_shape::conv2d(4, 3, 3, 1, 1, 1);
  dense_matrix<float> w(1, 4);
  w(0, 0) = 1; w(0, 1) = -2; w(0, 2) = 2; w(0, 3) = -1;
  auto const p = prune_gemm_sparse24(s, w.view());
  REQUIRE((p(0, 0) == 0 && p(0, 1) == -2 && p(0, 2) == 2 && p(0, 3) == 0));
  w(0, 0) = 1; w(0, 1) = 1; w(0, 2) = -1; w(0, 3) = 1;
  auto const q = prune_gemm_sparse24(s, w.view());
  REQUIRE((q(0, 0) == 1 && q(0, 1) == 1 && q(0, 2) == 0 && q(0, 3) == 0));
  w(0, 2) = std::nanf("");
  {
    auto const e = sdnn_test::error_text([&] { prune_gemm_sparse24(s, w.view()); });
    INFO(e);
    REQUIRE((has(e, "Wg(0, 2) is NaN")));
  }
}

TEST_CASE("conv16: filter removal gives a smaller dense layer equal to the pruned full one", "[conv16][prune]") {
  auto const s = conv_shape::conv2d(12, 7, 6, 10, 3, 3, 1, 1);
  std::int64_t const batch = 2;
  auto const f = to_t<bf16>(reals(static_cast<std::size_t>(s.weight_count()), 31));
  auto const x = to_t<bf16>(reals(static_cast<std::size_t>(batch * s.in_features()), 32));
  auto const bias = reals(static_cast<std::size_t>(s.K), 33);
  auto const cf = prune_filters(f.data(), s, 0.6, 0.75);
  REQUIRE(cf.kept_out.size() == 6);
  REQUIRE(cf.kept_in.size() == 9);
  REQUIRE(std::is_sorted(cf.kept_out.begin(), cf.kept_out.end()));
  REQUIRE(std::is_sorted(cf.kept_in.begin(), cf.kept_in.end()));
  REQUIRE((cf.shape.K == 6 && cf.shape.C == 9 && cf.shape.H == s.H && cf.shape.R == s.R));
  REQUIRE(cf.filter.size() == static_cast<std::size_t>(cf.shape.weight_count()));
  // Kept input channels have the largest norms over all filters; kept filters over the kept inputs.
  auto norm_in = [&](std::int64_t c) {
    double n = 0;
    for (std::int64_t k = 0; k < s.K; ++k)
      for (int t = 0; t < 9; ++t) n += std::pow(double(float(f[static_cast<std::size_t>((k * s.C + c) * 9 + t)])), 2);
    return n;
  };
  double min_in = 1e300, max_out = -1;
  for (std::int64_t c = 0; c < s.C; ++c) {
    bool const kept = std::count(cf.kept_in.begin(), cf.kept_in.end(), c) == 1;
    (kept ? min_in : max_out) = kept ? std::min(min_in, norm_in(c)) : std::max(max_out, norm_in(c));
  }
  REQUIRE(min_in >= max_out);

  // compact: gather x, conv with the compact filter and gathered bias, scatter == full conv with the
  // expanded filter and the removed filters' biases zeroed (exactly: the same float operations,
  // skipped channels contributing +-0 products).
  auto full_bias = bias;
  for (int k = 0; k < s.K; ++k)
    if (!std::count(cf.kept_out.begin(), cf.kept_out.end(), k)) full_bias[static_cast<std::size_t>(k)] = 0.0f;
  auto const full_f = expand_filter(cf);
  auto const full_wg = filter_to_gemm<bf16>(s, full_f.data());
  for (bool pool : {false, true}) {
    auto const ref = reference::conv2d_nhwc<bf16, float>(s, batch, x.data(), full_wg.view(), full_bias, true, pool);
    auto const xg = gather_channels_nhwc(x.data(), batch * s.H * s.W, s.C, cf.kept_in);
    auto const cwg = filter_to_gemm<bf16>(cf.shape, cf.filter.data());
    auto const yc = reference::conv2d_nhwc<bf16, float>(cf.shape, batch, xg.data(), cwg.view(), gather(bias, cf.kept_out),
                                                        true, pool);
    std::int64_t const pixels = static_cast<std::int64_t>(yc.size()) / cf.shape.K;
    auto const y = scatter_channels_nhwc(yc.data(), pixels, s.K, cf.kept_out);
    REQUIRE(y == ref);
  }
  REQUIRE_THROWS_AS(prune_filters(f.data(), s, 0.0, 1.0), sdnn::error);
  REQUIRE_THROWS_AS(gather_channels_nhwc(x.data(), 1, s.C, {3, 2}), sdnn::error);
}

TEST_CASE("conv16: filter removal over a stack: layer l's kept filters are layer l+1's inputs", "[conv16][prune]") {
  std::int64_t const batch = 2;
  std::vector<conv_shape> sh = {conv_shape::conv2d(3, 8, 8, 16, 3, 3, 1, 1), conv_shape::conv2d(16, 4, 4, 12, 3, 3, 1, 1),
                                conv_shape::conv2d(12, 4, 4, 8, 1, 1, 1, 0)};
  std::vector<std::vector<bf16>> fs;
  std::vector<std::vector<float>> bs;
  for (std::size_t l = 0; l < sh.size(); ++l) {
    fs.push_back(to_t<bf16>(reals(static_cast<std::size_t>(sh[l].weight_count()), 50 + std::uint32_t(l))));
    bs.push_back(reals(static_cast<std::size_t>(sh[l].K), 60 + std::uint32_t(l)));
  }
  auto const stack = prune_filter_stack(sh, fs, {0.5, 0.75, 1.0});
  REQUIRE(stack.size() == 3);
  REQUIRE(stack[0].kept_in.size() == 3);
  REQUIRE(stack[1].kept_in == stack[0].kept_out);
  REQUIRE(stack[2].kept_in == stack[1].kept_out);
  REQUIRE(stack[2].kept_out.size() == 8);
  // Full network (pruned filters, removed biases zeroed; pool after layer 0) vs the compact one.
  auto x = to_t<bf16>(reals(static_cast<std::size_t>(batch * sh[0].in_features()), 70));
  auto xf = x;
  auto xc = x;
  for (std::size_t l = 0; l < sh.size(); ++l) {
    bool const pool = l == 0;
    auto full_bias = bs[l];
    for (int k = 0; k < sh[l].K; ++k)
      if (!std::count(stack[l].kept_out.begin(), stack[l].kept_out.end(), k)) full_bias[static_cast<std::size_t>(k)] = 0;
    auto const ff = expand_filter(stack[l]);
    auto const yf = reference::conv2d_nhwc<bf16, bf16>(sh[l], batch, xf.data(), filter_to_gemm<bf16>(sh[l], ff.data()).view(),
                                                      full_bias, true, pool);
    auto const yc = reference::conv2d_nhwc<bf16, bf16>(stack[l].shape, batch, xc.data(),
                                                      filter_to_gemm<bf16>(stack[l].shape, stack[l].filter.data()).view(),
                                                      gather(bs[l], stack[l].kept_out), true, pool);
    xf = yf;
    xc = yc;
  }
  std::int64_t const pixels = static_cast<std::int64_t>(xc.size()) / sh.back().K;
  auto const y = scatter_channels_nhwc(xc.data(), pixels, sh.back().K, stack.back().kept_out);
  REQUIRE(y.size() == xf.size());
  for (std::size_t i = 0; i < y.size(); ++i) REQUIRE(bits_of(y[i]) == bits_of(xf[i]));
  std::vector<conv_shape> bad = {sh[0], sh[2]};
  REQUIRE_THROWS_AS(prune_filter_stack(bad, std::vector<std::vector<bf16>>{fs[0], fs[2]}, {0.5, 1.0}),
                    sdnn::dimension_mismatch);
}

TEST_CASE("conv16: the implicit-GEMM extent check refuses int32 overflows, naming the numbers", "[conv16][nhwc]") {
  check_implicit_gemm_extents(conv_shape::conv2d(64, 224, 224, 64, 3, 3, 1, 1), 32);
  {
    auto const e = sdnn_test::error_text([&] { check_implicit_gemm_extents(conv_shape::conv2d(1, 1024, 1024, 1, 3, 3, 1, 1), 3000); });
    INFO(e);
    REQUIRE((has(e, "batch*OH*OW = 3000*1024*1024")));
  }
  {
    auto const e = sdnn_test::error_text([&] { check_implicit_gemm_extents(conv_shape::conv2d(1, 1024, 1024, 4096, 1, 1), 1); });
    INFO(e);
    REQUIRE((has(e, "batch*OH*OW*K = 1*1024*1024*4096")));
  }
  {
    auto const e = sdnn_test::error_text([&] { check_implicit_gemm_extents(conv_shape::conv2d(64, 1024, 1024, 1, 1, 1, 2, 0), 64); });
    INFO(e);
    REQUIRE((has(e, "batch*H*W*C = 64*1024*1024*64")));
  }
  {
    auto const e = sdnn_test::error_text([&] { check_implicit_gemm_extents(conv_shape::conv2d(3, 8, 8, 4, 3, 3), std::int64_t(1) << 62); });
    INFO(e);
    REQUIRE((has(e, "exceed INT32_MAX")));
  }
  REQUIRE_THROWS_AS(check_implicit_gemm_extents(conv_shape::conv2d(3, 8, 8, 4, 3, 3), 0), sdnn::error);
}

namespace {
// The logits of a stack of gemm_conv_layers (ReLU after each) and a classifier, through the float reference.
std::vector<float> stack_logits(std::vector<conv::gemm_conv_layer> const& convs, std::vector<float> const& cls,
                                std::int64_t classes, std::int64_t flat, std::int64_t batch, std::vector<float> x) {
  for (auto const& c : convs) {
    dense_view<float const> w{c.shape.K, c.shape.filter_size(), c.shape.filter_size(), c.w.data()};
    x = conv::reference::conv2d_nhwc<float>(c.shape, batch, x.data(), w, c.bias, true, c.pool);
  }
  REQUIRE(x.size() == std::size_t(batch * flat));
  std::vector<float> y(std::size_t(batch * classes));
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t o = 0; o < classes; ++o) {
      float a = 0.0f;
      for (std::int64_t j = 0; j < flat; ++j) a += cls[std::size_t(o * flat + j)] * x[std::size_t(b * flat + j)];
      y[std::size_t(b * classes + o)] = a;
    }
  return y;
}
}  // namespace

TEST_CASE("drop_dead_channels: removes dead and unread channels, and the logits stay the same", "[conv][prune]") {
  std::int64_t const batch = 2, classes = 3;
  std::vector<conv::gemm_conv_layer> convs;
  int C = 2, H = 10;
  std::uint32_t seed = 7;
  for (auto [K, pool] : {std::pair<int, bool>{6, true}, {5, false}, {4, true}}) {
    conv::gemm_conv_layer c;
    c.shape = conv::conv_shape::conv2d(C, H, H, K, 3, 3, 1, 1);
    c.pool = pool;
    c.w = reals(std::size_t(c.shape.weight_count()), seed++);
    c.bias = reals(std::size_t(K), seed++);
    convs.push_back(c);
    C = K;
    H = pool ? H / 2 : H;
  }
  std::int64_t const flat = std::int64_t(H) * H * C;
  auto cls = reals(std::size_t(classes * flat), seed++);
  auto zero_filter = [&](std::size_t l, int k) {
    auto& c = convs[l];
    std::fill(c.w.begin() + k * c.shape.filter_size(), c.w.begin() + (k + 1) * c.shape.filter_size(), 0.0f);
    c.bias[std::size_t(k)] = 0.0f;
  };
  zero_filter(0, 1);
  zero_filter(0, 4);
  zero_filter(1, 0);
  convs[1].bias[3] = 0.0f;  // a zero bias alone keeps the channel
  for (int o = 0; o < 4; ++o)  // layer 2 never reads layer 1's channel 2
    for (int t = 0; t < 9; ++t) convs[2].w[std::size_t(o * convs[2].shape.filter_size() + t * 5 + 2)] = 0.0f;
  for (std::int64_t o = 0; o < classes; ++o)  // the classifier never reads layer 2's channel 3
    for (std::int64_t p = 0; p < H * H; ++p) cls[std::size_t(o * flat + p * 4 + 3)] = 0.0f;

  auto const c = conv::drop_dead_channels(convs, cls, classes);
  CHECK(c.kept[0] == std::vector<std::int32_t>{0, 2, 3, 5});
  CHECK(c.kept[1] == std::vector<std::int32_t>{1, 3, 4});
  CHECK(c.kept[2] == std::vector<std::int32_t>{0, 1, 2});
  CHECK(c.convs[1].shape.C == 4);
  CHECK(c.convs[2].shape.C == 3);
  CHECK(c.flat == H * H * 3);
  auto const x = reals(std::size_t(batch * 10 * 10 * 2), 99);
  auto const a = stack_logits(convs, cls, classes, flat, batch, x);
  auto const b = stack_logits(c.convs, c.classifier, classes, c.flat, batch, x);
  // only products with an exact zero are gone, and adding +-0 leaves a float sum as it is
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == b[i]);

  // bad input
  auto bad = convs;
  bad[1].w.pop_back();
  CHECK(has(sdnn_test::error_text([&] { conv::drop_dead_channels(bad, cls, classes); }), "weights"));
  bad = convs;
  bad[2].shape.C = 4;
  bad[2].w.resize(std::size_t(bad[2].shape.weight_count()));
  CHECK(has(sdnn_test::error_text([&] { conv::drop_dead_channels(bad, cls, classes); }), "reads"));
  CHECK(has(sdnn_test::error_text([&] { conv::drop_dead_channels(convs, std::vector<float>(5), classes); }),
            "classifier"));
}
