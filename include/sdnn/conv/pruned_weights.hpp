// sdnn/conv/pruned_weights.hpp - the result of magnitude pruning a dense K x (C*R*S) weight
// tensor to the SAME number of stored entries in every output channel (pruning_result,
// pruning_report) and the rules that define it (padding order, report). Uniform rows give
// every output channel of the direct sparse convolution the same work and make the CSR row
// pointer implicit (row k starts at k * nnz). The pruning itself, with the same rules and an
// identical result on both sides: train/op/prune_uniform.hpp (host), train/op/prune_uniform.cuh
// (device). The rules: docs/train.md#uniform-pruning.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "sdnn/core/config.hpp"
#include "sdnn/core/error.hpp"

namespace sdnn::conv {

// Magnitude pruning of K channels of F = C*R*S weights (flat index f = c*R*S + r*S + s):
//   - global:      one threshold over the whole tensor keeps the round((1-s)*K*F) largest |w|
//                  (ties: lower flat index first). Channels then differ; every channel is
//                  padded to the densest channel's count (or to a given uniform_nnz >= that
//                  count) with explicit zero entries.
//   - per_channel: each channel keeps its own round((1-s)*F) largest |w| (exact per-channel
//                  sparsity; padding appears only where a channel has fewer nonzero weights
//                  than that, e.g. an all-zero channel).
// Weights that are already zero are never "kept"; they can only become padding.
enum class prune_rule { global, per_channel };

// The numbers of a pruning run (shared by the host and the device result).
struct pruning_report {
  std::int64_t K = 0, filter_size = 0;        // tensor is K x filter_size
  std::int64_t nnz_per_channel = 0;           // stored entries per channel (kept + padding)
  std::vector<std::int64_t> kept_per_channel; // [K] magnitude-kept (nonzero) entries per channel
  std::int64_t kept = 0;                      // sum of kept_per_channel
  std::int64_t padding = 0;                   // explicit zero entries added (K*nnz - kept)
  double target_sparsity = 0;
  double achieved_sparsity = 0;               // 1 - kept / (K*F): zeros of the pruned tensor
  double stored_density = 0;                  // K*nnz / (K*F)
  double padding_overhead = 0;                // padding / (K*nnz): wasted share of the stored work
};

struct pruning_result : pruning_report {
  std::vector<float> pruned;                  // [K * F]: original value on kept entries, 0 elsewhere
  std::vector<std::int32_t> index;            // [K * nnz_per_channel] flat filter index, sorted per channel
};

namespace detail {
// Adds `need` padding indices to channel entries `sel` (sorted flat indices of kept
// entries), nearest first to kept ones (flat index i+1, i-1, i+2, ...), so the padded row
// reads input words adjacent to ones it reads anyway (same cache lines), and returns the
// merged sorted list. This loop is
// the definition of the padding order; pad_order_key below states the same order as a key
// (the device pruning in train/kernel/prune_uniform.cuh selects by that key; tests/host/test_conv.cpp checks
// that both agree).
inline std::vector<std::int32_t> pad_channel(std::vector<std::int32_t> sel, std::int64_t F, std::int64_t need) {
  if (need <= 0) return sel;
  std::vector<char> used(static_cast<std::size_t>(F), 0);
  for (auto i : sel) used[static_cast<std::size_t>(i)] = 1;
  std::vector<std::int32_t> kept = sel;
  if (kept.empty()) {  // nothing to sit next to: a contiguous run from the start
    for (std::int64_t i = 0; i < need; ++i) sel.push_back(static_cast<std::int32_t>(i));
    return sel;
  }
  for (std::int64_t d = 1; need > 0 && d < F; ++d) {
    for (auto i : kept) {
      for (std::int64_t j : {std::int64_t(i) + d, std::int64_t(i) - d}) {
        if (need > 0 && j >= 0 && j < F && !used[static_cast<std::size_t>(j)]) {
          used[static_cast<std::size_t>(j)] = 1;
          sel.push_back(static_cast<std::int32_t>(j));
          --need;
        }
      }
      if (need == 0) break;
    }
  }
  std::sort(sel.begin(), sel.end());
  return sel;
}

// The position of a non-kept index j in pad_channel's order, as a key: pad_channel adds
// exactly the `need` non-kept indices with the smallest keys (keys are distinct).
//   prev: the largest kept index < j, or -1;  next: the smallest kept index > j, or F.
// Why: pad_channel's round d visits the kept indices i in ascending order and tries
// i + d, then i - d. An index j is first reachable in round D = distance to its nearest
// kept index (an earlier round cannot reach it); in round D it is reached from i = j - D
// (as i + d) when that index is kept, which comes before i = j + D (a larger i), else from
// i = j + D (as i - d). So the order is (D, anchor i, + before -): the key
// D*2F + 2i + (0 for +, 1 for -), which is < 2F^2 + 2F. A channel without kept entries
// takes 0, 1, 2, ...: the key is j.
SDNN_HOST_DEVICE inline std::int64_t pad_order_key(std::int64_t j, std::int64_t prev, std::int64_t next, std::int64_t F) {
  if (prev < 0 && next >= F) return j;
  std::int64_t const dl = prev >= 0 ? j - prev : F, dr = next < F ? next - j : F;
  if (dl <= dr) return dl * 2 * F + 2 * prev;
  return dr * 2 * F + 2 * next + 1;
}

// The low 32 bits of the device pruning's sort key: ascending order of the key is
// descending |w| (the bits of a non-negative float order like its value; -0 and +0 are
// both 0 and map to the largest key, 0xFFFFFFFF, which marks "never kept").
SDNN_HOST_DEVICE inline std::uint32_t magnitude_key(float w) {
  std::uint32_t bits;
  std::memcpy(&bits, &w, sizeof bits);
  return 0xFFFFFFFFu - (bits & 0x7FFFFFFFu);
}
SDNN_HOST_DEVICE inline bool is_nan_bits(float w) {
  std::uint32_t bits;
  std::memcpy(&bits, &w, sizeof bits);
  return (bits & 0x7FFFFFFFu) > 0x7F800000u;
}

// The most entries (K * F) a pruned tensor may have: the host holds K * F floats in vectors
// (the element-count limit of ::sdnn::detail::checked_extent, 2^60); the device indexes the
// tensor with int32 (train/kernel/prune_uniform.cuh).
inline constexpr std::int64_t prune_host_max_entries = std::int64_t(1) << 60;
inline constexpr std::int64_t prune_device_max_entries = INT32_MAX;

// Checks the arguments of prune_uniform before anything multiplies or allocates: K * F is
// compared by division, so no product of the extents is formed until it is known to fit.
inline void check_prune_args(std::int64_t K, std::int64_t F, double sparsity, prune_rule rule, std::int64_t uniform_nnz,
                             std::int64_t max_entries = prune_host_max_entries) {
  SDNN_EXPECTS(K >= 1 && F >= 1, "prune_uniform: K and F must be >= 1, got K=", K, " F=", F);
  SDNN_EXPECTS(F <= INT32_MAX && K <= max_entries / F, "prune_uniform: a K x F = ", K, " x ", F,
               " tensor is too large (F must fit int32 filter indices and K * F must be at most ", max_entries,
               " entries)");
  SDNN_EXPECTS(sparsity >= 0.0 && sparsity <= 1.0, "prune_uniform: sparsity must be in [0, 1], got ", sparsity);
  SDNN_EXPECTS(uniform_nnz == -1 || rule == prune_rule::global,
               "prune_uniform: uniform_nnz is only meaningful with prune_rule::global");
  SDNN_EXPECTS(uniform_nnz >= -1 && uniform_nnz <= F, "prune_uniform: uniform_nnz must be -1 or in [0, F = ", F,
               "], got ", uniform_nnz);
}

// How many entries the magnitude rule keeps (before dropping zero weights): in total for
// the global rule, per channel for the per-channel rule.
inline std::int64_t keep_target(prune_rule rule, double sparsity, std::int64_t K, std::int64_t F) {
  return rule == prune_rule::global ? std::llround((1.0 - sparsity) * double(K * F))
                                    : std::llround((1.0 - sparsity) * double(F));
}

// Fills the report from r.kept_per_channel (and K, F, target sparsity): the stored count
// per channel (densest channel, the per-channel target, or uniform_nnz), padding and the
// ratios. Shared by the host and the device pruning so both report identical numbers.
inline void finish_report(pruning_report& r, prune_rule rule, std::int64_t uniform_nnz) {
  std::int64_t densest = 0;
  r.kept = 0;
  for (auto c : r.kept_per_channel) {
    r.kept += c;
    densest = std::max(densest, c);
  }
  std::int64_t nnz = densest;
  if (rule == prune_rule::per_channel) nnz = keep_target(rule, r.target_sparsity, r.K, r.filter_size);
  if (uniform_nnz >= 0) {
    SDNN_EXPECTS(uniform_nnz >= densest && uniform_nnz <= r.filter_size, "prune_uniform: uniform_nnz must be in [densest = ",
                 densest, ", F = ", r.filter_size, "], got ", uniform_nnz);
    nnz = uniform_nnz;
  }
  std::int64_t const K = r.K, F = r.filter_size;
  r.nnz_per_channel = nnz;
  r.padding = K * nnz - r.kept;
  r.achieved_sparsity = 1.0 - double(r.kept) / double(K * F);
  r.stored_density = double(K * nnz) / double(K * F);
  r.padding_overhead = nnz ? double(r.padding) / double(K * nnz) : 0.0;
}
}  // namespace detail

}  // namespace sdnn::conv
