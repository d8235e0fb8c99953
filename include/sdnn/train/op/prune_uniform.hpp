// sdnn/train/op/prune_uniform.hpp - prune_uniform on a host weight tensor: magnitude pruning of a dense
// K x (C*R*S) tensor to the same number of stored entries in every output channel. The
// rules and the result type are in conv/pruned_weights.hpp; the device version (same
// rules, identical result) is in train/op/prune_uniform.cuh.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/conv/pruned_weights.hpp"

namespace sdnn::conv {

// Prunes w [K x F] (row-major, F = C*R*S) to `sparsity` in [0, 1]. uniform_nnz (global rule
// only) forces the stored entries per channel; it must be >= the densest channel's kept
// count and <= F; -1 means "the densest channel's count". w must not contain NaN (it has no
// magnitude order). F must fit int32 and K * F must be at most 2^60 (checked before w is
// read). The device version (same rules, identical result) is in train/op/prune_uniform.cuh.
inline pruning_result prune_uniform(float const* w, std::int64_t K, std::int64_t F, double sparsity,
                                    prune_rule rule = prune_rule::global, std::int64_t uniform_nnz = -1) {
  detail::check_prune_args(K, F, sparsity, rule, uniform_nnz);  // K * F <= 2^60 from here on
  std::size_t const KF = ::sdnn::detail::checked_extent(K, F, "prune_uniform");
  for (std::int64_t g = 0; g < K * F; ++g)
    SDNN_EXPECTS(!std::isnan(w[g]), "prune_uniform: w[", g, "] is NaN");
  pruning_result res;
  res.K = K;
  res.filter_size = F;
  res.target_sparsity = sparsity;
  res.pruned.assign(KF, 0.0f);
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
  std::int64_t const n = detail::keep_target(rule, sparsity, K, F);
  if (rule == prune_rule::global) {
    std::vector<std::int64_t> cand;
    for (std::int64_t g = 0; g < K * F; ++g)
      if (w[g] != 0.0f) cand.push_back(g);
    keep_top(cand, n);
  } else {
    for (std::int64_t k = 0; k < K; ++k) {
      std::vector<std::int64_t> cand;
      for (std::int64_t f = 0; f < F; ++f)
        if (w[k * F + f] != 0.0f) cand.push_back(k * F + f);
      keep_top(cand, n);
    }
  }
  for (std::int64_t k = 0; k < K; ++k) {
    auto& s = sel[static_cast<std::size_t>(k)];
    std::sort(s.begin(), s.end());
    res.kept_per_channel[static_cast<std::size_t>(k)] = static_cast<std::int64_t>(s.size());
    for (auto f : s) res.pruned[static_cast<std::size_t>(k * F + f)] = w[k * F + f];
  }
  detail::finish_report(res, rule, uniform_nnz);
  std::int64_t const nnz = res.nnz_per_channel;
  res.index.reserve(static_cast<std::size_t>(K * nnz));
  for (std::int64_t k = 0; k < K; ++k) {
    auto& s = sel[static_cast<std::size_t>(k)];
    std::int64_t const need = nnz - static_cast<std::int64_t>(s.size());
    auto full = detail::pad_channel(std::move(s), F, need);
    res.index.insert(res.index.end(), full.begin(), full.end());
  }
  return res;
}

}  // namespace sdnn::conv
