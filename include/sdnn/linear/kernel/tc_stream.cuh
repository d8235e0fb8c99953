// sdnn/linear/kernel/tc_stream.cuh - the tensor-core linear kernel for small batches (N up to a few
// tens), Y = epi(X W^T), where the weight bytes are the whole cost: one block per SM, one wave, each
// warp streaming its own byte-balanced run of weight tiles (tile_offsets records or stored blocks)
// through a private cp.async ring with no block barrier in the main loop; deterministic fix-up in
// warp, then block order. Weight source and value type are template parameters, as in
// tc_spmm_kernel. Design and measured limits: docs/linear.md#the-streaming-tensor-core-kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "sdnn/linear/kernel/tc_spmm.cuh"

namespace sdnn::kernels {

// What the streaming kernel needs of a weight source (tc_spmm.cuh's sources).
template <class Source>
struct tc_stream_traits;
template <class T>
struct tc_stream_traits<tc_tile_offsets_source<T>> {
  using S = tc_tile_offsets_source<T>;
  static constexpr bool decode = true;  // records expand into a dense tile
  __device__ static int ptr(S const& s, int p) { return __ldg(s.tile_ptr + p); }
  __device__ static int col(S const& s, int u) { return __ldg(s.tile_col + u); }
  template <class Cfg>
  __device__ static std::uint32_t off16(S const& s, int u) {
    return __ldg(s.tile_offset + u);
  }
  __device__ static unsigned char const* bytes(S const& s) { return s.data; }
};
template <class T>
struct tc_stream_traits<tc_block_source<T>> {
  using S = tc_block_source<T>;
  static constexpr bool decode = false;  // blocks are read in place (swizzled by the plan)
  __device__ static int ptr(S const& s, int p) { return __ldg(s.row_ptr + p); }
  __device__ static int col(S const& s, int u) { return __ldg(s.col_idx + u); }
  template <class Cfg>
  __device__ static std::uint32_t off16(S const&, int u) {
    return std::uint32_t(u) * std::uint32_t(Cfg::BR * Cfg::BC * 2 / 16);
  }
  __device__ static unsigned char const* bytes(S const& s) { return reinterpret_cast<unsigned char const*>(s.values); }
};

template <class T, class Source>
struct tc_stream_params {
  Source src;
  T const* x = nullptr;  // [N x ldx]
  std::int64_t ldx = 0;
  bool x_pair = false;   // x 4-byte aligned, ldx and K even: 32-bit X loads
  void* y = nullptr;     // [N x ldy] of T, or of float when y_float
  std::int64_t ldy = 0;
  bool y_float = false;
  std::int32_t M = 0, N = 0, K = 0;
  basic_epilogue<float> epi{};
  std::int32_t panels = 0, passes = 1;  // passes: ceil(N / BN)
  // The schedule (ops/tc_stream_schedule.hpp): one int32 buffer and the offsets of its arrays.
  std::int32_t const* sched = nullptr;
  std::int32_t warp_begin = 0, warp_panel = 0, warp_off = 0, cta_panel = 0, panel_cta = 0, empty = 0, n_empty = 0;
  float* partial = nullptr;          // [passes][ctas][2][BR * BN]: a block's partial sums of its first / last panel
  std::int32_t* counters = nullptr;  // [passes][panels], zero between launches (the last block resets its own)
};

// Shared memory of one block: the warps' rings, then (tile_offsets) their dense tiles, then the
// per-warp panel ids of the partial sums left in the rings and two flags.
template <class Cfg, bool Decode>
struct tc_stream_smem {
  static constexpr int ring = Cfg::Warps * Cfg::Ring;
  static constexpr int unit = Cfg::BR * Cfg::BC * 2;
  static constexpr int tiles = Decode ? Cfg::Warps * unit : 0;
  static constexpr int misc = (2 * Cfg::Warps + 4) * 4;
  static constexpr int total = ring + tiles + misc;
};

// The 16-byte piece i of a unit stored row-major (16-byte pieces, 128-byte aligned) sits at
// piece i ^ ((i / 8) % 8): the 8 row addresses of an ldmatrix then fall in 8 distinct bank groups
// for rows of 32, 64 or 128 bytes. The plan stores blocks this way; records expand this way.
__host__ __device__ constexpr int tc_swizzle16(int i) { return i ^ ((i >> 3) & 7); }

namespace detail {
// X[n][k], X[n][k + 1] as one B-fragment register (row: X + n ldx, k even); zero outside N x K.
__device__ __forceinline__ std::uint32_t stream_x_pair(unsigned short const* row, bool n_in, int k, int K, bool pair) {
  if (!n_in || k >= K) return 0u;
  if (pair) return __ldg(reinterpret_cast<unsigned const*>(row + k));
  std::uint32_t const lo = __ldg(row + k), hi = k + 1 < K ? __ldg(row + k + 1) : 0u;
  return lo | (hi << 16);
}

// Expands the 64 x 64 tile_offsets record at ring offset va (formats/tile_offsets.hpp, position
// bytes as the plan stores them: tc_pos_swizzle) into the zeroed dense tile t: sub-tile s (16 x
// 16) at t + 256 s, row r in 32 bytes, its two 16-byte halves swapped in rows 4-7 and 12-15 (the
// 8 rows of an ldmatrix matrix then hit distinct banks), i.e. element q' = tc_pos_swizzle(q) of
// the sub-tile: the stored byte itself. Lanes 2s and 2s + 1 take sub-tile s's values in turn.
// Returns the warp's mask of non-empty sub-tiles (bit 2s: sub-tile s).
template <int R>
__device__ __forceinline__ std::uint32_t stream_expand64(unsigned char const* ring, std::uint32_t va,
                                                         std::uint16_t* t, int lane) {
  auto rd16 = [&](std::uint32_t v) { return *reinterpret_cast<std::uint16_t const*>(ring + (v & (R - 1))); };
  int const s = lane >> 1;
  unsigned const b = rd16(va + 2 * s), e = rd16(va + 2 * s + 2), nnz = rd16(va + 32);
  std::uint32_t const nz = __ballot_sync(0xffffffffu, b != e);
  std::uint32_t const vv = va + 48, vp = vv + ((2 * nnz + 15) & ~15u);  // header: 17 uint16 in 48 bytes
  std::uint16_t* const ts = t + 256 * s;
#pragma unroll 4
  for (unsigned i = b + (lane & 1); i < e; i += 2) ts[ring[(vp + i) & (R - 1)]] = rd16(vv + 2 * i);
  return nz;
}
}  // namespace detail

// grid: the schedule's blocks; block: Cfg::threads; dynamic shared memory tc_stream_smem::total.
template <class Cfg, class T, class Source>
__global__ void __launch_bounds__(Cfg::threads, 1) tc_stream_kernel(tc_stream_params<T, Source> p) {
#if SDNN_MMA_SYNC_ARCH
  using tr = tc_stream_traits<Source>;
  constexpr bool decode = tr::decode;
  constexpr int W = Cfg::Warps, R = Cfg::Ring, C = Cfg::Chunk, BR = Cfg::BR, BC = Cfg::BC, BN = Cfg::BN;
  constexpr int MT = Cfg::MT, KT = Cfg::KT, NT = Cfg::NT, CPR = BC / 8;
  constexpr int E = BR * BN, EPT = (E + Cfg::threads - 1) / Cfg::threads;
  constexpr unsigned FULL = 0xffffffffu;
  using plan = tc_stream_smem<Cfg, decode>;
  static_assert(!decode || (BR == 64 && BC == 64), "tc_stream: tile_offsets records are 64 x 64 here");
  extern __shared__ __align__(128) unsigned char tc_stream_shared[];
  unsigned char* const smem = tc_stream_shared;

  int const tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;
  int const cta = blockIdx.x, G = gridDim.x;
  int const gw = cta * W + warp;
  unsigned char* const ring = smem + warp * R;
  auto* const tile = reinterpret_cast<std::uint16_t*>(smem + plan::ring + (decode ? warp * plan::unit : 0));
  int* const spanel = reinterpret_cast<int*>(smem + plan::ring + plan::tiles);  // [W][2]
  int* const flags = spanel + 2 * W;                                            // [2]

  std::int32_t const* S = p.sched;
  int const ta = S[p.warp_begin + gw], tb = S[p.warp_begin + gw + 1], pa = S[p.warp_panel + gw];
  std::uint32_t const B0 = std::uint32_t(S[p.warp_off + gw]);
  std::uint32_t const nbytes = (std::uint32_t(S[p.warp_off + gw + 1]) - B0) * 16u;
  int const Ta = S[p.warp_begin + cta * W], Tb = S[p.warp_begin + (cta + 1) * W], Pa = S[p.cta_panel + cta];
  unsigned char const* const gsrc = tr::bytes(p.src) + std::size_t(B0) * 16;
  int const nchunks = int((nbytes + C - 1) / C);

  auto store = [&](int gn, int gm, float v) {
    detail::store_out<T>(p.y, p.y_float, std::int64_t(gn) * p.ldy + gm, p.epi(v, gm));
  };

  for (int pass = 0; pass < p.passes; ++pass) {
    int const n0 = pass * BN;
    if (lane == 0) spanel[2 * warp] = spanel[2 * warp + 1] = -1;
    if (ta < tb) {
      float acc[MT][NT][4], acc0[MT][NT][4];
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int q = 0; q < 4; ++q) acc[i][j][q] = acc0[i][j][q] = 0.f;

      // The ring: byte v of the run (v < nbytes) lands at ring[v % R]; chunk j (bytes
      // [j C, j C + C)) is one commit group, issued once chunk j - R / C is consumed.
      int issued = 0;
      auto refill = [&](std::uint32_t consumed) {
        int const limit = min(nchunks, int(consumed / C) + R / C);
        while (issued < limit) {
          std::uint32_t const base = std::uint32_t(issued) * C;
#pragma unroll
          for (int i = 0; i < C / 512; ++i) {
            std::uint32_t const o = base + std::uint32_t(lane + 32 * i) * 16u;
            if (o < nbytes) mma::cp_async_16(ring + (o & (R - 1)), gsrc + o);
          }
          mma::cp_async_commit();
          ++issued;
        }
      };
      refill(0);

      // Unit metadata, 31 units per batch: lane j holds col(mb + j) and off16(mb + j) (j = 31: the end).
      int mb = ta, mcol = 0;
      std::uint32_t moff = 0;
      auto load_meta = [&](int base) {
        mb = base;
        int const u = base + lane;
        mcol = u < tb ? tr::col(p.src, u) : 0;
        moff = u <= tb ? tr::template off16<Cfg>(p.src, u) : 0u;
      };
      // Panel starts, 32 per batch: lane j holds ptr(pb + j).
      int pb = 0, pv = 0;
      auto load_ptr = [&](int base) {
        pb = base;
        int const q = base + lane;
        pv = q <= p.panels ? tr::ptr(p.src, q) : 0x7fffffff;
      };
      auto ptr_at = [&](int q) {
        if (q < pb || q >= pb + 32) load_ptr(q);  // warp-uniform
        return __shfl_sync(FULL, pv, q - pb);
      };
      load_meta(ta);
      load_ptr(pa);
      int cur = pa, cur_begin = ptr_at(pa), cur_end = ptr_at(pa + 1);
      bool has0 = false, tail = false;  // slot 0 held in acc0; the last segment left in acc
      int tail_slot = 0;

      // B fragments: lane (g, t4) holds X[n0 + 8 j + g][k .. k + 1] and [k + 8 .. k + 9], k = 16 kt + 2 t4.
      // NT <= 2: the next unit's fragments load into xn before this unit's expansion and mma
      // (xf), else into xf after its mma (registers).
      constexpr bool xd = NT <= 2;
      std::uint32_t xf[KT][NT][2], xn[KT][NT][2];
#pragma unroll
      for (int kt = 0; kt < KT; ++kt)
#pragma unroll
        for (int j = 0; j < NT; ++j) xn[kt][j][0] = xn[kt][j][1] = 0u;
      unsigned short const* xrow[NT];
      bool n_in[NT];
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        int const n = n0 + j * 8 + g;
        n_in[j] = n < p.N;
        xrow[j] = reinterpret_cast<unsigned short const*>(p.x) + std::int64_t(n_in[j] ? n : 0) * p.ldx;
      }
      auto load_x = [&](std::uint32_t(&dst)[KT][NT][2], int col) {
        int const k0 = col * BC + 2 * t4;
#pragma unroll
        for (int kt = 0; kt < KT; ++kt)
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            dst[kt][j][0] = detail::stream_x_pair(xrow[j], n_in[j], k0 + kt * 16, p.K, p.x_pair);
            dst[kt][j][1] = detail::stream_x_pair(xrow[j], n_in[j], k0 + kt * 16 + 8, p.K, p.x_pair);
          }
      };
      load_x(xf, __shfl_sync(FULL, mcol, 0));
      // ldmatrix row address of this lane inside an expanded sub-tile (see stream_expand64)
      int const loff = (lane & 15) * 32 + (((lane >> 4) ^ (lane >> 2)) & 1) * 16;

      for (int u = ta; u < tb; ++u) {
        if (u - mb >= 31) load_meta(u);
        int const j = u - mb;
        std::uint32_t const va = (__shfl_sync(FULL, moff, j) - B0) * 16u;
        std::uint32_t const vb = (__shfl_sync(FULL, moff, j + 1) - B0) * 16u;
        int const coln = __shfl_sync(FULL, mcol, (j + 1) & 31);  // the next unit's column (j + 1 <= 31)
        if constexpr (xd) {
          if (u + 1 < tb) load_x(xn, coln);
        }
        if constexpr (decode) {
#pragma unroll
          for (int i = 0; i < plan::unit / 512; ++i)
            reinterpret_cast<uint4*>(tile)[lane + 32 * i] = make_uint4(0u, 0u, 0u, 0u);
        }
        mma::cp_async_wait_dyn(issued - 1 - int((vb - 1) / C));  // this lane's pieces of the unit landed
        __syncwarp();                                            // ... and every lane's
        std::uint32_t nz = FULL;
        unsigned char const* abase;
        if constexpr (decode) {
          nz = detail::stream_expand64<R>(ring, va, tile, lane);
          __syncwarp();  // the record is read (ring free up to vb) and the tile written
          refill(vb);
          abase = reinterpret_cast<unsigned char const*>(tile);
        } else {
          abase = ring + (va & (R - 1));
        }
        // Branch-free: a k16 column's A fragments first, then its mma on MT independent
        // accumulators; an empty sub-tile's mma is predicated off (as the reference skips it:
        // no 0 * Inf from X).
#pragma unroll
        for (int kt = 0; kt < KT; ++kt) {
          std::uint32_t a[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            if constexpr (decode) {
              mma::ldmatrix_x4(a[mt], abase + 512 * (mt * KT + kt) + loff);
            } else {
              int const i = (mt * 16 + (lane & 15)) * CPR + kt * 2 + (lane >> 4);
              mma::ldmatrix_x4(a[mt], abase + 16 * tc_swizzle16(i));
            }
          }
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int jn = 0; jn < NT; ++jn) {
              if constexpr (decode)
                mma::mma_m16n8k16_if<T>((nz >> (2 * (mt * KT + kt))) & 1u, acc[mt][jn], a[mt], xf[kt][jn][0],
                                        xf[kt][jn][1]);
              else
                mma::mma_m16n8k16<T>(acc[mt][jn], a[mt], xf[kt][jn][0], xf[kt][jn][1]);
            }
        }
        __syncwarp();  // every lane's ldmatrix is done before the tile / ring is rewritten
        if constexpr (!decode) refill(vb);
        if constexpr (xd) {
#pragma unroll
          for (int kt = 0; kt < KT; ++kt)
#pragma unroll
            for (int jn = 0; jn < NT; ++jn) {
              xf[kt][jn][0] = xn[kt][jn][0];
              xf[kt][jn][1] = xn[kt][jn][1];
            }
        } else if (u + 1 < tb) {
          load_x(xf, coln);
        }

        if (u + 1 == cur_end || u + 1 == tb) {  // the end of panel cur's segment in this run
          bool const last = u + 1 == tb;
          bool const whole = cur_begin >= ta && cur_end <= tb;
          if (whole) {  // the panel lies in this run alone: final outputs from the registers
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
              for (int jn = 0; jn < NT; ++jn)
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                  int const gm = cur * BR + mt * 16 + g + 8 * (q >> 1), gn = n0 + jn * 8 + 2 * t4 + (q & 1);
                  if (gm < p.M && gn < p.N) store(gn, gm, acc[mt][jn][q]);
                  acc[mt][jn][q] = 0.f;
                }
          } else if (!last) {  // the run's first panel, begun before it: slot 0, kept in registers
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
              for (int jn = 0; jn < NT; ++jn)
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                  acc0[mt][jn][q] = acc[mt][jn][q];
                  acc[mt][jn][q] = 0.f;
                }
            has0 = true;
          } else {  // the last segment, continued after the run
            tail = true;
            tail_slot = cur == pa ? 0 : 1;
          }
          if (!last) {  // the next panel holding units (empty panels skipped)
            ++cur;
            while (ptr_at(cur + 1) <= u + 1) ++cur;
            cur_begin = ptr_at(cur);
            cur_end = ptr_at(cur + 1);
          }
        }
      }
      // Every group has landed and every lane is past its last read: the ring takes the
      // partial sums, [slot][n][m] floats.
      auto stash = [&](float const (&v)[MT][NT][4], int slot) {
        float* s = reinterpret_cast<float*>(ring) + slot * E;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int jn = 0; jn < NT; ++jn)
#pragma unroll
            for (int q = 0; q < 4; ++q)
              s[(jn * 8 + 2 * t4 + (q & 1)) * BR + mt * 16 + g + 8 * (q >> 1)] = v[mt][jn][q];
      };
      if (has0) {
        stash(acc0, 0);
        if (lane == 0) spanel[2 * warp] = pa;
      }
      if (tail) {
        stash(acc, tail_slot);
        if (lane == 0) spanel[2 * warp + tail_slot] = cur;
      }
    }
    __syncthreads();  // every warp's partial sums and panel ids are in shared memory

    // Panels split between warps: summed in warp order. Final when the panel lies in this block,
    // else this block's partial (slot 0: its first panel, 1: its last) for the fix-up below.
    int pend0 = -1, pend1 = -1;
    {
      int prev = -1;
      for (int k = 0; k < 2 * W; ++k) {
        int const pk = spanel[k];
        if (pk < 0 || pk == prev) continue;
        prev = pk;
        bool const whole = tr::ptr(p.src, pk) >= Ta && tr::ptr(p.src, pk + 1) <= Tb;
        float* const dst = p.partial + ((std::size_t(pass) * G + cta) * 2 + (pk == Pa ? 0 : 1)) * E;
        for (int el = tid; el < E; el += Cfg::threads) {
          float v = 0.f;
          for (int k2 = k; k2 < 2 * W; ++k2)
            if (spanel[k2] == pk) v += reinterpret_cast<float const*>(smem + (k2 >> 1) * R)[(k2 & 1) * E + el];
          int const gm = pk * BR + el % BR, gn = n0 + el / BR;
          if (!whole) __stcg(dst + el, v);
          else if (gm < p.M && gn < p.N) store(gn, gm, v);
        }
        if (!whole) (pend0 < 0 ? pend0 : pend1) = pk;
      }
    }
    // Panels split between blocks: the last block to arrive adds the partials in block order.
    if (pend0 >= 0) {  // block-uniform
      __threadfence();  // this block's partials are visible device-wide before its count
      __syncthreads();
      if (tid == 0) {
        flags[0] = atomicAdd(p.counters + std::size_t(pass) * p.panels + pend0, 1) == S[p.panel_cta + 2 * pend0 + 1] - 1;
        flags[1] = pend1 >= 0 &&
                   atomicAdd(p.counters + std::size_t(pass) * p.panels + pend1, 1) == S[p.panel_cta + 2 * pend1 + 1] - 1;
      }
      __syncthreads();
      for (int f = 0; f < 2; ++f) {
        int const pk = f == 0 ? pend0 : pend1;
        if (pk < 0 || !flags[f]) continue;
        __threadfence();
        float v[EPT];
#pragma unroll
        for (int r = 0; r < EPT; ++r) v[r] = 0.f;
        int const c0 = S[p.panel_cta + 2 * pk], cnt = S[p.panel_cta + 2 * pk + 1];
        for (int c = c0, seen = 0; seen < cnt; ++c) {
          if (S[p.warp_begin + c * W] == S[p.warp_begin + (c + 1) * W]) continue;  // a block without units
          ++seen;
          float const* src = p.partial + ((std::size_t(pass) * G + c) * 2 + (pk == S[p.cta_panel + c] ? 0 : 1)) * E;
#pragma unroll
          for (int r = 0; r < EPT; ++r)
            if (tid + r * Cfg::threads < E) v[r] += __ldcg(src + tid + r * Cfg::threads);
        }
#pragma unroll
        for (int r = 0; r < EPT; ++r) {
          int const el = tid + r * Cfg::threads;
          int const gm = pk * BR + el % BR, gn = n0 + el / BR;
          if (el < E && gm < p.M && gn < p.N) store(gn, gm, v[r]);
        }
        if (tid == 0) p.counters[std::size_t(pass) * p.panels + pk] = 0;  // ready for the next launch
      }
    }
    __syncthreads();  // the rings, panel ids and flags are reused by the next pass
  }

  // Panels without units: epi(0) in every row, every batch row.
  {
    int const e0 = int(std::int64_t(p.n_empty) * cta / G), e1 = int(std::int64_t(p.n_empty) * (cta + 1) / G);
    for (int i = e0; i < e1; ++i) {
      int const pk = S[p.empty + i];
      for (int el = tid; el < BR * p.N; el += Cfg::threads) {
        int const gm = pk * BR + el % BR, gn = el / BR;
        if (gm < p.M) store(gn, gm, 0.f);
      }
    }
  }
#else
  __trap();  // sm_80 and newer only: the plans refuse older GPUs before launching
#endif
}

}  // namespace sdnn::kernels
