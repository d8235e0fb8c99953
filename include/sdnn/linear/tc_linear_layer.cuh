// sdnn/linear/tc_linear_layer.cuh - the bodies of layers::tc_linear<T>'s device members
// (linear/tc_linear_layer.hpp): an ops::tc_auto_linear_plan made for the planned batch and the
// device bias. A .cu that includes this header and constructs the layer (or
// `template class sdnn::layers::tc_linear<T>;` plus the registration below) installs them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/linear/op/tc_auto.cuh"
#include "sdnn/linear/tc_linear_layer.hpp"

namespace sdnn::layers {

// The record (first) notes every stream forward() ran on, so the bias is released after them;
// the plan keeps its own record for its buffers.
template <class T>
struct tc_linear<T>::device_state {
  device_state(dense_view<T const> w, cuda_exec const& home, ops::tc_auto_options opt)
      : runs(home), plan(w, home, opt) {}
  sdnn::detail::run_streams runs;
  ops::tc_auto_linear_plan<T> plan;
  buffer<float, device_space> bias;  // [out] or empty
  basic_epilogue<float> epi;         // epi.bias points into `bias`
};

template <class T>
void tc_linear<T>::plan_body(std::int64_t batch, std::int64_t in_features, cuda_exec exec) {
  out_features(in_features);
  SDNN_EXPECTS(batch >= 0, "tc_linear: plan needs a batch >= 0, got ", batch);
  ops::tc_auto_options opt = opt_;
  opt.max_rows = std::max<std::int64_t>(batch, 1);
  auto d = std::make_shared<device_state>(std::as_const(w_).view(), exec, opt);
  d->bias = to_device(bias_.data(), bias_.size(), d->runs.owned(exec));
  d->epi = epi_;
  d->epi.bias = d->bias.empty() ? nullptr : d->bias.data();
  device_ = std::move(d);
}

template <class T>
void tc_linear<T>::forward_body(cuda_exec exec, dense_view<T const> in, dense_view<T> out) {
  check_shapes(in, out);
  if (!device_ || device_->plan.max_rows() < in.rows) plan(in.rows, w_.cols(), exec);
  device_->runs.note(exec);
  device_->plan.run(exec, in, out, device_->epi);
}

template <class T>
std::string tc_linear<T>::reason_body(std::int64_t n) const {
  SDNN_EXPECTS(device_, "tc_linear: call plan() before reason()");
  return device_->plan.reason(n);
}

template <class T>
typename tc_linear<T>::device_table const tc_linear<T>::device_bodies{&tc_linear::plan_body, &tc_linear::forward_body,
                                                                     &tc_linear::reason_body};

}  // namespace sdnn::layers

namespace sdnn::detail {
template <class T>
bool request_device_members(device_tag<layers::tc_linear<T>>, int) noexcept {
  return device_registration<layers::tc_linear<T>>::installed;
}
}  // namespace sdnn::detail
