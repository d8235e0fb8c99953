// sdnn/io/triplets.hpp - (row, col, value) triplets -> host CSR, used by the file readers.
//
// Triplets may come in any order (a file may be sorted by column, for example). The result
// satisfies every csr invariant; duplicates are rejected or summed in file order, as the format
// demands. Errors name the source and, through the caller's line_of(k), the lines of the entries
// involved.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/formats/csr.hpp"

namespace sdnn::io::detail {

enum class duplicate_policy { reject, sum };

// line_of for sources without line numbers.
struct no_lines {
  std::size_t operator()(std::size_t) const { return 0; }
};

// sum = a + b when the sum fits T (integers) or is finite (floating point; any sum when
// allow_non_finite); false otherwise, sum untouched.
template <class T>
bool checked_add(T a, T b, T& sum, bool allow_non_finite) {
  if constexpr (std::is_floating_point_v<T>) {
    T const s = a + b;
    if (!allow_non_finite && !std::isfinite(s)) return false;
    sum = s;
    return true;
  } else if constexpr (std::is_integral_v<T>) {
    constexpr T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    if constexpr (std::is_signed_v<T>) {
      if ((b > 0 && a > hi - b) || (b < 0 && a < lo - b)) return false;
    } else {
      if (a > hi - b) return false;
    }
    sum = static_cast<T>(a + b);
    return true;
  } else {
    sum = a + b;
    return true;
  }
}

// " line 7" / "" (unknown line), for "io: 'file' line 7: ...".
inline std::string at_line(std::size_t line) {
  return line ? sdnn::detail::concat(" line ", line) : std::string();
}

// rows x cols CSR from 0-based triplets (already range-checked by the caller). `where`
// names the source in error messages (the file path); line_of(k) gives triplet k's line (1-based,
// 0 when unknown), called only on the error path, so a reader may find the line by reading its
// input again. Rows by counting sort (stable), columns sorted within a row (only rows that arrive
// unsorted are sorted), duplicates rejected or summed in file order (dup). A sum of duplicates
// that does not fit T (integers), or that overflows to Inf (floating point, unless allowed) is an
// error. Memory: the result's arrays (one row pointer array of rows + 1, nnz columns and values)
// and, only for rows that arrive unsorted, a scratch copy of that row; a second result is built
// only when duplicates were summed. The caller bounds rows (read_options).
template <class T, class Index, class LineOf = no_lines>
csr_matrix<T, Index> triplets_to_csr(Index rows, Index cols, std::vector<Index> const& r,
                                     std::vector<Index> const& c, std::vector<T> const& v,
                                     duplicate_policy dup, std::string const& where, LineOf&& line_of = {},
                                     bool allow_non_finite = true) {
  std::size_t const n = r.size();
  SDNN_EXPECTS(c.size() == n && v.size() == n, "io: triplet arrays differ in length");
  SDNN_EXPECTS(n <= static_cast<std::size_t>(std::numeric_limits<Index>::max()), "io: '", where, "' has ", n,
               " entries, more than the index type can address");
  auto const uz = [](Index x) { return static_cast<std::size_t>(x); };
  try {
    csr_matrix<T, Index> a(rows, cols, static_cast<Index>(n));  // row_ptr all 0
    Index* ptr = a.row_ptr().data();
    Index* col = a.col_idx().data();
    T* val = a.values().data();
    // Counting sort by row (stable: file order within a row). ptr[i] serves as row i's
    // cursor, after which it holds row i + 1's start; shifting it back restores the starts.
    for (std::size_t k = 0; k < n; ++k) ++ptr[uz(r[k]) + 1];
    for (std::size_t i = 0; i < uz(rows); ++i) ptr[i + 1] += ptr[i];
    for (std::size_t k = 0; k < n; ++k) {
      Index const at = ptr[uz(r[k])]++;
      col[uz(at)] = c[k];
      val[uz(at)] = v[k];
    }
    for (std::size_t i = uz(rows); i > 0; --i) ptr[i] = ptr[i - 1];
    ptr[0] = 0;

    // Sort rows that are not strictly increasing (stable: duplicates stay in file order);
    // then reject or merge equal columns, compacting in place.
    std::vector<std::pair<Index, T>> tmp;
    std::size_t out = 0;
    Index row_start = 0;
    for (Index i = 0; i < rows; ++i) {
      std::size_t const b = uz(ptr[uz(i)]);
      std::size_t const e = uz(ptr[uz(i) + 1]);
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
      ptr[uz(i)] = row_start;
      for (std::size_t k = b; k < e; ++k) {
        if (out > uz(row_start) && col[out - 1] == col[k]) {
          Index const j = col[k];
          if (dup == duplicate_policy::reject) {
            // The first two triplets at (i, j), in input order.
            std::size_t first = n, second = n;
            for (std::size_t q = 0; q < n && second == n; ++q)
              if (r[q] == i && c[q] == j) (first == n ? first : second) = q;
            std::size_t const l1 = first < n ? line_of(first) : 0, l2 = second < n ? line_of(second) : 0;
            SDNN_FAIL("io: '", where, "'", at_line(l2),
                      ": duplicate entry at row ", i + 1, ", column ", j + 1, " (1-based)",
                      l1 ? sdnn::detail::concat(", first given at line ", l1) : std::string());
          }
          if (!checked_add(val[out - 1], val[k], val[out - 1], allow_non_finite)) {
            // Replay the sum in input order to find the entry that overflows it.
            std::size_t culprit = n;
            T sum{};
            bool started = false;
            for (std::size_t q = 0; q < n && culprit == n; ++q) {
              if (r[q] != i || c[q] != j) continue;
              if (!started) {
                sum = v[q];
                started = true;
              } else if (!checked_add(sum, v[q], sum, allow_non_finite)) {
                culprit = q;
              }
            }
            SDNN_FAIL("io: '", where, "'", culprit < n ? at_line(line_of(culprit)) : std::string(),
                      ": summing the duplicate entries at row ", i + 1, ", column ", j + 1, " (1-based) ",
                      std::is_integral_v<T> ? "overflows the value type" : "overflows to Inf");
          }
          continue;
        }
        col[out] = col[k];
        val[out] = val[k];
        ++out;
      }
      row_start = static_cast<Index>(out);
    }
    ptr[uz(rows)] = static_cast<Index>(out);
    if (out == n) return a;
    csr_matrix<T, Index> m(rows, cols, static_cast<Index>(out));
    std::copy(ptr, ptr + uz(rows) + 1, m.row_ptr().begin());
    std::copy(col, col + out, m.col_idx().begin());
    std::copy(val, val + out, m.values().begin());
    return m;
  } catch (std::bad_alloc const&) {
    SDNN_FAIL("io: '", where, "': out of memory building the ", rows, " x ", cols, " CSR of ", n, " entries");
  } catch (std::length_error const&) {
    SDNN_FAIL("io: '", where, "': out of memory building the ", rows, " x ", cols, " CSR of ", n, " entries");
  }
}

}  // namespace sdnn::io::detail
