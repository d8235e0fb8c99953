// sdnn/ops/spmm.cuh - cuda_exec implementations of ops::spmm and the reusable plans behind
// them (the dense x sparse product Y * W is ops/dense_sparse.cuh).
//
// A plan is built once for one sparse operand (inference weights are static) and one
// (B, C) shape, then run() many times on any stream; plans never synchronise except
// where noted:
//   csr_spmm_plan<Policy, T, Index>:
//     csr_row_split<U, W>                    nothing to prepare
//     csr_nnz_balanced<U, W>                 nnz-share cut (thrust::lower_bound), device;
//                                            float carry (2 rows of N per share)
//     csr_panels<RW, KC, U>                  A re-sorted into panels (cub radix sort), device
//     skip_empty_rows_mask<csr_row_split>    the CSR row_ptr is the mask: same kernel
//     skip_empty_rows_compact<csr_row_split> live/empty partition (cub), device
//     cusparse_spmm<Alg>                     descriptors + external buffer, reused
//     automatic                              copies A's structure to the host
//                                            (SYNCHRONISES exec.stream at plan time),
//                                            computes matrix_stats, picks with
//                                            policy::choose_spmm and the tuning
//                                            table of the current device, builds that plan
//   coo_spmm_plan:   coo_nnz_split<E, U> (float carry, 2 rows of N per chunk), cusparse_spmm<Alg>
//   ell_spmm_plan:   ell_row_split<U, W>
//   tiled_spmm_plan: tiled_dense_spmm, cusparse_spmm<blocked_ell_alg1> (Blocked-ELL copy of A
//                    built on the device; SYNCHRONISES exec.stream once at plan time)
// (dense x sparse: ops/dense_sparse.cuh)
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/formats/stats.hpp"
#include "sdnn/formats/convert.hpp"
#include "sdnn/ops/row_skip.cuh"
#include "sdnn/kernels/spmm_coo.cuh"
#include "sdnn/kernels/spmm_csr.cuh"
#include "sdnn/kernels/spmm_csr_panels.cuh"
#include "sdnn/kernels/spmm_ell.cuh"
#include "sdnn/kernels/spmm_tiled.cuh"
#include "sdnn/ops/spmm.hpp"
#include "sdnn/vendor/cusparse.cuh"
#include "sdnn/vendor/cusparse_blocked_ell.cuh"

namespace sdnn::ops {

// ---------------------------------------------------------------------------------------
// CSR (sparse x dense)
template <class Policy, class T, class Index>
class csr_spmm_plan {
  static_assert(::sdnn::detail::dependent_false<Policy, T>, "csr_spmm_plan: no CSR implementation for this policy");
};

template <int U, int W, bool X, class T, class Index>
class csr_spmm_plan<policy::csr_row_split<U, W, X>, T, Index> {
 public:
  csr_spmm_plan(csr_view<T, Index> a, dense_view<T const>, dense_view<T>, cuda_exec) : a_(a) {}
  template <class Acc>
  void run(dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi, cuda_exec e) const {
    detail::check_spmm_args(a_.rows, a_.cols, b, c, "spmm(csr_row_split)");
    kernels::spmm_csr_row_split<U, W>(a_, b, c, epi, static_cast<Index const*>(nullptr),
                                      static_cast<Index const*>(nullptr), a_.rows, X, e);
  }

 private:
  csr_view<T, Index> a_;
};

template <int R, int KC, class T, class Index>
class csr_spmm_plan<policy::csr_staged_b<R, KC>, T, Index> {
 public:
  csr_spmm_plan(csr_view<T, Index> a, dense_view<T const>, dense_view<T>, cuda_exec) : a_(a) {}
  template <class Acc>
  void run(dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi, cuda_exec e) const {
    detail::check_spmm_args(a_.rows, a_.cols, b, c, "spmm(csr_staged_b)");
    kernels::spmm_csr_staged_b<R, KC>(a_, b, c, epi, static_cast<Index const*>(nullptr),
                                      static_cast<Index const*>(nullptr), a_.rows, e);
  }

 private:
  csr_view<T, Index> a_;
};

// Panel order: A is re-sorted once here (device, stream-ordered, no host sync); run() is
// one kernel with the epilogue fused.
template <int RW, int KC, int U, class T, class Index>
class csr_spmm_plan<policy::csr_panels<RW, KC, U>, T, Index> {
 public:
  csr_spmm_plan(csr_view<T, Index> a, dense_view<T const>, dense_view<T>, cuda_exec e)
      : rows_(a.rows), cols_(a.cols), p_(a, RW, KC, U, e) {}
  template <class Acc>
  void run(dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi, cuda_exec e) const {
    detail::check_spmm_args(rows_, cols_, b, c, "spmm(csr_panels)");
    kernels::spmm_csr_panels<RW, KC, U>(p_, b, c, epi, e);
  }

 private:
  std::int64_t rows_, cols_;
  kernels::csr_panels p_;
};

// The CSR mask form: row_ptr already says which rows are empty, and the row-split kernel
// reads nothing of B for them (one epilogue store per empty row).
template <class Inner, class T, class Index>
class csr_spmm_plan<policy::skip_empty_rows_mask<Inner>, T, Index> : public csr_spmm_plan<Inner, T, Index> {
  using csr_spmm_plan<Inner, T, Index>::csr_spmm_plan;
};

template <int U, int W, class T, class Index>
class csr_spmm_plan<policy::csr_nnz_balanced<U, W>, T, Index> {
 public:
  // Shares of at least 32 nonzeros, as many as fill the GPU once the column slabs
  // multiply them (kernels::nnz_split_target_chunks); the carry is 2 rows of N floats per
  // share, independent of M and nnz. Rows longer than a share are split.
  csr_spmm_plan(csr_view<T, Index> a, dense_view<T const> b, dense_view<T>, cuda_exec e)
      : a_(a),
        cut_(kernels::nnz_split_cut(a.nnz, kernels::nnz_split_target_chunks(b.cols, kernels::spmm_slab_columns<T, U>),
                                    32)),
        n_(b.cols), bounds_(static_cast<std::size_t>(cut_.chunks + 1), e),
        carry_(kernels::nnz_split_carry_elements(cut_.chunks, b.cols), e) {
    if (a.rows > 0 && cut_.chunks > 0) kernels::csr_nnz_bounds(a, cut_.chunk, cut_.chunks, bounds_.data(), e);
  }
  // Writes the plan's carry buffer: runs of one plan must not overlap (one stream at a time).
  template <class Acc>
  void run(dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi, cuda_exec e) {
    detail::check_spmm_args(a_.rows, a_.cols, b, c, "spmm(csr_nnz_balanced)");
    SDNN_EXPECTS(b.cols <= n_, "spmm(csr_nnz_balanced): the plan's carry was sized for ", n_,
                 " columns, B has ", b.cols);
    kernels::spmm_csr_nnz_balanced<U, W>(a_, b, c, epi, bounds_.data(), cut_.chunk, cut_.chunks, carry_.data(),
                                         e);
  }

 private:
  csr_view<T, Index> a_;
  kernels::nnz_split_shape cut_;
  std::int64_t n_;
  buffer<Index, device_space> bounds_;
  buffer<float, device_space> carry_;
};

template <int U, int W, bool X, class T, class Index>
class csr_spmm_plan<policy::skip_empty_rows_compact<policy::csr_row_split<U, W, X>>, T, Index> {
 public:
  csr_spmm_plan(csr_view<T, Index> a, dense_view<T const>, dense_view<T>, cuda_exec e) : a_(a), skip_(a, e) {}
  template <class Acc>
  void run(dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi, cuda_exec e) const {
    detail::check_spmm_args(a_.rows, a_.cols, b, c, "spmm(skip_empty_rows_compact)");
    kernels::spmm_csr_row_split<U, W>(a_, b, c, epi, skip_.row_list(), skip_.num_live(), a_.rows, X, e);
    skip_.fill_empty_rows(c, epi, e.stream);
  }
  ops::row_skip_plan<Index> const& skip() const noexcept { return skip_; }

 private:
  csr_view<T, Index> a_;
  ops::row_skip_plan<Index> skip_;
};

template <policy::cusparse_alg Alg, class T, class Index>
class csr_spmm_plan<policy::cusparse_spmm<Alg>, T, Index> {
 public:
  csr_spmm_plan(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, cuda_exec e) : p_(a, b, c, Alg, e) {}
  template <class Acc>
  void run(dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi, cuda_exec e) {
    p_.run(b, c, epi, e);
  }

 private:
  vendor::cusparse_spmm_plan<T, Index> p_;
};

namespace detail {
template <class T, class Index>
struct csr_runner {
  virtual ~csr_runner() = default;
  virtual void run(dense_view<T const> b, dense_view<T> c, basic_epilogue<accumulator_t<T>> const& epi,
                   cuda_exec e) = 0;
};
template <class Policy, class T, class Index>
struct csr_runner_of final : csr_runner<T, Index> {
  csr_spmm_plan<Policy, T, Index> plan;
  csr_runner_of(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, cuda_exec e) : plan(a, b, c, e) {}
  void run(dense_view<T const> b, dense_view<T> c, basic_epilogue<accumulator_t<T>> const& epi,
           cuda_exec e) override {
    plan.run(b, c, epi, e);
  }
};
template <class T>
struct tiled_runner_base {
  virtual ~tiled_runner_base() = default;
};
}  // namespace detail

// policy::automatic: statistics of A (host copy of its structure; synchronises once at
// plan time), policy::choose_spmm, then the chosen plan. choice() says what was taken.
template <class T, class Index>
class csr_spmm_plan<policy::automatic, T, Index> {
 public:
  // t: the tuning table of the current device unless given (policies/tuning.hpp).
  csr_spmm_plan(csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c, cuda_exec e,
                policy::automatic_thresholds const& t = policy::tuning_for(::sdnn::detail::current_arch())) {
    csr_matrix<T, Index> h(a.rows, a.cols, a.nnz);
    SDNN_CUDA_CHECK(cudaMemcpyAsync(h.row_ptr().data(), a.row_ptr, sizeof(Index) * (static_cast<std::size_t>(a.rows) + 1),
                                    cudaMemcpyDeviceToHost, e.stream));
    if (a.nnz > 0)
      SDNN_CUDA_CHECK(cudaMemcpyAsync(h.col_idx().data(), a.col_idx, sizeof(Index) * static_cast<std::size_t>(a.nnz),
                                      cudaMemcpyDeviceToHost, e.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));
    stats_ = compute_stats(h, 32, 32, host_exec{});
    choice_ = policy::choose_spmm(stats_, t);
    if (choice_ == policy::spmm_choice::tiled_dense) {
      // Tiles are built on the host from A (values copied too) and uploaded once.
      if (a.nnz > 0)
        SDNN_CUDA_CHECK(cudaMemcpyAsync(h.values().data(), a.values, sizeof(T) * static_cast<std::size_t>(a.nnz),
                                        cudaMemcpyDeviceToHost, e.stream));
      SDNN_CUDA_CHECK(cudaStreamSynchronize(e.stream));
      auto ht = to_tiled_dense(h, 32, 32);
      tiled_ = tiled_dense_matrix<T, device_space>(ht.rows(), ht.cols(), 32, 32, e);
      copy(tiled_.values(), ht.values(), e);
      copy(tiled_.occupied(), ht.occupied(), e);
      copy(tiled_.tile_row_ptr(), ht.tile_row_ptr(), e);
      tiled_.tile_col() = copy_to<device_space>(ht.tile_col(), e);
      return;
    }
    switch (choice_) {
      case policy::spmm_choice::csr_nnz_balanced:
        impl_ = std::make_unique<detail::csr_runner_of<policy::csr_nnz_balanced<>, T, Index>>(a, b, c, e);
        break;
      case policy::spmm_choice::csr_staged_b:
        impl_ = std::make_unique<detail::csr_runner_of<policy::csr_staged_b<>, T, Index>>(a, b, c, e);
        break;
      case policy::spmm_choice::csr_panels:  // 16 x 4 float accumulators per lane; __half: 16 x 8 spill
        if constexpr (std::is_same_v<T, float>)
          impl_ = std::make_unique<detail::csr_runner_of<policy::csr_panels<16, 64, 1>, T, Index>>(a, b, c, e);
        else
          impl_ = std::make_unique<detail::csr_runner_of<policy::csr_panels<8, 64, 1>, T, Index>>(a, b, c, e);
        break;
      case policy::spmm_choice::csr_skip_empty_compact:
        impl_ = std::make_unique<
            detail::csr_runner_of<policy::skip_empty_rows_compact<policy::csr_row_split<>>, T, Index>>(a, b, c, e);
        break;
      case policy::spmm_choice::csr_row_split_rows_in_x:
        impl_ = std::make_unique<detail::csr_runner_of<policy::csr_row_split<1, 4, true>, T, Index>>(a, b, c, e);
        break;
      default:  // row-split, one 16-byte vector per lane (bench_spmm: at or above <2,4> nearly everywhere)
        impl_ = std::make_unique<detail::csr_runner_of<policy::csr_row_split<1, 4>, T, Index>>(a, b, c, e);
    }
  }
  void run(dense_view<T const> b, dense_view<T> c, basic_epilogue<accumulator_t<T>> const& epi, cuda_exec e) {
    if (choice_ == policy::spmm_choice::tiled_dense) {
      tiled_dense_view<T const> tv = tiled_.view();
      detail::check_spmm_args(tv.rows, tv.cols, b, c, "spmm(automatic: tiled_dense)");
      kernels::spmm_tiled_dense(tv, b, c, epi, e);
    } else {
      impl_->run(b, c, epi, e);
    }
  }
  policy::spmm_choice choice() const noexcept { return choice_; }
  matrix_stats const& stats() const noexcept { return stats_; }

 private:
  matrix_stats stats_;
  policy::spmm_choice choice_ = policy::spmm_choice::csr_row_split;
  std::unique_ptr<detail::csr_runner<T, Index>> impl_;
  tiled_dense_matrix<T, device_space> tiled_;
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
  // Chunks of E entries, grown when nnz / E chunks would be more than fill the GPU
  // (kernels::nnz_split_target_chunks), so the carry (2 rows of N floats per chunk) stays
  // bounded however large nnz is.
  coo_spmm_plan(coo_view<T, Index> a, dense_view<T const> b, dense_view<T>, cuda_exec e)
      : a_(a),
        cut_(kernels::nnz_split_cut(a.nnz, kernels::nnz_split_target_chunks(b.cols, kernels::spmm_slab_columns<T, U>),
                                    E)),
        n_(b.cols), carry_(kernels::nnz_split_carry_elements(cut_.chunks, b.cols), e) {}
  // Writes the plan's carry buffer: runs of one plan must not overlap (one stream at a time).
  template <class Acc>
  void run(dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi, cuda_exec e) {
    detail::check_spmm_args(a_.rows, a_.cols, b, c, "spmm(coo_nnz_split)");
    SDNN_EXPECTS(b.cols <= n_, "spmm(coo_nnz_split): the plan's carry was sized for ", n_, " columns, B has ",
                 b.cols);
    kernels::spmm_coo_nnz_split<U>(a_, b, c, epi, cut_, carry_.data(), e);
  }

 private:
  coo_view<T, Index> a_;
  kernels::nnz_split_shape cut_;
  std::int64_t n_;
  buffer<float, device_space> carry_;
};

template <policy::cusparse_alg Alg, class T, class Index>
class coo_spmm_plan<policy::cusparse_spmm<Alg>, T, Index> {
 public:
  coo_spmm_plan(coo_view<T, Index> a, dense_view<T const> b, dense_view<T> c, cuda_exec e) : p_(a, b, c, Alg, e) {}
  template <class Acc>
  void run(dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi, cuda_exec e) {
    p_.run(b, c, epi, e);
  }

 private:
  vendor::cusparse_spmm_plan<T, Index> p_;
};

template <class Policy, class T, class Index>
class ell_spmm_plan {
  static_assert(::sdnn::detail::dependent_false<Policy, T>, "ell_spmm_plan: no ELL implementation for this policy");
};
template <int U, int W, class T, class Index>
class ell_spmm_plan<policy::ell_row_split<U, W>, T, Index> {
 public:
  ell_spmm_plan(ell_view<T, Index> a, dense_view<T const>, dense_view<T>, cuda_exec) : a_(a) {}
  template <class Acc>
  void run(dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi, cuda_exec e) const {
    detail::check_spmm_args(a_.rows, a_.cols, b, c, "spmm(ell_row_split)");
    kernels::spmm_ell_row_split<U, W>(a_, b, c, epi, e);
  }

 private:
  ell_view<T, Index> a_;
};

template <class Policy, class T>
class tiled_spmm_plan {
  static_assert(::sdnn::detail::dependent_false<Policy, T>,
                "tiled_spmm_plan: no tiled-dense implementation for this policy");
};
template <class T>
class tiled_spmm_plan<policy::tiled_dense_spmm, T> {
 public:
  tiled_spmm_plan(tiled_dense_view<T const> a, dense_view<T const>, dense_view<T>, cuda_exec) : a_(a) {}
  template <class Acc>
  void run(dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi, cuda_exec e) const {
    detail::check_spmm_args(a_.rows, a_.cols, b, c, "spmm(tiled_dense_spmm)");
    kernels::spmm_tiled_dense(a_, b, c, epi, e);
  }

 private:
  tiled_dense_view<T const> a_;
};

// cuSPARSE Blocked-ELL baseline (vendor/cusparse_blocked_ell.cuh): square tiles, M and K
// multiples of the tile size; the epilogue runs as a separate pass. default_alg is
// cuSPARSE's default for Blocked-ELL, which is BLOCKED_ELL_ALG1.
template <policy::cusparse_alg Alg, class T>
class tiled_spmm_plan<policy::cusparse_spmm<Alg>, T> {
  static_assert(Alg == policy::cusparse_alg::blocked_ell_alg1 || Alg == policy::cusparse_alg::default_alg,
                "tiled_spmm_plan: cuSPARSE takes tiled-dense as Blocked-ELL only (blocked_ell_alg1)");

 public:
  tiled_spmm_plan(tiled_dense_view<T const> a, dense_view<T const> b, dense_view<T> c, cuda_exec e)
      : p_(a, b, c, e) {}
  template <class Acc>
  void run(dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi, cuda_exec e) {
    p_.run(b, c, epi, e);
  }
  vendor::cusparse_blocked_ell_plan<T> const& vendor_plan() const noexcept { return p_; }

 private:
  vendor::cusparse_blocked_ell_plan<T> p_;
};

// ---------------------------------------------------------------------------------------
// One-shot dispatch for ops::spmm on the device.
template <class Policy>
struct spmm_impl<cuda_exec, Policy> {
  template <class T, class Index, class Acc>
  static void run(cuda_exec e, csr_view<T, Index> a, dense_view<T const> b, dense_view<T> c,
                  basic_epilogue<Acc> const& epi) {
    csr_spmm_plan<Policy, T, Index> p(a, b, c, e);
    p.run(b, c, epi, e);
  }
  template <class T, class Index, class Acc>
  static void run(cuda_exec e, coo_view<T, Index> a, dense_view<T const> b, dense_view<T> c,
                  basic_epilogue<Acc> const& epi) {
    coo_spmm_plan<Policy, T, Index> p(a, b, c, e);
    p.run(b, c, epi, e);
  }
  template <class T, class Index, class Acc>
  static void run(cuda_exec e, ell_view<T, Index> a, dense_view<T const> b, dense_view<T> c,
                  basic_epilogue<Acc> const& epi) {
    ell_spmm_plan<Policy, T, Index> p(a, b, c, e);
    p.run(b, c, epi, e);
  }
  template <class T, class Acc>
  static void run(cuda_exec e, tiled_dense_view<T const> a, dense_view<T const> b, dense_view<T> c,
                  basic_epilogue<Acc> const& epi) {
    tiled_spmm_plan<Policy, T> p(a, b, c, e);
    p.run(b, c, epi, e);
  }
};

}  // namespace sdnn::ops
