// The depth-first engine's layer layout (challenge/engine_layout_build.hpp), checked without a
// GPU: a host emulation of challenge/kernel/engine.cuh walks each row through the layout the
// plan uploads (the same classes, terms, order, arithmetic, retirement and zero-input rules)
// and must give the host reference's categories and bitwise final activations, for every
// combination of the proofs and term encodings, for the streaming build on several threads,
// and for a network whose later layer forces wide terms.
#include "sdnn_catch.hpp"
#include "sdnn_engine_fixtures.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/challenge/radixnet.hpp>
#include <sdnn/challenge/tsv.hpp>
#include <sdnn/challenge/engine_layout_build.hpp>
#include <sdnn/challenge/reference.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory_resource>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace sdnn;
using matrix = csr_matrix<float, std::int32_t>;
using sdnn_test::dense_of;
using sdnn_test::first_rows;

namespace {

struct emulated {
  std::vector<std::int32_t> categories;  // 1-based
  std::vector<float> final;              // rows x N
  std::int64_t row_layers = 0, retired = 0;
};

// kernels::detail::challenge_engine_kernel, one row at a time.
emulated emulate(ops::challenge_engine_layout const& lay, matrix const& in, float bias, float cap) {
  auto const epi = epilogue_capped_relu<float>(bias, cap);
  auto const n = static_cast<std::int32_t>(lay.n);
  std::int32_t const L = lay.layers();
  emulated out;
  out.final.assign(static_cast<std::size_t>(in.rows()) * static_cast<std::size_t>(n), 0.f);
  for (std::int32_t row = 0; row < in.rows(); ++row) {
    std::vector<float> src(static_cast<std::size_t>(n), 0.f), dst;
    for (std::int32_t p = in.row_ptr()[row]; p < in.row_ptr()[row + 1]; ++p) src[in.col_idx()[p]] = in.values()[p];
    bool alive = in.row_ptr()[row + 1] > in.row_ptr()[row], allcap = false, retired = false;
    std::int32_t l = 0;
    for (; alive && l < L; ++l) {
      auto const& ds = lay.desc[static_cast<std::size_t>(l)];
      if (allcap && (ds.distinct & challenge_engine_suffix_bit)) {
        retired = true;
        break;
      }
      std::int32_t const d = ds.distinct & ~challenge_engine_suffix_bit;
      dst.assign(static_cast<std::size_t>(d), 0.f);
      bool nz = false, ac = true;
      for (std::int32_t u = 0; u < d; ++u) {
        float z = 0.f;
        if (lay.uniform) {
          for (std::int32_t p = 0; p < ds.length; ++p) {  // no zero test (see the kernel)
            auto const e = static_cast<std::size_t>(challenge_engine_uniform_at(ds.term_base, ds.length, u, p));
            float const prod = src[lay.uniform_terms[e]] * ds.weight;
            z = z + prod;
          }
        } else {
          auto const& sl = lay.slices[static_cast<std::size_t>(ds.slice_base + u / 32)];
          std::int64_t const base = ds.term_base + sl.offset + u % 32;
          for (std::int32_t p = 0; p < sl.length; ++p) {
            auto const e = static_cast<std::size_t>(base + 32 * p);
            std::int32_t k;
            float w;
            if (lay.compact) {
              std::uint32_t const v = lay.compact_terms[e];
              if ((v >> 16) == challenge_engine_compact_empty) continue;
              k = static_cast<std::int32_t>(v & 0xffffu);
              w = lay.values[static_cast<std::size_t>(ds.value_base) + (v >> 16)];
            } else {
              if (lay.wide[e].k < 0) continue;
              k = lay.wide[e].k;
              w = lay.wide[e].w;
            }
            float const y = src[static_cast<std::size_t>(k)];
            if (y != 0.f) {
              float const prod = y * w;
              z = z + prod;
            }
          }
        }
        float const o = epi(z, u);
        dst[static_cast<std::size_t>(u)] = o;
        nz = nz || o != 0.f;
        ac = ac && o == cap;
      }
      alive = nz;
      allcap = ac;
      src = dst;
    }
    out.row_layers += l;
    if (retired || (alive && L > 0)) {
      out.categories.push_back(row + 1);
      float* f = out.final.data() + static_cast<std::size_t>(row) * static_cast<std::size_t>(n);
      for (std::int32_t j = 0; j < n; ++j) f[j] = retired ? cap : src[static_cast<std::size_t>(lay.last_class[j])];
    }
    out.retired += retired ? 1 : 0;
  }
  return out;
}

ops::challenge_engine_layout layout_of(std::vector<matrix> const& ws, float bias, ops::challenge_engine_options opt,
                                       int threads = 1) {
  return ops::build_challenge_engine_layout(
      static_cast<std::int32_t>(ws.size()),
      [&](std::int32_t l) { return ops::prepare_engine_layer(ws[static_cast<std::size_t>(l)], l, bias, opt); }, opt,
      threads);
}

// Categories equal and final activations bitwise equal (NaN where the reference has NaN).
void check(std::vector<matrix> const& ws, float bias, matrix const& in, ops::challenge_engine_options opt,
           std::string const& what) {
  INFO(what << " (retirement " << opt.structure.retirement << ", folding " << opt.structure.folding
            << ", compact " << opt.compact_terms << ", fast path " << opt.fast_path << ")");
  auto const ref = reference::challenge_infer(in, ws, bias, opt.cap);
  auto const want = dense_of(ref);
  auto const lay = layout_of(ws, bias, opt);
  auto const got = emulate(lay, in, bias, opt.cap);
  REQUIRE(got.categories == reference::challenge_categories(ref));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    bool const same = std::isnan(want[i]) ? std::isnan(got.final[i]) : std::memcmp(&want[i], &got.final[i], 4) == 0;
    bad += same ? 0 : 1;
  }
  REQUIRE(bad == 0);
  if (!opt.structure.retirement) REQUIRE(got.retired == 0);
}

void check_all(std::vector<matrix> const& ws, float bias, matrix const& in, std::string const& what) {
  for (bool retire : {true, false})
    for (bool fold : {true, false})
      for (bool compact : {true, false}) {
        ops::challenge_engine_options opt;
        opt.structure.retirement = retire;
        opt.structure.folding = fold;
        opt.compact_terms = compact;
        check(ws, bias, in, opt, what);
        if (compact) {
          opt.fast_path = false;
          check(ws, bias, in, opt, what);
        }
      }
}

matrix official_images(std::int32_t count) {
  return first_rows(
      io::read_challenge_images(std::string(sdnn_test::data_dir()) + "/sparse-images-1024-first1200.tsv.gz", 1024, 1200),
      count);
}

}  // namespace

TEST_CASE("engine layout: the official network folds 16-32, takes the fast path, and emulates the reference exactly",
          "[engine_layout][challenge]") {
  std::vector<matrix> ws;
  for (int l = 0; l < 24; ++l) ws.push_back(data::official_1024_layer(l));
  auto const lay = layout_of(ws, -0.3f, {});
  REQUIRE(lay.uniform);
  REQUIRE(lay.compact);
  REQUIRE(lay.max_distinct == 64);  // 1024 / 16
  for (double f : lay.folds) REQUIRE(f >= 16.0);
  REQUIRE(lay.connections == 24 * 1024 * 32);
  for (auto const& ds : lay.desc) {
    REQUIRE(ds.length == 32);
    REQUIRE(ds.weight == 0.0625f);
    REQUIRE((ds.distinct & challenge_engine_suffix_bit) != 0);  // every suffix maps all-cap to all-cap
  }
  // every class of the last layer is used, and only those
  REQUIRE(lay.last_class.size() == 1024);
  for (auto c : lay.last_class) REQUIRE((c >= 0 && c < (lay.desc.back().distinct & ~challenge_engine_suffix_bit)));
  check_all(ws, -0.3f, official_images(120), "official 24 layers, 120 images");
}

TEST_CASE("engine layout: the streaming build on several threads gives the same arrays", "[engine_layout]") {
  std::vector<matrix> ws;
  for (int l = 0; l < 13; ++l) ws.push_back(data::official_1024_layer(l));
  ops::challenge_engine_options opt;
  auto const one = layout_of(ws, -0.3f, opt, 1);
  for (int threads : {2, 5, 16}) {
    INFO("threads " << threads);
    auto const many = layout_of(ws, -0.3f, opt, threads);
    REQUIRE(many.desc.size() == one.desc.size());
    REQUIRE(std::memcmp(many.desc.data(), one.desc.data(), one.desc.size() * sizeof(one.desc[0])) == 0);
    REQUIRE(many.compact_terms == one.compact_terms);
    REQUIRE(many.uniform_terms == one.uniform_terms);
    REQUIRE(many.values == one.values);
    REQUIRE(many.last_class == one.last_class);
    REQUIRE(many.folds == one.folds);
    REQUIRE(many.slices.size() == one.slices.size());
    REQUIRE(std::memcmp(many.slices.data(), one.slices.data(), one.slices.size() * sizeof(one.slices[0])) == 0);
  }
  // a layer source that fails fails the build, with its message
  auto const why = sdnn_test::error_text([&] {
    ops::build_challenge_engine_layout(
        13,
        [&](std::int32_t l) -> ops::challenge_engine_prepared {
          SDNN_EXPECTS(l != 7, "layer source: cannot make layer ", l);
          return ops::prepare_engine_layer(ws[static_cast<std::size_t>(l)], l, -0.3f, opt);
        },
        opt, 4);
  });
  REQUIRE(sdnn_test::has(why, "cannot make layer 7"));
}

namespace {
// A memory resource that counts its allocations and live bytes (the streamed plan's pinned memory).
struct counting_resource final : std::pmr::memory_resource {
  std::size_t allocations = 0, live = 0;
  void* do_allocate(std::size_t bytes, std::size_t align) override {
    ++allocations;
    live += bytes;
    return std::pmr::new_delete_resource()->allocate(bytes, align);
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t align) override {
    live -= bytes;
    std::pmr::new_delete_resource()->deallocate(p, bytes, align);
  }
  bool do_is_equal(std::pmr::memory_resource const& o) const noexcept override { return this == &o; }
};
}  // namespace

TEST_CASE("engine layout: terms built in a given memory resource are the same, held in one array of their size",
          "[engine_layout]") {
  std::vector<matrix> official;
  for (int l = 0; l < 12; ++l) official.push_back(data::official_1024_layer(l));
  std::vector<matrix> changed;  // layer 5 off the fast path: the 16-bit terms so far turn compact there
  for (int l = 0; l < 12; ++l) changed.push_back(data::official_1024_layer(l));
  changed[5].values()[9] = 0.125f;
  std::vector<matrix> many;  // layer 2 with more than 65535 distinct weights: wide terms from there
  for (std::int32_t l = 0; l < 4; ++l) many.push_back(sdnn_test::many_weights_layer(2048, l));
  std::vector<matrix> fast_then_many;  // the 16-bit terms of layers 0-1 turn wide at layer 2
  for (std::int32_t l = 0; l < 2; ++l) fast_then_many.push_back(data::radixnet_layer(2048, l, 5));
  fast_then_many.push_back(sdnn_test::many_weights_layer(2048, 2));
  REQUIRE_FALSE(layout_of(fast_then_many, -0.05f, {}).compact);
  check(fast_then_many, -0.05f, sdnn_test::spread_inputs(40, 2048), {}, "fast path, then many distinct weights");
  struct network {
    char const* what;
    std::vector<matrix> const* ws;
  };
  for (auto const& net : {network{"official", &official}, network{"official, layer 5 changed", &changed},
                          network{"many distinct weights", &many},
                          network{"fast path, then many distinct weights", &fast_then_many}})
    for (bool fold : {false, true})
      for (bool fast : {true, false}) {
        INFO(net.what << ", folding " << fold << ", fast path " << fast);
        ops::challenge_engine_options opt;
        opt.structure.folding = fold;
        opt.fast_path = fast;
        auto const& ws = *net.ws;
        auto prepare = [&](std::int32_t l) {
          return ops::prepare_engine_layer(ws[static_cast<std::size_t>(l)], l, -0.3f, opt);
        };
        auto const want = layout_of(ws, -0.3f, opt);
        counting_resource mem;
        {
          auto const got = ops::build_challenge_engine_layout(static_cast<std::int32_t>(ws.size()), prepare, opt, 3, &mem);
          REQUIRE(got.uniform == want.uniform);
          REQUIRE(got.compact == want.compact);
          REQUIRE(got.uniform_terms == want.uniform_terms);
          REQUIRE(got.compact_terms == want.compact_terms);
          REQUIRE(got.wide.size() == want.wide.size());
          REQUIRE((want.wide.empty() ||
                   std::memcmp(got.wide.data(), want.wide.data(), want.wide.size() * sizeof(want.wide[0])) == 0));
          REQUIRE(std::memcmp(got.desc.data(), want.desc.data(), want.desc.size() * sizeof(want.desc[0])) == 0);
          REQUIRE(got.values == want.values);
          REQUIRE(got.uniform_terms.get_allocator().resource() == &mem);
          REQUIRE(got.compact_terms.get_allocator().resource() == &mem);
          REQUIRE(got.wide.get_allocator().resource() == &mem);
          // the resource holds the terms and nothing more
          auto const bytes = static_cast<std::size_t>(ops::challenge_engine_term_count(got)) *
                             ops::challenge_engine_term_bytes(got);
          REQUIRE(mem.live == bytes);
          // equal layers (every class of 32 terms, unfolded): one allocation, no growth, no trim
          if (net.ws == &official && !fold) REQUIRE(mem.allocations == 1);
        }
        REQUIRE(mem.live == 0);
      }
}

TEST_CASE("engine layout: networks that break each proof, many distinct weights, NaN", "[engine_layout][challenge]") {
  auto const images = official_images(60);
  std::vector<matrix> official;
  for (int l = 0; l < 20; ++l) official.push_back(data::official_1024_layer(l));
  auto copy = [](matrix const& w) {
    matrix c(w.rows(), w.cols(), w.nnz());
    std::copy(w.row_ptr().begin(), w.row_ptr().end(), c.row_ptr().begin());
    std::copy(w.col_idx().begin(), w.col_idx().end(), c.col_idx().begin());
    std::copy(w.values().begin(), w.values().end(), c.values().begin());
    return c;
  };
  SECTION("a negative weight (saturation), changed values (folding, two weights: no fast path)") {
    std::vector<matrix> ws;
    for (auto const& w : official) ws.push_back(copy(w));
    ws[15].values()[100] = -1.f;
    ws[3].values()[7] = 0.125f;
    REQUIRE_FALSE(layout_of(ws, -0.3f, {}).uniform);
    check_all(ws, -0.3f, images, "negative weight in layer 15, changed value in layer 3");
  }
  SECTION("a NaN weight") {
    std::vector<matrix> ws;
    for (auto const& w : official) ws.push_back(copy(w));
    ws[2].values()[40] = std::nanf("");
    REQUIRE_FALSE(layout_of(ws, -0.3f, {}).uniform);  // the fast path needs finite weights
    check_all(ws, -0.3f, images, "NaN weight in layer 2");
  }
  SECTION("a layer with 65535 or more distinct weights turns the earlier layers' terms wide") {
    std::int32_t const n = 2048;
    std::vector<matrix> ws;
    for (std::int32_t l = 0; l < 4; ++l) ws.push_back(sdnn_test::many_weights_layer(n, l));
    auto const in = sdnn_test::spread_inputs(40, n);
    ops::challenge_engine_options opt;
    auto const lay = layout_of(ws, -0.05f, opt, 3);
    REQUIRE_FALSE(lay.compact);
    REQUIRE(lay.compact_terms.empty());
    REQUIRE(lay.wide.size() > 0);
    check(ws, -0.05f, in, opt, "many distinct weights in layer 2");
  }
}

TEST_CASE("engine layout: the fast path's 16-bit terms in groups of 4, with a partial last slice", "[engine_layout]") {
  // N = 72 (two slices of 32 classes and one of 8), every output 8 distinct inputs, one weight:
  // every layer takes the fast path without folding; the last slice's missing classes are padding.
  std::int32_t const n = 72;
  std::mt19937 gen(7);
  std::vector<matrix> ws;
  for (int l = 0; l < 5; ++l) {
    std::vector<std::vector<std::int32_t>> in_of(static_cast<std::size_t>(n));
    for (std::int32_t j = 0; j < n; ++j) {
      std::vector<std::int32_t> ks(static_cast<std::size_t>(n));
      std::iota(ks.begin(), ks.end(), 0);
      std::shuffle(ks.begin(), ks.end(), gen);
      ks.resize(8);
      in_of[static_cast<std::size_t>(j)] = ks;
    }
    // CSR rows = inputs k, columns = outputs j.
    std::vector<std::vector<std::int32_t>> out_of(static_cast<std::size_t>(n));
    for (std::int32_t j = 0; j < n; ++j)
      for (auto k : in_of[static_cast<std::size_t>(j)]) out_of[static_cast<std::size_t>(k)].push_back(j);
    matrix w(n, n, n * 8);
    std::int32_t e = 0;
    for (std::int32_t k = 0; k < n; ++k) {
      w.row_ptr()[k] = e;
      auto& js = out_of[static_cast<std::size_t>(k)];
      std::sort(js.begin(), js.end());
      for (auto j : js) {
        w.col_idx()[e] = j;
        w.values()[e] = 0.25f;
        ++e;
      }
    }
    w.row_ptr()[n] = e;
    ws.push_back(std::move(w));
  }
  ops::challenge_engine_options opt;
  opt.structure.folding = false;
  auto const lay = layout_of(ws, -0.1f, opt);
  REQUIRE(lay.uniform);
  REQUIRE(lay.compact_terms.empty());
  REQUIRE(lay.max_distinct == n);
  REQUIRE(lay.uniform_terms.size() == std::size_t{5} * 3 * 32 * 8);  // 3 slices of 32 x 8 terms per layer
  for (auto const& ds : lay.desc) {
    REQUIRE(ds.length == 8);
    REQUIRE(ds.term_base % 4 == 0);  // 8-byte aligned groups
  }
  // class u's terms are its inputs, ascending (layer 0: no folding, so classes are neurons)
  auto const& d0 = lay.desc[0];
  auto const wt = transpose(ws[0]);
  for (std::int32_t u = 0; u < n; ++u)
    for (std::int32_t p = 0; p < 8; ++p)
      REQUIRE(lay.uniform_terms[static_cast<std::size_t>(challenge_engine_uniform_at(d0.term_base, 8, u, p))] ==
              wt.col_idx()[wt.row_ptr()[u] + p]);
  matrix in(30, n, 30 * 10);
  std::uniform_int_distribution<std::int32_t> col(0, n - 1);
  std::int32_t e = 0;
  for (std::int32_t r = 0; r < 30; ++r) {
    in.row_ptr()[r] = e;
    std::set<std::int32_t> cs;
    while (cs.size() < 10) cs.insert(col(gen));
    for (auto c : cs) {
      in.col_idx()[e] = c;
      in.values()[e] = 1.f;
      ++e;
    }
  }
  in.row_ptr()[30] = e;
  check_all(ws, -0.1f, in, "N = 72, 8 inputs per output, one weight");
}

namespace {
std::vector<challenge_engine_layer_desc> descs_at(std::vector<std::int64_t> const& bases) {
  std::vector<challenge_engine_layer_desc> d(bases.size());
  for (std::size_t i = 0; i < bases.size(); ++i) d[i].term_base = bases[i];
  return d;
}
}  // namespace

TEST_CASE("challenge engine streaming: windows of consecutive layers fit a slot, the rest of the budget parks rows",
          "[engine][engine_stream]") {
  // layers of 100, 200, 0, 300 and 400 terms of 2 bytes: 800 bytes the largest
  auto const desc = descs_at({0, 100, 300, 300, 600});
  std::uint64_t const park_row = 2 * (4 * 64 + 4);
  SECTION("slots of the largest layer: greedy windows in order") {
    auto const sc = ops::schedule_engine_stream(desc, 1000, 2, 64, 1 << 20, 1);
    REQUIRE(sc.slot_bytes == 1024);  // 800 rounded up to 256
    REQUIRE(sc.windows.size() == 3);
    REQUIRE(sc.windows[0].first == 0);
    REQUIRE(sc.windows[0].end == 3);
    REQUIRE(sc.windows[0].term_begin == 0);
    REQUIRE(sc.windows[0].term_end == 300);
    REQUIRE(sc.windows[1].first == 3);
    REQUIRE(sc.windows[1].end == 4);
    REQUIRE(sc.windows[2].first == 4);
    REQUIRE(sc.windows[2].end == 5);
    REQUIRE(sc.windows[2].term_end == 1000);
    REQUIRE(sc.park_bytes_per_row == park_row);
    REQUIRE(sc.park_rows == static_cast<std::int64_t>(((1 << 20) - 2 * 1024) / park_row));
    REQUIRE(sc.device_bytes(10) == 2 * 1024 + 10 * park_row);
  }
  SECTION("no slot asked: an eighth of what is available, at most every term") {
    auto const big = ops::schedule_engine_stream(desc, 1000, 2, 64, 1 << 20);
    REQUIRE(big.slot_bytes == 2048);  // all 2000 bytes of terms, rounded: one window
    REQUIRE(big.windows.size() == 1);
    auto const small = ops::schedule_engine_stream(desc, 1000, 2, 64, 12000);
    REQUIRE(small.slot_bytes == 1280);  // 12000 / 8 = 1500, rounded down to 1280
    REQUIRE(small.windows.size() == 2);
    REQUIRE(small.park_rows == static_cast<std::int64_t>((12000 - 2 * 1280) / park_row));
  }
  SECTION("random layer sizes: windows cover every layer once, each within its slot") {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 200; ++trial) {
      int const L = 1 + static_cast<int>(rng() % 40);
      std::vector<std::int64_t> bases;
      std::int64_t at = 0, largest = 0;
      for (int l = 0; l < L; ++l) {
        bases.push_back(at);
        std::int64_t const n = 32 * static_cast<std::int64_t>(rng() % 50);
        largest = std::max(largest, n);
        at += n;
      }
      std::uint64_t const avail = 2 * (static_cast<std::uint64_t>(largest) * 4 + 256) + park_row * (1 + rng() % 100);
      auto const sc = ops::schedule_engine_stream(descs_at(bases), at, 4, 64, avail + rng() % 100000);
      std::int32_t next = 0;
      for (auto const& w : sc.windows) {
        REQUIRE(w.first == next);
        REQUIRE(w.end > w.first);
        REQUIRE(static_cast<std::uint64_t>(w.term_end - w.term_begin) * 4 <= sc.slot_bytes);
        next = w.end;
      }
      REQUIRE(next == L);
      REQUIRE(sc.park_rows >= 1);
      REQUIRE(2 * sc.slot_bytes + park_row * static_cast<std::uint64_t>(sc.park_rows) <= avail + 100000);
    }
  }
  SECTION("too little for two slots of the largest layer and one parked row, or the park asked for: errors") {
    std::uint64_t const need = 2 * 1024 + park_row;
    REQUIRE_NOTHROW(ops::schedule_engine_stream(desc, 1000, 2, 64, need));
    auto const why = sdnn_test::error_text([&] { ops::schedule_engine_stream(desc, 1000, 2, 64, need - 1); });
    REQUIRE(sdnn_test::has(why, "two slots of the largest layer's terms"));
    REQUIRE(sdnn_test::has(why, std::to_string(need) + " bytes"));
    auto const why2 = sdnn_test::error_text([&] { ops::schedule_engine_stream(desc, 1000, 2, 64, need, 0, 2); });
    REQUIRE(sdnn_test::has(why2, "stream_park_rows 2"));
    REQUIRE(ops::schedule_engine_stream(desc, 1000, 2, 64, need, 0, 1).park_rows == 1);
    auto const why3 = sdnn_test::error_text([&] { ops::schedule_engine_stream(desc, 1000, 2, 64, need, 4096); });
    REQUIRE(sdnn_test::has(why3, "two slots of"));
  }
}
