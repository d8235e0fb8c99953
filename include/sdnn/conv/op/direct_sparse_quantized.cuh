// sdnn/conv/op/direct_sparse_quantized.cuh - direct sparse convolution with quantized weights
// (conv/quantized_weights.hpp) on the device: the weights re-addressed for one (variant, block
// shape) of conv/op/direct_sparse.hpp and uploaded with their codes
// (device_quantized_tiled_weights), the call that launches
// conv/kernel/direct_sparse_quantized.cuh, and quantized_direct_conv_plan<Encoding>, which
// follows the plan protocol (core/plan.hpp) like direct_conv_plan<float>, with the same configs.
// Float data, float sums. Tuning (timed runs over direct_conv_candidates(shape, sizeof(float),
// batch)) is the caller's, as for the float plan.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/conv/shape.hpp"
#include "sdnn/conv/weights.hpp"
#include "sdnn/formats/quantized.hpp"
#include "sdnn/conv/quantized_weights.hpp"
#include "sdnn/conv/kernel/direct_sparse_quantized.cuh"
#include "sdnn/linear/kernel/spmm_quantized.cuh"
#include "sdnn/conv/op/direct_sparse.cuh"
#include "sdnn/conv/op/direct_sparse.hpp"

namespace sdnn::conv {

namespace detail {
template <class Encoding>
struct quantized_conv_values;
template <>
struct quantized_conv_values<int8_encoding> {
  using type = ::sdnn::kernels::int8_values_view;
};
template <>
struct quantized_conv_values<codebook4_encoding> {
  using type = ::sdnn::kernels::codebook4_values_view;
};
}  // namespace detail

// Quantized weights re-addressed for one (variant, config) and resident on the device: tile
// offsets (times the sub-batch) and codes in the tiled, chunk-major entry order.
template <class Encoding>
struct device_quantized_tiled_weights {
  using values_view = typename detail::quantized_conv_values<Encoding>::type;
  direct_conv_config config;
  direct_conv_geometry geom{};
  device_buffer<std::int32_t> offsets;  // [nnz] tile offset * NB
  device_buffer<std::int32_t> ptr;      // [nchunks*K + 1]
  device_buffer<std::int8_t> q;         // int8: [nnz] codes
  device_buffer<float> scale;           // int8: [1] or [K]
  device_buffer<std::int32_t> zero;     // int8: [1] or [K]
  bool per_channel = false;
  device_buffer<std::uint8_t> packed;   // codebook4: [(nnz + 1) / 2], tiled order
  float codebook[16] = {};              // codebook4: the half centroids, widened (exact)
  std::size_t smem_bytes = 0;           // the input window

  values_view view() const {
    values_view v;
    if constexpr (std::is_same_v<Encoding, int8_encoding>) {
      v.q = q.data();
      v.scale = scale.data();
      v.zero = zero.data();
      v.per_channel = per_channel;
    } else {
      v.packed = packed.data();
      for (int c = 0; c < 16; ++c) v.codebook[c] = codebook[c];
    }
    return v;
  }
  // Device bytes: offsets + chunk pointers (index), codes (value), scales/zeros/codebook (param).
  weight_footprint bytes() const {
    weight_footprint f;
    f.index_bytes = (offsets.size() + ptr.size()) * sizeof(std::int32_t);
    if constexpr (std::is_same_v<Encoding, int8_encoding>) {
      f.value_bytes = q.size();
      f.param_bytes = scale.size() * sizeof(float) + zero.size() * sizeof(std::int32_t);
    } else {
      f.value_bytes = packed.size();
      f.param_bytes = 16 * sizeof(float);
    }
    return f;
  }
};

// Tiles w for config c (the same entry order as make_device_tiled_weights of conv/op/direct_sparse.cuh:
// make_tiled_entries applied to the entry indices) and uploads it (the uploads from pageable
// memory complete before return).
template <class Encoding>
device_quantized_tiled_weights<Encoding> make_device_quantized_tiled_weights(quantized_conv_weights<Encoding> const& w,
                                                                             direct_conv_config const& c,
                                                                             cuda_exec exec) {
  validate(w);
  device_quantized_tiled_weights<Encoding> d;
  d.config = c;
  d.geom = geometry_of(w.shape, c);
  // The permutation storage order -> tiled order: tile the entry indices as values.
  sparse_conv_weights<std::int32_t> idx;
  idx.shape = w.shape;
  idx.nnz_per_channel = w.nnz_per_channel;
  idx.offsets = w.offsets;
  idx.values.resize(static_cast<std::size_t>(w.nnz()));
  for (std::int64_t e = 0; e < w.nnz(); ++e) idx.values[static_cast<std::size_t>(e)] = static_cast<std::int32_t>(e);
  auto const t = make_tiled_entries(idx, d.geom.cc, d.geom.sh, d.geom.sw);
  std::size_t const n = t.values.size();
  std::vector<std::int32_t> off(n);
  for (std::size_t i = 0; i < n; ++i) off[i] = t.tile_offset[i] * d.geom.sub_batch;  // interleaved images
  d.offsets = to_device(off.data(), n, exec);
  d.ptr = to_device(t.ptr.data(), t.ptr.size(), exec);
  if constexpr (std::is_same_v<Encoding, int8_encoding>) {
    std::vector<std::int8_t> q(n);
    for (std::size_t i = 0; i < n; ++i) q[i] = w.enc.q[static_cast<std::size_t>(t.values[i])];
    d.q = to_device(q.data(), n, exec);
    d.scale = to_device(w.enc.scale.data(), w.enc.scale.size(), exec);
    d.zero = to_device(w.enc.zero.data(), w.enc.zero.size(), exec);
    d.per_channel = w.enc.granularity == quant_granularity::per_channel;
  } else {
    std::vector<std::uint8_t> packed((n + 1) / 2, 0);
    for (std::size_t i = 0; i < n; ++i) {
      unsigned const a = w.enc.index(t.values[i]);
      packed[i >> 1] |= static_cast<std::uint8_t>((i & 1) ? (a << 4) : a);
    }
    d.packed = to_device(packed.data(), packed.size(), exec);
    for (int k = 0; k < 16; ++k) d.codebook[k] = w.enc.centroid(static_cast<unsigned>(k));
  }
  d.smem_bytes = std::size_t(d.geom.cc) * d.geom.sh * d.geom.sw * d.geom.sub_batch * sizeof(float);
  return d;
}

// Static shared memory of the quantized kernel besides the window (the codebook).
inline constexpr std::size_t quantized_conv_static_smem = 16 * sizeof(float);

// Enqueues out = relu?(conv(in, decode(w)) + bias) on exec.stream. in: N x C x H x W, out:
// N x K x OH x OW, bias: [K] floats or nullptr, all device memory. Never synchronises.
template <class Encoding>
void direct_sparse_conv_quantized(device_quantized_tiled_weights<Encoding> const& w, conv_shape const& s,
                                  std::int64_t N, float const* in, float const* bias, bool relu, float* out,
                                  cuda_exec exec) {
  if (N == 0) return;
  auto const& g = w.geom;
  auto const l = detail::direct_conv_launch_of("direct_sparse_conv_quantized", s, w.config, g, N, w.smem_bytes,
                                               quantized_conv_static_smem, " (and the codebook 64)");
  auto const v = w.view();
  using V = typename device_quantized_tiled_weights<Encoding>::values_view;
  detail::with_direct_conv_kernel(w.config, [&](auto pol, auto regs) {
    using P = decltype(pol);
    launch_direct_sparse_conv_quantized<V, P::sub_batch, P::k_group, P::pixels, decltype(regs)::value>(
        l.p, l.grid, g.threads, w.smem_bytes, in, w.offsets.data(), v, w.ptr.data(), bias, relu, out, exec);
  });
}

// The plan of one quantized direct sparse convolution. Result: bitwise equal to
// direct_conv_plan<float>(dequantize(w), config) (docs/conv.md#quantized-weights says why),
// hence within float rounding of conv_reference(w, ...) (conv/reference/quantized.hpp).
template <class Encoding>
class quantized_direct_conv_plan {
 public:
  // As direct_conv_plan<float>::can_implement, plus the 64-byte shared codebook.
  static plan_status can_implement(conv_shape const& s, direct_conv_config const& c) {
    auto st = direct_conv_plan<float, float>::can_implement(s, c);
    if (!st) return st;
    std::size_t const smem = direct_conv_plan<float, float>::window_bytes(geometry_of(s, c));
    int const optin = detail::device_smem_optin();
    if (smem + quantized_conv_static_smem > static_cast<std::size_t>(optin))
      return plan_status::failure("direct_sparse_conv_quantized: the input window needs " + std::to_string(smem) +
                                  " bytes of shared memory and the codebook 64, the device allows " +
                                  std::to_string(optin) + "; use fewer channels per chunk (cc)");
    return {};
  }

  // Validates w, tiles it for the config and uploads it.
  quantized_direct_conv_plan(quantized_conv_weights<Encoding> const& w, direct_conv_config const& c, cuda_exec exec,
                             plan_options = {})
      : runs_(exec),
        shape_(w.shape),
        w_(make_device_quantized_tiled_weights(sdnn::detail::implementable(can_implement(w.shape, c), w), c,
                                               runs_.owned(exec))) {}
  quantized_direct_conv_plan(quantized_direct_conv_plan&&) noexcept = default;
  quantized_direct_conv_plan& operator=(quantized_direct_conv_plan&&) noexcept = default;

  std::size_t workspace_bytes() const noexcept { return 0; }
  conv_shape const& shape() const noexcept { return shape_; }
  direct_conv_config const& config() const noexcept { return w_.config; }
  direct_conv_geometry const& geometry() const noexcept { return w_.geom; }
  std::size_t smem_bytes() const noexcept { return w_.smem_bytes; }
  weight_footprint bytes() const { return w_.bytes(); }  // device bytes of the weights

  // out = relu?(conv(in, decode(w)) + bias) for n images (device memory); enqueued on
  // exec.stream; never synchronises.
  void run(cuda_exec exec, std::int64_t n, float const* in, float const* bias, bool relu, float* out,
           workspace = {}) const {
    runs_.note(exec);
    direct_sparse_conv_quantized(w_, shape_, n, in, bias, relu, out, exec);
  }

 private:
  sdnn::detail::run_streams runs_;  // first: w_ is allocated through runs_.owned() (core/plan.cuh)
  conv_shape shape_;
  device_quantized_tiled_weights<Encoding> w_;
};

}  // namespace sdnn::conv
