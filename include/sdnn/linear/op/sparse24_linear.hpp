// sdnn/linear/op/sparse24_linear.hpp - the 2:4 sparse linear layer, host-safe part:
//
//   Y[N x M] = epi(X[N x K] * W^T)      W: M x K 2:4 (formats/sparse24.hpp; out x in features, the
//                                        torch nn.Linear layout), bf16/fp16, float accumulation
//
// ops::sparse24_linear(host_exec{}, ...) is the reference; ops::sparse24_linear_plan<T, Out, Policy>
// (linear/op/sparse24_linear.cuh) the tensor-core plan. Policies: linear/policy/sparse24.hpp.
#pragma once

#include <cstdint>
#include <limits>

#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/plan.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/formats/sparse24.hpp"
#include "sdnn/linear/policy/sparse24.hpp"
#include "sdnn/linear/reference/sparse24.hpp"

namespace sdnn::ops {

// The device plan (linear/op/sparse24_linear.cuh). T: sdnn::bf16 or sdnn::fp16; Out: T or float.
template <class T, class Out = T, class Policy = policy::sparse24_auto>
class sparse24_linear_plan;

// Whether W (m x k) fits the plan's indexing (the GPU is checked by the plan's can_implement).
inline plan_status sparse24_linear_can_implement(std::int64_t m, std::int64_t k) {
  // The kernel indexes M, K and N with int and pads M and K to multiples of 128.
  constexpr std::int64_t limit = std::numeric_limits<std::int32_t>::max() - 128;
  if (m < 0 || k < 0)
    return plan_status::failure(::sdnn::detail::concat("sparse24_linear: W is ", m, " x ", k, ": sizes must be >= 0"));
  if (m > limit || k > limit)
    return plan_status::failure(
        ::sdnn::detail::concat("sparse24_linear: W is ", m, " x ", k, ": at most ", limit, " rows and columns"));
  return {};
}

// Y = epi(X W^T) on the host: the reference, float accumulation on the values as stored.
template <class TX, class T, class Out>
void sparse24_linear(host_exec, dense_view<TX> x, sparse24_matrix<T> const& w, dense_view<Out> y,
                     basic_epilogue<float> const& epi = {}) {
  reference::sparse24_linear(x, w, y, epi);
}

}  // namespace sdnn::ops
