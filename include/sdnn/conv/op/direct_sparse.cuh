// sdnn/conv/op/direct_sparse.cuh - direct sparse convolution on the device: the weights
// re-addressed for one (variant, block shape) and uploaded (device_tiled_weights), the call that
// checks the arguments and launches the kernel of conv/kernel/direct_sparse.cuh, and
// direct_conv_plan<T, Acc>, which follows the plan protocol (core/plan.hpp). The host-side
// planning (variants, geometry, tuning candidates) is in conv/op/direct_sparse.hpp; the tuning
// that picks a config (timed runs: synchronises) is the layer's (conv/sparse_conv.cuh).
// docs/conv.md#plans-and-tuning.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/conv/shape.hpp"
#include "sdnn/conv/weights.hpp"
#include "sdnn/conv/kernel/direct_sparse.cuh"
#include "sdnn/conv/op/direct_sparse.hpp"
#include "sdnn/conv/policy/direct_sparse.hpp"

namespace sdnn::conv {

// Whether partial sums may round-trip through an output of type T between channel chunks
// without an extra rounding: float data (float sums), or half accumulation (the stored
// half partial sum plus the next chunk's half sum is one half addition).
template <class T, class Acc>
inline constexpr bool output_round_trip_exact = std::is_same_v<T, float> || std::is_same_v<Acc, __half>;

// Weights re-addressed for one (variant, config) and resident on the device.
template <class T>
struct device_tiled_weights {
  direct_conv_config config;
  direct_conv_geometry geom{};
  device_buffer<tile_entry<T>> entries;  // [nnz] chunk-major
  device_buffer<std::int32_t> ptr;       // [nchunks*K + 1]
  std::size_t smem_bytes = 0;            // the input window
};

// Builds and uploads the tiled entries (the upload from pageable memory completes before
// return).
template <class T>
device_tiled_weights<T> make_device_tiled_weights(sparse_conv_weights<T> const& w, direct_conv_config const& c,
                                                  cuda_exec exec) {
  device_tiled_weights<T> d;
  d.config = c;
  d.geom = geometry_of(w.shape, c);
  auto const t = make_tiled_entries(w, d.geom.cc, d.geom.sh, d.geom.sw);
  host_buffer<tile_entry<T>> he(t.values.size());
  for (std::size_t i = 0; i < t.values.size(); ++i) {
    he[i].off = t.tile_offset[i] * d.geom.sub_batch;  // interleaved images: position * NB
    if constexpr (std::is_same_v<T, __half>) he[i].w[0] = he[i].w[1] = t.values[i];
    else he[i].w = t.values[i];
  }
  host_buffer<std::int32_t> hp(t.ptr.begin(), t.ptr.end());
  d.entries = copy_to<device_space>(he, exec);
  d.ptr = copy_to<device_space>(hp, exec);
  d.smem_bytes = std::size_t(d.geom.cc) * d.geom.sh * d.geom.sw * d.geom.sub_batch * sizeof(T);
  return d;
}

namespace detail {

// The opt-in shared memory per block of the current device (bytes).
inline int device_smem_optin() {
  int dev = 0, optin = 0;
  SDNN_CUDA_CHECK(cudaGetDevice(&dev));
  SDNN_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return optin;
}

// What a direct sparse convolution kernel is launched with.
struct direct_conv_launch {
  direct_conv_params p;
  dim3 grid;
};

// The launch setup shared by the float and the quantized ops: the kernel parameters for N
// images of shape s (config c, geometry g), the check that the input window (window_bytes of
// dynamic shared memory) plus static_smem bytes of static shared memory fit the device's
// opt-in limit, and the grid (checked against the kernel's limits). op names the op in the
// messages; smem_note is inserted after "bytes of shared memory" (the static part, or "").
inline direct_conv_launch direct_conv_launch_of(char const* op, conv_shape const& s, direct_conv_config const& c,
                                                direct_conv_geometry const& g, std::int64_t N,
                                                std::size_t window_bytes, std::size_t static_smem = 0,
                                                char const* smem_note = "") {
  direct_conv_launch l{};
  direct_conv_params& p = l.p;
  p.N = static_cast<int>(N);
  p.C = s.C; p.H = s.H; p.W = s.W; p.K = s.K; p.OH = s.OH(); p.OW = s.OW();
  p.stride_h = s.stride_h; p.stride_w = s.stride_w; p.pad_h = s.pad_h; p.pad_w = s.pad_w;
  p.tw = c.tw; p.th = c.th; p.rows_mode = c.rows_mode; p.kw = c.kw; p.kper = g.kper;
  p.toh = g.toh; p.tow = g.tow; p.cc = g.cc; p.sh = g.sh; p.sw = g.sw; p.nchunks = g.nchunks;
  p.tiles_x = g.tiles_x;
  p.inv_tiles_x = 1.0f / float(g.tiles_x);
  p.segs_per_row = (g.sw + 32 / g.sub_batch - 1) / (32 / g.sub_batch);
  p.nsegs = g.cc * g.sh * p.segs_per_row;
  p.inv_spr = 1.0f / float(p.segs_per_row);
  p.inv_sh = 1.0f / float(g.sh);
  int const optin = device_smem_optin();
  SDNN_EXPECTS(window_bytes + static_smem <= std::size_t(optin), op, ": the input window needs ", window_bytes,
               " bytes of shared memory", smem_note, ", the device allows ", optin,
               "; use fewer channels per chunk (cc)");
  std::int64_t const tiles = std::int64_t(g.tiles_x) * g.tiles_y;
  std::int64_t const groups = (N + g.sub_batch - 1) / g.sub_batch;
  std::int64_t const splits = (s.K + g.kper - 1) / g.kper;
  SDNN_EXPECTS(tiles < (std::int64_t(1) << 22) && groups <= 65535, op, ": grid too large (", tiles,
               " tiles, at most 2^22; ", groups, " sub-batches, at most 65535)");
  l.grid = dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(groups), static_cast<unsigned>(splits));
  return l;
}

// Calls f(P{}, std::bool_constant<SumsInRegisters>{}) for the compiled variant P and the
// chunk mode of config c: the kernel instantiation to launch.
template <class F>
void with_direct_conv_kernel(direct_conv_config const& c, F&& f) {
  with_variant<0>(c.variant, [&](auto pol) {
    if (c.sums_in_registers) f(pol, std::true_type{});
    else f(pol, std::false_type{});
  });
}

}  // namespace detail

// Enqueues out = relu?(conv(in, w) + bias) on exec.stream. in: N x C x H x W, out:
// N x K x OH x OW, bias: [K] floats or nullptr, all device memory. Never synchronises.
template <class Acc, class T>
void direct_sparse_conv(device_tiled_weights<T> const& w, conv_shape const& s, std::int64_t N, T const* in,
                        float const* bias, bool relu, T* out, cuda_exec exec) {
  if (N == 0) return;
  auto const& g = w.geom;
  SDNN_EXPECTS(w.config.sums_in_registers || g.nchunks == 1 || (output_round_trip_exact<T, Acc>),
               "direct_sparse_conv: with ", g.nchunks, " channel chunks, __half data with float accumulation needs "
               "sums_in_registers = 1 (a round trip through the __half output rounds the partial sums once per chunk)");
  auto const l = detail::direct_conv_launch_of("direct_sparse_conv", s, w.config, g, N, w.smem_bytes);
  detail::with_direct_conv_kernel(w.config, [&](auto pol, auto regs) {
    using P = decltype(pol);
    launch_direct_sparse_conv<T, Acc, P::sub_batch, P::k_group, P::pixels, decltype(regs)::value>(
        l.p, l.grid, g.threads, w.smem_bytes, in, w.entries.data(), w.ptr.data(), bias, relu, out, exec);
  });
}

// The plan of one direct sparse convolution: weights tiled for one (variant, block shape) and
// resident on the device. Acc: the accumulator (float, or __half for __half data).
template <class T, class Acc = accumulator_t<T>>
class direct_conv_plan {
 public:
  // The block shape is valid for the shape, the input window fits the current device's shared
  // memory, and (__half data, float sums) partial sums are not round-tripped through the output.
  static plan_status can_implement(conv_shape const& s, direct_conv_config const& c) {
    using std::to_string;
    if (c.variant < 0 || c.variant >= detail::direct_conv_variant_count)
      return plan_status::failure("direct_sparse_conv: variant must be in [0, " +
                                  to_string(detail::direct_conv_variant_count) + "), got " + to_string(c.variant));
    if (c.tw < 1 || c.th < 1 || c.kw < 1 || c.kw * c.tw * c.th > 256)
      return plan_status::failure("direct_conv_config: kw*tw*th must be in [1, 256], got " + to_string(c.kw) + " x " +
                                  to_string(c.tw) + " x " + to_string(c.th));
    if (c.cc < 1 || c.ksplit < 1)
      return plan_status::failure("direct_conv_config: cc and ksplit must be >= 1, got " + to_string(c.cc) + ", " +
                                  to_string(c.ksplit));
    auto const g = geometry_of(s, c);
    if (!(c.sums_in_registers || g.nchunks == 1 || output_round_trip_exact<T, Acc>))
      return plan_status::failure("direct_sparse_conv: with " + to_string(g.nchunks) +
                                  " channel chunks, __half data with float accumulation needs sums_in_registers = 1 "
                                  "(a round trip through the __half output rounds the partial sums once per chunk)");
    std::size_t const smem = window_bytes(g);
    int const optin = detail::device_smem_optin();
    if (smem > static_cast<std::size_t>(optin))
      return plan_status::failure("direct_sparse_conv: the input window needs " + to_string(smem) +
                                  " bytes of shared memory, the device allows " + to_string(optin) +
                                  "; use fewer channels per chunk (cc)");
    return {};
  }

  // Re-addresses the weights for the config and uploads them (returns once the pageable host
  // data has been read).
  direct_conv_plan(sparse_conv_weights<T> const& w, direct_conv_config const& c, cuda_exec exec, plan_options = {})
      : runs_(exec),
        shape_(w.shape),
        w_(make_device_tiled_weights(sdnn::detail::implementable(can_implement(w.shape, c), w), c,
                                     runs_.owned(exec))) {}
  direct_conv_plan(direct_conv_plan&&) noexcept = default;
  direct_conv_plan& operator=(direct_conv_plan&&) noexcept = default;

  std::size_t workspace_bytes() const noexcept { return 0; }  // the kernel needs no scratch
  conv_shape const& shape() const noexcept { return shape_; }
  direct_conv_config const& config() const noexcept { return w_.config; }
  direct_conv_geometry const& geometry() const noexcept { return w_.geom; }
  std::size_t smem_bytes() const noexcept { return w_.smem_bytes; }

  // out = relu?(conv(in, w) + bias) for n images: in n x C x H x W, out n x K x OH x OW, bias
  // [K] floats or nullptr, all device memory. Enqueued on exec.stream; never synchronises.
  void run(cuda_exec exec, std::int64_t n, T const* in, float const* bias, bool relu, T* out, workspace = {}) const {
    runs_.note(exec);
    direct_sparse_conv<Acc>(w_, shape_, n, in, bias, relu, out, exec);
  }

  static std::size_t window_bytes(direct_conv_geometry const& g) {
    return std::size_t(g.cc) * g.sh * g.sw * g.sub_batch * sizeof(T);
  }

 private:
  sdnn::detail::run_streams runs_;  // first: w_ is allocated through runs_.owned() (core/plan.cuh)
  conv_shape shape_;
  device_tiled_weights<T> w_;
};

}  // namespace sdnn::conv
