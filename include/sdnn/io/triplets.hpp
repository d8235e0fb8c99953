// sdnn/io/triplets.hpp - (row, col, value) triplets -> host CSR, used by the file readers.
//
// Triplets may come in any order (the official Graph Challenge files are sorted by column).
// The result satisfies every csr invariant: rows by counting sort (stable), columns sorted
// within a row (only rows that arrive unsorted are sorted), duplicates rejected or summed
// in file order, as the format demands.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/formats/csr.hpp"

namespace sdnn::io::detail {

enum class duplicate_policy { reject, sum };

// rows x cols CSR from 0-based triplets (already range-checked by the caller). `where`
// names the source in error messages (the file path).
template <class T, class Index>
csr_matrix<T, Index> triplets_to_csr(Index rows, Index cols, std::vector<Index> const& r,
                                     std::vector<Index> const& c, std::vector<T> const& v,
                                     duplicate_policy dup, std::string const& where) {
  std::size_t const n = r.size();
  SDNN_EXPECTS(c.size() == n && v.size() == n, "io: triplet arrays differ in length");
  SDNN_EXPECTS(n <= static_cast<std::size_t>(std::numeric_limits<Index>::max()), "io: '", where, "' has ", n,
               " entries, more than the index type can address");
  std::vector<Index> ptr(static_cast<std::size_t>(rows) + 1, 0);
  for (std::size_t k = 0; k < n; ++k) ++ptr[static_cast<std::size_t>(r[k]) + 1];
  for (std::size_t i = 0; i < static_cast<std::size_t>(rows); ++i) ptr[i + 1] += ptr[i];
  std::vector<Index> col(n);
  std::vector<T> val(n);
  {
    std::vector<Index> fill(ptr.begin(), ptr.end() - 1);
    for (std::size_t k = 0; k < n; ++k) {
      Index const at = fill[static_cast<std::size_t>(r[k])]++;
      col[static_cast<std::size_t>(at)] = c[k];
      val[static_cast<std::size_t>(at)] = v[k];
    }
  }
  // Sort rows that are not strictly increasing; then reject or merge equal columns.
  std::vector<std::pair<Index, T>> tmp;
  std::size_t out = 0;
  Index row_start = 0;
  for (Index i = 0; i < rows; ++i) {
    std::size_t const b = static_cast<std::size_t>(ptr[static_cast<std::size_t>(i)]);
    std::size_t const e = static_cast<std::size_t>(ptr[static_cast<std::size_t>(i) + 1]);
    bool sorted = true;
    for (std::size_t k = b + 1; k < e && sorted; ++k) sorted = col[k - 1] < col[k];
    if (!sorted) {
      tmp.clear();
      for (std::size_t k = b; k < e; ++k) tmp.emplace_back(col[k], val[k]);
      std::stable_sort(tmp.begin(), tmp.end(), [](auto const& x, auto const& y) { return x.first < y.first; });
      for (std::size_t k = b; k < e; ++k) {
        col[k] = tmp[k - b].first;
        val[k] = tmp[k - b].second;
      }
    }
    ptr[static_cast<std::size_t>(i)] = row_start;
    for (std::size_t k = b; k < e; ++k) {
      if (out > static_cast<std::size_t>(row_start) && col[out - 1] == col[k]) {
        SDNN_EXPECTS(dup == duplicate_policy::sum, "io: '", where, "': duplicate entry at row ", i + 1,
                     ", column ", col[k] + 1, " (1-based)");
        val[out - 1] += val[k];
        continue;
      }
      col[out] = col[k];
      val[out] = val[k];
      ++out;
    }
    row_start = static_cast<Index>(out);
  }
  ptr[static_cast<std::size_t>(rows)] = static_cast<Index>(out);

  csr_matrix<T, Index> a(rows, cols, static_cast<Index>(out));
  std::copy(ptr.begin(), ptr.end(), a.row_ptr().begin());
  std::copy(col.begin(), col.begin() + static_cast<std::ptrdiff_t>(out), a.col_idx().begin());
  std::copy(val.begin(), val.begin() + static_cast<std::ptrdiff_t>(out), a.values().begin());
  return a;
}

}  // namespace sdnn::io::detail
