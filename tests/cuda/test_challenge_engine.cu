// The depth-first Graph Challenge engine (ops::challenge_engine_plan) against the host reference
// (reference::challenge_infer): categories equal and final activations bitwise equal, with
// every combination of the structure proofs on and off, on the official 1024 x 120 network, on
// generated networks, and on networks built to break each proof.
#include "sdnn_gpu_test.cuh"
#include "sdnn_engine_fixtures.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/sdnn.hpp>
#include <sdnn/challenge/engine.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace sdnn;

namespace {

using layer_t = csr_matrix<float, std::int32_t>;

using sdnn_test::stream_guard;

using sdnn_test::dense_of;
using sdnn_test::first_rows;

// Runs the engine with the given options and compares with the reference: categories equal,
// final activations bitwise equal (NaN positions equal, when the network makes NaNs).
void check_engine(std::vector<layer_t> const& ws, float bias, layer_t const& inputs, cuda_exec exec,
                  ops::challenge_engine_options opt, std::string const& what) {
  INFO(what << " (retirement " << opt.structure.retirement << ", folding " << opt.structure.folding
            << ", threads per row " << opt.threads_per_row << ", scratch "
            << (opt.scratch == ops::challenge_engine_scratch_place::global ? "global" : "automatic") << ", compact terms "
            << opt.compact_terms << ", fast path " << opt.fast_path << ", weights " << to_string(opt.weights)
            << ", slot " << opt.stream_slot_bytes << " bytes, park " << opt.stream_park_rows << " rows)");
  auto const ref = reference::challenge_infer(inputs, ws, bias, opt.cap);
  auto const cats = reference::challenge_categories(ref);
  auto const want = dense_of(ref);
  ops::challenge_engine_plan plan(ws, bias, exec, opt);
  INFO(plan.summary());
  auto d_in = to_device(inputs, exec);
  auto const r = plan.run(exec, d_in.view(), true);
  REQUIRE(r.categories == cats);
  REQUIRE(r.final.size() == want.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    bool const same = std::isnan(want[i]) ? std::isnan(r.final[i]) : std::memcmp(&want[i], &r.final[i], 4) == 0;
    if (!same && bad++ < 5) INFO("element " << i << ": got " << r.final[i] << ", want " << want[i]);
  }
  REQUIRE(bad == 0);
  // the counters tell what ran
  REQUIRE(r.row_layers <= static_cast<std::int64_t>(inputs.rows()) * static_cast<std::int64_t>(ws.size()));
  REQUIRE(r.row_layers + r.layers_skipped == static_cast<std::int64_t>(inputs.rows()) * static_cast<std::int64_t>(ws.size()));
  REQUIRE(r.rows == inputs.rows());
  if (opt.scratch == ops::challenge_engine_scratch_place::global) REQUIRE_FALSE(plan.state_in_shared_memory());
  if (!opt.fast_path) REQUIRE_FALSE(plan.fast_path());
  if (!opt.structure.retirement) REQUIRE(r.retired == 0);
  if (opt.weights == weight_placement::host) {
    auto const& sc = plan.stream_schedule();
    INFO(sc.windows.size() << " windows of slots of " << sc.slot_bytes << " bytes, a park of " << sc.park_rows);
    REQUIRE(plan.streamed());
    REQUIRE(!sc.windows.empty());
    REQUIRE(sc.windows.front().first == 0);
    REQUIRE(sc.windows.back().end == static_cast<std::int32_t>(ws.size()));
    REQUIRE((inputs.rows() == 0 ? r.groups == 0 : r.groups >= 1));
    REQUIRE(r.groups <= inputs.rows());
    REQUIRE(r.passes >= r.groups);
    REQUIRE(r.uploads >= std::min<std::int64_t>(r.passes, 1));
    REQUIRE(r.uploads <= r.passes + r.groups);  // at most one prefetch per group unused
    REQUIRE(r.bytes_streamed <= static_cast<std::uint64_t>(r.uploads) * sc.slot_bytes);
  } else {
    REQUIRE_FALSE(plan.streamed());
    REQUIRE(r.bytes_streamed == 0);
  }
  // a second run of the same plan gives the same categories (the queue and counters reset; a
  // streamed plan's slots still hold the last windows)
  REQUIRE(plan.run(exec, d_in.view()).categories == cats);
}

void check_all_options(std::vector<layer_t> const& ws, float bias, layer_t const& inputs, cuda_exec exec,
                       std::string const& what, std::vector<int> threads_per_row = {0}, bool also_global = false) {
  for (bool retire : {true, false})
    for (bool fold : {true, false}) {
      for (int tpr : threads_per_row) {
        ops::challenge_engine_options opt;
        opt.structure.retirement = retire;
        opt.structure.folding = fold;
        opt.threads_per_row = tpr;
        opt.fast_path = tpr == 0;  // explicit thread counts take the general (weight table) path
        check_engine(ws, bias, inputs, exec, opt, what);
      }
      {  // streamed weights: a window per layer, a park of a third of the rows
        ops::challenge_engine_options opt;
        opt.structure.retirement = retire;
        opt.structure.folding = fold;
        opt.weights = weight_placement::host;
        opt.stream_slot_bytes = 1;
        opt.stream_park_rows = std::max<std::int64_t>(1, (inputs.rows() + 2) / 3);
        check_engine(ws, bias, inputs, exec, opt, what);
      }
      if (also_global) {  // state and input row in global scratch (the N = 65536 path), wide terms
        ops::challenge_engine_options opt;
        opt.compact_terms = false;
        opt.structure.retirement = retire;
        opt.structure.folding = fold;
        opt.scratch = ops::challenge_engine_scratch_place::global;
        if (retire != fold) {  // half of them streamed (the N = 65536 unfolded case: global scratch, streamed)
          opt.weights = weight_placement::host;
          opt.stream_slot_bytes = 1;
          opt.stream_park_rows = std::max<std::int64_t>(1, inputs.rows() / 4);
        }
        check_engine(ws, bias, inputs, exec, opt, what);
      }
    }
}

// The first `rows` of the 1200 official images (tests/data), and the official network's first L layers.
layer_t official_images(std::int64_t rows = 1200) {
  return first_rows(io::read_challenge_images(std::string(sdnn_test::data_dir()) + "/sparse-images-1024-first1200.tsv.gz",
                                              1024, 1200),
                    static_cast<std::int32_t>(rows));
}
std::vector<layer_t> official_layers(int layers) {
  std::vector<layer_t> ws;
  for (int l = 0; l < layers; ++l) ws.push_back(data::official_1024_layer(l));
  return ws;
}

layer_t copy_of(layer_t const& w) {
  layer_t c(w.rows(), w.cols(), w.nnz());
  std::copy(w.row_ptr().begin(), w.row_ptr().end(), c.row_ptr().begin());
  std::copy(w.col_idx().begin(), w.col_idx().end(), c.col_idx().begin());
  std::copy(w.values().begin(), w.values().end(), c.values().begin());
  return c;
}

}  // namespace

TEST_CASE("challenge engine: official 1024 x 120 network, first 1200 images, every proof on and off",
          "[cuda][engine][challenge]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  cuda_exec exec{sg.s};
  std::string const dir = sdnn_test::data_dir();
  auto images = official_images();
  auto truth = io::read_categories(dir + "/neuron1024-l120-categories-first1200.tsv");
  auto const ws = official_layers(120);
  ops::challenge_engine_plan plan(ws, -0.3f, exec);
  // What the plan proved on these weights.
  REQUIRE(plan.structure().saturation.status.ok());
  for (double f : plan.fold_factors()) REQUIRE(f >= 16.0);
  REQUIRE(plan.fast_path());  // one weight (1/16) per layer, 32 terms per class
  auto d_in = to_device(images, exec);
  auto const r = plan.run(exec, d_in.view());
  REQUIRE(r.categories == truth);
  REQUIRE(r.retired > 0);
  REQUIRE(r.layers_skipped > 0);
  check_all_options(ws, -0.3f, images, exec, "official 1024 x 120", {0, 32, 512}, true);
}

TEST_CASE("challenge engine: generated networks, N = 1024 / 4096 / 16384", "[cuda][engine][challenge]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  cuda_exec exec{sg.s};
  auto mnist = io::read_idx_images(std::string(sdnn_test::data_dir()) + "/mnist-10k-images-idx3-ubyte.gz");
  struct cfg {
    std::int32_t n, layers, inputs;
  };
  for (cfg c : {cfg{1024, 40, 300}, cfg{4096, 30, 100}, cfg{16384, 24, 24}}) {
    io::idx_images pick;
    pick.rows = mnist.rows;
    pick.cols = mnist.cols;
    std::size_t const px = static_cast<std::size_t>(mnist.rows) * mnist.cols;
    for (std::int32_t i = 0; i < c.inputs; ++i) {
      std::size_t const src = static_cast<std::size_t>((i * 331) % mnist.count) * px;
      pick.pixels.insert(pick.pixels.end(), mnist.pixels.begin() + static_cast<std::ptrdiff_t>(src),
                         mnist.pixels.begin() + static_cast<std::ptrdiff_t>(src + px));
      ++pick.count;
    }
    auto inputs = data::challenge_inputs_from_mnist(pick, c.n, c.inputs);
    std::vector<layer_t> ws;
    for (int l = 0; l < c.layers; ++l) ws.push_back(data::radixnet_layer(c.n, l, 2026));
    check_all_options(ws, data::challenge_bias(c.n), inputs, exec, "RadiX-Net N = " + std::to_string(c.n));
  }
}

TEST_CASE("challenge engine: networks built to break each proof stay exact", "[cuda][engine][challenge]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  cuda_exec exec{sg.s};
  auto images = official_images(300);
  auto const official = official_layers(30);

  SECTION("a negative weight breaks the saturation proof from its layer back") {
    std::vector<layer_t> ws;
    for (auto const& w : official) ws.push_back(copy_of(w));
    ws[25].values()[100] = -1.f;  // one column can no longer reach the cap from all-cap inputs
    check_all_options(ws, -0.3f, images, exec, "negative weight in layer 25");
  }
  SECTION("one changed value breaks folding for its class") {
    std::vector<layer_t> ws;
    for (auto const& w : official) ws.push_back(copy_of(w));
    ws[3].values()[7] = 0.125f;
    ws[20].values()[500] = 0.0625f * 3;
    check_all_options(ws, -0.3f, images, exec, "changed values in layers 3 and 20");
  }
  SECTION("arbitrary float weights: no fold, no saturation, the reference's rounding") {
    std::mt19937 g(7);
    std::uniform_real_distribution<float> u(-0.3f, 0.6f);
    std::uniform_int_distribution<int> col(0, 255);
    std::vector<layer_t> ws;
    for (int l = 0; l < 12; ++l) {
      std::vector<std::int32_t> rp{0}, ci;
      std::vector<float> v;
      for (int i = 0; i < 256; ++i) {
        std::vector<int> cs;
        for (int e = 0; e < 12; ++e) cs.push_back(col(g));
        std::sort(cs.begin(), cs.end());
        cs.erase(std::unique(cs.begin(), cs.end()), cs.end());
        for (int c : cs) {
          ci.push_back(c);
          v.push_back(u(g));
        }
        rp.push_back(static_cast<std::int32_t>(ci.size()));
      }
      ws.push_back(make_csr<float, std::int32_t>(256, 256, rp, ci, v));
    }
    std::vector<std::int32_t> rp{0}, ci;
    std::vector<float> v;
    for (int i = 0; i < 77; ++i) {
      for (int c = i % 5; c < 256; c += 3 + i % 7) {
        ci.push_back(c);
        v.push_back(i % 4 == 0 ? 2.5f : 1.f);  // not only 0/1 inputs
      }
      rp.push_back(static_cast<std::int32_t>(ci.size()));
    }
    auto in = make_csr<float, std::int32_t>(77, 256, rp, ci, v);
    check_all_options(ws, -0.05f, in, exec, "random float network", {0, 128, 512}, true);
  }
  SECTION("a NaN weight: categories as the reference's, NaNs where it has them") {
    std::vector<layer_t> ws;
    for (auto const& w : official) ws.push_back(copy_of(w));
    ws[2].values()[40] = std::nanf("");
    check_all_options(ws, -0.3f, images, exec, "NaN weight in layer 2");
  }
}

TEST_CASE("challenge engine: zero images, empty rows, one layer", "[cuda][engine][engine_race]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  cuda_exec exec{sg.s};
  std::vector<layer_t> ws;
  ws.push_back(data::official_1024_layer(0));
  layer_t none(0, 1024, 0);
  ops::challenge_engine_plan plan(ws, -0.3f, exec);
  auto dn = to_device(none, exec);
  auto const r0 = plan.run(exec, dn.view(), true);
  REQUIRE(r0.categories.empty());
  REQUIRE(r0.final.empty());
  // rows 0 and 2 empty, row 1 one pixel
  auto in = make_csr<float, std::int32_t>(3, 1024, {0, 0, 1, 1}, {5}, {1.f});
  check_engine(ws, -0.3f, in, exec, {}, "one layer, empty rows");
  // a few layers and rows with every proof on and off (small enough for compute-sanitizer)
  check_all_options(official_layers(24), -0.3f, official_images(40), exec, "24 official layers, 40 images", {0, 128},
                    true);
  // a layer that is not N x N is refused with the layer named
  std::vector<layer_t> bad;
  bad.push_back(data::official_1024_layer(0));
  bad.push_back(make_csr<float, std::int32_t>(1024, 4, std::vector<std::int32_t>(1025, 0), {}, {}));
  REQUIRE(sdnn_test::has(sdnn_test::error_text([&] { ops::challenge_engine_plan p(bad, -0.3f, exec); }), "layer 1"));
}

TEST_CASE("challenge engine: a device-memory budget is checked before the plan allocates", "[cuda][engine]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  cuda_exec exec{sg.s};
  auto const ws = official_layers(12);
  ops::challenge_engine_plan free_plan(ws, -0.3f, exec);
  std::uint64_t const need = free_plan.device_bytes();
  // 12 folded layers: 64 classes x 32 16-bit terms each, and the small tables
  REQUIRE(need >= std::uint64_t{12} * 64 * 32 * 2);
  REQUIRE(need < std::uint64_t{1} << 20);
  ops::challenge_engine_options opt;
  opt.device_memory_budget = need;  // exactly enough
  ops::challenge_engine_plan fits(ws, -0.3f, exec, opt);
  REQUIRE(fits.device_bytes() == need);
  opt.device_memory_budget = need - 1;
  auto const why = sdnn_test::error_text([&] { ops::challenge_engine_plan p(ws, -0.3f, exec, opt); });
  REQUIRE(sdnn_test::has(why, "budget is " + std::to_string(need - 1)));
  REQUIRE(sdnn_test::has(why, std::to_string(need) + " bytes"));
  // the same answer as without a budget
  auto d_in = to_device(official_images(100), exec);
  REQUIRE(fits.run(exec, d_in.view()).categories == free_plan.run(exec, d_in.view()).categories);
}

TEST_CASE("challenge engine: the streaming plan (layers made on demand, several at a time) equals the vector plan",
          "[cuda][engine]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  cuda_exec exec{sg.s};
  auto d_in = to_device(official_images(300), exec);
  auto const ws = official_layers(30);
  ops::challenge_engine_plan whole(ws, -0.3f, exec);
  auto const want = whole.run(exec, d_in.view(), true);
  for (int threads : {1, 3, 8}) {
    INFO("threads " << threads);
    ops::challenge_engine_plan streamed(
        30, [](std::int32_t l) { return data::official_1024_layer(l); }, -0.3f, exec, {}, threads);
    REQUIRE(streamed.fold_factors() == whole.fold_factors());
    REQUIRE(streamed.fast_path() == whole.fast_path());
    REQUIRE(streamed.connections() == whole.connections());
    REQUIRE(streamed.structure().saturation.suffix_fixed == whole.structure().saturation.suffix_fixed);
    auto const got = streamed.run(exec, d_in.view(), true);
    REQUIRE(got.categories == want.categories);
    REQUIRE(std::memcmp(got.final.data(), want.final.data(), want.final.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("challenge engine: a layer with 65535 or more distinct weights turns the earlier layers' terms wide",
          "[cuda][engine]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  cuda_exec exec{sg.s};
  // N = 2048, 40 inputs per output: layers 0 and 1 with two weights, layer 2 with ~82 k distinct
  // ones (no compact index fits), layer 3 with two again.
  std::int32_t const n = 2048;
  auto make = [n](std::int32_t l) { return sdnn_test::many_weights_layer(n, l); };
  std::vector<layer_t> ws;
  for (std::int32_t l = 0; l < 4; ++l) ws.push_back(make(l));
  auto const in = sdnn_test::spread_inputs(60, n);
  auto const ref = reference::challenge_infer(in, ws, -0.05f, 32.f);
  auto const cats = reference::challenge_categories(ref);
  auto const want = dense_of(ref);
  ops::challenge_engine_plan plan(4, make, -0.05f, exec, {}, 2);
  REQUIRE_FALSE(plan.compact_terms());
  REQUIRE_FALSE(plan.fast_path());
  auto d_in = to_device(in, exec);
  auto const r = plan.run(exec, d_in.view(), true);
  REQUIRE(r.categories == cats);
  REQUIRE(std::memcmp(r.final.data(), want.data(), want.size() * sizeof(float)) == 0);
  check_all_options(ws, -0.05f, in, exec, "many distinct weights in layer 2");
}

TEST_CASE("challenge engine: streamed weights (windows of layers, parked rows) equal the resident engine",
          "[cuda][engine][engine_stream]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  cuda_exec exec{sg.s};
  auto d_in = to_device(official_images(200), exec);
  auto const ws = official_layers(16);
  for (bool retire : {true, false}) {
    INFO("retirement " << retire);
    ops::challenge_engine_options base;
    base.structure.retirement = retire;
    base.structure.folding = false;  // 1024 classes per layer: 64 KB of terms per layer
    ops::challenge_engine_plan resident(ws, -0.3f, exec, base);
    auto const want = resident.run(exec, d_in.view(), true);
    std::uint64_t const terms = std::uint64_t{16} * 1024 * 32 * 2;  // the fast path's 16-bit terms
    std::uint64_t const fixed = resident.device_bytes() - terms;
    auto run_with = [&](std::uint64_t budget, std::uint64_t slot, std::int64_t park, weight_placement where) {
      ops::challenge_engine_options opt = base;
      opt.weights = where;
      opt.device_memory_budget = budget;
      opt.stream_slot_bytes = slot;
      opt.stream_park_rows = park;
      ops::challenge_engine_plan plan(ws, -0.3f, exec, opt);
      auto r = plan.run(exec, d_in.view(), true);
      REQUIRE(r.categories == want.categories);
      REQUIRE(std::memcmp(r.final.data(), want.final.data(), want.final.size() * sizeof(float)) == 0);
      REQUIRE(r.row_layers == want.row_layers);
      REQUIRE(r.layers_skipped == want.layers_skipped);
      REQUIRE(r.retired == want.retired);
      if (budget && plan.streamed()) {  // the plan and this run's park within the budget
        auto const& sc = plan.stream_schedule();
        std::uint64_t const resident_part = plan.device_bytes() - 2 * sc.slot_bytes;  // device_bytes() has the slots
        REQUIRE(sc.device_bytes(d_in.rows()) >= 2 * sc.slot_bytes + sc.park_bytes_per_row);  // the slots and a parked row
        REQUIRE(resident_part + sc.device_bytes(d_in.rows()) <= budget);
      }
      return std::make_pair(std::move(plan), r);
    };
    SECTION("automatic: resident within the budget, streamed over it") {
      auto [p1, r1] = run_with(resident.device_bytes(), 0, 0, weight_placement::automatic);
      REQUIRE_FALSE(p1.streamed());
      // three quarters of the terms: two slots of an eighth of what is left, rows parked in the rest
      std::uint64_t const budget = fixed + terms / 4 * 3;
      auto [p2, r2] = run_with(budget, 0, 0, weight_placement::automatic);
      REQUIRE(p2.streamed());
      REQUIRE(p2.stream_schedule().windows.size() >= 4);
      REQUIRE(r2.bytes_streamed > 0);
    }
    SECTION("a window per layer, a park of 7 rows, slots rewritten as the groups go") {
      auto [p, r] = run_with(0, 1, 7, weight_placement::host);
      REQUIRE(p.stream_schedule().windows.size() == 16);
      REQUIRE(r.groups >= (200 + 6) / 7 / 16);  // a group admits at most 7 rows per pass
      if (retire) REQUIRE(r.windows_skipped > 0);  // groups whose rows all retired or died early
      REQUIRE(r.bytes_streamed <= static_cast<std::uint64_t>(r.uploads) * p.stream_schedule().slot_bytes);
    }
    SECTION("two windows: after the first group the slots hold both, nothing moves") {
      auto [p, r] = run_with(0, terms / 2, 50, weight_placement::host);
      REQUIRE(p.stream_schedule().windows.size() == 2);
      if (!retire) REQUIRE(r.uploads == 2);
      REQUIRE(r.bytes_streamed <= terms);
      auto const again = p.run(exec, d_in.view());
      REQUIRE(again.categories == want.categories);
      REQUIRE(again.uploads == 0);
    }
    SECTION("budgets too small for two slots of a layer and one parked row are refused") {
      std::uint64_t const layer = 1024 * 32 * 2;
      auto const why = sdnn_test::error_text([&] { run_with(fixed + 2 * layer, 0, 0, weight_placement::host); });
      REQUIRE(sdnn_test::has(why, "two slots of the largest layer"));
      auto const why2 = sdnn_test::error_text([&] { run_with(fixed / 2, 0, 0, weight_placement::host); });
      REQUIRE(sdnn_test::has(why2, "resident part"));
      auto const why3 = sdnn_test::error_text([&] { run_with(resident.device_bytes() - 1, 0, 0, weight_placement::device); });
      REQUIRE(sdnn_test::has(why3, "weights host (or automatic)"));
      // just enough: two slots of one layer and one parked row (two buffers of 1024 floats and an id)
      auto [p, r] = run_with(fixed + 2 * layer + 2 * (4 * 1024 + 4), 0, 0, weight_placement::host);
      REQUIRE(p.stream_schedule().park_rows == 1);
      REQUIRE(r.groups >= 1);
      REQUIRE(r.groups <= 200);
    }
  }
}
