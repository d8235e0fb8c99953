// sdnn/challenge/pipeline.hpp - the Sparse DNN Graph Challenge inference pipeline, layer by layer
// (docs/challenge.md#the-layer-wise-pipeline): Y_l = epi(Y_{l-1} * W_l) for l = 1..L
// (epi = epilogue_capped_relu), then the categories, the 1-based ids of the rows of Y_L with a
// nonzero sum. One layers::sparse_linear per layer, all sharing one device-side list of live rows;
// on the device each batch's layers are captured once into a CUDA Graph. Host and device backends
// share the call: run(host_exec, ...) / run(cuda_exec, ...); the device members run the bodies of
// challenge/pipeline.cuh when one .cu of the program compiled them (a .cu that includes it and
// constructs the type), else throw not_compiled (layers/layer.hpp, detail::device_registration).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/core/config.hpp"
#include "sdnn/linear/sparse_linear.hpp"
#include "sdnn/pipeline/weight_store.hpp"
#include "sdnn/linear/policy/dense_sparse.hpp"

namespace sdnn::pipeline {

struct challenge_options {
  std::int64_t max_batch = 0;  // rows per batch; 0 = as many as fit in ~70% of free device memory
  bool use_graph = true;       // capture each batch's layer loop into a CUDA Graph (not for cuSPARSE policies
                               // nor streamed weights)
  // Out-of-core weights (pipeline/weight_store.hpp): device = every layer resident (default);
  // host = layers packed in pinned host memory and streamed through a ring of weight_slots
  // device slots; automatic = host when the estimated resident weights exceed the budget.
  weight_placement weights = weight_placement::device;
  // Device bytes for the weights (resident: all layers; streamed: the slots); 0 = no limit
  // (automatic then takes 60% of the free device memory as the budget).
  std::uint64_t device_memory_budget = 0;
  int weight_slots = 0;  // streamed ring depth K >= 2; 0 = default_weight_slots or what the budget holds
};

struct challenge_result {
  std::vector<std::int32_t> categories;  // 1-based ids of inputs with a nonzero final row, ascending
  dense_matrix<float> final;             // images x N final activations, when asked for (keep_final)
  std::int64_t batches = 0;
};

// Rows whose activations became all zero stay zero (the epilogue is zero preserving), so they are
// dropped from the list of live rows and never touched again. Policies without a row list
// (csc_gather, cusparse_reuse_buffer, cusparse_buffer_per_call) compute every row of every
// layer; the categories are then taken from the last layer.
template <class Policy = policy::sparse_linear_default>
class challenge_network {
 public:
  using layer_type = layers::sparse_linear<float, format::csr, Policy>;

  explicit challenge_network(std::vector<std::shared_ptr<layer_type>> layers) : layers_(std::move(layers)) {
    request_device_code();
    SDNN_EXPECTS(!layers_.empty(), "challenge_network: needs at least one layer");
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      SDNN_EXPECTS(layers_[i] && layers_[i]->in_features() == layers_[i]->out_features() &&
                       layers_[i]->in_features() == layers_[0]->in_features(),
                   "challenge_network: layer ", i, " must be N x N with the N of layer 0 (", layers_[0]->in_features(),
                   ")");
    }
  }
  std::int64_t neurons() const { return layers_[0]->in_features(); }
  std::size_t depth() const { return layers_.size(); }
  // Total nonzeros of all layers (the "connections" of the official rate).
  std::int64_t connections() const {
    std::int64_t s = 0;
    for (auto const& l : layers_) s += l->nnz();
    return s;
  }

  // Host backend: live rows kept dense on the host, dead rows dropped after every layer.
  challenge_result run(host_exec exec, csr_view<float, std::int32_t> inputs, bool keep_final = false) {
    std::int64_t const n = neurons();
    SDNN_EXPECTS(inputs.cols == n, "challenge_network: inputs have ", inputs.cols, " columns, the network ", n,
                 " neurons");
    std::vector<std::int32_t> live;
    for (std::int32_t r = 0; r < inputs.rows; ++r)
      if (inputs.row_ptr[r + 1] > inputs.row_ptr[r]) live.push_back(r);
    dense_matrix<float> y(static_cast<std::int64_t>(live.size()), n), z;
    for (std::size_t i = 0; i < live.size(); ++i)
      for (std::int32_t p = inputs.row_ptr[live[i]]; p < inputs.row_ptr[live[i] + 1]; ++p)
        y(static_cast<std::int64_t>(i), inputs.col_idx[p]) = inputs.values[p];
    for (auto& l : layers_) {
      z = dense_matrix<float>(y.rows(), n);
      l->forward(exec, dense_view<float const>(y.view()), z.view());
      // keep rows with a nonzero output, compacted in order
      std::vector<std::int32_t> next;
      std::int64_t kept = 0;
      for (std::int64_t i = 0; i < z.rows(); ++i) {
        float const* row = z.data() + i * n;
        if (std::any_of(row, row + n, [](float v) { return v != 0.f; })) {
          if (kept != i) std::copy(row, row + n, z.data() + kept * n);
          next.push_back(live[static_cast<std::size_t>(i)]);
          ++kept;
        }
      }
      y = dense_matrix<float>(kept, n);
      std::copy(z.data(), z.data() + kept * n, y.data());
      live.swap(next);
    }
    challenge_result res;
    res.batches = 1;
    for (auto r : live) res.categories.push_back(r + 1);
    if (keep_final) {
      res.final = dense_matrix<float>(inputs.rows, n);
      for (std::size_t i = 0; i < live.size(); ++i)
        std::copy(y.data() + static_cast<std::int64_t>(i) * n, y.data() + static_cast<std::int64_t>(i + 1) * n,
                  res.final.data() + static_cast<std::int64_t>(live[i]) * n);
    }
    return res;
  }

  // Device plan for up to `inputs` input rows: plans every layer (uploads, transposes, tiles;
  // on host threads, several layers at once), chooses the batch, allocates activations, lists,
  // flags and the compaction workspace. Synchronises exec.stream (reads free memory).
  void plan(std::int64_t inputs, cuda_exec exec, challenge_options opt = {}) {
    (this->*device_members("plan(cuda_exec)").plan)(inputs, exec, opt);
  }
  std::int64_t batch() const noexcept { return batch_; }

  // Where plan() put the weights (streamed or resident, slots, bytes), and what the last device
  // run() streamed (bytes, uploads, copy-stream busy seconds).
  weight_store_decision const& weight_placement_chosen() const noexcept { return placement_; }
  weight_store_stats const& weight_stats() const noexcept { return stats_; }
  // Estimated device bytes of each layer when resident (W^T CSR, the tiles of csc_tiled
  // policies, the bias): what the automatic placement compares with the budget.
  std::vector<std::uint64_t> resident_layer_bytes() const {
    std::vector<std::uint64_t> b;
    for (auto const& l : layers_) {
      std::uint64_t const n = static_cast<std::uint64_t>(l->out_features()), nnz = static_cast<std::uint64_t>(l->nnz());
      std::uint64_t x = csr_layer_bytes(l->out_features(), l->nnz(), sizeof(float), sizeof(float),
                                        l->host_epilogue().bias ? l->out_features() : 0);
      if (layer_type::uses_tiles()) x += 6 * nnz + 8 * n;  // lidx + vals per nonzero, cols + nnz_ptr per column
      b.push_back(x);
    }
    return b;
  }

  // Device backend. inputs: device CSR (images x N). Runs every batch; reads the live count
  // and list back once per batch (this call synchronises exec.stream for that), never per
  // layer (except policy::cusparse_filter_rows, which reads the count every layer).
  challenge_result run(cuda_exec exec, csr_view<float, std::int32_t> inputs, bool keep_final = false) {
    return (this->*device_members("run(cuda_exec)").run)(exec, inputs, keep_final);
  }

 private:
  struct device_state;  // challenge/pipeline.cuh: activations, lists, flags, compaction, graph

  // The device members' bodies and their helpers, defined in challenge/pipeline.cuh; the
  // bodies are called only through the type's table (layers/layer.hpp, device_registration).
  void plan_body(std::int64_t inputs, cuda_exec exec, challenge_options opt);
  challenge_result run_body(cuda_exec exec, csr_view<float, std::int32_t> inputs, bool keep_final);
  void enqueue_batch(cuda_exec exec, csr_view<float, std::int32_t> inputs, std::int32_t first, std::int32_t rows);
  void capture(cuda_exec exec, csr_view<float, std::int32_t> inputs, std::int32_t first, std::int32_t rows);
  struct device_table {
    void (challenge_network::*plan)(std::int64_t, cuda_exec, challenge_options);
    challenge_result (challenge_network::*run)(cuda_exec, csr_view<float, std::int32_t>, bool);
  };
  static device_table const device_bodies;                    // challenge/pipeline.cuh
  static inline device_table const* device_table_ = nullptr;  // null: no .cu compiled the bodies
  template <class>
  friend struct ::sdnn::detail::device_registration;

  static device_table const& device_members(char const* member) {
    if (device_table_) return *device_table_;
    std::string const type = "pipeline::challenge_network<" + policy::name<Policy>() + ">";
    throw not_compiled(
        type + "::" + member,
        ::sdnn::detail::no_device_code(type, "template class sdnn::pipeline::challenge_network<Policy>;"), __FILE__,
        __LINE__);
  }
  // Compiled by a CUDA compiler: asks for this type's registration (layers/layer.hpp).
  static void request_device_code() noexcept {
#if defined(__CUDACC__)
    request_device_members(::sdnn::detail::device_tag<challenge_network>{}, 0);
#endif
  }
  // Which ping-pong slot holds the final activations / list after all layers.
  int final_y() const { return static_cast<int>(layers_.size() % 2); }
  int final_slot() const { return layer_type::uses_row_list() ? static_cast<int>(layers_.size() % 2) : 0; }

  std::vector<std::shared_ptr<layer_type>> layers_;
  std::shared_ptr<device_state> device_;
  std::int64_t batch_ = 0;
  challenge_options opt_{};
  weight_store_decision placement_{};
  weight_store_stats stats_{};
};

}  // namespace sdnn::pipeline
