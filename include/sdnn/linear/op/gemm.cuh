// sdnn/linear/op/gemm.cuh - cuda_exec implementations of ops::gemm (see linear/op/gemm.hpp), one
// gemm_impl per policy: tiled_gemm, cublas_gemm, the mask and list forms of empty-row skipping
// around tiled_gemm, and automatic. Only policy::automatic synchronises (once, to read the
// live-row count back). ops::gemm is a function, not a plan: to run the empty-row forms
// without allocating, pass a prepared row_skip_plan (the overload at the end of this file).
#pragma once

#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/linear/kernel/gemm_tiled.cuh"
#include "sdnn/linear/op/row_skip.cuh"
#include "sdnn/linear/op/gemm.hpp"
#include "sdnn/linear/vendor/cublas.cuh"

namespace sdnn::ops {

namespace detail {
template <class P>
inline constexpr bool is_tiled_gemm_v = false;
template <int M, int N, int K>
inline constexpr bool is_tiled_gemm_v<policy::tiled_gemm<M, N, K>> = true;
}  // namespace detail

// tiled_gemm: kernels::gemm_tiled; no synchronisation.
template <int M, int N, int K>
struct gemm_impl<cuda_exec, policy::tiled_gemm<M, N, K>> {
  template <class T, class Acc>
  static void run(cuda_exec e, dense_view<T const> a, dense_view<T const> b, dense_view<T> c,
                  basic_epilogue<Acc> const& epi) {
    kernels::gemm_tiled<policy::tiled_gemm<M, N, K>, T, std::int32_t, Acc>(a, b, c, epi, nullptr, nullptr, a.rows,
                                                                            nullptr, e);
  }
};

// cublas_gemm: vendor::cublas_gemm on the calling thread's default handle, then the unfused
// epilogue pass.
template <>
struct gemm_impl<cuda_exec, policy::cublas_gemm> {
  template <class T, class Acc>
  static void run(cuda_exec e, dense_view<T const> a, dense_view<T const> b, dense_view<T> c,
                  basic_epilogue<Acc> const& epi) {
    vendor::cublas_gemm(vendor::default_cublas_handle().get(), a, b, c, epi, e.stream);
  }
};

// Mask form: per-row counts of A (cub segmented reduce), then the tiled kernel skipping empty
// rows and tiles. Without a prepared row_skip_plan, one is made of A on every call (A is an
// activation matrix that changes per call): that allocates and frees its arrays
// (stream-ordered) each time.
template <class Inner>
struct gemm_impl<cuda_exec, policy::skip_empty_rows_mask<Inner>> {
  static_assert(detail::is_tiled_gemm_v<Inner>, "skip_empty_rows_mask: the dense inner policy must be tiled_gemm");
  template <class T, class Acc>
  static void run(cuda_exec e, dense_view<T const> a, dense_view<T const> b, dense_view<T> c,
                  basic_epilogue<Acc> const& epi, ops::row_skip_plan<std::int32_t> const& skip) {
    SDNN_EXPECTS(skip.rows() == a.rows, "gemm: the row_skip_plan covers ", skip.rows(), " rows, A has ", a.rows);
    kernels::gemm_tiled<Inner, T, std::int32_t, Acc>(a, b, c, epi, nullptr, nullptr, a.rows, skip.counts(), e);
  }
  template <class T, class Acc>
  static void run(cuda_exec e, dense_view<T const> a, dense_view<T const> b, dense_view<T> c,
                  basic_epilogue<Acc> const& epi) {
    ops::row_skip_plan<std::int32_t> skip(a, e);
    run(e, a, b, c, epi, skip);
  }
};

// List form: counts, then cub::DeviceSelect of the live and the empty rows, the tiled kernel
// over the live rows and the epi(0) fill of the empty ones. Allocates per call as the mask
// form does without a prepared row_skip_plan.
template <class Inner>
struct gemm_impl<cuda_exec, policy::skip_empty_rows_compact<Inner>> {
  static_assert(detail::is_tiled_gemm_v<Inner>, "skip_empty_rows_compact: the dense inner policy must be tiled_gemm");
  template <class T, class Acc>
  static void run(cuda_exec e, dense_view<T const> a, dense_view<T const> b, dense_view<T> c,
                  basic_epilogue<Acc> const& epi, ops::row_skip_plan<std::int32_t> const& skip) {
    SDNN_EXPECTS(skip.rows() == a.rows, "gemm: the row_skip_plan covers ", skip.rows(), " rows, A has ", a.rows);
    kernels::gemm_tiled<Inner, T, std::int32_t, Acc>(a, b, c, epi, skip.row_list(), skip.num_live(), a.rows, nullptr,
                                                     e);
    skip.fill_empty_rows(c, epi, e);
  }
  template <class T, class Acc>
  static void run(cuda_exec e, dense_view<T const> a, dense_view<T const> b, dense_view<T> c,
                  basic_epilogue<Acc> const& epi) {
    ops::row_skip_plan<std::int32_t> skip(a, e);
    run(e, a, b, c, epi, skip);
  }
};

// automatic: counts + partition, reads the live count back (SYNCHRONISES exec.stream once),
// then policy::choose_gemm picks plain or compacted with the current device's tuning table.
template <>
struct gemm_impl<cuda_exec, policy::automatic> {
  template <class T, class Acc>
  static void run(cuda_exec e, dense_view<T const> a, dense_view<T const> b, dense_view<T> c,
                  basic_epilogue<Acc> const& epi) {
    // float: 8-deep slices, __half: 16 (one 16-byte vector per thread per slice).
    constexpr int k = sizeof(T) == 2 ? 16 : 8;
    using large = policy::tiled_gemm<128, 128, k>;
    using small = policy::tiled_gemm<64, 64, k>;
    ops::row_skip_plan<std::int32_t> skip(a, e);
    std::int64_t const live = a.rows ? skip.num_live_host(e) : 0;
    double const empty = a.rows ? 1.0 - static_cast<double>(live) / static_cast<double>(a.rows) : 0.0;
    auto const t = policy::tuning_for(::sdnn::detail::current_arch());  // linear/policy/tuning.hpp
    if (policy::choose_gemm(empty, t) == policy::gemm_choice::tiled_skip_empty_compact) {
      // Few live rows leave SMs idle with 128 x 128 tiles (2 blocks per SM); 64 x 64 tiles
      // give 4x the blocks. bench_row_skip, H200, 4096^3: 50 % empty 2.15 vs 2.51 ms, 90 %
      // 0.79 vs 0.91 ms, 99 % 0.50 vs 0.57 ms; at 8192^3 (>= 4 tiles per SM) 128 x 128 wins.
      std::int64_t const tiles128 = ((live + 127) / 128) * ((b.cols + 127) / 128);
      if (tiles128 < t.gemm_small_tiles_below_per_sm * static_cast<std::int64_t>(::sdnn::detail::sm_count()))
        gemm_impl<cuda_exec, policy::skip_empty_rows_compact<small>>::run(e, a, b, c, epi, skip);
      else
        gemm_impl<cuda_exec, policy::skip_empty_rows_compact<large>>::run(e, a, b, c, epi, skip);
    } else {
      gemm_impl<cuda_exec, large>::run(e, a, b, c, epi);
    }
  }
};

// C = epi(A * B) with a prepared empty-row plan (skip_empty_rows_mask / _compact only), which
// runs without allocating: make the row_skip_plan once for the row count
// (row_skip_plan<int>(rows, exec)), run it on each new A (skip.run(exec, a)) and pass it here.
template <class Policy, class T, class Acc>
void gemm(cuda_exec exec, Policy, dense_view<T const> a, dense_view<T const> b, dense_view<T> c,
          basic_epilogue<Acc> const& epi, ops::row_skip_plan<std::int32_t> const& skip) {
  detail::check_gemm_args(a, b, c);
  gemm_impl<cuda_exec, Policy>::run(exec, a, b, c, epi, skip);
}

}  // namespace sdnn::ops
