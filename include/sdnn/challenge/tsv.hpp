// sdnn/challenge/tsv.hpp - the Sparse DNN Graph Challenge text formats (host only): layer files
// (n1024-l1.tsv[.gz], "row<TAB>col<TAB>value", row = input neuron), image files
// (sparse-images-1024.tsv[.gz], "image<TAB>pixel<TAB>value") and category files (one 1-based
// image id per line). Readers take a path or an io::input, plain or gzip'd, and read_options
// (io/file_stream.hpp); anything malformed throws sdnn::error naming the file and the 1-based line.
// The formats, what is accepted and what is refused: docs/challenge.md#tsv-formats.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/io/file_stream.hpp"
#include "sdnn/io/triplets.hpp"

namespace sdnn::io {

namespace detail {

// Triplets of a 3-column challenge file, converted to 0-based. max_row < 0: rows unbounded
// (up to int32 max), the largest row id is returned in max_row_seen.
struct challenge_triplets {
  std::vector<std::int32_t> rows, cols;
  std::vector<float> values;
  std::int64_t max_row_seen = 0;
};

// Calls f(row, col, value, line) for each entry of a 3-column challenge file (ids range-checked
// in the file's 1-based form, passed 0-based) until f returns false. Streams through one buffer
// and tokenises each line in place (no iostreams); accepts any run of spaces/tabs between fields,
// '\r\n' line ends and blank lines. Refuses, with the line: a field that is not a number, a NaN
// or Inf value, a zero, negative or too large index, a line with other than 3 fields, a line
// longer than read_options::max_line_bytes.
template <class F>
void for_each_challenge_entry(input const& src, read_options const& opt, std::int64_t row_limit,
                              std::int64_t max_col, char const* row_name, char const* col_name, F&& f) {
  line_reader in(src, opt);
  std::string const& path = src.name();
  std::string_view line, fl[3];
  while (in.next(line)) {
    if (is_blank_line(line)) continue;
    std::size_t const n = split_fields(line, fl, 3);
    SDNN_EXPECTS(n == 3, "io: '", path, "' line ", in.line_number(), ": expected 3 fields (", row_name, ", ",
                 col_name, ", value), got ", n > 3 ? "more than 3" : std::to_string(n));
    std::int64_t i = 0, j = 0;
    float v = 0;
    SDNN_EXPECTS(parse_int(fl[0], i), "io: '", path, "' line ", in.line_number(), ": ", row_name, " '", fl[0],
                 "' is not an integer");
    SDNN_EXPECTS(parse_int(fl[1], j), "io: '", path, "' line ", in.line_number(), ": ", col_name, " '", fl[1],
                 "' is not an integer");
    SDNN_EXPECTS(parse_real(fl[2], v), "io: '", path, "' line ", in.line_number(), ": value '", fl[2],
                 "' is not a number");
    SDNN_EXPECTS(opt.allow_non_finite || std::isfinite(v), "io: '", path, "' line ", in.line_number(), ": value '",
                 fl[2], "' is not finite (NaN and Inf weights or pixels are refused)");
    SDNN_EXPECTS(i >= 1 && i <= row_limit, "io: '", path, "' line ", in.line_number(), ": ", row_name, " ", i,
                 " is out of range [1, ", row_limit, "] (indices are 1-based)");
    SDNN_EXPECTS(j >= 1 && j <= max_col, "io: '", path, "' line ", in.line_number(), ": ", col_name, " ", j,
                 " is out of range [1, ", max_col, "] (indices are 1-based)");
    if (!f(static_cast<std::int32_t>(i - 1), static_cast<std::int32_t>(j - 1), v, in.line_number())) return;
  }
}

inline challenge_triplets read_challenge_triplets(input const& src, read_options const& opt, std::int64_t max_row,
                                                  std::int64_t max_col, char const* row_name,
                                                  char const* col_name) {
  challenge_triplets t;
  std::int64_t const row_limit = max_row < 0 ? std::int64_t(std::numeric_limits<std::int32_t>::max()) : max_row;
  std::size_t at = 0;
  try {
    for_each_challenge_entry(src, opt, row_limit, max_col, row_name, col_name,
                             [&](std::int32_t i, std::int32_t j, float v, std::size_t line) {
                               at = line;
                               SDNN_EXPECTS(t.rows.size() < std::size_t(std::numeric_limits<std::int32_t>::max()),
                                            "io: '", src.name(), "' line ", line,
                                            ": more than 2^31 - 1 entries, more than a CSR of int32 can hold");
                               t.rows.push_back(i);
                               t.cols.push_back(j);
                               t.values.push_back(v);
                               if (i + 1 > t.max_row_seen) t.max_row_seen = i + 1;
                               return true;
                             });
  } catch (std::bad_alloc const&) {
    SDNN_FAIL("io: '", src.name(), "' line ", at, ": out of memory after ", t.rows.size(), " entries");
  }
  return t;
}

// The line of entry k (0-based) of a challenge file that was read without error: its k-th
// non-blank line, found by reading the input again (the error path of triplets_to_csr); 0
// when the input changed since.
inline std::size_t challenge_entry_line(input const& src, read_options const& opt, std::size_t k) {
  try {
    line_reader in(src, opt);
    std::string_view line;
    std::size_t seen = 0;
    while (in.next(line))
      if (!is_blank_line(line) && seen++ == k) return in.line_number();
  } catch (error const&) {
  }
  return 0;
}

// Writes v in the official number format into buf (>= 32 chars); returns the length.
inline int format_challenge_value(float v, char* buf, std::size_t size) {
  if (std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 1e15f)
    return std::snprintf(buf, size, "%lld", static_cast<long long>(v));
  int n = std::snprintf(buf, size, "%e", static_cast<double>(v));
  float back = 0;
  if (!parse_real(std::string_view(buf, static_cast<std::size_t>(n)), back) || back != v)
    n = std::snprintf(buf, size, "%.8e", static_cast<double>(v));
  return n;
}

}  // namespace detail

// A neurons x neurons layer (row = input neuron, col = output neuron), so Y (images x neurons)
// * W is the layer's product. Entries in any order (rows are bucketed, columns sorted within each
// row); a duplicate entry is refused with the line of its first occurrence. A file without
// entries is refused (a layer of 0 connections is always a wrong file), and so is a neuron count
// whose row pointers exceed read_options::max_claimed_bytes.
inline csr_matrix<float, std::int32_t> read_challenge_layer(input const& src, std::int32_t neurons,
                                                            read_options const& opt = {}) {
  return detail::reading(src, [&] {
    SDNN_EXPECTS(neurons > 0, "read_challenge_layer: neurons must be > 0, got ", neurons);
    SDNN_EXPECTS(detail::claim_fits(std::uint64_t(neurons) + 1, sizeof(std::int32_t), opt), "read_challenge_layer: '",
                 src.name(), "': ", neurons, " neurons need ", neurons + std::int64_t(1),
                 " row pointers, more than read_options::max_claimed_bytes = ", opt.max_claimed_bytes, " bytes allow");
    auto t = detail::read_challenge_triplets(src, opt, neurons, neurons, "row (input neuron)",
                                             "column (output neuron)");
    SDNN_EXPECTS(!t.rows.empty(), "io: '", src.name(),
                 "' holds no entries: an empty layer file (expected lines 'row<TAB>col<TAB>value')");
    return detail::triplets_to_csr<float, std::int32_t>(
        neurons, neurons, t.rows, t.cols, t.values, detail::duplicate_policy::reject, src.name(),
        [&](std::size_t k) { return detail::challenge_entry_line(src, opt, k); });
  });
}
inline csr_matrix<float, std::int32_t> read_challenge_layer(std::string const& path, std::int32_t neurons,
                                                            read_options const& opt = {}) {
  return read_challenge_layer(input::file(path), neurons, opt);
}

// An images x neurons input batch (row = image). images = -1: as many rows as the largest
// image id in the file; otherwise ids above `images` are an error and rows = images. A file
// without entries is refused (0 images is always a wrong file), and so is an image count whose
// row pointers exceed read_options::max_claimed_bytes.
inline csr_matrix<float, std::int32_t> read_challenge_images(input const& src, std::int32_t neurons,
                                                             std::int32_t images = -1, read_options const& opt = {}) {
  return detail::reading(src, [&] {
    SDNN_EXPECTS(neurons > 0, "read_challenge_images: neurons must be > 0, got ", neurons);
    SDNN_EXPECTS(images >= -1, "read_challenge_images: images must be >= 0 or -1 (from the file), got ", images);
    SDNN_EXPECTS(images < 0 || detail::claim_fits(std::uint64_t(images) + 1, sizeof(std::int32_t), opt),
                 "read_challenge_images: '", src.name(), "': ", images, " images need ", images + std::int64_t(1),
                 " row pointers, more than read_options::max_claimed_bytes = ", opt.max_claimed_bytes, " bytes allow");
    auto t = detail::read_challenge_triplets(src, opt, images, neurons, "image id", "pixel (neuron)");
    SDNN_EXPECTS(!t.rows.empty(), "io: '", src.name(),
                 "' holds no entries: an empty image file (expected lines 'image<TAB>pixel<TAB>value')");
    // Without an explicit count the largest id sets the row count: bounded by what the file can
    // justify (at most 64 images per stored pixel, so one stray id cannot allocate gigabytes).
    std::int64_t const justified = 64 * static_cast<std::int64_t>(t.rows.size());
    SDNN_EXPECTS(images >= 0 || t.max_row_seen <= justified, "io: '", src.name(), "': the largest image id is ",
                 t.max_row_seen, " but the file stores only ", t.rows.size(),
                 " pixels (at most 64 images per stored pixel are accepted without an explicit image count; pass the "
                 "count, e.g. graph_challenge --images)");
    std::int32_t const rows = images >= 0 ? images : static_cast<std::int32_t>(t.max_row_seen);
    return detail::triplets_to_csr<float, std::int32_t>(
        rows, neurons, t.rows, t.cols, t.values, detail::duplicate_policy::reject, src.name(),
        [&](std::size_t k) { return detail::challenge_entry_line(src, opt, k); });
  });
}
inline csr_matrix<float, std::int32_t> read_challenge_images(std::string const& path, std::int32_t neurons,
                                                             std::int32_t images = -1, read_options const& opt = {}) {
  return read_challenge_images(input::file(path), neurons, images, opt);
}

// The 1-based ids of a category file, in file order (an empty file: no image has a category).
inline std::vector<std::int32_t> read_categories(input const& src, read_options const& opt = {}) {
  return detail::reading(src, [&] {
    line_reader in(src, opt);
    std::string const& path = src.name();
    std::vector<std::int32_t> ids;
    std::string_view line, f[1];
    try {
      while (in.next(line)) {
        if (detail::is_blank_line(line)) continue;
        std::size_t const n = detail::split_fields(line, f, 1);
        SDNN_EXPECTS(n == 1, "io: '", path, "' line ", in.line_number(), ": expected one image id per line, got ",
                     n > 1 ? "more than 1" : "0", " fields");
        std::int64_t id = 0;
        SDNN_EXPECTS(detail::parse_int(f[0], id), "io: '", path, "' line ", in.line_number(), ": image id '", f[0],
                     "' is not an integer");
        SDNN_EXPECTS(id >= 1 && id <= std::numeric_limits<std::int32_t>::max(), "io: '", path, "' line ",
                     in.line_number(), ": image id ", id, " is out of range (ids are 1-based)");
        ids.push_back(static_cast<std::int32_t>(id));
      }
    } catch (std::bad_alloc const&) {
      SDNN_FAIL("io: '", path, "' line ", in.line_number(), ": out of memory after ", ids.size(), " ids");
    }
    return ids;
  });
}
inline std::vector<std::int32_t> read_categories(std::string const& path, read_options const& opt = {}) {
  return read_categories(input::file(path), opt);
}

inline void write_categories(std::string const& path, std::vector<std::int32_t> const& ids) {
  byte_writer out(path, false);
  std::string text;
  text.reserve(ids.size() * 8);
  char buf[16];
  for (std::int32_t id : ids) {
    SDNN_EXPECTS(id >= 1, "write_categories: image ids are 1-based, got ", id);
    auto const r = std::to_chars(buf, buf + sizeof(buf), id);
    text.append(buf, r.ptr);
    text.push_back('\n');
  }
  out.write(text);
  out.close();
}

// Writes m row by row (CSR order), 1-based (row<TAB>col<TAB>value), one entry per line,
// gzip-compressed when gzip is true. Values in the official number format: integral values as
// integers ("1", the images' format), any other value as C's %e ("6.250000e-02", the weights'
// format) when that reads back to the same float, else as %.8e (9 significant digits, which
// always round-trips a float).
inline void write_challenge_tsv(std::string const& path, csr_view<float, std::int32_t> m, bool gzip = false) {
  byte_writer out(path, gzip);
  std::string text;
  std::size_t const flush_at = std::size_t(1) << 20;
  text.reserve(flush_at + 128);
  char buf[64], vbuf[64];
  int vlen = -1;  // vbuf holds the text of `last` (challenge files repeat one value: 1/16 or 1)
  float last = 0;
  for (std::int32_t i = 0; i < m.rows; ++i) {
    for (std::int32_t k = m.row_ptr[i]; k < m.row_ptr[i + 1]; ++k) {
      auto r = std::to_chars(buf, buf + sizeof(buf), i + 1);
      text.append(buf, r.ptr);
      text.push_back('\t');
      r = std::to_chars(buf, buf + sizeof(buf), m.col_idx[k] + 1);
      text.append(buf, r.ptr);
      text.push_back('\t');
      float const v = m.values[k];
      if (vlen < 0 || !(v == last) || std::signbit(v) != std::signbit(last)) {
        vlen = detail::format_challenge_value(v, vbuf, sizeof(vbuf));
        last = v;
      }
      text.append(vbuf, static_cast<std::size_t>(vlen));
      text.push_back('\n');
      if (text.size() >= flush_at) {
        out.write(text);
        text.clear();
      }
    }
  }
  out.write(text);
  out.close();
}

}  // namespace sdnn::io
