// sdnn/train/op/prune_uniform.cuh - prune_uniform on a device weight tensor: the public calls around the
// launch sequence of train/kernel/prune_uniform.cuh. Same rules and result as the host
// prune_uniform (train/op/prune_uniform.hpp). prune_uniform synchronises once (the report);
// prune_uniform_async not at all. The algorithm, the synchronisation and the limits:
// docs/train.md#uniform-pruning.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/conv/pruned_weights.hpp"
#include "sdnn/train/kernel/prune_uniform.cuh"

namespace sdnn::conv {

namespace detail {

// The report from the counts read back ([K] kept per channel, then the NaN count).
inline void report_from_counts(pruning_report& r, std::int64_t const* counts, prune_rule rule,
                               std::int64_t uniform_nnz) {
  SDNN_EXPECTS(counts[r.K] == 0, "prune_uniform (device): w contains ", counts[r.K], " NaN value(s)");
  r.kept_per_channel.assign(counts, counts + r.K);
  finish_report(r, rule, uniform_nnz);
}

}  // namespace detail

// Prunes the device tensor w [K x F] (row-major, F = C*R*S) to `sparsity` with the host
// prune_uniform's rules and result (see train/op/prune_uniform.hpp). SYNCHRONISES exec.stream once (the
// kept counts come back for the report; for the global rule the densest channel also sizes the
// index array); the index / values arrays are completed by work still enqueued on exec.stream
// when this returns (stream order makes them ready for later work on that stream). w must stay
// valid until then. K*F < 2^31 (checked before anything is allocated); a NaN in w is reported
// as an error.
inline device_pruning_result prune_uniform(float const* w, std::int64_t K, std::int64_t F, double sparsity,
                                           prune_rule rule, std::int64_t uniform_nnz, cuda_exec exec) {
  detail::check_prune_args(K, F, sparsity, rule, uniform_nnz, detail::prune_device_max_entries);
  auto st = detail::prune_select(w, K, F, sparsity, rule, exec);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(K + 1));
  SDNN_CUDA_CHECK(cudaMemcpyAsync(counts.data(), st.counts.data(), counts.size() * sizeof(std::int64_t),
                                  cudaMemcpyDeviceToHost, exec.stream));
  SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));  // the one synchronisation
  detail::report_from_counts(st.res, counts.data(), rule, uniform_nnz);
  detail::prune_pad(st, st.res.nnz_per_channel, exec);
  return std::move(st.res);
}
inline device_pruning_result prune_uniform(float const* w, std::int64_t K, std::int64_t F, double sparsity,
                                           prune_rule rule, cuda_exec exec) {
  return prune_uniform(w, K, F, sparsity, rule, -1, exec);
}
inline device_pruning_result prune_uniform(float const* w, std::int64_t K, std::int64_t F, double sparsity,
                                           cuda_exec exec) {
  return prune_uniform(w, K, F, sparsity, prune_rule::global, -1, exec);
}

class pending_pruning;
inline pending_pruning prune_uniform_async(float const* w, std::int64_t K, std::int64_t F, double sparsity,
                                           prune_rule rule, std::int64_t uniform_nnz, cuda_exec exec);

// An enqueued device pruning whose report has not been read yet (prune_uniform_async).
class pending_pruning {
 public:
  pending_pruning(pending_pruning&&) = default;
  pending_pruning& operator=(pending_pruning&&) = delete;
  // Dropped without get(): waits for the stream, because the counts are still being
  // copied into the pinned buffer this frees.
  ~pending_pruning() {
    if (!taken_ && !counts_.empty())
      ::sdnn::detail::cuda_check_noexcept(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  // SYNCHRONISES the stream the pruning was enqueued on, reads the kept counts, checks w
  // (no NaN) and uniform_nnz (>= the densest channel) and returns the complete result.
  // Call once.
  device_pruning_result get() {
    SDNN_EXPECTS(!taken_, "pending_pruning::get: the result was already taken");
    SDNN_CUDA_CHECK(cudaStreamSynchronize(stream_));
    taken_ = true;
    detail::report_from_counts(res_, counts_.data(), rule_, uniform_nnz_);
    return std::move(res_);
  }

 private:
  friend pending_pruning prune_uniform_async(float const*, std::int64_t, std::int64_t, double, prune_rule,
                                             std::int64_t, cuda_exec);
  pending_pruning() = default;
  device_pruning_result res_;
  pinned_buffer<std::int64_t> counts_;  // [K + 1], written by an asynchronous copy
  prune_rule rule_ = prune_rule::global;
  std::int64_t uniform_nnz_ = -1;
  cudaStream_t stream_ = nullptr;
  bool taken_ = false;
};

// prune_uniform without any synchronisation: everything (the counts' copy into pinned
// memory included) is enqueued on exec.stream; get() on the returned object synchronises
// and reports. The stored count must be known up front: prune_rule::per_channel, or
// prune_rule::global with uniform_nnz >= 0 (checked against the densest channel by get();
// if it is too small, get() throws and the arrays are not a valid pruning).
inline pending_pruning prune_uniform_async(float const* w, std::int64_t K, std::int64_t F, double sparsity,
                                           prune_rule rule, std::int64_t uniform_nnz, cuda_exec exec) {
  detail::check_prune_args(K, F, sparsity, rule, uniform_nnz, detail::prune_device_max_entries);
  SDNN_EXPECTS(rule == prune_rule::per_channel || uniform_nnz >= 0,
               "prune_uniform_async: the global rule needs uniform_nnz (the densest channel's count is only known "
               "after a read-back; prune_uniform does that with one synchronisation)");
  pending_pruning p;
  p.rule_ = rule;
  p.uniform_nnz_ = uniform_nnz;
  p.stream_ = exec.stream;
  p.counts_ = pinned_buffer<std::int64_t>(static_cast<std::size_t>(K + 1));  // before any work is enqueued
  auto st = detail::prune_select(w, K, F, sparsity, rule, exec);
  SDNN_CUDA_CHECK(cudaMemcpyAsync(p.counts_.data(), st.counts.data(), p.counts_.size() * sizeof(std::int64_t),
                                  cudaMemcpyDeviceToHost, exec.stream));
  std::int64_t const nnz = uniform_nnz >= 0 ? uniform_nnz : detail::keep_target(rule, sparsity, K, F);
  detail::prune_pad(st, nnz, exec);
  p.res_ = std::move(st.res);
  return p;
}

// The device result as a host pruning_result (what make_conv_weights takes). SYNCHRONISES
// exec.stream (copies into pageable memory).
inline pruning_result to_host(device_pruning_result const& d, cuda_exec exec) {
  pruning_result r;
  static_cast<pruning_report&>(r) = static_cast<pruning_report const&>(d);
  r.pruned.resize(d.pruned.size());
  r.index.resize(d.index.size());
  if (!r.pruned.empty())
    SDNN_CUDA_CHECK(cudaMemcpyAsync(r.pruned.data(), d.pruned.data(), r.pruned.size() * sizeof(float),
                                    cudaMemcpyDeviceToHost, exec.stream));
  if (!r.index.empty())
    SDNN_CUDA_CHECK(cudaMemcpyAsync(r.index.data(), d.index.data(), r.index.size() * sizeof(std::int32_t),
                                    cudaMemcpyDeviceToHost, exec.stream));
  SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
  return r;
}

}  // namespace sdnn::conv
