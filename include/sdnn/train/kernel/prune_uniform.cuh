// sdnn/train/kernel/prune_uniform.cuh - the kernels of prune_uniform on a device weight tensor and
// their launch sequence (steps 1-6, all enqueued on exec.stream, CUB for the sort, the reductions
// and the compaction); the public calls (prune_uniform, prune_uniform_async, to_host) and the
// one read-back are in train/op/prune_uniform.cuh. Same rules as the host prune_uniform and an
// IDENTICAL result. The steps, the synchronisation and the limits (K*F < 2^31, no NaN, 26 bytes
// of temporary device memory per weight): docs/train.md#uniform-pruning.
#pragma once

#include <cuda_runtime.h>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/conv/pruned_weights.hpp"

namespace sdnn::conv {

// The device result: the report numbers on the host, the arrays on the device (the arrays the
// offset weight build reads, plus the stored values; to_host(...) gives the host pruning_result
// that make_conv_weights takes).
struct device_pruning_result : pruning_report {
  device_buffer<float> pruned;        // [K * F]: original value on kept entries, 0 elsewhere
  device_buffer<std::int32_t> index;  // [K * nnz_per_channel] flat filter index, sorted per channel
  device_buffer<float> values;        // [K * nnz_per_channel]: pruned[k*F + index[e]] (0 on padding)
};

namespace detail {

inline constexpr int prune_threads = 256;

// Two-phase CUB call: f(temp, bytes) sizes the temporary storage, then runs with it.
template <class F>
void prune_cub(F&& f, cuda_exec exec) {
  std::size_t bytes = 0;
  SDNN_CUDA_CHECK(f(nullptr, bytes));
  device_buffer<unsigned char> temp(std::max<std::size_t>(bytes, 1), exec);
  SDNN_CUDA_CHECK(f(temp.data(), bytes));
}

inline unsigned prune_grid(std::int64_t n) {
  return static_cast<unsigned>(std::max<std::int64_t>(1, std::min<std::int64_t>((n + prune_threads - 1) / prune_threads, 1 << 20)));
}

struct prune_max_op {
  SDNN_HOST_DEVICE std::int64_t operator()(std::int64_t a, std::int64_t b) const { return a > b ? a : b; }
};
struct prune_min_op {
  SDNN_HOST_DEVICE std::int64_t operator()(std::int64_t a, std::int64_t b) const { return a < b ? a : b; }
};
struct prune_times_op {
  std::int64_t F;
  SDNN_HOST_DEVICE std::int64_t operator()(std::int64_t k) const { return k * F; }
};
struct prune_widen_op {
  SDNN_HOST_DEVICE std::int64_t operator()(std::uint8_t x) const { return x; }
};

// Step 1: the sort's keys and values, key[g] = (segment << 32) | magnitude_key(w[g]) with value
// g (segment = channel for the per-channel rule, 0 for the global rule); counts the NaN weights
// into *nan_count. Step 2 is cub::DeviceRadixSort::SortPairs, stable, so equal |w| keep
// ascending g: the host's tie-break.
template <int = 0>  // a template: a plain __global__ function in a header breaks linking two .cu files
__global__ void prune_keys_kernel(float const* __restrict__ w, std::int64_t KF, std::int64_t F, int per_channel,
                                  unsigned long long* __restrict__ key, std::int32_t* __restrict__ val,
                                  unsigned long long* nan_count) {
  for (std::int64_t g = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; g < KF; g += std::int64_t(gridDim.x) * blockDim.x) {
    float const x = w[g];
    unsigned long long const seg = per_channel ? static_cast<unsigned long long>(g / F) : 0ull;
    key[g] = (seg << 32) | magnitude_key(x);
    val[g] = static_cast<std::int32_t>(g);
    if (is_nan_bits(x)) atomicAdd(nan_count, 1ull);
  }
}

// Step 3: the magnitude selection from the sorted order. The rank of sorted position p is p
// (global) or p mod F (per channel); kept[g] = rank < target && w[g] != 0 (zeros carry the
// largest key, so they sort last and rank < target keeps min(target, nonzeros)).
// Step 4 (kept per channel) is cub::DeviceSegmentedReduce::Sum over kept.
template <int = 0>  // a template: a plain __global__ function in a header breaks linking two .cu files
__global__ void prune_select_kernel(float const* __restrict__ w, unsigned long long const* __restrict__ key_sorted,
                                    std::int32_t const* __restrict__ g_sorted, std::int64_t KF, std::int64_t F,
                                    int per_channel, std::int64_t target, std::uint8_t* __restrict__ kept,
                                    float* __restrict__ pruned) {
  for (std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; p < KF; p += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t const g = g_sorted[p];
    std::int64_t const rank = per_channel ? p % F : p;
    bool const keep = rank < target && static_cast<std::uint32_t>(key_sorted[p]) != 0xFFFFFFFFu;
    kept[g] = keep ? 1 : 0;
    pruned[g] = keep ? w[g] : 0.0f;
  }
}

// Step 5: one block per channel. Writes stored[k*F + j] = 1 for the kept entries and the
// `need` = nnz - kept_k padding entries pad_channel would add: the previous and next kept index
// of every position (cub::BlockScan, max left to right, min right to left), its pad_order_key
// (conv/pruned_weights.hpp), and the `need` smallest keys by a binary search for the threshold
// key (block counts with cub::BlockReduce, ~2 log2(F) passes over the channel). A channel
// with need < 0 (uniform_nnz below its kept count: reported as an error by the caller) stores
// nothing, so the compaction never writes more than K*nnz entries. key is [K*F] workspace.
template <int B>
__global__ void __launch_bounds__(B) prune_pad_kernel(std::uint8_t const* __restrict__ kept,
                                                      std::int64_t const* __restrict__ kept_count, std::int64_t nnz,
                                                      std::int64_t F, std::int64_t* __restrict__ key,
                                                      std::uint8_t* __restrict__ stored) {
  using scan_t = cub::BlockScan<std::int64_t, B>;
  using reduce_t = cub::BlockReduce<std::int64_t, B>;
  __shared__ union {
    typename scan_t::TempStorage scan;
    typename reduce_t::TempStorage reduce;
  } tmp;
  __shared__ std::int64_t s_total;
  std::int64_t const k = blockIdx.x;
  std::uint8_t const* kf = kept + k * F;
  std::int64_t* kk = key + k * F;
  std::uint8_t* st = stored + k * F;
  std::int64_t const need = nnz - kept_count[k];
  if (need <= 0) {  // block-uniform
    for (std::int64_t j = threadIdx.x; j < F; j += B) st[j] = need == 0 ? kf[j] : 0;
    return;
  }
  // previous kept index (inclusive max-scan of j or -1, left to right), parked in key[]
  std::int64_t carry = -1;
  for (std::int64_t base = 0; base < F; base += B) {
    std::int64_t const j = base + threadIdx.x;
    std::int64_t v = (j < F && kf[j]) ? j : -1, agg;
    scan_t(tmp.scan).InclusiveScan(v, v, prune_max_op{}, agg);
    if (j < F) kk[j] = v > carry ? v : carry;
    carry = agg > carry ? agg : carry;
    __syncthreads();  // temp storage reuse; key[] writes visible to the block
  }
  // next kept index (inclusive min-scan right to left) and the pad key; kept: -1
  carry = F;
  for (std::int64_t base = 0; base < F; base += B) {
    std::int64_t const j = F - 1 - (base + threadIdx.x);
    std::int64_t v = (j >= 0 && kf[j]) ? j : F, agg;
    scan_t(tmp.scan).InclusiveScan(v, v, prune_min_op{}, agg);
    v = v < carry ? v : carry;
    if (j >= 0) kk[j] = kf[j] ? -1 : pad_order_key(j, kk[j], v, F);
    carry = agg < carry ? agg : carry;
    __syncthreads();
  }
  // smallest T with #{j : 0 <= key[j] <= T} >= need (keys are distinct: exactly need)
  std::int64_t lo = -1, hi = 2 * F * F + 2 * F;  // count(lo) < need <= count(hi)
  while (hi - lo > 1) {
    std::int64_t const mid = lo + (hi - lo) / 2;
    std::int64_t c = 0;
    for (std::int64_t j = threadIdx.x; j < F; j += B) c += (kk[j] >= 0 && kk[j] <= mid) ? 1 : 0;
    c = reduce_t(tmp.reduce).Sum(c);
    if (threadIdx.x == 0) s_total = c;
    __syncthreads();
    c = s_total;
    __syncthreads();  // s_total and temp storage reuse
    if (c >= need) hi = mid;
    else lo = mid;
  }
  for (std::int64_t j = threadIdx.x; j < F; j += B) st[j] = (kf[j] || (kk[j] >= 0 && kk[j] <= hi)) ? 1 : 0;
}

// Step 6: index[e] holds the stored flat index g (from the compaction, cub::DeviceSelect::Flagged
// over the stored flags: ascending g, i.e. channel by channel and sorted within a channel); make
// it g mod F and gather the value. Entries past *num_selected (only when a channel stored
// nothing, i.e. the error case above) are zeroed.
template <int = 0>  // a template: a plain __global__ function in a header breaks linking two .cu files
__global__ void prune_index_kernel(std::int32_t* __restrict__ index, float* __restrict__ values,
                                   float const* __restrict__ pruned, std::int64_t n, std::int64_t F,
                                   std::int64_t const* __restrict__ num_selected) {
  std::int64_t const sel = *num_selected;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < n; e += std::int64_t(gridDim.x) * blockDim.x) {
    if (e < sel) {
      std::int64_t const g = index[e];
      index[e] = static_cast<std::int32_t>(g % F);
      values[e] = pruned[g];
    } else {
      index[e] = 0;
      values[e] = 0.0f;
    }
  }
}

// Steps 1-4 enqueued; the result's arrays and report are completed by prune_pad and
// report_from_counts.
struct prune_state {
  prune_rule rule = prune_rule::global;
  device_buffer<unsigned long long> key;  // [K*F] sort keys, then the pad keys (as int64)
  device_buffer<std::uint8_t> kept;       // [K*F]
  device_buffer<std::int64_t> counts;     // [K + 1]: kept per channel, then the NaN count
  device_pruning_result res;
};

inline prune_state prune_select(float const* w, std::int64_t K, std::int64_t F, double sparsity, prune_rule rule,
                                cuda_exec exec) {
  SDNN_EXPECTS(K * F <= std::numeric_limits<std::int32_t>::max(), "prune_uniform (device): K*F must be < 2^31, got ",
               K * F);
  std::int64_t const KF = K * F;
  int const per_channel = rule == prune_rule::per_channel ? 1 : 0;
  prune_state st;
  st.rule = rule;
  st.res.K = K;
  st.res.filter_size = F;
  st.res.target_sparsity = sparsity;
  st.key = device_buffer<unsigned long long>(static_cast<std::size_t>(KF), exec);
  st.kept = device_buffer<std::uint8_t>(static_cast<std::size_t>(KF), exec);
  st.counts = device_buffer<std::int64_t>(static_cast<std::size_t>(K + 1), exec);
  st.res.pruned = device_buffer<float>(static_cast<std::size_t>(KF), exec);
  SDNN_CUDA_CHECK(cudaMemsetAsync(st.counts.data(), 0, st.counts.size() * sizeof(std::int64_t), exec.stream));
  {
    device_buffer<unsigned long long> key_sorted(static_cast<std::size_t>(KF), exec);
    device_buffer<std::int32_t> g(static_cast<std::size_t>(KF), exec), g_sorted(static_cast<std::size_t>(KF), exec);
    prune_keys_kernel<><<<prune_grid(KF), prune_threads, 0, exec.stream>>>(
        w, KF, F, per_channel, st.key.data(), g.data(), reinterpret_cast<unsigned long long*>(st.counts.data() + K));
    SDNN_CUDA_CHECK_LAUNCH();
    int end_bit = 32;
    if (per_channel)
      for (std::int64_t m = K - 1; m > 0; m >>= 1) ++end_bit;
    unsigned long long const* kin = st.key.data();
    unsigned long long* kout = key_sorted.data();
    std::int32_t const* vin = g.data();
    std::int32_t* vout = g_sorted.data();
    prune_cub([&](void* t, std::size_t& b) {
      return cub::DeviceRadixSort::SortPairs(t, b, kin, kout, vin, vout, KF, 0, end_bit, exec.stream);
    }, exec);
    prune_select_kernel<><<<prune_grid(KF), prune_threads, 0, exec.stream>>>(
        w, key_sorted.data(), g_sorted.data(), KF, F, per_channel, keep_target(rule, sparsity, K, F), st.kept.data(),
        st.res.pruned.data());
    SDNN_CUDA_CHECK_LAUNCH();
  }
  auto const widened = thrust::make_transform_iterator(st.kept.data(), prune_widen_op{});
  auto const begins = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0), prune_times_op{F});
  std::int64_t* cnt = st.counts.data();
  prune_cub([&](void* t, std::size_t& b) {
    return cub::DeviceSegmentedReduce::Sum(t, b, widened, cnt, K, begins, begins + 1, exec.stream);
  }, exec);
  return st;
}

// Steps 5-6 for nnz stored entries per channel.
inline void prune_pad(prune_state& st, std::int64_t nnz, cuda_exec exec) {
  std::int64_t const K = st.res.K, F = st.res.filter_size, KF = K * F, n = K * nnz;
  st.res.index = device_buffer<std::int32_t>(static_cast<std::size_t>(n), exec);
  st.res.values = device_buffer<float>(static_cast<std::size_t>(n), exec);
  if (n == 0) return;
  device_buffer<std::uint8_t> stored(static_cast<std::size_t>(KF), exec);
  device_buffer<std::int64_t> num_selected(1, exec);
  prune_pad_kernel<prune_threads><<<static_cast<unsigned>(K), prune_threads, 0, exec.stream>>>(
      st.kept.data(), st.counts.data(), nnz, F, reinterpret_cast<std::int64_t*>(st.key.data()), stored.data());
  SDNN_CUDA_CHECK_LAUNCH();
  std::uint8_t const* flags = stored.data();
  std::int32_t* out = st.res.index.data();
  std::int64_t* ns = num_selected.data();
  prune_cub([&](void* t, std::size_t& b) {
    return cub::DeviceSelect::Flagged(t, b, thrust::counting_iterator<std::int32_t>(0), flags, out, ns, KF, exec.stream);
  }, exec);
  prune_index_kernel<><<<prune_grid(n), prune_threads, 0, exec.stream>>>(st.res.index.data(), st.res.values.data(),
                                                                      st.res.pruned.data(), n, F, ns);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace detail

}  // namespace sdnn::conv
