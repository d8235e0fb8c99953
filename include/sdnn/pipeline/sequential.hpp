// sdnn/pipeline/sequential.hpp - a chain of layers run as one: y = f_L(... f_1(x)).
//
// sequential<T> is itself a layer<T>, so chains nest; host and device backends share the call:
// forward(host_exec, ...) / forward(cuda_exec, ...). The device members are defined in
// pipeline/sequential.cuh (see linear/sparse_linear.hpp for the rule: one .cu of the program must
// include it; without CUDA they throw not_compiled).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sdnn/core/config.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/memory.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/layers/layer.hpp"

namespace sdnn {

// plan(batch, in_features, exec) fixes the largest batch processed at once and, for the device,
// allocates two ping-pong activation buffers of batch x (widest intermediate) once; forward()
// then runs every layer on the stream with no allocation and no synchronisation, in slices of at
// most `batch` rows (so inputs larger than device memory allows are processed in batches).
template <class T>
class sequential : public layer<T> {
 public:
  sequential() = default;
  explicit sequential(std::vector<std::shared_ptr<layer<T>>> layers) : layers_(std::move(layers)) {}
  sequential& add(std::shared_ptr<layer<T>> l) {
    SDNN_EXPECTS(l != nullptr, "sequential: null layer");
    layers_.push_back(std::move(l));
    return *this;
  }
  std::size_t size() const noexcept { return layers_.size(); }
  layer<T>& operator[](std::size_t i) { return *layers_[i]; }

  std::string name() const override { return "sequential(" + std::to_string(layers_.size()) + " layers)"; }
  std::int64_t out_features(std::int64_t in_features) const override {
    for (auto const& l : layers_) in_features = l->out_features(in_features);
    return in_features;
  }

  void forward(host_exec exec, dense_view<T const> in, dense_view<T> out) override {
    check(in, out);
    if (layers_.empty()) return copy_rows(in, out);
    std::int64_t const width = widest(in.cols);
    std::int64_t const batch = std::max<std::int64_t>(1, planned_batch_ > 0 ? planned_batch_ : in.rows);
    host_buffer<T> ping(static_cast<std::size_t>(std::min(batch, in.rows) * width));
    host_buffer<T> pong(ping.size());
    for (std::int64_t r0 = 0; r0 < in.rows; r0 += batch) {
      std::int64_t const rows = std::min(batch, in.rows - r0);
      dense_view<T const> x{rows, in.cols, in.ld, in.data + r0 * in.ld};
      std::int64_t f = in.cols;
      T* bufs[2] = {ping.data(), pong.data()};
      for (std::size_t i = 0; i < layers_.size(); ++i) {
        std::int64_t const g = layers_[i]->out_features(f);
        bool const last = i + 1 == layers_.size();
        dense_view<T> y = last ? dense_view<T>{rows, g, out.ld, out.data + r0 * out.ld}
                               : dense_view<T>{rows, g, g, bufs[i % 2]};
        layers_[i]->forward(exec, x, y);
        x = y;
        f = g;
      }
    }
  }

  // Plans every layer for `batch` rows and allocates the ping-pong buffers. May synchronise.
  void plan(std::int64_t batch, std::int64_t in_features, cuda_exec exec) override;
  // Runs the chain on exec.stream; plan() must have been called with this in_features.
  // No allocation, no synchronisation (unless a layer's policy documents one).
  void forward(cuda_exec exec, dense_view<T const> in, dense_view<T> out) override;

 private:
  void check(dense_view<T const> in, dense_view<T> out) const {
    SDNN_EXPECTS(out.rows == in.rows, "sequential: input has ", in.rows, " rows, output ", out.rows);
    SDNN_EXPECTS(out.cols == out_features(in.cols), "sequential: output has ", out.cols, " features, the chain gives ",
                 out_features(in.cols));
  }
  std::int64_t widest(std::int64_t f) const {
    std::int64_t w = 1;
    for (std::size_t i = 0; i + 1 < layers_.size(); ++i) {
      f = layers_[i]->out_features(f);
      w = std::max(w, f);
    }
    return w;
  }
  static void copy_rows(dense_view<T const> in, dense_view<T> out) {
    for (std::int64_t r = 0; r < in.rows; ++r) std::copy(in.row(r), in.row(r) + in.cols, out.row(r));
  }

  struct device_state;  // pipeline/sequential.cuh: the two device ping-pong buffers

  std::vector<std::shared_ptr<layer<T>>> layers_;
  std::int64_t planned_batch_ = 0, planned_in_ = -1;
  std::shared_ptr<device_state> device_;
};

#if !SDNN_HAS_CUDA
template <class T>
void sequential<T>::plan(std::int64_t, std::int64_t, cuda_exec) {
  SDNN_NOT_COMPILED("sequential::plan(cuda_exec)", "this build has no CUDA (SDNN_ENABLE_CUDA=OFF)");
}
template <class T>
void sequential<T>::forward(cuda_exec, dense_view<T const>, dense_view<T>) {
  SDNN_NOT_COMPILED("sequential::forward(cuda_exec)", "this build has no CUDA (SDNN_ENABLE_CUDA=OFF)");
}
#endif

}  // namespace sdnn
