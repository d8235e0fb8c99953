// sdnn/linear/kernel/spmm_csr_panels.cuh - CSR SpMM with A re-ordered into panels at plan time
// and B staged through shared memory (policy::csr_panels<RowsPerWarp, KChunk>).
//
//   C[M x N] = epi(A_csr[M x K] * B[K x N]), B and C row-major, T = float or a 16-bit type
//   (float accumulation).
//
// The panel-ordered copy of A (class csr_panels, built on the device at plan time), the
// kernel and its launcher. Why panels, and the panel format: docs/linear.md#csr-panels.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cub/device/device_radix_sort.cuh>
#include <thrust/binary_search.h>
#include <thrust/execution_policy.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cstdint>
#include <type_traits>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/numeric.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/linear/kernel/spmm_csr.cuh"

namespace sdnn::kernels {

// Read-only device view of a panel-ordered CSR: A's nonzeros sorted by segment (row block,
// chunk, warp) and, inside a segment, by (row, column). Each entry is 8 bytes {row in warp
// << 16 | byte offset of its B row in the tile, value as float bits}; every segment ends with
// one sentinel {0xffffffff, 0}; offsets[s] is where segment s starts.
struct csr_panels_view {
  std::int64_t rows = 0, cols = 0;
  std::int64_t row_blocks = 0, chunks = 0;
  uint2 const* entries = nullptr;     // [nnz + row_blocks * chunks * 8]
  std::int32_t const* offsets = nullptr;  // [row_blocks * chunks * 8 + 1]
};

namespace detail {

constexpr int panel_warps = 8;

// Entries a block stages per chunk: enough for 25 % density of the block's rows x chunk; a
// denser chunk is read from global memory instead (same result, slower).
template <int RW, int KC>
inline constexpr int panel_capacity = ((panel_warps * RW * KC / 4 + panel_warps) + 1) / 2 * 2;

// Bytes of one B tile row: 32 lanes x U vectors of 16 bytes.
template <int U>
inline constexpr int panel_row_bytes = 32 * 16 * U;

template <int RW, int KC, int U>
inline constexpr std::size_t panel_smem_bytes =
    2 * static_cast<std::size_t>(KC) * panel_row_bytes<U> +
    2 * sizeof(uint2) * static_cast<std::size_t>(panel_capacity<RW, KC>);

__device__ SDNN_FORCEINLINE void cp_async_16(void* smem, void const* gmem, int src_bytes) {
  unsigned const s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}
__device__ SDNN_FORCEINLINE void cp_async_8(void* smem, void const* gmem) {
  unsigned const s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(gmem));
}
__device__ SDNN_FORCEINLINE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ SDNN_FORCEINLINE void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// B[k][lane's V columns] from a shared tile row, widened to float.
template <class T, int V>
__device__ SDNN_FORCEINLINE void shared_vec16(T const* p, float (&x)[V]) {
  if constexpr (std::is_same_v<T, float>) {
    float4 const q = *reinterpret_cast<float4 const*>(p);
    x[0] = q.x, x[1] = q.y, x[2] = q.z, x[3] = q.w;
  } else {
    uint4 const q = *reinterpret_cast<uint4 const*>(p);
    unsigned const w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float2 const f = unpack2_float<T>(w[i]);
      x[2 * i] = f.x, x[2 * i + 1] = f.y;
    }
  }
}

// One warp's entries of one chunk (sorted by row in warp, sentinel-terminated). `tile` is
// the lane's first vector in the B tile (byte address); entry byte offsets select the row.
template <class T, int RW, int U, int V>
__device__ SDNN_FORCEINLINE void panel_fma(uint2 e, unsigned char const* tile, float (&acc)[U * V]) {
  float const v = __uint_as_float(e.y);
  unsigned char const* const p = tile + (e.x & 0xffffu);
#pragma unroll
  for (int u = 0; u < U; ++u) {
    float x[V];
    shared_vec16<T, V>(reinterpret_cast<T const*>(p + u * 512), x);
#pragma unroll
    for (int j = 0; j < V; ++j) acc[u * V + j] = fmaf(v, x[j], acc[u * V + j]);
  }
}

template <class T, int RW, int U, int V>
__device__ SDNN_FORCEINLINE void panel_segment(uint2 const* ep, unsigned char const* tile, float (&acc)[RW][U * V]) {
  uint2 e = ep[0];
  int pos = 0;
#pragma unroll
  for (int i = 0; i < RW; ++i) {
    // Entries of rows < i are consumed, so "row == i" is "e.x < (i + 1) << 16"; the
    // sentinel (0xffffffff) ends every row.
    unsigned const lim = static_cast<unsigned>(i + 1) << 16;
    while (e.x < lim) {  // two entries per trip: no register shuffling between them
      uint2 const n1 = ep[++pos];
      panel_fma<T, RW, U, V>(e, tile, acc[i]);
      if (n1.x >= lim) {
        e = n1;
        break;
      }
      e = ep[++pos];
      panel_fma<T, RW, U, V>(n1, tile, acc[i]);
    }
  }
}

// Blocks per SM the register budget is set for: three when the accumulators are few and
// three stages fit in shared memory (228 KB per SM), else two.
template <class T, int RW, int KC, int U>
inline constexpr int panel_min_blocks =
    (RW * U * vec_width<T> <= 48 && 3 * (panel_smem_bytes<RW, KC, U> + 1024) <= 228 * 1024) ? 3 : 2;

// One block (8 warps) per (RB = 8 * RW rows, column slab of 32 lanes x U 16-byte vectors),
// walking K in chunks of KC rows of B: each chunk's B tile (and, when they fit, the block's
// entries) is copied once into shared memory with cp.async, double-buffered (chunk c+1 is in
// flight while chunk c is multiplied), and used by every nonzero of the block's rows in that
// chunk. Per nonzero a warp does one broadcast shared load of the entry and, per lane and slab
// vector, one 16-byte shared load of B and 4 (float) / 8 (__half) FMAs; the accumulators of the
// warp's RW rows stay in registers for the whole K walk and the epilogue is fused into the
// single store of each C element. A chunk in which the block has no nonzero loads no B tile;
// empty rows get epi(0).
template <class T, class Acc, int RW, int KC, int U>
__global__ void __launch_bounds__(256, (panel_min_blocks<T, RW, KC, U>))
    csr_panels_kernel(csr_panels_view a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> epi, bool vec) {
  constexpr int V = vec_width<T>, TN = 32 * U * V, RB = panel_warps * RW, CAP = panel_capacity<RW, KC>;
  constexpr int RBYTES = panel_row_bytes<U>, VPR = 32 * U;  // bytes and 16-byte vectors per tile row
  static_assert(256 % VPR == 0 && KC % (256 / VPR) == 0, "csr_panels: the tile copy needs whole rows per pass");
  extern __shared__ __align__(16) unsigned char panel_smem[];
  unsigned char* const bs = panel_smem;                                       // [2][KC][RBYTES]
  uint2* const es = reinterpret_cast<uint2*>(panel_smem + 2 * KC * RBYTES);    // [2][CAP]

  int const lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  std::int64_t const n0 = static_cast<std::int64_t>(blockIdx.x) * TN;
  std::int64_t const rb = blockIdx.y;
  std::int64_t const chunks = a.chunks;
  std::int32_t const* const off = a.offsets + rb * chunks * panel_warps;

  float acc[RW][U * V];
#pragma unroll
  for (int i = 0; i < RW; ++i)
#pragma unroll
    for (int j = 0; j < U * V; ++j) acc[i][j] = 0.f;

  // This thread's part of every tile copy: vector column vc of rows kr0, kr0 + 256 / VPR, ...
  int const vc = threadIdx.x % VPR, kr0 = threadIdx.x / VPR;
  std::int64_t const ncol = n0 + static_cast<std::int64_t>(vc) * V;  // first B column of the vector
  std::int64_t const left = (b.cols - ncol) * static_cast<std::int64_t>(sizeof(T));
  int const vbytes = left <= 0 ? 0 : (left >= 16 ? 16 : static_cast<int>(left));  // bytes inside B
  T const* const bcol = b.data + (vbytes > 0 ? ncol : 0);

  // Copies chunk ch's block entries (if they fit) and B tile (if the block has an entry in
  // it) into buffer `buf`; always commits one cp.async group.
  auto issue = [&](std::int64_t ch, int buf, std::int32_t gb, std::int32_t ge) {
    int const n_e = ge - gb;
    if (n_e <= CAP) {
      for (int t = threadIdx.x; t < n_e; t += 256) cp_async_8(es + buf * CAP + t, a.entries + gb + t);
    }
    if (n_e > panel_warps) {  // more than the 8 sentinels
      std::int64_t const k0 = ch * KC;
      unsigned char* const tile = bs + buf * KC * RBYTES + vc * 16;
#pragma unroll
      for (int kr = kr0; kr < KC; kr += 256 / VPR) {
        std::int64_t const k = k0 + kr;
        if (vec) {
          int const bytes = k < b.rows ? vbytes : 0;
          cp_async_16(tile + kr * RBYTES, bytes > 0 ? static_cast<void const*>(bcol + k * b.ld) : b.data, bytes);
        } else {
          T* const dst = reinterpret_cast<T*>(tile + kr * RBYTES);
#pragma unroll
          for (int j = 0; j < V; ++j)
            dst[j] = (k < b.rows && ncol + j < b.cols) ? b.data[k * b.ld + ncol + j] : value_cast<T>(0.f);
        }
      }
    }
    cp_async_commit();
  };

  // Offsets are read one chunk ahead of the copies that need them (two ahead of the
  // multiply), so their global-load latency hides behind a chunk of work.
  struct chunk_offsets {
    std::int32_t gb = 0, ge = 0, wb = 0, we = 0;  // block's and warp's entry ranges
  };
  auto offsets_of = [&](std::int64_t ch) {
    chunk_offsets o;
    if (ch < chunks) {
      std::int32_t const* const p = off + ch * panel_warps;
      o.gb = p[0], o.ge = p[panel_warps], o.wb = p[warp], o.we = p[warp + 1];
    }
    return o;
  };
  if (chunks > 0) {
    chunk_offsets cur = offsets_of(0), nxt = offsets_of(1);
    issue(0, 0, cur.gb, cur.ge);
    for (std::int64_t ch = 0; ch < chunks; ++ch) {
      int const buf = static_cast<int>(ch & 1);
      chunk_offsets after;
      if (ch + 1 < chunks) {
        issue(ch + 1, buf ^ 1, nxt.gb, nxt.ge);
        after = offsets_of(ch + 2);
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();
      if (cur.we - cur.wb > 1) {  // the warp has entries besides its sentinel (warp-uniform)
        unsigned char const* const tile = bs + buf * KC * RBYTES + lane * 16;
        if (cur.ge - cur.gb <= CAP)
          panel_segment<T, RW, U, V>(es + buf * CAP + (cur.wb - cur.gb), tile, acc);
        else
          panel_segment<T, RW, U, V>(a.entries + cur.wb, tile, acc);
      }
      __syncthreads();  // buffer `buf` is refilled by the next iteration's issue
      cur = nxt, nxt = after;
    }
  }

#pragma unroll
  for (int i = 0; i < RW; ++i) {
    std::int64_t const row = rb * RB + warp * RW + i;
    if (row >= c.rows) break;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      std::int64_t const j = n0 + (static_cast<std::int64_t>(u) * 32 + lane) * V;
      float const(&part)[V] = *reinterpret_cast<float const(*)[V]>(&acc[i][u * V]);
      if (j < c.cols) store_slab_vector<T, V>(c.data + row * c.ld, j, c.cols, part, epi, vec);
    }
  }
}

// Plan-time kernels of the csr_panels constructor: the segment keys of the entries, then one
// sentinel per segment (its key sorts after the segment's entries).
template <class T, class Index>
__global__ void panel_keys_kernel(csr_view<T, Index> a, int rw, int kc, int row_bytes, std::int64_t chunks,
                                  unsigned long long* keys, uint2* vals) {
  int const lane = threadIdx.x & 31;
  std::int64_t const warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5); r < a.rows;
       r += warps) {
    std::int64_t const rb = r / (panel_warps * rw), loc = r % (panel_warps * rw);
    std::int64_t const w = loc / rw, i = loc % rw;
    for (std::int64_t p = static_cast<std::int64_t>(a.row_ptr[r]) + lane; p < a.row_ptr[r + 1]; p += 32) {
      std::int64_t const k = a.col_idx[p], ch = k / kc;
      std::int64_t const seg = (rb * chunks + ch) * panel_warps + w;
      keys[p] = static_cast<unsigned long long>(seg) * 2u;
      vals[p] = make_uint2(static_cast<unsigned>(k % kc) * static_cast<unsigned>(row_bytes) | (static_cast<unsigned>(i) << 16),
                           __float_as_uint(value_cast<float>(a.values[p])));
    }
  }
}

// A template so that the header can be included by several translation units (a plain
// __global__ function cannot be inline).
template <class Key>
__global__ void panel_sentinels_kernel(std::int64_t nnz, std::int64_t segments, Key* keys, uint2* vals) {
  for (std::int64_t s = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; s < segments;
       s += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    keys[nnz + s] = static_cast<Key>(s) * 2u + 1u;
    vals[nnz + s] = make_uint2(0xffffffffu, 0u);
  }
}

struct panel_segment_start {
  __host__ __device__ unsigned long long operator()(std::int64_t s) const {
    return static_cast<unsigned long long>(s) * 2u;
  }
};

}  // namespace detail

// A CSR matrix in panel order on the device (owns its arrays).
class csr_panels {
 public:
  csr_panels() = default;

  // Builds the panel order of `a` for RowsPerWarp = rw, KChunk = kc, SlabVectors = u on
  // exec.stream (no host synchronisation; the temporaries are stream-ordered allocations): a
  // stable cub::DeviceRadixSort on the segment key keeps CSR order inside a segment, and
  // thrust::lower_bound finds where each segment starts.
  template <class T, class Index>
  csr_panels(csr_view<T, Index> a, int rw, int kc, int u, cuda_exec exec)
      : rows_(a.rows), cols_(a.cols), rw_(rw), kc_(kc), u_(u) {
    SDNN_EXPECTS(rw >= 1 && rw <= 64 && kc >= 1 && u >= 1 && u <= 4 && (kc - 1) * 512 * u < 65536,
                 "csr_panels: rows per warp in 1..64, 1..4 vectors per lane, (chunk - 1) * 512 * vectors < 65536; got ",
                 rw, ", ", kc, ", ", u);
    SDNN_EXPECTS(a.rows >= 0 && a.cols >= 0 && a.nnz >= 0, "csr_panels: negative shape");
    row_blocks_ = (a.rows + detail::panel_warps * rw - 1) / (detail::panel_warps * rw);
    chunks_ = (a.cols + kc - 1) / kc;
    std::int64_t const segments = row_blocks_ * chunks_ * detail::panel_warps;
    std::int64_t const n = static_cast<std::int64_t>(a.nnz) + segments;
    SDNN_EXPECTS(n < (std::int64_t{1} << 31) - 1, "csr_panels: ", a.nnz, " nonzeros + ", segments,
                 " segment sentinels exceed the 32-bit entry offsets");
    SDNN_EXPECTS(row_blocks_ <= 65535, "csr_panels: ", a.rows, " rows need ", row_blocks_,
                 " row blocks, more than the grid's 65535");
    offsets_ = buffer<std::int32_t, device_space>(static_cast<std::size_t>(segments + 1), exec);
    entries_ = buffer<uint2, device_space>(static_cast<std::size_t>(n), exec);
    if (segments == 0) {
      SDNN_CUDA_CHECK(cudaMemsetAsync(offsets_.data(), 0, sizeof(std::int32_t), exec.stream));
      return;
    }
    buffer<unsigned long long, device_space> keys(static_cast<std::size_t>(n), exec), keys_out(static_cast<std::size_t>(n), exec);
    buffer<uint2, device_space> vals(static_cast<std::size_t>(n), exec);
    if (a.rows > 0 && a.nnz > 0) {
      std::int64_t const blocks = (a.rows + 7) / 8;
      detail::panel_keys_kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), 256, 0, exec.stream>>>(
          a, rw, kc, 512 * u, chunks_, keys.data(), vals.data());
      SDNN_CUDA_CHECK_LAUNCH();
    }
    {
      std::int64_t const blocks = (segments + 255) / 256;
      detail::panel_sentinels_kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), 256, 0, exec.stream>>>(
          a.nnz, segments, keys.data(), vals.data());
      SDNN_CUDA_CHECK_LAUNCH();
    }
    int end_bit = 1;  // keys < 2 * segments
    while (end_bit < 64 && (static_cast<unsigned long long>(segments) * 2u >> end_bit) != 0) ++end_bit;
    std::size_t bytes = 0;
    SDNN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys.data(), keys_out.data(), vals.data(),
                                                    entries_.data(), n, 0, end_bit, exec.stream));
    buffer<unsigned char, device_space> tmp(bytes, exec);
    SDNN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(tmp.data(), bytes, keys.data(), keys_out.data(), vals.data(),
                                                    entries_.data(), n, 0, end_bit, exec.stream));
    auto starts = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                                  detail::panel_segment_start{});
    thrust::lower_bound(thrust::cuda::par_nosync.on(exec.stream), keys_out.data(), keys_out.data() + n, starts,
                        starts + segments + 1, offsets_.data());
    SDNN_CUDA_CHECK_LAUNCH();
  }

  csr_panels_view view() const noexcept {
    return {rows_, cols_, row_blocks_, chunks_, entries_.data(), offsets_.data()};
  }
  int rows_per_warp() const noexcept { return rw_; }
  int k_chunk() const noexcept { return kc_; }
  int slab_vectors() const noexcept { return u_; }

 private:
  std::int64_t rows_ = 0, cols_ = 0, row_blocks_ = 0, chunks_ = 0;
  int rw_ = 0, kc_ = 0, u_ = 0;
  buffer<uint2, device_space> entries_;
  buffer<std::int32_t, device_space> offsets_;
};

// C = epi(A * B) with A in panel order built for <RW, KC, U>. Enqueued on exec.stream.
template <int RW, int KC, int U, class T, class Acc>
void spmm_csr_panels(csr_panels const& a, dense_view<T const> b, dense_view<T> c, basic_epilogue<Acc> const& epi,
                     cuda_exec exec) {
  SDNN_EXPECTS(a.rows_per_warp() == RW && a.k_chunk() == KC && a.slab_vectors() == U,
               "spmm(csr_panels): the panels were built for <", a.rows_per_warp(), ", ", a.k_chunk(), ", ",
               a.slab_vectors(), ">, the kernel is <", RW, ", ", KC, ", ", U, ">");
  csr_panels_view const v = a.view();
  if (v.rows <= 0 || b.cols <= 0) return;
  constexpr int V = detail::vec_width<T>;
  bool const vec = detail::slab_vectorisable(b.ld, c.ld, b.data, c.data, V);
  constexpr std::size_t smem = detail::panel_smem_bytes<RW, KC, U>;
  auto kernel = detail::csr_panels_kernel<T, Acc, RW, KC, U>;
  ::sdnn::detail::allow_dynamic_smem(kernel, smem);  // here, by the launch: see core/cuda.cuh
  dim3 const grid(static_cast<unsigned>((b.cols + 32 * U * V - 1) / (32 * U * V)), static_cast<unsigned>(v.row_blocks));
  kernel<<<grid, 256, smem, exec.stream>>>(v, b, c, epi, vec);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace sdnn::kernels
