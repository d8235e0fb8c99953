// sdnn/policies/sparse_linear.hpp - how a sparse_linear layer (Y_out = epi(Y_in * W)) runs.
//
// Activations Y are dense row-major (batch x in_features); weights W (in x out) are sparse.
// Every device policy computes the same function; they differ in how the work is laid out:
//
//   csc_gather<Rows, Threads>   W is held as its transpose (out x in CSR = W in CSC); each
//                               thread owns one output column and gathers its nonzeros' inputs
//                               for `Rows` activation rows at once (register blocking: each
//                               weight is loaded once per `Rows` rows). When `Rows` activation
//                               rows fit in shared memory they are staged there first.
//                               Bias, ReLU and cap are fused into the store.
//   skip_empty_rows<Inner>      keeps a device-side list of live (nonzero) rows; Inner runs only
//                               on them and the layer flags which outputs stayed nonzero; the
//                               list is compacted with cub::DeviceSelect without a host round trip.
//   cusparse_reuse_buffer       cusparseSpMM on every row, workspace allocated once at plan time;
//   cusparse_buffer_per_call    the same, workspace sized and allocated on every call;
//   cusparse_filter_rows        live rows compacted into a contiguous block before each cusparseSpMM
//                               (reads the live count back to the host every layer: synchronises).
//   The three cuSPARSE variants are the baselines of the seed paper (Graph Challenge 2019).
//
// Host execution of every policy is the plain reference loop.
#pragma once

#include <string>
#include <type_traits>

#include "sdnn/core/config.hpp"

namespace sdnn::format {
// Weights given as a CSR matrix whose rows are input neurons and columns output neurons
// (the Graph Challenge file layout).
struct csr {};
}  // namespace sdnn::format

namespace sdnn::policy {

template <int Rows = 16, int Threads = 256>
struct csc_gather {
  static constexpr int rows = Rows, threads = Threads;
  static_assert(Threads % 32 == 0 && Threads >= 32 && Threads <= 1024, "csc_gather: blocks are whole warps");
  static_assert(Rows == 4 || Rows == 8 || Rows == 16 || Rows == 32, "csc_gather: Rows must be 4, 8, 16 or 32");
};

// csc_gather with B's columns grouped at plan time into tiles whose inputs (footprint) are
// staged in shared memory once per tile: output columns sharing their input list (the
// RadiX-Net challenge layers: 16 per list) are packed together, so each input is gathered
// once per tile instead of once per nonzero. Tiles hold at most Threads columns and 1024
// footprint inputs. Plan time copies the weights to the host once to build the tiles.
template <int Rows = 16, int Threads = 256>
struct csc_tiled {
  static constexpr int rows = Rows, threads = Threads, max_footprint = 1024;
  static_assert(Threads % 32 == 0 && Threads >= 32 && Threads <= 1024, "csc_tiled: blocks are whole warps");
  static_assert(Rows == 4 || Rows == 8 || Rows == 16 || Rows == 32, "csc_tiled: Rows must be 4, 8, 16 or 32");
};

template <class Inner>
struct skip_empty_rows {
  using inner = Inner;
};

struct cusparse_reuse_buffer {};
struct cusparse_buffer_per_call {};
struct cusparse_filter_rows {};

// The default device policy, chosen from the Graph Challenge benchmark on an H200 (60000
// inputs, 120 layers; benchmarks/results/graph_challenge_*.md): footprint tiles with 16 rows
// per block beat csc_gather16 by 1.4x (N = 1024) to 4x (N = 4096) and csc_tiled32 for
// N >= 4096 (csc_tiled32 was 1.2x faster at N = 1024 only).
using sparse_linear_default = skip_empty_rows<csc_tiled<16, 256>>;

template <class P>
inline constexpr bool is_skip_empty_rows_v = false;
template <class I>
inline constexpr bool is_skip_empty_rows_v<skip_empty_rows<I>> = true;

template <class P>
inline constexpr bool is_cusparse_v = std::is_same_v<P, cusparse_reuse_buffer> ||
                                      std::is_same_v<P, cusparse_buffer_per_call> ||
                                      std::is_same_v<P, cusparse_filter_rows>;

// Printable policy names (used by the example's --policy and in benchmark JSON).
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
struct name_of<skip_empty_rows<I>> {
  static std::string get() { return "skip_empty_rows_" + name_of<I>::get(); }
};
template <>
struct name_of<cusparse_reuse_buffer> {
  static std::string get() { return "cusparse_reuse_buffer"; }
};
template <>
struct name_of<cusparse_buffer_per_call> {
  static std::string get() { return "cusparse_buffer_per_call"; }
};
template <>
struct name_of<cusparse_filter_rows> {
  static std::string get() { return "cusparse_filter_rows"; }
};
template <class P>
std::string name() {
  return name_of<P>::get();
}

}  // namespace sdnn::policy
