// sdnn/linear/arch/tc_x_operand.cuh - the activation (X) operands of the tensor-core kernels
// (linear/kernel/tc_spmm.cuh, sparse24_mma.cuh): the N x K operand X of Y = X W^T as dense rows, or as a
// convolution's NHWC input read in place as its implicit im2col matrix. Each copies one k-block's
// X tile into shared memory, in the layout the kernel's Cfg names.
#pragma once

#include <cstdint>
#include <type_traits>

#include "sdnn/core/fast_divmod.hpp"
#include "sdnn/linear/arch/mma.cuh"

namespace sdnn::kernels {

// An X operand fills the X tile of a k-block: rows [n0, n0 + BN), columns [k0, k0 + BK) of the
// N x K operand -> shared memory, zero outside N x K. A thread copies the same rows and the same
// 8-column piece of every k-block (i = tid + j * threads, threads a multiple of BK / 8), so
// start() computes what depends on the rows once per thread block, and issue() adds the k-block's
// part. Where a piece goes is the kernel's: rows of Cfg::LDS elements ([BN][LDS], tc_spmm_kernel),
// or Cfg::x_layout::at(r, c) where the Cfg has one (the 2:4 kernel's swizzled rows). Every piece
// starts at a multiple of 8 elements (16 bytes).
template <class Cfg, class = void>
struct tc_x_layout {
  __device__ static int at(int r, int c) { return r * Cfg::LDS + c; }
};
template <class Cfg>
struct tc_x_layout<Cfg, std::void_t<typename Cfg::x_layout>> {
  __device__ static int at(int r, int c) { return Cfg::x_layout::at(r, c); }
};

// Eight 16-bit values into 16 bytes of shared memory (the element-wise paths).
__device__ __forceinline__ void tc_store8(std::uint16_t* dst, std::uint16_t const (&v)[8]) {
  uint4 q;
  q.x = v[0] | (std::uint32_t(v[1]) << 16);
  q.y = v[2] | (std::uint32_t(v[3]) << 16);
  q.z = v[4] | (std::uint32_t(v[5]) << 16);
  q.w = v[6] | (std::uint32_t(v[7]) << 16);
  *reinterpret_cast<uint4*>(dst) = q;
}

template <class Cfg>
struct tc_x_pieces {
  static constexpr int pieces = Cfg::BK / 8;                                       // 8-column pieces of a row
  static constexpr int total = Cfg::BN * pieces;                                   // pieces of the tile
  static constexpr int rows = (total + Cfg::threads - 1) / Cfg::threads;           // rows a thread copies, at most
  static_assert(Cfg::threads % pieces == 0, "tc_x_pieces: a thread keeps its column");
  __device__ static bool active(int tid, int j) { return total % Cfg::threads == 0 || tid + j * Cfg::threads < total; }
  __device__ static int row(int tid, int j) { return (tid + j * Cfg::threads) / pieces; }
  __device__ static int col(int tid) { return (tid % pieces) * 8; }
};

// Dense X rows: element (n, k) at x[n * ldx + k].
template <class T>
struct tc_rows_x {
  T const* x = nullptr;
  std::int64_t ldx = 0;
  bool vec = false;  // x 16-byte aligned and ldx % 8 == 0: 16-byte copies (a K tail zero-filled)

  struct state {
    int n0, N;
  };
  template <class Cfg>
  __device__ state start(int n0, int N, int) const {
    return {n0, N};
  }
  template <class Cfg>
  __device__ void issue(state const& st, int k0, int K, std::uint16_t* s, int tid) const {
    using P = tc_x_pieces<Cfg>;
    auto const* xb = reinterpret_cast<std::uint16_t const*>(x);
    int const c = P::col(tid), k = k0 + c;
#pragma unroll
    for (int j = 0; j < P::rows; ++j) {
      if (!P::active(tid, j)) break;
      int const r = P::row(tid, j), n = st.n0 + r;
      if (vec) {
        int const bytes = n < st.N && k < K ? (K - k >= 8 ? 16 : 2 * (K - k)) : 0;  // the row's bytes in the piece
        mma::cp_async_16(s + tc_x_layout<Cfg>::at(r, c),
                         bytes > 0 ? static_cast<void const*>(xb + std::int64_t(n) * ldx + k) : xb, bytes);
      } else {  // unaligned X: element loads, plain shared stores
        std::uint16_t v[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = (n < st.N && k + e < K) ? xb[std::int64_t(n) * ldx + k + e] : 0;
        tc_store8(s + tc_x_layout<Cfg>::at(r, c), v);
      }
    }
  }
};

// A convolution's input as the implicit-GEMM operand: x is NHWC [batch][H][W][C]; row n is the
// output pixel ((b * OH) + oh) * OW + ow, column k = (r * S + s) * C + c (channel fastest), and
// X(n, k) = x[b][oh * stride_h - pad_h + r * dil_h][ow * stride_w - pad_w + s * dil_w][c], zero
// in the padding. Invariants (the conv plan checks them): N, K and batch * H * W * C below 2^31,
// so every offset below fits int32.
template <class T>
struct tc_im2col_x {
  T const* x = nullptr;
  std::int32_t H = 0, W = 0, C = 0;
  std::int32_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
  fast_divmod div_c, div_s, div_ow, div_oh;  // by C, S, OW, OH
  bool vec = false;  // x 16-byte aligned and C % 8 == 0: a piece of 8 channels lies in one tap

  // Per row a thread copies: the offset of input pixel (b, ih0, iw0) (ih0 = oh * stride_h - pad_h,
  // likewise iw0; it may lie in the padding, only offsets of real pixels are dereferenced), ih0
  // and iw0; a row past N has ih0 = -2^30 (never in range).
  struct state {
    int n0, N;
    std::int32_t base[8], ih0[8], iw0[8];
  };
  template <class Cfg>
  __device__ state start(int n0, int N, int tid) const {
    using P = tc_x_pieces<Cfg>;
    static_assert(P::rows <= 8, "tc_im2col_x: at most 8 rows a thread");
    state st;
    st.n0 = n0;
    st.N = N;
#pragma unroll
    for (int j = 0; j < P::rows; ++j) {
      int const n = P::active(tid, j) ? n0 + P::row(tid, j) : N;
      int t = 0, ow = 0, b = 0, oh = 0;
      if (n < N) {
        div_ow.divmod(n, t, ow);
        div_oh.divmod(t, b, oh);
      }
      st.ih0[j] = n < N ? oh * stride_h - pad_h : -(1 << 30);
      st.iw0[j] = ow * stride_w - pad_w;
      st.base[j] = n < N ? ((b * H + st.ih0[j]) * W + st.iw0[j]) * C : 0;
    }
    return st;
  }
  // Element offset of X(n, k) in x, or -1 in the padding (the element-wise path).
  __device__ std::int64_t offset(int n, int k) const {
    int t, ow, b, oh, tap, c, r, s;
    div_ow.divmod(n, t, ow);
    div_oh.divmod(t, b, oh);
    div_c.divmod(k, tap, c);
    div_s.divmod(tap, r, s);
    int const ih = oh * stride_h - pad_h + r * dil_h, iw = ow * stride_w - pad_w + s * dil_w;
    if (ih < 0 || ih >= H || iw < 0 || iw >= W) return -1;
    return ((std::int64_t(b) * H + ih) * W + iw) * C + c;
  }

  template <class Cfg>
  __device__ void issue(state const& st, int k0, int K, std::uint16_t* s, int tid) const {
    using P = tc_x_pieces<Cfg>;
    auto const* xb = reinterpret_cast<std::uint16_t const*>(x);
    int const c = P::col(tid), k = k0 + c;
    if (vec) {
      // This thread's piece: one tap (C % 8 == 0), decoded once for all its rows.
      int tap = 0, ch = 0, r = 0, q = 0;
      div_c.divmod(k < K ? k : 0, tap, ch);
      div_s.divmod(tap, r, q);
      int const dh = r * dil_h, dw = q * dil_w, toff = (dh * W + dw) * C + ch;
#pragma unroll
      for (int j = 0; j < P::rows; ++j) {
        if (!P::active(tid, j)) break;
        int const ih = st.ih0[j] + dh, iw = st.iw0[j] + dw;
        bool const in = k < K && unsigned(ih) < unsigned(H) && unsigned(iw) < unsigned(W);
        mma::cp_async_16(s + tc_x_layout<Cfg>::at(P::row(tid, j), c),
                         in ? static_cast<void const*>(xb + (st.base[j] + toff)) : xb, in ? 16 : 0);
      }
    } else {
#pragma unroll
      for (int j = 0; j < P::rows; ++j) {
        if (!P::active(tid, j)) break;
        int const n = st.n0 + P::row(tid, j);
        std::uint16_t v[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          std::int64_t const off = n < st.N && k + e < K ? offset(n, k + e) : -1;
          v[e] = off >= 0 ? xb[off] : 0;
        }
        tc_store8(s + tc_x_layout<Cfg>::at(P::row(tid, j), c), v);
      }
    }
  }
};

}  // namespace sdnn::kernels
