// sdnn/pipeline/challenge.hpp - the Sparse DNN Graph Challenge inference pipeline:
//
//   Y_0 = inputs (sparse, images x N);  Y_l = epi_challenge(Y_{l-1} * W_l), l = 1..L;
//   categories = 1-based ids of the rows of Y_L with a nonzero sum.
//
// One layers::sparse_linear per layer, all sharing one list of live rows: a row whose
// activations became all zero stays zero (the epilogue is zero preserving), so it is dropped
// from the list and never touched again. On the device the list and its count stay on the
// device for the whole network: each layer flags its nonzero rows inside the product kernel
// and cub::DeviceSelect compacts the list (no host round trip per layer); all L layers of a
// batch are captured once into a CUDA Graph and replayed (no launch gaps). Activations are
// dense per row (batch x N, two ping-pong buffers indexed by row id); inputs are processed in
// batches that fit device memory. The live count and list are read back once per batch.
//
// Policies without a row list (csc_gather, cusparse_reuse_buffer, cusparse_buffer_per_call)
// compute every row of every layer; the categories are then taken from the last layer.
// Host and device backends share the call: run(host_exec, ...) / run(cuda_exec, ...) (the
// device one in translation units compiled by nvcc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/layers/sparse_linear.hpp"
#include "sdnn/policies/sparse_linear.hpp"

#if defined(__CUDACC__)
#include <atomic>
#include <thread>

#include "sdnn/kernels/challenge.cuh"
#include "sdnn/ops/live_rows.cuh"
#endif

namespace sdnn::pipeline {

struct challenge_options {
  std::int64_t max_batch = 0;  // rows per batch; 0 = as many as fit in ~70% of free device memory
  bool use_graph = true;       // capture each batch's layer loop into a CUDA Graph (not for cuSPARSE policies)
};

struct challenge_result {
  std::vector<std::int32_t> categories;  // 1-based ids of inputs with a nonzero final row, ascending
  dense_matrix<float> final;             // images x N final activations, when asked for (keep_final)
  std::int64_t batches = 0;
};

template <class Policy = policy::sparse_linear_default>
class challenge_network {
 public:
  using layer_type = layers::sparse_linear<float, format::csr, Policy>;

  explicit challenge_network(std::vector<std::shared_ptr<layer_type>> layers) : layers_(std::move(layers)) {
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

#if defined(__CUDACC__)
  // Device plan for up to `inputs` input rows: uploads/transposes every layer's weights (first
  // time only), chooses the batch, allocates activations, lists, flags and the compaction
  // workspace. Synchronises exec.stream (reads free memory).
  void plan(std::int64_t inputs, cuda_exec exec, challenge_options opt = {}) {
    SDNN_EXPECTS(inputs >= 0 && inputs <= INT32_MAX, "challenge_network: inputs must fit int32, got ", inputs);
    for (auto& l : layers_) l->device(exec);
    if constexpr (layer_type::uses_tiles()) prepare_tiles(exec);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    std::size_t free_b = 0, total_b = 0;
    SDNN_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    std::int64_t const n = neurons();
    std::int64_t const per_row = 2 * n * static_cast<std::int64_t>(sizeof(float)) + 4 * 16;
    std::int64_t fit = static_cast<std::int64_t>(0.7 * static_cast<double>(free_b)) / per_row;
    std::int64_t batch = std::max<std::int64_t>(1, std::min<std::int64_t>(inputs, fit));
    if (opt.max_batch > 0) batch = std::min(batch, opt.max_batch);
    batch_ = batch;
    opt_ = opt;
    ws_ = std::make_shared<device_ws>(batch, n, exec);
    graph_rows_ = -1;
  }
  std::int64_t batch() const noexcept { return batch_; }

  // Device backend. inputs: device CSR (images x N). Runs every batch; reads the live count
  // and list back once per batch (this call synchronises exec.stream for that), never per
  // layer (except policy::cusparse_filter_rows, which reads the count every layer).
  challenge_result run(cuda_exec exec, csr_view<float, std::int32_t> inputs, bool keep_final = false) {
    std::int64_t const n = neurons();
    SDNN_EXPECTS(inputs.cols == n, "challenge_network: inputs have ", inputs.cols, " columns, the network ", n,
                 " neurons");
    if (!ws_ || batch_ < std::min<std::int64_t>(inputs.rows, 1)) plan(inputs.rows, exec, opt_);
    auto& w = *static_cast<device_ws*>(ws_.get());
    challenge_result res;
    if (keep_final) res.final = dense_matrix<float>(inputs.rows, n);
    for (std::int64_t first = 0; first < inputs.rows; first += batch_) {
      auto const rows = static_cast<std::int32_t>(std::min(batch_, inputs.rows - first));
      bool const graph = opt_.use_graph && exec.stream != nullptr && !policy::is_cusparse_v<Policy>;
      if (graph) {
        if (graph_rows_ != rows || graph_first_ != first || graph_src_[0] != inputs.row_ptr || graph_src_[1] != inputs.col_idx ||
            graph_src_[2] != inputs.values)
          capture(exec, inputs, static_cast<std::int32_t>(first), rows);
        SDNN_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph_exec_.get()), exec.stream));
      } else {
        enqueue_batch(exec, inputs, static_cast<std::int32_t>(first), rows);
      }
      ++res.batches;
      std::int32_t count = 0;
      SDNN_CUDA_CHECK(cudaMemcpyAsync(&count, w.count[final_slot()].data(), sizeof count, cudaMemcpyDeviceToHost,
                                      exec.stream));
      SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
      std::vector<std::int32_t> ids(static_cast<std::size_t>(count));
      if (count)
        SDNN_CUDA_CHECK(cudaMemcpyAsync(ids.data(), w.list[final_slot()].data(), ids.size() * sizeof(std::int32_t),
                                        cudaMemcpyDeviceToHost, exec.stream));
      if (keep_final) {
        buffer<float, device_space> tmp(static_cast<std::size_t>(rows) * n, exec);
        dense_view<float> t{rows, n, n, tmp.data()};
        dense_view<float const> yl{rows, n, n, w.y[final_y()].data()};
        kernels::copy_listed_rows(yl, w.list[final_slot()].data(), w.count[final_slot()].data(), rows, t, exec);
        SDNN_CUDA_CHECK(cudaMemcpyAsync(res.final.data() + first * n, tmp.data(), tmp.size() * sizeof(float),
                                        cudaMemcpyDeviceToHost, exec.stream));
      }
      SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
      for (auto r : ids) res.categories.push_back(static_cast<std::int32_t>(first) + r + 1);
    }
    return res;
  }
#endif

 private:
  std::vector<std::shared_ptr<layer_type>> layers_;

#if defined(__CUDACC__)
  struct device_ws {
    buffer<float, device_space> y[2];
    buffer<std::int32_t, device_space> list[2], count[2];
    buffer<int, device_space> flags;
    kernels::live_row_compactor<std::int32_t> compactor;
    device_ws(std::int64_t batch, std::int64_t n, cuda_exec exec) {
      for (int i = 0; i < 2; ++i) {
        y[i] = buffer<float, device_space>(static_cast<std::size_t>(batch * n), exec);
        list[i] = buffer<std::int32_t, device_space>(static_cast<std::size_t>(batch), exec);
        count[i] = buffer<std::int32_t, device_space>(1, exec);
      }
      flags = buffer<int, device_space>(static_cast<std::size_t>(batch), exec);
      compactor.reserve(static_cast<std::int32_t>(batch), exec);
    }
  };
  struct graph_exec_deleter {
    void operator()(void* g) const { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(g)); }
  };

  // Which ping-pong slot holds the final activations / list after all layers.
  int final_y() const { return static_cast<int>(layers_.size() % 2); }
  int final_slot() const { return layer_type::uses_row_list() ? static_cast<int>(layers_.size() % 2) : 0; }

  // Builds every layer's footprint tiles: weights fetched to the host in chunks, tiles built
  // on host threads in parallel, then uploaded. Synchronises exec.stream.
  void prepare_tiles(cuda_exec exec) {
    using impl = layers::detail::sparse_linear_impl<Policy>;
    std::size_t const chunk = 64;
    unsigned const workers = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    std::vector<std::size_t> todo;
    for (std::size_t l = 0; l < layers_.size(); ++l)
      if (!layers_[l]->device(exec).tiles_built) todo.push_back(l);
    for (std::size_t c0 = 0; c0 < todo.size(); c0 += chunk) {
      std::size_t const c1 = std::min(todo.size(), c0 + chunk);
      std::vector<typename layers::detail::sparse_linear_device<float>::host_wt> hw;
      for (std::size_t i = c0; i < c1; ++i) hw.push_back(layers_[todo[i]]->device(exec).fetch_wt(exec));
      SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
      std::vector<kernels::csc_tiles_host<float>> th(c1 - c0);
      std::vector<char> ok(c1 - c0, 0);
      std::atomic<std::size_t> next{0};
      std::vector<std::thread> pool;
      for (unsigned t = 0; t < workers; ++t)
        pool.emplace_back([&] {
          for (std::size_t i = next++; i < th.size(); i = next++)
            ok[i] = kernels::build_csc_tiles(hw[i].view(), impl::tile_cols, impl::max_footprint, th[i]);
        });
      for (auto& t : pool) t.join();
      for (std::size_t i = c0; i < c1; ++i)
        layers_[todo[i]]->device(exec).install_tiles(th[i - c0], ok[i - c0] != 0, exec);
    }
  }

  void enqueue_batch(cuda_exec exec, csr_view<float, std::int32_t> inputs, std::int32_t first, std::int32_t rows) {
    auto& w = *static_cast<device_ws*>(ws_.get());
    std::int64_t const n = neurons();
    auto yv = [&](int i) { return dense_view<float>{rows, n, n, w.y[i].data()}; };
    kernels::densify_csr_rows(inputs, first, rows, yv(0), exec);
    bool const listed = layer_type::uses_row_list();
    if (listed) {
      kernels::csr_nonempty_flags(inputs, first, rows, w.flags.data(), exec);
      w.compactor.select(nullptr, w.flags.data(), w.list[0].data(), w.count[0].data(), rows, exec);
    }
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      int const src = static_cast<int>(l % 2), dst = 1 - src;
      if (listed) {
        SDNN_CUDA_CHECK(cudaMemsetAsync(w.flags.data(), 0, static_cast<std::size_t>(rows) * sizeof(int), exec.stream));
        layers_[l]->forward_rows(exec, dense_view<float const>(yv(src)), yv(dst), w.list[src].data(),
                                 w.count[src].data(), rows, w.flags.data());
        w.compactor.select(w.list[src].data(), w.flags.data(), w.list[dst].data(), w.count[dst].data(), rows, exec);
      } else {
        layers_[l]->forward_rows(exec, dense_view<float const>(yv(src)), yv(dst), nullptr, nullptr, rows, nullptr);
      }
    }
    if (!listed) {  // categories from the last layer's rows
      kernels::dense_nonzero_rows(dense_view<float const>(yv(final_y())), w.flags.data(), exec);
      w.compactor.select(nullptr, w.flags.data(), w.list[0].data(), w.count[0].data(), rows, exec);
    }
  }

  void capture(cuda_exec exec, csr_view<float, std::int32_t> inputs, std::int32_t first, std::int32_t rows) {
    cudaGraph_t g = nullptr;
    SDNN_CUDA_CHECK(cudaStreamBeginCapture(exec.stream, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue_batch(exec, inputs, first, rows);
    } catch (...) {
      cudaStreamEndCapture(exec.stream, &g);  // ends the (now invalid) capture
      if (g) cudaGraphDestroy(g);
      cudaGetLastError();  // the original error is the one being rethrown
      throw;
    }
    SDNN_CUDA_CHECK(cudaStreamEndCapture(exec.stream, &g));
    cudaGraphExec_t ge = nullptr;
    cudaError_t const st = cudaGraphInstantiate(&ge, g, 0);
    cudaGraphDestroy(g);
    SDNN_CUDA_CHECK(st);
    graph_exec_.reset(static_cast<void*>(ge), graph_exec_deleter{});
    graph_rows_ = rows;
    graph_first_ = first;
    graph_src_[0] = inputs.row_ptr;
    graph_src_[1] = inputs.col_idx;
    graph_src_[2] = inputs.values;
  }

#endif
  // Same members in every translation unit (device state type-erased).
  std::shared_ptr<void> ws_;          // device_ws
  std::shared_ptr<void> graph_exec_;  // cudaGraphExec_t of the captured batch
  std::int64_t graph_rows_ = -1, graph_first_ = -1;
  void const* graph_src_[3] = {};  // the inputs the graph was captured for
  std::int64_t batch_ = 0;
  challenge_options opt_{};
};

}  // namespace sdnn::pipeline
