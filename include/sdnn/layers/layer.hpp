// sdnn/layers/layer.hpp - the interface every layer offers to a pipeline.
//
// Activations are row-major dense matrices, one row per sample (batch x features); a
// convolution's NCHW sample is flattened as C*H*W features. A layer follows the plan protocol
// of core/plan.hpp: plan() once for a batch size (policy choice, uploads, workspace, tuning),
// then forward() many times; forward(cuda_exec) enqueues on exec.stream.
#pragma once

#include <cstdint>
#include <string>

#include "sdnn/core/config.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn::detail {
// Device members callable from every translation unit (layers::sparse_linear, sequential and
// the pipelines built on them). The .hpp defines each device member, for every compiler, as a call
// through L::device_table_ (an inline static pointer: one per type in the program; null: throw
// not_compiled). The .cuh defines the bodies, their table L::device_bodies, and the overload of
// request_device_members(device_tag<L>, int) that L's constructors call when a CUDA compiler
// reads them: it names device_registration<L>::installed, whose static initialiser installs the
// table before main. The call only reads a bool, so the program behaves the same whichever copy
// of a constructor the linker keeps.
template <class L>
struct device_tag {};

// Found where L's .cuh is not part of the translation unit: nothing to request.
template <class L>
constexpr bool request_device_members(device_tag<L>, long) noexcept {
  return false;
}

// L befriends it.
template <class L>
struct device_registration {
  static inline bool const installed = (L::device_table_ = &L::device_bodies, true);
};

// The remedy named by a device member whose type has no device code in this program.
inline std::string no_device_code(std::string const& type, std::string const& instantiate) {
#if SDNN_HAS_CUDA
  return "this program compiled no device code for " + type +
         ": include <sdnn/sdnn.hpp> in one .cu that constructs the type, or " + instantiate + " in any .cu";
#else
  (void)type;
  (void)instantiate;
  return "this build has no CUDA (SDNN_ENABLE_CUDA=OFF)";
#endif
}
}  // namespace sdnn::detail

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
