// sdnn/conv/op/small_c_conv.cuh - ops::small_c_conv_plan<T, Out>: a dense convolution over NHWC
// bf16/fp16 activations for layers whose reduction R*S*C is at most 256 (a network's first
// layer: 3 input channels, 3x3 or 7x7), on the direct mma.sync kernel of
// conv/kernel/small_c_conv.cuh. Any C, stride, padding and dilation; K a multiple of 8. Under the
// plan protocol of core/plan.hpp: the constructor checks and uploads (the filter in fragment
// order, the tap table), run() enqueues one kernel on exec.stream and never allocates, frees or
// synchronises.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "sdnn/conv/kernel/small_c_conv.cuh"
#include "sdnn/conv/op/tc_conv.hpp"
#include "sdnn/conv/shape.hpp"
#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/formats/dense.hpp"

namespace sdnn::ops {

// The longest reduction the kernel takes: 16 steps of 16 (the A fragments of a step are gathered
// element by element, so a long reduction belongs to the implicit-GEMM tiles).
inline constexpr int small_c_max_reduction = 256;
// Shared memory a CTA may ask for: within every sm_80+ GPU's per-block opt-in (99 KB on sm_86).
inline constexpr std::size_t small_c_max_smem = 96 * 1024;
// Warps a CTA: not swept (the kernel's 80 registers a thread hold an SM of sm_90 to 3 such CTAs).
inline constexpr int small_c_warps = 8;

// Whether the kernel takes layer s, from its shape alone (the plan also checks the GPU).
template <class Out>
plan_status small_c_conv_can_implement(conv::conv_shape const& s) {
  std::int64_t const red = s.filter_size();
  if (red > small_c_max_reduction)
    return plan_status::failure(::sdnn::detail::concat("small_c_conv: R*S*C = ", red, " (", s.R, " x ", s.S, " x ",
                                                       s.C, "); the direct kernel takes at most ",
                                                       small_c_max_reduction));
  if (s.K % 8 != 0)
    return plan_status::failure(
        ::sdnn::detail::concat("small_c_conv: K = ", s.K, " output channels; the kernel needs a multiple of 8"));
  if (std::int64_t(s.dil_h) * (s.R - 1) >= (1 << 15) || std::int64_t(s.dil_w) * (s.S - 1) >= (1 << 15) ||
      s.H >= (1 << 15) || s.W >= (1 << 15))
    return plan_status::failure(::sdnn::detail::concat("small_c_conv: H, W (", s.H, ", ", s.W,
                                                       ") and the dilated kernel's extent must be below 2^15"));
  int const ksteps = int((red + 15) / 16);
  std::size_t const smem =
      kernels::small_c_smem_bytes(ksteps, s.K, small_c_warps, kernels::small_c_stage_bytes<Out>());
  if (smem > small_c_max_smem)
    return plan_status::failure(::sdnn::detail::concat("small_c_conv: K = ", s.K, " with R*S*C = ", red, " needs ",
                                                       smem, " bytes of shared memory, above ", small_c_max_smem));
  return {};
}

template <class T, class Out = T>
class small_c_conv_plan {
  static_assert(is_16bit_float_v<T>, "small_c_conv_plan: T must be sdnn::bf16 or sdnn::fp16");
  static_assert(std::is_same_v<Out, T> || std::is_same_v<Out, float>, "small_c_conv_plan: Out must be T or float");
  static constexpr int warps = small_c_warps;
  using kernel_fn = void (*)(kernels::small_c_conv_params<T, Out>);
  static kernel_fn kernel() { return &kernels::small_c_conv_kernel<T, Out, warps>; }

 public:
  using value_type = T;
  using output_type = Out;

  // Whether a plan can be made for layer s on the current GPU (queries the device).
  static plan_status can_implement(conv::conv_shape const& s) {
    if (auto st = small_c_conv_can_implement<Out>(s); !st) return st;
    arch const a = ::sdnn::detail::current_arch();
    if (a < arch{8, 0})
      return plan_status::failure(
          ::sdnn::detail::concat("small_c_conv: the current GPU is sm_", a.sm(), "; mma.sync needs sm_80 or newer"));
    return {};
  }

  // wg: the filter's GEMM view on the host, K x R*S*C (k = (r * S + s) * C + c). Refused before
  // anything reaches the device: a view of another shape, a layer the kernel does not take
  // (can_implement), index arithmetic beyond int32 (tc_conv_can_run).
  small_c_conv_plan(conv::conv_shape shape, dense_view<T const> wg, cuda_exec exec)
      : s_(detail::checked_conv_gemm(shape, wg.rows, wg.cols, "small_c_conv")), runs_(exec) {
    ::sdnn::detail::implementable(can_implement(s_), 0);
    int const red = int(s_.filter_size()), nt = s_.K / 8, ksteps = (red + 15) / 16;
    // B fragments (linear/arch/mma.cuh): lane 4g + t of n-tile j, step s holds W(8j + g, 16s + 2t
    // + {0, 1}) and W(8j + g, 16s + 2t + 8 + {0, 1}), the lower k in the low half; zero past R*S*C.
    host_buffer<uint2> w(std::size_t(ksteps) * nt * 32);
    auto bits = [&](int n, int k) -> std::uint32_t { return k < red ? wg(n, k).bits : 0u; };
    for (int s = 0; s < ksteps; ++s)
      for (int j = 0; j < nt; ++j)
        for (int lane = 0; lane < 32; ++lane) {
          int const n = 8 * j + lane / 4, k = 16 * s + 2 * (lane % 4);
          w[(std::size_t(s) * nt + j) * 32 + lane] = {bits(n, k) | bits(n, k + 1) << 16,
                                                      bits(n, k + 8) | bits(n, k + 9) << 16};
        }
    host_buffer<kernels::small_c_tap> taps(std::size_t(ksteps) * 16);
    for (int k = 0; k < ksteps * 16; ++k) {
      kernels::small_c_tap tp{0, short(-(1 << 15)), short(-(1 << 15))};  // padding: outside every input
      if (k < red) {
        int const c = k % s_.C, rs = k / s_.C, r = rs / s_.S, sc = rs % s_.S;
        tp.dy = short(r * s_.dil_h);
        tp.dx = short(sc * s_.dil_w);
        tp.off = (tp.dy * s_.W + tp.dx) * s_.C + c;
      }
      taps[std::size_t(k)] = tp;
    }
    cuda_exec const own = runs_.owned(exec);
    w_ = copy_to<device_space>(w, own);
    taps_ = copy_to<device_space>(taps, own);
    // What every run passes the kernel but the tensors, the epilogue and the pixel count.
    layer_.w = w_.data();
    layer_.taps = taps_.data();
    layer_.H = s_.H;
    layer_.W = s_.W;
    layer_.C = s_.C;
    layer_.K = s_.K;
    layer_.stride_h = s_.stride_h;
    layer_.stride_w = s_.stride_w;
    layer_.pad_h = s_.pad_h;
    layer_.pad_w = s_.pad_w;
    layer_.ksteps = ksteps;
    layer_.div_ow = fast_divmod(s_.OW());
    layer_.div_oh = fast_divmod(s_.OH());
    smem_ = kernels::small_c_smem_bytes(ksteps, s_.K, warps, kernels::small_c_stage_bytes<Out>());
    ::sdnn::detail::allow_dynamic_smem(kernel(), smem_);
    int occ = 0;
    SDNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel(), warps * 32, smem_));
    SDNN_EXPECTS(occ > 0, "small_c_conv: ", smem_, " bytes of shared memory per CTA do not fit an SM of this GPU");
    max_ctas_ = occ * ::sdnn::detail::sm_count();
  }

  conv::conv_shape const& shape() const noexcept { return s_; }
  std::size_t workspace_bytes() const noexcept { return 0; }
  std::string describe(std::int64_t batch = 0) const {
    std::string d = ::sdnn::detail::concat(detail::describe_conv(s_, "small_c_conv"), "direct mma.sync: R*S*C = ",
                                           s_.filter_size(), " in ", layer_.ksteps, " steps of 16, ", warps,
                                           " warps a CTA, 16 pixels x 64 channels a warp at a time");
    if (batch > 0) d += ::sdnn::detail::concat("; run: ", grid(batch * s_.OH() * s_.OW()), " CTAs");
    return d;
  }

  // y (NHWC, batch x OH x OW x K, of Out) = epi(conv(x)), x NHWC batch x H x W x C on the device;
  // epi.bias: device memory, K values. Refused before any launch: a batch whose index arithmetic
  // would overflow (tc_conv_can_run), a null pointer.
  void run(cuda_exec exec, T const* x, std::int64_t batch, Out* y, basic_epilogue<float> const& epi,
           workspace = {}) const {
    ::sdnn::detail::implementable(tc_conv_can_run(s_, batch), 0);
    runs_.note(exec);
    std::int64_t const n = batch * s_.OH() * s_.OW();
    if (n == 0) return;
    SDNN_EXPECTS(x != nullptr && y != nullptr, "small_c_conv: null input or output pointer");
    kernels::small_c_conv_params<T, Out> p = layer_;
    p.x = x;
    p.epi = epi;
    p.y = y;
    p.pixels = int(n);
    p.vec = reinterpret_cast<std::uintptr_t>(y) % 16 == 0;
    auto const fn = kernel();
    ::sdnn::detail::allow_dynamic_smem(fn, smem_);  // this launch's copy of the kernel (core/cuda.cuh)
    fn<<<grid(n), warps * 32, smem_, exec.stream>>>(p);
    SDNN_CUDA_CHECK_LAUNCH();
  }

 private:
  // A persistent grid: every 16-pixel tile has a warp, up to the resident CTAs of the GPU.
  unsigned grid(std::int64_t pixels) const {
    std::int64_t const tiles = (pixels + 15) / 16;
    return unsigned(std::max<std::int64_t>(1, std::min<std::int64_t>((tiles + warps - 1) / warps, max_ctas_)));
  }

  conv::conv_shape s_;
  kernels::small_c_conv_params<T, Out> layer_{};  // the layer's part of every launch's arguments
  std::size_t smem_ = 0;
  std::int64_t max_ctas_ = 1;
  device_buffer<uint2> w_;
  device_buffer<kernels::small_c_tap> taps_;
  ::sdnn::detail::run_streams runs_;
};

}  // namespace sdnn::ops
