// sdnn/linear/op/tc_bitmap.cuh - ops::tc_bitmap_plan<T, Out>: Y[N x M] = epi(X[N x K] W^T) with
// W unstructured-sparse in bitmap tiles (formats/bitmap_tiles.hpp), for small batches: one launch
// of linear/kernel/tc_bitmap.cuh per 32 rows of X (each reads all of W again, so the plan is meant
// for N up to a few dozen rows; the automatic layer uses it there). Under the plan protocol of
// core/plan.hpp: the constructor checks and uploads on exec.stream, run() only enqueues.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "sdnn/core/arch.hpp"
#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/formats/bitmap_tiles.hpp"
#include "sdnn/linear/kernel/tc_bitmap.cuh"
#include "sdnn/linear/op/tc_linear.hpp"

namespace sdnn::ops {

template <class T, class Out = T>
class tc_bitmap_plan {
  static_assert(is_16bit_float_v<T>, "tc_bitmap_plan: T must be sdnn::bf16 or sdnn::fp16");
  static_assert(std::is_same_v<Out, T> || std::is_same_v<Out, float>, "tc_bitmap_plan: Out must be T or float");
  // Warps a thread block (one 16-row panel, its column groups split that many ways) by n8 tiles of
  // X. Measured on H100 (11008 x 4096, 4096 x 11008, 8192 x 8192 at 70-95 %, tc_linear_notes.md
  // v10): at 8 rows 16 warps took 0.69-0.95x the time of 8 (more warps an SM: 64 registers); from
  // 16 rows 8 stay, as 16 took 1.0-1.2x, and 4 won only where 688 panels then fit one wave.
  static constexpr int warps_for(int nt) { return nt == 1 ? 16 : 8; }
  // Record stages by n8 tiles of X (the kernel's Stages). Measured on H100 (the four grid shapes at
  // 50-95 %, tc_linear_notes.md v13): records copied one group ahead into shared memory took
  // 0.72-0.94x the time at 16 rows and 0.88-0.94x at 32, 0.96-1.01x at 8, but 1.00-1.04x at one
  // row, where the 16-warp kernel keeps reading them itself; 3 or 4 stages were no faster than 2.
  static constexpr int stages_for(int nt) { return nt == 1 ? 1 : 2; }
  static constexpr int rows_max = 32;  // rows of X a launch

 public:
  using value_type = T;
  using output_type = Out;

  // Refused: extents over int32, a GPU below sm_80.
  static plan_status can_implement(std::int64_t m, std::int64_t k) {
    return detail::tc_common_can_implement("tc_bitmap_plan", m, k, ::sdnn::detail::current_arch());
  }

  // W on the host as bitmap tiles (or dense, converted); uploaded once on exec.stream.
  tc_bitmap_plan(bitmap_tiles_matrix<T> const& w, cuda_exec exec) : m_(w.rows()), k_(w.cols()), runs_(exec) {
    ::sdnn::detail::implementable(can_implement(m_, k_), 0);
    tile_cols_ = w.tile_cols();
    pairs_ = w.pairs();
    cuda_exec const own = runs_.owned(exec);
    records_ = to_device(w.records().data(), w.records().size(), own);
    values_ = to_device(w.values().data(), w.values().size(), own);
  }
  tc_bitmap_plan(dense_view<T const> w, cuda_exec exec) : tc_bitmap_plan(bitmap_tiles_from_dense(w), exec) {}
  tc_bitmap_plan(tc_bitmap_plan&&) noexcept = default;
  tc_bitmap_plan& operator=(tc_bitmap_plan&&) noexcept = default;

  std::int64_t out_features() const noexcept { return m_; }
  std::int64_t in_features() const noexcept { return k_; }
  std::size_t weight_bytes() const noexcept { return records_.size() * sizeof(bitmap_tile_record) + values_.size() * sizeof(T); }
  std::string describe(std::int64_t n = 0) const {
    std::string d = ::sdnn::detail::concat("tc_bitmap_plan<", value_type_name<T>(), " -> ", value_type_name<Out>(),
                                           ">: W ", m_, " x ", k_, ", ", pairs_, " stored pairs in 16 x 16 bitmap tiles, ",
                                           weight_bytes(), " bytes on the device");
    if (n > 0) {
      // Launches of 32 rows, then the rest; the warps a block follow each launch's rows.
      std::int64_t const full = n / rows_max, rest = n % rows_max;
      d += ::sdnn::detail::concat("; N = ", n, ": ", full + (rest > 0), " launch(es) of ", (m_ + 15) / 16,
                                  " blocks (a 16-row panel each)");
      auto shape = [](int nt) {
        return ::sdnn::detail::concat(warps_for(nt), " warps",
                                      stages_for(nt) > 1 ? ", records staged a group ahead in shared memory" : "");
      };
      if (full > 0) d += ::sdnn::detail::concat(", ", shape(rows_max / 8), " for 32 rows");
      if (rest > 0) d += ::sdnn::detail::concat(", ", shape(int((rest + 7) / 8)), " for ", rest, " rows");
    }
    return d;
  }

  // y = epi(x W^T) on exec.stream; epi.bias: device memory, M floats. Any N (in launches of 32
  // rows), any leading dimensions and alignment of the element types.
  void run(cuda_exec exec, dense_view<T const> x, dense_view<Out> y, basic_epilogue<float> const& epi = {}) const {
    detail::check_tc_run("tc_bitmap_plan", m_, k_, x, y);
    runs_.note(exec);
    if (x.rows == 0 || m_ == 0) return;
    std::int64_t const ldx = x.rows > 1 ? x.ld : x.cols, ldy = y.rows > 1 ? y.ld : y.cols;
    bool const vec = reinterpret_cast<std::uintptr_t>(x.data) % 16 == 0 && ldx % 8 == 0;
    kernels::tc_bitmap_args a;
    a.records = records_.data();
    a.values = reinterpret_cast<std::uint32_t const*>(values_.data());  // pairs: 4-byte aligned (device allocation)
    a.ldx = ldx;
    a.ldy = ldy;
    a.y_float = std::is_same_v<Out, float>;
    a.m = static_cast<std::int32_t>(m_);
    a.k = static_cast<std::int32_t>(k_);
    a.tile_cols = static_cast<std::int32_t>(tile_cols_);
    a.epi = epi;
    unsigned const blocks = static_cast<unsigned>((m_ + 15) / 16);
    for (std::int64_t r0 = 0; r0 < x.rows; r0 += rows_max) {
      std::int64_t const rows = std::min<std::int64_t>(rows_max, x.rows - r0);
      a.x = reinterpret_cast<std::uint16_t const*>(x.data + r0 * ldx);
      a.y = y.data + r0 * ldy;
      a.n = static_cast<std::int32_t>(rows);
      launch(int((rows + 7) / 8), vec, blocks, a, exec);
    }
  }

 private:
  template <int NT, bool Vec>
  static void launch_nt(unsigned blocks, kernels::tc_bitmap_args const& a, cuda_exec exec) {
    constexpr int warps = warps_for(NT);
    kernels::tc_bitmap_kernel<T, NT, warps, Vec, stages_for(NT)><<<blocks, warps * 32, 0, exec.stream>>>(a);
    SDNN_CUDA_CHECK_LAUNCH();
  }
  template <bool Vec>
  static void launch_p(int nt, unsigned blocks, kernels::tc_bitmap_args const& a, cuda_exec exec) {
    switch (nt) {
      case 1: return launch_nt<1, Vec>(blocks, a, exec);
      case 2: return launch_nt<2, Vec>(blocks, a, exec);
      case 3: return launch_nt<3, Vec>(blocks, a, exec);
      default: return launch_nt<4, Vec>(blocks, a, exec);
    }
  }
  static void launch(int nt, bool vec, unsigned blocks, kernels::tc_bitmap_args const& a, cuda_exec exec) {
    if (vec) launch_p<true>(nt, blocks, a, exec);
    else launch_p<false>(nt, blocks, a, exec);
  }

  std::int64_t m_ = 0, k_ = 0, tile_cols_ = 0, pairs_ = 0;
  buffer<bitmap_tile_record, device_space> records_;
  buffer<T, device_space> values_;
  ::sdnn::detail::run_streams runs_;
};

}  // namespace sdnn::ops
