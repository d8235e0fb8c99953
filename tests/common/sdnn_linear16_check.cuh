// The check shared by the small-batch 16-bit linear-layer device tests: X placed on the device at
// an offset and leading dimension of the case's choosing, an optional bias + ReLU, Y filled with
// NaN first, one run compared with the host reference on the same rounded inputs, and a second run
// that must give the same bits.
#pragma once

#include "sdnn_gpu_test.cuh"
#include "sdnn_tc_fixtures.hpp"

#include <sdnn/core/epilogue.hpp>
#include <sdnn/formats/dense.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace sdnn_test {

struct linear16_case {
  int x_offset = 0;  // X starts this many elements into its buffer (odd: no 4-byte alignment)
  std::int64_t ldx_pad = 0;
  bool bias_relu = false;
};

// What the reference multiplies and how loose the sum's bound is.
struct linear16_reference {
  bool nonzeros_only = false;  // true: only W's nonzeros (zeros not multiplied: 0 * Inf adds nothing)
  double sum_factor = 4.0;     // |y - ref| <= f K u S + 2^-p (|ref| + f K u S) + 2^-24
};

// run(ex, x, y, epi) runs the plan under test (made by the caller on its first use, on ex, whose
// stream the caller keeps until the plan is gone: declare the stream before the plan). The
// reference sums x(n, k) w(m, k) in float, k ascending (every k, or W's nonzeros), applies the
// epilogue and compares: |y - ref| <= f K u S + 2^-p (|ref| + f K u S) + 2^-24, S = sum |x w| over
// the nonzeros, u = 2^-24, p Out's significand bits (both sides add the same exact float products in
// another order, with f K u S covering each order's roundings; one rounding to Out; inputs in
// [-1, 1] keep 16-bit outputs normal or within 2^-24 of 0). NaN must meet NaN, an infinity the same
// infinity. Returns Y.
template <class T, class Out, class Run>
std::vector<Out> check_linear16(sdnn::cuda_exec ex, sdnn::dense_matrix<T> const& w, sdnn::dense_matrix<T> const& x,
                                linear16_case o, linear16_reference ref, Run&& run) {
  using namespace sdnn;
  std::int64_t const m = w.rows(), k = w.cols(), n = x.rows(), ldx = k + o.ldx_pad;
  INFO("M=" << m << " K=" << k << " N=" << n << " offset " << o.x_offset << " ldx " << ldx);
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
  buffer<Out, device_space> dy(std::size_t(std::max<std::int64_t>(n * m, 1)), ex);
  SDNN_CUDA_CHECK(cudaMemsetAsync(dy.data(), 0xff, dy.size() * sizeof(Out), ex.stream));  // NaN in every type
  dense_view<T const> xv{n, k, ldx, dx.data() + o.x_offset};
  dense_view<Out> yv{n, m, m, dy.data()};
  run(ex, xv, yv, epi);
  auto y = download(dy.data(), std::size_t(n * m), ex);

  double const u = std::ldexp(1.0, -24), rel = std::ldexp(1.0, -out_bits<Out>());
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < n && bad < 5; ++i)
    for (std::int64_t j = 0; j < m && bad < 5; ++j) {
      double s = 0;
      float r32 = 0.f;
      for (std::int64_t q = 0; q < k; ++q) {
        bool const nz = sdnn::detail::is_nonzero(w(j, q));
        if (!nz && ref.nonzeros_only) continue;
        float const p = float(x(i, q)) * float(w(j, q));
        r32 += p;
        if (nz) s += std::fabs(double(p));
      }
      double const r = double(epi_host(r32, j)), got = double(static_cast<float>(y[std::size_t(i * m + j)]));
      bool ok;
      if (std::isnan(r)) ok = std::isnan(got);
      else if (std::isinf(r)) ok = got == r;
      else {
        double const acc = ref.sum_factor * double(k) * u * s;
        ok = std::fabs(got - r) <= acc + rel * (std::fabs(r) + acc) + u;
      }
      if (!ok) {
        ++bad;
        UNSCOPED_INFO("y(" << i << ", " << j << ") = " << got << ", reference " << r << ", sum |x w| " << s);
      }
    }
  CHECK(bad == 0);
  run(ex, xv, yv, epi);
  auto y2 = download(dy.data(), std::size_t(n * m), ex);
  CHECK(std::memcmp(y.data(), y2.data(), y.size() * sizeof(Out)) == 0);
  return y;
}

// The NaN/Inf case of check_linear16_edges: its W and its float Y (X has an Inf at (2, 40)).
template <class T>
struct linear16_nan_inf {
  sdnn::dense_matrix<T> w;
  std::vector<float> y;
};

// The edge cases every small-batch plan passes, each through run_check(out, w, x, c): a
// check_linear16 of the caller's plan with Out = decltype(out), returning Y. W of 50 x 70, X of 6
// rows: an all-zero W gives exactly 0; a dense W with bias + ReLU; a dense W with an empty row gives
// exactly 0 there; a NaN in W at (3, 10) makes row 3 NaN for every row of X. The last case's X also
// has an Inf at (2, 40): where it may reach depends on the plan, which checks it on what this returns.
template <class T, class RunCheck>
linear16_nan_inf<T> check_linear16_edges(RunCheck&& run_check) {
  auto const x = random_matrix<T>(6, 70, 5);
  auto const zero = pruned<T>(50, 70, 1.0, 6);
  for (float v : run_check(float{}, zero, x, linear16_case{})) REQUIRE(v == 0.f);  // no stored value: exactly 0
  auto dense = pruned<T>(50, 70, 0.0, 7);
  run_check(T{}, dense, x, linear16_case{0, 0, true});
  for (std::int64_t j = 0; j < dense.cols(); ++j) dense(17, j) = T(0.f);  // an empty row
  auto const y = run_check(float{}, dense, x, linear16_case{});
  for (std::int64_t i = 0; i < x.rows(); ++i) REQUIRE(y[std::size_t(i * 50 + 17)] == 0.f);
  linear16_nan_inf<T> r{pruned<T>(50, 70, 0.5, 8), {}};
  r.w(3, 10) = T(std::numeric_limits<float>::quiet_NaN());
  auto xi = random_matrix<T>(6, 70, 9);
  xi(2, 40) = T(std::numeric_limits<float>::infinity());
  r.y = run_check(float{}, r.w, xi, linear16_case{});
  for (std::int64_t i = 0; i < xi.rows(); ++i) REQUIRE(std::isnan(r.y[std::size_t(i * 50 + 3)]));
  return r;
}

}  // namespace sdnn_test
