// sdnn/io/file_stream.hpp - byte and line streams over plain or gzip'd files (host only).
//
// byte_reader  reads a file as bytes. A file that starts with the gzip magic (1f 8b) is
//              decompressed on the fly through zlib (SDNN_HAS_ZLIB=1); without zlib such a
//              file is rejected with a clear sdnn::error. A truncated or corrupt gzip stream
//              is an error, never a silent short read.
// byte_writer  writes a file, gzip-compressed on request (needs zlib).
// line_reader  yields the lines of a byte_reader from one large buffer (1 MiB, grown for
//              longer lines) without per-line allocation: the views it returns stay valid
//              until the next call. It counts lines (1-based) so parsers can report
//              "file:line: what was wrong".
// The parsing helpers at the end tokenise a line in place: fields are separated by runs
// of spaces or tabs, a trailing '\r' is ignored, integers are hand-parsed and floats go
// through std::from_chars (locale independent, correctly rounded) where the standard
// library has it, else strtof/strtod.
#pragma once

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(SDNN_HAS_ZLIB) && SDNN_HAS_ZLIB
#include <zlib.h>
#endif

#include "sdnn/core/error.hpp"

struct gzFile_s;  // zlib's stream type (gzFile is gzFile_s*), declared for builds without zlib

namespace sdnn::io {

// True when sdnn was built with zlib (gzip'd files can be read and written).
inline constexpr bool has_zlib() {
#if defined(SDNN_HAS_ZLIB) && SDNN_HAS_ZLIB
  return true;
#else
  return false;
#endif
}

class byte_reader {
 public:
  explicit byte_reader(std::string path) : path_(std::move(path)) {
    file_ = std::fopen(path_.c_str(), "rb");
    SDNN_EXPECTS(file_ != nullptr, "io: cannot open '", path_, "' for reading: ", std::strerror(errno));
    unsigned char magic[2] = {0, 0};
    std::size_t const got = std::fread(magic, 1, 2, file_);
    gzipped_ = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (!gzipped_) {
      std::rewind(file_);
      return;
    }
#if defined(SDNN_HAS_ZLIB) && SDNN_HAS_ZLIB
    std::fclose(file_);
    file_ = nullptr;
    gz_ = gzopen(path_.c_str(), "rb");
    SDNN_EXPECTS(gz_ != nullptr, "io: cannot open '", path_, "' as gzip: ", std::strerror(errno));
    gzbuffer(gz_, 1u << 18);
#else
    std::fclose(file_);
    file_ = nullptr;
    SDNN_FAIL("io: '", path_, "' is gzip-compressed, but sdnn was built without zlib (SDNN_HAS_ZLIB); "
              "install zlib and reconfigure, or gunzip the file");
#endif
  }
  ~byte_reader() { close(); }
  byte_reader(byte_reader const&) = delete;
  byte_reader& operator=(byte_reader const&) = delete;

  std::string const& path() const noexcept { return path_; }
  bool gzipped() const noexcept { return gzipped_; }

  // Reads up to n bytes into dst; returns the number read, 0 only at the end of the file.
  // Throws on a read error, a truncated gzip stream or a gzip CRC/data error.
  std::size_t read(char* dst, std::size_t n) {
#if defined(SDNN_HAS_ZLIB) && SDNN_HAS_ZLIB
    if (gz_) {
      std::size_t total = 0;
      while (total < n) {
        unsigned const chunk = static_cast<unsigned>(std::min<std::size_t>(n - total, 1u << 30));
        int const r = gzread(gz_, dst + total, chunk);
        if (r <= 0) {
          int err = Z_OK;
          char const* msg = gzerror(gz_, &err);
          // Z_BUF_ERROR at the end means "unexpected end of file": the stream was cut short.
          SDNN_EXPECTS(r == 0 && err == Z_OK, "io: '", path_, "': gzip stream is ",
                       err == Z_BUF_ERROR ? "truncated" : "corrupt", " (zlib: ", msg ? msg : "?", ")");
          break;
        }
        total += static_cast<std::size_t>(r);
      }
      return total;
    }
#endif
    if (!file_) return 0;
    std::size_t const r = std::fread(dst, 1, n, file_);
    SDNN_EXPECTS(r == n || !std::ferror(file_), "io: read error on '", path_, "'");
    return r;
  }

  // Reads exactly n bytes or throws naming `what` (e.g. "IDX pixel data").
  void read_exact(void* dst, std::size_t n, char const* what) {
    std::size_t got = 0;
    char* p = static_cast<char*>(dst);
    while (got < n) {
      std::size_t const r = read(p + got, n - got);
      if (r == 0) break;
      got += r;
    }
    SDNN_EXPECTS(got == n, "io: '", path_, "' is truncated: expected ", n, " bytes of ", what, ", got ", got);
  }

 private:
  void close() noexcept {
    if (file_) std::fclose(file_);
    file_ = nullptr;
#if defined(SDNN_HAS_ZLIB) && SDNN_HAS_ZLIB
    if (gz_) gzclose(gz_);
    gz_ = nullptr;
#endif
  }
  std::string path_;
  std::FILE* file_ = nullptr;
  [[maybe_unused]] gzFile_s* gz_ = nullptr;  // zlib's gzFile; a member in every build (null without zlib), so the
                            // class has one layout whether or not a translation unit sees zlib
  bool gzipped_ = false;
};

class byte_writer {
 public:
  byte_writer(std::string path, bool gzip) : path_(std::move(path)) {
    if (gzip) {
#if defined(SDNN_HAS_ZLIB) && SDNN_HAS_ZLIB
      gz_ = gzopen(path_.c_str(), "wb6");
      SDNN_EXPECTS(gz_ != nullptr, "io: cannot open '", path_, "' for gzip writing: ", std::strerror(errno));
      gzbuffer(gz_, 1u << 18);
      return;
#else
      SDNN_FAIL("io: cannot write gzip file '", path_, "': sdnn was built without zlib (SDNN_HAS_ZLIB)");
#endif
    }
    file_ = std::fopen(path_.c_str(), "wb");
    SDNN_EXPECTS(file_ != nullptr, "io: cannot open '", path_, "' for writing: ", std::strerror(errno));
  }
  ~byte_writer() {
    try {
      close();
    } catch (...) {  // destructors never throw; call close() to see the error
    }
  }
  byte_writer(byte_writer const&) = delete;
  byte_writer& operator=(byte_writer const&) = delete;

  void write(char const* src, std::size_t n) {
    if (n == 0) return;
#if defined(SDNN_HAS_ZLIB) && SDNN_HAS_ZLIB
    if (gz_) {
      while (n > 0) {
        unsigned const chunk = static_cast<unsigned>(std::min<std::size_t>(n, 1u << 30));
        int const w = gzwrite(gz_, src, chunk);
        SDNN_EXPECTS(w > 0, "io: write error on '", path_, "'");
        src += w;
        n -= static_cast<std::size_t>(w);
      }
      return;
    }
#endif
    SDNN_EXPECTS(file_ && std::fwrite(src, 1, n, file_) == n, "io: write error on '", path_, "'");
  }
  void write(std::string_view s) { write(s.data(), s.size()); }

  // Flushes and closes; throws if the data could not be written completely.
  void close() {
    bool ok = true;
    if (file_) ok = std::fclose(file_) == 0;
    file_ = nullptr;
#if defined(SDNN_HAS_ZLIB) && SDNN_HAS_ZLIB
    if (gz_) ok = gzclose(gz_) == Z_OK && ok;
    gz_ = nullptr;
#endif
    SDNN_EXPECTS(ok, "io: error closing '", path_, "' (disk full?)");
  }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  [[maybe_unused]] gzFile_s* gz_ = nullptr;  // zlib's gzFile; a member in every build (null without zlib), so the
                            // class has one layout whether or not a translation unit sees zlib
};

class line_reader {
 public:
  explicit line_reader(std::string path, std::size_t buffer_bytes = std::size_t(1) << 20)
      : in_(std::move(path)), buf_(buffer_bytes < 64 ? 64 : buffer_bytes) {}

  std::string const& path() const noexcept { return in_.path(); }
  // 1-based number of the line last returned by next() (0 before the first).
  std::size_t line_number() const noexcept { return line_; }

  // The next line without its '\n' (and without a trailing '\r'); false at end of file.
  bool next(std::string_view& line) {
    for (;;) {
      if (pos_ < end_) {
        char const* b = buf_.data() + pos_;
        void const* nl = std::memchr(b, '\n', end_ - pos_);
        if (nl) {
          std::size_t const len = static_cast<char const*>(nl) - b;
          pos_ += len + 1;
          return emit(b, len, line);
        }
      }
      if (eof_) {
        if (pos_ < end_) {  // last line without a final newline
          char const* b = buf_.data() + pos_;
          std::size_t const len = end_ - pos_;
          pos_ = end_;
          return emit(b, len, line);
        }
        return false;
      }
      refill();
    }
  }

 private:
  bool emit(char const* b, std::size_t len, std::string_view& line) {
    if (len > 0 && b[len - 1] == '\r') --len;
    ++line_;
    line = std::string_view(b, len);
    return true;
  }
  void refill() {
    // Move the partial line to the front; grow when one line fills the whole buffer.
    std::size_t const keep = end_ - pos_;
    if (pos_ > 0 && keep > 0) std::memmove(buf_.data(), buf_.data() + pos_, keep);
    pos_ = 0;
    end_ = keep;
    if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);
    std::size_t const r = in_.read(buf_.data() + end_, buf_.size() - end_);
    if (r == 0) eof_ = true;
    end_ += r;
  }

  byte_reader in_;
  std::vector<char> buf_;
  std::size_t pos_ = 0, end_ = 0, line_ = 0;
  bool eof_ = false;
};

namespace detail {

inline bool is_blank(char c) { return c == ' ' || c == '\t'; }

// Splits `line` into at most max_fields fields separated by runs of spaces/tabs; returns the
// number of fields found (max_fields + 1 means "more than max_fields").
inline std::size_t split_fields(std::string_view line, std::string_view* fields, std::size_t max_fields) {
  std::size_t n = 0, i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_blank(line[i])) ++i;
    if (i == line.size()) break;
    std::size_t const b = i;
    while (i < line.size() && !is_blank(line[i])) ++i;
    if (n == max_fields) return max_fields + 1;
    fields[n++] = line.substr(b, i - b);
  }
  return n;
}

inline bool is_blank_line(std::string_view line) {
  for (char c : line)
    if (!is_blank(c)) return false;
  return true;
}

// Parses a whole field as a decimal integer (optional sign); false on any other character
// or on overflow of std::int64_t.
inline bool parse_int(std::string_view s, std::int64_t& out) {
  std::size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (i == s.size()) return false;
  std::uint64_t v = 0;
  for (; i < s.size(); ++i) {
    unsigned const d = static_cast<unsigned>(s[i] - '0');
    if (d > 9) return false;
    if (v > (std::uint64_t(std::numeric_limits<std::int64_t>::max()) - d) / 10) return false;
    v = v * 10 + d;
  }
  out = neg ? -static_cast<std::int64_t>(v) : static_cast<std::int64_t>(v);
  return true;
}

// Clinger's exact fast path for short decimals ("6.250000e-02", "1", "0.5"): when the digits
// form an integer m exactly representable in T and 10^|p| is exact in T too, m * 10^p (or
// m / 10^-p) is one correctly rounded operation on exact operands, i.e. the correctly rounded
// value. float: m <= 2^24, |p| <= 10; double: m <= 2^53, |p| <= 22. Returns false (caller
// falls back to the general parser) for anything else.
template <class T>
bool parse_real_fast_path(char const* b, char const* e, T& out) {
  constexpr bool is_float = std::is_same_v<T, float>;
  constexpr std::uint64_t max_m = is_float ? (std::uint64_t(1) << 24) : (std::uint64_t(1) << 53);
  constexpr int max_p = is_float ? 10 : 22;
  bool neg = false;
  if (b < e && *b == '-') {
    neg = true;
    ++b;
  }
  std::uint64_t m = 0;
  int p = 0, digits = 0;
  bool dot = false;
  for (; b < e; ++b) {
    unsigned const d = static_cast<unsigned>(*b - '0');
    if (d <= 9) {
      m = m * 10 + d;
      if (m > max_m) return false;
      if (dot) --p;
      ++digits;
    } else if (*b == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (digits == 0) return false;
  if (b < e) {
    if (*b != 'e' && *b != 'E') return false;
    ++b;
    bool eneg = false;
    if (b < e && (*b == '+' || *b == '-')) eneg = *b++ == '-';
    if (b == e) return false;
    int x = 0;
    for (; b < e; ++b) {
      unsigned const d = static_cast<unsigned>(*b - '0');
      if (d > 9 || x > 1000) return false;
      x = x * 10 + static_cast<int>(d);
    }
    p += eneg ? -x : x;
  }
  if (p < -max_p || p > max_p) return false;
  T pow10 = 1;
  for (int i = 0; i < (p < 0 ? -p : p); ++i) pow10 *= T(10);  // exact: 10^|p| <= 10^max_p
  T v = static_cast<T>(m);
  v = p < 0 ? v / pow10 : v * pow10;
  out = neg ? -v : v;
  return true;
}

// Parses a whole field as a floating-point number (decimal or exponent form, inf, nan).
template <class T>
bool parse_real(std::string_view s, T& out) {
  static_assert(std::is_floating_point_v<T>, "parse_real: T must be float, double or long double");
  if (s.empty()) return false;
  char const* b = s.data();
  if (*b == '+') ++b;  // from_chars does not take a leading '+'
  char const* e = s.data() + s.size();
  if (b == e || (b != s.data() && *b == '-')) return false;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (parse_real_fast_path(b, e, out)) return true;
  }
#if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
  auto const r = std::from_chars(b, e, out);
  return r.ec == std::errc() && r.ptr == e;
#else
  char tmp[128];
  std::size_t const n = static_cast<std::size_t>(e - b);
  if (n >= sizeof(tmp)) return false;
  std::memcpy(tmp, b, n);
  tmp[n] = '\0';
  char* end = nullptr;
  errno = 0;
  if constexpr (std::is_same_v<T, float>) out = std::strtof(tmp, &end);
  else if constexpr (std::is_same_v<T, double>) out = std::strtod(tmp, &end);
  else out = std::strtold(tmp, &end);
  return end == tmp + n && n > 0;
#endif
}

}  // namespace detail
}  // namespace sdnn::io
