// sdnn/io/file_stream.hpp - byte and line streams over plain or gzip'd files or memory (host
// only): input (what a reader reads), read_options (the limits every reader applies, so that no
// file can make a reader hang or allocate what the file does not justify), byte_reader,
// byte_writer, line_reader, and the field parsers every text reader shares. gzip needs zlib
// (SDNN_HAS_ZLIB=1); without it a gzip'd input is refused with a clear sdnn::error.
#pragma once

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/stat.h>
#define SDNN_IO_HAS_FSTAT 1
#endif

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

// The limits of a read. Every reader takes them (last parameter, defaulted); the defaults fit
// every file this project reads.
struct read_options {
  // Longest line a text reader accepts, in bytes without the line end (default 4 MiB; the
  // lines of the formats here are shorter than 100 bytes). A longer line is an error at its
  // line number: a file without line breaks (binary data, 2 GB of NUL bytes) fails at once.
  std::size_t max_line_bytes = std::size_t(4) << 20;
  // Most bytes a reader sets aside for what a header or an argument claims before the data
  // that justifies it has been read (default 2 GiB): the rows + 1 row pointers of a CSR (rows
  // from a MatrixMarket size line, a layer's neurons, an explicit image count) and the bytes
  // an IDX header announces. A larger claim fails before anything is allocated, naming this
  // option. Entries take memory only as they are read (their storage grows with the bytes
  // read), so no limit applies to them.
  std::uint64_t max_claimed_bytes = std::uint64_t(2) << 30;
  // NaN and Inf values (and sums of duplicates that overflow to Inf) are refused with the file
  // and line unless this is true.
  bool allow_non_finite = false;
};

// Where a reader's bytes come from: a file by path, or bytes in memory (an embedded file, a
// fuzzer's input); either may be gzip'd. name() is what messages call it.
class input {
 public:
  // A file, plain or gzip'd (detected by the gzip magic).
  static input file(std::string path) {
    input r;
    r.name_ = std::move(path);
    return r;
  }
  // size bytes at data, plain or gzip'd; not copied, so they must outlive every reader of
  // this input. `name` is what error messages call it.
  static input memory(std::string name, void const* data, std::size_t size) {
    input r;
    r.name_ = std::move(name);
    r.data_ = static_cast<char const*>(data);
    r.size_ = size;
    r.in_memory_ = true;
    return r;
  }
  std::string const& name() const noexcept { return name_; }
  bool in_memory() const noexcept { return in_memory_; }
  char const* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }

 private:
  input() = default;
  std::string name_;
  char const* data_ = nullptr;
  std::size_t size_ = 0;
  bool in_memory_ = false;
};

// Reads an input as bytes. An input that starts with the gzip magic (1f 8b) is decompressed on
// the fly through zlib (SDNN_HAS_ZLIB=1); without zlib such an input is rejected with a clear
// sdnn::error. A truncated or corrupt gzip stream, or bytes after it that are not another gzip
// member, is an error, never a silent short read. A directory is refused when opened ("is a
// directory").
class byte_reader {
 public:
  explicit byte_reader(std::string path) : byte_reader(input::file(std::move(path))) {}
  explicit byte_reader(input const& src) : path_(src.name()) {
    try {
      open(src);
    } catch (...) {  // the destructor does not run for a constructor that throws
      close();
      throw;
    }
  }
  ~byte_reader() { close(); }
  byte_reader(byte_reader const&) = delete;
  byte_reader& operator=(byte_reader const&) = delete;

  std::string const& path() const noexcept { return path_; }
  bool gzipped() const noexcept { return gzipped_; }

  // Reads up to n bytes into dst; returns the number read, 0 only at the end of the input.
  // Throws on a read error, a truncated gzip stream or a gzip CRC/data error.
  std::size_t read(char* dst, std::size_t n) {
#if defined(SDNN_HAS_ZLIB) && SDNN_HAS_ZLIB
    if (gz_) return gz_read(dst, n);
#endif
    return raw_read(dst, n);
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
  void open(input const& src) {
    if (src.in_memory()) {
      mem_ = src.data();
      mem_end_ = src.data() + src.size();
    } else {
      file_ = std::fopen(path_.c_str(), "rb");
      SDNN_EXPECTS(file_ != nullptr, "io: cannot open '", path_, "' for reading: ", std::strerror(errno));
#if defined(SDNN_IO_HAS_FSTAT)
      struct stat st;
      SDNN_EXPECTS(::fstat(fileno(file_), &st) != 0 || !S_ISDIR(st.st_mode), "io: cannot read '", path_,
                   "': it is a directory, not a file");
#endif
    }
    // Look at the first two bytes for the gzip magic; they stay in `head_` for the first read.
    head_len_ = raw_read(head_, 2);
    gzipped_ = head_len_ == 2 && static_cast<unsigned char>(head_[0]) == 0x1f &&
               static_cast<unsigned char>(head_[1]) == 0x8b;
    if (!gzipped_) return;
#if defined(SDNN_HAS_ZLIB) && SDNN_HAS_ZLIB
    gz_ = new gz_state();
    gz_->in.resize(std::size_t(1) << 18);
    // 15 + 16: a gzip wrapper, the largest window.
    SDNN_EXPECTS(inflateInit2(&gz_->z, 15 + 16) == Z_OK, "io: '", path_,
                 "': cannot start zlib's inflate (out of memory?)");
    gz_->inited = true;
#else
    SDNN_FAIL("io: '", path_, "' is gzip-compressed, but sdnn was built without zlib (SDNN_HAS_ZLIB); "
              "install zlib and reconfigure, or gunzip the file");
#endif
  }
#if defined(SDNN_HAS_ZLIB) && SDNN_HAS_ZLIB
  struct gz_state {
    z_stream z{};
    std::vector<unsigned char> in;
    bool inited = false;
    bool member_done = false;  // the last member ended (Z_STREAM_END); more input must be another member
    bool at_end = false;       // the raw input ended right after a complete member
  };
  // Decompresses up to n bytes. Concatenated members (gzip a >> f; gzip b >> f) read as one
  // stream, as gunzip does; anything else after a member is an error.
  std::size_t gz_read(char* dst, std::size_t n) {
    gz_state& s = *gz_;
    std::size_t total = 0;
    while (total < n && !s.at_end) {
      if (s.z.avail_in == 0) {
        std::size_t const r = raw_read(reinterpret_cast<char*>(s.in.data()), s.in.size());
        if (r == 0) {
          SDNN_EXPECTS(s.member_done, "io: '", path_, "': gzip stream is truncated (zlib: unexpected end of file)");
          s.at_end = true;
          break;
        }
        s.z.next_in = s.in.data();
        s.z.avail_in = static_cast<uInt>(r);
      }
      if (s.member_done) {  // bytes after a complete member: another member, or garbage
        SDNN_EXPECTS(s.z.next_in[0] == 0x1f, "io: '", path_,
                     "': bytes follow the gzip stream that are not another gzip member");
        SDNN_EXPECTS(inflateReset(&s.z) == Z_OK, "io: '", path_, "': zlib's inflateReset failed");
        s.member_done = false;
      }
      uInt const chunk = static_cast<uInt>(std::min<std::size_t>(n - total, std::size_t(1) << 30));
      s.z.next_out = reinterpret_cast<Bytef*>(dst + total);
      s.z.avail_out = chunk;
      int const rc = inflate(&s.z, Z_NO_FLUSH);
      total += chunk - s.z.avail_out;
      if (rc == Z_STREAM_END) {
        s.member_done = true;
        continue;
      }
      if (rc == Z_OK || (rc == Z_BUF_ERROR && s.z.avail_in == 0)) continue;  // needs more input
      char const* msg = s.z.msg ? s.z.msg : (rc == Z_MEM_ERROR ? "out of memory" : "?");
      SDNN_FAIL("io: '", path_, "': gzip stream is corrupt (zlib: ", msg, ")");
    }
    return total;
  }
#endif
  // Plain bytes of the file or memory block (the two bytes looked at first come first).
  std::size_t raw_read(char* dst, std::size_t n) {
    std::size_t done = 0;
    if (head_pos_ < head_len_ && n > 0) {
      std::size_t const k = std::min(n, head_len_ - head_pos_);
      std::memcpy(dst, head_ + head_pos_, k);
      head_pos_ += k;
      done = k;
      if (done == n) return done;
    }
    if (mem_) {
      std::size_t const k = std::min(n - done, static_cast<std::size_t>(mem_end_ - mem_));
      if (k) std::memcpy(dst + done, mem_, k);
      mem_ += k;
      return done + k;
    }
    if (!file_) return done;
    std::size_t const r = std::fread(dst + done, 1, n - done, file_);
    SDNN_EXPECTS(r == n - done || !std::ferror(file_), "io: read error on '", path_, "': ", std::strerror(errno));
    return done + r;
  }
  void close() noexcept {
    if (file_) std::fclose(file_);
    file_ = nullptr;
#if defined(SDNN_HAS_ZLIB) && SDNN_HAS_ZLIB
    if (gz_) {
      if (gz_->inited) inflateEnd(&gz_->z);
      delete gz_;
    }
    gz_ = nullptr;
#endif
  }
  std::string path_;
  std::FILE* file_ = nullptr;
  char const* mem_ = nullptr;  // in-memory input: the next byte and the end
  char const* mem_end_ = nullptr;
  char head_[2] = {0, 0};
  std::size_t head_len_ = 0, head_pos_ = 0;
#if defined(SDNN_HAS_ZLIB) && SDNN_HAS_ZLIB
  gz_state* gz_ = nullptr;
#else
  void* gz_ = nullptr;  // the same layout whether or not a translation unit sees zlib
#endif
  bool gzipped_ = false;
};

// Writes a file, gzip-compressed on request (needs zlib).
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

// Yields the lines of a byte_reader from one buffer without per-line allocation: the views it
// returns stay valid until the next call. It counts lines (1-based) so parsers can report
// "file:line: what was wrong", and refuses a line longer than read_options::max_line_bytes at
// that line (memory stays bounded on a file without line breaks).
class line_reader {
 public:
  explicit line_reader(std::string path, std::size_t buffer_bytes = std::size_t(1) << 20)
      : line_reader(input::file(std::move(path)), read_options{}, buffer_bytes) {}
  line_reader(input const& src, read_options const& opt, std::size_t buffer_bytes = std::size_t(1) << 20)
      : in_(src),
        max_line_(std::max<std::size_t>(opt.max_line_bytes, 1)),
        buf_(std::max<std::size_t>(std::min(buffer_bytes, buffer_cap()), 64)) {}

  std::string const& path() const noexcept { return in_.path(); }
  // 1-based number of the line last returned by next() (0 before the first).
  std::size_t line_number() const noexcept { return line_; }

  // The next line without its '\n' (and without a trailing '\r'); false at end of input.
  // Throws at a line longer than read_options::max_line_bytes.
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
  // The largest buffer needed: the longest line and its '\n'.
  std::size_t buffer_cap() const noexcept {
    return max_line_ < std::numeric_limits<std::size_t>::max() ? max_line_ + 1 : max_line_;
  }
  [[noreturn]] void too_long() const {
    SDNN_FAIL("io: '", in_.path(), "' line ", line_ + 1, ": longer than ", max_line_,
              " bytes (read_options::max_line_bytes); is this a text file of the expected format?");
  }
  bool emit(char const* b, std::size_t len, std::string_view& line) {
    if (len > max_line_) too_long();
    if (len > 0 && b[len - 1] == '\r') --len;
    ++line_;
    line = std::string_view(b, len);
    return true;
  }
  void refill() {
    // Move the partial line to the front; grow when one line fills the whole buffer, up to
    // the longest line allowed (plus its '\n').
    std::size_t const keep = end_ - pos_;
    if (keep > max_line_) too_long();
    if (pos_ > 0 && keep > 0) std::memmove(buf_.data(), buf_.data() + pos_, keep);
    pos_ = 0;
    end_ = keep;
    if (end_ == buf_.size()) buf_.resize(std::min(buf_.size() * 2, buffer_cap()));
    std::size_t const r = in_.read(buf_.data() + end_, buf_.size() - end_);
    if (r == 0) eof_ = true;
    end_ += r;
  }

  byte_reader in_;
  std::size_t max_line_;
  std::vector<char> buf_;
  std::size_t pos_ = 0, end_ = 0, line_ = 0;
  bool eof_ = false;
};

namespace detail {

// Runs a reader's body: a failed allocation (std::bad_alloc, std::length_error) becomes an
// sdnn::error naming the input, so only sdnn::errors leave a reader. Readers catch it closer
// to the failure too, where they can name the line.
template <class F>
auto reading(input const& src, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (std::bad_alloc const&) {
    SDNN_FAIL("io: '", src.name(), "': out of memory while reading it");
  } catch (std::length_error const&) {
    SDNN_FAIL("io: '", src.name(), "': out of memory while reading it (a size beyond the library's maximum)");
  }
}

// True when `count` elements of `elem_bytes` bytes each fit read_options::max_claimed_bytes.
inline bool claim_fits(std::uint64_t count, std::size_t elem_bytes, read_options const& opt) {
  return elem_bytes == 0 || count <= opt.max_claimed_bytes / elem_bytes;
}

// The field parsers below tokenise a line in place: fields are separated by runs of spaces or
// tabs, a trailing '\r' is ignored, integers are hand-parsed and floats go through
// std::from_chars (locale independent, correctly rounded) where the standard library has it,
// else strtof/strtod.
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
  if (r.ec == std::errc::result_out_of_range && r.ptr == e && !std::is_same_v<T, long double>) {
    // A magnitude below T's range rounds to T's nearest value (0 or a denormal), as strtof
    // would: '1e-50' is a float 0. One above it (overflow) stays refused.
    long double wide = 0;
    auto const w = std::from_chars(b, e, wide);
    if (w.ec == std::errc() && w.ptr == e && std::fabs(wide) < 1.0L) {
      out = static_cast<T>(wide);
      return true;
    }
    return false;
  }
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
