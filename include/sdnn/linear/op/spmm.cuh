// sdnn/linear/op/spmm.cuh - cuda_exec implementations of ops::spmm and the reusable plans behind
// them: csr_spmm_plan, coo_spmm_plan, ell_spmm_plan and tiled_spmm_plan, one specialisation per
// policy, each following the protocol of core/plan.hpp. run() is const, enqueues on
// exec.stream and never allocates, frees or synchronises; plan-time synchronisation is noted
// at each plan. What each policy prepares, its workspace and the stream rules:
// docs/linear.md#plans. (The dense x sparse product Y * W is linear/op/dense_sparse.cuh.)
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/numeric.hpp"
#include "sdnn/core/plan.cuh"
#include "sdnn/formats/stats.hpp"
#include "sdnn/formats/convert.hpp"
#include "sdnn/linear/op/row_skip.cuh"
#include "sdnn/linear/kernel/spmm_coo.cuh"
#include "sdnn/linear/kernel/spmm_csr.cuh"
#include "sdnn/linear/kernel/spmm_csr_panels.cuh"
#include "sdnn/linear/kernel/spmm_ell.cuh"
#include "sdnn/linear/kernel/spmm_tiled.cuh"
#include "sdnn/linear/op/spmm.hpp"
#include "sdnn/linear/vendor/cusparse.cuh"
#include "sdnn/linear/vendor/cusparse_blocked_ell.cuh"

namespace sdnn::ops {

namespace detail {
// can_implement's shape checks (those of check_spmm_args but the data pointers: a plan is
// made from shapes, the buffers come with each run).
template <class T>
plan_status spmm_shape_status(std::int64_t m, std::int64_t k, dense_view<T const> b, dense_view<T> c,
                              char const* what) {
  using std::to_string;
  std::string const w = what;
  if (m < 0 || k < 0 || b.rows < 0 || b.cols < 0 || c.rows < 0 || c.cols < 0)
    return plan_status::failure(w + ": shapes must be non-negative");
  if (b.rows != k)
    return plan_status::failure(w + ": A is " + to_string(m) + " x " + to_string(k) + " but B has " +
                                to_string(b.rows) + " rows (expected " + to_string(k) + ")");
  if (c.rows != m || c.cols != b.cols)
    return plan_status::failure(w + ": C must be " + to_string(m) + " x " + to_string(b.cols) + ", got " +
                                to_string(c.rows) + " x " + to_string(c.cols));
  if (b.ld < b.cols || c.ld < c.cols)
    return plan_status::failure(w + ": leading dimensions must be >= cols, got " + to_string(b.ld) + ", " +
                                to_string(c.ld));
  return {};
}
// The row-split kernel puts one block per column slab on grid y (rows_in_x) or x, no loop.
template <class T, int U>
plan_status row_split_grid_status(std::int64_t n, bool rows_in_x, char const* what) {
  constexpr int slab = kernels::spmm_slab_columns<T, U>;
  std::int64_t const slabs = (n + slab - 1) / slab;
  if (slabs > (rows_in_x ? 65535 : 0x7fffffff))
    return plan_status::failure(std::string(what) + ": N = " + std::to_string(n) + " needs " + std::to_string(slabs) +
                                " column slabs, more than grid " + (rows_in_x ? "y's 65535 (use rows in y)" : "x's"));
  return {};
}
}  // namespace detail

// ---------------------------------------------------------------------------------------
// CSR (sparse x dense)
template <class Policy, class T, class Index>
class csr_spmm_plan {
  static_assert(::sdnn::detail::dependent_false<Policy, T>, "csr_spmm_plan: no CSR implementation for this policy");
};

// Row split: nothing to prepare; no workspace.
template <int U, int W, bool X, class T, class Index>
class csr_spmm_plan<policy::csr_row_split<U, W, X>, T, Index> {
 public:
  static plan_status can_implement(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c) {
    auto st = detail::spmm_shape_status(a.rows, a.cols, b, c, "spmm(csr_row_split)");
    return st ? detail::row_split_grid_status<T, U>(b.cols, X, "spmm(csr_row_split)") : st;
  }
  csr_spmm_plan(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, cuda_exec exec, plan_options = {})
      : a_(sdnn::detail::implementable(can_implement(a, b, c), a)), runs_(exec) {}
  std::size_t workspace_bytes() const noexcept { return 0; }
  template <class Acc>
  void run(cuda_exec exec, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
           workspace = {}) const {
    detail::check_spmm_args(a_.rows, a_.cols, b, c, "spmm(csr_row_split)");
    runs_.note(exec);
    kernels::spmm_csr_row_split<U, W>(a_, b, c, epi, static_cast<Index const*>(nullptr),
                                      static_cast<Index const*>(nullptr), a_.rows, X, exec);
  }

 private:
  csr_view<T, Index> a_;
  sdnn::detail::run_streams runs_;  // the streams it ran on (core/plan.cuh); it owns no device memory
};

// Staged B: nothing to prepare; no workspace.
template <int R, int KC, class T, class Index>
class csr_spmm_plan<policy::csr_staged_b<R, KC>, T, Index> {
 public:
  static plan_status can_implement(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c) {
    auto st = detail::spmm_shape_status(a.rows, a.cols, b, c, "spmm(csr_staged_b)");
    if (st && (a.rows + R - 1) / R > 65535)
      return plan_status::failure("spmm(csr_staged_b): " + std::to_string(a.rows) + " rows need " +
                                  std::to_string((a.rows + R - 1) / R) + " row blocks, more than the grid's 65535");
    return st;
  }
  csr_spmm_plan(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, cuda_exec exec, plan_options = {})
      : a_(sdnn::detail::implementable(can_implement(a, b, c), a)), runs_(exec) {}
  std::size_t workspace_bytes() const noexcept { return 0; }
  template <class Acc>
  void run(cuda_exec exec, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
           workspace = {}) const {
    detail::check_spmm_args(a_.rows, a_.cols, b, c, "spmm(csr_staged_b)");
    runs_.note(exec);
    kernels::spmm_csr_staged_b<R, KC>(a_, b, c, epi, static_cast<Index const*>(nullptr),
                                      static_cast<Index const*>(nullptr), a_.rows, exec);
  }

 private:
  csr_view<T, Index> a_;
  sdnn::detail::run_streams runs_;  // the streams it ran on (core/plan.cuh); it owns no device memory
};

// Panel order: A is re-sorted once here (device, stream-ordered, no host sync); run() is
// one kernel with the epilogue fused. No workspace.
template <int RW, int KC, int U, class T, class Index>
class csr_spmm_plan<policy::csr_panels<RW, KC, U>, T, Index> {
 public:
  static plan_status can_implement(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c) {
    auto st = detail::spmm_shape_status(a.rows, a.cols, b, c, "spmm(csr_panels)");
    if (!st) return st;
    std::int64_t const pw = kernels::detail::panel_warps;
    std::int64_t const row_blocks = (a.rows + pw * RW - 1) / (pw * RW);
    std::int64_t const segments = row_blocks * ((a.cols + KC - 1) / KC) * pw;
    if (row_blocks > 65535)
      return plan_status::failure("spmm(csr_panels): " + std::to_string(a.rows) + " rows need " +
                                  std::to_string(row_blocks) + " row blocks, more than the grid's 65535");
    if (static_cast<std::int64_t>(a.nnz) + segments >= (std::int64_t{1} << 31) - 1)
      return plan_status::failure("spmm(csr_panels): " + std::to_string(a.nnz) + " nonzeros + " +
                                  std::to_string(segments) + " segment sentinels exceed the 32-bit entry offsets");
    return {};
  }
  csr_spmm_plan(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, cuda_exec exec, plan_options = {})
      : runs_(exec), rows_(a.rows), cols_(a.cols),
        p_(sdnn::detail::implementable(can_implement(a, b, c), a), RW, KC, U, runs_.owned(exec)) {}
  std::size_t workspace_bytes() const noexcept { return 0; }
  template <class Acc>
  void run(cuda_exec exec, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
           workspace = {}) const {
    detail::check_spmm_args(rows_, cols_, b, c, "spmm(csr_panels)");
    runs_.note(exec);
    kernels::spmm_csr_panels<RW, KC, U>(p_, b, c, epi, exec);
  }

 private:
  sdnn::detail::run_streams runs_;  // first: p_ is allocated through runs_.owned() (core/plan.cuh)
  std::int64_t rows_, cols_;
  kernels::csr_panels p_;
};

// The CSR mask form: row_ptr already says which rows are empty, and the row-split kernel
// reads nothing of B for them (one epilogue store per empty row).
template <class Inner, class T, class Index>
class csr_spmm_plan<policy::skip_empty_rows_mask<Inner>, T, Index> : public csr_spmm_plan<Inner, T, Index> {
  using csr_spmm_plan<Inner, T, Index>::csr_spmm_plan;
};

// nnz-balanced: the cut into nnz shares is made on the device (thrust::lower_bound); the
// workspace is the float carry, caller-suppliable. Runs on different streams that share the
// plan's own workspace race: give each stream its own.
template <int U, int W, class T, class Index>
class csr_spmm_plan<policy::csr_nnz_balanced<U, W>, T, Index> {
 public:
  static plan_status can_implement(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c) {
    return detail::spmm_shape_status(a.rows, a.cols, b, c, "spmm(csr_nnz_balanced)");
  }
  // Shares of at least 32 nonzeros, as many as fill the GPU once the column slabs
  // multiply them (kernels::nnz_split_target_chunks); the carry (the workspace) is 2 rows of
  // N floats per share, independent of M and nnz. Rows longer than a share are split.
  csr_spmm_plan(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, cuda_exec exec, plan_options opt = {})
      : runs_(exec), a_(sdnn::detail::implementable(can_implement(a, b, c), a)),
        cut_(kernels::nnz_split_cut(a.nnz, kernels::nnz_split_target_chunks(b.cols, kernels::spmm_slab_columns<T, U>),
                                    32)),
        n_(b.cols), bounds_(static_cast<std::size_t>(cut_.chunks + 1), runs_.owned(exec)) {
    if (opt.own_workspace && workspace_bytes() > 0)
      own_ = buffer<unsigned char, device_space>(workspace_bytes(), runs_.owned(exec));
    if (a.rows > 0 && cut_.chunks > 0) kernels::csr_nnz_bounds(a, cut_.chunk, cut_.chunks, bounds_.data(), exec);
  }
  // The carry: every run writes all of it before reading (no initialisation needed).
  std::size_t workspace_bytes() const noexcept {
    return sdnn::detail::workspace_carver::bytes_of<float>(kernels::nnz_split_carry_elements(cut_.chunks, n_));
  }
  template <class Acc>
  void run(cuda_exec exec, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
           workspace ws = {}) const {
    detail::check_spmm_args(a_.rows, a_.cols, b, c, "spmm(csr_nnz_balanced)");
    SDNN_EXPECTS(b.cols <= n_, "spmm(csr_nnz_balanced): the plan's carry was sized for ", n_,
                 " columns, B has ", b.cols);
    auto const w = sdnn::detail::plan_workspace(ws, own_, workspace_bytes(), "spmm(csr_nnz_balanced)");
    runs_.note(exec);
    kernels::spmm_csr_nnz_balanced<U, W>(a_, b, c, epi, bounds_.data(), cut_.chunk, cut_.chunks,
                                         static_cast<float*>(w.data), exec);
  }

 private:
  sdnn::detail::run_streams runs_;  // first: the buffers are allocated through runs_.owned() (core/plan.cuh)
  csr_view<T, Index> a_;
  kernels::nnz_split_shape cut_;
  std::int64_t n_;
  buffer<Index, device_space> bounds_;
  buffer<unsigned char, device_space> own_;  // the plan's own workspace (plan_options::own_workspace)
};

// The CSR list form: the live/empty partition of A (ops::row_skip_plan) is plan data, as A is
// static; run() is the row-split kernel over the live rows, then the epi(0) fill of the empty
// ones. No workspace.
template <int U, int W, bool X, class T, class Index>
class csr_spmm_plan<policy::skip_empty_rows_compact<policy::csr_row_split<U, W, X>>, T, Index> {
 public:
  static plan_status can_implement(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c) {
    auto st = detail::spmm_shape_status(a.rows, a.cols, b, c, "spmm(skip_empty_rows_compact)");
    if (st) st = detail::row_split_grid_status<T, U>(b.cols, X, "spmm(skip_empty_rows_compact)");
    return st ? ops::row_skip_plan<Index>::can_implement(a.rows) : st;
  }
  // The partition of A is plan data; the row_skip_plan's CUB scratch is a plan-time temporary.
  csr_spmm_plan(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, cuda_exec exec, plan_options = {})
      : a_(sdnn::detail::implementable(can_implement(a, b, c), a)),
        skip_(a.rows, exec, plan_options{0, false}), runs_(exec) {
    buffer<unsigned char, device_space> tmp(skip_.workspace_bytes(), exec);
    skip_.run(exec, a, workspace{tmp.data(), tmp.size()});
  }
  std::size_t workspace_bytes() const noexcept { return 0; }
  template <class Acc>
  void run(cuda_exec exec, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
           workspace = {}) const {
    detail::check_spmm_args(a_.rows, a_.cols, b, c, "spmm(skip_empty_rows_compact)");
    runs_.note(exec);
    kernels::spmm_csr_row_split<U, W>(a_, b, c, epi, skip_.row_list(), skip_.num_live(), a_.rows, X, exec);
    skip_.fill_empty_rows(c, epi, exec);
  }
  ops::row_skip_plan<Index> const& skip() const noexcept { return skip_; }

 private:
  csr_view<T, Index> a_;
  ops::row_skip_plan<Index> skip_;  // keeps its own record (fill_empty_rows() notes each run's stream)
  sdnn::detail::run_streams runs_;  // the streams it ran on (core/plan.cuh)
};

// cuSPARSE baseline. The vendor plan (held mutable: it is not an ops plan and its run() is
// not const) owns cuSPARSE's external buffer, which is not caller-suppliable
// (workspace_bytes() is 0); runs on different streams share it.
template <policy::cusparse_alg Alg, class T, class Index>
class csr_spmm_plan<policy::cusparse_spmm<Alg>, T, Index> {
  static_assert(!is_16bit_float_v<T>,
                "csr_spmm_plan<cusparse_spmm>: the cuSPARSE baselines take float, double or __half values, not "
                "sdnn::bf16 / sdnn::fp16; use one of sdnn's own CSR policies");
 public:
  static plan_status can_implement(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c) {
    return detail::spmm_shape_status(a.rows, a.cols, b, c, "spmm(cusparse_spmm)");
  }
  csr_spmm_plan(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, cuda_exec exec, plan_options = {})
      : p_(sdnn::detail::implementable(can_implement(a, b, c), a), b, c, Alg, exec), runs_(exec) {}
  std::size_t workspace_bytes() const noexcept { return 0; }
  template <class Acc>
  void run(cuda_exec exec, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
           workspace = {}) const {
    runs_.note(exec);
    p_.run(b, c, epi, exec);
  }

 private:
  mutable vendor::cusparse_spmm_plan<T, Index> p_;  // keeps its own record for its buffer
  sdnn::detail::run_streams runs_;                   // the streams it ran on (core/plan.cuh)
};

namespace detail {
template <class T, class Index>
struct csr_runner {
  virtual ~csr_runner() = default;
  virtual std::size_t workspace_bytes() const noexcept = 0;
  virtual void run(cuda_exec exec, dense_view<T const> b, dense_view<T> c, basic_epilogue<accumulator_t<T>> const& epi,
                   workspace ws) const = 0;
};
template <class Policy, class T, class Index>
struct csr_runner_of final : csr_runner<T, Index> {
  csr_spmm_plan<Policy, T, Index> plan;
  csr_runner_of(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, cuda_exec exec, plan_options opt)
      : plan(a, b, c, exec, opt) {}
  std::size_t workspace_bytes() const noexcept override { return plan.workspace_bytes(); }
  void run(cuda_exec exec, dense_view<T const> b, dense_view<T> c, basic_epilogue<accumulator_t<T>> const& epi,
           workspace ws) const override {
    plan.run(exec, b, c, epi, ws);
  }
};
}  // namespace detail

template <class Policy, class T>
class tiled_spmm_plan;  // below; the automatic plan asks its can_implement

// policy::automatic: statistics of A (host copy of its structure; SYNCHRONISES once at plan
// time), policy::decide_spmm (the rules' choice if its plan's can_implement accepts A, B, C and
// its memory fits t.plan_memory_fraction of the free device memory, else the next one), then
// the chosen plan (made with the same plan_options). choice() says what was taken, reason()
// why. run() takes the accumulator type's epilogue only (the chosen plan runs behind a
// virtual call).
template <class T, class Index>
class csr_spmm_plan<policy::automatic, T, Index> {
 public:
  static plan_status can_implement(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c) {
    return detail::spmm_shape_status(a.rows, a.cols, b, c, "spmm(automatic)");
  }
  // t: the tuning table of the current device unless given (linear/policy/tuning.hpp).
  csr_spmm_plan(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, cuda_exec e, plan_options opt = {},
                policy::automatic_thresholds const& t = policy::tuning_for(::sdnn::detail::current_arch()))
      : runs_(e) {
    sdnn::detail::implementable(can_implement(a, b, c), a);
    csr_matrix<T, Index> h(a.rows, a.cols, a.nnz);
    SDNN_CUDA_CHECK(cudaMemcpyAsync(h.row_ptr().data(), a.row_ptr, sizeof(Index) * (static_cast<std::size_t>(a.rows) + 1),
                                    cudaMemcpyDeviceToHost, e.stream));
    if (a.nnz > 0)
      SDNN_CUDA_CHECK(cudaMemcpyAsync(h.col_idx().data(), a.col_idx, sizeof(Index) * static_cast<std::size_t>(a.nnz),
                                      cudaMemcpyDeviceToHost, e.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));
    stats_ = compute_stats(h, 32, 32, host_exec{});
    policy::spmm_resources r;
    r.n = b.cols;
    r.value_bytes = sizeof(T);
    r.index_bytes = sizeof(Index);
    r.panel_rows_per_warp = std::is_same_v<T, float> ? 16 : 8;  // as the csr_panels case below
    r.sms = ::sdnn::detail::sm_count();
    std::size_t free_b = 0, total_b = 0;
    SDNN_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    r.budget_bytes = t.plan_memory_fraction * static_cast<double>(free_b);
    auto d = policy::decide_spmm(stats_, r, t, [&](policy::spmm_choice ch) { return choice_status(ch, a, b, c); });
    choice_ = d.choice;
    reason_ = std::move(d.reason);
    if (choice_ == policy::spmm_choice::tiled_dense) {
      // Tiles are built on the host from A (values copied too) and uploaded once.
      if (a.nnz > 0)
        SDNN_CUDA_CHECK(cudaMemcpyAsync(h.values().data(), a.values, sizeof(T) * static_cast<std::size_t>(a.nnz),
                                        cudaMemcpyDeviceToHost, e.stream));
      SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));
      auto ht = to_tiled_dense(h, 32, 32);
      cuda_exec const owned = runs_.owned(e);  // the copy waits for every stream the plan ran on when released
      tiled_ = tiled_dense_matrix<T, device_space>(ht.rows(), ht.cols(), 32, 32, owned);
      copy(tiled_.values(), ht.values(), e);
      copy(tiled_.occupied(), ht.occupied(), e);
      copy(tiled_.tile_row_ptr(), ht.tile_row_ptr(), e);
      tiled_.tile_col() = copy_to<device_space>(ht.tile_col(), owned);
      return;
    }
    switch (choice_) {
      case policy::spmm_choice::csr_nnz_balanced:
        impl_ = std::make_unique<detail::csr_runner_of<policy::csr_nnz_balanced<>, T, Index>>(a, b, c, e, opt);
        break;
      case policy::spmm_choice::csr_staged_b:
        impl_ = std::make_unique<detail::csr_runner_of<policy::csr_staged_b<>, T, Index>>(a, b, c, e, opt);
        break;
      case policy::spmm_choice::csr_panels:  // 16 x 4 float accumulators per lane; __half: 16 x 8 spill
        if constexpr (std::is_same_v<T, float>)
          impl_ = std::make_unique<detail::csr_runner_of<policy::csr_panels<16, 64, 1>, T, Index>>(a, b, c, e, opt);
        else
          impl_ = std::make_unique<detail::csr_runner_of<policy::csr_panels<8, 64, 1>, T, Index>>(a, b, c, e, opt);
        break;
      case policy::spmm_choice::csr_skip_empty_compact:
        impl_ = std::make_unique<
            detail::csr_runner_of<policy::skip_empty_rows_compact<policy::csr_row_split<>>, T, Index>>(a, b, c, e, opt);
        break;
      case policy::spmm_choice::csr_row_split_rows_in_x:
        impl_ = std::make_unique<detail::csr_runner_of<policy::csr_row_split<1, 4, true>, T, Index>>(a, b, c, e, opt);
        break;
      default:  // row-split, one 16-byte vector per lane (bench_spmm: at or above <2,4> nearly everywhere)
        impl_ = std::make_unique<detail::csr_runner_of<policy::csr_row_split<1, 4>, T, Index>>(a, b, c, e, opt);
    }
  }
  std::size_t workspace_bytes() const noexcept { return impl_ ? impl_->workspace_bytes() : 0; }
  void run(cuda_exec exec, dense_view<T const> b, dense_view<T> c, basic_epilogue<accumulator_t<T>> const& epi,
           workspace ws = {}) const {
    runs_.note(exec);
    if (choice_ == policy::spmm_choice::tiled_dense) {
      tiled_dense_view<T const> tv = tiled_.view();
      detail::check_spmm_args(tv.rows, tv.cols, b, c, "spmm(automatic: tiled_dense)");
      kernels::spmm_tiled_dense(tv, b, c, epi, exec);
    } else {
      impl_->run(exec, b, c, epi, ws);
    }
  }
  policy::spmm_choice choice() const noexcept { return choice_; }
  // Why: "<choice>: the rules' first choice", or each faster-looking path passed over and why
  // ("csr_row_split<1,4,rows_in_x>: tiled_dense_spmm rejected: spmm(tiled_dense): 93750 ...").
  std::string const& reason() const noexcept { return reason_; }
  matrix_stats const& stats() const noexcept { return stats_; }

 private:
  // The can_implement of the plan the constructor builds for choice ch (tiled-dense: of the
  // 32 x 32 tiled copy it would build).
  static plan_status choice_status(policy::spmm_choice ch, csr_view<T, Index> a, dense_view<T const> b,
                                   dense_view<T> c) {
    using P = policy::spmm_choice;
    switch (ch) {
      case P::tiled_dense: {
        tiled_dense_view<T const> tv;
        tv.rows = a.rows;
        tv.cols = a.cols;
        tv.grid_rows = (static_cast<std::int64_t>(a.rows) + 31) / 32;
        tv.grid_cols = (static_cast<std::int64_t>(a.cols) + 31) / 32;
        return tiled_spmm_plan<policy::tiled_dense_spmm, T>::can_implement(tv, b, c);
      }
      case P::csr_nnz_balanced: return csr_spmm_plan<policy::csr_nnz_balanced<>, T, Index>::can_implement(a, b, c);
      case P::csr_staged_b: return csr_spmm_plan<policy::csr_staged_b<>, T, Index>::can_implement(a, b, c);
      case P::csr_panels:
        if constexpr (std::is_same_v<T, float>)
          return csr_spmm_plan<policy::csr_panels<16, 64, 1>, T, Index>::can_implement(a, b, c);
        else
          return csr_spmm_plan<policy::csr_panels<8, 64, 1>, T, Index>::can_implement(a, b, c);
      case P::csr_skip_empty_compact:
        return csr_spmm_plan<policy::skip_empty_rows_compact<policy::csr_row_split<>>, T, Index>::can_implement(
            a, b, c);
      case P::csr_row_split_rows_in_x:
        return csr_spmm_plan<policy::csr_row_split<1, 4, true>, T, Index>::can_implement(a, b, c);
      default: return csr_spmm_plan<policy::csr_row_split<1, 4>, T, Index>::can_implement(a, b, c);
    }
  }

  matrix_stats stats_;
  policy::spmm_choice choice_ = policy::spmm_choice::csr_row_split;
  std::string reason_;
  std::unique_ptr<detail::csr_runner<T, Index>> impl_;
  tiled_dense_matrix<T, device_space> tiled_;
  sdnn::detail::run_streams runs_;  // the streams its tiled copy waits for when released
};

// ---------------------------------------------------------------------------------------
// COO, ELL, tiled-dense
template <class Policy, class T, class Index>
class coo_spmm_plan {
  static_assert(::sdnn::detail::dependent_false<Policy, T>, "coo_spmm_plan: no COO implementation for this policy");
};

template <int E, int U, class T, class Index>
class coo_spmm_plan<policy::coo_nnz_split<E, U>, T, Index> {
 public:
  static_assert(E >= 1, "coo_nnz_split: at least one entry per warp");
  static plan_status can_implement(coo_view<T, Index> a, dense_view<T const> b, dense_view<T> c) {
    return detail::spmm_shape_status(a.rows, a.cols, b, c, "spmm(coo_nnz_split)");
  }
  // Chunks of E entries, grown when nnz / E chunks would be more than fill the GPU
  // (kernels::nnz_split_target_chunks), so the carry (the workspace: 2 rows of N floats per
  // chunk) stays bounded however large nnz is.
  coo_spmm_plan(coo_view<T, Index> a, dense_view<T const> b, dense_view<T> c, cuda_exec exec, plan_options opt = {})
      : a_(sdnn::detail::implementable(can_implement(a, b, c), a)),
        cut_(kernels::nnz_split_cut(a.nnz, kernels::nnz_split_target_chunks(b.cols, kernels::spmm_slab_columns<T, U>),
                                    E)),
        n_(b.cols), runs_(exec) {
    if (opt.own_workspace && workspace_bytes() > 0)
      own_ = buffer<unsigned char, device_space>(workspace_bytes(), runs_.owned(exec));
  }
  // The carry: every run writes all of it before reading (no initialisation needed).
  std::size_t workspace_bytes() const noexcept {
    return sdnn::detail::workspace_carver::bytes_of<float>(kernels::nnz_split_carry_elements(cut_.chunks, n_));
  }
  template <class Acc>
  void run(cuda_exec exec, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
           workspace ws = {}) const {
    detail::check_spmm_args(a_.rows, a_.cols, b, c, "spmm(coo_nnz_split)");
    SDNN_EXPECTS(b.cols <= n_, "spmm(coo_nnz_split): the plan's carry was sized for ", n_, " columns, B has ",
                 b.cols);
    auto const w = sdnn::detail::plan_workspace(ws, own_, workspace_bytes(), "spmm(coo_nnz_split)");
    runs_.note(exec);
    kernels::spmm_coo_nnz_split<U>(a_, b, c, epi, cut_, static_cast<float*>(w.data), exec);
  }

 private:
  coo_view<T, Index> a_;
  kernels::nnz_split_shape cut_;
  std::int64_t n_;
  buffer<unsigned char, device_space> own_;  // the plan's own workspace, allocated through runs_.owned()
  sdnn::detail::run_streams runs_;           // the streams it ran on (core/plan.cuh)
};

// cuSPARSE baseline (see the CSR one).
template <policy::cusparse_alg Alg, class T, class Index>
class coo_spmm_plan<policy::cusparse_spmm<Alg>, T, Index> {
  static_assert(!is_16bit_float_v<T>,
                "coo_spmm_plan<cusparse_spmm>: the cuSPARSE baselines take float, double or __half values, not "
                "sdnn::bf16 / sdnn::fp16; use one of sdnn's own COO (coo_nnz_split) policies");
 public:
  static plan_status can_implement(coo_view<T, Index> a, dense_view<T const> b, dense_view<T> c) {
    return detail::spmm_shape_status(a.rows, a.cols, b, c, "spmm(cusparse_spmm)");
  }
  coo_spmm_plan(coo_view<T, Index> a, dense_view<T const> b, dense_view<T> c, cuda_exec exec, plan_options = {})
      : p_(sdnn::detail::implementable(can_implement(a, b, c), a), b, c, Alg, exec), runs_(exec) {}
  std::size_t workspace_bytes() const noexcept { return 0; }
  template <class Acc>
  void run(cuda_exec exec, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
           workspace = {}) const {
    runs_.note(exec);
    p_.run(b, c, epi, exec);
  }

 private:
  mutable vendor::cusparse_spmm_plan<T, Index> p_;  // keeps its own record for its buffer
  sdnn::detail::run_streams runs_;                   // the streams it ran on (core/plan.cuh)
};

template <class Policy, class T, class Index>
class ell_spmm_plan {
  static_assert(::sdnn::detail::dependent_false<Policy, T>, "ell_spmm_plan: no ELL implementation for this policy");
};
// ELL row split: nothing to prepare; no workspace.
template <int U, int W, class T, class Index>
class ell_spmm_plan<policy::ell_row_split<U, W>, T, Index> {
 public:
  static plan_status can_implement(ell_view<T, Index> a, dense_view<T const> b, dense_view<T> c) {
    return detail::spmm_shape_status(a.rows, a.cols, b, c, "spmm(ell_row_split)");
  }
  ell_spmm_plan(ell_view<T, Index> a, dense_view<T const> b, dense_view<T> c, cuda_exec exec, plan_options = {})
      : a_(sdnn::detail::implementable(can_implement(a, b, c), a)), runs_(exec) {}
  std::size_t workspace_bytes() const noexcept { return 0; }
  template <class Acc>
  void run(cuda_exec exec, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
           workspace = {}) const {
    detail::check_spmm_args(a_.rows, a_.cols, b, c, "spmm(ell_row_split)");
    runs_.note(exec);
    kernels::spmm_ell_row_split<U, W>(a_, b, c, epi, exec);
  }

 private:
  ell_view<T, Index> a_;
  sdnn::detail::run_streams runs_;  // the streams it ran on (core/plan.cuh); it owns no device memory
};

template <class Policy, class T>
class tiled_spmm_plan {
  static_assert(::sdnn::detail::dependent_false<Policy, T>,
                "tiled_spmm_plan: no tiled-dense implementation for this policy");
};
// Tiled dense: nothing to prepare; no workspace.
template <class T>
class tiled_spmm_plan<policy::tiled_dense_spmm, T> {
 public:
  static plan_status can_implement(tiled_dense_view<T const> a, dense_view<T const> b, dense_view<T> c) {
    auto st = detail::spmm_shape_status(a.rows, a.cols, b, c, "spmm(tiled_dense_spmm)");
    if (!st) return st;
    if (a.tile_rows != kernels::detail::tiled_spmm_tile || a.tile_cols != kernels::detail::tiled_spmm_tile)
      return plan_status::failure("spmm(tiled_dense): only 32 x 32 tiles are compiled, got " +
                                  std::to_string(a.tile_rows) + " x " + std::to_string(a.tile_cols));
    if (a.grid_rows > 65535)
      return plan_status::failure("spmm(tiled_dense): " + std::to_string(a.grid_rows) +
                                  " tile rows exceed the grid limit 65535");
    return {};
  }
  tiled_spmm_plan(tiled_dense_view<T const> a, dense_view<T const> b, dense_view<T> c, cuda_exec exec,
                  plan_options = {})
      : a_(sdnn::detail::implementable(can_implement(a, b, c), a)), runs_(exec) {}
  std::size_t workspace_bytes() const noexcept { return 0; }
  template <class Acc>
  void run(cuda_exec exec, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
           workspace = {}) const {
    detail::check_spmm_args(a_.rows, a_.cols, b, c, "spmm(tiled_dense_spmm)");
    runs_.note(exec);
    kernels::spmm_tiled_dense(a_, b, c, epi, exec);
  }

 private:
  tiled_dense_view<T const> a_;
  sdnn::detail::run_streams runs_;  // the streams it ran on (core/plan.cuh); it owns no device memory
};

// cuSPARSE Blocked-ELL baseline (linear/vendor/cusparse_blocked_ell.cuh): square tiles, M and K
// multiples of the tile size; the epilogue runs as a separate pass. default_alg is
// cuSPARSE's default for Blocked-ELL, which is BLOCKED_ELL_ALG1. The vendor plan (held
// mutable) owns the Blocked-ELL copy of A, built on the device (SYNCHRONISES exec.stream once
// at plan time), and cuSPARSE's buffer (as for CSR).
template <policy::cusparse_alg Alg, class T>
class tiled_spmm_plan<policy::cusparse_spmm<Alg>, T> {
  static_assert(!is_16bit_float_v<T>,
                "tiled_spmm_plan<cusparse_spmm>: the cuSPARSE baselines take float, double or __half values, not "
                "sdnn::bf16 / sdnn::fp16; use one of sdnn's own tiled (tiled_dense_spmm) policies");
  static_assert(Alg == policy::cusparse_alg::blocked_ell_alg1 || Alg == policy::cusparse_alg::default_alg,
                "tiled_spmm_plan: cuSPARSE takes tiled-dense as Blocked-ELL only (blocked_ell_alg1)");

 public:
  // The vendor plan's own checks (it repeats them, with the same words).
  static plan_status can_implement(tiled_dense_view<T const> a, dense_view<T const> b, dense_view<T> c) {
    using std::to_string;
    if (a.tile_rows <= 0 || a.tile_rows != a.tile_cols)
      return plan_status::failure(
          "cusparse Blocked-ELL: tiles must be square (the Blocked-ELL block is ellBlockSize x ellBlockSize), got " +
          to_string(a.tile_rows) + " x " + to_string(a.tile_cols) + " tiles");
    if (a.rows % a.tile_rows != 0 || a.cols % a.tile_rows != 0)
      return plan_status::failure("cusparse Blocked-ELL: A's rows and columns must be multiples of the tile size " +
                                  to_string(a.tile_rows) + " (Blocked-ELL has no partial blocks), A is " +
                                  to_string(a.rows) + " x " + to_string(a.cols));
    if (a.grid_cols > std::numeric_limits<std::int32_t>::max())
      return plan_status::failure("cusparse Blocked-ELL: " + to_string(a.grid_cols) +
                                  " tile columns do not fit 32-bit block column indices");
    return detail::spmm_shape_status(a.rows, a.cols, b, c, "spmm(cusparse Blocked-ELL)");
  }
  tiled_spmm_plan(tiled_dense_view<T const> a, dense_view<T const> b, dense_view<T> c, cuda_exec exec,
                  plan_options = {})
      : p_(sdnn::detail::implementable(can_implement(a, b, c), a), b, c, exec), runs_(exec) {}
  std::size_t workspace_bytes() const noexcept { return 0; }
  template <class Acc>
  void run(cuda_exec exec, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
           workspace = {}) const {
    runs_.note(exec);
    p_.run(b, c, epi, exec);
  }
  vendor::cusparse_blocked_ell_plan<T> const& vendor_plan() const noexcept { return p_; }

 private:
  mutable vendor::cusparse_blocked_ell_plan<T> p_;  // keeps its own record for its buffers
  sdnn::detail::run_streams runs_;                   // the streams it ran on (core/plan.cuh)
};

// ---------------------------------------------------------------------------------------
// One-shot dispatch for ops::spmm on the device.
template <class Policy>
struct spmm_impl<cuda_exec, Policy> {
  template <class T, class Index, class Acc>
  static void run(cuda_exec e, csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c,
                  basic_epilogue<Acc> const& epi) {
    csr_spmm_plan<Policy, T, Index> p(a, b, c, e);
    p.run(e, b, c, epi);
  }
  template <class T, class Index, class Acc>
  static void run(cuda_exec e, coo_view<T, Index> a, dense_view<T const> b, dense_view<T> c,
                  basic_epilogue<Acc> const& epi) {
    coo_spmm_plan<Policy, T, Index> p(a, b, c, e);
    p.run(e, b, c, epi);
  }
  template <class T, class Index, class Acc>
  static void run(cuda_exec e, ell_view<T, Index> a, dense_view<T const> b, dense_view<T> c,
                  basic_epilogue<Acc> const& epi) {
    ell_spmm_plan<Policy, T, Index> p(a, b, c, e);
    p.run(e, b, c, epi);
  }
  template <class T, class Acc>
  static void run(cuda_exec e, tiled_dense_view<T const> a, dense_view<T const> b, dense_view<T> c,
                  basic_epilogue<Acc> const& epi) {
    tiled_spmm_plan<Policy, T> p(a, b, c, e);
    p.run(e, b, c, epi);
  }
};

}  // namespace sdnn::ops
