// sdnn/pipeline/sequential.cuh - the bodies of the device members of sequential<T>
// (sequential.hpp defines the members for every compiler, as calls through the type's table):
// two ping-pong activation buffers in device memory. A .cu that includes this header and
// constructs a sequential<T> (or `template class sdnn::sequential<T>;`) installs them.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/pipeline/sequential.hpp"

namespace sdnn {

// The record (first) notes every stream forward() ran on: a re-plan or the pipeline's end
// releases ping and pong after that work.
template <class T>
struct sequential<T>::device_state {
  device_state(std::size_t n, cuda_exec const& home)
      : runs(home), ping(n, runs.owned(home)), pong(n, runs.owned(home)) {}
  sdnn::detail::run_streams runs;
  buffer<T, device_space> ping, pong;  // [batch x widest intermediate] each
};

template <class T>
void sequential<T>::plan_body(std::int64_t batch, std::int64_t in_features, cuda_exec exec) {
  SDNN_EXPECTS(batch > 0, "sequential: plan needs a batch > 0, got ", batch);
  out_features(in_features);  // names the first layer that does not fit
  planned_batch_ = batch;
  planned_in_ = in_features;
  std::int64_t f = in_features;
  for (auto& l : layers_) {
    l->plan(batch, f, exec);
    f = l->out_features(f);
  }
  std::size_t const n = static_cast<std::size_t>(batch * widest(in_features));
  device_ = std::make_shared<device_state>(n, exec);
}

template <class T>
void sequential<T>::forward_body(cuda_exec exec, dense_view<T const> in, dense_view<T> out) {
  check(in, out);
  if (layers_.empty()) {
    if (in.rows && in.cols)
      SDNN_CUDA_CHECK(cudaMemcpy2DAsync(out.data, out.ld * sizeof(T), in.data, in.ld * sizeof(T), in.cols * sizeof(T),
                                        in.rows, cudaMemcpyDeviceToDevice, exec.stream));
    return;
  }
  SDNN_EXPECTS(device_ && planned_in_ == in.cols, "sequential: call plan(batch, ", in.cols,
               ", exec) before the device forward");
  device_->runs.note(exec);
  T* ptr[2] = {device_->ping.data(), device_->pong.data()};
  for (std::int64_t r0 = 0; r0 < in.rows; r0 += planned_batch_) {
    std::int64_t const rows = std::min(planned_batch_, in.rows - r0);
    dense_view<T const> x{rows, in.cols, in.ld, in.data + r0 * in.ld};
    std::int64_t f = in.cols;
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      std::int64_t const g = layers_[i]->out_features(f);
      bool const last = i + 1 == layers_.size();
      dense_view<T> y = last ? dense_view<T>{rows, g, out.ld, out.data + r0 * out.ld} : dense_view<T>{rows, g, g, ptr[i % 2]};
      layers_[i]->forward(exec, x, y);
      x = y;
      f = g;
    }
  }
}

template <class T>
typename sequential<T>::device_table const sequential<T>::device_bodies{&sequential::plan_body,
                                                                        &sequential::forward_body};

}  // namespace sdnn

namespace sdnn::detail {
// Called by the constructors when a CUDA compiler reads them (layers/layer.hpp): installs the
// bodies above for this type, before main.
template <class T>
bool request_device_members(device_tag<sequential<T>>, int) noexcept {
  return device_registration<sequential<T>>::installed;
}
}  // namespace sdnn::detail
