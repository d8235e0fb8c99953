// sdnn/challenge/kernel/engine.cuh - the depth-first Graph Challenge kernel: a team of T threads
// carries one input row through consecutive layers while its state sits in shared memory, reading
// the layers' weights from L2/L1, and takes the next row from a device-side queue as soon as its
// row has died, retired or passed the last layer (per-row refill: no row waits for another). No
// per-layer grid-wide pass, no per-layer host round trip, no rows x N activation matrix in global
// memory. Every output has the host reference's bits (docs/challenge.md#the-depth-first-engine).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/challenge/engine_layout.hpp"
#include "sdnn/formats/csr.hpp"

namespace sdnn::kernels {

// The engine's layers on the device.
struct challenge_engine_layers {
  std::int32_t layers = 0, n = 0, max_distinct = 0;
  challenge_engine_layer_desc const* desc = nullptr;  // [L]
  challenge_engine_slice const* slices = nullptr;     // per slice of 32 classes
  void const* terms = nullptr;                        // wide, compact or uniform (16-bit) terms
  float const* values = nullptr;                      // compact terms: each layer's distinct weights
  std::int32_t const* last_class = nullptr;           // [N]: class of output neuron j in layer L - 1
};

// Counters the engine adds to (device, zeroed by the caller).
struct challenge_engine_counters {
  unsigned long long row_layers;      // sum over rows of the layers computed for them
  unsigned long long layers_skipped;  // sum over rows of the layers not computed (dead or retired)
  unsigned long long retired;         // rows that left as all-cap categories
  unsigned long long rows;            // input rows taken from the queue (a row run again after an overflow: once)
};

// Where the team buffers live (chosen by the plan from the shared memory the GPU gives).
struct challenge_engine_scratch {
  bool state_shared = true;    // 2 x max_distinct floats per team
  bool input_shared = true;    // N floats per team (the dense input row of layer 0)
  float* global = nullptr;     // per team: (state_shared ? 0 : 2 * max_distinct) + (input_shared ? 0 : N)
  std::int64_t global_per_team = 0;
};

// One launch's share of the work: layers [first, end) for some rows. Resident weights: one pass,
// every layer, every input row. Streamed weights (challenge/engine.cuh): one pass per window
// of layers. A pass with first = 0 takes input rows: [row_begin, row_end), or the live_in_count
// rows listed in live_in; a later pass takes the live_in_count rows listed in live_in, row q's
// state after layer first - 1 at park_in + q x max_distinct. A row alive (not retired) after
// layer end - 1 < L - 1 is parked: at position p = live_out_count++, its id to live_out[p] and
// its state to park_out + p x max_distinct, when p < park_capacity; else (the park is full) a
// first-window row's id goes to overflow (overflow_count++) to be run again from its input, and
// its layers are not counted. A later pass reads at most park_capacity rows of its live_in (the
// count it is given also counts the overflow). net.terms holds terms from term_shift on.
// Parking stores the state's floats unchanged, so a row's values and the order of its terms are
// those of one pass; only where its state sits between two layers differs.
struct challenge_engine_pass {
  std::int32_t first = 0, end = 0;
  std::int64_t term_shift = 0;
  std::int32_t row_begin = 0, row_end = 0;
  std::int32_t const* live_in = nullptr;
  int const* live_in_count = nullptr;
  float const* park_in = nullptr;
  std::int32_t* live_out = nullptr;
  int* live_out_count = nullptr;
  float* park_out = nullptr;
  std::int32_t park_capacity = 0;  // a position at or past it is not written (the count still tells)
  std::int32_t* overflow = nullptr;
  int* overflow_count = nullptr;

  // The resident engine's one pass: every layer, every input row.
  static challenge_engine_pass whole(std::int32_t layers, std::int32_t rows) {
    challenge_engine_pass p;
    p.end = layers;
    p.row_end = rows;
    return p;
  }
};

// Teams per block for T threads per row: 4 warps (4 rows) per block for T = 32, else 1.
inline constexpr int challenge_engine_teams(int threads_per_row) { return threads_per_row == 32 ? 4 : 1; }

namespace detail {

// The team's synchronisation: a warp (T == 32) or the block (T > 32, one team per block).
template <int T>
struct engine_team {
  static __device__ void sync() { __syncthreads(); }
  static __device__ bool any(bool p) { return __syncthreads_or(p) != 0; }
  static __device__ bool all(bool p) { return __syncthreads_and(p) != 0; }
  static __device__ int rank() { return static_cast<int>(threadIdx.x); }
  static __device__ int id() { return 0; }
};
template <>
struct engine_team<32> {
  static __device__ void sync() { __syncwarp(); }
  static __device__ bool any(bool p) { return __any_sync(0xffffffffu, p) != 0; }
  static __device__ bool all(bool p) { return __all_sync(0xffffffffu, p) != 0; }
  static __device__ int rank() { return static_cast<int>(threadIdx.x & 31u); }
  static __device__ int id() { return static_cast<int>(threadIdx.x >> 5); }
};

// Term decoding: input k, weight, and whether the term is padding.
template <class Term>
struct engine_terms;
template <>
struct engine_terms<challenge_engine_term> {
  static __device__ __forceinline__ challenge_engine_term load(challenge_engine_term const* p) {
    int2 const v = __ldg(reinterpret_cast<int2 const*>(p));
    return {v.x, __int_as_float(v.y)};
  }
  static __device__ __forceinline__ challenge_engine_term empty() { return {-1, 0.f}; }
  static __device__ __forceinline__ bool used(challenge_engine_term v) { return v.k >= 0; }
  static __device__ __forceinline__ std::int32_t k(challenge_engine_term v) { return v.k; }
  static __device__ __forceinline__ float w(challenge_engine_term v, float const*) { return v.w; }
};
template <>
struct engine_terms<challenge_engine_compact_term> {
  static __device__ __forceinline__ std::uint32_t load(std::uint32_t const* p) { return __ldg(p); }
  static __device__ __forceinline__ std::uint32_t empty() { return challenge_engine_compact_empty << 16; }
  static __device__ __forceinline__ bool used(std::uint32_t v) { return (v >> 16) != challenge_engine_compact_empty; }
  static __device__ __forceinline__ std::int32_t k(std::uint32_t v) { return static_cast<std::int32_t>(v & 0xffffu); }
  static __device__ __forceinline__ float w(std::uint32_t v, float const* values) { return __ldg(values + (v >> 16)); }
};

// z = the sum of class u's terms, in order, skipping zero inputs and padding; terms fetched 8
// at a time (32 lanes x 8 consecutive rows of the slice), the next 8 in flight while these are
// summed.
template <class Term>
__device__ __forceinline__ float engine_class_sum(Term const* tm, int len, float const* src, float const* values) {
  using code = engine_terms<Term>;
  constexpr int C = 8;
  float acc = 0.f;
  Term cur[C];
#pragma unroll
  for (int q = 0; q < C; ++q) cur[q] = q < len ? code::load(tm + 32 * q) : code::empty();
  for (int p0 = 0; p0 < len; p0 += C) {
    Term nxt[C];
#pragma unroll
    for (int q = 0; q < C; ++q) nxt[q] = p0 + C + q < len ? code::load(tm + 32 * (p0 + C + q)) : code::empty();
    float yv[C], wv[C];
#pragma unroll
    for (int q = 0; q < C; ++q) {
      bool const on = code::used(cur[q]);
      yv[q] = on ? src[code::k(cur[q])] : 0.f;
      wv[q] = on ? code::w(cur[q], values) : 0.f;
    }
#pragma unroll
    for (int q = 0; q < C; ++q)
      if (yv[q] != 0.f) acc = __fadd_rn(acc, __fmul_rn(yv[q], wv[q]));
#pragma unroll
    for (int q = 0; q < C; ++q) cur[q] = nxt[q];
  }
  return acc;
}

// The fast path's sums for two classes at once (two independent chains; tb == nullptr: one
// class). ta, tb: the class's first group of 4 16-bit terms (challenge_engine_uniform_at; the
// next group is 128 terms on), read 8 bytes at a time, the next group in flight while this one
// is summed. Every weight is w, finite: a zero input adds 0 * w = +-0 to an accumulator that is
// never -0 (it starts at +0, and x + (-x) rounds to +0), which leaves it unchanged, so the
// reference's skip of zero inputs needs no test. len: a multiple of 4.
__device__ __forceinline__ void engine_uniform_sums(std::uint16_t const* ta, std::uint16_t const* tb, int len,
                                                    float const* src, float w, float& za, float& zb) {
  float a = 0.f, b = 0.f;
  auto const* ga = reinterpret_cast<uint2 const*>(ta);
  auto const* gb = reinterpret_cast<uint2 const*>(tb);
  uint2 ca = __ldg(ga), cb = tb ? __ldg(gb) : make_uint2(0u, 0u);
  for (int p0 = 0; p0 < len; p0 += 4) {
    bool const more = p0 + 4 < len;
    // 128 terms = 32 groups of 4 = 32 uint2 between a class's consecutive groups.
    uint2 const na = more ? __ldg(ga + 32 * ((p0 >> 2) + 1)) : make_uint2(0u, 0u);
    uint2 const nb = more && tb ? __ldg(gb + 32 * ((p0 >> 2) + 1)) : make_uint2(0u, 0u);
    float const ya0 = src[ca.x & 0xffffu], ya1 = src[ca.x >> 16], ya2 = src[ca.y & 0xffffu], ya3 = src[ca.y >> 16];
    float const yb0 = src[cb.x & 0xffffu], yb1 = src[cb.x >> 16], yb2 = src[cb.y & 0xffffu], yb3 = src[cb.y >> 16];
    a = __fadd_rn(a, __fmul_rn(ya0, w));
    b = __fadd_rn(b, __fmul_rn(yb0, w));
    a = __fadd_rn(a, __fmul_rn(ya1, w));
    b = __fadd_rn(b, __fmul_rn(yb1, w));
    a = __fadd_rn(a, __fmul_rn(ya2, w));
    b = __fadd_rn(b, __fmul_rn(yb2, w));
    a = __fadd_rn(a, __fmul_rn(ya3, w));
    b = __fadd_rn(b, __fmul_rn(yb3, w));
    ca = na;
    cb = nb;
  }
  za = a;
  zb = b;
}

// The engine. Per layer l the plan groups identical output neurons into D_l classes (folding;
// D_l = N without it) and rewrites layer l + 1's inputs k into class(l, k), so a row's state is
// D_l floats and layer l + 1 reads state[class(l, k)] where the reference reads y[k]:
//   layer 0:  z[u] = sum over the inputs k of class u's representative, ascending, with
//             x[k] != 0, of x[k] * w      (x: the input row, scattered into a dense scratch row)
//   layer l:  z[u] = sum over the terms (c, w) of class u, in the reference's k order, with
//             s[c] != 0, of s[c] * w      (s: the state after layer l - 1)
//   state[u] = epi(z[u])
// One float rounding per product and one per add (__fmul_rn / __fadd_rn): the host reference's
// arithmetic and terms, so every weight, even NaN or Inf, gives the reference's bits. Zero
// activations are skipped, as the reference sums only the stored entries of Y (0 * Inf would be
// NaN). A row whose state is all zero is dead (not a category); a row exactly all-cap on entry to
// layer l leaves as a category when the plan proved layers l..L-1 map all-cap to all-cap (the
// layer's challenge_engine_suffix_bit); rows alive after the last layer are categories.
// Teams: T = 32 (one warp per row, Teams warps per block, warp-level sync and votes) or T > 32
// (one row per block, __syncthreads_or/and votes). State: two buffers of max_distinct floats per
// team (ping-pong; one team barrier per layer separates a layer's reads from the next layer's
// writes), and the input row's dense scratch (N floats), each in shared memory or, when it does
// not fit, in a per-team slice of global scratch (challenge_engine_scratch).
// Passes = false: the resident engine's one pass (challenge_engine_pass::whole), with the
// window and park handling compiled out.
template <int T, int Teams, class Term, bool Passes>
__global__ void __launch_bounds__(T * Teams)
    challenge_engine_kernel(csr_view<float, std::int32_t> in, challenge_engine_layers net, basic_epilogue<float> epi,
                            float cap, int* queue, std::uint32_t* category, float* final_rows,
                            challenge_engine_scratch scratch, challenge_engine_counters* counters,
                            challenge_engine_pass pass) {
  static_assert(T == 32 || Teams == 1, "challenge_engine: teams larger than a warp take the whole block");
  using team = engine_team<T>;
  extern __shared__ float smem[];
  __shared__ int s_row[Teams], s_pos[Teams];
  std::int32_t const n = net.n, dmax = net.max_distinct;
  int const t = team::rank(), tid = team::id();
  // This team's buffers.
  std::size_t const per_team_shared =
      (scratch.state_shared ? 2 * static_cast<std::size_t>(dmax) : 0) + (scratch.input_shared ? static_cast<std::size_t>(n) : 0);
  float* sh = smem + per_team_shared * static_cast<std::size_t>(tid);
  float* gl = scratch.global ? scratch.global + scratch.global_per_team *
                                                    (static_cast<std::int64_t>(blockIdx.x) * Teams + tid)
                             : nullptr;
  float* st0;
  float* xin;
  if (scratch.state_shared) {
    st0 = sh;
    sh += 2 * static_cast<std::size_t>(dmax);
  } else {
    st0 = gl;
    gl += 2 * static_cast<std::int64_t>(dmax);
  }
  xin = scratch.input_shared ? sh : gl;
  float* const st1 = st0 + dmax;
  std::int32_t const L = net.layers;
  unsigned long long row_layers = 0, skipped = 0, retired = 0, rows = 0;
  for (std::int64_t i = t; i < n; i += T) xin[i] = 0.f;
  team::sync();

  std::int32_t const first = Passes ? pass.first : 0;
  std::int32_t const end = Passes ? pass.end : L;
  std::int64_t const term_shift = Passes ? pass.term_shift : 0;
  for (;;) {
    if (t == 0) {
      int const q = atomicAdd(queue, 1);
      s_pos[tid] = q;
      if (!Passes || (first == 0 && !pass.live_in))
        s_row[tid] = q < pass.row_end - pass.row_begin ? pass.row_begin + q : -1;
      else if (first == 0)  // rows waiting since an overflow (a list of input rows)
        s_row[tid] = q < *pass.live_in_count ? pass.live_in[q] : -1;
      else  // parked rows: the count of the pass that parked them, less its overflow
        s_row[tid] = q < min(*pass.live_in_count, pass.park_capacity) ? pass.live_in[q] : -1;
    }
    team::sync();
    int const row = s_row[tid];
    if (row < 0) break;
    int const q = s_pos[tid];
    std::int32_t p_begin = 0, p_end = 0;
    float const* src;
    float* dst;
    bool alive, allcap;
    if (!Passes || first == 0) {
      p_begin = in.row_ptr[row];
      p_end = in.row_ptr[row + 1];
      for (std::int32_t p = p_begin + t; p < p_end; p += T) xin[in.col_idx[p]] = in.values[p];
      team::sync();
      // Layer by layer; src: layer 0 the input row, then the previous layer's state.
      src = xin;
      dst = st0;
      alive = p_end > p_begin;  // an empty input row gives an all-zero layer 0: dead
      allcap = false;           // the inputs are not taken as all-cap: retirement starts after layer 0
    } else {
      // A parked row (alive after layer first - 1): its state from the park.
      float const* pk = pass.park_in + static_cast<std::int64_t>(q) * dmax;
      std::int32_t const dp = net.desc[first - 1].distinct & ~challenge_engine_suffix_bit;
      bool ac = true;
      for (std::int32_t u = t; u < dp; u += T) {
        float const v = pk[u];
        st0[u] = v;
        ac &= v == cap;
      }
      allcap = team::all(ac);
      team::sync();
      src = st0;
      dst = st1;
      alive = true;
    }
    bool left_retired = false;
    std::int32_t l = first, d_last = 0;
    for (; alive && l < end; ++l) {
      challenge_engine_layer_desc const dsc = net.desc[l];
      if (allcap && (dsc.distinct & challenge_engine_suffix_bit)) {
        left_retired = true;
        break;
      }
      std::int32_t const d = dsc.distinct & ~challenge_engine_suffix_bit;
      bool nz = false, ac = true;
      if constexpr (std::is_same_v<Term, challenge_engine_uniform_term>) {
        // Class u's terms from challenge_engine_uniform_at(term_base, len, u, 0); this thread's
        // classes in pairs.
        auto const* tu = static_cast<std::uint16_t const*>(net.terms);
        int const len = dsc.length;
        for (std::int32_t u = t; u < d; u += 2 * T) {
          std::int32_t const v = u + T;
          std::uint16_t const* ta = tu + challenge_engine_uniform_at(dsc.term_base - term_shift, len, u, 0);
          std::uint16_t const* tb =
              v < d ? tu + challenge_engine_uniform_at(dsc.term_base - term_shift, len, v, 0) : nullptr;
          float za, zb;
          engine_uniform_sums(ta, tb, len, src, dsc.weight, za, zb);
          float const oa = epi(za, u);
          dst[u] = oa;
          nz |= oa != 0.f;
          ac &= oa == cap;
          if (tb) {
            float const ob = epi(zb, v);
            dst[v] = ob;
            nz |= ob != 0.f;
            ac &= ob == cap;
          }
        }
      } else {
        challenge_engine_slice const* sl = net.slices + dsc.slice_base;
        Term const* tm = static_cast<Term const*>(net.terms) + (dsc.term_base - term_shift);
        float const* vals = net.values + dsc.value_base;
        for (std::int32_t u = t; u < d; u += T) {
          challenge_engine_slice const slice = sl[u >> 5];
          float const o = epi(engine_class_sum(tm + slice.offset + (u & 31), slice.length, src, vals), u);
          dst[u] = o;
          nz |= o != 0.f;
          ac &= o == cap;
        }
      }
      // One vote per flag; the votes are the team barrier between this layer's reads of src
      // and the next layer's writes to it.
      alive = team::any(nz);
      allcap = team::all(ac);
      if (l == 0) {
        // The input row's scratch back to zero for the next row (all reads of it are done).
        for (std::int32_t p = p_begin + t; p < p_end; p += T) xin[in.col_idx[p]] = 0.f;
      }
      src = dst;
      dst = dst == st0 ? st1 : st0;
      d_last = d;
    }
    if (l == 0)  // no layer ran (an empty input row, or no layers): nothing else cleared xin
      for (std::int32_t p = p_begin + t; p < p_end; p += T) xin[in.col_idx[p]] = 0.f;
    // l - first: the layers computed for this row in this pass (a dead row's last, all-zero,
    // layer included). A row alive after the pass's last layer, before the network's, is parked.
    bool const parked = Passes && alive && !left_retired && l < L;
    if (parked) {
      team::sync();  // every thread has read s_pos (q) before thread 0 reuses it
      if (t == 0) {
        int const p = atomicAdd(pass.live_out_count, 1);
        if (p < pass.park_capacity)
          pass.live_out[p] = row;
        else if (pass.overflow)  // no room: the row runs again, from its input, in a later group
          pass.overflow[atomicAdd(pass.overflow_count, 1)] = row;
        s_pos[tid] = p;
      }
      team::sync();
      int const p = s_pos[tid];
      if (p < pass.park_capacity) {
        float* pk = pass.park_out + static_cast<std::int64_t>(p) * dmax;
        for (std::int32_t u = t; u < d_last; u += T) pk[u] = src[u];
        row_layers += static_cast<unsigned long long>(l - first);
        if (first == 0) ++rows;
      }
      team::sync();  // src and s_pos read before the next row writes them
      continue;
    }
    row_layers += static_cast<unsigned long long>(l - first);
    if (first == 0) ++rows;
    skipped += static_cast<unsigned long long>(L - l);
    bool const category_row = left_retired || (alive && L > 0);
    if (t == 0) {
      if (category_row) atomicOr(category + (row >> 5), 1u << (row & 31));
      if (left_retired) ++retired;
    }
    if (final_rows && category_row) {
      float* dst_row = final_rows + static_cast<std::int64_t>(row) * n;
      if (left_retired)
        for (std::int32_t j = t; j < n; j += T) dst_row[j] = cap;
      else
        for (std::int32_t j = t; j < n; j += T) dst_row[j] = src[net.last_class[j]];
    }
    team::sync();  // xin cleared and src read before the next row writes them
  }
  if (t == 0) {
    atomicAdd(&counters->row_layers, row_layers);
    atomicAdd(&counters->layers_skipped, skipped);
    atomicAdd(&counters->retired, retired);
    atomicAdd(&counters->rows, rows);
  }
}

}  // namespace detail

// Threads per row the engine uses for at most max_distinct classes per layer: a warp up to 256
// classes, 128 threads up to 1024, else 512 (about 8 classes per thread; the kernels are
// instantiated for these three).
inline int challenge_engine_threads_for(std::int32_t max_distinct) {
  return max_distinct <= 256 ? 32 : max_distinct <= 1024 ? 128 : 512;
}

// Shared memory bytes per team.
inline std::size_t challenge_engine_team_smem(std::int32_t n, std::int32_t max_distinct, bool state_shared,
                                              bool input_shared) {
  return ((state_shared ? 2 * static_cast<std::size_t>(max_distinct) : 0) +
          (input_shared ? static_cast<std::size_t>(n) : 0)) *
         sizeof(float);
}

// Runs the engine's pass (challenge_engine_pass::whole: every layer over every row of `in`,
// device CSR, N columns). Bit row % 32 of category[row / 32] (device, zeroed by the caller) is
// set for the categories; final_rows (device, rows x N, zeroed, optional)
// gets the final activations. queue (device int, zeroed) and counters (zeroed) are scratch;
// scratch.global must hold grid_teams x global_per_team floats (challenge_engine_grid_teams).
template <int T, class Term>
void challenge_engine(csr_view<float, std::int32_t> in, challenge_engine_layers const& net, basic_epilogue<float> epi,
                      float cap, int* queue, std::uint32_t* category, float* final_rows,
                      challenge_engine_scratch scratch, std::int64_t grid_blocks, challenge_engine_counters* counters,
                      challenge_engine_pass const& pass, cuda_exec exec) {
  if (in.rows == 0 || net.layers < 0 || grid_blocks <= 0) return;
  constexpr int Teams = challenge_engine_teams(T);
  bool const whole = pass.first == 0 && pass.end == net.layers && !pass.live_in && pass.row_begin == 0 &&
                     pass.row_end == in.rows;
  auto kernel = whole ? detail::challenge_engine_kernel<T, Teams, Term, false>
                      : detail::challenge_engine_kernel<T, Teams, Term, true>;
  std::size_t const smem =
      challenge_engine_team_smem(net.n, net.max_distinct, scratch.state_shared, scratch.input_shared) * Teams;
  ::sdnn::detail::allow_dynamic_smem(kernel, smem);
  kernel<<<static_cast<unsigned>(grid_blocks), T * Teams, smem, exec.stream>>>(in, net, epi, cap, queue, category,
                                                                              final_rows, scratch, counters, pass);
  SDNN_CUDA_CHECK_LAUNCH();
}

// Blocks of the persistent grid: as many as fit on the GPU at once, at most one team per row.
template <int T, class Term>
std::int64_t challenge_engine_grid(std::int64_t rows, std::int32_t n, std::int32_t max_distinct,
                                   challenge_engine_scratch const& scratch) {
  constexpr int Teams = challenge_engine_teams(T);
  auto kernel = detail::challenge_engine_kernel<T, Teams, Term, false>;
  std::size_t const smem = challenge_engine_team_smem(n, max_distinct, scratch.state_shared, scratch.input_shared) * Teams;
  ::sdnn::detail::allow_dynamic_smem(kernel, smem);
  int per_sm = 0;
  SDNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, T * Teams, smem));
  SDNN_EXPECTS(per_sm > 0, "challenge_engine: ", smem, " bytes of shared memory per block do not fit this GPU");
  std::int64_t const want = (rows + Teams - 1) / Teams;
  return std::min<std::int64_t>(std::max<std::int64_t>(want, 1),
                                static_cast<std::int64_t>(sdnn::detail::sm_count()) * per_sm);
}

}  // namespace sdnn::kernels
