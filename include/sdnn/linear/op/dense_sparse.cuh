// sdnn/linear/op/dense_sparse.cuh - the device plan of the dense x sparse product C = epi(A * W)
// (linear/op/dense_sparse.hpp): ops::dense_sparse_plan<Policy, T>, made from W on the host or
// the device, whose run() covers every row and run_rows() a device list of rows (pipelines),
// and the one-shot ops::spmm_dense_sparse(cuda_exec, ...). Protocol, workspace and stream
// rules: core/plan.hpp; the policies' layouts: docs/linear.md#dense-x-sparse.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/numeric.hpp"
#include "sdnn/core/plan.cuh"
#include "sdnn/formats/convert.cuh"
#include "sdnn/formats/convert.hpp"
#include "sdnn/formats/copy.cuh"
#include "sdnn/linear/kernel/live_rows.cuh"
#include "sdnn/linear/kernel/spmm_dense_csc.cuh"
#include "sdnn/formats/csc_tiles.hpp"
#include "sdnn/linear/op/dense_sparse.hpp"
#include "sdnn/linear/op/rows.cuh"
#include "sdnn/linear/vendor/cusparse.cuh"

namespace sdnn::ops {

namespace detail {
template <class P>
struct unwrap_skip {
  using type = P;
  static constexpr bool skip = false;
};
template <class I>
struct unwrap_skip<policy::skip_empty_rows<I, policy::skip_by::compact>> {
  using type = I;
  static constexpr bool skip = true;
};
template <class P>
inline constexpr bool is_csc_gather_v = false;
template <int R, int Th>
inline constexpr bool is_csc_gather_v<policy::csc_gather<R, Th>> = true;
template <class P>
inline constexpr bool is_csc_tiled_v = false;
template <int R, int Th>
inline constexpr bool is_csc_tiled_v<policy::csc_tiled<R, Th>> = true;
}  // namespace detail

// run() and run_rows() are const, enqueue on exec.stream and do not allocate, free or
// synchronise, except the two cuSPARSE baselines whose definition is to do so:
// cusparse_buffer_per_call allocates and frees its buffer on every run (stream-ordered), and
// cusparse_filter_rows reads the live count back (synchronises).
template <class Policy, class T>
class dense_sparse_plan {
  using unwrap = detail::unwrap_skip<Policy>;
  using inner = typename unwrap::type;
  static constexpr bool skip = unwrap::skip;
  static constexpr bool gather = detail::is_csc_gather_v<inner>;
  static constexpr bool tiled = detail::is_csc_tiled_v<inner>;
  static constexpr bool vendor = policy::is_cusparse_v<inner>;
  static_assert(gather || tiled || vendor,
                "dense_sparse_plan: no dense x sparse implementation for this policy (csc_gather, csc_tiled, "
                "cusparse_spmm, or skip_empty_rows of one of these)");
  static_assert(!(skip && vendor) || std::is_same_v<inner, policy::cusparse_spmm<>>,
                "dense_sparse_plan: skip_empty_rows wraps only cusparse_spmm<> (the filter-rows baseline)");
  static_assert(!(vendor && is_16bit_float_v<T>),
                "dense_sparse_plan: the cuSPARSE baselines take float, double or __half values, not sdnn::bf16 / "
                "sdnn::fp16; use csc_gather, csc_tiled or skip_empty_rows of one of them");

 public:
  using value_type = T;
  using acc_type = accumulator_t<T>;
  using policy_type = Policy;
  static constexpr bool uses_row_list = policy::dense_sparse_traits<Policy>::uses_row_list;
  static constexpr bool uses_tiles = policy::dense_sparse_traits<Policy>::uses_tiles;
  // Rows a plan sizes its workspace for when plan_options::max_rows is 0.
  static constexpr std::int64_t default_max_rows = 1024;

  static plan_status can_implement(std::int64_t k, std::int64_t n, std::int64_t nnz) {
    return dense_sparse_can_implement(k, n, nnz);
  }

  // W (k x n) on the host: transposed (and tiled) on the host, uploaded once on exec.stream.
  // Returns once the host data has been read (W may be destroyed).
  dense_sparse_plan(csr_matrix<T, std::int32_t> const& w, cuda_exec exec, plan_options opt = {})
      : dense_sparse_plan(checked(w.rows(), w.cols(), w.nnz()), exec, opt) {
    auto wt_host = transpose(w);
    if constexpr (tiled) build_tiles(wt_host.view(), runs_.owned(exec));
    wt_ = to_device(wt_host, runs_.owned(exec));
    make_vendor();
  }
  // W (k x n) in device memory: transposed on the device (CUB). csc_tiled policies download
  // W^T once to build their tiles on the host: this constructor then synchronises exec.stream.
  dense_sparse_plan(csr_matrix<T, std::int32_t, device_space> const& w, cuda_exec exec, plan_options opt = {})
      : dense_sparse_plan(transposed_weights, transpose(w, exec), exec, opt) {}
  // W (k x n) as a view of device memory (e.g. owned by the caller's own arrays): copied on
  // the device into a matrix the plan owns, then as above.
  dense_sparse_plan(csr_view<T, std::int32_t> w_device, cuda_exec exec, plan_options opt = {})
      : dense_sparse_plan(transposed_weights, transpose(checked_view(w_device), exec), exec, opt) {}
  // The same from W^T (n x k, device), which the plan takes over (its release then waits for the
  // plan's streams).
  struct transposed_weights_t {};
  static constexpr transposed_weights_t transposed_weights{};
  dense_sparse_plan(transposed_weights_t, csr_matrix<T, std::int32_t, device_space> wt, cuda_exec exec,
                    plan_options opt = {})
      : dense_sparse_plan(checked(wt.cols(), wt.rows(), wt.nnz()), exec, opt) {
    wt_ = std::move(wt);
    ::sdnn::detail::bind_record(wt_, runs_.record());
    if constexpr (tiled) {
      auto wt_host = to_host(wt_, exec);  // synchronises
      build_tiles(wt_host.view(), runs_.owned(exec));
    }
    make_vendor();
  }

  dense_sparse_plan(dense_sparse_plan&&) noexcept = default;
  dense_sparse_plan& operator=(dense_sparse_plan&&) noexcept = default;

  std::int64_t in_features() const noexcept { return k_; }
  std::int64_t out_features() const noexcept { return n_; }
  std::int64_t max_rows() const noexcept { return max_rows_; }
  // W^T (n x k CSR = W in CSC) on the device.
  csr_view<T, std::int32_t> wt() const { return wt_.view(); }
  // csc_tiled: whether the weights allowed footprint tiles (else csc_gather runs).
  bool tiles_ok() const noexcept { return tiles_ok_; }

  // Scratch of run() for up to max_rows() rows (0 for the policies that need none).
  std::size_t workspace_bytes() const noexcept { return workspace_bytes_for(max_rows_); }

  // Every row of c = epi(a * W); a.rows <= max_rows() when the policy needs workspace.
  template <class Acc>
  void run(cuda_exec exec, dense_view<T const> a, dense_view<T> c, basic_epilogue<Acc> const& epi,
           workspace ws = {}) const {
    check(a, c);
    SDNN_EXPECTS(a.rows <= INT32_MAX, "dense_sparse_plan: ", a.rows, " rows exceed the int32 row ids of the kernels");
    runs_.note(exec);
    if (a.rows == 0) return;
    auto const rows = static_cast<std::int32_t>(a.rows);
    if constexpr (skip) {
      if (!epi.zero_preserving()) return run_inner(exec, a, c, epi, listed_rows{nullptr, nullptr, rows}, nullptr, ws);
      auto s = scratch(ws, a.rows);
      kernels::dense_nonzero_rows(a, s.flags, exec);
      select_flagged(s.cub, cub_bytes_, nullptr, s.flags, s.list, s.count, rows, exec);
      SDNN_CUDA_CHECK(cudaMemset2DAsync(c.data, c.ld * sizeof(T), 0, c.cols * sizeof(T), c.rows, exec.stream));
      run_inner(exec, a, c, epi, listed_rows{s.list, s.count, rows}, nullptr, ws);
    } else {
      run_inner(exec, a, c, epi, listed_rows{nullptr, nullptr, rows}, nullptr, ws);
    }
  }

  // c[r] = epi(a[r] * W) for the listed rows only: rows.list (device, nullptr = rows
  // 0..max_live-1), rows.count (device scalar, nullptr = max_live), rows.max_live (an upper
  // bound of the count). flags (device, optional) gets flags[i] = 1 for each listed row i
  // whose output has a nonzero (never cleared: the caller zeroes it). Rows not listed are not
  // written. A listed row id indexes both a and c: c needs at least a.rows rows.
  template <class Acc>
  void run_rows(cuda_exec exec, dense_view<T const> a, dense_view<T> c, basic_epilogue<Acc> const& epi,
                listed_rows rows, int* flags, workspace ws = {}) const {
    SDNN_EXPECTS_DIMS(a.cols == k_ && c.cols == n_, "dense_sparse_plan: expected ", k_, " -> ", n_,
                      " features, got ", a.cols, " -> ", c.cols);
    SDNN_EXPECTS(rows.max_live >= 0 && (rows.list != nullptr || rows.max_live <= a.rows),
                 "dense_sparse_plan: max_live ", rows.max_live, " without a row list exceeds the ", a.rows,
                 " rows of A");
    SDNN_EXPECTS_DIMS(c.rows >= a.rows, "dense_sparse_plan: C has ", c.rows, " rows, fewer than the ", a.rows,
                      " rows of A (a listed row indexes both)");
    runs_.note(exec);
    run_inner(exec, a, c, epi, rows, flags, ws);
  }

 private:
  struct shape {
    std::int64_t k, n;
  };
  static csr_view<T, std::int32_t> checked_view(csr_view<T, std::int32_t> w) {
    auto const st = can_implement(w.rows, w.cols, w.nnz);
    if (!st) SDNN_FAIL(st.why());
    return w;
  }
  static shape checked(std::int64_t k, std::int64_t n, std::int64_t nnz) {
    auto const st = can_implement(k, n, nnz);
    if (!st) SDNN_FAIL(st.why());
    return {k, n};
  }
  dense_sparse_plan(shape s, cuda_exec exec, plan_options opt)
      : runs_(exec), k_(s.k), n_(s.n), own_workspace_(opt.own_workspace) {
    reserve(opt.max_rows > 0 ? opt.max_rows : default_max_rows, exec);
  }

 public:
  // Plan-time: makes the plan (and its own workspace) serve runs of up to max_rows rows; a
  // smaller value than the current one is a no-op. Allocates on exec.stream; the workspace it
  // replaces is released after the work of every stream the plan ran on.
  void reserve(std::int64_t max_rows, cuda_exec exec) {
    SDNN_EXPECTS(max_rows >= 0 && max_rows <= INT32_MAX, "dense_sparse_plan: max_rows ", max_rows,
                 " must be in [0, 2^31)");
    if (max_rows <= max_rows_) return;
    max_rows_ = max_rows;
    if constexpr (skip) cub_bytes_ = select_flagged_bytes(static_cast<std::int32_t>(max_rows_), exec);
    if (own_workspace_ && workspace_bytes() > own_.size())
      own_ = buffer<unsigned char, device_space>(workspace_bytes(), runs_.owned(exec));
  }

 private:
  std::size_t workspace_bytes_for(std::int64_t rows) const noexcept {
    using sdnn::detail::workspace_carver;
    auto const r = static_cast<std::size_t>(rows);
    std::size_t b = 0;
    if constexpr (skip) {
      b += workspace_carver::bytes_of<int>(r) + workspace_carver::bytes_of<std::int32_t>(r) +
           workspace_carver::bytes_of<std::int32_t>(1) + workspace_carver::bytes_of<unsigned char>(cub_bytes_);
      if constexpr (vendor)  // packed live rows of A and C
        b += workspace_carver::bytes_of<T>(r * static_cast<std::size_t>(k_)) +
             workspace_carver::bytes_of<T>(r * static_cast<std::size_t>(n_));
    }
    return b;
  }

  struct scratch_t {
    int* flags = nullptr;
    std::int32_t *list = nullptr, *count = nullptr;
    unsigned char* cub = nullptr;
    T *pack_a = nullptr, *pack_c = nullptr;
  };
  scratch_t scratch(workspace ws, std::int64_t rows) const {
    SDNN_EXPECTS(rows <= max_rows_, "dense_sparse_plan: ", rows, " rows, but the plan was made for at most ",
                 max_rows_, " (plan_options::max_rows)");
    if (ws.data == nullptr) {
      SDNN_EXPECTS(own_.size() > 0 || workspace_bytes() == 0,
                   "dense_sparse_plan: made without its own workspace (plan_options::own_workspace = false), "
                   "so run() needs a workspace of ", workspace_bytes(), " bytes");
      ws = workspace{const_cast<unsigned char*>(own_.data()), own_.size()};
    }
    SDNN_EXPECTS(ws.bytes >= workspace_bytes(), "dense_sparse_plan: workspace of ", ws.bytes, " bytes, need ",
                 workspace_bytes());
    sdnn::detail::workspace_carver cv(ws);
    auto const r = static_cast<std::size_t>(max_rows_);
    scratch_t s;
    s.flags = cv.take<int>(r);
    s.list = cv.take<std::int32_t>(r);
    s.count = cv.take<std::int32_t>(1);
    s.cub = cv.take<unsigned char>(cub_bytes_);
    if constexpr (vendor) {
      s.pack_a = cv.take<T>(r * static_cast<std::size_t>(k_));
      s.pack_c = cv.take<T>(r * static_cast<std::size_t>(n_));
    }
    return s;
  }
  void check(dense_view<T const> a, dense_view<T> c) const {
    SDNN_EXPECTS_DIMS(a.cols == k_ && c.rows == a.rows && c.cols == n_, "dense_sparse_plan(", policy::name<Policy>(),
                      "): A ", a.rows, " x ", a.cols, ", W ", k_, " x ", n_, ", C ", c.rows, " x ", c.cols);
  }

  template <class Acc>
  void run_inner(cuda_exec exec, dense_view<T const> a, dense_view<T> c, basic_epilogue<Acc> const& epi,
                 listed_rows rows, int* flags, workspace ws) const {
    if (rows.max_live == 0 || n_ == 0) return;
    if constexpr (gather) {
      kernels::dense_csc_spmm_flagged<inner::rows, inner::threads>(a, wt_.view(), c, epi, rows.list, rows.count,
                                                                  rows.max_live, flags, exec);
    } else if constexpr (tiled) {
      if (tiles_ok_)
        kernels::tiled_csc_spmm<inner::rows, inner::threads>(a, tiles_, c, epi, rows.list, rows.count, rows.max_live,
                                                             flags, exec);
      else
        kernels::dense_csc_spmm_flagged<inner::rows, inner::threads>(a, wt_.view(), c, epi, rows.list, rows.count,
                                                                    rows.max_live, flags, exec);
    } else if constexpr (!skip) {  // cuSPARSE on every row (no list)
      SDNN_EXPECTS(rows.list == nullptr && rows.count == nullptr, "dense_sparse_plan: policy ", policy::name<Policy>(),
                   " runs on every row and takes no row list");
      spmm_->run_rows(a, c, rows.max_live, epi, flags, exec);
    } else {  // cusparse_filter_rows: pack the listed rows, multiply the block, unpack
      std::int32_t live = rows.max_live;
      if (rows.count) {
        SDNN_CUDA_CHECK(cudaMemcpyAsync(&live, rows.count, sizeof live, cudaMemcpyDeviceToHost, exec.stream));
        SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
        live = std::min(live, rows.max_live);
      }
      if (live <= 0) return;
      if (rows.list == nullptr) return spmm_->run_rows(a, c, live, epi, flags, exec);
      auto s = scratch(ws, live);
      dense_view<T> pin{live, a.cols, a.cols, s.pack_a};
      dense_view<T> pout{live, c.cols, c.cols, s.pack_c};
      kernels::move_listed_rows<true>(a, rows.list, static_cast<std::int32_t const*>(nullptr), live, pin, exec);
      spmm_->run_rows(dense_view<T const>(pin), pout, live, epi, flags, exec);
      kernels::move_listed_rows<false>(dense_view<T const>(pout), rows.list, static_cast<std::int32_t const*>(nullptr),
                                       live, c, exec);
    }
  }

  // Footprint tiles of W^T (host), uploaded on exec.stream; the host arrays are read before
  // this returns (pageable copies are staged).
  void build_tiles(csr_view<T, std::int32_t> wt_host, cuda_exec exec) {
    csc_tiles_host<T> th;
    tiles_ok_ = build_csc_tiles(wt_host, inner::threads, inner::max_footprint, th);
    if (!tiles_ok_) return;
    auto up = [&](auto const& v) { return to_device(v.data(), v.size(), exec); };
    t_fp_ptr_ = up(th.fp_ptr);
    t_fp_ = up(th.fp);
    t_col_ptr_ = up(th.col_ptr);
    t_cols_ = up(th.cols);
    t_nnz_ptr_ = up(th.nnz_ptr);
    t_lidx_ = up(th.lidx);
    t_vals_ = up(th.vals);
    tiles_ = {th.n, th.k, th.tiles, th.max_footprint, t_fp_ptr_.data(), t_fp_.data(), t_col_ptr_.data(),
              t_cols_.data(), t_nnz_ptr_.data(), t_lidx_.data(), t_vals_.data()};
  }

  // The cuSPARSE baselines: one vendor plan on W^T (which it must not outlive: both are members).
  void make_vendor() {
    if constexpr (vendor) {
      constexpr auto mode = inner::buffer == policy::cusparse_buffer::per_call ? vendor::cusparse_workspace::per_call
                                                                                : vendor::cusparse_workspace::reuse;
      spmm_ = std::make_unique<vendor::cusparse_spmm_plan<T, std::int32_t>>(vendor::dense_times_sparse, wt_.view(), mode,
                                                                             inner::alg);
    }
  }

  // First: every buffer below is allocated through runs_.owned() (or bound to it).
  sdnn::detail::run_streams runs_;
  std::int64_t k_ = 0, n_ = 0, max_rows_ = 0;
  bool own_workspace_ = true;
  std::size_t cub_bytes_ = 0;
  csr_matrix<T, std::int32_t, device_space> wt_;  // W^T: n x k
  bool tiles_ok_ = false;
  buffer<std::int32_t, device_space> t_fp_ptr_, t_fp_, t_col_ptr_, t_cols_, t_nnz_ptr_;
  buffer<std::uint16_t, device_space> t_lidx_;
  buffer<T, device_space> t_vals_;
  csc_tiles_view<T> tiles_;
  // The vendor plan sizes its descriptors and (reuse) workspace at its first run and again when
  // the row count changes: mutable state of a baseline whose buffer policy is what it measures.
  mutable std::unique_ptr<vendor::cusparse_spmm_plan<T, std::int32_t>> spmm_;
  buffer<unsigned char, device_space> own_;  // the plan's own workspace (plan_options::own_workspace)
};

// C = epi(A * W) on the device, W (a view of device memory): makes a plan and runs it once.
template <class Policy, class TA, class T, class Acc = accumulator_t<T>>
void spmm_dense_sparse(cuda_exec exec, Policy, dense_view<TA> a, csr_view<T, std::int32_t> w, dense_view<T> c,
                       basic_epilogue<Acc> const& epi = {}) {
  static_assert(std::is_same_v<std::remove_const_t<TA>, T>, "spmm_dense_sparse: A and C must have the same value type");
  detail::check_dense_sparse_args(a, w, c);
  detail::check_dense_sparse_bias(epi, c);
  dense_sparse_plan<Policy, T> p(w, exec, plan_options{std::max<std::int64_t>(a.rows, 1), true});
  p.run(exec, dense_view<T const>{a.rows, a.cols, a.ld, a.data}, c, epi);
}

// W with another index type: refused at compile time (the plans transpose and tile W as a
// 32-bit CSR; tests/cuda/test_spmm_indices.cu says so).
template <class Policy, class TA, class T, class Index, class Acc = accumulator_t<T>,
          class = std::enable_if_t<!std::is_same_v<Index, std::int32_t>>>
void spmm_dense_sparse(cuda_exec, Policy, dense_view<TA>, csr_view<T, Index>, dense_view<T>,
                       basic_epilogue<Acc> const& = {}) {
  static_assert(std::is_same_v<Index, std::int32_t>,
                "ops::spmm_dense_sparse on cuda_exec: W must have 32-bit indices (csr_view<T, std::int32_t>)");
}

}  // namespace sdnn::ops
