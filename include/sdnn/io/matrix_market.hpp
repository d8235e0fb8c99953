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
#include <cstdlib>
#include <cstring>
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

// The value types the reader and the writer take: integers of at most 64 bits other than bool,
// float, double and long double (std::numeric_limits describes each exactly).
template <class T>
inline constexpr bool mm_value_type =
    (std::is_integral_v<T> && !std::is_same_v<T, bool> && sizeof(T) <= 8) || std::is_same_v<T, float> ||
    std::is_same_v<T, double> || std::is_same_v<T, long double>;

// A decimal token's exact value as an integer of at most 64 bits: sign, digits with an optional
// '.', an optional exponent ("12", "-3", "2.0", "1e3", "1.5e1"). ok sets neg and mag; else
// malformed (not this grammar), fraction (not integral) or range (more than 64 bits). Exact
// where a double is not (2^53 + 1 stays 2^53 + 1).
enum class decimal_integer { ok, malformed, fraction, range };
inline decimal_integer parse_decimal_integer(std::string_view s, bool& neg, std::uint64_t& mag) {
  std::size_t i = 0;
  neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  std::string digits;  // significant digits, leading zeros dropped
  std::int64_t frac = 0, exp = 0;
  bool any = false, dot = false;
  for (; i < s.size(); ++i) {
    char const ch = s[i];
    if (ch >= '0' && ch <= '9') {
      any = true;
      if (!digits.empty() || ch != '0') digits += ch;
      if (dot) ++frac;
    } else if (ch == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (!any) return decimal_integer::malformed;
  if (i < s.size()) {
    if (s[i] != 'e' && s[i] != 'E') return decimal_integer::malformed;
    bool eneg = false;
    if (++i < s.size() && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
    if (i == s.size()) return decimal_integer::malformed;
    for (; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9') return decimal_integer::malformed;
      if (exp < (std::int64_t(1) << 50)) exp = exp * 10 + (s[i] - '0');  // beyond: out of range anyway
    }
    if (eneg) exp = -exp;
  }
  mag = 0;
  if (digits.empty()) return decimal_integer::ok;  // zero, whatever the exponent
  std::int64_t shift = exp - frac;     // value = digits * 10^shift
  // Trailing zeros absorb a negative shift; any other digit left behind the point is a fraction.
  while (shift < 0 && digits.back() == '0') {
    digits.pop_back();
    ++shift;
  }
  if (shift < 0) return decimal_integer::fraction;
  if (static_cast<std::int64_t>(digits.size()) + shift > 20) return decimal_integer::range;
  digits.append(static_cast<std::size_t>(shift), '0');
  for (char ch : digits) {
    unsigned const d = static_cast<unsigned>(ch - '0');
    if (mag > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return decimal_integer::range;
    mag = mag * 10 + d;
  }
  return decimal_integer::ok;
}

// Parses a MatrixMarket value field into T; returns nullptr on success, else what is wrong with
// it (for "value '...' <why>"). Values must fit T exactly: an integral T takes integers in its
// range, read exactly (an integer field, or a real field whose values are integral: '2.0' and
// '1e3' read as 2 and 1000; '1.5', '1e32', '9999999999' into int32, NaN and Inf are refused); a
// floating-point T takes values in its range (rounded to nearest; long double subnormals
// included), NaN and Inf only with read_options::allow_non_finite.
template <class T>
char const* parse_mm_value(std::string_view s, bool integer_field, bool allow_non_finite, T& out) {
  static_assert(mm_value_type<T>, "read_matrix_market: T must be an integer type of at most 64 bits (not bool), "
                                  "float, double or long double");
  if constexpr (std::is_floating_point_v<T>) {
    if (integer_field) {
      bool neg = false;
      std::uint64_t mag = 0;
      if (s.find_first_of(".eE") != std::string_view::npos || parse_decimal_integer(s, neg, mag) != decimal_integer::ok)
        return "is not a valid integer (or does not fit 64 bits)";
      out = neg && mag > 0 ? -static_cast<T>(mag) : static_cast<T>(mag);  // one rounding
      return nullptr;
    }
    if (!parse_real(s, out)) {
      long double wide = 0;
      if (!parse_real(s, wide)) {
        // from_chars reports a long double subnormal as out of range (it has no wider type to
        // fall back on, as parse_real does for float and double): take strtold's rounding.
        if constexpr (std::is_same_v<T, long double>) {
          if (s.size() < 128) {
            char tmp[128];
            std::memcpy(tmp, s.data(), s.size());
            tmp[s.size()] = '\0';
            char* end = nullptr;
            long double const v = std::strtold(tmp, &end);
            if (end == tmp + s.size() && std::isfinite(v) && std::fabs(v) < std::numeric_limits<long double>::min()) {
              out = v;
              return nullptr;
            }
          }
        }
        return "is not a valid real number";
      }
      return "is out of the range of the value type";
    }
    if (!allow_non_finite && !std::isfinite(out)) return "is not finite (NaN and Inf are refused)";
    return nullptr;
  } else {
    bool neg = false;
    std::uint64_t mag = 0;
    decimal_integer const got = parse_decimal_integer(s, neg, mag);
    if (got != decimal_integer::ok && integer_field) return "is not a valid integer (or does not fit 64 bits)";
    if (got == decimal_integer::malformed) {
      double d = 0;
      if (parse_real(s, d) && !std::isfinite(d)) return "is not finite (NaN and Inf do not fit an integer type)";
      return "is not a valid real number";
    }
    if (got == decimal_integer::fraction) return "is not an integer (the matrix is read with an integer value type)";
    if (got == decimal_integer::range) return "does not fit the value type";
    if (integer_field && s.find_first_of(".eE") != std::string_view::npos)
      return "is not a valid integer (or does not fit 64 bits)";
    // T's range as magnitudes: [0, max] up, [0, -lowest] down (0 for an unsigned T).
    std::uint64_t const up = static_cast<std::uint64_t>(std::numeric_limits<T>::max());
    std::uint64_t const down = std::is_signed_v<T> ? up + 1 : 0;
    if (neg ? mag > down : mag > up) return "does not fit the value type";
    // -mag for mag in [1, 2^63] without overflow.
    out = neg && mag > 0 ? static_cast<T>(-static_cast<std::int64_t>(mag - 1) - 1) : static_cast<T>(mag);
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
// row-major: integers in full (unsigned 64-bit ones too), floating values with T's max_digits10
// digits in T's own precision (long double is not narrowed to double), so read_matrix_market<T>
// gives back exactly the same values.
template <class T, class Index>
void write_matrix_market(std::string const& path, csr_view<T, Index> m, bool gzip = false) {
  static_assert(detail::mm_value_type<T>, "write_matrix_market: T must be an integer type of at most 64 bits (not "
                                          "bool), float, double or long double (what read_matrix_market reads back)");
  byte_writer out(path, gzip);
  std::string text = sdnn::detail::concat("%%MatrixMarket matrix coordinate ",
                                    std::is_floating_point_v<T> ? "real" : "integer", " general\n",
                                    "% written by sdnn\n", m.rows, " ", m.cols, " ", m.nnz, "\n");
  char buf[96];
  for (Index i = 0; i < m.rows; ++i) {
    for (Index k = m.row_ptr[i]; k < m.row_ptr[i + 1]; ++k) {
      long long const r = static_cast<long long>(i) + 1, c = static_cast<long long>(m.col_idx[k]) + 1;
      int len;
      if constexpr (std::is_same_v<T, long double>)
        len = std::snprintf(buf, sizeof(buf), "%lld %lld %.*Lg\n", r, c, std::numeric_limits<T>::max_digits10,
                            m.values[k]);
      else if constexpr (std::is_floating_point_v<T>)
        len = std::snprintf(buf, sizeof(buf), "%lld %lld %.*g\n", r, c, std::numeric_limits<T>::max_digits10,
                            static_cast<double>(m.values[k]));  // exact: float and double are doubles
      else if constexpr (std::is_signed_v<T>)
        len = std::snprintf(buf, sizeof(buf), "%lld %lld %lld\n", r, c, static_cast<long long>(m.values[k]));
      else
        len = std::snprintf(buf, sizeof(buf), "%lld %lld %llu\n", r, c, static_cast<unsigned long long>(m.values[k]));
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
