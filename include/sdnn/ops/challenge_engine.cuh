// sdnn/ops/challenge_engine.cuh - the plan of the depth-first Graph Challenge engine
// (ops/challenge_engine.hpp says what it computes and proves; kernels/challenge_engine.cuh how).
//
// Plan protocol (core/plan.hpp): can_implement (ops::challenge_engine_can_implement), the
// constructor proves and uploads (synchronises exec.stream once, at the end, so the host
// arrays may go), run() enqueues the engine and reads the categories back: it synchronises
// exec.stream (the categories are a host result, as in pipeline::challenge_network::run).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/formats/convert.hpp"
#include "sdnn/kernels/challenge_engine.cuh"
#include "sdnn/ops/challenge_engine.hpp"

namespace sdnn::ops {

class challenge_engine_plan {
 public:
  // layers: host CSR (row = input neuron, col = output neuron), all N x N; bias: the
  // challenge's scalar bias. Proves the structure, builds each layer's classes and uploads.
  challenge_engine_plan(std::vector<csr_matrix<float, std::int32_t>> const& layers, float bias, cuda_exec exec,
                        challenge_engine_options opt = {})
      : opt_(opt), bias_(bias), runs_(exec) {
    SDNN_EXPECTS(!layers.empty(), "challenge engine: needs at least one layer");
    n_ = layers.front().rows();
    for (std::size_t l = 0; l < layers.size(); ++l)
      SDNN_EXPECTS_DIMS(layers[l].rows() == n_ && layers[l].cols() == n_, "challenge engine: layer ", l, " is ",
                        layers[l].rows(), " x ", layers[l].cols(), ", expected ", n_, " x ", n_);
    report_ = challenge::analyze_structure(layers, bias, opt.cap, opt.structure);
    std::int32_t const L = static_cast<std::int32_t>(layers.size());
    // Host arrays of the device layout (kernels::challenge_engine_layers).
    std::vector<std::int32_t> distinct(L), col_ptr, idx, class_of, period(L, 0);
    std::vector<std::int64_t> ptr_base(L), nnz_base(L), map_base(L);
    std::vector<float> val;
    std::vector<std::uint8_t> suffix(static_cast<std::size_t>(L) + 1, 0);
    for (std::int32_t l = 0; l <= L; ++l) suffix[l] = report_.may_retire_on_entry(l) ? 1 : 0;
    suffix[L] = 0;  // after the last layer the survivors are categories anyway
    folds_.assign(L, 1.0);
    for (std::int32_t l = 0; l < L; ++l) {
      auto const wt = transpose(layers[l]);  // W^T: row j = the inputs of output j, k ascending
      bool const fold = opt.structure.folding && report_.folding.size() == layers.size() &&
                        report_.folding[l].distinct < n_;
      std::vector<std::int32_t> reps;
      if (fold) {
        auto const& rep = report_.folding[l].representative;
        std::vector<std::int32_t> index_of(n_, -1);
        for (std::int32_t j = 0; j < n_; ++j)
          if (rep[j] == j) {
            index_of[j] = static_cast<std::int32_t>(reps.size());
            reps.push_back(j);
          }
        map_base[l] = static_cast<std::int64_t>(class_of.size());
        for (std::int32_t j = 0; j < n_; ++j) class_of.push_back(index_of[rep[j]]);
        // A periodic fold (class(j) = j mod P, classes in order 0..P-1) needs no map read.
        std::int32_t const P = report_.folding[l].period;
        bool periodic = P > 0 && static_cast<std::int32_t>(reps.size()) == P;
        for (std::int32_t j = 0; periodic && j < n_; ++j) periodic = class_of[map_base[l] + j] == j % P;
        if (periodic) period[l] = P;
        folds_[l] = static_cast<double>(n_) / static_cast<double>(reps.size());
      } else {
        reps.resize(n_);
        for (std::int32_t j = 0; j < n_; ++j) reps[j] = j;
        map_base[l] = -1;
      }
      distinct[l] = static_cast<std::int32_t>(reps.size());
      max_distinct_ = std::max<std::int32_t>(max_distinct_, distinct[l]);
      ptr_base[l] = static_cast<std::int64_t>(col_ptr.size());
      nnz_base[l] = static_cast<std::int64_t>(idx.size());
      std::int32_t off = 0;
      col_ptr.push_back(0);
      for (std::int32_t j : reps) {
        for (std::int32_t p = wt.row_ptr()[j]; p < wt.row_ptr()[j + 1]; ++p) {
          idx.push_back(wt.col_idx()[p]);
          val.push_back(wt.values()[p]);
        }
        off += wt.row_ptr()[j + 1] - wt.row_ptr()[j];
        col_ptr.push_back(off);
      }
    }
    int dev = 0, optin = 0;
    SDNN_CUDA_CHECK(cudaGetDevice(&dev));
    SDNN_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    std::size_t const limit = optin > 0 ? static_cast<std::size_t>(optin) - 1024 : challenge_engine_default_smem;
    auto const st = challenge_engine_can_implement(n_, L, max_distinct_, limit);
    if (!st) SDNN_FAIL(st.why());
    rows_per_block_ = opt.rows_per_block;
    if (rows_per_block_ == 0) {
      rows_per_block_ = 1;
      // 8 rows at most by default: on an H100 at 1024 x 120 (benchmarks/results/challenge_ablation_*),
      // 16 rows per block took 2.37 ms against 1.71 ms with 8 (a batch lasts until its last
      // row dies or retires, so more rows make longer batches).
      for (int r : {8, 4, 2})
        if (challenge_engine_smem_bytes(r, n_, max_distinct_) <= limit / 3 || (r <= 2 &&
            challenge_engine_smem_bytes(r, n_, max_distinct_) <= limit)) {
          rows_per_block_ = r;
          break;
        }
    }
    SDNN_EXPECTS(rows_per_block_ == 1 || rows_per_block_ == 2 || rows_per_block_ == 4 || rows_per_block_ == 8 ||
                     rows_per_block_ == 16,
                 "challenge engine: rows_per_block must be 1, 2, 4, 8 or 16, got ", rows_per_block_);
    SDNN_EXPECTS(challenge_engine_smem_bytes(rows_per_block_, n_, max_distinct_) <= limit, "challenge engine: ",
                 rows_per_block_, " rows per block need ", challenge_engine_smem_bytes(rows_per_block_, n_, max_distinct_),
                 " bytes of shared memory, the GPU gives ", limit);
    for (auto const& w : layers) connections_ += w.nnz();
    d_distinct_ = to_device(distinct.data(), distinct.size(), exec);
    d_ptr_base_ = to_device(ptr_base.data(), ptr_base.size(), exec);
    d_nnz_base_ = to_device(nnz_base.data(), nnz_base.size(), exec);
    d_map_base_ = to_device(map_base.data(), map_base.size(), exec);
    d_col_ptr_ = to_device(col_ptr.data(), col_ptr.size(), exec);
    d_idx_ = to_device(idx.data(), idx.size(), exec);
    d_val_ = to_device(val.data(), val.size(), exec);
    d_class_of_ = to_device(class_of.data(), class_of.size(), exec);
    d_period_ = to_device(period.data(), period.size(), exec);
    d_suffix_ = to_device(suffix.data(), suffix.size(), exec);
    d_queue_ = buffer<int, device_space>(1, exec);
    d_counters_ = buffer<kernels::challenge_engine_counters, device_space>(1, exec);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));  // uploads from pageable memory done
  }

  std::int64_t neurons() const noexcept { return n_; }
  std::int64_t depth() const noexcept { return static_cast<std::int64_t>(folds_.size()); }
  std::int64_t connections() const noexcept { return connections_; }
  int rows_per_block() const noexcept { return rows_per_block_; }
  // The proofs as made at plan time, and the fold factor used per layer (1: not folded).
  challenge::structure_report const& structure() const noexcept { return report_; }
  std::vector<double> const& fold_factors() const noexcept { return folds_; }
  std::string summary() const { return report_.summary(); }

  // Categories of the device CSR inputs (rows x N). Synchronises exec.stream (reads the
  // categories back). Allocates the per-row category flags (and the final activations when
  // asked) for this call: rows is a run-time quantity of the inputs.
  challenge_engine_result run(cuda_exec exec, csr_view<float, std::int32_t> inputs, bool keep_final = false) const {
    SDNN_EXPECTS_DIMS(inputs.cols == n_, "challenge engine: inputs have ", inputs.cols, " columns, the network ", n_,
                      " neurons");
    runs_.note(exec);
    challenge_engine_result res;
    std::int64_t const rows = inputs.rows;
    buffer<std::int32_t, device_space> cat(static_cast<std::size_t>(std::max<std::int64_t>(rows, 1)), exec);
    buffer<float, device_space> fin;
    SDNN_CUDA_CHECK(cudaMemsetAsync(cat.data(), 0, cat.size() * sizeof(std::int32_t), exec.stream));
    if (keep_final) {
      fin = buffer<float, device_space>(static_cast<std::size_t>(rows * n_), exec);
      SDNN_CUDA_CHECK(cudaMemsetAsync(fin.data(), 0, fin.size() * sizeof(float), exec.stream));
    }
    // The queue and counters are the plan's: runs of one plan on two streams would share them.
    auto* queue = const_cast<int*>(d_queue_.data());
    auto* counters = const_cast<kernels::challenge_engine_counters*>(d_counters_.data());
    SDNN_CUDA_CHECK(cudaMemsetAsync(queue, 0, sizeof(int), exec.stream));
    SDNN_CUDA_CHECK(cudaMemsetAsync(counters, 0, sizeof(kernels::challenge_engine_counters), exec.stream));
    kernels::challenge_engine_layers const net = layers_view();
    auto const epi = epilogue_challenge<float>(bias_, opt_.cap);
    float* fp = keep_final ? fin.data() : nullptr;
    switch (rows_per_block_) {
      case 1: kernels::challenge_engine<1>(inputs, net, epi, opt_.cap, queue, cat.data(), fp, counters, exec); break;
      case 2: kernels::challenge_engine<2>(inputs, net, epi, opt_.cap, queue, cat.data(), fp, counters, exec); break;
      case 4: kernels::challenge_engine<4>(inputs, net, epi, opt_.cap, queue, cat.data(), fp, counters, exec); break;
      case 8: kernels::challenge_engine<8>(inputs, net, epi, opt_.cap, queue, cat.data(), fp, counters, exec); break;
      default: kernels::challenge_engine<16>(inputs, net, epi, opt_.cap, queue, cat.data(), fp, counters, exec); break;
    }
    std::vector<std::int32_t> flags(static_cast<std::size_t>(rows));
    kernels::challenge_engine_counters c{};
    if (rows)
      SDNN_CUDA_CHECK(cudaMemcpyAsync(flags.data(), cat.data(), flags.size() * sizeof(std::int32_t),
                                      cudaMemcpyDeviceToHost, exec.stream));
    SDNN_CUDA_CHECK(cudaMemcpyAsync(&c, counters, sizeof c, cudaMemcpyDeviceToHost, exec.stream));
    if (keep_final) {
      res.final.resize(static_cast<std::size_t>(rows * n_));
      if (rows)
        SDNN_CUDA_CHECK(cudaMemcpyAsync(res.final.data(), fin.data(), res.final.size() * sizeof(float),
                                        cudaMemcpyDeviceToHost, exec.stream));
    }
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    for (std::int64_t i = 0; i < rows; ++i)
      if (flags[static_cast<std::size_t>(i)]) res.categories.push_back(static_cast<std::int32_t>(i + 1));
    res.row_layers = static_cast<std::int64_t>(c.row_layers);
    res.layers_skipped = static_cast<std::int64_t>(c.layers_skipped);
    res.retired = static_cast<std::int64_t>(c.retired);
    res.batches = static_cast<std::int64_t>(c.batches);
    return res;
  }

 private:
  kernels::challenge_engine_layers layers_view() const {
    kernels::challenge_engine_layers v;
    v.layers = static_cast<std::int32_t>(folds_.size());
    v.n = static_cast<std::int32_t>(n_);
    v.max_distinct = max_distinct_;
    v.distinct = d_distinct_.data();
    v.ptr_base = d_ptr_base_.data();
    v.nnz_base = d_nnz_base_.data();
    v.map_base = d_map_base_.data();
    v.col_ptr = d_col_ptr_.data();
    v.idx = d_idx_.data();
    v.val = d_val_.data();
    v.class_of = d_class_of_.data();
    v.period = d_period_.data();
    v.suffix_fixed = d_suffix_.data();
    return v;
  }

  challenge_engine_options opt_;
  float bias_ = 0;
  std::int64_t n_ = 0, connections_ = 0;
  std::int32_t max_distinct_ = 0;
  int rows_per_block_ = 1;
  challenge::structure_report report_;
  std::vector<double> folds_;
  buffer<std::int32_t, device_space> d_distinct_, d_col_ptr_, d_idx_, d_class_of_, d_period_;
  buffer<std::int64_t, device_space> d_ptr_base_, d_nnz_base_, d_map_base_;
  buffer<float, device_space> d_val_;
  buffer<std::uint8_t, device_space> d_suffix_;
  buffer<int, device_space> d_queue_;
  buffer<kernels::challenge_engine_counters, device_space> d_counters_;
  sdnn::detail::run_streams runs_;  // last (core/plan.cuh)
};

}  // namespace sdnn::ops
