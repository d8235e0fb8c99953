// sdnn/linear/kernel/tc_spmm.cuh - the tensor-core linear kernel Y = epi(X W^T), W M x K (dense,
// block-sparse or tile_offsets), X N x K, Y N x M, 16-bit inputs, float accumulation: one body
// (tc_spmm_kernel) for every weight source, X operand and value type. A weight source is a
// mainloop part: the k-blocks of a panel of BM rows, the copy of one into shared memory, its mma
// A fragments. An X operand fills the matching X tile: dense rows, or a convolution's NHWC input
// read as its implicit im2col matrix. W is the A operand and X the B operand, both K-contiguous
// (native), so the batch sits on the n8 side and a C fragment is a tile of Y^T, stored transposed
// through shared memory. K may be split across thread blocks; the last block of a tile sums the
// partials in split order (deterministic).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/fast_divmod.hpp"
#include "sdnn/core/numeric.cuh"
#include "sdnn/formats/tile_offsets.hpp"
#include "sdnn/linear/arch/mma.cuh"
#include "sdnn/linear/arch/tc_x_operand.cuh"

namespace sdnn::kernels {

// What a weight source tells the pipeline about one k-block of a panel.
struct tc_kblock {
  std::int32_t col = 0;      // k-block column: the block covers k in [col * BK, col * BK + BK)
  std::uint32_t begin = 0;   // source-specific: block index (block-sparse) or record start (16 B units)
  std::uint32_t end = 0;     // record end (tile_offsets)
};

// ---- weight sources --------------------------------------------------------------------------

// Dense W: every k-block of every panel. Invariant (the plan pads W): ldw % 8 == 0, w 16-byte
// aligned and zero in columns [K, ldw), so a 16-byte piece of a row lies wholly inside or outside.
template <class T>
struct tc_dense_source {
  T const* w = nullptr;
  std::int64_t ldw = 0;
  std::int32_t rows = 0, cols = 0;  // M, K

  static constexpr bool variable_bytes = false;
  template <class Cfg>
  __device__ void range(int, int& b0, int& b1) const {
    b0 = 0;
    b1 = (cols + Cfg::BK - 1) / Cfg::BK;
  }
  __device__ tc_kblock load(int b) const { return {b, std::uint32_t(b), 0}; }
  template <class Cfg>
  __device__ static constexpr int bytes(tc_kblock const&) {
    return Cfg::BM * Cfg::LDS * 2;
  }
  // W rows [panel * BM, +BM), columns [col * BK, +BK) -> [BM][LDS] in shared memory.
  template <class Cfg>
  __device__ void issue(tc_kblock const& kb, int panel, unsigned char* dst, int tid) const {
    constexpr int pieces = Cfg::BK / 8;
    auto* s = reinterpret_cast<std::uint16_t*>(dst);
    for (int i = tid; i < Cfg::BM * pieces; i += Cfg::threads) {
      int const r = i / pieces, c = (i % pieces) * 8;
      std::int64_t const m = std::int64_t(panel) * Cfg::BM + r, k = std::int64_t(kb.col) * Cfg::BK + c;
      bool const in = m < rows && k < ldw;
      mma::cp_async_16(s + r * Cfg::LDS + c, in ? static_cast<void const*>(w + m * ldw + k) : w, in ? 16 : 0);
    }
  }
};

// Block-sparse W with br x bc = BM x BK blocks: the stored blocks of block row `panel`. The
// plan stores each block's 16-byte pieces swizzled (piece i at i ^ ((i / 8) % 8), as the
// streaming kernel reads them, tc_stream.cuh); issue() puts them back in row order.
template <class T>
struct tc_block_source {
  std::int32_t const* row_ptr = nullptr;
  std::int32_t const* col_idx = nullptr;
  T const* values = nullptr;

  static constexpr bool variable_bytes = false;
  template <class Cfg>
  __device__ void range(int panel, int& b0, int& b1) const {
    b0 = __ldg(row_ptr + panel);
    b1 = __ldg(row_ptr + panel + 1);
  }
  __device__ tc_kblock load(int b) const { return {__ldg(col_idx + b), std::uint32_t(b), 0}; }
  template <class Cfg>
  __device__ static constexpr int bytes(tc_kblock const&) {
    return Cfg::BM * Cfg::LDS * 2;
  }
  // Block kb.begin (BM * BK contiguous elements, row-major) -> [BM][LDS].
  template <class Cfg>
  __device__ void issue(tc_kblock const& kb, int, unsigned char* dst, int tid) const {
    constexpr int pieces = Cfg::BK / 8;
    auto* s = reinterpret_cast<std::uint16_t*>(dst);
    T const* blk = values + std::int64_t(kb.begin) * (Cfg::BM * Cfg::BK);
    for (int i = tid; i < Cfg::BM * pieces; i += Cfg::threads) {
      int const r = i / pieces, c = (i % pieces) * 8;
      mma::cp_async_16(s + r * Cfg::LDS + c, blk + 8 * (i ^ ((i >> 3) & 7)));  // piece i = r * pieces + c / 8
    }
  }
};

// The plans store each tile_offsets position byte q (row * 16 + column in its 16 x 16 sub-tile)
// as q ^ ((q >> 3) & 8): rows 4-7 and 12-15 swap the column halves, which is where the streaming
// kernel's conflict-free sub-tile layout puts them (tc_stream.cuh). The map is its own inverse.
__host__ __device__ constexpr unsigned tc_pos_swizzle(unsigned q) { return q ^ ((q >> 3) & 8u); }

// tile_offsets W with tile_rows x tile_cols = BM x BK: the stored tiles of tile row `panel`,
// each record copied as it is (16-byte pieces).
template <class T>
struct tc_tile_offsets_source {
  std::int32_t const* tile_ptr = nullptr;
  std::int32_t const* tile_col = nullptr;
  std::uint32_t const* tile_offset = nullptr;
  std::uint8_t const* data = nullptr;

  static constexpr bool variable_bytes = true;
  template <class Cfg>
  __device__ void range(int panel, int& b0, int& b1) const {
    b0 = __ldg(tile_ptr + panel);
    b1 = __ldg(tile_ptr + panel + 1);
  }
  __device__ tc_kblock load(int b) const {
    return {__ldg(tile_col + b), __ldg(tile_offset + b), __ldg(tile_offset + b + 1)};
  }
  template <class Cfg>
  __device__ static int bytes(tc_kblock const& kb) {
    return int(kb.end - kb.begin) * 16;
  }
  template <class Cfg>
  __device__ void issue(tc_kblock const& kb, int, unsigned char* dst, int tid) const {
    int const n = int(kb.end - kb.begin);
    unsigned char const* src = data + std::size_t(kb.begin) * 16;
    for (int i = tid; i < n; i += Cfg::threads) mma::cp_async_16(dst + 16 * i, src + 16 * i);
  }
  // The largest record of a BM x BK tile (every element stored).
  template <class Cfg>
  static constexpr int max_record_bytes() {
    return int(tile_record::total_bytes((Cfg::BM / 16) * (Cfg::BK / 16), Cfg::BM * Cfg::BK, 2));
  }
};

template <class S>
inline constexpr bool is_tile_offsets_source_v = false;
template <class T>
inline constexpr bool is_tile_offsets_source_v<tc_tile_offsets_source<T>> = true;

// ---- the kernel --------------------------------------------------------------------------------

template <class T, class Source, class XSrc = tc_rows_x<T>>
struct tc_spmm_params {
  Source src;
  XSrc xs;                       // the N x K operand
  void* y = nullptr;             // [N x ldy] of T, or of float when y_float
  std::int64_t ldy = 0;
  bool y_float = false;
  bool y_vec = false;            // y 16-byte aligned, ldy % 8 == 0 and M % 8 == 0: eight outputs a store
  std::int32_t M = 0, N = 0, K = 0;
  basic_epilogue<float> epi{};
  std::int32_t panels = 0, ntiles = 0, splits = 1;
  float* partial = nullptr;      // [splits][N][M] when splits > 1
  std::int32_t* counters = nullptr;  // [panels * ntiles], zero between launches (the last block resets its own)
};

// Shared-memory plan of one instantiation (host and device agree on it).
template <class Cfg, class Source>
struct tc_smem {
  static constexpr bool tiles = is_tile_offsets_source_v<Source>;
  // The W ring: Stages fixed-size slots, or (tile_offsets) room for Stages / 2 of the largest records.
  static constexpr int ring_bytes() {
    if constexpr (tiles) {
      int const r = Source::template max_record_bytes<Cfg>();
      return r * (Cfg::Stages / 2 > 1 ? Cfg::Stages / 2 : 1);
    } else {
      return Cfg::Stages * Cfg::BM * Cfg::LDS * 2;
    }
  }
  static constexpr int x_slot_bytes = Cfg::BN * Cfg::LDS * 2;
  static constexpr int mainloop_bytes = ring_bytes() + Cfg::Stages * x_slot_bytes;
  static constexpr int ctile_ld = Cfg::BM + 4;  // [BN][BM + 4] floats: conflict-free transposed writes
  static constexpr int ctile_bytes = Cfg::BN * ctile_ld * 4;
  static constexpr int shared_bytes = mainloop_bytes > ctile_bytes ? mainloop_bytes : ctile_bytes;
  static constexpr int scratch_ld = 24;  // a warp's 16 x 16 expansion tile, rows padded to 48 bytes
  static constexpr int scratch_bytes = tiles ? Cfg::warps * Cfg::MT * 16 * scratch_ld * 2 : 0;
  // The k-blocks of a thread block's range, read once at the start when there are at most
  // meta_max of them (else read one issue ahead from global memory).
  static constexpr int meta_max = 256;
  static constexpr int meta_bytes = meta_max * int(sizeof(tc_kblock));
  static constexpr int misc_bytes = Cfg::Stages * 4 + 16;
  static constexpr int total = shared_bytes + scratch_bytes + meta_bytes + misc_bytes;
};

namespace detail {
template <class T>
__device__ __forceinline__ void store_out(void* y, bool y_float, std::int64_t idx, float v) {
  if (y_float) static_cast<float*>(y)[idx] = v;
  else if constexpr (std::is_same_v<T, bf16>) static_cast<__nv_bfloat16*>(y)[idx] = __float2bfloat16_rn(v);
  else static_cast<__half*>(y)[idx] = __float2half_rn(v);
}

// A fragments of a warp's MT m16 tiles for k16 step ks; nz[mt] false: the tile is zero (skip its mma).
template <class Cfg, class Source>
__device__ __forceinline__ void load_a(unsigned char const* wdata, int wm, int ks, int lane, std::uint16_t* scratch,
                                       std::uint32_t (&a)[Cfg::MT][4], bool (&nz)[Cfg::MT]) {
  if constexpr (!is_tile_offsets_source_v<Source>) {
    auto const* s = reinterpret_cast<std::uint16_t const*>(wdata);
#pragma unroll
    for (int mt = 0; mt < Cfg::MT; ++mt) {
      int const row = wm * Cfg::WM + mt * 16 + (lane & 15), col = ks * 16 + (lane >> 4) * 8;
      mma::ldmatrix_x4(a[mt], s + row * Cfg::LDS + col);
      nz[mt] = true;
    }
  } else {
    // The record: uint16 start[S + 1], values, positions (formats/tile_offsets.hpp). Sub-tile
    // (r16, c16) is number r16 * (BK / 16) + c16. Each warp expands its own sub-tiles into its
    // own 16 x 16 scratch tile: only __syncwarp between zeroing, scattering and ldmatrix.
    constexpr int S = (Cfg::BM / 16) * (Cfg::BK / 16);
    constexpr int ld = tc_smem<Cfg, Source>::scratch_ld;
    auto const* start = reinterpret_cast<std::uint16_t const*>(wdata);
    unsigned const nnz = start[S];
    auto const* vals = reinterpret_cast<std::uint16_t const*>(wdata + tile_record::header_bytes(S));
    auto const* pos = wdata + tile_record::header_bytes(S) + tile_record::value_bytes(nnz, 2);
#pragma unroll
    for (int mt = 0; mt < Cfg::MT; ++mt) {
      int const sub = (wm * Cfg::MT + mt) * (Cfg::BK / 16) + ks;
      unsigned const b = start[sub], e = start[sub + 1];
      nz[mt] = b != e;
      if (b == e) continue;  // warp-uniform
      std::uint16_t* t = scratch + mt * 16 * ld;
      __syncwarp();  // the previous ldmatrix of this scratch tile is done in every lane
      *reinterpret_cast<uint4*>(t + (lane >> 1) * ld + (lane & 1) * 8) = make_uint4(0, 0, 0, 0);
      __syncwarp();
      for (unsigned i = b + lane; i < e; i += 32) {
        unsigned const q = tc_pos_swizzle(pos[i]);  // back to row * 16 + column
        t[(q >> 4) * ld + (q & 15)] = vals[i];
      }
      __syncwarp();
      mma::ldmatrix_x4(a[mt], t + (lane & 15) * ld + (lane >> 4) * 8);
    }
  }
}
}  // namespace detail

// One thread block: panel (BM rows of W), n-tile (BN rows of X), split (a share of the panel's
// k-blocks). grid.x = ntiles * splits * panels, n-tile fastest (the n-tiles of a panel run
// together and share its weights through L2).
template <class Cfg, class T, class Source, class XSrc = tc_rows_x<T>>
__global__ void __launch_bounds__(Cfg::threads) tc_spmm_kernel(tc_spmm_params<T, Source, XSrc> p) {
#if SDNN_MMA_SYNC_ARCH
  using smem_plan = tc_smem<Cfg, Source>;
  constexpr int RING = smem_plan::ring_bytes();
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned char* ring = smem;
  auto* xs = reinterpret_cast<std::uint16_t*>(smem + RING);
  auto* scratch_all = reinterpret_cast<std::uint16_t*>(smem + smem_plan::shared_bytes);
  auto* meta = reinterpret_cast<tc_kblock*>(smem + smem_plan::shared_bytes + smem_plan::scratch_bytes);
  auto* vstart = reinterpret_cast<int*>(smem + smem_plan::shared_bytes + smem_plan::scratch_bytes + smem_plan::meta_bytes);
  int* last_flag = vstart + Cfg::Stages;

  int const tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int const wm = warp % Cfg::WarpsM, wn = (warp / Cfg::WarpsM) % Cfg::WarpsN, wk = warp / (Cfg::WarpsM * Cfg::WarpsN);
  int const ntile = blockIdx.x % p.ntiles, rest = blockIdx.x / p.ntiles;
  int const split = rest % p.splits, panel = rest / p.splits;
  int const n0 = ntile * Cfg::BN, m0 = panel * Cfg::BM;
  auto const xstate = p.xs.template start<Cfg>(n0, p.N, tid);
  std::uint16_t* scratch = scratch_all + warp * Cfg::MT * 16 * smem_plan::scratch_ld;

  int b0, b1;
  p.src.template range<Cfg>(panel, b0, b1);
  {
    int const nb_all = b1 - b0;
    int const s0 = b0 + int(std::int64_t(nb_all) * split / p.splits);
    b1 = b0 + int(std::int64_t(nb_all) * (split + 1) / p.splits);
    b0 = s0;
  }
  int const nb = b1 - b0;
  bool const meta_in_smem = nb <= smem_plan::meta_max;  // uniform
  if (meta_in_smem) {
    for (int j = tid; j < nb; j += Cfg::threads) meta[j] = p.src.load(b0 + j);  // all in flight at once
    __syncthreads();
  }
  auto kblock = [&](int j) { return meta_in_smem ? meta[j] : p.src.load(b0 + j); };

  float acc[Cfg::MT][Cfg::NT][4];
#pragma unroll
  for (int i = 0; i < Cfg::MT; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::NT; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.f;

  // Pipeline state, identical in every thread (uniform control flow). k-block j (0-based in this
  // split) occupies ring bytes [vstart, vstart + bytes) in virtual (unwrapped) positions; it is
  // placed at vhead, or at the next multiple of RING when it would straddle the end. Invariants:
  // the in-flight k-blocks are done .. issued-1 (at most Stages), their bytes and the gaps
  // between them span at most RING virtual bytes, and k-block j's X tile is in slot j % Stages.
  int issued = 0, vhead = 0, vtail = 0;
  tc_kblock next{};  // the k-block `issued`, read one issue ahead
  if (nb > 0) next = kblock(0);
  auto try_issue = [&](int done) {
    while (issued < nb && issued - done < Cfg::Stages) {
      int const bytes = Source::template bytes<Cfg>(next);
      int start = vhead;
      int const phys = start % RING;
      if (phys + bytes > RING) start += RING - phys;
      if (start + bytes - vtail > RING) break;
      int const slot = issued % Cfg::Stages;
      if (tid == 0) vstart[slot] = start;
      p.src.template issue<Cfg>(next, panel, ring + (start % RING), tid);
      p.xs.template issue<Cfg>(xstate, next.col * Cfg::BK, p.K, xs + slot * (smem_plan::x_slot_bytes / 2), tid);
      mma::cp_async_commit();
      vhead = start + bytes;
      ++issued;
      if (issued < nb) next = kblock(issued);
    }
  };

  try_issue(0);
  for (int done = 0; done < nb; ++done) {
    if (issued == done) {  // k-block `done` did not fit beside done-1: wait until the ring is empty
      __syncthreads();     // every warp has finished with done-1
      vhead = vtail = 0;
      try_issue(done);     // an empty ring holds any k-block (RING >= the largest)
    }
    mma::cp_async_wait_dyn(issued - done - 1);
    __syncthreads();  // k-block `done` is in shared memory for all; all warps are past done-1
    int const slot = done % Cfg::Stages;
    int const vs = vstart[slot];
    vtail = vs;        // everything before k-block `done` is free
    try_issue(done);   // refill, possibly over done-1
    unsigned char const* wdata = ring + (vs % RING);
    std::uint16_t const* xt = xs + slot * (smem_plan::x_slot_bytes / 2);
#pragma unroll
    for (int ks = wk; ks < Cfg::KSteps; ks += Cfg::WarpsK) {
      std::uint32_t a[Cfg::MT][4];
      bool nz[Cfg::MT];
      detail::load_a<Cfg, Source>(wdata, wm, ks, lane, scratch, a, nz);
      std::uint32_t b[Cfg::NT][2];
#pragma unroll
      for (int np = 0; np < Cfg::NT / 2; ++np) {
        int const row = wn * Cfg::WN + np * 16 + (lane & 7) + ((lane >> 4) << 3);
        int const col = ks * 16 + ((lane >> 3) & 1) * 8;
        std::uint32_t r[4];
        mma::ldmatrix_x4(r, xt + row * Cfg::LDS + col);
        b[2 * np][0] = r[0];
        b[2 * np][1] = r[1];
        b[2 * np + 1][0] = r[2];
        b[2 * np + 1][1] = r[3];
      }
#pragma unroll
      for (int mt = 0; mt < Cfg::MT; ++mt) {
        if (!nz[mt]) continue;
#pragma unroll
        for (int nt = 0; nt < Cfg::NT; ++nt) mma::mma_m16n8k16<T>(acc[mt][nt], a[mt], b[nt][0], b[nt][1]);
      }
    }
  }
  mma::cp_async_wait<0>();
  __syncthreads();  // the main loop's shared memory becomes the C tile

  // C tile [BN][BM + 4] (Y^T transposed back: n major), the WarpsK partial sums added in warp order.
  float* ct = reinterpret_cast<float*>(smem);
  constexpr int cld = smem_plan::ctile_ld;
  int const g = lane >> 2, t4 = lane & 3;
  for (int kk = 0; kk < Cfg::WarpsK; ++kk) {
    if (wk == kk) {
#pragma unroll
      for (int mt = 0; mt < Cfg::MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < Cfg::NT; ++nt)
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            int const m = wm * Cfg::WM + mt * 16 + g + (q >> 1) * 8, n = wn * Cfg::WN + nt * 8 + 2 * t4 + (q & 1);
            float* c = ct + n * cld + m;
            *c = kk == 0 ? acc[mt][nt][q] : *c + acc[mt][nt][q];
          }
    }
    __syncthreads();
  }

  // Stores along m (contiguous in Y): every in-range element of the tile exactly once.
  if (p.splits == 1 && p.y_vec) {  // eight consecutive m a thread: all in range or none (M % 8 == 0)
    constexpr int G = Cfg::BM / 8;
    for (int i = tid; i < Cfg::BN * G; i += Cfg::threads) {
      int const n = i / G, m = (i % G) * 8, gn = n0 + n, gm = m0 + m;
      if (gn >= p.N || gm >= p.M) continue;
      float v[8];
      float4 const lo = *reinterpret_cast<float4 const*>(ct + n * cld + m);  // cld % 4 == 0: aligned
      float4 const hi = *reinterpret_cast<float4 const*>(ct + n * cld + m + 4);
      v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = p.epi(v[e], gm + e);
      std::int64_t const at = std::int64_t(gn) * p.ldy + gm;
      if (p.y_float) {
        auto* d = reinterpret_cast<float4*>(static_cast<float*>(p.y) + at);
        d[0] = make_float4(v[0], v[1], v[2], v[3]);
        d[1] = make_float4(v[4], v[5], v[6], v[7]);
      } else {
        uint4 q;
        q.x = pack2_float<T>(v[0], v[1]);
        q.y = pack2_float<T>(v[2], v[3]);
        q.z = pack2_float<T>(v[4], v[5]);
        q.w = pack2_float<T>(v[6], v[7]);
        *reinterpret_cast<uint4*>(static_cast<T*>(p.y) + at) = q;
      }
    }
    return;
  }
  if (p.splits == 1) {
    for (int i = tid; i < Cfg::BN * Cfg::BM; i += Cfg::threads) {
      int const n = i / Cfg::BM, m = i % Cfg::BM, gn = n0 + n, gm = m0 + m;
      if (gn < p.N && gm < p.M) detail::store_out<T>(p.y, p.y_float, std::int64_t(gn) * p.ldy + gm, p.epi(ct[n * cld + m], gm));
    }
    return;
  }
  std::size_t const plane = std::size_t(p.N) * p.M;
  float* mine = p.partial + split * plane;
  for (int i = tid; i < Cfg::BN * Cfg::BM; i += Cfg::threads) {
    int const n = i / Cfg::BM, m = i % Cfg::BM, gn = n0 + n, gm = m0 + m;
    if (gn < p.N && gm < p.M) __stcg(mine + std::size_t(gn) * p.M + gm, ct[n * cld + m]);
  }
  __threadfence();  // the partial is visible device-wide before the count says so
  __syncthreads();
  std::int32_t* counter = p.counters + panel * p.ntiles + ntile;
  if (tid == 0) *last_flag = atomicAdd(counter, 1) == p.splits - 1;
  __syncthreads();
  if (!*last_flag) return;
  __threadfence();
  // The last block of this tile: sum the splits in order 0 .. splits-1, whichever came last.
  for (int i = tid; i < Cfg::BN * Cfg::BM; i += Cfg::threads) {
    int const n = i / Cfg::BM, m = i % Cfg::BM, gn = n0 + n, gm = m0 + m;
    if (gn >= p.N || gm >= p.M) continue;
    float s = 0.f;
    for (int z = 0; z < p.splits; ++z) s += __ldcg(p.partial + z * plane + std::size_t(gn) * p.M + gm);
    detail::store_out<T>(p.y, p.y_float, std::int64_t(gn) * p.ldy + gm, p.epi(s, gm));
  }
  if (tid == 0) *counter = 0;  // ready for the next launch
#else
  __trap();  // sm_80 and newer only: the plans refuse older GPUs before launching
#endif
}

}  // namespace sdnn::kernels
