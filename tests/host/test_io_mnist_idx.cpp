// MNIST IDX reader: the shipped 10k digits, synthetic files, bad magic and truncation.
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/io/file_stream.hpp>
#include <sdnn/io/mnist_idx.hpp>

#include <string>
#include <vector>

using namespace sdnn;
using sdnn_test::error_text;
using sdnn_test::has;
using sdnn_test::temp_dir;

namespace {
std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}
}  // namespace

TEST_CASE("read_idx_images / read_idx_labels on a synthetic file", "[io]") {
  temp_dir dir;
  std::string px;
  for (int i = 0; i < 2 * 3 * 4; ++i) px.push_back(static_cast<char>(i * 10));
  auto const p = dir.write("img.idx", be32(0x803) + be32(2) + be32(3) + be32(4) + px);
  auto const im = io::read_idx_images(p);
  REQUIRE(im.count == 2);
  REQUIRE(im.rows == 3);
  REQUIRE(im.cols == 4);
  REQUIRE(im.pixels.size() == 24);
  REQUIRE(im.pixels[23] == 230);
  auto const l = dir.write("lab.idx", be32(0x801) + be32(3) + std::string("\x07\x00\x09", 3));
  REQUIRE(io::read_idx_labels(l) == std::vector<std::uint8_t>{7, 0, 9});
}

TEST_CASE("IDX readers reject a wrong magic, a truncated file, a missing file", "[io]") {
  temp_dir dir;
  auto const labels_as_images = dir.write("a.idx", be32(0x801) + be32(1) + "x");
  CHECK(has(error_text([&] { io::read_idx_images(labels_as_images); }), "is not an IDX image file: magic 0x801"));
  auto const images_as_labels = dir.write("b.idx", be32(0x803) + be32(1) + be32(1) + be32(1) + "x");
  CHECK(has(error_text([&] { io::read_idx_labels(images_as_labels); }), "is not an IDX label file: magic 0x803"));
  auto const short_px = dir.write("c.idx", be32(0x803) + be32(2) + be32(28) + be32(28) + std::string(100, '\0'));
  CHECK(has(error_text([&] { io::read_idx_images(short_px); }),
            "c.idx' is truncated: expected 1568 bytes of IDX pixel data, got 100"));
  auto const short_hdr = dir.write("d.idx", be32(0x803) + "\x00\x00");
  CHECK(has(error_text([&] { io::read_idx_images(short_hdr); }), "is truncated: expected 4 bytes of IDX header"));
  auto const short_lab = dir.write("e.idx", be32(0x801) + be32(10) + "abc");
  CHECK(has(error_text([&] { io::read_idx_labels(short_lab); }), "expected 10 bytes of IDX labels, got 3"));
  auto const empty = dir.write("f.idx", "");
  CHECK(has(error_text([&] { io::read_idx_labels(empty); }), "truncated"));
  CHECK(has(error_text([&] { io::read_idx_images((dir.path / "nope.idx").string()); }), "cannot open"));
  // Headers that claim more than the file holds: a clear "truncated", never an allocation of the
  // claimed size (an 8-byte label file claiming 2^31 - 1 labels took 2.2 GB; a 16-byte image
  // header threw std::bad_alloc).
  auto const huge_lab = dir.write("g.idx", be32(0x801) + be32(0x7fffffffu));
  CHECK(has(error_text([&] { io::read_idx_labels(huge_lab); }), "expected 2147483647 bytes of IDX labels, got 0"));
  auto const huge_img = dir.write("h.idx", be32(0x803) + be32(0x7fffffffu) + be32(4) + be32(4));
  CHECK(has(error_text([&] { io::read_idx_images(huge_img); }),
            "claims 2147483647 x 4 x 4 = 34359738352 bytes of pixels, more than read_options::max_claimed_bytes"));
  auto const big_img = dir.write("h2.idx", be32(0x803) + be32(1000000) + be32(28) + be32(28));
  CHECK(has(error_text([&] { io::read_idx_images(big_img); }), "expected 784000000 bytes of IDX pixel data, got 0"));
  // Labels are digits; nothing may follow the data.
  CHECK(has(error_text([&] { io::read_idx_labels(dir.write("i.idx", be32(0x801) + be32(2) + std::string("\x03\x0c", 2))); }),
            "label 1 is 12, not a digit"));
  CHECK(has(error_text([&] { io::read_idx_labels(dir.write("j.idx", be32(0x801) + be32(1) + std::string("\x03zz", 3))); }),
            "bytes follow the labels"));
}

TEST_CASE("the shipped MNIST digits: 10000 x 28 x 28 with labels", "[io]") {
  std::string const dir = sdnn_test::data_dir();
  if (!io::has_zlib()) {
    CHECK(has(error_text([&] { io::read_idx_images(dir + "/mnist-10k-images-idx3-ubyte.gz"); }), "without zlib"));
    return;
  }
  auto const im = io::read_idx_images(dir + "/mnist-10k-images-idx3-ubyte.gz");
  REQUIRE(im.count == 10000);
  REQUIRE(im.rows == 28);
  REQUIRE(im.cols == 28);
  auto const lab = io::read_idx_labels(dir + "/mnist-10k-labels-idx1-ubyte.gz");
  REQUIRE(lab.size() == 10000);
  std::vector<int> per_digit(10, 0);
  for (auto d : lab) {
    REQUIRE(d <= 9);
    ++per_digit[d];
  }
  for (int n : per_digit) CHECK(n > 500);
  // Real digits: mostly background, some full ink.
  std::size_t ink = 0, full = 0;
  for (auto v : im.pixels) {
    ink += v > 0;
    full += v == 255;
  }
  CHECK(ink > im.pixels.size() / 10);
  CHECK(ink < im.pixels.size() / 3);
  CHECK(full > 0);
}
