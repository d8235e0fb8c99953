// Graph Challenge TSV I/O: write -> read round trips (plain and gzip), the official files,
// and every kind of malformed input rejected with the file and line named.
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/challenge/radixnet.hpp>
#include <sdnn/challenge/tsv.hpp>
#include <sdnn/io/file_stream.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

using namespace sdnn;
namespace fs = std::filesystem;
using sdnn_test::error_text;
using sdnn_test::has;
using sdnn_test::temp_dir;

namespace {
std::string slurp(std::string const& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

template <class T>
bool same(csr_matrix<T, std::int32_t> const& a, csr_matrix<T, std::int32_t> const& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() && a.nnz() == b.nnz() &&
         std::equal(a.row_ptr().begin(), a.row_ptr().end(), b.row_ptr().begin()) &&
         std::equal(a.col_idx().begin(), a.col_idx().end(), b.col_idx().begin()) &&
         std::equal(a.values().begin(), a.values().end(), b.values().begin());
}
}  // namespace

TEST_CASE("write_challenge_tsv uses the official number format", "[io]") {
  temp_dir dir;
  auto w = make_csr<float, std::int32_t>(2, 3, {0, 2, 3}, {0, 2, 1}, {0.0625f, 1.f, 1.f / 3.f});
  io::write_challenge_tsv(dir.file("w.tsv"), w.view());
  // 1/3 does not survive %e (7 significant digits), so it gets 9.
  REQUIRE(slurp(dir.file("w.tsv")) == "1\t1\t6.250000e-02\n1\t3\t1\n2\t2\t3.33333343e-01\n");
  auto back = io::read_challenge_layer(dir.file("w.tsv"), 3);
  REQUIRE(back.rows() == 3);
  REQUIRE(back.values()[2] == 1.f / 3.f);
}

TEST_CASE("challenge TSV round trip, plain and gzip", "[io]") {
  temp_dir dir;
  auto const w = data::radixnet_layer(4096, 9, 5);
  io::write_challenge_tsv(dir.file("l.tsv"), w.view());
  REQUIRE(same(io::read_challenge_layer(dir.file("l.tsv"), 4096), w));
  if (io::has_zlib()) {
    io::write_challenge_tsv(dir.file("l.tsv.gz"), w.view(), true);
    REQUIRE(fs::file_size(dir.file("l.tsv.gz")) < fs::file_size(dir.file("l.tsv")) / 3);
    REQUIRE(same(io::read_challenge_layer(dir.file("l.tsv.gz"), 4096), w));
  } else {
    REQUIRE(has(error_text([&] { io::write_challenge_tsv(dir.file("l.tsv.gz"), w.view(), true); }), "without zlib"));
  }
  // Images: rows = images; trailing empty images kept when the count is given.
  auto const y = make_csr<float, std::int32_t>(4, 16, {0, 2, 2, 3, 3}, {1, 15, 0}, {1, 1, 1});
  io::write_challenge_tsv(dir.file("y.tsv"), y.view());
  REQUIRE(same(io::read_challenge_images(dir.file("y.tsv"), 16, 4), y));
  auto const y3 = io::read_challenge_images(dir.file("y.tsv"), 16);
  REQUIRE(y3.rows() == 3);  // largest image id in the file
  REQUIRE(y3.nnz() == 3);
  // Categories.
  io::write_categories(dir.file("c.tsv"), {3, 17, 1200});
  REQUIRE(slurp(dir.file("c.tsv")) == "3\n17\n1200\n");
  REQUIRE(io::read_categories(dir.file("c.tsv")) == std::vector<std::int32_t>{3, 17, 1200});
  io::write_categories(dir.file("none.tsv"), {});
  REQUIRE(io::read_categories(dir.file("none.tsv")).empty());
}

TEST_CASE("challenge readers accept any entry order, spaces, CRLF, blank lines, no final newline", "[io]") {
  temp_dir dir;
  auto const p = dir.write("x.tsv", "2 3 0.5\r\n\n1\t2\t1\n2\t1  2.5e0\r\n1\t1\t+4");
  auto const m = io::read_challenge_layer(p, 3);
  validate(m);
  REQUIRE(m.nnz() == 4);
  REQUIRE(std::vector<std::int32_t>(m.row_ptr().begin(), m.row_ptr().end()) == std::vector<std::int32_t>{0, 2, 4, 4});
  REQUIRE(std::vector<std::int32_t>(m.col_idx().begin(), m.col_idx().end()) == std::vector<std::int32_t>{0, 1, 0, 2});
  REQUIRE(std::vector<float>(m.values().begin(), m.values().end()) == std::vector<float>{4, 1, 2.5f, 0.5f});
}

TEST_CASE("challenge readers reject malformed files, naming the file and the line", "[io]") {
  temp_dir dir;
  auto bad = [&](char const* text) {
    auto const p = dir.write("bad.tsv", text);
    return error_text([&] { io::read_challenge_layer(p, 4); });
  };
  std::string e = bad("1\t1\t1\n2\tx\t1\n");
  CHECK(has(e, "bad.tsv' line 2: column (output neuron) 'x' is not an integer"));
  CHECK(has(bad("1\t1\t1e\n"), "line 1: value '1e' is not a number"));
  CHECK(has(bad("1\t1\t1\n1\t1.5\t1\n"), "line 2: column (output neuron) '1.5' is not an integer"));
  CHECK(has(bad("1\t1\t1\n\n0\t1\t1\n"), "line 3: row (input neuron) 0 is out of range [1, 4] (indices are 1-based)"));
  CHECK(has(bad("1\t5\t1\n"), "line 1: column (output neuron) 5 is out of range [1, 4]"));
  CHECK(has(bad("-1\t2\t1\n"), "line 1: row (input neuron) -1 is out of range"));
  CHECK(has(bad("1\t2\n"), "line 1: expected 3 fields (row (input neuron), column (output neuron), value), got 2"));
  CHECK(has(bad("1\t2\t1\t4\n"), "got more than 3"));
  CHECK(has(bad("1\t2\t1\n1\t2\t1\n"), "duplicate entry at row 1, column 2"));
  CHECK(has(bad("99999999999999999999\t1\t1\n"), "is not an integer"));

  auto const img = dir.write("img.tsv", "1\t1\t1\n3\t1\t1\n");
  CHECK(has(error_text([&] { io::read_challenge_images(img, 4, 2); }), "img.tsv' line 2: image id 3 is out of range [1, 2]"));
  CHECK(has(error_text([&] { io::read_challenge_images(img, 0); }), "neurons must be > 0"));

  auto const cat = dir.write("cat.tsv", "1\n2\n0\n");
  CHECK(has(error_text([&] { io::read_categories(cat); }), "cat.tsv' line 3: image id 0 is out of range"));
  auto const cat2 = dir.write("cat2.tsv", "1\n2 3\n");
  CHECK(has(error_text([&] { io::read_categories(cat2); }), "cat2.tsv' line 2: expected one image id per line"));
  auto const cat3 = dir.write("cat3.tsv", "7\nabc\n");
  CHECK(has(error_text([&] { io::read_categories(cat3); }), "line 2: image id 'abc' is not an integer"));

  // NaN and Inf are refused with the line (NaN in two official weights gave 36 categories
  // instead of 19, exit 0); so is an image id the file cannot justify (one stray line with id
  // 2147483647 made infer allocate 13 GB).
  CHECK(has(bad("1\t1\t1\n2\t2\tnan\n"), "line 2: value 'nan' is not finite"));
  CHECK(has(bad("1\t1\tinf\n"), "line 1: value 'inf' is not finite"));
  CHECK(has(bad("1\t1\t-inf\n"), "is not finite"));
  auto const stray = dir.write("stray.tsv", "1\t1\t1\n2\t3\t1\n2147483647\t1\t1\n");
  CHECK(has(error_text([&] { io::read_challenge_images(stray, 4); }), "the largest image id is 2147483647"));
  CHECK(io::read_challenge_images(dir.write("gap.tsv", "1\t1\t1\n100\t2\t1\n"), 4).rows() == 100);

  std::string const missing = dir.file("does-not-exist.tsv");
  CHECK(has(error_text([&] { io::read_challenge_layer(missing, 4); }), "cannot open '" + missing + "' for reading"));
  CHECK(has(error_text([&] { io::read_categories(missing); }), "does-not-exist.tsv"));
}

TEST_CASE("gzip: a truncated or corrupt stream is an error, never a short read", "[io]") {
  temp_dir dir;
  auto const w = data::radixnet_layer(1024, 3, 1);
  if (!io::has_zlib()) {
    // A gzip'd file without zlib gives a clear error.
    auto const p = dir.write("x.tsv.gz", std::string("\x1f\x8b\x08\x00", 4) + "rest");
    CHECK(has(error_text([&] { io::read_challenge_layer(p, 1024); }), "built without zlib"));
    return;
  }
  io::write_challenge_tsv(dir.file("full.tsv.gz"), w.view(), true);
  std::string const bytes = slurp(dir.file("full.tsv.gz"));
  REQUIRE(bytes.size() > 1000);
  // Cut in the middle of the deflate data, and just before the 8-byte trailer.
  for (std::size_t cut : {bytes.size() / 2, bytes.size() - 4}) {
    auto const p = dir.write("cut.tsv.gz", bytes.substr(0, cut));
    std::string const e = error_text([&] { io::read_challenge_layer(p, 1024); });
    INFO("cut at " << cut << ": " << e);
    CHECK(has(e, "cut.tsv.gz': gzip stream is truncated"));
  }
  // A flipped byte in the compressed data: corrupt data or a CRC mismatch.
  std::string flipped = bytes;
  flipped[bytes.size() / 2] = static_cast<char>(flipped[bytes.size() / 2] ^ 0x55);
  auto const p = dir.write("flip.tsv.gz", flipped);
  std::string const e = error_text([&] { io::read_challenge_layer(p, 1024); });
  INFO(e);
  CHECK(has(e, "flip.tsv.gz'"));
  CHECK(e != "no throw");
}

TEST_CASE("the shipped official images and categories read back with the published counts", "[io]") {
  std::string const dir = sdnn_test::data_dir();
  if (!io::has_zlib()) {  // the shipped file is gzip'd: without zlib, the reader must say so
    REQUIRE(sdnn_test::has(error_text([&] { io::read_challenge_images(dir + "/sparse-images-1024-first1200.tsv.gz", 1024); }),
                           "built without zlib"));
    return;
  }
  auto const y = io::read_challenge_images(dir + "/sparse-images-1024-first1200.tsv.gz", 1024);
  validate(y);
  REQUIRE(y.rows() == 1200);
  REQUIRE(y.nnz() == 122713);
  // Image 1 (a "5") starts with pixels 188, 220, 252 (1-based).
  REQUIRE(y.col_idx()[0] == 187);
  REQUIRE(y.col_idx()[1] == 219);
  REQUIRE(y.col_idx()[2] == 251);
  REQUIRE(std::all_of(y.values().begin(), y.values().end(), [](float v) { return v == 1.f; }));
  auto const c = io::read_categories(dir + "/neuron1024-l120-categories-first1200.tsv");
  REQUIRE(c.size() == 19);
  REQUIRE(c.front() == 287);
  REQUIRE(std::is_sorted(c.begin(), c.end()));
  auto const all = io::read_categories(dir + "/neuron1024-l120-categories.tsv");
  REQUIRE(all.size() == 1812);
  std::vector<std::int32_t> first(all.begin(), std::find_if(all.begin(), all.end(), [](std::int32_t id) { return id > 1200; }));
  REQUIRE(first == c);
}

TEST_CASE("line_reader handles lines longer than its buffer", "[io]") {
  temp_dir dir;
  std::string longline(5000, 'a');
  auto const p = dir.write("long.txt", "x\n" + longline + "\nyz");
  io::line_reader in(p, 64);
  std::string_view l;
  REQUIRE(in.next(l));
  REQUIRE(l == "x");
  REQUIRE(in.next(l));
  REQUIRE(l == longline);
  REQUIRE(in.line_number() == 2);
  REQUIRE(in.next(l));
  REQUIRE(l == "yz");
  REQUIRE_FALSE(in.next(l));
}

TEST_CASE("parse_real: the exact fast path and the general parser agree with strtof/strtod bit for bit", "[io]") {
  std::mt19937_64 rng(11);
  char const* fmts[] = {"%e", "%.3e", "%g", "%.9g", "%.2f", "%.7f", "%.1e", "%.17g", "%.0f"};
  char buf[64];
  std::int64_t bad = 0, fast = 0, n = 0;
  auto check = [&](char const* t) {
    float f = 0;
    double d = 0;
    bool const ok = io::detail::parse_real(std::string_view(t), f) && io::detail::parse_real(std::string_view(t), d);
    float const fr = std::strtof(t, nullptr);
    double const dr = std::strtod(t, nullptr);
    float tmp;
    fast += io::detail::parse_real_fast_path(t, t + std::strlen(t), tmp);
    bad += !ok || std::memcmp(&f, &fr, sizeof f) != 0 || std::memcmp(&d, &dr, sizeof d) != 0;
    ++n;
  };
  for (int i = 0; i < 20000; ++i) {
    double v;
    switch (rng() % 4) {
      case 0: v = std::ldexp(static_cast<double>(rng() % 100000), -static_cast<int>(rng() % 30)); break;
      case 1: v = static_cast<double>(rng() % 2000001) / 1000.0 - 1000; break;
      case 2: v = std::ldexp(static_cast<double>(rng() >> 11), -60 + static_cast<int>(rng() % 80)); break;
      default: v = static_cast<double>(rng() % 100000000); break;
    }
    std::snprintf(buf, sizeof buf, fmts[rng() % 9], v);
    check(buf);
  }
  for (char const* t : {"6.250000e-02", "1", "0", "-0", "0.5", "16777216", "16777217", "1e10", "1e-10", "-3.25E+2", ".5"})
    check(t);
  INFO(n << " tokens, " << fast << " on the fast path");
  CHECK(bad == 0);
  CHECK(fast > n / 4);
  float f = 0;
  for (char const* t : {"", "+", "-", "+-1", "1e", "1e+", "1.2.3", "0x", "--1", "1 ", "abc"})
    CHECK_FALSE(io::detail::parse_real(std::string_view(t), f));
}

TEST_CASE("challenge readers: a value below float's range rounds (to 0), one above it is refused", "[io]") {
  float f = -1.f;
  REQUIRE(io::detail::parse_real("1e-50", f));
  REQUIRE(f == 0.f);
  REQUIRE_FALSE(std::signbit(f));
  REQUIRE(io::detail::parse_real("-1e-50", f));
  REQUIRE((f == 0.f && std::signbit(f)));
  REQUIRE(io::detail::parse_real("1e-40", f));  // a float denormal, correctly rounded
  REQUIRE(f == std::strtof("1e-40", nullptr));
  REQUIRE_FALSE(io::detail::parse_real("1e50", f));
  double d = 0;
  REQUIRE(io::detail::parse_real("1e-400", d));
  REQUIRE(d == 0.0);
  REQUIRE_FALSE(io::detail::parse_real("1e400", d));
  temp_dir dir;
  auto const p = dir.write("tiny.tsv", "1\t1\t1e-50\n2\t2\t0.0625\n");
  auto const w = io::read_challenge_layer(p, 4);
  REQUIRE(w.nnz() == 2);
  REQUIRE(w.values()[0] == 0.f);
  REQUIRE(has(error_text([&] { io::read_challenge_layer(dir.write("huge.tsv", "1\t1\t1e50\n"), 4); }),
              "line 1: value '1e50' is not a number"));
}
