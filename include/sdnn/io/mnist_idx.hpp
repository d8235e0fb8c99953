// sdnn/io/mnist_idx.hpp - MNIST's IDX files (host only): images and labels, plain or gzip'd
// (needs zlib), from a path or an io::input (a file or bytes in memory). A wrong magic, absurd
// dimensions, a file shorter or longer than its header says, or a label above 9 throws
// sdnn::error naming the file; memory grows with the data actually read, never with the
// header's claim alone.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/io/file_stream.hpp"

namespace sdnn::io {

struct idx_images {
  std::int32_t count = 0, rows = 0, cols = 0;
  std::vector<std::uint8_t> pixels;  // [count * rows * cols], image-major, each row-major
};

namespace detail {
inline std::uint32_t read_be32(byte_reader& in, char const* what) {
  unsigned char b[4];
  in.read_exact(b, 4, what);
  return (std::uint32_t(b[0]) << 24) | (std::uint32_t(b[1]) << 16) | (std::uint32_t(b[2]) << 8) | std::uint32_t(b[3]);
}
inline std::int32_t checked_dim(std::uint32_t v, std::string const& path, char const* what) {
  SDNN_EXPECTS(v <= 0x7fffffffu, "io: '", path, "': IDX ", what, " = ", v, " is too large");
  return static_cast<std::int32_t>(v);
}
// Reads the n bytes a header promises, growing the result as the data arrives (from 64 KiB,
// doubling, at most 16 MiB at a time): a header that claims more than the input holds fails
// as "truncated" after reading what is there, and never allocates what the input cannot
// justify.
inline std::vector<std::uint8_t> read_promised(byte_reader& in, std::size_t n, char const* what) {
  std::vector<std::uint8_t> out;
  try {
    while (out.size() < n) {
      std::size_t const step = std::min(std::max(out.size(), std::size_t(1) << 16), std::size_t(1) << 24);
      std::size_t const want = std::min(step, n - out.size());
      std::size_t const at = out.size();
      out.resize(at + want);
      std::size_t got = 0;
      while (got < want) {
        std::size_t const r = in.read(reinterpret_cast<char*>(out.data() + at + got), want - got);
        if (r == 0) break;
        got += r;
      }
      SDNN_EXPECTS(got == want, "io: '", in.path(), "' is truncated: expected ", n, " bytes of ", what, ", got ",
                   at + got);
    }
  } catch (std::bad_alloc const&) {
    SDNN_FAIL("io: '", in.path(), "': out of memory after ", out.size(), " of the ", n, " bytes of ", what);
  }
  return out;
}
// After the promised data: nothing may follow (trailing bytes mean a wrong header).
inline void expect_end(byte_reader& in, char const* what) {
  char extra = 0;
  SDNN_EXPECTS(in.read(&extra, 1) == 0, "io: '", in.path(), "': bytes follow the ", what,
               " that the IDX header announces (a wrong count?)");
}
}  // namespace detail

// Images: magic 0x00000803 (unsigned byte, 3 dimensions), then count, rows, cols as big-endian
// uint32, then count * rows * cols bytes, image after image, each row-major (pixel (r, c) of
// image n at pixels[(n * rows + r) * cols + c]), 0 = background, 255 = full ink. Rows or cols
// above 65536 are refused, and so is a claim above read_options::max_claimed_bytes (default
// 2 GiB), before reading.
inline idx_images read_idx_images(input const& src, read_options const& opt = {}) {
  return detail::reading(src, [&] {
    std::string const& path = src.name();
    byte_reader in(src);
    std::uint32_t const magic = detail::read_be32(in, "IDX header");
    SDNN_EXPECTS(magic == 0x00000803u, "io: '", path, "' is not an IDX image file: magic 0x", std::hex, magic,
                 ", expected 0x803 (unsigned byte, 3 dimensions)");
    idx_images r;
    r.count = detail::checked_dim(detail::read_be32(in, "IDX header"), path, "image count");
    r.rows = detail::checked_dim(detail::read_be32(in, "IDX header"), path, "rows");
    r.cols = detail::checked_dim(detail::read_be32(in, "IDX header"), path, "cols");
    SDNN_EXPECTS(r.rows <= 65536 && r.cols <= 65536, "io: '", path, "': IDX dimensions ", r.count, " x ", r.rows, " x ",
                 r.cols, " are implausible (rows and cols are at most 65536)");
    // count < 2^31, rows and cols <= 2^16: the product fits 64 bits.
    std::uint64_t const n = std::uint64_t(r.count) * std::uint64_t(r.rows) * std::uint64_t(r.cols);
    SDNN_EXPECTS(detail::claim_fits(n, 1, opt), "io: '", path, "': the IDX header claims ", r.count, " x ", r.rows,
                 " x ", r.cols, " = ", n, " bytes of pixels, more than read_options::max_claimed_bytes = ",
                 opt.max_claimed_bytes, " allows (raise it to read this file)");
    r.pixels = detail::read_promised(in, static_cast<std::size_t>(n), "IDX pixel data");
    detail::expect_end(in, "pixel data");
    return r;
  });
}
inline idx_images read_idx_images(std::string const& path, read_options const& opt = {}) {
  return read_idx_images(input::file(path), opt);
}

// Labels: magic 0x00000801, count as a big-endian uint32, then count bytes (0..9).
inline std::vector<std::uint8_t> read_idx_labels(input const& src, read_options const& opt = {}) {
  return detail::reading(src, [&] {
    std::string const& path = src.name();
    byte_reader in(src);
    std::uint32_t const magic = detail::read_be32(in, "IDX header");
    SDNN_EXPECTS(magic == 0x00000801u, "io: '", path, "' is not an IDX label file: magic 0x", std::hex, magic,
                 ", expected 0x801 (unsigned byte, 1 dimension)");
    std::int32_t const count = detail::checked_dim(detail::read_be32(in, "IDX header"), path, "label count");
    SDNN_EXPECTS(detail::claim_fits(static_cast<std::uint64_t>(count), 1, opt), "io: '", path,
                 "': the IDX header claims ", count, " labels, more than read_options::max_claimed_bytes = ",
                 opt.max_claimed_bytes, " allows (raise it to read this file)");
    auto labels = detail::read_promised(in, static_cast<std::size_t>(count), "IDX labels");
    detail::expect_end(in, "labels");
    for (std::size_t i = 0; i < labels.size(); ++i)
      SDNN_EXPECTS(labels[i] <= 9, "io: '", path, "': label ", i, " is ", int(labels[i]), ", not a digit 0..9");
    return labels;
  });
}
inline std::vector<std::uint8_t> read_idx_labels(std::string const& path, read_options const& opt = {}) {
  return read_idx_labels(input::file(path), opt);
}

}  // namespace sdnn::io
