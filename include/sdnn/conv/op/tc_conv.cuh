// sdnn/conv/op/tc_conv.cuh - ops::tc_conv_plan<Policy, T>: a convolution over NHWC bf16/fp16
// activations on the tensor cores, as the implicit GEMM of conv/op/tc_conv.hpp. It holds a
// tc_linear_plan of the filter's GEMM view and runs its tiled kernels with the input read in
// place as the im2col operand (kernels::tc_im2col_x): no im2col buffer, the weight format's
// skipping (empty blocks, empty tiles) as in the linear layer. Under the plan protocol of
// core/plan.hpp: the constructor uploads and checks, run() enqueues one kernel on exec.stream and
// never allocates, frees or synchronises.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "sdnn/conv/op/tc_conv.hpp"
#include "sdnn/conv/policy/tc_conv.hpp"
#include "sdnn/core/plan.cuh"
#include "sdnn/linear/op/tc_linear.cuh"

namespace sdnn::ops {

namespace detail {
// The im2col operand runs the convolution's large tiles (conv/policy/tc_conv.hpp).
template <class T, class Tiles>
struct tc_x_tiles<kernels::tc_im2col_x<T>, Tiles> {
  using base = Tiles;
  using small = typename Tiles::small;
  using large = typename policy::tc_conv_large<Tiles>::type;
  static constexpr bool vector_store = true;
};

// A convolution's NHWC input x as the implicit-GEMM X operand of its layer s (the checks of
// tc_conv_can_run done by the caller).
template <class T>
kernels::tc_im2col_x<T> im2col_operand(conv::conv_shape const& s, T const* x) {
  kernels::tc_im2col_x<T> xs;
  xs.x = x;
  xs.H = s.H;
  xs.W = s.W;
  xs.C = s.C;
  xs.stride_h = s.stride_h;
  xs.stride_w = s.stride_w;
  xs.pad_h = s.pad_h;
  xs.pad_w = s.pad_w;
  xs.dil_h = s.dil_h;
  xs.dil_w = s.dil_w;
  xs.div_c = fast_divmod(s.C);
  xs.div_s = fast_divmod(s.S);
  xs.div_ow = fast_divmod(s.OW());
  xs.div_oh = fast_divmod(s.OH());
  xs.vec = reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && s.C % 8 == 0;
  return xs;
}
}  // namespace detail

template <class Policy, class T>
class tc_conv_plan {
 public:
  using value_type = T;
  using policy_type = Policy;
  using linear_plan = tc_linear_plan<Policy, T>;
  using weights_type = typename linear_plan::weights_type;

  // wg: the filter's GEMM view, K x R*S*C (k = (r * S + s) * C + c), in Policy's format (dense
  // bf16/fp16, block_sparse_matrix or tile_offsets_matrix). Uploaded once on exec.stream.
  // opt.max_rows bounds the pixels (batch * OH * OW) of runs that split K (small batches).
  // `tiles` forces the linear plan's kernel shape (the benchmarks and tests; automatic by default).
  tc_conv_plan(conv::conv_shape shape, weights_type const& wg, cuda_exec exec, plan_options opt = {},
               policy::tc_shape tiles = policy::tc_shape::automatic)
      : shape_(detail::checked_conv_gemm(shape, wg.rows(), wg.cols(), "tc_conv")), lin_(wg, exec, opt, tiles) {
    lin_.template prepare_x<kernels::tc_im2col_x<T>>();
  }

  conv::conv_shape const& shape() const noexcept { return shape_; }
  std::size_t weight_bytes() const noexcept { return lin_.weight_bytes(); }
  std::size_t workspace_bytes() const noexcept { return lin_.workspace_bytes(); }
  std::string describe(std::int64_t batch = 0) const {
    auto const& s = shape_;
    return detail::describe_conv(s, "tc_conv") +
           lin_.template describe<kernels::tc_im2col_x<T>>(batch * std::int64_t(s.OH()) * s.OW());
  }

  // y (NHWC, batch x OH x OW x K, of T or float) = epi(conv(x)), x NHWC batch x H x W x C on
  // the device; epi.bias: device memory, K values (per output channel). Refused before any
  // launch: a batch whose index arithmetic would overflow (tc_conv_can_run), a null pointer.
  template <class Out>
  void run(cuda_exec exec, T const* x, std::int64_t batch, Out* y, basic_epilogue<float> const& epi,
           workspace ws = {}) const {
    ::sdnn::detail::implementable(tc_conv_can_run(shape_, batch), 0);
    auto const& s = shape_;
    std::int64_t const n = batch * s.OH() * s.OW();
    SDNN_EXPECTS(n == 0 || (x != nullptr && y != nullptr), "tc_conv: null input or output pointer");
    auto const xs = detail::im2col_operand(s, x);
    lin_.run_x(exec, xs, n, dense_view<Out>{n, s.K, s.K, y}, epi, ws);
  }

  // y (NHWC, batch x OH/2 x OW/2 x K) = the 2x2 stride-2 max-pool of run()'s output, the pool in
  // the TMA block kernel's epilogue (the same bits; the full output is never written). Where
  // fuses_pool2x2(batch, x) is false (not the TMA kernel, or an input a tensor map cannot read,
  // e.g. not 16-byte aligned) it is refused before any launch: run() and pool instead. x: the
  // input, or none for any 16-byte-aligned one.
  bool fuses_pool2x2(std::int64_t batch, T const* x = nullptr) const {
    if (!tc_conv_can_run(shape_, batch)) return false;
    return lin_.pools_x(detail::im2col_operand(shape_, x), batch * std::int64_t(shape_.OH()) * shape_.OW());
  }
  template <class Out>
  void run_pool2x2(cuda_exec exec, T const* x, std::int64_t batch, Out* y, basic_epilogue<float> const& epi) const {
    ::sdnn::detail::implementable(tc_conv_can_run(shape_, batch), 0);
    auto const& s = shape_;
    std::int64_t const n = batch * s.OH() * s.OW(), pooled = batch * (s.OH() / 2) * (s.OW() / 2);
    SDNN_EXPECTS(pooled == 0 || (x != nullptr && y != nullptr), "tc_conv: null input or output pointer");
    lin_.run_x_pool2x2(exec, detail::im2col_operand(s, x), n, dense_view<Out>{pooled, s.K, s.K, y}, epi);
  }

 private:
  conv::conv_shape shape_;
  linear_plan lin_;
};

}  // namespace sdnn::ops
