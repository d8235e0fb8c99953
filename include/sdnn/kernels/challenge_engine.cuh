// sdnn/kernels/challenge_engine.cuh - depth-first Graph Challenge inference (issue 10): a block
// carries R input rows through consecutive layers while they sit in shared memory, reading the
// layers' weights from L2, and takes the next R rows from a device-side queue when none of its
// rows is live any more. No per-layer grid-wide pass, no per-layer host round trip, no 60000 x N
// activation matrix in global memory.
//
// Per layer l (weights: the representatives of the layer's classes of identical output columns,
// "folding"; a layer that does not fold has one class per column):
//   z[u][r] = sum over the class representative's inputs k, ascending, with y[k][r] != 0, of
//             y[k][r] * w (one float rounding for the product and one for the add: __fmul_rn /
//             __fadd_rn, the host reference's arithmetic and terms, so every weight, not only
//             exact ones, and even NaN or Inf weights, give the reference's bits)
//   y[j][r] = epi_challenge(z[class(j)][r])  for every output column j
// Rows whose output is all zero leave (dead: not a category). A row that is exactly the all-cap
// vector on entry to layer l leaves as a category when the plan proved that layers l..L-1 map
// all-cap to all-cap (suffix_fixed[l]). When a block has no live row left, it skips the
// remaining layers and takes the next rows. Rows still live after the last layer are categories.
//
// Shared memory: y as [N][R] (the R rows of one input neuron contiguous) and z as [D_max][R].
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/formats/csr.hpp"

namespace sdnn::kernels {

// The engine's layers on the device (every array is indexed through the per-layer bases).
struct challenge_engine_layers {
  std::int32_t layers = 0, n = 0, max_distinct = 0;
  std::int32_t const* distinct = nullptr;        // [L] classes D_l of layer l
  std::int64_t const* ptr_base = nullptr;        // [L] into col_ptr: D_l + 1 entries per layer
  std::int64_t const* nnz_base = nullptr;        // [L] into idx / val
  std::int64_t const* map_base = nullptr;        // [L] into class_of (N entries), -1: identity
  std::int32_t const* period = nullptr;          // [L] P > 0: class(j) = j mod P (no class_of read)
  std::int32_t const* col_ptr = nullptr;         // per class: [start, end) relative to nnz_base[l]
  std::int32_t const* idx = nullptr;             // input neuron k, ascending within a class
  float const* val = nullptr;                    // weight
  std::int32_t const* class_of = nullptr;        // output column j -> class
  std::uint8_t const* suffix_fixed = nullptr;    // [L + 1]: layers l..L-1 map all-cap to all-cap
};

// Counters the engine adds to (device, zeroed by the caller).
struct challenge_engine_counters {
  unsigned long long row_layers;      // sum over computed layers of the live rows in them
  unsigned long long layers_skipped;  // per block batch: layers not run because no row was live
  unsigned long long retired;         // rows that left as all-cap categories
  unsigned long long batches;         // block batches (groups of R rows)
};

namespace detail {

template <int R, int Threads>
__global__ void __launch_bounds__(Threads)
    challenge_engine_kernel(csr_view<float, std::int32_t> in, challenge_engine_layers net,
                            basic_epilogue<float> epi, float cap, int* queue, std::int32_t* category,
                            float* final_rows, challenge_engine_counters* counters) {
  static_assert(Threads % R == 0, "challenge_engine: the block's threads must be a multiple of R");
  extern __shared__ float smem[];
  std::int32_t const n = net.n;
  float* y = smem;                                      // [n][R]
  float* z = smem + static_cast<std::size_t>(n) * R;    // [max_distinct][R]
  __shared__ int s_base;
  __shared__ unsigned s_live, s_allcap;
  __shared__ int s_nz[R], s_ac[R];
  int const t = threadIdx.x;
  int const my_r = t % R;  // the row of every item this thread handles (Threads % R == 0)
  unsigned long long row_layers = 0, skipped = 0, retired = 0, batches = 0;

  for (;;) {
    if (t == 0) s_base = atomicAdd(queue, R);
    __syncthreads();
    int const base = s_base;
    if (base >= in.rows) break;
    ++batches;
    // Rows base .. base + R - 1 into shared memory (zero elsewhere), from the input CSR.
    for (std::int64_t i = t; i < static_cast<std::int64_t>(n) * R; i += Threads) y[i] = 0.f;
    __syncthreads();
    for (int r = 0; r < R; ++r) {
      int const row = base + r;
      if (row >= in.rows) break;
      for (std::int32_t p = in.row_ptr[row] + t; p < in.row_ptr[row + 1]; p += Threads)
        y[static_cast<std::size_t>(in.col_idx[p]) * R + r] = in.values[p];
    }
    if (t == 0) {
      unsigned live = 0;
      for (int r = 0; r < R; ++r) {
        int const row = base + r;
        if (row < in.rows && in.row_ptr[row + 1] > in.row_ptr[row]) live |= 1u << r;
      }
      s_live = live;
      s_allcap = 0;  // the inputs are not taken for all-cap rows: retirement starts after layer 1
    }
    __syncthreads();
    std::int32_t l = 0;
    for (; l < net.layers; ++l) {
      if (t == 0) {
        if (net.suffix_fixed[l] && (s_live & s_allcap)) {
          unsigned const go = s_live & s_allcap;
          retired += __popc(go);
          for (int r = 0; r < R; ++r)
            if (go >> r & 1u) category[base + r] = 1;
          s_live &= ~go;
        }
        for (int r = 0; r < R; ++r) {
          s_nz[r] = 0;
          s_ac[r] = 1;
        }
      }
      __syncthreads();
      unsigned const live = s_live;
      if (live == 0) break;
      if (t == 0) row_layers += __popc(live);
      bool const mine = live >> my_r & 1u;
      // z[u][r] for every class u of this layer.
      std::int32_t const d = net.distinct[l];
      std::int32_t const* cp = net.col_ptr + net.ptr_base[l];
      std::int32_t const* ix = net.idx + net.nnz_base[l];
      float const* vl = net.val + net.nnz_base[l];
      if (mine)
        for (std::int32_t i = t; i < d * R; i += Threads) {
          std::int32_t const u = i / R;
          std::int32_t const end = cp[u + 1];
          float acc = 0.f;
          // Eight (input, weight) pairs in flight at a time: the loads are independent, the sum
          // stays in ascending k (the reference's order).
          for (std::int32_t p0 = cp[u]; p0 < end; p0 += 8) {
            std::int32_t k[8];
            float w[8];
#pragma unroll
            for (int q = 0; q < 8; ++q) {
              k[q] = p0 + q < end ? ix[p0 + q] : 0;
              w[q] = p0 + q < end ? vl[p0 + q] : 0.f;
            }
#pragma unroll
            for (int q = 0; q < 8; ++q) {
              // Zero activations are skipped, as the reference skips them (it sums over the
              // stored entries of Y): with a NaN or Inf weight, 0 * w is NaN, not 0.
              float const yv = y[static_cast<std::size_t>(k[q]) * R + my_r];
              if (p0 + q < end && yv != 0.f) acc = __fadd_rn(acc, __fmul_rn(yv, w[q]));
            }
          }
          z[i] = acc;
        }
      __syncthreads();
      // y[j][r] = epi(z[class(j)][r]); per-row flags: any nonzero, all equal to the cap.
      std::int64_t const mb = net.map_base[l];
      std::int32_t const per = net.period[l];
      std::int32_t const* cls = mb >= 0 && per <= 0 ? net.class_of + mb : nullptr;
      bool const pow2 = per > 0 && (per & (per - 1)) == 0;
      if (mine) {
        bool nz = false, ac = true;
#pragma unroll 4
        for (std::int32_t i = t; i < n * R; i += Threads) {
          std::int32_t const j = i / R;
          std::int32_t const u = cls ? cls[j] : per > 0 ? (pow2 ? j & (per - 1) : j % per) : j;
          float const o = epi(z[static_cast<std::size_t>(u) * R + my_r], j);
          y[i] = o;
          nz |= o != 0.f;
          ac &= o == cap;
        }
        if (nz) atomicOr(&s_nz[my_r], 1);
        if (!ac) atomicAnd(&s_ac[my_r], 0);
      }
      __syncthreads();
      if (t == 0) {
        unsigned nzm = 0, acm = 0;
        for (int r = 0; r < R; ++r) {
          if (s_nz[r]) nzm |= 1u << r;
          if (s_ac[r]) acm |= 1u << r;
        }
        s_live = live & nzm;  // all-zero rows are dead (the epilogue keeps them zero)
        s_allcap = acm & s_live;
      }
      __syncthreads();
    }
    if (t == 0) skipped += static_cast<unsigned long long>(net.layers - l);
    __syncthreads();
    unsigned const survivors = s_live;
    if (t == 0)
      for (int r = 0; r < R; ++r)
        if (survivors >> r & 1u) category[base + r] = 1;
    if (final_rows) {
      // Survivors: their activations; retired rows: the cap (they are all-cap to the end);
      // dead rows stay as the caller zeroed them.
      for (std::int64_t i = t; i < static_cast<std::int64_t>(n) * R; i += Threads) {
        int const r = static_cast<int>(i % R);
        std::int64_t const j = i / R;
        int const row = base + r;
        if (row >= in.rows) continue;
        float* dst = final_rows + static_cast<std::int64_t>(row) * n + j;
        if (survivors >> r & 1u)
          *dst = y[i];
        else if (category[row])
          *dst = cap;
      }
    }
    __syncthreads();
  }
  if (t == 0) {
    atomicAdd(&counters->row_layers, row_layers);
    atomicAdd(&counters->layers_skipped, skipped);
    atomicAdd(&counters->retired, retired);
    atomicAdd(&counters->batches, batches);
  }
}

}  // namespace detail

// Shared memory bytes of one block of the engine with R rows.
inline std::size_t challenge_engine_smem(int rows_per_block, std::int32_t n, std::int32_t max_distinct) {
  return static_cast<std::size_t>(rows_per_block) * (static_cast<std::size_t>(n) + max_distinct) * sizeof(float);
}

// Runs the engine over every row of `in` (device CSR, N columns). category[row] (device, zeroed
// by the caller) becomes 1 for the categories; final_rows (device, rows x N, zeroed, optional)
// gets the final activations. queue (device int, zeroed) and counters (zeroed) are scratch.
template <int R, int Threads = 256>
void challenge_engine(csr_view<float, std::int32_t> in, challenge_engine_layers const& net, basic_epilogue<float> epi,
                      float cap, int* queue, std::int32_t* category, float* final_rows,
                      challenge_engine_counters* counters, cuda_exec exec) {
  if (in.rows == 0 || net.layers < 0) return;
  auto kernel = detail::challenge_engine_kernel<R, Threads>;
  std::size_t const smem = challenge_engine_smem(R, net.n, net.max_distinct);
  SDNN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  int per_sm = 0;
  SDNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Threads, smem));
  SDNN_EXPECTS(per_sm > 0, "challenge_engine: ", smem, " bytes of shared memory per block do not fit this GPU");
  std::int64_t const batches = (static_cast<std::int64_t>(in.rows) + R - 1) / R;
  std::int64_t const grid = std::min<std::int64_t>(batches, static_cast<std::int64_t>(sdnn::detail::sm_count()) * per_sm);
  kernel<<<static_cast<unsigned>(grid), Threads, smem, exec.stream>>>(in, net, epi, cap, queue, category, final_rows,
                                                                      counters);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace sdnn::kernels
