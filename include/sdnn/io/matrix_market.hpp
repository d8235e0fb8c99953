// sdnn/io/matrix_market.hpp - MatrixMarket coordinate files <-> host CSR (host only), plain or
// gzip'd, from a path or an io::input (a file or bytes in memory). The reader takes field real |
// integer | pattern and symmetry general | symmetric | skew-symmetric, 1-based, duplicates summed
// in file order; a malformed file, a value that does not fit T, or a size above
// read_options::max_claimed_bytes is an sdnn::error naming the file and the 1-based line. The
// writer writes "coordinate real general" (floating T) or "coordinate integer general" (integral
// T) that reads back exactly.
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <new>
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

namespace detail {

// "int32", "uint8", "float", "double" for messages.
template <class T>
std::string value_type_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_floating_point_v<T>) return "long double";
  else return sdnn::detail::concat(std::is_signed_v<T> ? "int" : "uint", 8 * sizeof(T));
}

// Parses a MatrixMarket value field into T; returns nullptr on success, else what is wrong with
// it (for "value '...' <why>"). Values must fit T exactly as far as T can say: an integral T
// takes integers in its range (an integer field, or a real field whose values are integral:
// '2.0' reads as 2; '1.5', '1e32', '9999999999' into int32, NaN and Inf are refused); a
// floating-point T takes values in its range (rounded to nearest), NaN and Inf only with
// read_options::allow_non_finite.
template <class T>
char const* parse_mm_value(std::string_view s, bool integer_field, bool allow_non_finite, T& out) {
  if constexpr (std::is_floating_point_v<T>) {
    if (integer_field) {
      std::int64_t iv = 0;
      if (!parse_int(s, iv)) return "is not a valid integer (or does not fit 64 bits)";
      out = static_cast<T>(iv);
      return nullptr;
    }
    if (!parse_real(s, out)) {
      long double wide = 0;
      return parse_real(s, wide) ? "is out of the range of the value type" : "is not a valid real number";
    }
    if (!allow_non_finite && !std::isfinite(out)) return "is not finite (NaN and Inf are refused)";
    return nullptr;
  } else {
    static_assert(std::is_integral_v<T>, "parse_mm_value: T must be an arithmetic type");
    constexpr T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    if (integer_field) {
      std::int64_t iv = 0;
      if (!parse_int(s, iv)) return "is not a valid integer (or does not fit 64 bits)";
      bool fits;
      if constexpr (std::is_signed_v<T>)
        fits = iv >= static_cast<std::int64_t>(lo) && iv <= static_cast<std::int64_t>(hi);
      else fits = iv >= 0 && static_cast<std::uint64_t>(iv) <= static_cast<std::uint64_t>(hi);
      if (!fits) return "does not fit the value type";
      out = static_cast<T>(iv);
      return nullptr;
    }
    double d = 0;
    if (!parse_real(s, d)) return "is not a valid real number";
    if (!std::isfinite(d)) return "is not finite (NaN and Inf do not fit an integer type)";
    if (d != std::trunc(d)) return "is not an integer (the matrix is read with an integer value type)";
    // [lo, 2^digits) as exact doubles: T's range without rounding max up.
    double const top = std::ldexp(1.0, std::numeric_limits<T>::digits);
    double const bottom = std::is_signed_v<T> ? -top : 0.0;
    if (!(d >= bottom && d < top)) return "does not fit the value type";
    out = static_cast<T>(d);
    return nullptr;
  }
}

// Parses a MatrixMarket coordinate file: on_size(rows, cols, entries, line) once at the size
// line, then sink(i, j, v, line) for each stored entry and each mirrored one (0-based), until
// sink returns false. Every check of the format is here; the caller decides what to keep.
// The format: "%%MatrixMarket matrix coordinate <field> <symmetry>" (the banner exact, the
// keywords after it case-insensitive, as NIST mmio) with field real | integer | pattern (pattern
// entries get the value 1) and symmetry general | symmetric | skew-symmetric (the stored lower
// triangle is mirrored; the mirror of a skew-symmetric entry is negated, and must fit T too:
// INT_MIN has none). Then '%' comment lines, the size line "rows cols entries", and exactly
// `entries` lines "i j [value]", 1-based. Complex/hermitian, array format, bad headers, bad
// tokens, out-of-range or zero indices, a wrong entry count, values that do not fit, a line
// longer than read_options::max_line_bytes: sdnn::error naming the file and the 1-based line.
template <class T, class Index, class OnSize, class Sink>
matrix_market_header parse_matrix_market(input const& src, read_options const& opt, OnSize&& on_size, Sink&& sink) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                "read_matrix_market: T must be an arithmetic type other than bool");
  std::string const& path = src.name();
  line_reader in(src, opt);
  std::string_view line, f[5];
  auto lower = [](std::string_view s) {
    std::string r(s);
    for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return r;
  };
  SDNN_EXPECTS(in.next(line), "io: '", path, "' is empty (expected a %%MatrixMarket header)");
  std::size_t n = split_fields(line, f, 5);
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
    if (is_blank_line(line) || line.front() == '%') continue;
    n = split_fields(line, f, 3);
    SDNN_EXPECTS(n == 3 && parse_int(f[0], rows) && parse_int(f[1], cols) && parse_int(f[2], entries) && rows >= 0 &&
                     cols >= 0 && entries >= 0,
                 "io: '", path, "' line ", in.line_number(), ": expected the size line 'rows cols entries', got '",
                 line, "'");
    break;
  }
  SDNN_EXPECTS(rows >= 0, "io: '", path, "': no size line after the header");
  SDNN_EXPECTS(rows <= std::numeric_limits<Index>::max() && cols <= std::numeric_limits<Index>::max(), "io: '",
               path, "' line ", in.line_number(), ": ", rows, " x ", cols, " does not fit the index type (max ",
               std::numeric_limits<Index>::max(), ")");
  bool const sym = h.symmetry != "general", skew = h.symmetry == "skew-symmetric";
  SDNN_EXPECTS(!sym || rows == cols, "io: '", path, "' line ", in.line_number(), ": a ", h.symmetry,
               " matrix must be square, got ", rows, " x ", cols);
  on_size(rows, cols, entries, in.line_number());
  std::size_t const want = h.field == "pattern" ? 2 : 3;
  bool const integer_field = h.field == "integer";

  std::int64_t seen = 0;
  while (in.next(line)) {
    if (is_blank_line(line) || line.front() == '%') continue;
    n = split_fields(line, f, 3);
    SDNN_EXPECTS(n == want, "io: '", path, "' line ", in.line_number(), ": expected ", want, " fields for a ",
                 h.field, " entry, got ", n > 3 ? std::string("more than 3") : std::to_string(n));
    SDNN_EXPECTS(seen < entries, "io: '", path, "' line ", in.line_number(), ": more entries than the ", entries,
                 " the size line announced");
    std::int64_t i = 0, j = 0;
    SDNN_EXPECTS(parse_int(f[0], i) && parse_int(f[1], j), "io: '", path, "' line ", in.line_number(), ": indices '",
                 f[0], "' '", f[1], "' are not integers");
    SDNN_EXPECTS(i >= 1 && i <= rows && j >= 1 && j <= cols, "io: '", path, "' line ", in.line_number(),
                 ": entry (", i, ", ", j, ") is out of range for ", rows, " x ", cols, " (indices are 1-based)");
    T v = T(1);
    if (want == 3) {
      char const* why = parse_mm_value(f[2], integer_field, opt.allow_non_finite, v);
      SDNN_EXPECTS(why == nullptr, "io: '", path, "' line ", in.line_number(), ": value '", f[2], "' ",
                   why ? why : "", " (", h.field, " field read as ", value_type_name<T>(), ")");
    }
    SDNN_EXPECTS(!sym || i >= j, "io: '", path, "' line ", in.line_number(), ": a ", h.symmetry,
                 " file stores only the lower triangle, got entry (", i, ", ", j, ")");
    SDNN_EXPECTS(!skew || i != j, "io: '", path, "' line ", in.line_number(),
                 ": a skew-symmetric matrix has no diagonal entries, got (", i, ", ", j, ")");
    ++seen;
    if (!sink(static_cast<Index>(i - 1), static_cast<Index>(j - 1), v, in.line_number())) return h;
    if (sym && i != j) {
      T mirror = v;
      if (skew) {
        if constexpr (std::is_integral_v<T>) {
          bool const negatable = std::is_signed_v<T> ? v != std::numeric_limits<T>::lowest() : v == T(0);
          SDNN_EXPECTS(negatable, "io: '", path, "' line ", in.line_number(), ": the skew-symmetric mirror -(", +v,
                       ") of this entry does not fit ", value_type_name<T>());
        }
        mirror = static_cast<T>(-v);
      }
      if (!sink(static_cast<Index>(j - 1), static_cast<Index>(i - 1), mirror, in.line_number())) return h;
    }
  }
  SDNN_EXPECTS(seen == entries, "io: '", path, "': the size line announced ", entries, " entries, the file has ",
               seen, " (ends at line ", in.line_number(), ")");
  return h;
}

// The line of triplet k (0-based, mirrors counted) of a MatrixMarket input that was read
// without error, found by parsing it again (the error path of triplets_to_csr); 0 when the
// input changed since.
template <class T, class Index>
std::size_t matrix_market_triplet_line(input const& src, read_options const& opt, std::size_t k) {
  std::size_t seen = 0, found = 0;
  try {
    parse_matrix_market<T, Index>(
        src, opt, [](std::int64_t, std::int64_t, std::int64_t, std::size_t) {},
        [&](Index, Index, T, std::size_t line) {
          if (seen++ != k) return true;
          found = line;
          return false;
        });
  } catch (error const&) {
  }
  return found;
}

}  // namespace detail

// Duplicate entries are summed in file order (the common convention, e.g. scipy); a sum that
// overflows (an integer overflow, or a sum that overflows to Inf) is an error with the line.
// Memory: the size line's row count is a claim (rows + 1 row pointers of Index), refused at the
// size line when it exceeds read_options::max_claimed_bytes (default 2 GiB: 536 million int32
// rows), so '2147483647 2147483647 1' fails at once instead of building 8 GiB of row pointers;
// the entry count allocates nothing ahead (entries grow with the lines read).
template <class T = double, class Index = std::int32_t>
csr_matrix<T, Index> read_matrix_market(input const& src, matrix_market_header* header_out = nullptr,
                                        read_options const& opt = {}) {
  return detail::reading(src, [&] {
    std::string const& path = src.name();
    std::int64_t rows = 0, cols = 0;
    std::vector<Index> ri, ci;
    std::vector<T> vi;
    std::size_t at = 0;
    matrix_market_header h;
    try {
      h = detail::parse_matrix_market<T, Index>(
          src, opt,
          [&](std::int64_t r, std::int64_t c, std::int64_t entries, std::size_t line) {
            SDNN_EXPECTS(detail::claim_fits(static_cast<std::uint64_t>(r) + 1, sizeof(Index), opt), "io: '", path,
                         "' line ", line, ": ", r, " rows need (", r, " + 1) x ", sizeof(Index),
                         " bytes of row pointers, more than read_options::max_claimed_bytes = ", opt.max_claimed_bytes,
                         " bytes allow before any entry justifies them (raise it to read this file)");
            rows = r;
            cols = c;
            // Room for the announced entries only up to a small bound: the rest grows with the
            // lines actually read.
            std::size_t const ahead = static_cast<std::size_t>(std::min<std::int64_t>(entries, std::int64_t(1) << 16));
            ri.reserve(ahead);
            ci.reserve(ahead);
            vi.reserve(ahead);
          },
          [&](Index i, Index j, T v, std::size_t line) {
            at = line;
            SDNN_EXPECTS(ri.size() < static_cast<std::size_t>(std::numeric_limits<Index>::max()), "io: '", path,
                         "' line ", line, ": more entries (mirrors included) than the index type can address");
            ri.push_back(i);
            ci.push_back(j);
            vi.push_back(v);
            return true;
          });
    } catch (std::bad_alloc const&) {
      SDNN_FAIL("io: '", path, "' line ", at, ": out of memory after ", ri.size(), " entries");
    }
    if (header_out) *header_out = h;
    return detail::triplets_to_csr<T, Index>(
        static_cast<Index>(rows), static_cast<Index>(cols), ri, ci, vi, detail::duplicate_policy::sum, path,
        [&](std::size_t k) { return detail::matrix_market_triplet_line<T, Index>(src, opt, k); },
        opt.allow_non_finite);
  });
}

template <class T = double, class Index = std::int32_t>
csr_matrix<T, Index> read_matrix_market(std::string const& path, matrix_market_header* header_out = nullptr,
                                        read_options const& opt = {}) {
  return read_matrix_market<T, Index>(input::file(path), header_out, opt);
}

// Writes "coordinate real general" (floating T) or "coordinate integer general" (integral T),
// row-major, values with max_digits10 digits (exact round trip).
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
