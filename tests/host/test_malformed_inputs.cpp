// Malformed inputs for include/sdnn, one row each: what was found (memory safety,
// unbounded memory, undefined behaviour or a silent wrong value) and what must happen now
// (an sdnn::error naming the file and, for text, the line; fast; bounded memory). Plus the
// pieces the fixes added: in-memory inputs, gzip members, the read_options limits.
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/formats/dense.hpp>
#include <sdnn/formats/ell.hpp>
#include <sdnn/formats/stats.hpp>
#include <sdnn/formats/tiled_dense.hpp>
#include <sdnn/challenge/tsv.hpp>
#include <sdnn/io/file_stream.hpp>
#include <sdnn/io/matrix_market.hpp>
#include <sdnn/io/mnist_idx.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#if defined(SDNN_HAS_ZLIB) && SDNN_HAS_ZLIB
#include <zlib.h>
#endif

using namespace sdnn;
using sdnn_test::has;
using sdnn_test::temp_dir;

namespace {
std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}
io::input mem(std::string const& name, std::string const& bytes) {
  return io::input::memory(name, bytes.data(), bytes.size());
}
std::string const mm_real = "%%MatrixMarket matrix coordinate real general\n";
std::string const mm_int = "%%MatrixMarket matrix coordinate integer general\n";

// Runs f; returns the sdnn::error's message, "no throw", or "OTHER: <what>" for any other
// exception (std::bad_alloc, std::length_error: never acceptable from a reader).
std::string outcome(std::function<void()> const& f) {
  try {
    f();
  } catch (error const& e) {
    return e.what();
  } catch (std::exception const& e) {
    return std::string("OTHER: ") + e.what();
  }
  return "no throw";
}

struct row {
  char const* found;              // the defect this input exposed
  std::function<void()> input;    // the input, read or built
  std::vector<char const*> want;  // substrings of the sdnn::error message
};

void run_table(std::vector<row> const& table) {
  for (auto const& r : table) {
    auto const t0 = std::chrono::steady_clock::now();
    std::string const got = outcome(r.input);
    double const seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO("found: " << r.found << "\n  got: " << got << "\n  in " << seconds << " s");
    CHECK_FALSE(has(got, "OTHER: "));
    CHECK(got != "no throw");
    for (char const* w : r.want) CHECK(has(got, w));
    CHECK(seconds < 5);  // each was reported as slow or unbounded: now it fails at once
  }
}
}  // namespace

TEST_CASE("malformed inputs, memory safety: sizes that wrapped are refused", "[io][malformed]") {
  run_table({
      {"ell_matrix(2^62, 4, 4, 0): rows x width wrapped to 0, then validate crashed",
       [] { ell_matrix<float, std::int64_t>(std::int64_t(1) << 62, 4, 4, 0); },
       {"ell_matrix: rows x width", "overflow"}},
      {"dense_matrix(2^32, 2^32): size() == 0, then a write crashed",
       [] { dense_matrix<float>(std::int64_t(1) << 32, std::int64_t(1) << 32); },
       {"dense_matrix", "overflow"}},
      {"tiled_dense_matrix(2^40, 2^40, 1 x 1 tiles) (the same product, found by the formats fuzz target)",
       [] { tiled_dense_matrix<float>(std::int64_t(1) << 40, std::int64_t(1) << 40, 1, 1); },
       {"tiled_dense_matrix", "overflow"}},
      {"validate(ell_view{rows = 2^62, width = 0}) never returned",
       [] {
         validate(ell_view<float, std::int64_t>{std::int64_t(1) << 62, 4, 0, 1, nullptr, nullptr}, 0, 0);
       },
       {"ell: nnz = 1 but 0 slots hold entries"}},
      {"make_csr with rows = INT64_MAX: rows + 1 overflowed in the message (formats fuzz target)",
       [] {
         make_csr<float, std::int64_t>(std::numeric_limits<std::int64_t>::max(), 1, {0}, {}, {});
       },
       {"row_ptr must have rows + 1 = 9223372036854775808 entries"}},
  });
  // A hypersparse CSR's statistics no longer allocate the tile grid (4 x 2^62 with 1 x 1
  // tiles allocated 24 GB: formats fuzz target).
  auto const a = make_csr<float, std::int64_t>(4, std::int64_t(1) << 62, {0, 1, 1, 1, 2},
                                               {5, std::int64_t(1) << 61}, {1.f, 2.f});
  auto const s = compute_stats(a, 1, 1);
  CHECK(s.occupied_tiles == 2);
  CHECK(s.tiles == std::numeric_limits<std::int64_t>::max());  // 2^64 tiles: saturated
}

TEST_CASE("malformed inputs, unbounded memory from a tiny file: refused at once", "[io][malformed]") {
  temp_dir dir;
  auto const stray = dir.write("stray.tsv", "1\t1\t1\n2\t3\t1\n2147483647\t5\t1\n");
  auto const lab = dir.write("lab.idx", be32(0x801) + be32(0x7fffffffu));
  auto const img = dir.write("img.idx", be32(0x803) + be32(0x7fffffffu) + be32(4) + be32(4));
  auto const huge_entries = dir.write("e.mtx", mm_real + "3 3 9223372036854775807\n1 1 1\n");
  auto const huge_rows = dir.write("r.mtx", mm_real + "2147483647 2147483647 1\n1 1 1\n");
  // 2 GB of NUL bytes without using 2 GB of disk: a sparse file.
  std::string const nul = dir.file("nul.tsv");
  std::ofstream(nul).close();
  std::filesystem::resize_file(nul, std::uintmax_t(2) << 30);
  run_table({
      {"one image line '2147483647 5 1' made infer grow past 13 GB",
       [&] { io::read_challenge_images(stray, 1024); },
       {"stray.tsv': the largest image id is 2147483647"}},
      {"an 8-byte IDX label file claiming 2^31 - 1 labels took 2.2 GB",
       [&] { io::read_idx_labels(lab); },
       {"lab.idx' is truncated: expected 2147483647 bytes of IDX labels, got 0"}},
      {"a 16-byte IDX image header threw std::bad_alloc",
       [&] { io::read_idx_images(img); },
       {"img.idx': the IDX header claims", "max_claimed_bytes"}},
      {"MatrixMarket size line '3 3 9223372036854775807' threw std::length_error",
       [&] { io::read_matrix_market<float>(huge_entries); },
       {"e.mtx': the size line announced 9223372036854775807 entries, the file has 1"}},
      {"MatrixMarket '2147483647 2147483647 1' ran for over a minute",
       [&] { io::read_matrix_market<float>(huge_rows); },
       {"r.mtx' line 2: 2147483647 rows need", "max_claimed_bytes"}},
      {"the same with 64-bit indices", [&] { io::read_matrix_market<double, std::int64_t>(huge_rows); },
       {"r.mtx' line 2", "max_claimed_bytes"}},
      {"a 2 GB file of NUL bytes took 42 s and 6.3 GB before its 'line 1' error (layer)",
       [&] { io::read_challenge_layer(nul, 1024); },
       {"nul.tsv' line 1: longer than 4194304 bytes (read_options::max_line_bytes)"}},
      {"... (images)", [&] { io::read_challenge_images(nul, 1024); }, {"nul.tsv' line 1: longer than"}},
      {"... (categories)", [&] { io::read_categories(nul); }, {"nul.tsv' line 1: longer than"}},
      {"... (MatrixMarket)", [&] { io::read_matrix_market<float>(nul); }, {"nul.tsv' line 1: longer than"}},
  });
  // The limits are options: a claim above one is refused, and read when the limit is raised.
  io::read_options tiny;
  tiny.max_claimed_bytes = 1000;
  std::string const rows1000 = mm_real + "1000 2 1\n1000 2 5\n";  // 1001 row pointers: 4004 bytes
  CHECK(has(outcome([&] { io::read_matrix_market<float>(mem("t.mtx", rows1000), nullptr, tiny); }),
            "t.mtx' line 2: 1000 rows need (1000 + 1) x 4 bytes of row pointers, more than "
            "read_options::max_claimed_bytes = 1000"));
  auto raised = tiny;
  raised.max_claimed_bytes = 4004;
  auto const m = io::read_matrix_market<float>(mem("t.mtx", rows1000), nullptr, raised);
  CHECK(m.rows() == 1000);
  CHECK(m.nnz() == 1);
  CHECK(has(outcome([&] { io::read_challenge_layer(mem("t.tsv", "1 1 1\n"), 1024, tiny); }),
            "1024 neurons need 1025 row pointers"));
  CHECK(has(outcome([&] { io::read_challenge_images(mem("t.tsv", "1 1 1\n"), 1024, 500, tiny); }),
            "500 images need 501 row pointers"));
  tiny.max_line_bytes = 5;
  CHECK(has(outcome([&] { io::read_categories(mem("c.tsv", "1\n22\n333\n4444\n55555\n666666\n"), tiny); }),
            "c.tsv' line 6: longer than 5 bytes"));
  CHECK(io::read_categories(mem("c.tsv", "1\n22\n55555\n"), tiny).size() == 3);
}

TEST_CASE("malformed inputs, undefined behaviour and silent wrong values: refused with the line", "[io][malformed]") {
  temp_dir dir;
  run_table({
      {"read_matrix_market<int> converted 1e32 to int (UBSan, matrix_market.hpp:106)",
       [] { io::read_matrix_market<int>(mem("a.mtx", mm_real + "2 2 1\n1 1 1e32\n")); },
       {"a.mtx' line 3: value '1e32' does not fit the value type (real field read as int32)"}},
      {"... and nan",
       [] { io::read_matrix_market<int>(mem("a.mtx", mm_real + "2 2 1\n1 1 nan\n")); },
       {"line 3: value 'nan' is not finite"}},
      {"... and truncated 9999999999 silently",
       [] { io::read_matrix_market<int>(mem("a.mtx", mm_int + "2 2 1\n1 1 9999999999\n")); },
       {"line 3: value '9999999999' does not fit the value type (integer field read as int32)"}},
      {"... (a real field, too)",
       [] { io::read_matrix_market<int>(mem("a.mtx", mm_real + "2 2 1\n1 1 9999999999\n")); },
       {"line 3: value '9999999999' does not fit"}},
      {"... (a fraction is not an int either)",
       [] { io::read_matrix_market<int>(mem("a.mtx", mm_real + "2 2 1\n1 1 1.5\n")); },
       {"line 3: value '1.5' is not an integer"}},
      {"read_matrix_market<int> negated INT_MIN for skew-symmetric (matrix_market.hpp:121)",
       [] {
         io::read_matrix_market<int>(
             mem("s.mtx", "%%MatrixMarket matrix coordinate integer skew-symmetric\n2 2 1\n2 1 -2147483648\n"));
       },
       {"s.mtx' line 3: the skew-symmetric mirror -(-2147483648) of this entry does not fit int32"}},
      {"summing duplicates overflowed (triplets.hpp:71)",
       [] {
         io::read_matrix_market<int>(mem("d.mtx", mm_int + "2 2 3\n1 1 2147483647\n% x\n2 2 1\n1 1 1\n"));
       },
       {"d.mtx' line 6: summing the duplicate entries at row 1, column 1 (1-based) overflows the value type"}},
      {"... (a float sum that overflows to Inf)",
       [] { io::read_matrix_market<float>(mem("f.mtx", mm_real + "2 2 2\n1 1 3e38\n1 1 3e38\n")); },
       {"f.mtx' line 4: summing the duplicate entries at row 1, column 1 (1-based) overflows to Inf"}},
      {"the duplicate-entry error had no line number (layer)",
       [] { io::read_challenge_layer(mem("l.tsv", "1\t2\t1\n\n3\t3\t1\n1\t2\t0.5\n"), 4); },
       {"l.tsv' line 4: duplicate entry at row 1, column 2 (1-based), first given at line 1"}},
      {"... (images)",
       [] { io::read_challenge_images(mem("i.tsv", "2\t2\t1\n2\t2\t1\n"), 4); },
       {"i.tsv' line 2: duplicate entry at row 2, column 2 (1-based), first given at line 1"}},
      {"NaN weights were accepted (36 categories instead of 19)",
       [] { io::read_challenge_layer(mem("n.tsv", "1\t1\t1\n2\t2\tnan\n"), 4); },
       {"n.tsv' line 2: value 'nan' is not finite"}},
      {"Inf pixels were accepted", [] { io::read_challenge_images(mem("n.tsv", "1\t1\tinf\n"), 4); },
       {"n.tsv' line 1: value 'inf' is not finite"}},
      {"NaN in a MatrixMarket float file", [] { io::read_matrix_market<float>(mem("n.mtx", mm_real + "1 1 1\n1 1 nan\n")); },
       {"n.mtx' line 3: value 'nan' is not finite"}},
      {"an empty layer file was 0 connections", [] { io::read_challenge_layer(mem("e.tsv", ""), 4); },
       {"e.tsv' holds no entries: an empty layer file"}},
      {"... (blank lines only)", [] { io::read_challenge_layer(mem("e.tsv", "\n \r\n\t\n"), 4); },
       {"e.tsv' holds no entries"}},
      {"an empty image file was 0 images (0 categories, exit 0)",
       [] { io::read_challenge_images(mem("e.tsv", ""), 4); }, {"e.tsv' holds no entries: an empty image file"}},
      {"... (with an explicit count)", [] { io::read_challenge_images(mem("e.tsv", "\n"), 4, 10); },
       {"holds no entries"}},
      {"IDX labels above 9 were accepted",
       [] { io::read_idx_labels(mem("l.idx", be32(0x801) + be32(2) + std::string("\x03\x0c", 2))); },
       {"l.idx': label 1 is 12, not a digit 0..9"}},
      {"IDX trailing garbage was accepted",
       [] { io::read_idx_images(mem("i.idx", be32(0x803) + be32(1) + be32(1) + be32(1) + "xy")); },
       {"i.idx': bytes follow the pixel data"}},
      {"'read error on /tmp' for a directory (layer)", [&] { io::read_challenge_layer(dir.path.string(), 4); },
       {"cannot read '", "': it is a directory, not a file"}},
      {"... (MatrixMarket)", [&] { io::read_matrix_market<float>(dir.path.string()); }, {"it is a directory"}},
      {"... (IDX)", [&] { io::read_idx_labels(dir.path.string()); }, {"it is a directory"}},
  });
  // What fits is read exactly: the edges of int32, integral reals, a skew mirror of INT_MAX,
  // NaN/Inf when allowed.
  auto const e = io::read_matrix_market<int>(
      mem("ok.mtx", "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 2147483647\n3 1 -2.0e3\n"));
  CHECK(std::vector<int>(e.values().begin(), e.values().end()) == std::vector<int>{-2147483647, 2000, 2147483647, -2000});
  auto const lo = io::read_matrix_market<int>(mem("lo.mtx", mm_int + "1 2 2\n1 1 -2147483648\n1 2 -2147483648\n"));
  CHECK(lo.values()[0] == std::numeric_limits<int>::min());
  auto const sum = io::read_matrix_market<int>(mem("s.mtx", mm_int + "1 1 3\n1 1 2147483647\n1 1 -5\n1 1 5\n"));
  CHECK(sum.values()[0] == 2147483647);
  io::read_options allow;
  allow.allow_non_finite = true;
  auto const nan = io::read_challenge_layer(mem("n.tsv", "1\t1\tnan\n2\t2\t-inf\n"), 4, allow);
  CHECK(std::isnan(nan.values()[0]));
  CHECK(std::isinf(nan.values()[1]));
  auto const inf = io::read_matrix_market<float>(mem("i.mtx", mm_real + "1 1 2\n1 1 3e38\n1 1 3e38\n"), nullptr, allow);
  CHECK(std::isinf(inf.values()[0]));
}

TEST_CASE("io::input reads bytes in memory like a file, plain or gzip'd", "[io][malformed]") {
  std::string const text = mm_real + "2 2 2\n1 1 1.5\n2 2 -2\n";
  auto const a = io::read_matrix_market<double>(mem("m.mtx", text));
  REQUIRE(a.nnz() == 2);
  CHECK(a.values()[1] == -2);
  CHECK(io::read_categories(mem("c.tsv", "3\n4")) == std::vector<std::int32_t>{3, 4});
  CHECK(io::read_idx_labels(mem("l.idx", be32(0x801) + be32(1) + std::string(1, '\x07'))) ==
        std::vector<std::uint8_t>{7});
  CHECK(has(outcome([] { io::read_categories(mem("", "")); }), "no throw"));
#if defined(SDNN_HAS_ZLIB) && SDNN_HAS_ZLIB
  auto gzip = [](std::string const& s) {
    z_stream z{};
    REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    std::string out(deflateBound(&z, static_cast<uLong>(s.size())) + 64, '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.data()));
    z.avail_in = static_cast<uInt>(s.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
    out.resize(z.total_out);
    deflateEnd(&z);
    return out;
  };
  std::string const gz = gzip(text);
  auto const b = io::read_matrix_market<double>(mem("m.mtx.gz", gz));
  CHECK(b.nnz() == 2);
  // Concatenated members read as one stream (as gunzip does).
  std::string const two = gzip("1\t1\t1\n") + gzip("2\t2\t0.5\n");
  CHECK(io::read_challenge_layer(mem("two.tsv.gz", two), 4).nnz() == 2);
  // Anything else after the stream, a cut stream, a flipped byte: errors.
  CHECK(has(outcome([&] { io::read_challenge_layer(mem("x.tsv.gz", gzip("1 1 1\n") + "junk"), 4); }),
            "x.tsv.gz': bytes follow the gzip stream that are not another gzip member"));
  CHECK(has(outcome([&] { io::read_challenge_layer(mem("x.tsv.gz", gz.substr(0, gz.size() - 3)), 4); }),
            "x.tsv.gz': gzip stream is truncated"));
  std::string flipped = gz;
  flipped[gz.size() / 2] = static_cast<char>(flipped[gz.size() / 2] ^ 0x20);
  CHECK(has(outcome([&] { io::read_matrix_market<double>(mem("x.mtx.gz", flipped)); }), "x.mtx.gz'"));
  CHECK(has(outcome([] { io::read_categories(mem("m.gz", std::string("\x1f\x8b", 2))); }), "truncated"));
  // A gzip'd run of NUL bytes (a "zip bomb" of a few kB) fails at the line limit too.
  std::string const bomb = gzip(std::string(std::size_t(16) << 20, '\0'));
  CHECK(bomb.size() < (std::size_t(1) << 17));
  CHECK(has(outcome([&] { io::read_challenge_layer(mem("bomb.tsv.gz", bomb), 4); }), "line 1: longer than"));
#endif
}
