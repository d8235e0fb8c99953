// The small-batch bitmap-tile kernel (ops::tc_bitmap_plan) on the device against the host reference
// on the same rounded inputs: both value types and both output types, sizes that are multiples of
// no tile (M, K odd), N = 1 .. 70 (every rows-per-launch width and several launches), 50-99 %
// and 0 / 100 % density, an empty row, unaligned X and odd leading dimensions (the element-wise X
// loads), bias + ReLU, NaN and Inf propagation, identical bits on a second run; refusals.
#include "sdnn_gpu_test.cuh"
#include "sdnn_tc_fixtures.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/formats/bitmap_tiles.hpp>
#include <sdnn/linear/op/tc_bitmap.cuh>
#include <sdnn/linear/reference/tc_linear.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

using namespace sdnn;
using sdnn_test::download;
using sdnn_test::error_text;
using sdnn_test::out_bits;
using sdnn_test::pruned;
using sdnn_test::random_matrix;
using sdnn_test::stream_guard;
using sdnn_test::upload;

namespace {

struct options {
  int x_offset = 0;  // X starts this many elements into its buffer (odd: no 4-byte pairs)
  std::int64_t ldx_pad = 0;
  bool bias_relu = false;
};

// Runs the plan and checks every output: |y - ref| <= 4 K u S + 2^-p (|ref| + 4 K u S) + 2^-24,
// S = sum_k |x w| over the stored w, u = 2^-24 (both sides add the same exact float products in
// different orders; a factor 2 of margin for truncating tensor-core adds; one rounding to Out;
// inputs in [-1, 1] keep 16-bit outputs normal or within 2^-24 of 0). NaN must meet NaN, an
// infinity the same infinity. Returns Y's bits.
template <class T, class Out>
std::vector<Out> check(dense_matrix<T> const& w, dense_matrix<T> const& x, options o = {}) {
  std::int64_t const m = w.rows(), k = w.cols(), n = x.rows(), ldx = k + o.ldx_pad;
  INFO("M=" << m << " K=" << k << " N=" << n << " offset " << o.x_offset << " ldx " << ldx);
  stream_guard sg;
  auto ex = sg.exec();
  std::vector<T> hx(std::size_t(n * ldx + o.x_offset + 8), T(0.f));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < k; ++j) hx[std::size_t(o.x_offset + i * ldx + j)] = x(i, j);
  auto dx = upload(hx, ex);
  std::vector<float> hb(static_cast<std::size_t>(std::max<std::int64_t>(m, 1)));
  for (std::int64_t i = 0; i < m; ++i) hb[std::size_t(i)] = 0.25f * float(i % 7) - 0.75f;
  auto db = upload(hb, ex);
  basic_epilogue<float> epi, epi_host;
  if (o.bias_relu) {
    epi.bias = db.data();
    epi_host.bias = hb.data();
    epi.relu = epi_host.relu = true;
  }
  auto const bw = bitmap_tiles_from_dense(w.view());
  ops::tc_bitmap_plan<T, Out> plan(bw, ex);
  INFO(plan.describe(n));
  buffer<Out, device_space> dy(std::size_t(std::max<std::int64_t>(n * m, 1)), ex);
  SDNN_CUDA_CHECK(cudaMemsetAsync(dy.data(), 0xff, dy.size() * sizeof(Out), ex.stream));  // NaN in every type
  dense_view<T const> xv{n, k, ldx, dx.data() + o.x_offset};
  dense_view<Out> yv{n, m, m, dy.data()};
  plan.run(ex, xv, yv, epi);
  auto y = download(dy.data(), std::size_t(n * m), ex);

  dense_matrix<float> ref(n, m);
  reference::tc_linear(x.view(), w.view(), ref.view(), epi_host);
  double const u = std::ldexp(1.0, -24), rel = std::ldexp(1.0, -out_bits<Out>());
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < n && bad < 5; ++i)
    for (std::int64_t j = 0; j < m && bad < 5; ++j) {
      double s = 0;
      for (std::int64_t q = 0; q < k; ++q)
        if (float(w(j, q)) != 0.f) s += std::fabs(double(float(x(i, q))) * double(float(w(j, q))));
      double const r = ref(i, j), got = double(static_cast<float>(y[std::size_t(i * m + j)]));
      bool ok;
      if (std::isnan(r)) ok = std::isnan(got);
      else if (std::isinf(r)) ok = got == r;
      else {
        double const acc = 4.0 * double(k) * u * s;
        ok = std::fabs(got - r) <= acc + rel * (std::fabs(r) + acc) + u;
      }
      if (!ok) {
        ++bad;
        UNSCOPED_INFO("y(" << i << ", " << j << ") = " << got << ", reference " << r << ", sum |x w| " << s);
      }
    }
  CHECK(bad == 0);
  plan.run(ex, xv, yv, epi);
  auto y2 = download(dy.data(), std::size_t(n * m), ex);
  CHECK(std::memcmp(y.data(), y2.data(), y.size() * sizeof(Out)) == 0);
  return y;
}

}  // namespace

TEMPLATE_TEST_CASE("tc_bitmap: against the reference at odd sizes, every batch width", "[cuda][tc_bitmap]", bf16, fp16) {
  SDNN_REQUIRE_DEVICE();
  using T = TestType;
  unsigned seed = 1;
  for (double sp : {0.5, 0.9, 0.99}) {
    auto const w = pruned<T>(333, 1001, sp, seed++);  // 21 x 63 tiles, the last row and column of tiles partial
    for (std::int64_t n : {1, 3, 8, 9, 17, 24, 32, 33, 70}) {
      auto const x = random_matrix<T>(n, w.cols(), seed++);
      check<T, T>(w, x);
    }
    auto const x = random_matrix<T>(5, w.cols(), seed++);
    check<T, float>(w, x, {0, 0, true});
    check<T, T>(w, x, {1, 3, true});  // X at an odd element, ld K + 3: element-wise X loads
  }
  // MLP-like and K-split-heavy shapes.
  auto const w1 = pruned<T>(1024, 784, 0.9, seed++);
  check<T, T>(w1, random_matrix<T>(16, 784, seed++), {0, 0, true});
  auto const w2 = pruned<T>(40, 4096, 0.95, seed++);
  check<T, float>(w2, random_matrix<T>(7, 4096, seed++));
}

TEMPLATE_TEST_CASE("tc_bitmap: all-zero, dense and empty-row weights; NaN and Inf propagate", "[cuda][tc_bitmap]", bf16,
                   fp16) {
  SDNN_REQUIRE_DEVICE();
  using T = TestType;
  auto const x = random_matrix<T>(6, 70, 5);
  auto const zero = pruned<T>(50, 70, 1.0, 6);
  for (float v : check<T, float>(zero, x)) REQUIRE(v == 0.f);  // no stored value: exactly 0
  auto dense = pruned<T>(50, 70, 0.0, 7);
  check<T, T>(dense, x, {0, 0, true});
  for (std::int64_t j = 0; j < dense.cols(); ++j) dense(17, j) = T(0.f);  // an empty row
  auto const y = check<T, float>(dense, x);
  for (std::int64_t i = 0; i < x.rows(); ++i) REQUIRE(y[std::size_t(i * 50 + 17)] == 0.f);
  // NaN in W, Inf in X: the rows they reach follow IEEE arithmetic (the reference's).
  auto w = pruned<T>(50, 70, 0.5, 8);
  w(3, 10) = T(std::numeric_limits<float>::quiet_NaN());
  auto xi = random_matrix<T>(6, 70, 9);
  xi(2, 40) = T(std::numeric_limits<float>::infinity());
  auto const yn = check<T, float>(w, xi);
  for (std::int64_t i = 0; i < xi.rows(); ++i) REQUIRE(std::isnan(yn[std::size_t(i * 50 + 3)]));
}

TEST_CASE("tc_bitmap: refusals before any launch; an empty batch runs nothing", "[cuda][tc_bitmap]") {
  stream_guard sg;
  auto ex = sg.exec();
  auto const w = pruned<bf16>(40, 64, 0.9, 11);
  ops::tc_bitmap_plan<bf16> plan(w.view(), ex);
  buffer<bf16, device_space> dx(std::size_t(4 * 64), ex), dy(std::size_t(4 * 40), ex);
  SDNN_CUDA_CHECK(cudaMemsetAsync(dy.data(), 0x11, dy.size() * sizeof(bf16), ex.stream));
  CHECK_THROWS_AS(plan.run(ex, dense_view<bf16 const>{4, 63, 63, dx.data()}, dense_view<bf16>{4, 40, 40, dy.data()}),
                  dimension_mismatch);
  CHECK_THROWS_AS(plan.run(ex, dense_view<bf16 const>{4, 64, 64, dx.data()}, dense_view<bf16>{3, 40, 40, dy.data()}),
                  dimension_mismatch);
  CHECK(error_text([&] {
          plan.run(ex, dense_view<bf16 const>{4, 64, 60, dx.data()}, dense_view<bf16>{4, 40, 40, dy.data()});
        }).find("leading dimension") != std::string::npos);
  plan.run(ex, dense_view<bf16 const>{0, 64, 64, dx.data()}, dense_view<bf16>{0, 40, 40, dy.data()});
  auto const y = download(dy.data(), dy.size(), ex);
  for (auto v : y) {
    std::uint16_t b;
    std::memcpy(&b, &v, 2);
    REQUIRE(b == 0x1111);  // nothing written
  }
}
