// sdnn/pipeline/sequential.hpp - a chain of layers run as one: y = f_L(... f_1(x)).
//
// sequential<T> is itself a layer<T>, so chains nest; host and device backends share the call:
// forward(host_exec, ...) / forward(cuda_exec, ...). The device members run the bodies of
// pipeline/sequential.cuh when one .cu of the program compiled them (a .cu that includes it and
// constructs the type, or `template class sdnn::sequential<T>;`), else throw not_compiled (see
// layers/layer.hpp, detail::device_registration).
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
#include "sdnn/core/numeric.hpp"
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
  sequential() { request_device_code(); }
  explicit sequential(std::vector<std::shared_ptr<layer<T>>> layers) : layers_(std::move(layers)) {
    request_device_code();
    for (std::size_t i = 0; i < layers_.size(); ++i)
      SDNN_EXPECTS(layers_[i] != nullptr, "sequential: layer ", i, " is null");
  }
  sequential& add(std::shared_ptr<layer<T>> l) {
    SDNN_EXPECTS(l != nullptr, "sequential: null layer");
    layers_.push_back(std::move(l));
    return *this;
  }
  std::size_t size() const noexcept { return layers_.size(); }
  layer<T>& operator[](std::size_t i) { return *layers_[i]; }

  std::string name() const override { return "sequential(" + std::to_string(layers_.size()) + " layers)"; }
  // Throws dimension_mismatch naming the first layer (index and name()) that does not take
  // the features the chain gives it.
  std::int64_t out_features(std::int64_t in_features) const override {
    for (std::size_t i = 0; i < layers_.size(); ++i) in_features = layer_out(i, in_features);
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
        std::int64_t const g = layers_[i]->out_features(f);  // checked by check()
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
  void plan(std::int64_t batch, std::int64_t in_features, cuda_exec exec) override {
    (this->*device_members("plan(cuda_exec)").plan)(batch, in_features, exec);
  }
  // Runs the chain on exec.stream; plan() must have been called with this in_features.
  // No allocation, no synchronisation (unless a layer's policy documents one).
  void forward(cuda_exec exec, dense_view<T const> in, dense_view<T> out) override {
    (this->*device_members("forward(cuda_exec)").forward)(exec, in, out);
  }

 private:
  // Layer i's output features for f input features. Its refusal (any sdnn::error: a layer's
  // out_features only checks shapes) becomes a dimension_mismatch naming i and its name().
  std::int64_t layer_out(std::size_t i, std::int64_t f) const {
    try {
      return layers_[i]->out_features(f);
    } catch (error const& e) {
      throw dimension_mismatch(::sdnn::detail::concat("sequential: layer ", i, " of ", layers_.size(), " (",
                                                      layers_[i]->name(), ") does not take ", f, " features: ",
                                                      e.what()));
    }
  }
  void check(dense_view<T const> in, dense_view<T> out) const {
    SDNN_EXPECTS_DIMS(out.rows == in.rows, "sequential: input has ", in.rows, " rows, output ", out.rows);
    std::int64_t const g = out_features(in.cols);
    SDNN_EXPECTS_DIMS(out.cols == g, "sequential: output has ", out.cols, " features, the chain gives ", g,
                      layers_.empty() ? std::string(" (no layers)")
                                      : ::sdnn::detail::concat(" (layer ", layers_.size() - 1, ", ",
                                                               layers_.back()->name(), ")"));
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

  // The device members' bodies, defined in pipeline/sequential.cuh and called only through the
  // type's table (layers/layer.hpp, detail::device_registration).
  void plan_body(std::int64_t batch, std::int64_t in_features, cuda_exec exec);
  void forward_body(cuda_exec exec, dense_view<T const> in, dense_view<T> out);
  struct device_table {
    void (sequential::*plan)(std::int64_t, std::int64_t, cuda_exec);
    void (sequential::*forward)(cuda_exec, dense_view<T const>, dense_view<T>);
  };
  static device_table const device_bodies;                    // pipeline/sequential.cuh
  static inline device_table const* device_table_ = nullptr;  // null: no .cu compiled the bodies
  template <class>
  friend struct ::sdnn::detail::device_registration;

  static device_table const& device_members(char const* member) {
    if (device_table_) return *device_table_;
    std::string const type = std::string("sequential<") + value_type_name<T>() + ">";
    throw not_compiled(type + "::" + member,
                       ::sdnn::detail::no_device_code(type, "template class sdnn::" + type + ";"), __FILE__,
                       __LINE__);
  }
  // Compiled by a CUDA compiler: asks for this type's registration (layers/layer.hpp).
  static void request_device_code() noexcept {
#if defined(__CUDACC__)
    request_device_members(::sdnn::detail::device_tag<sequential>{}, 0);
#endif
  }

  std::vector<std::shared_ptr<layer<T>>> layers_;
  std::int64_t planned_batch_ = 0, planned_in_ = -1;
  std::shared_ptr<device_state> device_;
};

}  // namespace sdnn
