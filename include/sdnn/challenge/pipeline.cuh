// sdnn/challenge/pipeline.cuh - the bodies of the device members of pipeline::challenge_network
// (challenge/pipeline.hpp defines the members for every compiler, as calls through the type's
// table; a .cu that includes this header and constructs the type installs them). Built on ops
// only: each layer's ops::dense_sparse_plan (through layers::sparse_linear) and the row
// bookkeeping of linear/op/rows.cuh.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/linear/sparse_linear.cuh"
#include "sdnn/linear/op/rows.cuh"
#include "sdnn/challenge/pipeline.hpp"
#include "sdnn/pipeline/weight_store.cuh"

namespace sdnn::pipeline {

template <class P>
struct challenge_network<P>::device_state {
  buffer<float, device_space> y[2];
  buffer<std::int32_t, device_space> list[2], count[2];
  buffer<int, device_space> flags;
  ops::row_compaction compaction;
  // Streamed weights (options.weights = host, or automatic over the budget): the pinned layers
  // and the device ring; null when the layers' own device plans are resident.
  std::unique_ptr<weight_store<P, float>> store;
  // The CUDA Graph of the last captured batch and what it was captured for.
  std::shared_ptr<void> graph_exec;  // cudaGraphExec_t
  std::int64_t graph_rows = -1, graph_first = -1;
  void const* graph_src[3] = {};

  device_state(std::int64_t batch, std::int64_t n, cuda_exec exec)
      : compaction(static_cast<std::int32_t>(batch), exec) {
    for (int i = 0; i < 2; ++i) {
      y[i] = buffer<float, device_space>(static_cast<std::size_t>(batch * n), exec);
      list[i] = buffer<std::int32_t, device_space>(static_cast<std::size_t>(batch), exec);
      count[i] = buffer<std::int32_t, device_space>(1, exec);
    }
    flags = buffer<int, device_space>(static_cast<std::size_t>(batch), exec);
  }
};

namespace detail {
struct graph_exec_deleter {
  void operator()(void* g) const {
    sdnn::detail::cuda_check_noexcept(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(g)), "cudaGraphExecDestroy");
  }
};

// Runs f(i) for i in [0, n) on up to 16 host threads; rethrows the first exception.
template <class F>
void parallel_for(std::size_t n, F&& f) {
  unsigned const workers =
      static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>({16u, n, std::thread::hardware_concurrency()})));
  std::atomic<std::size_t> next{0};
  std::exception_ptr failed;
  std::atomic<bool> stop{false};
  std::mutex mu;
  auto work = [&] {
    for (std::size_t i = next++; i < n && !stop; i = next++) {
      try {
        f(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failed) failed = std::current_exception();
        stop = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < workers; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (failed) std::rethrow_exception(failed);
}
}  // namespace detail

template <class P>
void challenge_network<P>::plan_body(std::int64_t inputs, cuda_exec exec, challenge_options opt) {
  SDNN_EXPECTS(inputs >= 0 && inputs <= INT32_MAX, "challenge_network: inputs must fit int32, got ", inputs);
  std::int64_t const n = neurons();
  // Every layer's plan first (uploads, transposes, tiles), several at once on host threads, so
  // that the free memory measured next already counts the weights. The pipeline runs the
  // layers through run_rows(), which needs no per-layer workspace (planned for 1 row) except
  // for the filter-rows baseline (its packed blocks: re-planned for the batch below).
  device_.reset();
  placement_ = {};
  stats_ = {};
  // Where the weights live (pipeline/weight_store.hpp). Without a budget, automatic compares
  // the estimated resident weights with 60% of the free device memory.
  std::unique_ptr<weight_store<P, float>> store;
  if (opt.weights != weight_placement::device || opt.device_memory_budget > 0) {
    std::uint64_t budget = opt.device_memory_budget;
    if (budget == 0 && opt.weights == weight_placement::automatic) budget = sdnn::detail::default_weight_budget();
    placement_ = choose_weight_store(resident_layer_bytes(), budget, opt.weights, opt.weight_slots);
    if (placement_.streamed) {
      if constexpr (!streams_weights_v<P>) {
        SDNN_FAIL("challenge_network: policy ", policy::name<P>(),
                  " cannot stream its weights from host memory (the cuSPARSE baselines keep vendor descriptors on "
                  "resident W^T); streamed weights run with csc_gather, csc_tiled and skip_empty_rows of them");
      } else {
        // A budget below two of the smallest possible blocks (6 bytes per nonzero) is refused
        // before any layer is packed; the exact check follows the packing.
        std::uint64_t floor_b = 0;
        for (auto const& l : layers_) floor_b = std::max<std::uint64_t>(floor_b, 6 * static_cast<std::uint64_t>(l->nnz()));
        if (budget > 0 && budget < 2 * floor_b)
          SDNN_FAIL("weight store: a device-memory budget of ", format_bytes(budget),
                    " cannot hold two slots of the largest layer (at least ", format_bytes(floor_b),
                    " each); streaming needs at least 2");
        std::vector<csr_view<float, std::int32_t>> ws;
        std::vector<float const*> bs;
        for (std::size_t l = 0; l < layers_.size(); ++l) {
          SDNN_EXPECTS(layers_[l]->has_host_weights(), "challenge_network: layer ", l + 1,
                       " was built from device weights and has no host copy to stream from; build the layers from "
                       "host weights for weights = host");
          ws.push_back(layers_[l]->weights().view());
          bs.push_back(layers_[l]->host_epilogue().bias);
        }
        store = std::make_unique<weight_store<P, float>>(ws, bs);
        placement_ = choose_weight_store(store->layer_sizes(), budget, weight_placement::host, opt.weight_slots);
        store->allocate(placement_.slots, exec);
        stats_.streamed = true;
        stats_.slots = placement_.slots;
        stats_.slot_bytes = placement_.slot_bytes;
        stats_.pinned_bytes = store->pinned_bytes();
      }
    }
  }
  if (!store) detail::parallel_for(layers_.size(), [&](std::size_t l) { layers_[l]->plan(1, n, exec); });
  SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
  std::size_t free_b = 0, total_b = 0;
  SDNN_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  std::int64_t const per_row = 2 * n * static_cast<std::int64_t>(sizeof(float)) + 4 * 16;
  std::int64_t const fit = static_cast<std::int64_t>(0.7 * static_cast<double>(free_b)) / per_row;
  std::int64_t batch = std::max<std::int64_t>(1, std::min<std::int64_t>(inputs, fit));
  if (opt.max_batch > 0) batch = std::min(batch, opt.max_batch);
  if constexpr (policy::is_cusparse_v<P> && layer_type::uses_row_list())
    if (!store)
      for (auto& l : layers_) l->plan(batch, n, exec);
  batch_ = batch;
  opt_ = opt;
  device_ = std::make_shared<device_state>(batch, n, exec);
  device_->store = std::move(store);
}

template <class P>
challenge_result challenge_network<P>::run_body(cuda_exec exec, csr_view<float, std::int32_t> inputs,
                                               bool keep_final) {
  std::int64_t const n = neurons();
  SDNN_EXPECTS_DIMS(inputs.cols == n, "challenge_network: inputs have ", inputs.cols, " columns, the network ", n,
                    " neurons");
  if (!device_ || batch_ < std::min<std::int64_t>(inputs.rows, 1)) plan(inputs.rows, exec, opt_);
  auto& w = *device_;
  challenge_result res;
  if (keep_final) res.final = dense_matrix<float>(inputs.rows, n);
  if (w.store) w.store->reset_stats();
  for (std::int64_t first = 0; first < inputs.rows; first += batch_) {
    auto const rows = static_cast<std::int32_t>(std::min(batch_, inputs.rows - first));
    // Streamed weights are not captured (see pipeline/weight_store.hpp: CUDA Graphs).
    bool const graph = opt_.use_graph && exec.stream != nullptr && !policy::is_cusparse_v<P> && !w.store;
    if (graph) {
      if (w.graph_rows != rows || w.graph_first != first || w.graph_src[0] != inputs.row_ptr ||
          w.graph_src[1] != inputs.col_idx || w.graph_src[2] != inputs.values)
        capture(exec, inputs, static_cast<std::int32_t>(first), rows);
      SDNN_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(w.graph_exec.get()), exec.stream));
    } else {
      enqueue_batch(exec, inputs, static_cast<std::int32_t>(first), rows);
    }
    ++res.batches;
    std::int32_t count = 0;
    SDNN_CUDA_CHECK(
        cudaMemcpyAsync(&count, w.count[final_slot()].data(), sizeof count, cudaMemcpyDeviceToHost, exec.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    std::vector<std::int32_t> ids(static_cast<std::size_t>(count));
    if (count)
      SDNN_CUDA_CHECK(cudaMemcpyAsync(ids.data(), w.list[final_slot()].data(), ids.size() * sizeof(std::int32_t),
                                      cudaMemcpyDeviceToHost, exec.stream));
    if (keep_final) {
      buffer<float, device_space> tmp(static_cast<std::size_t>(rows) * n, exec);
      dense_view<float> t{rows, n, n, tmp.data()};
      dense_view<float const> yl{rows, n, n, w.y[final_y()].data()};
      ops::copy_listed_rows(yl, w.list[final_slot()].data(), w.count[final_slot()].data(), rows, t, exec);
      SDNN_CUDA_CHECK(cudaMemcpyAsync(res.final.data() + first * n, tmp.data(), tmp.size() * sizeof(float),
                                      cudaMemcpyDeviceToHost, exec.stream));
    }
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    for (auto r : ids) res.categories.push_back(static_cast<std::int32_t>(first) + r + 1);
    if (w.store) stats_.copy_seconds = w.store->copy_seconds();  // reads this batch's upload timings
  }
  if (w.store) {
    stats_.bytes = w.store->bytes();
    stats_.uploads = w.store->uploads();
  }
  return res;
}

template <class P>
void challenge_network<P>::enqueue_batch(cuda_exec exec, csr_view<float, std::int32_t> inputs, std::int32_t first,
                                         std::int32_t rows) {
  auto& w = *device_;
  std::int64_t const n = neurons();
  auto yv = [&](int i) { return dense_view<float>{rows, n, n, w.y[i].data()}; };
  ops::densify_rows(inputs, first, rows, yv(0), exec);
  bool const listed = layer_type::uses_row_list();
  if (listed) {
    ops::nonempty_row_flags(inputs, first, rows, w.flags.data(), exec);
    w.compaction.run(exec, nullptr, w.flags.data(), w.list[0].data(), w.count[0].data(), rows);
  }
  // Streamed weights: the layer runs from its device slot (pipeline/weight_store.cuh), else from
  // its own resident plan.
  auto forward = [&](std::size_t l, dense_view<float const> in, dense_view<float> out, ops::listed_rows lr, int* fl) {
    if (w.store)
      w.store->forward_rows(l, exec, in, out, layers_[l]->host_epilogue(), lr, fl);
    else
      layers_[l]->forward_rows(exec, in, out, lr, fl);
  };
  if (w.store) w.store->begin_pass(exec);
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    int const src = static_cast<int>(l % 2), dst = 1 - src;
    if (listed) {
      SDNN_CUDA_CHECK(cudaMemsetAsync(w.flags.data(), 0, static_cast<std::size_t>(rows) * sizeof(int), exec.stream));
      forward(l, dense_view<float const>(yv(src)), yv(dst),
              ops::listed_rows{w.list[src].data(), w.count[src].data(), rows}, w.flags.data());
      w.compaction.run(exec, w.list[src].data(), w.flags.data(), w.list[dst].data(), w.count[dst].data(), rows);
    } else {
      forward(l, dense_view<float const>(yv(src)), yv(dst), ops::listed_rows{nullptr, nullptr, rows}, nullptr);
    }
  }
  if (w.store) w.store->end_pass(exec);
  if (!listed) {  // categories from the last layer's rows
    ops::nonzero_row_flags(dense_view<float const>(yv(final_y())), w.flags.data(), exec);
    w.compaction.run(exec, nullptr, w.flags.data(), w.list[0].data(), w.count[0].data(), rows);
  }
}

template <class P>
void challenge_network<P>::capture(cuda_exec exec, csr_view<float, std::int32_t> inputs, std::int32_t first,
                                   std::int32_t rows) {
  auto& w = *device_;
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
  sdnn::detail::cuda_check_noexcept(cudaGraphDestroy(g), "cudaGraphDestroy");
  SDNN_CUDA_CHECK(st);
  w.graph_exec.reset(static_cast<void*>(ge), detail::graph_exec_deleter{});
  w.graph_rows = rows;
  w.graph_first = first;
  w.graph_src[0] = inputs.row_ptr;
  w.graph_src[1] = inputs.col_idx;
  w.graph_src[2] = inputs.values;
}

template <class P>
typename challenge_network<P>::device_table const challenge_network<P>::device_bodies{&challenge_network::plan_body,
                                                                                      &challenge_network::run_body};

}  // namespace sdnn::pipeline

namespace sdnn::detail {
// Called by the constructor when a CUDA compiler reads it (layers/layer.hpp): installs the
// bodies above for this type, before main.
template <class P>
bool request_device_members(device_tag<pipeline::challenge_network<P>>, int) noexcept {
  return device_registration<pipeline::challenge_network<P>>::installed;
}
}  // namespace sdnn::detail
