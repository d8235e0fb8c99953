// sdnn/linear/op/tc_auto.hpp - the automatic 16-bit linear layer Y[N x M] = epi(X[N x K] W^T),
// host part: the structure of W that the choice reads (analyze_weights), the plan's options,
// and the host reference. The plan, ops::tc_auto_linear_plan<T, Out> (linear/op/tc_auto.cuh),
// chooses per batch size among cuBLAS dense and the tensor-core sparse paths by the cost model of
// linear/policy/tc_auto.hpp, or by measurement after tune().
#pragma once

#include <algorithm>
#include <cstdint>
#include <istream>
#include <map>
#include <mutex>
#include <ostream>
#include <sstream>
#include <string>
#include <tuple>
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

// One pass over W (M x K): nonzeros, column pairs holding one, occupied 64 x 64 tiles and 32 x 32 blocks, and whether
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
      if (::sdnn::detail::is_nonzero(row[j])) {  // +-0 are the zeros, NaN is not
        ++s.nnz;
        blocks[std::size_t(j / 32)] = 1;
        tiles[std::size_t(j / 64)] = 1;
        if (++in_group > 2) is24 = false;
      }
      if (j % 2 == 1 || j + 1 == w.cols)
        s.pairs += ::sdnn::detail::is_nonzero(row[j]) || (j % 2 == 1 && ::sdnn::detail::is_nonzero(row[j - 1]));
    }
  }
  for (auto b : blocks) s.blocks32 += b;
  for (auto t : tiles) s.tiles64 += t;
  s.is_24 = is24;
  return s;
}

namespace detail {
// The measured winners of tune(), per (GPU, structure, output size, N), for the whole process.
struct tc_tuned_key {
  std::string gpu;
  std::int64_t m, k, nnz, tiles64, blocks32;
  bool is_24;
  int out_bytes;
  std::int64_t n;
  bool operator<(tc_tuned_key const& o) const {
    return std::tie(gpu, m, k, nnz, tiles64, blocks32, is_24, out_bytes, n) <
           std::tie(o.gpu, o.m, o.k, o.nnz, o.tiles64, o.blocks32, o.is_24, o.out_bytes, o.n);
  }
};
struct tc_tuned_cache {
  std::mutex mu;
  std::map<tc_tuned_key, policy::tc_path> paths;
  static tc_tuned_cache& get() {
    static tc_tuned_cache c;
    return c;
  }
};
}  // namespace detail

// The process's tune() results as text, to keep them across runs (tune once, load at start-up:
// plans made after the load use them for the GPU and structure they were measured on). One line
// "sdnn-tc-auto-tuning 1", then one entry per line, tab-separated: GPU name, M, K, nonzeros,
// occupied 64x64 tiles, occupied 32x32 blocks, 2:4 (0/1), output bytes, N, path name.
inline std::size_t tc_tuning_save(std::ostream& out) {
  auto& c = detail::tc_tuned_cache::get();
  std::lock_guard<std::mutex> lock(c.mu);
  out << "sdnn-tc-auto-tuning 1\n";
  for (auto const& [k, p] : c.paths)
    out << k.gpu << '\t' << k.m << '\t' << k.k << '\t' << k.nnz << '\t' << k.tiles64 << '\t' << k.blocks32 << '\t'
        << int(k.is_24) << '\t' << k.out_bytes << '\t' << k.n << '\t' << policy::tc_path_name(p) << '\n';
  return c.paths.size();
}
// Reads what tc_tuning_save wrote into the process's cache (an entry already there is replaced)
// and returns the entries read. A malformed line is refused with its number and nothing of the
// input is kept.
inline std::size_t tc_tuning_load(std::istream& in) {
  std::string line;
  SDNN_EXPECTS(std::getline(in, line) && line == "sdnn-tc-auto-tuning 1",
               "tc_tuning_load: the first line must be 'sdnn-tc-auto-tuning 1', got '", line, "'");
  std::vector<std::pair<detail::tc_tuned_key, policy::tc_path>> read;
  for (std::size_t no = 2; std::getline(in, line); ++no) {
    if (line.empty()) continue;
    std::istringstream f(line);
    detail::tc_tuned_key k;
    std::string path;
    int is24 = -1;
    bool const ok = std::getline(f, k.gpu, '\t') && (f >> k.m >> k.k >> k.nnz >> k.tiles64 >> k.blocks32 >> is24 >>
                                                        k.out_bytes >> k.n >> path) &&
                    (f >> std::ws).eof();
    SDNN_EXPECTS(ok && !k.gpu.empty() && (is24 == 0 || is24 == 1) && k.m >= 0 && k.k >= 0 && k.n >= 1 &&
                     (k.out_bytes == 2 || k.out_bytes == 4),
                 "tc_tuning_load: line ", no, " is not 'GPU<TAB>M K nnz tiles64 blocks32 2:4 out_bytes N path': '",
                 line, "'");
    k.is_24 = is24 == 1;
    int p = 0;
    while (p < policy::tc_path_count && path != policy::tc_path_name(policy::tc_path(p))) ++p;
    SDNN_EXPECTS(p < policy::tc_path_count, "tc_tuning_load: line ", no, ": unknown path '", path, "'");
    read.emplace_back(k, policy::tc_path(p));
  }
  auto& c = detail::tc_tuned_cache::get();
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto const& [k, p] : read) c.paths[k] = p;
  return read.size();
}
// Empties the process's cache (plans already made keep what they read).
inline void tc_tuning_clear() {
  auto& c = detail::tc_tuned_cache::get();
  std::lock_guard<std::mutex> lock(c.mu);
  c.paths.clear();
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
