// The automatic 16-bit convolution on the device: every path it can choose (forced through the
// allowed mask; the 2:4 path on 2:4 filters, the direct kernel on a first layer) and its own choice against the host reference on the same rounded inputs, with
// bias, ReLU and the 2x2 pool; the choice, its reason and the process cache; refusals.
#include "sdnn_gpu_test.cuh"
#include "sdnn_tc_fixtures.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/conv/gemm_weights.hpp>
#include <sdnn/conv/op/conv16_auto.cuh>
#include <sdnn/conv/reference/conv2d_nhwc.hpp>
#include <sdnn/train/op/prune_sparse24.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

using namespace sdnn;
using sdnn_test::download;
using sdnn_test::error_text;
using sdnn_test::stream_guard;
using sdnn_test::upload;

namespace {

// Runs the plan and checks it against conv::reference::conv2d_nhwc (float, before rounding):
//   |y - a| <= 2u (|a| + b) + 2^-12 (A + b) + 2^-24,   b = max |bias|, A = sum |w||x|
// (largest in the pool window): one rounding to T, or two on the cuDNN path (its convolution
// output, then the bias), u = 2^-8 bf16 / 2^-11 fp16; 2^-12 A covers a float sum in any order of
// R*S*C <= 4096 terms.
template <class T>
std::string check(conv::conv_shape const& s, std::int64_t batch, dense_matrix<T> const& wg, bool pool, unsigned allowed,
                  unsigned seed) {
  stream_guard sg;
  auto ex = sg.exec();
  auto const hx = sdnn_test::random_vector<T>(batch * s.H * s.W * s.C, seed);
  std::vector<float> bias(static_cast<std::size_t>(s.K));
  for (int k = 0; k < s.K; ++k) bias[std::size_t(k)] = 0.125f * float(k % 5) - 0.25f;
  ops::conv16_auto_options opt;
  opt.allowed = allowed;
  opt.reps = 2;
  ops::conv16_auto_plan<T> plan(s, batch, std::as_const(wg).view(), bias, true, pool, ex, opt);
  INFO(plan.describe());
  auto dx = upload(hx, ex);
  device_buffer<T> dy(std::size_t(plan.y_elements()), ex);
  SDNN_CUDA_CHECK(cudaMemsetAsync(dy.data(), 0xff, dy.size() * sizeof(T), ex.stream));
  plan.run(ex, dx.data(), dy.data());
  auto y = download(dy.data(), dy.size(), ex);

  auto const a = conv::reference::conv2d_nhwc<T, float>(s, batch, hx.data(), std::as_const(wg).view(), bias, true, pool);
  std::vector<T> ax(hx.size());
  for (std::size_t i = 0; i < hx.size(); ++i) ax[i] = T(std::fabs(float(hx[i])));
  dense_matrix<T> aw(wg.rows(), wg.cols());
  for (std::size_t i = 0; i < wg.values().size(); ++i) aw.values()[i] = T(std::fabs(float(wg.values()[i])));
  auto const A = conv::reference::conv2d_nhwc<T, float>(s, batch, ax.data(), std::as_const(aw).view(), {}, false, pool);
  REQUIRE(a.size() == y.size());
  double const u = std::is_same_v<T, bf16> ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11), b = 0.25;
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < y.size() && bad < 5; ++i) {
    double const got = float(y[i]), r = a[i];
    double const tol = 2 * u * (std::fabs(r) + b) + std::ldexp(A[i] + b, -12) + std::ldexp(1.0, -24);
    if (!(std::fabs(got - r) <= tol)) {
      ++bad;
      UNSCOPED_INFO("y[" << i << "] = " << got << ", reference " << r << ", bound " << tol);
    }
  }
  CHECK(bad == 0);
  return ops::conv16_path_name(plan.path());
}

unsigned only(ops::conv16_path p) { return 1u << unsigned(p); }

}  // namespace

TEMPLATE_TEST_CASE("conv16_auto: every path and the choice against the reference", "[cuda][conv16_auto]", bf16, fp16) {
  using T = TestType;
  auto const s = conv::conv_shape::conv2d(64, 10, 9, 64, 3, 3, 1, 1);
  auto const dense = [&] {
    dense_matrix<T> w(s.K, s.filter_size());
    auto const v = sdnn_test::random_vector<T>(s.K * s.filter_size(), 3, -0.2f, 0.2f);
    std::copy(v.begin(), v.end(), w.values().begin());
    return w;
  }();
  // 75 % of the 16 x 16 channel blocks dropped: a candidate for every block path.
  auto const pruned = conv::prune_channel_blocks(s, std::as_const(dense).view(), 16, 16, 0.75).gemm;
  for (bool pool : {false, true}) {
    CHECK(check<T>(s, 2, dense, pool, only(ops::conv16_path::cudnn), 5) == std::string("cudnn"));
    CHECK(check<T>(s, 2, dense, pool, only(ops::conv16_path::tc_dense), 6) == std::string("tc_dense"));
    CHECK(check<T>(s, 2, pruned, pool, only(ops::conv16_path::tc_blocks16), 7) == std::string("tc_blocks16"));
    CHECK(check<T>(s, 3, pruned, pool, only(ops::conv16_path::tc_tiles) | only(ops::conv16_path::tc_blocks32), 8)
              .rfind("tc_", 0) == 0);
    check<T>(s, 2, pruned, pool, ops::conv16_all_paths, 9);  // the plan's own choice
  }
  if (detail::current_arch().sm() >= 90) {  // the TMA block kernel, which pools in its epilogue
    auto const pruned32 = conv::prune_channel_blocks(s, std::as_const(dense).view(), 32, 32, 0.75).gemm;
    auto const pruned64 = conv::prune_channel_blocks(s, std::as_const(dense).view(), 64, 32, 0.5).gemm;
    for (bool pool : {false, true}) {
      CHECK(check<T>(s, 2, pruned32, pool, only(ops::conv16_path::tc_blocks32_tma), 16) ==
            std::string("tc_blocks32_tma"));
      CHECK(check<T>(s, 3, pruned64, pool, only(ops::conv16_path::tc_blocks64x32_tma), 17) ==
            std::string("tc_blocks64x32_tma"));
    }
    stream_guard sg;
    auto ex = sg.exec();
    ops::conv16_auto_options opt;
    opt.allowed = only(ops::conv16_path::tc_blocks32_tma);
    ops::conv16_auto_plan<T> plan(s, 2, std::as_const(pruned32).view(), {}, true, true, ex, opt);
    CHECK(plan.describe().find("the 2x2 max-pool fused into its epilogue") != std::string::npos);
    device_buffer<T> x(std::size_t(plan.x_elements() + 8), ex), y(std::size_t(plan.y_elements()), ex);
    CHECK(error_text([&] { plan.run(ex, x.data() + 1, y.data()); }).find("must be 16-byte aligned") !=
          std::string::npos);
  }
  // A first layer (C = 3) and a strided 1x1.
  auto const s1 = conv::conv_shape::conv2d(3, 17, 15, 32, 3, 3, 1, 1);
  dense_matrix<T> w1(s1.K, s1.filter_size());
  auto const v1 = sdnn_test::random_vector<T>(s1.K * s1.filter_size(), 11, -0.3f, 0.3f);
  std::copy(v1.begin(), v1.end(), w1.values().begin());
  check<T>(s1, 2, w1, true, ops::conv16_all_paths, 12);
  for (bool pool : {false, true})  // its direct kernel, forced
    CHECK(check<T>(s1, 2, w1, pool, only(ops::conv16_path::small_c), 15) == std::string("small_c"));
  auto const s2 = conv::conv_shape::conv2d(64, 14, 14, 128, 1, 1, 2, 0);
  dense_matrix<T> w2(s2.K, s2.filter_size());
  auto const v2 = sdnn_test::random_vector<T>(s2.K * s2.filter_size(), 13, -0.3f, 0.3f);
  std::copy(v2.begin(), v2.end(), w2.values().begin());
  check<T>(s2, 3, w2, false, ops::conv16_all_paths, 14);
}

TEMPLATE_TEST_CASE("conv16_auto: the fused cuBLASLt path of 1x1 layers against the reference", "[cuda][conv16_auto]",
                   bf16, fp16) {
  using T = TestType;
  // 1x1, stride 1, no padding: the plain GEMM (odd H and W; K not a power of two).
  auto const s = conv::conv_shape::conv2d(64, 9, 11, 96, 1, 1, 1, 0);
  dense_matrix<T> w(s.K, s.filter_size());
  auto const v = sdnn_test::random_vector<T>(s.K * s.filter_size(), 31, -0.3f, 0.3f);
  std::copy(v.begin(), v.end(), w.values().begin());
  for (bool pool : {false, true}) {
    CHECK(check<T>(s, 3, w, pool, only(ops::conv16_path::cublaslt_1x1), 32) == std::string("cublaslt_1x1"));
    check<T>(s, 2, w, pool, ops::conv16_all_paths, 33);  // the plan's own choice
  }
  // Not offered where the layer is not a plain GEMM (3x3; a strided 1x1; C not a multiple of 8).
  stream_guard sg;
  auto ex = sg.exec();
  ops::conv16_auto_options o;
  o.allowed = only(ops::conv16_path::cublaslt_1x1);
  for (auto const& bad : {conv::conv_shape::conv2d(16, 8, 8, 16, 3, 3, 1, 1),
                          conv::conv_shape::conv2d(16, 8, 8, 16, 1, 1, 2, 0),
                          conv::conv_shape::conv2d(12, 8, 8, 16, 1, 1, 1, 0)}) {
    dense_matrix<T> wb(bad.K, bad.filter_size());
    CHECK(error_text([&] { ops::conv16_auto_plan<T> p(bad, 1, std::as_const(wb).view(), {}, true, false, ex, o); })
              .find("no allowed path") != std::string::npos);
  }
}

TEMPLATE_TEST_CASE("conv16_auto: the 2:4 path against the reference, offered only for 2:4 filters",
                   "[cuda][conv16_auto]", bf16, fp16) {
  using T = TestType;
  // 3x3 over 64 channels, a first layer (C = 3: groups of four cross the taps) and a strided layer.
  for (auto const& s : {conv::conv_shape::conv2d(64, 10, 9, 64, 3, 3, 1, 1), conv::conv_shape::conv2d(3, 17, 15, 32, 3, 3, 1, 1),
                        conv::conv_shape::conv2d(32, 12, 11, 48, 3, 3, 2, 0)}) {
    dense_matrix<T> w(s.K, s.filter_size());
    auto const v = sdnn_test::random_vector<T>(s.K * s.filter_size(), 41, -0.3f, 0.3f);
    std::copy(v.begin(), v.end(), w.values().begin());
    auto const w24 = to_dense(ops::prune_sparse24(std::as_const(w).view()));
    for (bool pool : {false, true}) {
      CHECK(check<T>(s, 2, w24, pool, only(ops::conv16_path::tc_sparse24), 42) == std::string("tc_sparse24"));
      check<T>(s, 2, w24, pool, ops::conv16_all_paths, 43);  // the plan's own choice
    }
    stream_guard sg;
    auto ex = sg.exec();
    ops::conv16_auto_options o;
    o.allowed = only(ops::conv16_path::tc_sparse24);
    CHECK(error_text([&] { ops::conv16_auto_plan<T> p(s, 1, std::as_const(w).view(), {}, true, false, ex, o); })
              .find("no allowed path") != std::string::npos);  // the dense filter is not 2:4
  }
}

TEST_CASE("conv16_auto: the reason names the timed candidates; a second plan reads the cache", "[cuda][conv16_auto]") {
  stream_guard sg;
  auto ex = sg.exec();
  auto const s = conv::conv_shape::conv2d(32, 12, 12, 32, 3, 3, 1, 1);
  dense_matrix<bf16> w(s.K, s.filter_size());
  auto const v = sdnn_test::random_vector<bf16>(s.K * s.filter_size(), 21, -0.2f, 0.2f);
  std::copy(v.begin(), v.end(), w.values().begin());
  auto const pruned = conv::prune_channel_blocks(s, std::as_const(w).view(), 16, 16, 0.75).gemm;
  ops::conv16_auto_plan<bf16> a(s, 4, std::as_const(pruned).view(), {}, true, false, ex);
  CHECK(a.reason().find("cudnn") != std::string::npos);
  CHECK(a.reason().find("tc_blocks16") != std::string::npos);
  CHECK(a.reason().find("timed at plan time") != std::string::npos);
  ops::conv16_auto_plan<bf16> b(s, 4, std::as_const(pruned).view(), {}, true, false, ex);
  CHECK(b.path() == a.path());
  CHECK(b.reason().find("cached choice") != std::string::npos);
}

TEST_CASE("conv16_auto: refusals before any launch", "[cuda][conv16_auto]") {
  stream_guard sg;
  auto ex = sg.exec();
  auto const s = conv::conv_shape::conv2d(16, 8, 8, 16, 3, 3, 1, 1);
  dense_matrix<fp16> w(s.K, s.filter_size() + 1);
  CHECK(error_text([&] { ops::conv16_auto_plan<fp16> p(s, 1, std::as_const(w).view(), {}, true, false, ex); })
            .find("K x R*S*C") != std::string::npos);
  dense_matrix<fp16> w2(s.K, s.filter_size());
  ops::conv16_auto_options o;
  o.allowed = 0;
  CHECK(error_text([&] { ops::conv16_auto_plan<fp16> p(s, 1, std::as_const(w2).view(), {}, true, false, ex, o); })
            .find("no allowed path") != std::string::npos);
  CHECK(error_text([&] { ops::conv16_auto_plan<fp16> p(s, 1, std::as_const(w2).view(), {1.f}, true, false, ex); })
            .find("bias") != std::string::npos);
  ops::conv16_auto_plan<fp16> p(s, 1, std::as_const(w2).view(), {}, true, false, ex);
  fp16* y = nullptr;
  CHECK(error_text([&] { p.run(ex, static_cast<fp16 const*>(nullptr), y); }).find("null") != std::string::npos);
}
