// sdnn/linear/sparse_linear.cuh - the bodies of the device members of layers::sparse_linear
// (sparse_linear.hpp defines the members for every compiler, as calls through the type's
// table): the layer holds one ops::dense_sparse_plan and the bias in device memory. A .cu that
// includes this header and constructs a sparse_linear type installs that type's bodies for the
// whole program; otherwise SDNN_INSTANTIATE_SPARSE_LINEAR (at the end of this file) does.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/formats/copy.cuh"
#include "sdnn/linear/sparse_linear.hpp"
#include "sdnn/linear/op/dense_sparse.cuh"

namespace sdnn::layers {

// The layer's record (first: wt and bias are allocated through runs.owned()) notes every stream
// forward() and forward_rows() ran on, so the bias, which the plan's runs read, is released
// after them; the plan keeps its own record for its buffers.
template <class T, class F, class P>
struct sparse_linear<T, F, P>::device_state {
  explicit device_state(cuda_exec const& home) : runs(home) {}
  sdnn::detail::run_streams runs;
  std::unique_ptr<plan_type> plan;                   // made by plan() (or the first forward)
  csr_matrix<T, std::int32_t, device_space> wt;      // device-built layer before plan(): W^T
  buffer<acc_type, device_space> bias;               // [out] or empty
  basic_epilogue<acc_type> epi;                      // epi.bias points into `bias`
};

// W is transposed on the device now (async); the plan (tiles: one download of W^T) is made
// by plan(), so that a pipeline can plan many layers on host threads at once.
// (The constructor has copied the bias.)
template <class T, class F, class P>
void sparse_linear<T, F, P>::from_device_body(csr_matrix<T, std::int32_t, device_space> const& w_device,
                                              cuda_exec exec) {
  auto const st = plan_type::can_implement(in_, out_, nnz_);
  if (!st) SDNN_FAIL(st.why());
  device_ = std::make_shared<device_state>(exec);
  device_->wt = transpose(w_device, device_->runs.owned(exec));
  device_->bias = to_device(bias_.data(), bias_.size(), device_->runs.owned(exec));
  device_->epi = epi_;
  device_->epi.bias = device_->bias.empty() ? nullptr : device_->bias.data();
}

template <class T, class F, class P>
void sparse_linear<T, F, P>::plan_body(std::int64_t batch, std::int64_t in_features, cuda_exec exec) {
  out_features(in_features);
  SDNN_EXPECTS(batch >= 0, "sparse_linear: plan needs a batch >= 0, got ", batch);
  plan_options const opt{std::max<std::int64_t>(batch, 1), true};
  if (device_ && device_->plan) return device_->plan->reserve(opt.max_rows, exec);  // a larger batch
  if (device_) {  // built from device weights: W^T is waiting
    device_->plan = std::make_unique<plan_type>(plan_type::transposed_weights, std::move(device_->wt), exec, opt);
    return;
  }
  SDNN_EXPECTS(has_host_weights(), "sparse_linear: no weights to upload");
  auto d = std::make_shared<device_state>(exec);
  d->plan = std::make_unique<plan_type>(w_, exec, opt);
  d->bias = to_device(bias_.data(), bias_.size(), d->runs.owned(exec));
  d->epi = epi_;
  d->epi.bias = d->bias.empty() ? nullptr : d->bias.data();
  device_ = std::move(d);
}

template <class T, class F, class P>
void sparse_linear<T, F, P>::forward_body(cuda_exec exec, dense_view<T const> in, dense_view<T> out) {
  check_shapes(in, out);
  if (!device_ || !device_->plan || device_->plan->max_rows() < in.rows) plan(in.rows, in_, exec);
  device_->runs.note(exec);
  device_->plan->run(exec, in, out, device_->epi);
}

template <class T, class F, class P>
void sparse_linear<T, F, P>::forward_rows_body(cuda_exec exec, dense_view<T const> in, dense_view<T> out,
                                               ops::listed_rows rows, int* flags) const {
  SDNN_EXPECTS(device_ && device_->plan, "sparse_linear: call plan() before forward_rows()");
  device_->runs.note(exec);
  device_->plan->run_rows(exec, in, out, device_->epi, rows, flags);
}

template <class T, class F, class P>
auto sparse_linear<T, F, P>::device_plan_body() const -> plan_type const& {
  SDNN_EXPECTS(device_ && device_->plan, "sparse_linear: call plan() before device_plan()");
  return *device_->plan;
}

template <class T, class F, class P>
typename sparse_linear<T, F, P>::device_table const sparse_linear<T, F, P>::device_bodies{
    &sparse_linear::from_device_body, &sparse_linear::plan_body, &sparse_linear::forward_body,
    &sparse_linear::forward_rows_body, &sparse_linear::device_plan_body};

}  // namespace sdnn::layers

namespace sdnn::detail {
// Called by the constructors when a CUDA compiler reads them (layers/layer.hpp): installs the
// bodies above for this type, before main.
template <class T, class F, class P>
bool request_device_members(device_tag<layers::sparse_linear<T, F, P>>, int) noexcept {
  return device_registration<layers::sparse_linear<T, F, P>>::installed;
}
}  // namespace sdnn::detail

// Installs the device members of sparse_linear<T, format::csr, Policy> from this .cu (for
// programs whose .cpp files use that layer type but no .cu constructs it), at namespace scope:
//   SDNN_INSTANTIATE_SPARSE_LINEAR(float, sdnn::policy::sparse_linear_default);
#define SDNN_INSTANTIATE_SPARSE_LINEAR(T, ...)                                       \
  template class ::sdnn::layers::sparse_linear<T, ::sdnn::format::csr, __VA_ARGS__>; \
  template struct ::sdnn::detail::device_registration<                              \
      ::sdnn::layers::sparse_linear<T, ::sdnn::format::csr, __VA_ARGS__>>
