// sdnn/conv/pruning.hpp - magnitude pruning of a dense K x (C*R*S) weight tensor to the
// SAME number of stored entries in every output channel.
//
// Direct sparse convolution gives each block one output channel; uniform rows make the
// work per block equal and the CSR row pointer implicit (row k starts at k * nnz).
// Pruning is magnitude based:
//   - rule::global:      one threshold over the whole tensor keeps the round((1-s)*K*F)
//                        largest |w| (ties: lower flat index first). Channels then differ;
//                        every channel is padded to the densest channel's count (or to a
//                        given uniform_nnz >= that count) with explicit zero entries.
//   - rule::per_channel: each channel keeps its own round((1-s)*F) largest |w| (exact
//                        per-channel sparsity; padding appears only where a channel has
//                        fewer nonzero weights than that, e.g. an all-zero channel).
// Weights that are already zero are never "kept"; they can only become padding.
// Padding entries are chosen next to kept ones (flat index i+1, i-1, i+2, ...), so the
// padded row reads input words adjacent to ones it reads anyway (same cache lines).
// F = C*R*S is the filter size; flat index f = c*R*S + r*S + s.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "sdnn/core/error.hpp"

namespace sdnn::conv {

enum class prune_rule { global, per_channel };

struct pruning_result {
  std::int64_t K = 0, filter_size = 0;        // tensor is K x filter_size
  std::vector<float> pruned;                  // [K * F]: original value on kept entries, 0 elsewhere
  std::int64_t nnz_per_channel = 0;           // stored entries per channel (kept + padding)
  std::vector<std::int32_t> index;            // [K * nnz_per_channel] flat filter index, sorted per channel
  std::vector<std::int64_t> kept_per_channel; // [K] magnitude-kept (nonzero) entries per channel
  std::int64_t kept = 0;                      // sum of kept_per_channel
  std::int64_t padding = 0;                   // explicit zero entries added (K*nnz - kept)
  double target_sparsity = 0;
  double achieved_sparsity = 0;               // 1 - kept / (K*F): zeros of the pruned tensor
  double stored_density = 0;                  // K*nnz / (K*F)
  double padding_overhead = 0;                // padding / (K*nnz): wasted share of the stored work
};

namespace detail {
// Adds `need` padding indices to channel entries `sel` (sorted flat indices of kept
// entries), nearest first to kept ones, and returns the merged sorted list.
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
}  // namespace detail

// Prunes w [K x F] (row-major, F = C*R*S) to `sparsity` in [0, 1]. uniform_nnz (global rule
// only) forces the stored entries per channel; it must be >= the densest channel's kept
// count and <= F; -1 means "the densest channel's count".
inline pruning_result prune_uniform(float const* w, std::int64_t K, std::int64_t F, double sparsity,
                                    prune_rule rule = prune_rule::global, std::int64_t uniform_nnz = -1) {
  SDNN_EXPECTS(K >= 1 && F >= 1, "prune_uniform: K and F must be >= 1, got K=", K, " F=", F);
  SDNN_EXPECTS(sparsity >= 0.0 && sparsity <= 1.0, "prune_uniform: sparsity must be in [0, 1], got ", sparsity);
  SDNN_EXPECTS(uniform_nnz == -1 || rule == prune_rule::global,
               "prune_uniform: uniform_nnz is only meaningful with prune_rule::global");
  pruning_result res;
  res.K = K;
  res.filter_size = F;
  res.target_sparsity = sparsity;
  res.pruned.assign(static_cast<std::size_t>(K * F), 0.0f);
  res.kept_per_channel.assign(static_cast<std::size_t>(K), 0);
  // Largest |w| first; ties broken by the lower flat index (deterministic).
  auto by_magnitude = [w](std::int64_t a, std::int64_t b) {
    float const x = std::fabs(w[a]), y = std::fabs(w[b]);
    return x > y || (x == y && a < b);
  };
  std::vector<std::vector<std::int32_t>> sel(static_cast<std::size_t>(K));
  auto keep_top = [&](std::vector<std::int64_t>& cand, std::int64_t n) {
    n = std::min<std::int64_t>(n, static_cast<std::int64_t>(cand.size()));
    std::nth_element(cand.begin(), cand.begin() + n, cand.end(), by_magnitude);
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t const g = cand[static_cast<std::size_t>(i)];
      sel[static_cast<std::size_t>(g / F)].push_back(static_cast<std::int32_t>(g % F));
    }
  };
  if (rule == prune_rule::global) {
    std::vector<std::int64_t> cand;
    for (std::int64_t g = 0; g < K * F; ++g)
      if (w[g] != 0.0f) cand.push_back(g);
    keep_top(cand, std::llround((1.0 - sparsity) * double(K * F)));
  } else {
    std::int64_t const n = std::llround((1.0 - sparsity) * double(F));
    for (std::int64_t k = 0; k < K; ++k) {
      std::vector<std::int64_t> cand;
      for (std::int64_t f = 0; f < F; ++f)
        if (w[k * F + f] != 0.0f) cand.push_back(k * F + f);
      keep_top(cand, n);
    }
  }
  std::int64_t densest = 0;
  for (std::int64_t k = 0; k < K; ++k) {
    auto& s = sel[static_cast<std::size_t>(k)];
    std::sort(s.begin(), s.end());
    res.kept_per_channel[static_cast<std::size_t>(k)] = static_cast<std::int64_t>(s.size());
    res.kept += static_cast<std::int64_t>(s.size());
    densest = std::max<std::int64_t>(densest, static_cast<std::int64_t>(s.size()));
    for (auto f : s) res.pruned[static_cast<std::size_t>(k * F + f)] = w[k * F + f];
  }
  std::int64_t nnz = densest;
  if (rule == prune_rule::per_channel) nnz = std::llround((1.0 - sparsity) * double(F));
  if (uniform_nnz >= 0) {
    SDNN_EXPECTS(uniform_nnz >= densest && uniform_nnz <= F, "prune_uniform: uniform_nnz must be in [densest = ",
                 densest, ", F = ", F, "], got ", uniform_nnz);
    nnz = uniform_nnz;
  }
  res.nnz_per_channel = nnz;
  res.index.reserve(static_cast<std::size_t>(K * nnz));
  for (std::int64_t k = 0; k < K; ++k) {
    auto& s = sel[static_cast<std::size_t>(k)];
    std::int64_t const need = nnz - static_cast<std::int64_t>(s.size());
    auto full = detail::pad_channel(std::move(s), F, need);
    res.index.insert(res.index.end(), full.begin(), full.end());
  }
  res.padding = K * nnz - res.kept;
  res.achieved_sparsity = 1.0 - double(res.kept) / double(K * F);
  res.stored_density = double(K * nnz) / double(K * F);
  res.padding_overhead = nnz ? double(res.padding) / double(K * nnz) : 0.0;
  return res;
}

}  // namespace sdnn::conv
