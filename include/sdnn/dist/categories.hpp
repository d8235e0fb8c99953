// sdnn/dist/categories.hpp - from each rank's categories to the program's (host only; no MPI).
//
// A rank runs inference on its block [begin, end) of the inputs and gets its categories (the
// inputs the run selects, e.g. those still active after the last layer) as ascending 1-based ids
// local to the block. to_global_ids turns them into the program's ids; merge_categories joins the
// ranks' lists into one ascending list. A duplicate id (two ranks claiming one input), an id < 1,
// or an id outside the rank's block is an sdnn::error: never a silently wrong or partial list.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/dist/partition.hpp"

namespace sdnn::dist {

// Local 1-based ids (strictly ascending, each in [1, block.size()]) -> global 1-based ids
// (local + block.begin, as int64).
template <class Id>
std::vector<std::int64_t> to_global_ids(std::vector<Id> const& local, input_range block) {
  std::vector<std::int64_t> out;
  out.reserve(local.size());
  std::int64_t last = 0;
  for (std::size_t k = 0; k < local.size(); ++k) {
    std::int64_t const id = static_cast<std::int64_t>(local[k]);
    SDNN_EXPECTS(id >= 1 && id <= block.size(), "dist::to_global_ids: local id ", id, " (entry ", k,
                 ") is out of range for a block of ", block.size(), " inputs");
    SDNN_EXPECTS(id > last, "dist::to_global_ids: local ids must be strictly ascending, entry ", k, " = ", id,
                 " follows ", last);
    last = id;
    out.push_back(id + block.begin);
  }
  return out;
}

// ids holds every rank's list one after the other (rank 0 first), counts[r] entries of rank r
// (the layout MPI_Gatherv produces). With a partition (parts == counts.size()), rank r's ids
// must lie in its block (1-based: begin + 1 .. end). With contiguous blocks in rank order the
// result is the concatenation, checked; lists from any other split are sorted.
inline std::vector<std::int64_t> merge_categories(std::vector<std::int64_t> ids, std::vector<std::int64_t> const& counts,
                                                  partition const* blocks = nullptr) {
  std::int64_t total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    SDNN_EXPECTS(counts[r] >= 0, "dist::merge_categories: rank ", r, " has a negative count ", counts[r]);
    total += counts[r];
  }
  SDNN_EXPECTS(total == static_cast<std::int64_t>(ids.size()), "dist::merge_categories: the counts add up to ", total,
               " but ", ids.size(), " ids were given");
  if (blocks) {
    SDNN_EXPECTS(static_cast<std::size_t>(blocks->parts()) == counts.size(), "dist::merge_categories: ", counts.size(),
                 " ranks' lists for a partition of ", blocks->parts(), " parts");
    std::size_t k = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      input_range const b = blocks->range(static_cast<int>(r));
      for (std::int64_t j = 0; j < counts[r]; ++j, ++k)
        SDNN_EXPECTS(ids[k] > b.begin && ids[k] <= b.end, "dist::merge_categories: rank ", r, " reports id ", ids[k],
                     " outside its inputs ", b.begin + 1, "..", b.end, " (1-based)");
    }
  }
  for (std::size_t k = 0; k < ids.size(); ++k)
    SDNN_EXPECTS(ids[k] >= 1, "dist::merge_categories: ids are 1-based, got ", ids[k], " (entry ", k, ")");
  if (!std::is_sorted(ids.begin(), ids.end())) std::sort(ids.begin(), ids.end());
  auto const dup = std::adjacent_find(ids.begin(), ids.end());
  SDNN_EXPECTS(dup == ids.end(), "dist::merge_categories: id ", dup == ids.end() ? 0 : *dup,
               " is reported twice (two ranks computed the same input, or one rank listed it twice)");
  return ids;
}

// The same from one list per rank.
inline std::vector<std::int64_t> merge_categories(std::vector<std::vector<std::int64_t>> const& per_rank,
                                                  partition const* blocks = nullptr) {
  std::vector<std::int64_t> ids, counts;
  for (auto const& l : per_rank) {
    counts.push_back(static_cast<std::int64_t>(l.size()));
    ids.insert(ids.end(), l.begin(), l.end());
  }
  return merge_categories(std::move(ids), counts, blocks);
}

}  // namespace sdnn::dist
