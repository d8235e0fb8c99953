// sdnn/io/challenge_tsv.hpp - the Sparse DNN Graph Challenge text formats (host only).
//
// Layer files  (n1024-l1.tsv[.gz]):  "row<TAB>col<TAB>value" per line, 1-based, row = input
//              neuron, col = output neuron; read as a neurons x neurons CSR (row = input), so
//              Y (images x neurons) * W is the layer's product.
// Image files  (sparse-images-1024.tsv[.gz]): "image<TAB>pixel<TAB>value", 1-based; read as an
//              images x neurons CSR (row = image).
// Category files (neuron1024-l120-categories.tsv): one 1-based image id per line.
//
// Readers take plain or gzip'd files (detected by the gzip magic; gzip needs zlib), stream
// them through a 1 MiB buffer and tokenise each line in place (no iostreams), accept any
// run of spaces/tabs between fields, '\r\n' line ends and blank lines, and accept entries
// in any order (rows are bucketed, columns sorted within each row). Anything else throws
// sdnn::error naming the file and the 1-based line: a field that is not a number, a zero,
// negative or too large index, a line with other than 3 fields, a duplicate entry, a
// missing file, a truncated or corrupt gzip stream.
//
// write_challenge_tsv writes row-major (CSR order), 1-based, one entry per line, values in
// the official number format: integral values as integers ("1", the images' format), any
// other value as C's %e ("6.250000e-02", the weights' format) when that reads back to the
// same float, else as %.8e (9 significant digits, which always round-trips a float).
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
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

inline challenge_triplets read_challenge_triplets(std::string const& path, std::int64_t max_row,
                                                  std::int64_t max_col, char const* row_name,
                                                  char const* col_name) {
  line_reader in(path);
  challenge_triplets t;
  std::string_view line, f[3];
  std::int64_t const row_limit = max_row < 0 ? std::int64_t(std::numeric_limits<std::int32_t>::max()) : max_row;
  while (in.next(line)) {
    if (is_blank_line(line)) continue;
    std::size_t const n = split_fields(line, f, 3);
    SDNN_EXPECTS(n == 3, "io: '", path, "' line ", in.line_number(), ": expected 3 fields (", row_name, ", ",
                 col_name, ", value), got ", n > 3 ? "more than 3" : std::to_string(n));
    std::int64_t i = 0, j = 0;
    float v = 0;
    SDNN_EXPECTS(parse_int(f[0], i), "io: '", path, "' line ", in.line_number(), ": ", row_name, " '", f[0],
                 "' is not an integer");
    SDNN_EXPECTS(parse_int(f[1], j), "io: '", path, "' line ", in.line_number(), ": ", col_name, " '", f[1],
                 "' is not an integer");
    SDNN_EXPECTS(parse_real(f[2], v), "io: '", path, "' line ", in.line_number(), ": value '", f[2],
                 "' is not a number");
    SDNN_EXPECTS(std::isfinite(v), "io: '", path, "' line ", in.line_number(), ": value '", f[2],
                 "' is not finite (NaN and Inf weights or pixels are refused)");
    SDNN_EXPECTS(i >= 1 && i <= row_limit, "io: '", path, "' line ", in.line_number(), ": ", row_name, " ", i,
                 " is out of range [1, ", row_limit, "] (indices are 1-based)");
    SDNN_EXPECTS(j >= 1 && j <= max_col, "io: '", path, "' line ", in.line_number(), ": ", col_name, " ", j,
                 " is out of range [1, ", max_col, "] (indices are 1-based)");
    t.rows.push_back(static_cast<std::int32_t>(i - 1));
    t.cols.push_back(static_cast<std::int32_t>(j - 1));
    t.values.push_back(v);
    if (i > t.max_row_seen) t.max_row_seen = i;
  }
  return t;
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

// A neurons x neurons layer (row = input neuron, col = output neuron).
inline csr_matrix<float, std::int32_t> read_challenge_layer(std::string const& path, std::int32_t neurons) {
  SDNN_EXPECTS(neurons > 0, "read_challenge_layer: neurons must be > 0, got ", neurons);
  auto t = detail::read_challenge_triplets(path, neurons, neurons, "row (input neuron)", "column (output neuron)");
  return detail::triplets_to_csr<float, std::int32_t>(neurons, neurons, t.rows, t.cols, t.values,
                                                      detail::duplicate_policy::reject, path);
}

// An images x neurons input batch (row = image). images = -1: as many rows as the largest
// image id in the file; otherwise ids above `images` are an error and rows = images.
inline csr_matrix<float, std::int32_t> read_challenge_images(std::string const& path, std::int32_t neurons,
                                                             std::int32_t images = -1) {
  SDNN_EXPECTS(neurons > 0, "read_challenge_images: neurons must be > 0, got ", neurons);
  SDNN_EXPECTS(images >= -1, "read_challenge_images: images must be >= 0 or -1 (from the file), got ", images);
  auto t = detail::read_challenge_triplets(path, images, neurons, "image id", "pixel (neuron)");
  // Without an explicit count the largest id sets the row count: bounded by what the file can
  // justify (at most 64 images per stored pixel, so one stray id cannot allocate gigabytes).
  std::int64_t const justified = 64 * std::max<std::int64_t>(static_cast<std::int64_t>(t.rows.size()), 1);
  SDNN_EXPECTS(images >= 0 || t.max_row_seen <= justified, "io: '", path, "': the largest image id is ",
               t.max_row_seen, " but the file stores only ", t.rows.size(),
               " pixels (at most 64 images per stored pixel are accepted without an explicit image count; pass the "
               "count, e.g. graph_challenge --images)");
  std::int32_t const rows = images >= 0 ? images : static_cast<std::int32_t>(t.max_row_seen);
  return detail::triplets_to_csr<float, std::int32_t>(rows, neurons, t.rows, t.cols, t.values,
                                                      detail::duplicate_policy::reject, path);
}

// The 1-based ids of a category file, in file order.
inline std::vector<std::int32_t> read_categories(std::string const& path) {
  line_reader in(path);
  std::vector<std::int32_t> ids;
  std::string_view line, f[1];
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
  return ids;
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

// Writes m row by row, 1-based (row<TAB>col<TAB>value), gzip-compressed when gzip is true.
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
