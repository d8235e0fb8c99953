// The small-batch bitmap-tile kernel (ops::tc_bitmap_plan) on the device against the host reference
// on the same rounded inputs: both value types and both output types, sizes that are multiples of
// no tile (M, K odd), N = 1 .. 70 (every rows-per-launch width and several launches; warps with no
// column group), 50-99 % and 0 / 100 % density, an empty row, unaligned X and odd leading dimensions
// (the element-wise X loads), bias + ReLU, NaN and Inf propagation, identical bits on a second run;
// refusals.
#include "sdnn_gpu_test.cuh"
#include "sdnn_linear16_check.cuh"
#include "sdnn_tc_fixtures.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/formats/bitmap_tiles.hpp>
#include <sdnn/linear/op/tc_bitmap.cuh>

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

using options = sdnn_test::linear16_case;

// The plan against the reference over every element (a stored pair's zero too: 0 * Inf is NaN in
// the mma as in the reference), a factor 4 on K u S for truncating tensor-core adds
// (sdnn_linear16_check.cuh). Returns Y.
template <class T, class Out>
std::vector<Out> check(dense_matrix<T> const& w, dense_matrix<T> const& x, options o = {}) {
  stream_guard sg;  // outlives the plan
  std::optional<ops::tc_bitmap_plan<T, Out>> plan;
  return sdnn_test::check_linear16<T, Out>(
      sg.exec(), w, x, o, {false, 4.0},
      [&](cuda_exec ex, dense_view<T const> xv, dense_view<Out> yv, basic_epilogue<float> const& epi) {
        if (!plan) plan.emplace(bitmap_tiles_from_dense(w.view()), ex);
        UNSCOPED_INFO(plan->describe(xv.rows));
        plan->run(ex, xv, yv, epi);
      });
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
  // One column group for 8 or 16 warps (all but one have none), one panel or a partial one.
  for (std::int64_t m : {16, 48, 9}) {
    auto const w = pruned<T>(m, 40, 0.5, seed++);
    for (std::int64_t n : {1, 8, 20, 32}) check<T, T>(w, random_matrix<T>(n, w.cols(), seed++));
  }
  // MLP-like and K-split-heavy shapes.
  auto const w1 = pruned<T>(1024, 784, 0.9, seed++);
  check<T, T>(w1, random_matrix<T>(16, 784, seed++), {0, 0, true});
  auto const w2 = pruned<T>(40, 4096, 0.95, seed++);
  check<T, float>(w2, random_matrix<T>(7, 4096, seed++));
  // Long rows, dense and half dense: a warp's column groups hold thousands of stored pairs (more
  // than a shared-memory staging of them holds at once), the last group partial.
  for (double sp : {0.0, 0.5}) {
    auto const w = pruned<T>(40, 8200, sp, seed++);
    for (std::int64_t n : {1, 8, 32}) check<T, T>(w, random_matrix<T>(n, w.cols(), seed++));
  }
}

TEMPLATE_TEST_CASE("tc_bitmap: all-zero, dense and empty-row weights; NaN and Inf propagate", "[cuda][tc_bitmap]", bf16,
                   fp16) {
  SDNN_REQUIRE_DEVICE();
  using T = TestType;
  // The shared cases: the rows the NaN and the Inf reach follow IEEE arithmetic over every element
  // of a stored tile, zeros too, as the reference's.
  sdnn_test::check_linear16_edges<T>([](auto out, dense_matrix<T> const& w, dense_matrix<T> const& x, options o) {
    return check<T, decltype(out)>(w, x, o);
  });
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
