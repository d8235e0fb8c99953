// sdnn/linear/op/tc_auto.hpp - the automatic 16-bit linear layer Y[N x M] = epi(X[N x K] W^T),
// host part: the structure of W that the choice reads (analyze_weights), the plan's options,
// and the host reference. The plan, ops::tc_auto_linear_plan<T, Out> (linear/op/tc_auto.cuh),
// chooses per batch size among cuBLAS dense and the tensor-core sparse paths by the cost model of
// linear/policy/tc_auto.hpp, or by measurement after tune().
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/numeric.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/linear/policy/tc_auto.hpp"
#include "sdnn/linear/reference/tc_linear.hpp"

namespace sdnn::ops {

// The device plan (linear/op/tc_auto.cuh). T: sdnn::bf16 or sdnn::fp16; Out: T or float.
template <class T, class Out = T>
class tc_auto_linear_plan;

struct tc_auto_options {
  std::int64_t max_rows = 2048;  // the largest N a run will see (sizes the workspaces)
  unsigned allowed = policy::tc_all_paths;  // mask of 1 << policy::tc_path: the paths the plan may use
  bool keep_host_copy = true;    // keep W on the host (M K sizeof(T) bytes) so that tune() can
                                 // build an encoding the model did not choose
  std::size_t epilogue_workspace_bytes = std::size_t(32) << 20;  // the cuBLAS path's float
                                 // staging for a non-identity epilogue with a 16-bit Y, at most
};

// One pass over W (M x K): nonzeros, occupied 64 x 64 tiles and 32 x 32 blocks, and whether
// every aligned group of four along K (the last one zero-padded) holds at most two nonzeros.
// A NaN or Inf counts as a nonzero.
template <class T>
policy::weight_structure analyze_weights(dense_view<T const> w) {
  policy::weight_structure s;
  s.m = w.rows;
  s.k = w.cols;
  std::int64_t const tr = (w.rows + 63) / 64, tc = (w.cols + 63) / 64;
  std::int64_t const br = (w.rows + 31) / 32, bc = (w.cols + 31) / 32;
  s.tiles64_total = tr * tc;
  s.blocks32_total = br * bc;
  std::vector<unsigned char> blocks(static_cast<std::size_t>(bc)), tiles(static_cast<std::size_t>(tc));
  bool is24 = true;
  auto nz = [](T v) { return (v.bits & 0x7fffu) != 0; };  // +-0 are the zeros
  for (std::int64_t i = 0; i < w.rows; ++i) {
    if (i % 32 == 0) {
      for (auto b : blocks) s.blocks32 += b;
      std::fill(blocks.begin(), blocks.end(), 0);
    }
    if (i % 64 == 0) {
      for (auto t : tiles) s.tiles64 += t;
      std::fill(tiles.begin(), tiles.end(), 0);
    }
    T const* row = w.data + i * w.ld;
    int in_group = 0;
    for (std::int64_t j = 0; j < w.cols; ++j) {
      if (j % 4 == 0) in_group = 0;
      if (nz(row[j])) {
        ++s.nnz;
        blocks[std::size_t(j / 32)] = 1;
        tiles[std::size_t(j / 64)] = 1;
        if (++in_group > 2) is24 = false;
      }
    }
  }
  for (auto b : blocks) s.blocks32 += b;
  for (auto t : tiles) s.tiles64 += t;
  s.is_24 = is24;
  return s;
}

// Host executor: the reference (float accumulation over the stored values, one rounding to Out).
template <class T, class Out>
void tc_auto_linear(host_exec, dense_view<T const> x, dense_view<T const> w, dense_view<Out> y,
                    basic_epilogue<float> const& epi = {}) {
  SDNN_EXPECTS_DIMS(x.cols == w.cols && y.rows == x.rows && y.cols == w.rows, "tc_auto_linear: X is ", x.rows, " x ",
                    x.cols, ", W ", w.rows, " x ", w.cols, ", Y ", y.rows, " x ", y.cols);
  reference::tc_linear(x, w, y, epi);
}

}  // namespace sdnn::ops
