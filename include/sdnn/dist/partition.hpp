// sdnn/dist/partition.hpp - which inputs each rank computes (host only; needs no MPI).
//
// A partition splits n inputs (rows of the input matrix Y, 0-based) over P ranks into contiguous
// blocks in rank order: rank r computes rows [offsets[r], offsets[r + 1]). The functions are
// deterministic and integer-only, so every rank can compute the same partition from the same data,
// or rank 0 computes it and broadcasts it (dist::mpi::broadcast_partition). block_partition,
// weighted_partition and nnz_partition place the cuts; slice_rows copies a rank's rows out.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/formats/csr.hpp"

namespace sdnn::dist {

// Half-open range [begin, end) of 0-based input indices.
struct input_range {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const noexcept { return end - begin; }
  bool empty() const noexcept { return end == begin; }
  bool contains(std::int64_t i) const noexcept { return i >= begin && i < end; }
};

// Contiguous blocks in rank order. offsets has parts() + 1 entries: 0 = offsets[0] <= ... <=
// offsets[parts()] = inputs().
class partition {
 public:
  partition() : offsets_{0} {}
  // Takes offsets as computed elsewhere (for example received from another rank); checks them.
  explicit partition(std::vector<std::int64_t> offsets) : offsets_(std::move(offsets)) {
    SDNN_EXPECTS(offsets_.size() >= 2, "dist::partition: needs at least 2 offsets (1 part), got ", offsets_.size());
    SDNN_EXPECTS(offsets_.front() == 0, "dist::partition: offsets[0] must be 0, got ", offsets_.front());
    for (std::size_t r = 1; r < offsets_.size(); ++r)
      SDNN_EXPECTS(offsets_[r] >= offsets_[r - 1], "dist::partition: offsets must not decrease, offsets[", r,
                   "] = ", offsets_[r], " < offsets[", r - 1, "] = ", offsets_[r - 1]);
  }

  int parts() const noexcept { return static_cast<int>(offsets_.size()) - 1; }
  std::int64_t inputs() const noexcept { return offsets_.back(); }
  std::vector<std::int64_t> const& offsets() const noexcept { return offsets_; }

  input_range range(int rank) const {
    SDNN_EXPECTS(rank >= 0 && rank < parts(), "dist::partition: rank ", rank, " is out of range for ", parts(),
                 " parts");
    return {offsets_[static_cast<std::size_t>(rank)], offsets_[static_cast<std::size_t>(rank) + 1]};
  }
  // The rank whose block holds input i (0-based).
  int owner(std::int64_t i) const {
    SDNN_EXPECTS(i >= 0 && i < inputs(), "dist::partition: input ", i, " is out of range for ", inputs(), " inputs");
    auto const it = std::upper_bound(offsets_.begin(), offsets_.end(), i);
    return static_cast<int>(it - offsets_.begin()) - 1;
  }
  // Sum of costs per rank (costs.size() == inputs()): what the partition predicts each rank does.
  std::vector<std::int64_t> part_costs(std::vector<std::int64_t> const& costs) const {
    SDNN_EXPECTS(static_cast<std::int64_t>(costs.size()) == inputs(), "dist::partition: ", costs.size(),
                 " costs for ", inputs(), " inputs");
    std::vector<std::int64_t> out(static_cast<std::size_t>(parts()), 0);
    for (int r = 0; r < parts(); ++r)
      for (std::int64_t i = offsets_[static_cast<std::size_t>(r)]; i < offsets_[static_cast<std::size_t>(r) + 1]; ++i)
        out[static_cast<std::size_t>(r)] += costs[static_cast<std::size_t>(i)];
    return out;
  }

  friend bool operator==(partition const& a, partition const& b) { return a.offsets_ == b.offsets_; }
  friend bool operator!=(partition const& a, partition const& b) { return !(a == b); }

 private:
  std::vector<std::int64_t> offsets_;
};

// n inputs over `parts` ranks, sizes differing by at most one (the first n mod parts ranks
// hold n / parts + 1, the others n / parts). A rank may hold none (n < parts).
inline partition block_partition(std::int64_t n, int parts) {
  SDNN_EXPECTS(n >= 0, "dist::block_partition: the number of inputs must be >= 0, got ", n);
  SDNN_EXPECTS(parts >= 1, "dist::block_partition: the number of parts (ranks) must be >= 1, got ", parts);
  std::vector<std::int64_t> off(static_cast<std::size_t>(parts) + 1, 0);
  std::int64_t const q = n / parts, extra = n % parts;
  for (int r = 0; r < parts; ++r) off[static_cast<std::size_t>(r) + 1] = off[static_cast<std::size_t>(r)] + q + (r < extra ? 1 : 0);
  return partition(std::move(off));
}

// Contiguous blocks balancing the sum of costs (costs[i] >= 0 is input i's cost). Cut k is the
// index c whose prefix sum S[c] (cost of inputs [0, c)) is nearest to k * total / parts (the
// lower index on a tie), never before cut k - 1; so |S[c_k] - k * total / parts| <= max cost / 2
// and every rank's cost is within the largest single cost of total / parts.
// total * parts must fit in int64 (costs are counts, so this holds up to ~9e18 / parts).
// All costs 0: block_partition.
inline partition weighted_partition(std::vector<std::int64_t> const& costs, int parts) {
  SDNN_EXPECTS(parts >= 1, "dist::weighted_partition: the number of parts (ranks) must be >= 1, got ", parts);
  std::int64_t const n = static_cast<std::int64_t>(costs.size());
  std::vector<std::int64_t> prefix(costs.size() + 1, 0);
  constexpr std::int64_t max64 = std::numeric_limits<std::int64_t>::max();
  for (std::size_t i = 0; i < costs.size(); ++i) {
    SDNN_EXPECTS(costs[i] >= 0, "dist::weighted_partition: costs must be >= 0, cost[", i, "] = ", costs[i]);
    SDNN_EXPECTS(prefix[i] <= max64 - costs[i], "dist::weighted_partition: the total cost overflows int64 at input ", i);
    prefix[i + 1] = prefix[i] + costs[i];
  }
  std::int64_t const total = prefix.back();
  if (total == 0) return block_partition(n, parts);
  SDNN_EXPECTS(total <= max64 / parts, "dist::weighted_partition: total cost ", total, " x ", parts,
               " parts overflows int64");
  std::vector<std::int64_t> off(static_cast<std::size_t>(parts) + 1, 0);
  off.back() = n;
  std::int64_t prev = 0;
  for (int k = 1; k < parts; ++k) {
    std::int64_t const target = total * k;  // compare prefix * parts with total * k: exact integers
    // First c with prefix[c] * parts >= target; prefix[c] * parts <= total * parts fits.
    auto const it = std::lower_bound(prefix.begin(), prefix.end(), target,
                                     [parts](std::int64_t s, std::int64_t t) { return s * parts < t; });
    std::int64_t c = static_cast<std::int64_t>(it - prefix.begin());
    if (c > 0) {
      std::int64_t const above = prefix[static_cast<std::size_t>(c)] * parts - target;     // >= 0
      std::int64_t const below = target - prefix[static_cast<std::size_t>(c) - 1] * parts;  // > 0
      if (below <= above) c -= 1;
    }
    c = std::max(c, prev);
    off[static_cast<std::size_t>(k)] = c;
    prev = c;
  }
  return partition(std::move(off));
}

// cost(i) = nnz of row i + base (base >= 0): work grows with an input's nonzeros, and `base`
// (default 1) counts the per-row overhead so empty rows are not free. A proxy where an input's
// real cost is known only after the run (e.g. how many layers of a network it stays active
// through): a user who has better costs (a probe run of the first layers, a previous run's
// timings) passes them to weighted_partition.
template <class T, class Index>
std::vector<std::int64_t> nnz_costs(csr_view<T, Index> y, std::int64_t base = 1) {
  SDNN_EXPECTS(base >= 0, "dist::nnz_costs: base must be >= 0, got ", base);
  std::vector<std::int64_t> costs(static_cast<std::size_t>(y.rows));
  for (Index i = 0; i < y.rows; ++i)
    costs[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(y.row_ptr[i + 1] - y.row_ptr[i]) + base;
  return costs;
}

template <class T, class Index>
partition nnz_partition(csr_view<T, Index> y, int parts, std::int64_t base = 1) {
  return weighted_partition(nnz_costs(y, base), parts);
}

// Rows [r.begin, r.end) of y as a new host matrix (same columns, row_ptr rebased to 0): what a
// rank runs inference on.
template <class T, class Index>
csr_matrix<T, Index> slice_rows(csr_view<T, Index> y, input_range r) {
  SDNN_EXPECTS(r.begin >= 0 && r.begin <= r.end && r.end <= static_cast<std::int64_t>(y.rows),
               "dist::slice_rows: rows [", r.begin, ", ", r.end, ") are out of range for ", y.rows, " rows");
  Index const b = static_cast<Index>(r.begin), e = static_cast<Index>(r.end);
  Index const first = y.row_ptr[b], nnz = y.row_ptr[e] - first;
  csr_matrix<T, Index> out(e - b, y.cols, nnz);
  for (Index i = b; i <= e; ++i) out.row_ptr()[static_cast<std::size_t>(i - b)] = y.row_ptr[i] - first;
  std::copy(y.col_idx + first, y.col_idx + first + nnz, out.col_idx().begin());
  std::copy(y.values + first, y.values + first + nnz, out.values().begin());
  return out;
}

}  // namespace sdnn::dist
