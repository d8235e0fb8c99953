// vendor::cudnn_conv2d_nhwc<bf16 / fp16> (the cuDNN baseline of the 16-bit NHWC convolution) against
// the host reference reference::conv2d_nhwc on the same rounded inputs (reals in [-1, 1)).
// cuDNN sums in another order and may use Winograd / FFT / GEMM algorithms (float compute type),
// and rounds to T once (fused epilogue, bias rounded to T first) or twice (convolution output, then
// bias + ReLU). The bound per output, with a the reference's float value before rounding (bias
// and ReLU included), u the unit roundoff of T (bf16 2^-8, fp16 2^-11), and A = |bias| + sum |w||x|:
//   |y - a| <= 2u (|a| + |bias|) + 2^-12 A + 2^-24
// (2^-12 A covers any float summation order for R*S*C <= 4096, plus the transforms' float error;
// an algorithm that kept 16-bit intermediates would exceed it, and the failure names the algorithm).
// A pooled output is bounded by the largest bound of its 2x2 window. Outputs are poisoned (NaN)
// before each run. Also: the algorithm search runs once per (layer, batch, type, GPU).
#include "sdnn_gpu_test.cuh"
#include "sdnn_conv_fixtures.hpp"

#if defined(SDNN_HAS_CUDNN)

#include <sdnn/conv/nhwc.hpp>
#include <sdnn/conv/reference/conv2d_nhwc.hpp>
#include <sdnn/conv/vendor/cudnn16.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using namespace sdnn;
using namespace sdnn::conv;

namespace {
using sdnn_test::reals;
using sdnn_test::to_t;


struct layer_case {
  char const* name;
  conv_shape s;
  std::int64_t batch;
};

std::vector<layer_case> cases() {
  auto dil = conv_shape::conv2d(16, 12, 12, 32, 3, 3, 1, 2, 2);
  return {{"3x3 pad 1 stride 1, C 64, batch 1", conv_shape::conv2d(64, 16, 16, 64, 3, 3, 1, 1), 1},
          {"3x3 pad 1 stride 1, C 64, batch 3", conv_shape::conv2d(64, 16, 16, 64, 3, 3, 1, 1), 3},
          {"3x3 stride 2, odd 15x15, batch 3", conv_shape::conv2d(32, 15, 15, 64, 3, 3, 2, 1), 3},
          {"1x1, C 64, batch 3", conv_shape::conv2d(64, 14, 14, 32, 1, 1, 1, 0), 3},
          {"3x3 pad 1, odd 13x11, batch 1", conv_shape::conv2d(16, 13, 11, 16, 3, 3, 1, 1), 1},
          {"first VGG layer, C 3, batch 3", conv_shape::conv2d(3, 32, 32, 64, 3, 3, 1, 1), 3},
          {"3x3 dilation 2, batch 1", dil, 1}};
}

template <class T>
void check_layer(layer_case const& lc, bool relu, bool pool, bool with_bias, bool fuse, std::uint32_t seed) {
  auto const& s = lc.s;
  std::int64_t const batch = lc.batch, OH = s.OH(), OW = s.OW(), K = s.K;
  auto const x = to_t<T>(reals(static_cast<std::size_t>(batch * s.in_features()), seed));
  auto const f = to_t<T>(reals(static_cast<std::size_t>(s.weight_count()), seed + 1));
  std::vector<float> bias = with_bias ? reals(static_cast<std::size_t>(K), seed + 2) : std::vector<float>{};
  auto const wg = filter_to_gemm<T>(s, f.data());

  // The reference before rounding and pooling, and the bound of every output.
  auto const a = reference::conv2d_nhwc<T, float>(s, batch, x.data(), wg.view(), bias, relu, false);
  auto const X = im2col_nhwc(s, batch, x.data());
  double const u = std::is_same_v<T, bf16> ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  std::vector<double> tol(a.size());
  for (std::int64_t n = 0; n < X.rows(); ++n)
    for (std::int64_t ko = 0; ko < K; ++ko) {
      double const b = bias.empty() ? 0.0 : std::fabs(double(bias[static_cast<std::size_t>(ko)]));
      double A = b;
      for (std::int64_t k = 0; k < X.cols(); ++k) A += std::fabs(double(float(X(n, k))) * double(float(wg(ko, k))));
      std::size_t const i = static_cast<std::size_t>(n * K + ko);
      tol[i] = 2 * u * (std::fabs(double(a[i])) + b) + std::ldexp(A, -12) + std::ldexp(1.0, -24);
    }
  std::vector<float> ref = a;
  if (pool) {
    ref = reference::conv2d_nhwc<T, float>(s, batch, x.data(), wg.view(), bias, relu, true);
    std::int64_t const PH = OH / 2, PW = OW / 2;
    std::vector<double> pt(ref.size());
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t ph = 0; ph < PH; ++ph)
        for (std::int64_t pw = 0; pw < PW; ++pw)
          for (std::int64_t ko = 0; ko < K; ++ko) {
            double m = 0;
            for (int dy = 0; dy < 2; ++dy)
              for (int dx = 0; dx < 2; ++dx)
                m = std::max(m, tol[static_cast<std::size_t>(((b * OH + 2 * ph + dy) * OW + 2 * pw + dx) * K + ko)]);
            pt[static_cast<std::size_t>(((b * PH + ph) * PW + pw) * K + ko)] = m;
          }
    tol = pt;
  }

  sdnn_test::stream_guard sg;
  auto const ex = sg.exec();
  vendor::cudnn_conv16_options opt;
  opt.fuse = fuse;
  vendor::cudnn_conv2d_nhwc<T> plan(s, batch, wg.view(), bias, relu, pool, ex, opt);
  INFO(lc.name << ", relu " << relu << ", pool " << pool << ", bias " << with_bias << ", fuse " << fuse << ": "
                << plan.describe() << (plan.fusion_note().empty() ? "" : "; ") << plan.fusion_note());
  REQUIRE(plan.y_elements() == static_cast<std::int64_t>(ref.size()));
  REQUIRE(plan.x_elements() == static_cast<std::int64_t>(x.size()));
  if (!relu || !fuse) REQUIRE_FALSE(plan.fused());
  auto const dx = sdnn_test::upload(x, ex);
  device_buffer<T> dy(ref.size(), ex);
  SDNN_CUDA_CHECK(cudaMemsetAsync(dy.data(), 0xFF, dy.size() * sizeof(T), ex.stream));  // NaN
  plan.run(ex, dx.data(), dy.data());
  auto const y = sdnn_test::download(dy.data(), dy.size(), ex);
  std::size_t bad = 0, first = 0;
  double worst = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    double const e = std::fabs(double(float(y[i])) - double(ref[i]));
    if (!(e <= tol[i])) {  // NaN fails
      if (bad++ == 0) first = i;
    }
    if (tol[i] > 0) worst = std::max(worst, e / tol[i]);
  }
  INFO("outputs over the bound: " << bad << " of " << ref.size() << "; first at " << first << ": got "
                                  << float(y[first]) << ", reference " << ref[first] << ", bound " << tol[first]
                                  << "; largest error / bound " << worst);
  REQUIRE(bad == 0);
}

template <class T>
void check_all() {
  std::uint32_t seed = 100;
  for (auto const& lc : cases()) {
    check_layer<T>(lc, true, false, true, true, seed++);    // conv + bias + ReLU, fused where cuDNN can
    check_layer<T>(lc, true, false, true, false, seed++);   // the same through the separate pass
    check_layer<T>(lc, false, false, false, true, seed++);  // the convolution alone
    check_layer<T>(lc, false, false, true, true, seed++);   // bias, no ReLU
    if (lc.s.OH() >= 2 && lc.s.OW() >= 2) {
      check_layer<T>(lc, true, true, true, true, seed++);   // + 2x2 max-pool
      check_layer<T>(lc, true, true, true, false, seed++);
    }
  }
}
}  // namespace

TEST_CASE("cudnn_conv2d_nhwc<bf16> matches the host reference within the stated bound", "[cuda][conv16]") {
  SDNN_REQUIRE_DEVICE();
  check_all<bf16>();
}

TEST_CASE("cudnn_conv2d_nhwc<fp16> matches the host reference within the stated bound", "[cuda][conv16]") {
  SDNN_REQUIRE_DEVICE();
  check_all<fp16>();
}

TEST_CASE("cudnn_conv2d_nhwc searches once per (layer, batch, type, GPU) and refuses bad input before cuDNN",
          "[cuda][conv16]") {
  SDNN_REQUIRE_DEVICE();
  auto const s = conv_shape::conv2d(32, 10, 10, 32, 3, 3, 1, 1);
  auto const f = to_t<bf16>(reals(static_cast<std::size_t>(s.weight_count()), 5));
  auto const wg = filter_to_gemm<bf16>(s, f.data());
  sdnn_test::stream_guard sg;
  auto const ex = sg.exec();
  vendor::cudnn_conv16_cache_clear();
  std::int64_t const before = vendor::cudnn_conv16_searches();
  vendor::cudnn_conv2d_nhwc<bf16> p1(s, 2, wg.view(), {}, true, false, ex);
  REQUIRE(p1.searched());
  REQUIRE(vendor::cudnn_conv16_searches() == before + 1);
  vendor::cudnn_conv2d_nhwc<bf16> p2(s, 2, wg.view(), {}, true, false, ex);  // same key: the cached choice
  REQUIRE_FALSE(p2.searched());
  REQUIRE(vendor::cudnn_conv16_searches() == before + 1);
  REQUIRE(p2.algorithm() == p1.algorithm());
  REQUIRE(p2.math_type() == p1.math_type());
  vendor::cudnn_conv2d_nhwc<bf16> p3(s, 3, wg.view(), {}, true, false, ex);  // another batch: a search
  REQUIRE(p3.searched());
  auto const wh = filter_to_gemm<fp16>(s, f.data());
  vendor::cudnn_conv2d_nhwc<fp16> p4(s, 2, wh.view(), {}, true, false, ex);  // another type: a search
  REQUIRE(p4.searched());
  REQUIRE(vendor::cudnn_conv16_searches() == before + 3);

  // Refusals, all before any cuDNN call.
  dense_matrix<bf16> wrong(s.K, 10);
  REQUIRE_THROWS_AS(vendor::cudnn_conv2d_nhwc<bf16>(s, 2, wrong.view(), {}, true, false, ex), sdnn::dimension_mismatch);
  REQUIRE_THROWS_AS(vendor::cudnn_conv2d_nhwc<bf16>(s, 2, wg.view(), std::vector<float>(3), true, false, ex),
                    sdnn::dimension_mismatch);
  REQUIRE_THROWS_AS(vendor::cudnn_conv2d_nhwc<bf16>(s, 0, wg.view(), {}, true, false, ex), sdnn::error);
  auto const one = conv_shape::conv2d(32, 3, 3, 32, 3, 3, 1, 0);  // 1 x 1 output: no 2x2 pool
  REQUIRE_FALSE(vendor::cudnn_conv2d_nhwc<bf16>::can_implement(one, 1, true).ok());
  REQUIRE(vendor::cudnn_conv2d_nhwc<bf16>::can_implement(one, 1, false).ok());
  auto const huge = conv_shape::conv2d(1, 1024, 1024, 4096, 1, 1);  // output batch*OH*OW*K > INT32_MAX
  REQUIRE_FALSE(vendor::cudnn_conv2d_nhwc<bf16>::can_implement(huge, 1, false).ok());
  // A caller-owned workspace: the plan made without one refuses a run without one.
  vendor::cudnn_conv16_options opt;
  opt.own_workspace = false;
  vendor::cudnn_conv2d_nhwc<bf16> p5(s, 2, wg.view(), {}, true, true, ex, opt);
  REQUIRE(p5.workspace_bytes() > 0);  // the pool's intermediate at least
  device_buffer<bf16> dx(static_cast<std::size_t>(p5.x_elements()), ex), dy(static_cast<std::size_t>(p5.y_elements()), ex);
  REQUIRE_THROWS_AS(p5.run(ex, dx.data(), dy.data()), sdnn::error);
  device_buffer<unsigned char> ws(p5.workspace_bytes(), ex);
  SDNN_CUDA_CHECK(cudaMemsetAsync(dx.data(), 0, dx.size() * sizeof(bf16), ex.stream));
  p5.run(ex, dx.data(), dy.data(), workspace{ws.data(), ws.size()});
  auto const y = sdnn_test::download(dy.data(), dy.size(), ex);
  for (auto v : y) REQUIRE(float(v) == 0.0f);  // relu(conv(0)) with no bias
}

#else
TEST_CASE("cudnn_conv2d_nhwc: not built (no cuDNN)", "[cuda][conv16]") { WARN("built without cuDNN: nothing to test"); }
#endif  // SDNN_HAS_CUDNN
