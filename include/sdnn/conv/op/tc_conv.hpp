// sdnn/conv/op/tc_conv.hpp - the tensor-core convolution, host part: a convolution over NHWC
// activations as the implicit GEMM Y[N x K] = epi(X[N x R*S*C] Wg^T), N = batch * OH * OW output
// pixels, Wg the filter's GEMM view (K x R*S*C, k = (r * S + s) * C + c, channel fastest), X the
// input read in place as its im2col matrix. The weight formats and kernels are the tensor-core
// linear layer's (linear/op/tc_linear.hpp): Wg dense, block-sparse (blocks of output x input
// channels shared by all taps are GEMM blocks when C is a multiple of the block width) or
// tile_offsets. The device plan ops::tc_conv_plan<Policy, T> is in conv/op/tc_conv.cuh.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "sdnn/conv/shape.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/plan.hpp"

namespace sdnn::ops {

// The device plan (conv/op/tc_conv.cuh).
template <class Policy, class T>
class tc_conv_plan;

// Why a batch of this layer cannot run as an implicit GEMM: the kernels index pixels, the
// reduction and the NHWC input in 32 bits (fast_divmod, int32 tile origins), so batch * OH * OW,
// R * S * C, batch * H * W * C and batch * OH * OW * K must stay below 2^31.
inline plan_status tc_conv_can_run(conv::conv_shape const& s, std::int64_t batch) {
  constexpr std::int64_t lim = std::numeric_limits<std::int32_t>::max();
  std::int64_t const pixels = std::int64_t(s.OH()) * s.OW();
  if (batch < 0 || batch > lim)
    return plan_status::failure(::sdnn::detail::concat("tc_conv: batch ", batch, " outside [0, 2^31)"));
  if (batch * pixels > lim || s.filter_size() > lim || batch * s.in_features() > lim ||
      (pixels > 0 && batch * pixels > lim / s.K))
    return plan_status::failure(::sdnn::detail::concat(
        "tc_conv: batch ", batch, " of ", s.C, " x ", s.H, " x ", s.W, " -> ", s.K, " x ", s.OH(), " x ", s.OW(),
        " (R*S*C = ", s.filter_size(), "): pixels, input and output elements must each be below 2^31"));
  return {};
}

namespace detail {
// The layer's shape once checked against its filter's GEMM view (rows x cols): a valid layer, a K x
// R*S*C view, index arithmetic within int32 (tc_conv_can_run). what: the plan, for the messages.
inline conv::conv_shape checked_conv_gemm(conv::conv_shape s, std::int64_t rows, std::int64_t cols, char const* what) {
  s.check();
  SDNN_EXPECTS_DIMS(rows == s.K && cols == s.filter_size(), what, ": the filter's GEMM view must be K x R*S*C = ", s.K,
                    " x ", s.filter_size(), ", got ", rows, " x ", cols);
  if (auto const st = tc_conv_can_run(s, 1); !st) SDNN_FAIL(st.why());
  return s;
}
// "what C x H x W -> K x OH x OW, R x S stride .. pad .. dilation .. (NHWC, implicit GEMM); "
inline std::string describe_conv(conv::conv_shape const& s, char const* what) {
  return ::sdnn::detail::concat(what, " ", s.C, " x ", s.H, " x ", s.W, " -> ", s.K, " x ", s.OH(), " x ", s.OW(), ", ",
                                s.R, " x ", s.S, " stride ", s.stride_h, " x ", s.stride_w, " pad ", s.pad_h, " x ",
                                s.pad_w, " dilation ", s.dil_h, " x ", s.dil_w, " (NHWC, implicit GEMM); ");
}
}  // namespace detail

}  // namespace sdnn::ops
