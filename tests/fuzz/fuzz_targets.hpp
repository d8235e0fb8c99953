// tests/fuzz/fuzz_targets.hpp - the fuzz targets' bodies, shared by the libFuzzer programs
// (tests/fuzz/fuzz_<target>.cpp, clang + ASan + UBSan) and the regression replay in the host
// tests (tests/host/test_fuzz_regressions.cpp, any compiler).
//
// Each target takes the raw input bytes and either returns (the input was read, or refused
// with an sdnn::error: both are fine) or throws sdnn_fuzz::oracle_failure when a property the
// library promises does not hold (a result that does not validate, two reads that disagree, a
// round trip that changes the matrix). Anything else escaping (std::bad_alloc, a crash, a
// sanitizer report, a hang) is a bug: libFuzzer reports an uncaught exception as a crash.
//
// The readers run on the bytes in memory (io::input::memory) with small limits (fuzz_options):
// the fuzzer should find bugs, not the legitimate cost of a 2 GiB matrix.
#pragma once

#include <sdnn/core/error.hpp>
#include <sdnn/conv/weights.hpp>
#include <sdnn/formats/convert.hpp>
#include <sdnn/formats/coo.hpp>
#include <sdnn/formats/csc_tiles.hpp>
#include <sdnn/formats/csr.hpp>
#include <sdnn/formats/dense.hpp>
#include <sdnn/formats/ell.hpp>
#include <sdnn/formats/stats.hpp>
#include <sdnn/formats/tiled_dense.hpp>
#include <sdnn/challenge/tsv.hpp>
#include <sdnn/io/file_stream.hpp>
#include <sdnn/io/matrix_market.hpp>
#include <sdnn/io/mnist_idx.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace sdnn_fuzz {

// A promise of the library that does not hold for this input.
struct oracle_failure : std::logic_error {
  using std::logic_error::logic_error;
};

#define SDNN_FUZZ_CHECK(cond, ...)                                                                       \
  do {                                                                                                   \
    if (!(cond))                                                                                         \
      throw ::sdnn_fuzz::oracle_failure(::sdnn::detail::concat("fuzz oracle: ", #cond, ": ", __VA_ARGS__)); \
  } while (0)

// Limits for reads under the fuzzer (the defaults allow 2 GiB of row pointers).
inline sdnn::io::read_options fuzz_options() {
  sdnn::io::read_options o;
  o.max_line_bytes = std::size_t(1) << 16;
  o.max_claimed_bytes = std::uint64_t(1) << 24;
  return o;
}

inline sdnn::io::input as_input(std::uint8_t const* data, std::size_t size, char const* name) {
  return sdnn::io::input::memory(name, data, size);
}

// Runs f(), which must not fail on valid data: an sdnn::error becomes an oracle failure.
template <class F>
void must(char const* what, F&& f) {
  try {
    f();
  } catch (sdnn::error const& e) {
    throw oracle_failure(sdnn::detail::concat("fuzz oracle: ", what, " failed on valid data: ", e.what()));
  }
}

// Runs f(), treating an sdnn::error as a refusal: true when f returned normally.
template <class F>
bool accepted(F&& f) {
  try {
    f();
    return true;
  } catch (sdnn::error const&) {
    return false;
  }
}

template <class T>
bool same_value(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return a == b || (std::isnan(a) && std::isnan(b));
  else return a == b;
}
template <class A, class B>
bool same_values(A const& a, B const& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t k = 0; k < a.size(); ++k)
    if (!same_value(a[k], b[k])) return false;
  return true;
}
template <class T, class I>
bool same_csr(sdnn::csr_matrix<T, I> const& a, sdnn::csr_matrix<T, I> const& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() && same_values(a.row_ptr(), b.row_ptr()) &&
         same_values(a.col_idx(), b.col_idx()) && same_values(a.values(), b.values());
}
template <class T, class I, class U, class J>
bool same_structure(sdnn::csr_matrix<T, I> const& a, sdnn::csr_matrix<U, J> const& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols() || a.nnz() != b.nnz()) return false;
  for (std::size_t i = 0; i < a.row_ptr().size(); ++i)
    if (a.row_ptr()[i] != b.row_ptr()[i]) return false;
  for (std::size_t k = 0; k < a.col_idx().size(); ++k)
    if (a.col_idx()[k] != b.col_idx()[k]) return false;
  return true;
}

// ---------------------------------------------------------------------------------------
// Readers.

inline constexpr std::int32_t fuzz_neurons = 1024;

inline void challenge_layer(std::uint8_t const* data, std::size_t size) {
  auto const opt = fuzz_options();
  sdnn::csr_matrix<float, std::int32_t> m;
  if (!accepted([&] { m = sdnn::io::read_challenge_layer(as_input(data, size, "layer.tsv"), fuzz_neurons, opt); }))
    return;
  SDNN_FUZZ_CHECK(accepted([&] { sdnn::validate(m); }), "the layer read does not validate");
  SDNN_FUZZ_CHECK(m.rows() == fuzz_neurons && m.cols() == fuzz_neurons && m.nnz() > 0, "shape ", m.rows(), " x ",
                  m.cols(), ", nnz ", m.nnz());
  for (float v : m.values()) SDNN_FUZZ_CHECK(std::isfinite(v), "a non-finite weight was accepted");
}

inline void challenge_images(std::uint8_t const* data, std::size_t size) {
  auto const opt = fuzz_options();
  auto const in = as_input(data, size, "images.tsv");
  sdnn::csr_matrix<float, std::int32_t> m;
  if (!accepted([&] { m = sdnn::io::read_challenge_images(in, fuzz_neurons, -1, opt); })) return;
  SDNN_FUZZ_CHECK(accepted([&] { sdnn::validate(m); }), "the images read do not validate");
  SDNN_FUZZ_CHECK(m.rows() >= 1 && m.nnz() > 0, "rows ", m.rows(), ", nnz ", m.nnz());
  // The same file with its image count given explicitly reads the same; one image less fails.
  sdnn::csr_matrix<float, std::int32_t> e;
  SDNN_FUZZ_CHECK(accepted([&] { e = sdnn::io::read_challenge_images(in, fuzz_neurons, m.rows(), opt); }),
                  "refused with the count it was read with");
  SDNN_FUZZ_CHECK(same_csr(m, e), "explicit image count reads differently");
  SDNN_FUZZ_CHECK(!accepted([&] { sdnn::io::read_challenge_images(in, fuzz_neurons, m.rows() - 1, opt); }),
                  "an image id above the explicit count was accepted");
}

inline void categories(std::uint8_t const* data, std::size_t size) {
  std::vector<std::int32_t> ids;
  if (!accepted([&] { ids = sdnn::io::read_categories(as_input(data, size, "categories.tsv"), fuzz_options()); }))
    return;
  for (auto id : ids) SDNN_FUZZ_CHECK(id >= 1, "id ", id);
}

inline void matrix_market(std::uint8_t const* data, std::size_t size) {
  auto const in = as_input(data, size, "m.mtx");
  auto opt = fuzz_options();
  sdnn::csr_matrix<float, std::int32_t> f;
  bool const f_ok = accepted([&] { f = sdnn::io::read_matrix_market<float, std::int32_t>(in, nullptr, opt); });
  if (f_ok) {
    SDNN_FUZZ_CHECK(accepted([&] { sdnn::validate(f); }), "the float matrix does not validate");
    for (float v : f.values()) SDNN_FUZZ_CHECK(std::isfinite(v), "a non-finite value was accepted");
  }
  // double, 64-bit indices, NaN/Inf allowed: accepts at least what the float read accepts
  // (the same row pointer memory: twice the bytes for twice the width), with the same structure.
  auto wide = opt;
  wide.allow_non_finite = true;
  wide.max_claimed_bytes *= 2;
  sdnn::csr_matrix<double, std::int64_t> d;
  bool const d_ok = accepted([&] { d = sdnn::io::read_matrix_market<double, std::int64_t>(in, nullptr, wide); });
  if (d_ok) SDNN_FUZZ_CHECK(accepted([&] { sdnn::validate(d); }), "the double matrix does not validate");
  if (f_ok) {
    SDNN_FUZZ_CHECK(d_ok, "read as float but refused as double with NaN/Inf allowed");
    SDNN_FUZZ_CHECK(same_structure(f, d), "float and double reads differ in structure");
  }
}

inline void matrix_market_int(std::uint8_t const* data, std::size_t size) {
  auto const in = as_input(data, size, "m.mtx");
  auto const opt = fuzz_options();
  sdnn::csr_matrix<int, std::int32_t> a;
  if (!accepted([&] { a = sdnn::io::read_matrix_market<int, std::int32_t>(in, nullptr, opt); })) return;
  SDNN_FUZZ_CHECK(accepted([&] { sdnn::validate(a); }), "the int matrix does not validate");
  // Every int32 value and every int32 sum is exact in double and in int64: the same matrix.
  sdnn::csr_matrix<double, std::int32_t> d;
  SDNN_FUZZ_CHECK(accepted([&] { d = sdnn::io::read_matrix_market<double, std::int32_t>(in, nullptr, opt); }),
                  "read as int but refused as double");
  SDNN_FUZZ_CHECK(same_structure(a, d), "int and double reads differ in structure");
  for (std::size_t k = 0; k < a.values().size(); ++k)
    SDNN_FUZZ_CHECK(static_cast<double>(a.values()[k]) == d.values()[k], "value ", k, ": int ", a.values()[k],
                    ", double ", d.values()[k]);
  auto wide = opt;
  wide.max_claimed_bytes *= 2;
  sdnn::csr_matrix<std::int64_t, std::int64_t> l;
  SDNN_FUZZ_CHECK(accepted([&] { l = sdnn::io::read_matrix_market<std::int64_t, std::int64_t>(in, nullptr, wide); }),
                  "read as int but refused as int64");
  SDNN_FUZZ_CHECK(same_structure(a, l), "int and int64 reads differ in structure");
  for (std::size_t k = 0; k < a.values().size(); ++k)
    SDNN_FUZZ_CHECK(a.values()[k] == l.values()[k], "value ", k, ": int ", a.values()[k], ", int64 ", l.values()[k]);
}

inline void idx_images(std::uint8_t const* data, std::size_t size) {
  sdnn::io::idx_images im;
  if (!accepted([&] { im = sdnn::io::read_idx_images(as_input(data, size, "images.idx"), fuzz_options()); })) return;
  SDNN_FUZZ_CHECK(im.count >= 0 && im.rows >= 0 && im.cols >= 0 &&
                      im.pixels.size() == std::size_t(im.count) * std::size_t(im.rows) * std::size_t(im.cols),
                  im.count, " x ", im.rows, " x ", im.cols, " but ", im.pixels.size(), " pixels");
}

inline void idx_labels(std::uint8_t const* data, std::size_t size) {
  std::vector<std::uint8_t> labels;
  if (!accepted([&] { labels = sdnn::io::read_idx_labels(as_input(data, size, "labels.idx"), fuzz_options()); }))
    return;
  for (auto l : labels) SDNN_FUZZ_CHECK(l <= 9, "label ", int(l));
}

// ---------------------------------------------------------------------------------------
// Formats from raw arrays.

// Decodes sizes, indices and values from the fuzz input (zeros once it runs out).
class decoder {
 public:
  decoder(std::uint8_t const* p, std::size_t n) : p_(p), n_(n) {}
  bool empty() const { return n_ == 0; }
  std::uint8_t byte() {
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  template <class I>
  I raw() {
    std::make_unsigned_t<I> v = 0;
    for (std::size_t b = 0; b < sizeof(I); ++b) v = static_cast<std::make_unsigned_t<I>>(v << 8 | byte());
    I r;
    std::memcpy(&r, &v, sizeof r);
    return r;
  }
  // An extent: mostly 0..8, sometimes a value at an edge of the index range.
  template <class I>
  I extent() {
    std::uint8_t const b = byte();
    if (b < 208) return static_cast<I>(b % 9);
    static constexpr std::int64_t edges[] = {-1,
                                             16,
                                             64,
                                             1000,
                                             65536,
                                             std::int64_t(1) << 30,
                                             std::numeric_limits<std::int32_t>::max(),
                                             std::int64_t(1) << 31,
                                             std::int64_t(1) << 32,
                                             (std::int64_t(1) << 32) + 1,
                                             std::int64_t(1) << 40,
                                             std::int64_t(1) << 60,
                                             (std::int64_t(1) << 60) + 1,
                                             std::int64_t(1) << 62,
                                             std::numeric_limits<std::int64_t>::max(),
                                             std::numeric_limits<std::int64_t>::min()};
    std::int64_t const e = edges[(b - 208) % (sizeof(edges) / sizeof(edges[0]))];
    if constexpr (sizeof(I) < sizeof(std::int64_t)) {
      if (e > std::numeric_limits<I>::max() || e < std::numeric_limits<I>::min()) return raw<I>();
    }
    return static_cast<I>(e);
  }
  // An index meant for [0, bound): mostly in range, sometimes just outside or arbitrary.
  template <class I>
  I index(std::int64_t bound) {
    std::uint8_t const b = byte();
    if (b < 224 && bound > 0) return static_cast<I>(static_cast<std::int64_t>(raw<std::uint16_t>()) % bound);
    if (b < 240) return static_cast<I>(b % 2 ? -1 : bound);
    return raw<I>();
  }
  template <class T>
  T value() {
    std::uint8_t const b = byte();
    switch (b % 8) {
      case 0: return T(0);
      case 1: return T(1);
      case 2: return T(-0.0);
      case 3: return T(0.5);
      case 4: return std::numeric_limits<T>::quiet_NaN();
      default: return static_cast<T>(raw<std::int16_t>()) / T(8);
    }
  }
  std::size_t count(std::size_t most) { return most ? byte() % (most + 1) : 0; }

 private:
  std::uint8_t const* p_;
  std::size_t n_;
};

// Products of extents as the constructors see them: the harness builds only what fits
// `budget` elements (a larger legitimate allocation is not a bug), and expects an sdnn::error
// for what overflows the constructors' bound (2^60 elements).
inline constexpr std::uint64_t budget = std::uint64_t(1) << 16;
inline constexpr std::uint64_t addressable = std::uint64_t(1) << 60;
inline unsigned __int128 product(std::int64_t a, std::int64_t b) {
  return static_cast<unsigned __int128>(static_cast<std::uint64_t>(a)) * static_cast<std::uint64_t>(b);
}

// Every conversion of a valid CSR (rows <= budget) round-trips; conversions whose size
// grows with cols run only when cols <= budget.
template <class T, class I>
void check_csr_round_trips_or_throw(sdnn::csr_matrix<T, I> const& a, decoder& in) {
  using namespace sdnn;
  validate(a);
  auto const coo = to_coo(a);
  validate(coo);
  SDNN_FUZZ_CHECK(same_csr(to_csr(coo), a), "csr -> coo -> csr changed the matrix");
  auto const ell = to_ell(a);
  validate(ell);
  SDNN_FUZZ_CHECK(same_csr(to_csr(ell), a), "csr -> ell -> csr changed the matrix");
  if (product(a.cols(), 1) <= budget) {  // the transpose has cols + 1 row pointers
    auto const t = transpose(a);
    validate(t);
    SDNN_FUZZ_CHECK(same_csr(transpose(t), a), "transpose twice changed the matrix");
  }
  std::int64_t const tr = 1 + in.byte() % 8, tc = 1 + in.byte() % 8;
  auto const s = compute_stats(a, tr, tc);
  SDNN_FUZZ_CHECK(s.nnz == static_cast<std::int64_t>(a.nnz()) && s.occupied_tiles <= s.tiles, "stats: nnz ", s.nnz,
                  ", occupied ", s.occupied_tiles, " of ", s.tiles);
  if (product(a.rows(), a.cols()) > budget) return;
  auto const d = to_dense(a);
  // Explicit zeros are stored in CSR but not in dense: compare through dense.
  auto const back = to_csr<I>(d);
  validate(back);
  SDNN_FUZZ_CHECK(same_values(to_dense(back).values(), d.values()), "csr -> dense -> csr -> dense differs");
  auto const tiled = to_tiled_dense(a, tr, tc);
  validate(tiled);
  SDNN_FUZZ_CHECK(same_values(to_dense(tiled).values(), d.values()), "csr -> tiled -> dense differs from csr -> dense");
  auto const from_tiled = to_csr<I>(tiled);
  validate(from_tiled);
  SDNN_FUZZ_CHECK(same_values(to_dense(from_tiled).values(), d.values()), "tiled -> csr differs");
  auto const coo_dense = to_dense(coo);
  SDNN_FUZZ_CHECK(same_values(coo_dense.values(), d.values()), "coo -> dense differs from csr -> dense");
}

template <class T, class I>
void check_csr_round_trips(sdnn::csr_matrix<T, I> const& a, decoder& in) {
  must("conversions", [&] { check_csr_round_trips_or_throw(a, in); });
}

// CSR from raw arrays: make_csr, validate through a view with the arrays' true sizes.
template <class T, class I>
void fuzz_csr(decoder& in) {
  using namespace sdnn;
  I const rows = in.extent<I>(), cols = in.extent<I>();
  std::vector<I> rp, ci;
  std::vector<T> v;
  bool const plausible = rows >= 0 && rows <= 64;
  std::size_t const rp_len = plausible ? static_cast<std::size_t>(rows) + 1 - (in.byte() % 16 == 0) : in.count(8);
  I at = 0;
  for (std::size_t i = 0; i < rp_len; ++i) {
    std::uint8_t const b = in.byte();
    if (i == 0) at = b < 240 ? 0 : in.raw<I>();
    else if (b < 240) at = at <= std::numeric_limits<I>::max() - 3 ? static_cast<I>(at + b % 4) : at;
    else at = in.raw<I>();
    rp.push_back(at);
  }
  std::size_t const nnz = !rp.empty() && rp.back() >= 0 && rp.back() <= 256 && in.byte() < 240
                              ? static_cast<std::size_t>(rp.back())
                              : in.count(16);
  for (std::size_t k = 0; k < nnz; ++k) {
    ci.push_back(in.index<I>(cols));
    v.push_back(in.value<T>());
  }
  // The view with whatever nnz the input claims, and the arrays' true sizes.
  csr_view<T, I> view{rows, cols, in.byte() < 200 ? static_cast<I>(ci.size()) : in.extent<I>(), rp.data(), ci.data(),
                      v.data()};
  if (rp.empty()) view.row_ptr = nullptr;
  accepted([&] { validate(view, rp.size(), ci.size(), v.size()); });
  csr_matrix<T, I> a;
  if (!accepted([&] { a = make_csr<T, I>(rows, cols, rp, ci, v); })) return;
  check_csr_round_trips(a, in);
  // The footprint tiles of the dense x sparse product hold exactly the matrix (bt = a).
  if constexpr (std::is_same_v<I, std::int32_t>) {
    if (product(a.cols(), 1) > budget) return;  // per-input scratch arrays
    std::int32_t const tile_cols = in.extent<std::int32_t>(), max_fp = in.extent<std::int32_t>();
    csc_tiles_host<T> tiles;
    bool built = false;
    if (!accepted([&] { built = build_csc_tiles(a.view(), tile_cols, max_fp, tiles); }) || !built) return;
    std::vector<int> seen(static_cast<std::size_t>(a.rows()), 0);
    SDNN_FUZZ_CHECK(tiles.fp_ptr.size() == std::size_t(tiles.tiles) + 1 && tiles.col_ptr.size() == tiles.fp_ptr.size(),
                    "csc_tiles: ", tiles.tiles, " tiles but ", tiles.fp_ptr.size(), " footprint pointers");
    for (std::int32_t t = 0; t < tiles.tiles; ++t) {
      std::int32_t const f0 = tiles.fp_ptr[std::size_t(t)], f1 = tiles.fp_ptr[std::size_t(t) + 1];
      SDNN_FUZZ_CHECK(f1 - f0 <= tiles.max_footprint && f1 - f0 <= max_fp, "csc_tiles: tile ", t, " footprint ",
                      f1 - f0);
      for (std::int32_t q = tiles.col_ptr[std::size_t(t)]; q < tiles.col_ptr[std::size_t(t) + 1]; ++q) {
        std::int32_t const j = tiles.cols[std::size_t(q)];
        SDNN_FUZZ_CHECK(j >= 0 && j < a.rows() && !seen[std::size_t(j)]++, "csc_tiles: column ", j);
        std::int32_t const b = a.row_ptr()[std::size_t(j)], e = a.row_ptr()[std::size_t(j) + 1];
        SDNN_FUZZ_CHECK(tiles.nnz_ptr[std::size_t(q) + 1] - tiles.nnz_ptr[std::size_t(q)] == e - b,
                        "csc_tiles: column ", j, " entry count");
        for (std::int32_t k = 0; k < e - b; ++k) {
          std::size_t const at_k = std::size_t(tiles.nnz_ptr[std::size_t(q)] + k);
          std::int32_t const input = tiles.fp[std::size_t(f0 + tiles.lidx[at_k])];
          SDNN_FUZZ_CHECK(input == a.col_idx()[std::size_t(b + k)] && same_value(tiles.vals[at_k], a.values()[std::size_t(b + k)]),
                          "csc_tiles: column ", j, " entry ", k);
        }
      }
    }
    for (std::size_t j = 0; j < seen.size(); ++j) SDNN_FUZZ_CHECK(seen[j] == 1, "csc_tiles: column ", j, " missing");
  }
}

template <class T, class I>
void fuzz_coo(decoder& in) {
  using namespace sdnn;
  I const rows = in.extent<I>(), cols = in.extent<I>();
  std::size_t const n = in.count(24);
  std::vector<I> r, c;
  std::vector<T> v;
  for (std::size_t k = 0; k < n; ++k) {
    r.push_back(in.index<I>(rows));
    c.push_back(in.index<I>(cols));
    v.push_back(in.value<T>());
  }
  coo_view<T, I> view{rows, cols, in.byte() < 200 ? static_cast<I>(n) : in.extent<I>(), r.data(), c.data(), v.data()};
  accepted([&] { validate(view, r.size(), c.size(), v.size()); });
  coo_matrix<T, I> a;
  if (!accepted([&] { a = make_coo<T, I>(rows, cols, r, c, v); })) return;
  must("validate after make_coo", [&] { validate(a); });
  if (product(rows, 1) > budget) return;  // to_csr builds rows + 1 pointers
  csr_matrix<T, I> csr;
  must("coo -> csr", [&] { csr = to_csr(a); });
  check_csr_round_trips(csr, in);
  auto const back = to_coo(csr);
  SDNN_FUZZ_CHECK(same_values(back.row_idx(), a.row_idx()) && same_values(back.col_idx(), a.col_idx()) &&
                      same_values(back.values(), a.values()),
                  "coo -> csr -> coo changed the matrix");
}

template <class T, class I>
void fuzz_ell(decoder& in) {
  using namespace sdnn;
  I const rows = in.extent<I>(), cols = in.extent<I>(), width = in.extent<I>(), nnz = in.extent<I>();
  // validate through a view over arrays of the input's own (small) length: never read past them.
  std::size_t const len = in.count(32);
  std::vector<I> ci;
  std::vector<T> v;
  for (std::size_t k = 0; k < len; ++k) {
    ci.push_back(in.byte() % 3 ? in.index<I>(cols) : ell_padding<I>);
    v.push_back(ci.back() == ell_padding<I> && in.byte() % 8 ? T(0) : in.value<T>());
  }
  accepted([&] { validate(ell_view<T, I>{rows, cols, width, nnz, ci.data(), v.data()}, ci.size(), v.size()); });
  if (rows < 0 || width < 0) return;
  unsigned __int128 const slots = product(rows, width);
  if (slots > addressable) {
    SDNN_FUZZ_CHECK(!accepted([&] { (void)ell_matrix<T, I>(rows, cols, width, nnz); }), rows, " x ", width,
                    " slots were allocated");
    return;
  }
  if (slots > budget) return;
  ell_matrix<T, I> a;
  if (!accepted([&] { a = ell_matrix<T, I>(rows, cols, width, nnz); })) return;
  for (std::size_t s = 0; s < a.col_idx().size(); ++s) {
    if (in.byte() % 4 == 0) continue;  // stays padding
    a.col_idx()[s] = in.index<I>(cols);
    a.values()[s] = a.col_idx()[s] == ell_padding<I> ? T(0) : in.value<T>();
  }
  if (!accepted([&] { validate(a); })) return;
  if (product(rows, 1) > budget) return;  // to_csr builds rows + 1 pointers
  csr_matrix<T, I> csr;
  must("ell -> csr", [&] { csr = to_csr(a); });
  check_csr_round_trips(csr, in);
  ell_matrix<T, I> again;
  must("csr -> ell", [&] { again = to_ell(csr, width); });
  SDNN_FUZZ_CHECK(same_values(again.col_idx(), a.col_idx()) && same_values(again.values(), a.values()),
                  "ell -> csr -> ell changed the slots");
}

template <class T>
void fuzz_dense(decoder& in) {
  using namespace sdnn;
  std::int64_t const rows = in.extent<std::int64_t>(), cols = in.extent<std::int64_t>();
  if (rows < 0 || cols < 0) {
    SDNN_FUZZ_CHECK(!accepted([&] { (void)dense_matrix<T>(rows, cols); }), "negative shape accepted");
    return;
  }
  if (product(rows, cols) > addressable) {
    SDNN_FUZZ_CHECK(!accepted([&] { (void)dense_matrix<T>(rows, cols); }), rows, " x ", cols, " was allocated");
    return;
  }
  if (product(rows, cols) > budget) return;
  dense_matrix<T> d;
  must("dense_matrix", [&] { d = dense_matrix<T>(rows, cols); });
  SDNN_FUZZ_CHECK(d.size() == static_cast<std::size_t>(rows * cols), "size ", d.size());
  for (auto& x : d.values()) x = in.byte() % 2 ? T(0) : in.value<T>();
  std::int64_t const tr = in.extent<std::int64_t>(), tc = in.extent<std::int64_t>();
  if (tr <= 0 || tc <= 0) {
    SDNN_FUZZ_CHECK(!accepted([&] { (void)tiled_dense_matrix<T>(rows, cols, tr, tc); }), "tile ", tr, " x ", tc,
                    " accepted");
  } else {
    std::int64_t const gr = sdnn::detail::ceil_div(rows, tr), gc = sdnn::detail::ceil_div(cols, tc);
    unsigned __int128 const tiles = product(gr, gc), tile = product(tr, tc);
    unsigned __int128 const elements = tiles > addressable || tile > addressable ? ~static_cast<unsigned __int128>(0)
                                                                                 : tiles * tile;
    if (elements > addressable || product(gr, 1) > addressable) {
      SDNN_FUZZ_CHECK(!accepted([&] { (void)tiled_dense_matrix<T>(rows, cols, tr, tc); }), rows, " x ", cols, " in ",
                      tr, " x ", tc, " tiles was allocated");
    } else if (elements <= budget && product(gr, 1) <= budget && rows <= std::int64_t(budget) &&
               cols <= std::int64_t(budget)) {  // conversions loop over rows and cols
      must("dense -> tiled", [&] {
        auto const t = to_tiled_dense(d, tr, tc);
        validate(t);
        SDNN_FUZZ_CHECK(same_values(to_dense(t).values(), d.values()), "dense -> tiled -> dense changed the matrix");
      });
    }
  }
  if (rows > static_cast<std::int64_t>(budget) || cols > std::numeric_limits<std::int32_t>::max()) return;
  csr_matrix<T, std::int32_t> csr;
  must("dense -> csr", [&] { csr = to_csr<std::int32_t>(d); });
  check_csr_round_trips(csr, in);
}

// A tiled-dense view from raw arrays (true sizes) through validate, and a matrix whose tile
// index comes from the input.
template <class T>
void fuzz_tiled(decoder& in) {
  using namespace sdnn;
  std::int64_t const rows = in.extent<std::int64_t>(), cols = in.extent<std::int64_t>();
  std::int64_t const tr = in.extent<std::int64_t>(), tc = in.extent<std::int64_t>();
  std::int64_t const gr = in.byte() < 200 ? sdnn::detail::ceil_div(rows, tr) : in.extent<std::int64_t>();
  std::int64_t const gc = in.byte() < 200 ? sdnn::detail::ceil_div(cols, tc) : in.extent<std::int64_t>();
  std::vector<T> data(in.count(64));
  for (auto& x : data) x = in.byte() % 2 ? T(0) : in.value<T>();
  std::vector<std::uint8_t> occ(in.count(16));
  for (auto& o : occ) o = in.byte() % 3;
  std::vector<std::int64_t> trp(in.count(9)), tcol(in.count(16));
  for (auto& x : trp) x = in.byte() < 240 ? in.byte() % 8 : in.raw<std::int64_t>();
  for (auto& x : tcol) x = in.index<std::int64_t>(gc);
  std::int64_t const occupied = in.byte() < 200 ? static_cast<std::int64_t>(tcol.size()) : in.extent<std::int64_t>();
  tiled_dense_view<T const> v{rows, cols, tr, tc, gr, gc, occupied, data.data(), occ.data(),
                              trp.empty() ? nullptr : trp.data(), tcol.data()};
  accepted([&] { validate(v, data.size(), occ.size(), trp.size(), tcol.size()); });

  if (rows < 0 || cols < 0 || tr <= 0 || tc <= 0) return;
  std::int64_t const grows = sdnn::detail::ceil_div(rows, tr), gcols = sdnn::detail::ceil_div(cols, tc);
  unsigned __int128 const tiles = product(grows, gcols), tile = product(tr, tc);
  if (tiles > budget || tile > budget || tiles * tile > budget || product(grows, 1) > budget) return;
  if (rows > std::int64_t(budget) || cols > std::int64_t(budget)) return;  // loops over rows and cols
  tiled_dense_matrix<T> m(rows, cols, tr, tc);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      if (in.byte() % 3 == 0) m(i, j) = in.value<T>();
  if (in.byte() % 2) {
    update_tile_index(m);
    must("validate after update_tile_index", [&] { validate(m); });
  } else {  // an index from the input: valid or refused
    for (auto& o : m.occupied()) o = in.byte() % 2;
    for (auto& p : m.tile_row_ptr()) p = in.byte() % 8;
    buffer<std::int64_t, host_space> cols_list(in.count(8));
    for (auto& x : cols_list) x = in.index<std::int64_t>(gcols);
    m.tile_col() = std::move(cols_list);
    if (!accepted([&] { validate(m); })) return;
  }
  must("tiled -> csr -> dense", [&] {
    auto const d = to_dense(m);
    auto const c = to_csr<std::int32_t>(m);
    validate(c);
    SDNN_FUZZ_CHECK(same_values(to_dense(c).values(), d.values()), "tiled -> csr -> dense differs from tiled -> dense");
  });
}

// The direct-convolution weight format: shape and entries from the input through validate.
inline void fuzz_conv(decoder& in) {
  using namespace sdnn;
  conv::conv_shape s;
  int* fields[] = {&s.C, &s.H, &s.W, &s.K, &s.R, &s.S, &s.stride_h, &s.stride_w, &s.pad_h, &s.pad_w, &s.dil_h, &s.dil_w};
  for (int* f : fields) *f = in.byte() < 192 ? 1 + in.byte() % 6 : in.extent<int>();
  if (!accepted([&] { s.check(); })) return;
  conv::sparse_conv_weights<float> w;
  w.shape = s;
  w.nnz_per_channel = in.byte() < 200 ? static_cast<std::int32_t>(in.byte() % 8) : in.extent<std::int32_t>();
  std::int64_t const limit = std::int64_t(s.C) * s.Hp() * s.Wp();
  std::size_t const n = in.byte() < 200 && w.nnz() >= 0 && w.nnz() <= 512 ? static_cast<std::size_t>(w.nnz()) : in.count(16);
  for (std::size_t k = 0; k < n; ++k) {
    w.offsets.push_back(in.byte() < 224 ? static_cast<std::int32_t>(in.raw<std::uint16_t>() % limit) : in.raw<std::int32_t>());
    w.values.push_back(in.value<float>());
  }
  if (in.byte() % 2) std::sort(w.offsets.begin(), w.offsets.end());
  accepted([&] { conv::validate(w); });
}

inline void formats(std::uint8_t const* data, std::size_t size) {
  decoder in(data, size);
  switch (in.byte() % 9) {
    case 0: fuzz_csr<float, std::int32_t>(in); break;
    case 1: fuzz_csr<double, std::int64_t>(in); break;
    case 2: fuzz_coo<float, std::int32_t>(in); break;
    case 3: fuzz_coo<int, std::int64_t>(in); break;
    case 4: fuzz_ell<float, std::int32_t>(in); break;
    case 5: fuzz_ell<double, std::int64_t>(in); break;
    case 6: fuzz_dense<float>(in); break;
    case 7: fuzz_tiled<float>(in); break;
    default: fuzz_conv(in); break;
  }
}

// ---------------------------------------------------------------------------------------
// The targets by name (the names of tests/fuzz/fuzz_<name>.cpp, corpus/<name>, regressions/<name>).
struct target {
  char const* name;
  void (*run)(std::uint8_t const*, std::size_t);
};
inline constexpr target targets[] = {
    {"challenge_layer", challenge_layer}, {"challenge_images", challenge_images},
    {"categories", categories},           {"matrix_market", matrix_market},
    {"matrix_market_int", matrix_market_int}, {"idx_images", idx_images},
    {"idx_labels", idx_labels},           {"formats", formats},
};

}  // namespace sdnn_fuzz
