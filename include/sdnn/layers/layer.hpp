// sdnn/layers/layer.hpp - the interface every layer offers to a pipeline.
//
// Activations are row-major dense matrices, one row per sample (batch x features); a
// convolution's NCHW sample is flattened as C*H*W features. A layer follows the plan protocol
// of core/plan.hpp: plan() once for a batch size (policy choice, uploads, workspace, tuning),
// then forward() many times; forward(cuda_exec) enqueues on exec.stream.
#pragma once

#include <cstdint>
#include <string>

#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn {

// Every member below is declared, with the same signature, in every translation unit, with
// or without a CUDA compiler ("the same class in every compiler"): a layer's device members
// are defined in its .cuh, and in a build without CUDA they throw sdnn::not_compiled.
template <class T>
class layer {
 public:
  virtual ~layer() = default;
  virtual std::string name() const = 0;
  // Features per sample of the output, given the input's.
  virtual std::int64_t out_features(std::int64_t in_features) const = 0;
  // Plan-time work for batches of up to `batch` rows (workspace, policy choice, tuning runs).
  // May synchronise the device; forward() must not (unless the layer documents it).
  virtual void plan(std::int64_t /*batch*/, std::int64_t /*in_features*/, cuda_exec /*exec*/) {}
  // in: batch x in_features, out: batch x out_features, both in host memory.
  virtual void forward(host_exec, dense_view<T const> in, dense_view<T> out) = 0;
  // in/out in device memory; enqueued on exec.stream. A layer without device code says so.
  virtual void forward(cuda_exec, dense_view<T const> /*in*/, dense_view<T> /*out*/) {
    SDNN_FAIL("layer '", name(), "' has no device implementation");
  }
};

}  // namespace sdnn
