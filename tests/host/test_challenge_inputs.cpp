// challenge_inputs_from_mnist: shape, binary values, column-major flattening on synthetic
// images, cyclic replication, and agreement with the official first images.
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/challenge/inputs.hpp>
#include <sdnn/challenge/tsv.hpp>
#include <sdnn/io/mnist_idx.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using namespace sdnn;
using sdnn_test::error_text;

namespace {
io::idx_images blank(std::int32_t count, std::int32_t rows = 28, std::int32_t cols = 28) {
  io::idx_images m;
  m.count = count;
  m.rows = rows;
  m.cols = cols;
  m.pixels.assign(static_cast<std::size_t>(count) * rows * cols, 0);
  return m;
}
void set(io::idx_images& m, std::int32_t n, std::int32_t r, std::int32_t c, std::uint8_t v) {
  m.pixels[(static_cast<std::size_t>(n) * m.rows + r) * m.cols + c] = v;
}
std::vector<std::int32_t> row_cols(csr_matrix<float, std::int32_t> const& y, std::int32_t i) {
  return {y.col_idx().begin() + y.row_ptr()[i], y.col_idx().begin() + y.row_ptr()[i + 1]};
}
}  // namespace

TEST_CASE("challenge_inputs_from_mnist: a single bright pixel lands at x * S + y", "[challenge][inputs]") {
  // At S = 28 (N = 784) the resize is the identity (weights cubic(0) = 1, cubic(+-1) =
  // cubic(+-2) = 0), so row 3, column 20 of the digit is pixel 20 * 28 + 3.
  auto m = blank(1);
  set(m, 0, 3, 20, 255);
  auto const y = data::challenge_inputs_from_mnist(m, 784, 1, 0.5f);
  validate(y);
  REQUIRE(y.rows() == 1);
  REQUIRE(y.cols() == 784);
  REQUIRE(row_cols(y, 0) == std::vector<std::int32_t>{20 * 28 + 3});
  REQUIRE(y.values()[0] == 1.f);
}

TEST_CASE("challenge_inputs_from_mnist: a bright block is upscaled in place, column-major", "[challenge][inputs]") {
  // A 3 x 3 block centred on row 3, column 20 of 28 x 28. Centres map by (c + 0.5) S / 28 - 0.5:
  // at S = 32 row 3 -> 3.5, column 20 -> 22.9; at S = 64 -> 7.5 and 46.3.
  auto m = blank(1);
  for (int r = 2; r <= 4; ++r)
    for (int c = 19; c <= 21; ++c) set(m, 0, r, c, 255);
  for (auto [n, s, yc, xc] : {std::tuple{1024, 32, 3.5, 22.9}, std::tuple{4096, 64, 7.5, 46.3}}) {
    auto const y = data::challenge_inputs_from_mnist(m, n, 1);
    validate(y);
    REQUIRE(y.nnz() >= 4);
    for (std::int32_t p : row_cols(y, 0)) {
      double const x = p / s, yy = p % s;  // x = column (horizontal), y = row (vertical)
      INFO("N = " << n << " pixel " << p << " -> x " << x << ", y " << yy);
      CHECK(std::abs(x - xc) <= 0.2 * s / 2);
      CHECK(std::abs(yy - yc) <= 0.2 * s / 2);
      CHECK(std::abs(x - xc) < 3.5 * s / 28.0);
      CHECK(std::abs(yy - yc) < 3.5 * s / 28.0);
    }
  }
}

TEST_CASE("challenge_inputs_from_mnist: shape, binary values, cyclic replication", "[challenge][inputs]") {
  auto m = blank(2);
  for (int c = 4; c < 24; ++c) set(m, 0, 14, c, 255);  // a horizontal bar
  for (int r = 4; r < 24; ++r) set(m, 1, r, 14, 255);  // a vertical bar
  auto const y = data::challenge_inputs_from_mnist(m, 1024, 5);
  validate(y);
  REQUIRE(y.rows() == 5);
  REQUIRE(y.cols() == 1024);
  for (float v : y.values()) REQUIRE(v == 1.f);
  for (std::int32_t i = 2; i < 5; ++i) REQUIRE(row_cols(y, i) == row_cols(y, i % 2));
  // Column-major: the horizontal bar spans many x (= p / 32) and few y; the vertical bar the reverse.
  auto spans = [&](std::int32_t i) {
    std::int32_t xmin = 99, xmax = -1, ymin = 99, ymax = -1;
    for (std::int32_t p : row_cols(y, i)) {
      xmin = std::min(xmin, p / 32), xmax = std::max(xmax, p / 32);
      ymin = std::min(ymin, p % 32), ymax = std::max(ymax, p % 32);
    }
    return std::pair{xmax - xmin + 1, ymax - ymin + 1};
  };
  auto const [hx, hy] = spans(0);
  auto const [vx, vy] = spans(1);
  CHECK(hx >= 18);
  CHECK(hy <= 3);
  CHECK(vx <= 3);
  CHECK(vy >= 18);
  REQUIRE(data::challenge_inputs_from_mnist(m, 1024, 0).rows() == 0);
  REQUIRE(error_text([&] { data::challenge_inputs_from_mnist(m, 1000, 1); }).find("perfect square") != std::string::npos);
  REQUIRE(error_text([&] { data::challenge_inputs_from_mnist(m, 256, 1); }).find("only upscaling") != std::string::npos);
  REQUIRE(error_text([&] { data::challenge_inputs_from_mnist(m, 1024, -1); }).find("count must be >= 0") != std::string::npos);
}

TEST_CASE("challenge_inputs_from_mnist: >= 99% of the official pixels of the first official images",
          "[challenge][inputs]") {
  std::string const dir = sdnn_test::data_dir();
  if (!io::has_zlib()) {  // the shipped digits are gzip'd: without zlib, the reader must say so
    REQUIRE(error_text([&] { io::read_idx_images(dir + "/mnist-10k-images-idx3-ubyte.gz"); }).find("without zlib") !=
            std::string::npos);
    return;
  }
  auto const mnist = io::read_idx_images(dir + "/mnist-10k-images-idx3-ubyte.gz");
  auto const official = io::read_challenge_images(dir + "/sparse-images-1024-first1200.tsv.gz", 1024);
  // The shipped 10k digits are the first MNIST training images grouped by digit. Index in the
  // shipped file of official images 1..24 (found by nearest Hamming distance at N = 1024; the
  // labels, 5 0 4 1 9 2 1 3 1 4 ..., are MNIST's first training labels).
  std::int32_t const source[24] = {5131, 0, 4151, 1001, 9022, 2128, 1002, 3119, 1003, 4152, 3120, 5132,
                                   3121, 5994, 1004, 7008, 2129, 8078, 5995, 9023, 4153, 1, 9024, 1005};
  io::idx_images sub;
  sub.count = 24;
  sub.rows = sub.cols = 28;
  for (std::int32_t j : source)
    sub.pixels.insert(sub.pixels.end(), mnist.pixels.begin() + j * 784, mnist.pixels.begin() + (j + 1) * 784);
  auto const y = data::challenge_inputs_from_mnist(sub, 1024, 24);
  std::int64_t agree = 0;
  for (std::int32_t i = 0; i < 24; ++i) {
    std::vector<char> a(1024, 0), b(1024, 0);
    for (std::int32_t p : row_cols(y, i)) a[p] = 1;
    for (std::int32_t p : row_cols(official, i)) b[p] = 1;
    std::int32_t same = 0;
    for (int p = 0; p < 1024; ++p) same += a[p] == b[p];
    INFO("official image " << i + 1);
    CHECK(same >= 1024 - 12);  // at most 12 of 1024 pixels differ (measured: 0..11)
    agree += same;
  }
  CHECK(static_cast<double>(agree) / (24 * 1024) >= 0.99);
}

TEST_CASE("challenge_inputs_from_mnist at every challenge size: density scales with N", "[challenge][inputs]") {
  std::string const dir = sdnn_test::data_dir();
  if (!io::has_zlib()) {  // the shipped digits are gzip'd: without zlib, the reader must say so
    REQUIRE(error_text([&] { io::read_idx_images(dir + "/mnist-10k-images-idx3-ubyte.gz"); }).find("without zlib") !=
            std::string::npos);
    return;
  }
  auto mnist = io::read_idx_images(dir + "/mnist-10k-images-idx3-ubyte.gz");
  mnist.count = 50;  // the first 50 zeros are enough
  mnist.pixels.resize(50 * 784);
  double const base = static_cast<double>(data::challenge_inputs_from_mnist(mnist, 1024, 50).nnz());
  for (std::int32_t n : {4096, 16384, 65536}) {
    auto const y = data::challenge_inputs_from_mnist(mnist, n, 60);
    validate(y);
    REQUIRE(y.rows() == 60);
    double const ratio = static_cast<double>(y.row_ptr()[50]) / base / (n / 1024);
    INFO("N = " << n << ": nnz ratio to N = 1024, per area, " << ratio);
    CHECK(ratio > 0.85);
    CHECK(ratio < 1.15);
  }
}
