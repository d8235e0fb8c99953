// sdnn::dist without MPI: partitions (block, cost-weighted), row slices, the merge of the
// ranks' category lists, the agreement signature and the timing summary; and a distributed
// run simulated in one process (each "rank" runs the host reference on its slice) giving
// exactly the single-process categories. tests/mpi runs the same over real MPI ranks.
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include "../mpi/dist_test_problem.hpp"

#include <sdnn/dist/categories.hpp>
#include <sdnn/dist/partition.hpp>
#include <sdnn/dist/signature.hpp>
#include <sdnn/dist/timing.hpp>
#include <sdnn/challenge/reference.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

using namespace sdnn;
using sdnn_test::error_text;
using sdnn_test::has;
using offsets_t = std::vector<std::int64_t>;

namespace {

// Checks the invariants of a partition of n inputs over parts.
void check_partition(dist::partition const& p, std::int64_t n, int parts) {
  REQUIRE(p.parts() == parts);
  REQUIRE(p.inputs() == n);
  REQUIRE(p.offsets().front() == 0);
  REQUIRE(std::is_sorted(p.offsets().begin(), p.offsets().end()));
}

}  // namespace

TEST_CASE("dist::block_partition: contiguous, sizes differ by at most one, first ranks larger", "[dist]") {
  REQUIRE(dist::block_partition(10, 3).offsets() == offsets_t{0, 4, 7, 10});
  REQUIRE(dist::block_partition(9, 3).offsets() == offsets_t{0, 3, 6, 9});
  REQUIRE(dist::block_partition(2, 3).offsets() == offsets_t{0, 1, 2, 2});  // rank 2 holds none
  REQUIRE(dist::block_partition(0, 2).offsets() == offsets_t{0, 0, 0});
  REQUIRE(dist::block_partition(5, 1).offsets() == offsets_t{0, 5});
  for (std::int64_t n : {0, 1, 7, 100, 1001})
    for (int parts : {1, 2, 3, 7, 16}) {
      auto const p = dist::block_partition(n, parts);
      check_partition(p, n, parts);
      std::int64_t lo = n, hi = 0;
      for (int r = 0; r < parts; ++r) lo = std::min(lo, p.range(r).size()), hi = std::max(hi, p.range(r).size());
      REQUIRE(hi - lo <= 1);
    }
  REQUIRE(has(error_text([] { dist::block_partition(5, 0); }), "number of parts (ranks) must be >= 1, got 0"));
  REQUIRE(has(error_text([] { dist::block_partition(-1, 2); }), "number of inputs must be >= 0, got -1"));
}

TEST_CASE("dist::partition: ranges, owners, per-rank costs, checked offsets", "[dist]") {
  dist::partition const p(offsets_t{0, 1, 1, 4});
  REQUIRE(p.range(0).begin == 0);
  REQUIRE(p.range(0).end == 1);
  REQUIRE(p.range(1).empty());
  REQUIRE(p.range(2).size() == 3);
  REQUIRE(p.range(2).contains(3));
  REQUIRE_FALSE(p.range(2).contains(4));
  REQUIRE(p.owner(0) == 0);
  REQUIRE(p.owner(1) == 2);  // rank 1 is empty
  REQUIRE(p.owner(3) == 2);
  REQUIRE(p.part_costs({5, 1, 2, 3}) == offsets_t{5, 0, 6});
  REQUIRE(has(error_text([&] { p.range(3); }), "rank 3 is out of range for 3 parts"));
  REQUIRE(has(error_text([&] { p.owner(4); }), "input 4 is out of range for 4 inputs"));
  REQUIRE(has(error_text([&] { p.part_costs({1, 2}); }), "2 costs for 4 inputs"));
  REQUIRE(has(error_text([] { dist::partition(offsets_t{1, 2}); }), "offsets[0] must be 0, got 1"));
  REQUIRE(has(error_text([] { dist::partition(offsets_t{0, 3, 2}); }), "offsets[2] = 2 < offsets[1] = 3"));
  REQUIRE(has(error_text([] { dist::partition(offsets_t{0}); }), "at least 2 offsets"));
  REQUIRE(dist::partition() == dist::partition());  // default: {0}, 0 parts
  REQUIRE(dist::block_partition(4, 2) != dist::block_partition(4, 4));
}

TEST_CASE("dist::weighted_partition: every rank within the largest cost of total / parts", "[dist]") {
  // Hand-computed: total 18, the cut for half of it (9) lies between prefixes 4 and 14: a tie
  // (5 below, 5 above... in units of 2: 10 and 10) takes the lower index.
  REQUIRE(dist::weighted_partition({1, 1, 1, 1, 10, 1, 1, 1, 1}, 2).offsets() == offsets_t{0, 4, 9});
  REQUIRE(dist::weighted_partition({4, 1, 1, 1, 1}, 2).offsets() == offsets_t{0, 1, 5});
  REQUIRE(dist::weighted_partition({0, 0, 0, 0}, 2).offsets() == offsets_t{0, 2, 4});  // all 0: block
  REQUIRE(dist::weighted_partition({}, 3).offsets() == offsets_t{0, 0, 0, 0});
  REQUIRE(dist::weighted_partition({100}, 3).offsets().back() == 1);

  std::uint64_t s = 99;
  for (int trial = 0; trial < 300; ++trial) {
    auto const n = static_cast<std::size_t>(sdnn_test::splitmix64(s) % 200);
    int const parts = 1 + static_cast<int>(sdnn_test::splitmix64(s) % 9);
    std::vector<std::int64_t> costs(n);
    bool const spiky = trial % 3 == 0;
    for (auto& c : costs) {
      std::uint64_t const r = sdnn_test::splitmix64(s);
      c = spiky ? (r % 10 == 0 ? static_cast<std::int64_t>(r % 1000) : 0) : static_cast<std::int64_t>(r % 50);
    }
    auto const p = dist::weighted_partition(costs, parts);
    check_partition(p, static_cast<std::int64_t>(n), parts);
    std::int64_t total = 0, biggest = 0;
    for (auto c : costs) total += c, biggest = std::max(biggest, c);
    for (std::int64_t pc : p.part_costs(costs)) {
      // |pc - total / parts| <= biggest, in integers: |pc * parts - total| <= biggest * parts.
      std::int64_t const dev = pc * parts - total;
      REQUIRE((dev < 0 ? -dev : dev) <= biggest * parts);
    }
  }
  REQUIRE(has(error_text([] { dist::weighted_partition({1, -2}, 2); }), "cost[1] = -2"));
  REQUIRE(has(error_text([] { dist::weighted_partition({1}, 0); }), "must be >= 1, got 0"));
  REQUIRE(has(error_text([] { dist::weighted_partition({INT64_MAX, 1}, 2); }), "overflows int64"));
  REQUIRE(has(error_text([] { dist::weighted_partition({INT64_MAX / 2}, 3); }), "overflows int64"));
}

TEST_CASE("dist::nnz_partition balances nonzeros + base per input", "[dist]") {
  // Rows with 0, 3, 0, 1, 4 nonzeros: costs (base 1) 1, 4, 1, 2, 5 = 13.
  auto const y = make_csr<float, std::int32_t>(5, 6, {0, 0, 3, 3, 4, 8}, {0, 1, 2, 5, 0, 1, 2, 3},
                                               {1, 1, 1, 1, 1, 1, 1, 1});
  REQUIRE(dist::nnz_costs(y.view()) == offsets_t{1, 4, 1, 2, 5});
  REQUIRE(dist::nnz_costs(y.view(), 0) == offsets_t{0, 3, 0, 1, 4});
  REQUIRE(dist::nnz_partition(y.view(), 2) == dist::weighted_partition({1, 4, 1, 2, 5}, 2));
  REQUIRE(dist::nnz_partition(y.view(), 2).offsets() == offsets_t{0, 3, 5});  // 6 | 7
  REQUIRE(has(error_text([&] { dist::nnz_costs(y.view(), -1); }), "base must be >= 0"));
}

TEST_CASE("dist::slice_rows copies a block of rows with row_ptr rebased", "[dist]") {
  auto const y = make_csr<float, std::int32_t>(4, 5, {0, 2, 2, 5, 6}, {0, 4, 1, 2, 3, 4}, {1, 2, 3, 4, 5, 6});
  auto const s = dist::slice_rows(y.view(), {1, 3});
  validate(s);
  REQUIRE(s.rows() == 2);
  REQUIRE(s.cols() == 5);
  REQUIRE(std::vector<std::int32_t>(s.row_ptr().begin(), s.row_ptr().end()) == std::vector<std::int32_t>{0, 0, 3});
  REQUIRE(std::vector<std::int32_t>(s.col_idx().begin(), s.col_idx().end()) == std::vector<std::int32_t>{1, 2, 3});
  REQUIRE(std::vector<float>(s.values().begin(), s.values().end()) == std::vector<float>{3, 4, 5});
  auto const e = dist::slice_rows(y.view(), {4, 4});
  validate(e);
  REQUIRE(e.rows() == 0);
  REQUIRE(dist::slice_rows(y.view(), {0, 4}).nnz() == 6);
  REQUIRE(has(error_text([&] { dist::slice_rows(y.view(), {3, 5}); }), "rows [3, 5) are out of range for 4 rows"));
  REQUIRE(has(error_text([&] { dist::slice_rows(y.view(), {2, 1}); }), "out of range"));
}

TEST_CASE("dist::to_global_ids and merge_categories: checked, ascending, no duplicates", "[dist]") {
  REQUIRE(dist::to_global_ids(std::vector<std::int32_t>{1, 3}, {10, 14}) == offsets_t{11, 13});
  REQUIRE(dist::to_global_ids(std::vector<std::int32_t>{}, {10, 10}).empty());
  REQUIRE(has(error_text([] { dist::to_global_ids(std::vector<std::int32_t>{5}, {10, 14}); }),
              "local id 5 (entry 0) is out of range for a block of 4 inputs"));
  REQUIRE(has(error_text([] { dist::to_global_ids(std::vector<std::int32_t>{2, 2}, {0, 4}); }),
              "strictly ascending, entry 1 = 2 follows 2"));

  dist::partition const p(offsets_t{0, 3, 3, 8});
  REQUIRE(dist::merge_categories({{1, 3}, {}, {4, 8}}, &p) == offsets_t{1, 3, 4, 8});
  REQUIRE(dist::merge_categories({{4, 8}, {1, 3}}) == offsets_t{1, 3, 4, 8});  // any split: sorted
  REQUIRE(dist::merge_categories(offsets_t{1, 3, 4}, offsets_t{2, 0, 1}, &p) == offsets_t{1, 3, 4});
  REQUIRE(has(error_text([] { dist::merge_categories({{1, 3}, {3}}); }), "id 3 is reported twice"));
  REQUIRE(has(error_text([&] { dist::merge_categories({{1, 4}, {}, {5}}, &p); }),
              "rank 0 reports id 4 outside its inputs 1..3"));
  REQUIRE(has(error_text([&] { dist::merge_categories({{1}, {2}}, &p); }), "2 ranks' lists for a partition of 3 parts"));
  REQUIRE(has(error_text([] { dist::merge_categories({{0, 1}}); }), "ids are 1-based, got 0"));
  REQUIRE(has(error_text([] { dist::merge_categories(offsets_t{1, 2}, offsets_t{1}); }),
              "the counts add up to 1 but 2 ids"));
}

TEST_CASE("dist: a run split over simulated ranks gives exactly the single-process categories", "[dist]") {
  auto const prob = sdnn_test::make_dist_problem(301);
  auto const whole = reference::challenge_categories(reference::challenge_infer(prob.inputs, prob.layers, prob.bias));
  REQUIRE(whole.size() > 20);   // the problem is not trivial: some inputs survive...
  REQUIRE(whole.size() < 280);  // ... and some do not
  offsets_t const expected(whole.begin(), whole.end());
  for (int parts : {1, 2, 3, 4, 7}) {
    for (bool by_nnz : {false, true}) {
      CAPTURE(parts, by_nnz);
      auto const p = by_nnz ? dist::nnz_partition(prob.inputs.view(), parts)
                            : dist::block_partition(prob.inputs.rows(), parts);
      std::vector<std::vector<std::int64_t>> per_rank;
      for (int r = 0; r < parts; ++r) {
        auto const block = p.range(r);
        auto const y = dist::slice_rows(prob.inputs.view(), block);
        per_rank.push_back(dist::to_global_ids(
            reference::challenge_categories(reference::challenge_infer(y, prob.layers, prob.bias)), block));
      }
      REQUIRE(dist::merge_categories(per_rank, &p) == expected);
    }
  }
  // The weighted partition really differs from the block one on this problem.
  REQUIRE(dist::nnz_partition(prob.inputs.view(), 3) != dist::block_partition(prob.inputs.rows(), 3));
}

TEST_CASE("dist::hasher: streaming equals one call; hash_csr sees sizes, structure and value bits", "[dist]") {
  std::vector<unsigned char> bytes(1000);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 37 + 11);
  dist::hasher one;
  one.bytes(bytes.data(), bytes.size());
  for (std::size_t a : {0, 1, 3, 7, 8, 9, 500}) {
    dist::hasher parts;
    parts.bytes(bytes.data(), a);
    parts.bytes(bytes.data() + a, 5);
    parts.bytes(bytes.data() + a + 5, bytes.size() - a - 5);
    REQUIRE(parts.digest() == one.digest());
  }
  dist::hasher shorter;
  shorter.bytes(bytes.data(), bytes.size() - 1);
  REQUIRE(shorter.digest() != one.digest());
  dist::hasher z1, z2;  // trailing zero bytes are not lost
  z1.bytes(bytes.data(), 3);
  z2.bytes(bytes.data(), 3);
  z2.value(std::uint8_t{0});
  REQUIRE(z1.digest() != z2.digest());

  auto const a = make_csr<float, std::int32_t>(2, 3, {0, 1, 2}, {0, 2}, {1.f, 2.f});
  auto const same = make_csr<float, std::int32_t>(2, 3, {0, 1, 2}, {0, 2}, {1.f, 2.f});
  auto const other_col = make_csr<float, std::int32_t>(2, 3, {0, 1, 2}, {0, 1}, {1.f, 2.f});
  auto const other_val = make_csr<float, std::int32_t>(2, 3, {0, 1, 2}, {0, 2}, {1.f, 2.0000002f});
  auto const neg_zero = make_csr<float, std::int32_t>(2, 3, {0, 1, 2}, {0, 2}, {1.f, -0.f});
  auto const pos_zero = make_csr<float, std::int32_t>(2, 3, {0, 1, 2}, {0, 2}, {1.f, 0.f});
  auto const wider = make_csr<float, std::int32_t>(2, 4, {0, 1, 2}, {0, 2}, {1.f, 2.f});
  REQUIRE(dist::hash_csr(a.view()) == dist::hash_csr(same.view()));
  REQUIRE(dist::hash_csr(a.view()) != dist::hash_csr(other_col.view()));
  REQUIRE(dist::hash_csr(a.view()) != dist::hash_csr(other_val.view()));
  REQUIRE(dist::hash_csr(neg_zero.view()) != dist::hash_csr(pos_zero.view()));
  REQUIRE(dist::hash_csr(a.view()) != dist::hash_csr(wider.view()));
}

TEST_CASE("dist::network_signature: any change to the network, bias, cap or input count shows", "[dist]") {
  auto prob = sdnn_test::make_dist_problem(10);
  auto const base = dist::network_signature(prob.layers, prob.bias, prob.cap, 10);
  auto const& f = base.fields();
  REQUIRE(f.size() == 7);
  std::vector<std::string> names;
  for (auto const& x : f) names.push_back(x.name);
  REQUIRE(names == std::vector<std::string>{"layers", "neurons", "weight nonzeros", "weights hash", "bias", "cap", "inputs"});
  REQUIRE(f[0].value == 24);
  REQUIRE(f[1].value == 256);
  REQUIRE(f[2].value == 24 * 256 * 32);
  REQUIRE(dist::format_field(f[4].kind, f[4].value) == "-0.200000003");
  REQUIRE(dist::format_field(f[3].kind, f[3].value).size() == 18);  // 0x + 16 hex digits

  auto values = [](dist::signature const& s) {
    std::vector<std::uint64_t> v;
    for (auto const& x : s.fields()) v.push_back(x.value);
    return v;
  };
  REQUIRE(values(dist::network_signature(prob.layers, prob.bias, prob.cap, 10)) == values(base));
  REQUIRE(values(dist::network_signature(prob.layers, -0.3f, prob.cap, 10))[4] != f[4].value);
  REQUIRE(values(dist::network_signature(prob.layers, prob.bias, 16.f, 10))[5] != f[5].value);
  REQUIRE(values(dist::network_signature(prob.layers, prob.bias, prob.cap, 11))[6] == 11);
  prob.layers[17].values()[5] = 0.0625f * 2;  // one weight of one layer
  auto const edited = values(dist::network_signature(prob.layers, prob.bias, prob.cap, 10));
  REQUIRE(edited[3] != f[3].value);
  REQUIRE(edited[2] == f[2].value);  // same sizes: only the hash sees it
  prob.layers.pop_back();
  REQUIRE(values(dist::network_signature(prob.layers, prob.bias, prob.cap, 10))[0] == 23);

  dist::signature x, y;
  x.add_count("a", 1).add_hash("b", 2);
  y.add_count("a", 1).add_count("b", 2);
  REQUIRE(x.layout_hash() != y.layout_hash());  // same values, different kinds
  dist::signature z;
  z.add_count("a", 1).add_hash("c", 2);
  REQUIRE(x.layout_hash() != z.layout_hash());  // different names
}

TEST_CASE("dist::summarize_times and timing_report: max / mean imbalance", "[dist]") {
  auto const s = dist::summarize_times({1.0, 3.0, 2.0, 2.0});
  REQUIRE(s.ranks == 4);
  REQUIRE(s.min == 1.0);
  REQUIRE(s.max == 3.0);
  REQUIRE(s.mean == 2.0);
  REQUIRE(s.fastest == 0);
  REQUIRE(s.slowest == 1);
  REQUIRE(s.imbalance() == 1.5);
  REQUIRE(s.idle_fraction() == sdnn_test::Approx(1.0 / 3.0));
  REQUIRE(dist::summarize_times({0.0, 0.0}).imbalance() == 1.0);
  REQUIRE(dist::summarize_times({0.0, 0.0}).idle_fraction() == 0.0);
  auto const text = dist::timing_report({1.0, 3.0}, {10, 30});
  REQUIRE(has(text, "rank 0: 10 inputs, 1.000000 s (0.50 x mean)\n"));
  REQUIRE(has(text, "rank 1: 30 inputs, 3.000000 s (1.50 x mean)\n"));
  REQUIRE(has(text, "2 ranks: max 3.000000 s (rank 1), mean 2.000000 s, min 1.000000 s (rank 0); imbalance max/mean 1.500"));
  REQUIRE(has(dist::timing_report({2.0}), "rank 0: 2.000000 s (1.00 x mean)"));
  REQUIRE(has(error_text([] { dist::summarize_times({}); }), "no times given"));
  REQUIRE(has(error_text([] { dist::summarize_times({1.0, -1.0}); }), "rank 1 reports a negative or NaN time"));
  REQUIRE(has(error_text([] { dist::timing_report({1.0}, {1, 2}); }), "2 input counts for 1 ranks"));
  dist::stopwatch w;
  REQUIRE(w.seconds() >= 0);
}
