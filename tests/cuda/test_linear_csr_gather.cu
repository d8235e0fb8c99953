// The small-batch CUDA-core gather kernel (ops::csr_gather_plan) on the device against a host
// reference over W's nonzeros on the same rounded inputs: both value types and both output types,
// M and K multiples of nothing, K over one and over several 4096-column panels (so that 16-row
// launches stage several column ranges and add them in the finishing kernel), N = 1 .. 40 (every
// launch width and several launches), 0-100 % density, empty and skewed rows, unaligned X and odd
// leading dimensions, bias + ReLU, NaN and Inf as the nonzeros carry them, identical bits on a second
// run, the caller's workspace; refusals before any launch.
#include "sdnn_gpu_test.cuh"
#include "sdnn_linear16_check.cuh"
#include "sdnn_tc_fixtures.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/formats/packed_csr.hpp>
#include <sdnn/linear/op/csr_gather.cuh>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

using namespace sdnn;
using sdnn_test::download;
using sdnn_test::error_text;
using sdnn_test::pruned;
using sdnn_test::random_matrix;
using sdnn_test::stream_guard;

namespace {

struct options {
  int x_offset = 0;  // X this many elements into its buffer
  std::int64_t ldx_pad = 0;
  bool bias_relu = false;
  bool caller_workspace = false;
};

// The plan on W's nonzeros against the reference over them (sdnn_linear16_check.cuh; a factor 2 on
// K u S: CUDA-core float adds round to nearest). Returns Y.
template <class T, class Out>
std::vector<Out> check(dense_matrix<T> const& w, dense_matrix<T> const& x, options o = {}) {
  stream_guard sg;  // outlives the plan
  std::optional<ops::csr_gather_plan<T, Out>> plan;
  std::optional<buffer<unsigned char, device_space>> ws;
  return sdnn_test::check_linear16<T, Out>(
      sg.exec(), w, x, {o.x_offset, o.ldx_pad, o.bias_relu}, {true, 2.0},
      [&](cuda_exec ex, dense_view<T const> xv, dense_view<Out> yv, basic_epilogue<float> const& epi) {
        if (!plan) {
          plan_options po;
          po.own_workspace = !o.caller_workspace;
          plan.emplace(w.view(), ex, po);
          ws.emplace(std::max<std::size_t>(plan->workspace_bytes(), 1), ex);
        }
        UNSCOPED_INFO(plan->describe(xv.rows));
        plan->run(ex, xv, yv, epi, o.caller_workspace ? workspace{ws->data(), ws->size()} : workspace{});
      });
}

}  // namespace

TEMPLATE_TEST_CASE("csr_gather: against the reference at odd sizes, every batch width", "[cuda][csr_gather]", bf16,
                   fp16) {
  SDNN_REQUIRE_DEVICE();
  using T = TestType;
  unsigned seed = 1;
  for (double sp : {0.5, 0.9, 0.99}) {
    auto const w = pruned<T>(333, 1001, sp, seed++);
    for (std::int64_t n : {1, 2, 3, 5, 8, 9, 16, 17, 33, 40}) check<T, T>(w, random_matrix<T>(n, w.cols(), seed++));
    auto const x = random_matrix<T>(5, w.cols(), seed++);
    check<T, float>(w, x, {0, 0, true});
    check<T, T>(w, x, {1, 3, true});  // X at an odd element, ld K + 3
  }
  // Several panels: 9000 columns are 3 panels (one range at 8 rows, three at 16 on an H100), 13001
  // are 4 (two ranges at 8 rows).
  auto const w3 = pruned<T>(301, 9000, 0.9, seed++);
  for (std::int64_t n : {1, 7, 12, 16, 21}) check<T, T>(w3, random_matrix<T>(n, w3.cols(), seed++), {0, 0, n == 12});
  check<T, float>(w3, random_matrix<T>(16, w3.cols(), seed++), {1, 5, true, true});  // the caller's workspace
  auto const w4 = pruned<T>(77, 13001, 0.95, seed++);
  for (std::int64_t n : {3, 8, 16}) check<T, float>(w4, random_matrix<T>(n, w4.cols(), seed++));
}

TEMPLATE_TEST_CASE("csr_gather: all-zero, dense, empty and skewed rows; NaN and Inf propagate", "[cuda][csr_gather]",
                   bf16, fp16) {
  SDNN_REQUIRE_DEVICE();
  using T = TestType;
  // The shared cases; then the Inf in X at (2, 40) must reach only the rows with a nonzero in
  // column 40.
  auto const edge = sdnn_test::check_linear16_edges<T>(
      [](auto out, dense_matrix<T> const& w, dense_matrix<T> const& x, sdnn_test::linear16_case c) {
        return check<T, decltype(out)>(w, x, {c.x_offset, c.ldx_pad, c.bias_relu});
      });
  auto const& w = edge.w;
  auto const& yn = edge.y;
  int finite = 0, infinite = 0;
  for (std::int64_t j = 0; j < 50; ++j) {
    if (j == 3) continue;
    float const v = yn[std::size_t(2 * 50 + j)];
    if (detail::is_nonzero(w(j, 40))) infinite += std::isinf(v) ? 1 : 0;
    else finite += std::isfinite(v) ? 1 : 0;
  }
  CHECK(finite > 0);
  CHECK(infinite > 0);
  int zeros40 = 0, nz40 = 0;
  for (std::int64_t j = 0; j < 50; ++j)
    if (j != 3) (detail::is_nonzero(w(j, 40)) ? nz40 : zeros40)++;
  CHECK(finite == zeros40);
  CHECK(infinite == nz40);
  // Skewed: one dense row of 6000 among 2000 rows of one nonzero each (the warps' balance).
  dense_matrix<T> skew(2001, 6000);
  for (std::int64_t j = 0; j < 6000; ++j) skew(1000, j) = T(0.001f * float(j % 13) - 0.006f);
  for (std::int64_t i = 0; i < 2001; ++i)
    if (i != 1000) skew(i, (i * 37) % 6000) = T(0.5f);
  for (std::int64_t n : {1, 8, 16}) check<T, float>(skew, random_matrix<T>(n, 6000, unsigned(10 + n)));
}

TEST_CASE("csr_gather: refusals before any launch; an empty batch runs nothing", "[cuda][csr_gather]") {
  CHECK_FALSE(ops::csr_gather_plan<bf16>::can_implement(10, 65537).ok());
  CHECK(ops::csr_gather_plan<bf16>::can_implement(10, 65536).ok());
  CHECK_FALSE(ops::csr_gather_plan<bf16>::can_implement(10, 100, arch{7, 5}).ok());
  CHECK(error_text([] { dense_matrix<fp16> const big(2, 65537); packed_csr_from_dense(big.view()); }).find("65536") !=
        std::string::npos);
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  auto ex = sg.exec();
  auto const w = pruned<bf16>(40, 9000, 0.9, 11);
  CHECK_THROWS(ops::csr_gather_plan<bf16>(dense_matrix<bf16>(3, 70000).view(), ex));
  plan_options po;
  po.own_workspace = false;
  ops::csr_gather_plan<bf16> plan(w.view(), ex, po);
  buffer<bf16, device_space> dx(std::size_t(16 * 9000), ex), dy(std::size_t(16 * 40), ex);
  SDNN_CUDA_CHECK(cudaMemsetAsync(dy.data(), 0x11, dy.size() * sizeof(bf16), ex.stream));
  CHECK_THROWS_AS(plan.run(ex, dense_view<bf16 const>{4, 8999, 8999, dx.data()}, dense_view<bf16>{4, 40, 40, dy.data()}),
                  dimension_mismatch);
  CHECK_THROWS_AS(plan.run(ex, dense_view<bf16 const>{4, 9000, 9000, dx.data()}, dense_view<bf16>{3, 40, 40, dy.data()}),
                  dimension_mismatch);
  CHECK(error_text([&] {
          plan.run(ex, dense_view<bf16 const>{4, 9000, 8000, dx.data()}, dense_view<bf16>{4, 40, 40, dy.data()});
        }).find("leading dimension") != std::string::npos);
  if (plan.workspace_bytes() > 0)  // 16 rows over 9000 columns need column ranges on this GPU
    CHECK(error_text([&] {
            plan.run(ex, dense_view<bf16 const>{16, 9000, 9000, dx.data()}, dense_view<bf16>{16, 40, 40, dy.data()});
          }).find("workspace") != std::string::npos);
  plan.run(ex, dense_view<bf16 const>{0, 9000, 9000, dx.data()}, dense_view<bf16>{0, 40, 40, dy.data()});
  auto const y = download(dy.data(), dy.size(), ex);
  for (auto v : y) {
    std::uint16_t b;
    std::memcpy(&b, &v, 2);
    REQUIRE(b == 0x1111);  // nothing written
  }
}
