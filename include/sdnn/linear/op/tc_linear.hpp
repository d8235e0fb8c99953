// sdnn/linear/op/tc_linear.hpp - the tensor-core linear layer Y[N x M] = epi(X[N x K] W^T), W M x K
// (nn.Linear layout), bf16/fp16 in, float accumulation, Y in the input type or float, epilogue in
// float and one rounding on store. ops::tc_linear(host_exec, ...) is the reference;
// ops::tc_linear_plan<Policy, T> (tc_linear.cuh) the device plan of core/plan.hpp;
// ops::tc_linear_can_implement says why a plan cannot be made. Policies (policy/tensor_core.hpp):
// tc_dense_mma, tc_block_sparse_mma (blocks of 16/32/64 x 16/32/64), tc_tile_offsets_mma (64 x 64
// tiles); sm_80 and newer. Small batches run the streaming kernel (kernel/tc_stream.cuh), the rest
// the tiled one (kernel/tc_spmm.cuh).
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "sdnn/core/arch.hpp"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/numeric.hpp"
#include "sdnn/core/plan.hpp"
#include "sdnn/formats/block_sparse.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/formats/tile_offsets.hpp"
#include "sdnn/linear/policy/tensor_core.hpp"
#include "sdnn/linear/op/tc_stream_schedule.hpp"
#include "sdnn/linear/reference/tc_linear.hpp"

namespace sdnn::ops {

// The device plan (linear/op/tc_linear.cuh). Declared here so host code can hold pointers to it.
template <class Policy, class T>
class tc_linear_plan;

namespace detail {
inline plan_status tc_common_can_implement(char const* what, std::int64_t m, std::int64_t k, arch a) {
  constexpr std::int64_t imax = std::numeric_limits<std::int32_t>::max();
  if (m < 0 || k < 0 || m > imax || k > imax)
    return plan_status::failure(::sdnn::detail::concat(what, ": W is ", m, " x ", k, ": extents must be in [0, ", imax, "]"));
  if (a.major != 0 && a < arch{8, 0})
    return plan_status::failure(::sdnn::detail::concat(what, ": needs sm_80 or newer (mma.sync m16n8k16 on 16-bit "
                                                       "inputs, cp.async); this GPU is sm_", a.sm()));
  return {};
}
}  // namespace detail

// W M x K dense. `a`: the GPU's compute capability ({0, 0}: not checked).
inline plan_status tc_linear_can_implement(policy::tc_dense_mma, std::int64_t m, std::int64_t k, arch a = {}) {
  return detail::tc_common_can_implement("tc_dense_mma", m, k, a);
}
// W M x K in blocks of br x bc.
inline plan_status tc_linear_can_implement(policy::tc_block_sparse_mma, std::int64_t m, std::int64_t k, std::int32_t br,
                                           std::int32_t bc, arch a = {}) {
  auto ok = [](std::int32_t b) { return b == 16 || b == 32 || b == 64; };
  if (!ok(br) || !ok(bc))
    return plan_status::failure(::sdnn::detail::concat("tc_block_sparse_mma: blocks of ", br, " x ", bc,
                                                       " are not compiled: each side must be 16, 32 or 64"));
  return detail::tc_common_can_implement("tc_block_sparse_mma", m, k, a);
}
// W M x K in tiles of tile_rows x tile_cols.
inline plan_status tc_linear_can_implement(policy::tc_tile_offsets_mma, std::int64_t m, std::int64_t k,
                                           std::int32_t tile_rows, std::int32_t tile_cols, arch a = {}) {
  using tiles = policy::tc_tile_offsets_tiles;
  if (tile_rows != tiles::tile_rows || tile_cols != tiles::tile_cols)
    return plan_status::failure(::sdnn::detail::concat("tc_tile_offsets_mma: tiles of ", tile_rows, " x ", tile_cols,
                                                       " are not compiled: the kernels take ", tiles::tile_rows, " x ",
                                                       tiles::tile_cols, " (tile_offsets_from_dense's default)"));
  return detail::tc_common_can_implement("tc_tile_offsets_mma", m, k, a);
}

namespace detail {
// The operands of one run: X N x K, Y N x M, Out = T or float.
template <class T, class Out>
void check_tc_run(char const* what, std::int64_t m, std::int64_t k, dense_view<T const> x, dense_view<Out> y) {
  static_assert(is_16bit_float_v<T>, "tc_linear: T must be sdnn::bf16 or sdnn::fp16");
  static_assert(std::is_same_v<Out, T> || std::is_same_v<Out, float>, "tc_linear: Y must be of the input type or float");
  SDNN_EXPECTS_DIMS(x.cols == k, what, ": X is ", x.rows, " x ", x.cols, " but W has ", k, " columns (in features)");
  SDNN_EXPECTS_DIMS(y.rows == x.rows && y.cols == m, what, ": Y must be ", x.rows, " x ", m, ", got ", y.rows, " x ",
                    y.cols);
  SDNN_EXPECTS(x.rows <= std::numeric_limits<std::int32_t>::max(), what, ": ", x.rows, " rows exceed int32");
  SDNN_EXPECTS(x.rows == 0 || x.ld >= x.cols, what, ": X's leading dimension ", x.ld, " is below its ", x.cols, " columns");
  SDNN_EXPECTS(y.rows == 0 || y.ld >= y.cols, what, ": Y's leading dimension ", y.ld, " is below its ", y.cols, " columns");
  SDNN_EXPECTS(reinterpret_cast<std::uintptr_t>(x.data) % alignof(T) == 0, what, ": X (", static_cast<void const*>(x.data),
               ") is not aligned to its ", alignof(T), "-byte elements");
  SDNN_EXPECTS(reinterpret_cast<std::uintptr_t>(y.data) % alignof(Out) == 0, what, ": Y (", static_cast<void*>(y.data),
               ") is not aligned to its ", alignof(Out), "-byte elements");
}
}  // namespace detail

// Host executor: the reference.
template <class T, class Out>
void tc_linear(host_exec, dense_view<T const> x, dense_view<T const> w, dense_view<Out> y,
               basic_epilogue<float> const& epi = {}) {
  detail::check_tc_run("tc_linear", w.rows, w.cols, x, y);
  reference::tc_linear(x, w, y, epi);
}
template <class T, class Out>
void tc_linear(host_exec, dense_view<T const> x, block_sparse_view<T> w, dense_view<Out> y,
               basic_epilogue<float> const& epi = {}) {
  detail::check_tc_run("tc_linear", w.rows, w.cols, x, y);
  reference::tc_linear(x, w, y, epi);
}
template <class T, class Out>
void tc_linear(host_exec, dense_view<T const> x, tile_offsets_view<T> w, dense_view<Out> y,
               basic_epilogue<float> const& epi = {}) {
  detail::check_tc_run("tc_linear", w.rows, w.cols, x, y);
  reference::tc_linear(x, w, y, epi);
}

}  // namespace sdnn::ops
