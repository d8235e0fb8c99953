// sdnn/conv/direct_sparse_conv.cuh - direct sparse convolution kernel (uniform-nnz rows).
//
// Grid: x = output-channel group (KG channels, fastest, so blocks running together share
// one input tile in L2), y = output tile (toh x tow pixels), z = sub-batch (NB images).
// Block: tw x th threads (rounded up to whole warps); thread (tx, ty) owns P pixels:
//   rows_mode = 1 (2-D): (ty + p*th, tx)      rows_mode = 0 (1-D): (ty, tx + p*tw)
// and keeps acc[KG][P][NB] partial sums in registers for the whole reduction.
// Per channel chunk j (cc channels):
//   1. stage the input window  s_in[cc][sh][sw][NB]  (images interleaved: one vector load
//      gives the value at one position for all NB images), zero outside the image;
//   2. stage the chunk's entries for the block's KG channels (tile offset pre-multiplied by
//      NB, weight) and the KG+1 per-channel bounds;
//   3. for each entry: one broadcast load of (offset, weight), then per pixel one vector
//      load and NB FMAs.
// After the last chunk the epilogue adds bias[k], applies ReLU and writes NCHW output;
// consecutive tx write consecutive ox (coalesced).
// Invariants: entries of (chunk j, channel k) only address channels [j*cc, (j+1)*cc) of
// the window; every window position a pixel + entry can reach lies in [0, cc*sh*sw).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "sdnn/conv/conv_shape.hpp"
#include "sdnn/conv/conv_weights.hpp"
#include "sdnn/conv/policies.hpp"
#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"

namespace sdnn::conv {

// One staged weight entry: 8 bytes, read by the whole block as a broadcast. For __half the
// weight is stored twice so it loads as a __half2 for paired (image, image) FMAs.
template <class T>
struct tile_entry;
template <>
struct alignas(8) tile_entry<float> {
  std::int32_t off;
  float w;
};
template <>
struct alignas(8) tile_entry<__half> {
  std::int32_t off;
  __half w[2];
};

// The run-time block shape of the kernel (chosen by tuning or forced by the user).
struct direct_conv_config {
  int variant = 0;    // index into direct_conv_variants (sub-batch / k-group / pixels)
  int tw = 32, th = 8;  // threads along the output row / column
  int rows_mode = 1;  // 1: a thread's pixels step down the column; 0: along the row (1-D)
  int cc = 8;         // input channels per staged chunk
};

struct direct_conv_params {
  int N, C, H, W, K, OH, OW;
  int stride_h, stride_w, pad_h, pad_w;
  int tw, th, rows_mode, toh, tow;
  int cc, sh, sw, nchunks, tiles_x;
  int max_entries;
};

namespace detail {

template <class T, int NB>
struct alignas((NB * sizeof(T)) >= 16 ? 16 : (NB * sizeof(T))) vec_pack {
  T v[NB];
};

template <class T>
SDNN_DEVICE SDNN_FORCEINLINE T zero_value() {
  if constexpr (std::is_same_v<T, __half>) return __float2half(0.0f);
  else return T(0);
}

template <class T, class Acc, int NB, int KG, int P>
__global__ void __launch_bounds__(256) direct_sparse_conv_kernel(direct_conv_params p, T const* __restrict__ in,
                                                                 tile_entry<T> const* __restrict__ ent,
                                                                 std::int32_t const* __restrict__ ptr,
                                                                 float const* __restrict__ bias, int relu,
                                                                 T* __restrict__ out) {
  constexpr bool half_acc = std::is_same_v<Acc, __half>;
  static_assert(!half_acc || std::is_same_v<T, __half>, "half accumulation needs half data");
  static_assert(NB % 2 == 0, "images are paired");
  using acc_t = std::conditional_t<half_acc, __half2, float>;
  constexpr int NA = half_acc ? NB / 2 : NB;

  extern __shared__ __align__(16) unsigned char smem[];
  std::size_t const in_bytes = (std::size_t(p.cc) * p.sh * p.sw * NB * sizeof(T) + 15) / 16 * 16;
  T* s_in = reinterpret_cast<T*>(smem);                                              // [cc][sh][sw][NB]
  tile_entry<T>* s_ent = reinterpret_cast<tile_entry<T>*>(smem + in_bytes);          // [max_entries]
  int* s_ptr = reinterpret_cast<int*>(smem + in_bytes + std::size_t(p.max_entries) * sizeof(tile_entry<T>));  // [KG+1]

  int const tid = threadIdx.x, nthreads = blockDim.x, lane = tid & 31, warp = tid >> 5, nwarps = nthreads >> 5;
  int const k0 = blockIdx.x * KG;
  int const tile_y = blockIdx.y / p.tiles_x, tile_x = blockIdx.y - tile_y * p.tiles_x;
  int const n0 = blockIdx.z * NB;
  int const oy0 = tile_y * p.toh, ox0 = tile_x * p.tow;
  int const iy0 = oy0 * p.stride_h - p.pad_h, ix0 = ox0 * p.stride_w - p.pad_w;
  bool const active = tid < p.tw * p.th;
  int const tx = tid % p.tw, ty = tid / p.tw;

  int ly[P], lx[P], pbase[P];
#pragma unroll
  for (int q = 0; q < P; ++q) {
    ly[q] = p.rows_mode ? ty + q * p.th : ty;
    lx[q] = p.rows_mode ? tx : tx + q * p.tw;
    pbase[q] = (ly[q] * p.stride_h * p.sw + lx[q] * p.stride_w) * NB;
  }

  acc_t acc[KG][P][NA];
#pragma unroll
  for (int kk = 0; kk < KG; ++kk)
#pragma unroll
    for (int q = 0; q < P; ++q)
#pragma unroll
      for (int b = 0; b < NA; ++b) {
        if constexpr (half_acc) acc[kk][q][b] = __float2half2_rn(0.0f);
        else acc[kk][q][b] = 0.0f;
      }

  int const kend = min(k0 + KG, p.K);
  int const rows_total = NB * p.cc * p.sh;
  for (int j = 0; j < p.nchunks; ++j) {
    int const c0 = j * p.cc;
    __syncthreads();  // the previous chunk's reads are done
    // 1. input window, one warp per (image, channel, row)
    for (int rid = warp; rid < rows_total; rid += nwarps) {
      int const img = rid / (p.cc * p.sh);
      int const rem = rid - img * p.cc * p.sh;
      int const c = rem / p.sh, r = rem - c * p.sh;
      int const n = n0 + img, cg = c0 + c, gy = iy0 + r;
      bool const row_ok = n < p.N && cg < p.C && gy >= 0 && gy < p.H;
      T const* src = in + ((std::size_t(row_ok ? n : 0) * p.C + (row_ok ? cg : 0)) * p.H + (row_ok ? gy : 0)) * p.W;
      T* dst = s_in + std::size_t(c * p.sh + r) * p.sw * NB + img;
      for (int col = lane; col < p.sw; col += 32) {
        int const gx = ix0 + col;
        dst[col * NB] = (row_ok && gx >= 0 && gx < p.W) ? src[gx] : zero_value<T>();
      }
    }
    // 2. this chunk's entries of channels [k0, kend)
    int const eb = ptr[std::size_t(j) * p.K + k0], ee = ptr[std::size_t(j) * p.K + kend];
    for (int i = tid; i < ee - eb; i += nthreads) s_ent[i] = ent[eb + i];
    if (tid <= KG) s_ptr[tid] = ptr[std::size_t(j) * p.K + min(k0 + tid, p.K)] - eb;
    __syncthreads();
    // 3. accumulate
    if (active) {
#pragma unroll
      for (int kk = 0; kk < KG; ++kk) {
        int const b0 = s_ptr[kk], b1 = s_ptr[kk + 1];
#pragma unroll 2
        for (int i = b0; i < b1; ++i) {
          tile_entry<T> const e = s_ent[i];
#pragma unroll
          for (int q = 0; q < P; ++q) {
            vec_pack<T, NB> const x = *reinterpret_cast<vec_pack<T, NB> const*>(s_in + e.off + pbase[q]);
            if constexpr (std::is_same_v<T, float>) {
#pragma unroll
              for (int b = 0; b < NB; ++b) acc[kk][q][b] = fmaf(e.w, x.v[b], acc[kk][q][b]);
            } else if constexpr (half_acc) {
              __half2 const w2 = __halves2half2(e.w[0], e.w[1]);
#pragma unroll
              for (int b = 0; b < NA; ++b)
                acc[kk][q][b] = __hfma2(w2, __halves2half2(x.v[2 * b], x.v[2 * b + 1]), acc[kk][q][b]);
            } else {
              float const w = __half2float(e.w[0]);
#pragma unroll
              for (int b = 0; b < NB / 2; ++b) {
                float2 const f = __half22float2(__halves2half2(x.v[2 * b], x.v[2 * b + 1]));
                acc[kk][q][2 * b] = fmaf(w, f.x, acc[kk][q][2 * b]);
                acc[kk][q][2 * b + 1] = fmaf(w, f.y, acc[kk][q][2 * b + 1]);
              }
            }
          }
        }
      }
    }
  }
  if (!active) return;
  // epilogue: bias + ReLU in float, one rounding on store
#pragma unroll
  for (int kk = 0; kk < KG; ++kk) {
    int const k = k0 + kk;
    if (k >= p.K) break;
    float const bk = bias ? bias[k] : 0.0f;
#pragma unroll
    for (int q = 0; q < P; ++q) {
      int const oy = oy0 + ly[q], ox = ox0 + lx[q];
      if (oy >= p.OH || ox >= p.OW) continue;
#pragma unroll
      for (int b = 0; b < NB; ++b) {
        int const n = n0 + b;
        if (n >= p.N) break;
        float v;
        if constexpr (half_acc) v = b % 2 == 0 ? __low2float(acc[kk][q][b / 2]) : __high2float(acc[kk][q][b / 2]);
        else v = acc[kk][q][b];
        v += bk;
        if (relu && v < 0.0f) v = 0.0f;
        out[((std::size_t(n) * p.K + k) * p.OH + oy) * p.OW + ox] = value_cast<T>(v);
      }
    }
  }
}

// The compiled variants tuning chooses from (accumulators KG*P*NB = 64 in each).
template <int I>
struct direct_conv_variant;
template <>
struct direct_conv_variant<0> {
  using type = policy::direct_sparse_conv<2, 8, 4>;
};
template <>
struct direct_conv_variant<1> {
  using type = policy::direct_sparse_conv<4, 8, 2>;
};
template <>
struct direct_conv_variant<2> {
  using type = policy::direct_sparse_conv<8, 8, 1>;
};
inline constexpr int direct_conv_variant_count = 3;

template <int I, class F>
void with_variant(int v, F&& f) {
  if constexpr (I < direct_conv_variant_count) {
    if (v == I) f(typename direct_conv_variant<I>::type{});
    else with_variant<I + 1>(v, f);
  } else {
    SDNN_FAIL("direct_sparse_conv: variant must be in [0, ", direct_conv_variant_count, "), got ", v);
  }
}

inline int variant_index(int sub_batch, int k_group, int pixels) {
  int found = -1;
  auto probe = [&](auto pol) {
    using P = decltype(pol);
    return P::sub_batch == sub_batch && P::k_group == k_group && P::pixels == pixels;
  };
  if (probe(direct_conv_variant<0>::type{})) found = 0;
  if (probe(direct_conv_variant<1>::type{})) found = 1;
  if (probe(direct_conv_variant<2>::type{})) found = 2;
  return found;
}

}  // namespace detail

// Geometry of one (variant, config) on a shape: tile, window, chunking.
struct direct_conv_geometry {
  int sub_batch, k_group, pixels;
  int toh, tow, sh, sw;
  int cc, nchunks, tiles_x, tiles_y;
};

inline direct_conv_geometry geometry_of(conv_shape const& s, direct_conv_config const& c) {
  direct_conv_geometry g{};
  detail::with_variant<0>(c.variant, [&](auto pol) {
    using P = decltype(pol);
    g.sub_batch = P::sub_batch;
    g.k_group = P::k_group;
    g.pixels = P::pixels;
  });
  SDNN_EXPECTS(c.tw >= 1 && c.th >= 1 && c.tw * c.th <= 256, "direct_conv_config: tw*th must be in [1, 256], got ",
               c.tw, " x ", c.th);
  SDNN_EXPECTS(c.cc >= 1, "direct_conv_config: cc must be >= 1, got ", c.cc);
  g.toh = c.rows_mode ? c.th * g.pixels : c.th;
  g.tow = c.rows_mode ? c.tw : c.tw * g.pixels;
  g.sh = (g.toh - 1) * s.stride_h + (s.R - 1) * s.dil_h + 1;
  g.sw = (g.tow - 1) * s.stride_w + (s.S - 1) * s.dil_w + 1;
  g.cc = std::min(c.cc, s.C);
  g.nchunks = (s.C + g.cc - 1) / g.cc;
  g.tiles_x = (s.OW() + g.tow - 1) / g.tow;
  g.tiles_y = (s.OH() + g.toh - 1) / g.toh;
  return g;
}

// Weights re-addressed for one (variant, config) and resident on the device.
template <class T>
struct device_tiled_weights {
  direct_conv_config config;
  direct_conv_geometry geom{};
  int max_entries = 0;
  device_buffer<tile_entry<T>> entries;  // [nnz] chunk-major
  device_buffer<std::int32_t> ptr;       // [nchunks*K + 1]
  std::size_t smem_bytes = 0;
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
  d.max_entries = static_cast<int>(t.max_group_entries(w.shape.K, d.geom.k_group));
  host_buffer<tile_entry<T>> he(t.values.size());
  for (std::size_t i = 0; i < t.values.size(); ++i) {
    he[i].off = t.tile_offset[i] * d.geom.sub_batch;  // interleaved images: position * NB
    if constexpr (std::is_same_v<T, __half>) he[i].w[0] = he[i].w[1] = t.values[i];
    else he[i].w = t.values[i];
  }
  host_buffer<std::int32_t> hp(t.ptr.begin(), t.ptr.end());
  d.entries = copy_to<device_space>(he, exec);
  d.ptr = copy_to<device_space>(hp, exec);
  std::size_t const in_bytes =
      (std::size_t(d.geom.cc) * d.geom.sh * d.geom.sw * d.geom.sub_batch * sizeof(T) + 15) / 16 * 16;
  d.smem_bytes = in_bytes + std::size_t(d.max_entries) * sizeof(tile_entry<T>) + (d.geom.k_group + 1) * sizeof(int);
  return d;
}

// Enqueues out = relu?(conv(in, w) + bias) on exec.stream. in: N x C x H x W, out:
// N x K x OH x OW, bias: [K] floats or nullptr, all device memory. Never synchronises.
template <class Acc, class T>
void direct_sparse_conv(device_tiled_weights<T> const& w, conv_shape const& s, std::int64_t N, T const* in,
                        float const* bias, bool relu, T* out, cuda_exec exec) {
  if (N == 0) return;
  auto const& g = w.geom;
  direct_conv_params p{};
  p.N = static_cast<int>(N);
  p.C = s.C; p.H = s.H; p.W = s.W; p.K = s.K; p.OH = s.OH(); p.OW = s.OW();
  p.stride_h = s.stride_h; p.stride_w = s.stride_w; p.pad_h = s.pad_h; p.pad_w = s.pad_w;
  p.tw = w.config.tw; p.th = w.config.th; p.rows_mode = w.config.rows_mode;
  p.toh = g.toh; p.tow = g.tow; p.cc = g.cc; p.sh = g.sh; p.sw = g.sw; p.nchunks = g.nchunks;
  p.tiles_x = g.tiles_x;
  p.max_entries = w.max_entries;
  int dev = 0, optin = 0;
  SDNN_CUDA_CHECK(cudaGetDevice(&dev));
  SDNN_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  SDNN_EXPECTS(w.smem_bytes <= std::size_t(optin), "direct_sparse_conv: the tile needs ", w.smem_bytes,
               " bytes of shared memory, the device allows ", optin, "; use fewer channels per chunk (cc)");
  std::int64_t const tiles = std::int64_t(g.tiles_x) * g.tiles_y;
  std::int64_t const groups = (N + g.sub_batch - 1) / g.sub_batch;
  SDNN_EXPECTS(tiles <= 65535 && groups <= 65535, "direct_sparse_conv: grid too large (", tiles, " tiles, ", groups,
               " sub-batches; at most 65535 each)");
  dim3 const grid(static_cast<unsigned>((s.K + g.k_group - 1) / g.k_group), static_cast<unsigned>(tiles),
                  static_cast<unsigned>(groups));
  int const threads = (w.config.tw * w.config.th + 31) / 32 * 32;
  detail::with_variant<0>(w.config.variant, [&](auto pol) {
    using P = decltype(pol);
    auto kernel = detail::direct_sparse_conv_kernel<T, Acc, P::sub_batch, P::k_group, P::pixels>;
    SDNN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(w.smem_bytes)));
    kernel<<<grid, threads, w.smem_bytes, exec.stream>>>(p, in, w.entries.data(), w.ptr.data(), bias, relu ? 1 : 0,
                                                         out);
    SDNN_CUDA_CHECK_LAUNCH();
  });
}

// Candidate block shapes for a shape (tuning tries each for every variant). cc fills a
// ~40 KB input window (leaves room for several blocks per SM on Hopper's 228 KB).
inline std::vector<direct_conv_config> direct_conv_candidates(conv_shape const& s, std::size_t elem_bytes,
                                                              std::size_t window_budget = 40 * 1024) {
  std::vector<direct_conv_config> out;
  for (int v = 0; v < detail::direct_conv_variant_count; ++v) {
    std::vector<std::pair<int, int>> shapes;  // (tw, th)
    int P = 1, NB = 2;
    detail::with_variant<0>(v, [&](auto pol) {
      P = decltype(pol)::pixels;
      NB = decltype(pol)::sub_batch;
    });
    int const rows_mode = s.OH() > 1 ? 1 : 0;
    if (rows_mode) {
      int const tw = std::min(32, s.OW());
      for (int threads : {128, 256}) {
        int th = std::max(1, threads / tw);
        th = std::min(th, (s.OH() + P - 1) / P);
        if (std::find(shapes.begin(), shapes.end(), std::make_pair(tw, th)) == shapes.end()) shapes.push_back({tw, th});
      }
    } else {
      for (int threads : {128, 256}) {
        int const tw = std::min(threads, ((s.OW() + P - 1) / P + 31) / 32 * 32);
        if (std::find(shapes.begin(), shapes.end(), std::make_pair(tw, 1)) == shapes.end()) shapes.push_back({tw, 1});
      }
    }
    for (auto [tw, th] : shapes) {
      direct_conv_config c;
      c.variant = v;
      c.tw = tw;
      c.th = th;
      c.rows_mode = rows_mode;
      c.cc = 1;
      auto const g = geometry_of(s, c);
      std::size_t const per_channel = std::size_t(g.sh) * g.sw * NB * elem_bytes;
      int const cc_max = static_cast<int>(std::max<std::size_t>(1, window_budget / per_channel));
      int const chunks = (s.C + cc_max - 1) / cc_max;
      c.cc = (s.C + chunks - 1) / chunks;
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace sdnn::conv
