// sdnn/io/matrix_market.hpp - MatrixMarket coordinate files <-> host CSR (host only).
//
// Reads "%%MatrixMarket matrix coordinate <field> <symmetry>" (the banner exact, the keywords
// after it case-insensitive, as NIST mmio) with field real | integer | pattern (pattern
// entries get the value 1) and symmetry general | symmetric | skew-symmetric (the stored
// lower triangle is mirrored; the mirror of a skew-symmetric entry is negated). Then '%' comment lines, the size line
// "rows cols entries", and exactly `entries` lines "i j [value]", 1-based. Duplicate
// entries are summed in file order (the common convention, e.g. scipy). Plain or gzip'd.
// Complex/hermitian, array format, bad headers, bad tokens, out-of-range or zero indices,
// a wrong entry count: sdnn::error naming the file and the 1-based line.
//
// write_matrix_market writes "coordinate real general" (floating T) or "coordinate integer
// general" (integral T), row-major, values with max_digits10 digits (exact round trip).
#pragma once

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/io/file_stream.hpp"
#include "sdnn/io/triplets.hpp"

namespace sdnn::io {

struct matrix_market_header {
  std::string field = "real";         // real | integer | pattern
  std::string symmetry = "general";  // general | symmetric | skew-symmetric
};

template <class T = double, class Index = std::int32_t>
csr_matrix<T, Index> read_matrix_market(std::string const& path, matrix_market_header* header_out = nullptr) {
  static_assert(std::is_arithmetic_v<T>, "read_matrix_market: T must be an arithmetic type");
  line_reader in(path);
  std::string_view line, f[5];
  auto lower = [](std::string_view s) {
    std::string r(s);
    for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return r;
  };
  SDNN_EXPECTS(in.next(line), "io: '", path, "' is empty (expected a %%MatrixMarket header)");
  std::size_t n = detail::split_fields(line, f, 5);
  SDNN_EXPECTS(n == 5 && f[0] == "%%MatrixMarket" && lower(f[1]) == "matrix", "io: '", path,
               "' line 1: expected '%%MatrixMarket matrix coordinate <field> <symmetry>', got '", line, "'");
  SDNN_EXPECTS(lower(f[2]) == "coordinate", "io: '", path, "' line 1: only the coordinate format is supported, got '",
               f[2], "'");
  matrix_market_header h{lower(f[3]), lower(f[4])};
  SDNN_EXPECTS(h.field == "real" || h.field == "integer" || h.field == "pattern", "io: '", path,
               "' line 1: field must be real, integer or pattern, got '", f[3], "'");
  SDNN_EXPECTS(h.symmetry == "general" || h.symmetry == "symmetric" || h.symmetry == "skew-symmetric", "io: '",
               path, "' line 1: symmetry must be general, symmetric or skew-symmetric, got '", f[4], "'");

  // Comments, then the size line.
  std::int64_t rows = -1, cols = -1, entries = -1;
  while (in.next(line)) {
    if (detail::is_blank_line(line) || line.front() == '%') continue;
    n = detail::split_fields(line, f, 3);
    SDNN_EXPECTS(n == 3 && detail::parse_int(f[0], rows) && detail::parse_int(f[1], cols) &&
                     detail::parse_int(f[2], entries) && rows >= 0 && cols >= 0 && entries >= 0,
                 "io: '", path, "' line ", in.line_number(), ": expected the size line 'rows cols entries', got '",
                 line, "'");
    break;
  }
  SDNN_EXPECTS(rows >= 0, "io: '", path, "': no size line after the header");
  SDNN_EXPECTS(rows <= std::numeric_limits<Index>::max() && cols <= std::numeric_limits<Index>::max(), "io: '",
               path, "': ", rows, " x ", cols, " does not fit the index type");
  bool const sym = h.symmetry != "general";
  SDNN_EXPECTS(!sym || rows == cols, "io: '", path, "': a ", h.symmetry, " matrix must be square, got ", rows,
               " x ", cols);
  std::size_t const want = h.field == "pattern" ? 2 : 3;

  std::vector<Index> ri, ci;
  std::vector<T> vi;
  ri.reserve(static_cast<std::size_t>(entries) * (sym ? 2 : 1));
  std::int64_t seen = 0;
  while (in.next(line)) {
    if (detail::is_blank_line(line) || line.front() == '%') continue;
    n = detail::split_fields(line, f, 3);
    SDNN_EXPECTS(n == want, "io: '", path, "' line ", in.line_number(), ": expected ", want, " fields for a ",
                 h.field, " entry, got ", n > 3 ? std::string("more than 3") : std::to_string(n));
    SDNN_EXPECTS(seen < entries, "io: '", path, "' line ", in.line_number(), ": more entries than the ", entries,
                 " the size line announced");
    std::int64_t i = 0, j = 0;
    SDNN_EXPECTS(detail::parse_int(f[0], i) && detail::parse_int(f[1], j), "io: '", path, "' line ",
                 in.line_number(), ": indices '", f[0], "' '", f[1], "' are not integers");
    SDNN_EXPECTS(i >= 1 && i <= rows && j >= 1 && j <= cols, "io: '", path, "' line ", in.line_number(),
                 ": entry (", i, ", ", j, ") is out of range for ", rows, " x ", cols, " (indices are 1-based)");
    T v = T(1);
    if (want == 3) {
      bool ok;
      if (h.field == "integer") {
        std::int64_t iv = 0;
        ok = detail::parse_int(f[2], iv);
        v = static_cast<T>(iv);
      } else if constexpr (std::is_floating_point_v<T>) {
        ok = detail::parse_real(f[2], v);
      } else {
        double dv = 0;
        ok = detail::parse_real(f[2], dv);
        v = static_cast<T>(dv);
      }
      SDNN_EXPECTS(ok, "io: '", path, "' line ", in.line_number(), ": value '", f[2], "' is not a valid ", h.field,
                   " number");
    }
    SDNN_EXPECTS(!sym || i >= j, "io: '", path, "' line ", in.line_number(), ": a ", h.symmetry,
                 " file stores only the lower triangle, got entry (", i, ", ", j, ")");
    SDNN_EXPECTS(h.symmetry != "skew-symmetric" || i != j, "io: '", path, "' line ", in.line_number(),
                 ": a skew-symmetric matrix has no diagonal entries, got (", i, ", ", j, ")");
    ri.push_back(static_cast<Index>(i - 1));
    ci.push_back(static_cast<Index>(j - 1));
    vi.push_back(v);
    if (sym && i != j) {
      ri.push_back(static_cast<Index>(j - 1));
      ci.push_back(static_cast<Index>(i - 1));
      vi.push_back(h.symmetry == "skew-symmetric" ? static_cast<T>(-v) : v);
    }
    ++seen;
  }
  SDNN_EXPECTS(seen == entries, "io: '", path, "': the size line announced ", entries, " entries, the file has ",
               seen, " (ends at line ", in.line_number(), ")");
  if (header_out) *header_out = h;
  return detail::triplets_to_csr<T, Index>(static_cast<Index>(rows), static_cast<Index>(cols), ri, ci, vi,
                                           detail::duplicate_policy::sum, path);
}

template <class T, class Index>
void write_matrix_market(std::string const& path, csr_view<T, Index> m, bool gzip = false) {
  static_assert(std::is_arithmetic_v<T>, "write_matrix_market: T must be an arithmetic type");
  byte_writer out(path, gzip);
  std::string text = sdnn::detail::concat("%%MatrixMarket matrix coordinate ",
                                    std::is_floating_point_v<T> ? "real" : "integer", " general\n",
                                    "% written by sdnn\n", m.rows, " ", m.cols, " ", m.nnz, "\n");
  char buf[96];
  for (Index i = 0; i < m.rows; ++i) {
    for (Index k = m.row_ptr[i]; k < m.row_ptr[i + 1]; ++k) {
      int len;
      if constexpr (std::is_floating_point_v<T>)
        len = std::snprintf(buf, sizeof(buf), "%lld %lld %.*g\n", static_cast<long long>(i) + 1,
                            static_cast<long long>(m.col_idx[k]) + 1, std::numeric_limits<T>::max_digits10,
                            static_cast<double>(m.values[k]));
      else
        len = std::snprintf(buf, sizeof(buf), "%lld %lld %lld\n", static_cast<long long>(i) + 1,
                            static_cast<long long>(m.col_idx[k]) + 1, static_cast<long long>(m.values[k]));
      text.append(buf, static_cast<std::size_t>(len));
      if (text.size() >= (std::size_t(1) << 20)) {
        out.write(text);
        text.clear();
      }
    }
  }
  out.write(text);
  out.close();
}

}  // namespace sdnn::io
