// sdnn/ops/conv.cuh - direct sparse convolution on the device: the weights re-addressed for
// one (variant, block shape) and uploaded (device_tiled_weights), and the call that checks
// the arguments and launches the kernel of kernels/direct_sparse_conv.cuh (whose file
// comment describes the algorithm). The host-side plan (variants, geometry, tuning
// candidates) is in ops/conv.hpp.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/formats/conv_shape.hpp"
#include "sdnn/formats/conv_weights.hpp"
#include "sdnn/kernels/direct_sparse_conv.cuh"
#include "sdnn/ops/conv.hpp"
#include "sdnn/policies/conv.hpp"

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
  direct_conv_params p{};
  p.N = static_cast<int>(N);
  p.C = s.C; p.H = s.H; p.W = s.W; p.K = s.K; p.OH = s.OH(); p.OW = s.OW();
  p.stride_h = s.stride_h; p.stride_w = s.stride_w; p.pad_h = s.pad_h; p.pad_w = s.pad_w;
  p.tw = w.config.tw; p.th = w.config.th; p.rows_mode = w.config.rows_mode; p.kw = w.config.kw; p.kper = g.kper;
  p.toh = g.toh; p.tow = g.tow; p.cc = g.cc; p.sh = g.sh; p.sw = g.sw; p.nchunks = g.nchunks;
  p.tiles_x = g.tiles_x;
  p.inv_tiles_x = 1.0f / float(g.tiles_x);
  p.segs_per_row = (g.sw + 32 / g.sub_batch - 1) / (32 / g.sub_batch);
  p.nsegs = g.cc * g.sh * p.segs_per_row;
  p.inv_spr = 1.0f / float(p.segs_per_row);
  p.inv_sh = 1.0f / float(g.sh);
  int dev = 0, optin = 0;
  SDNN_CUDA_CHECK(cudaGetDevice(&dev));
  SDNN_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  SDNN_EXPECTS(w.smem_bytes <= std::size_t(optin), "direct_sparse_conv: the input window needs ", w.smem_bytes,
               " bytes of shared memory, the device allows ", optin, "; use fewer channels per chunk (cc)");
  std::int64_t const tiles = std::int64_t(g.tiles_x) * g.tiles_y;
  std::int64_t const groups = (N + g.sub_batch - 1) / g.sub_batch;
  std::int64_t const splits = (s.K + g.kper - 1) / g.kper;
  SDNN_EXPECTS(tiles < (std::int64_t(1) << 22) && groups <= 65535, "direct_sparse_conv: grid too large (", tiles,
               " tiles, at most 2^22; ", groups, " sub-batches, at most 65535)");
  dim3 const grid(static_cast<unsigned>(tiles), static_cast<unsigned>(groups), static_cast<unsigned>(splits));
  detail::with_variant<0>(w.config.variant, [&](auto pol) {
    using P = decltype(pol);
    if (w.config.sums_in_registers)
      launch_direct_sparse_conv<T, Acc, P::sub_batch, P::k_group, P::pixels, true>(
          p, grid, g.threads, w.smem_bytes, in, w.entries.data(), w.ptr.data(), bias, relu, out, exec);
    else
      launch_direct_sparse_conv<T, Acc, P::sub_batch, P::k_group, P::pixels, false>(
          p, grid, g.threads, w.smem_bytes, in, w.entries.data(), w.ptr.data(), bias, relu, out, exec);
  });
}

}  // namespace sdnn::conv
