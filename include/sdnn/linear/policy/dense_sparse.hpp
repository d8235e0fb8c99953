// sdnn/linear/policy/dense_sparse.hpp - how the dense x sparse product C = epi(A * W) runs: the
// DNN layer Y_out = epi(Y_in * W) (ops::dense_sparse_plan, layers::sparse_linear and layer
// pipelines take these tags). A (activations) is dense row-major (batch x in_features); W
// (in x out) is sparse. Every device policy computes the same function; they differ in how the
// work is laid out (docs/linear.md#dense-x-sparse). Host execution of every policy is the plain
// reference (reference::dense_sparse_spmm).
#pragma once

#include <string>
#include <type_traits>

#include "sdnn/core/config.hpp"
#include "sdnn/linear/policy/gemm.hpp"
#include "sdnn/linear/policy/spmm.hpp"

namespace sdnn::format {
// Weights given as a CSR matrix whose rows are input neurons and columns output neurons.
struct csr {};
}  // namespace sdnn::format

namespace sdnn::policy {

// W is held as its transpose (out x in CSR = W in CSC); each thread owns one output column
// and gathers its nonzeros' inputs for `Rows` activation rows at once (register blocking: each
// weight is loaded once per `Rows` rows). When `Rows` activation rows fit in shared memory
// they are staged there first. Bias, ReLU and cap are fused into the store.
template <int Rows = 16, int Threads = 256>
struct csc_gather {
  static constexpr int rows = Rows, threads = Threads;
  static_assert(Threads % 32 == 0 && Threads >= 32 && Threads <= 1024, "csc_gather: blocks are whole warps");
  static_assert(Rows == 4 || Rows == 8 || Rows == 16 || Rows == 32, "csc_gather: Rows must be 4, 8, 16 or 32");
};

// csc_gather with W's columns grouped at plan time into tiles whose inputs (footprint) are
// staged in shared memory once per tile: output columns sharing their input list are packed
// together, so each input is gathered once per tile instead of once per nonzero (16x fewer
// gathers where 16 columns share each list). Tiles hold at most Threads columns and 1024
// footprint inputs. The tiles are built on the host from the host copy of W when the plan
// is given one (no device round trip), else from one download of the device W^T.
template <int Rows = 16, int Threads = 256>
struct csc_tiled {
  static constexpr int rows = Rows, threads = Threads, max_footprint = 1024;
  static_assert(Threads % 32 == 0 && Threads >= 32 && Threads <= 1024, "csc_tiled: blocks are whole warps");
  static_assert(Rows == 4 || Rows == 8 || Rows == 16 || Rows == 32, "csc_tiled: Rows must be 4, 8, 16 or 32");
};

// The seed paper's three cuSPARSE baselines, spelled in the one vocabulary: cusparseSpMM
// (linear/policy/spmm.hpp) on W^T with the epilogue in a second pass, its buffer reused or
// allocated per call; and skip_empty_rows<cusparse_spmm<>> (linear/policy/gemm.hpp), which
// keeps a device-side list of live rows and packs them into a contiguous block before each
// cusparseSpMM. cuSPARSE takes its sizes on the host, so filter_rows reads the live count
// back: it synchronises the stream every run.
using cusparse_reuse_buffer = cusparse_spmm<>;
using cusparse_buffer_per_call = cusparse_spmm<cusparse_alg::default_alg, cusparse_buffer::per_call>;
using cusparse_filter_rows = skip_empty_rows<cusparse_spmm<>>;

// The default dense x sparse policy. Measured (and only measured) on an H200, Graph Challenge
// benchmark, 60000 inputs, 120 layers (benchmarks/results/graph_challenge_*.md): footprint
// tiles with 16 rows per block beat csc_gather16 by 1.4x (N = 1024) to 4x (N = 4096) and
// csc_tiled32 for N >= 4096 (csc_tiled32 is 1.2x faster at N = 1024 only). The policy is a
// compile-time type; the plan-time choices that depend on the GPU live in the per-arch
// tuning tables (linear/policy/tuning.hpp).
using sparse_linear_default = skip_empty_rows<csc_tiled<16, 256>>;

// What a dense x sparse policy needs from its caller, for pipelines that share one live-row
// list between layers.
template <class P>
struct dense_sparse_traits {
  static_assert(detail::dependent_false<P>, "dense_sparse_traits: not a dense x sparse policy");
};
template <int R, int T>
struct dense_sparse_traits<csc_gather<R, T>> {
  static constexpr bool uses_row_list = false, uses_tiles = false;
};
template <int R, int T>
struct dense_sparse_traits<csc_tiled<R, T>> {
  static constexpr bool uses_row_list = false, uses_tiles = true;
};
template <cusparse_alg A, cusparse_buffer B>
struct dense_sparse_traits<cusparse_spmm<A, B>> {
  static constexpr bool uses_row_list = false, uses_tiles = false;
};
template <class I>
struct dense_sparse_traits<skip_empty_rows<I, skip_by::compact>> {
  static constexpr bool uses_row_list = true, uses_tiles = dense_sparse_traits<I>::uses_tiles;
};

// Printable policy names (the example's --policy, benchmark JSON).
template <class P>
struct name_of {
  static_assert(detail::dependent_false<P>, "policy::name_of: no name for this policy");
};
template <int R, int T>
struct name_of<csc_gather<R, T>> {
  static std::string get() { return "csc_gather" + std::to_string(R); }
};
template <int R, int T>
struct name_of<csc_tiled<R, T>> {
  static std::string get() { return "csc_tiled" + std::to_string(R); }
};
template <class I>
struct name_of<skip_empty_rows<I, skip_by::compact>> {
  static std::string get() {
    if constexpr (std::is_same_v<I, cusparse_spmm<>>) return "cusparse_filter_rows";
    else return "skip_empty_rows_" + name_of<I>::get();
  }
};
template <cusparse_alg A, cusparse_buffer B>
struct name_of<cusparse_spmm<A, B>> {
  static std::string get() {
    static char const* const algs[] = {"default", "csr_alg1", "csr_alg2", "csr_alg3",        "coo_alg1",
                                       "coo_alg2", "coo_alg3", "coo_alg4", "blocked_ell_alg1"};
    if (A == cusparse_alg::default_alg) return B == cusparse_buffer::reuse ? "cusparse_reuse_buffer" : "cusparse_buffer_per_call";
    return std::string("cusparse_") + algs[static_cast<int>(A)] + (B == cusparse_buffer::reuse ? "" : "_buffer_per_call");
  }
};
template <class P>
std::string name() {
  return name_of<P>::get();
}

}  // namespace sdnn::policy
