// sdnn/conv/op/sparse24_conv.cuh - ops::sparse24_conv_plan<T, Out>: a convolution over NHWC
// bf16/fp16 activations whose filter is 2:4 sparse along its reduction dimension (R*S*C, channel
// fastest, as the GEMM view conv/nhwc.hpp orders it), on mma.sp (wgmma.sp in sm_90a builds): the
// implicit GEMM of conv/op/tc_conv.hpp with the 2:4 linear layer's kernel, the input read in place
// as the im2col operand (kernels::tc_im2col_x). Magnitude pruning of a filter to this structure:
// conv::gemm_sparse24_weights (conv/gemm_weights.hpp). Under the plan protocol of
// core/plan.hpp: the constructor checks and uploads, run() enqueues one kernel on exec.stream and
// never allocates, frees or synchronises.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "sdnn/conv/op/tc_conv.cuh"
#include "sdnn/conv/shape.hpp"
#include "sdnn/formats/sparse24.hpp"
#include "sdnn/linear/op/sparse24_linear.cuh"

namespace sdnn::ops {

template <class T, class Out = T, class Policy = policy::sparse24_auto>
class sparse24_conv_plan {
 public:
  using value_type = T;
  using output_type = Out;
  using linear_plan = sparse24_linear_plan<T, Out, Policy>;

  // wg: the filter's GEMM view, K x R*S*C, 2:4 (validated: the first bad row and group are named).
  // Uploaded once on exec.stream. Refused before anything reaches the device: a view of another
  // shape, a layer whose index arithmetic would overflow (tc_conv_can_run), a GPU below sm_80.
  sparse24_conv_plan(conv::conv_shape shape, sparse24_matrix<T> const& wg, cuda_exec exec, plan_options opt = {})
      : shape_(detail::checked_conv_gemm(shape, wg.rows(), wg.cols(), "sparse24_conv")), lin_(wg, exec, opt) {
    lin_.template prepare_x<kernels::tc_im2col_x<T>>();
  }

  conv::conv_shape const& shape() const noexcept { return shape_; }
  std::size_t workspace_bytes() const noexcept { return lin_.workspace_bytes(); }
  std::string describe(std::int64_t batch = 0) const {
    auto const& s = shape_;
    std::string d = detail::describe_conv(s, "sparse24_conv") + lin_.describe();
    // An aligned input with C a multiple of 64 goes through an im2col tensor map where the tile
    // takes one (sparse24_linear_plan::run_x); the description assumes the input aligned and the
    // geometry within TMA's limits (core/tma.cuh).
    if (batch > 0) d += "; run: " + lin_.describe_run(batch * std::int64_t(s.OH()) * s.OW(),
                                                   s.C % kernels::sparse24_im2col_channels == 0);
    return d;
  }

  // y (NHWC, batch x OH x OW x K, of Out) = epi(conv(x)), x NHWC batch x H x W x C on the device;
  // epi.bias: device memory, K values. Refused before any launch: a batch whose index arithmetic
  // would overflow (tc_conv_can_run), a null pointer.
  void run(cuda_exec exec, T const* x, std::int64_t batch, Out* y, basic_epilogue<float> const& epi,
           workspace ws = {}) const {
    ::sdnn::detail::implementable(tc_conv_can_run(shape_, batch), 0);
    auto const& s = shape_;
    std::int64_t const n = batch * s.OH() * s.OW();
    SDNN_EXPECTS(n == 0 || (x != nullptr && y != nullptr), "sparse24_conv: null input or output pointer");
    lin_.run_x(exec, detail::im2col_operand(s, x), n, dense_view<Out>{n, s.K, s.K, y}, epi, ws);
  }

 private:
  conv::conv_shape shape_;
  linear_plan lin_;
};

}  // namespace sdnn::ops
