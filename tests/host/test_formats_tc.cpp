// The tensor-core layer's host side: block_sparse, tile_offsets and bitmap_tiles conversions (round trips,
// hand-checked layouts, every validate() refusal), magnitude pruning (unstructured and by
// blocks), and the references Y = epi(X W^T) on hand-computed cases.
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/formats/bitmap_tiles.hpp>
#include <sdnn/formats/block_sparse.hpp>
#include <sdnn/formats/csr.hpp>
#include <sdnn/formats/tile_offsets.hpp>
#include <sdnn/linear/op/tc_linear.hpp>
#include <sdnn/linear/op/tc_stream_schedule.hpp>
#include <sdnn/linear/reference/tc_linear.hpp>
#include <sdnn/train/op/prune_structured.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

using namespace sdnn;
using sdnn_test::error_text;
using sdnn_test::has;

namespace {
// A rows x cols bf16 matrix with about `density` of its entries small nonzero integers.
dense_matrix<bf16> random_sparse(std::int64_t rows, std::int64_t cols, double density, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::uniform_int_distribution<int> v(-8, 8);
  dense_matrix<bf16> a(rows, cols);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      int x = 0;
      if (u(rng) < density)
        while (x == 0) x = v(rng);
      a(i, j) = bf16(float(x));
    }
  return a;
}
template <class T>
bool same_bits(dense_matrix<T> const& a, dense_matrix<T> const& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}
csr_matrix<float, int> to_csr(dense_matrix<bf16> const& a) {
  std::vector<int> rp{0}, ci;
  std::vector<float> v;
  for (std::int64_t i = 0; i < a.rows(); ++i) {
    for (std::int64_t j = 0; j < a.cols(); ++j)
      if (float(a(i, j)) != 0.f) {
        ci.push_back(int(j));
        v.push_back(float(a(i, j)));
      }
    rp.push_back(int(ci.size()));
  }
  return make_csr<float, int>(int(a.rows()), int(a.cols()), rp, ci, v);
}
}  // namespace

TEST_CASE("block_sparse: dense and CSR round trips keep exactly the blocks with a nonzero", "[formats][tc]") {
  // [1 0 | 0 0 | 5]
  // [0 0 | 0 0 | 0]
  // ---------------
  // [0 0 | 3 4 | 0]      2 x 2 blocks of a 3 x 5 matrix: edge blocks are stored whole
  dense_matrix<bf16> d(3, 5);
  for (auto& x : d.values()) x = bf16(0.f);
  d(0, 0) = bf16(1.f);
  d(0, 4) = bf16(5.f);
  d(2, 2) = bf16(3.f);
  d(2, 3) = bf16(4.f);
  auto b = block_sparse_from_dense(d.view(), 2, 2);
  validate(b);
  REQUIRE(b.row_blocks() == 2);
  REQUIRE(b.col_blocks() == 3);
  REQUIRE(b.nnzb() == 3);
  REQUIRE(std::vector<int>(b.row_ptr().begin(), b.row_ptr().end()) == std::vector<int>{0, 2, 3});
  REQUIRE(std::vector<int>(b.col_idx().begin(), b.col_idx().end()) == std::vector<int>{0, 2, 1});
  std::vector<float> vals;
  for (auto x : b.values()) vals.push_back(float(x));
  REQUIRE(vals == std::vector<float>{1, 0, 0, 0, 5, 0, 0, 0, 3, 4, 0, 0});
  REQUIRE(same_bits(to_dense(b), d));
  auto st = compute_block_stats(b);
  REQUIRE(st.blocks == 6);
  REQUIRE(st.stored_blocks == 3);
  REQUIRE(st.nonzeros == 4);
  REQUIRE(st.occupancy == sdnn_test::Approx(0.5));
  REQUIRE(st.fill == sdnn_test::Approx(4.0 / 12.0));

  for (int br : {16, 32, 64})
    for (int bc : {16, 32, 64}) {
      auto r = random_sparse(100, 150, 0.01, unsigned(br * 100 + bc));
      auto rb = block_sparse_from_dense(r.view(), br, bc);
      validate(rb);
      REQUIRE(same_bits(to_dense(rb), r));
      auto rc = block_sparse_from_csr<bf16>(to_csr(r), br, bc);
      REQUIRE(std::vector<int>(rc.col_idx().begin(), rc.col_idx().end()) ==
              std::vector<int>(rb.col_idx().begin(), rb.col_idx().end()));
      REQUIRE(same_bits(to_dense(rc), r));
    }
  // An all-zero matrix stores nothing; a 0 x 0 one is valid.
  dense_matrix<bf16> z(40, 70);
  for (auto& x : z.values()) x = bf16(0.f);
  REQUIRE(block_sparse_from_dense(z.view(), 16, 16).nnzb() == 0);
  validate(block_sparse_matrix<bf16>{});
}

TEST_CASE("block_sparse: validate names the bad entry", "[formats][tc]") {
  auto good = [] {
    block_sparse_matrix<bf16> b(3, 5, 2, 2, 3);
    int rp[] = {0, 2, 3}, ci[] = {0, 2, 1};
    std::copy(rp, rp + 3, b.row_ptr().begin());
    std::copy(ci, ci + 3, b.col_idx().begin());
    for (auto& x : b.values()) x = bf16(1.f);
    b.values()[5] = bf16(0.f);  // block 1 (column 2) is an edge block: its column 5 is outside
    b.values()[7] = bf16(0.f);
    b.values()[10] = bf16(0.f);  // block 2 (block row 1): its row 3 is outside
    b.values()[11] = bf16(0.f);
    return b;
  };
  validate(good());
  {
    auto b = good();
    b.row_ptr()[0] = 1;
    REQUIRE(has(error_text([&] { validate(b); }), "row_ptr[0] must be 0, got 1"));
  }
  {
    auto b = good();
    b.col_idx()[1] = 0;
    REQUIRE(has(error_text([&] { validate(b); }), "block row 0: col_idx[1] = 0 must be greater than col_idx[0] = 0"));
  }
  {
    auto b = good();
    b.col_idx()[2] = 3;
    REQUIRE(has(error_text([&] { validate(b); }), "block row 1: col_idx[2] = 3 is out of range for 3 block columns"));
  }
  {
    auto b = good();
    b.values()[7] = bf16(2.f);
    REQUIRE(has(error_text([&] { validate(b); }),
                "block 1 (block row 0, block column 2): element (1, 1) lies outside the 3 x 5 matrix and must be 0"));
  }
  {
    auto b = good();
    REQUIRE(has(error_text([&] { validate(b.view(), 3, 3, 11); }), "values must have 3 blocks x 2 x 2 = 12 entries, got 11"));
  }
  REQUIRE(has(error_text([] { block_sparse_from_dense(dense_view<bf16 const>{}, 0, 16); }),
              "the block shape must be positive, got 0 x 16"));
}

TEST_CASE("tile_offsets: record layout, round trips and stats", "[formats][tc]") {
  // 20 x 20: one 64 x 64 tile of 16 sub-tiles (4 x 4); entries in sub-tiles 0, 1 and 4.
  dense_matrix<bf16> d(20, 20);
  for (auto& x : d.values()) x = bf16(0.f);
  d(0, 0) = bf16(1.f);
  d(0, 17) = bf16(2.f);
  d(17, 3) = bf16(3.f);
  auto t = tile_offsets_from_dense(d.view());
  validate(t);
  REQUIRE(t.ntiles() == 1);
  REQUIRE(std::vector<std::uint32_t>(t.tile_offset().begin(), t.tile_offset().end()) == std::vector<std::uint32_t>{0, 5});
  std::uint8_t const* rec = t.data().data();
  std::vector<std::uint16_t> start(17);
  std::memcpy(start.data(), rec, 34);
  REQUIRE(start == std::vector<std::uint16_t>{0, 1, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3});
  std::uint16_t v[3];
  std::memcpy(v, rec + 48, 6);  // header: round16(2 * 17) = 48
  REQUIRE(bf16::from_bits(v[0]).bits == bf16(1.f).bits);
  REQUIRE(bf16::from_bits(v[1]).bits == bf16(2.f).bits);
  REQUIRE(bf16::from_bits(v[2]).bits == bf16(3.f).bits);
  REQUIRE(rec[64] == 0);       // (0, 0) in sub-tile 0
  REQUIRE(rec[65] == 1);       // (0, 17): row 0, column 1 of sub-tile 1
  REQUIRE(rec[66] == 16 + 3);  // (17, 3): row 1, column 3 of sub-tile 4
  REQUIRE(same_bits(to_dense(t), d));
  auto st = compute_tile_stats(t);
  REQUIRE(st.stored_tiles == 1);
  REQUIRE(st.nonzeros == 3);
  REQUIRE(st.bytes == 80 + 4 * (2 + 1 + 2));

  for (double density : {0.5, 0.1, 0.01}) {
    auto r = random_sparse(150, 200, density, unsigned(density * 1000));
    auto rt = tile_offsets_from_dense(r.view());
    validate(rt);
    REQUIRE(same_bits(to_dense(rt), r));
    auto rc = tile_offsets_from_csr<bf16>(to_csr(r));
    REQUIRE(std::vector<std::uint8_t>(rc.data().begin(), rc.data().end()) ==
            std::vector<std::uint8_t>(rt.data().begin(), rt.data().end()));
    auto s = compute_tile_stats(rt);
    REQUIRE(s.nonzeros > 0);
    REQUIRE(s.bytes_per_nonzero > 3.0);  // 2 value bytes + 1 position byte + headers and padding
  }
  dense_matrix<bf16> z(70, 130);
  for (auto& x : z.values()) x = bf16(0.f);
  auto tz = tile_offsets_from_dense(z.view());
  REQUIRE(tz.ntiles() == 0);
  REQUIRE(tz.data().size() == 0);  // empty tiles cost nothing
  validate(tz);
}

TEST_CASE("tile_offsets: validate names the bad entry", "[formats][tc]") {
  auto make = [] {
    dense_matrix<bf16> d(70, 130);
    for (auto& x : d.values()) x = bf16(0.f);
    d(0, 0) = bf16(1.f);
    d(0, 1) = bf16(2.f);
    d(0, 100) = bf16(3.f);
    d(69, 129) = bf16(4.f);
    return tile_offsets_from_dense(d.view());
  };
  validate(make());
  {
    auto t = make();
    t.tile_col()[1] = 0;
    REQUIRE(has(error_text([&] { validate(t); }), "tile row 0: tile_col[1] = 0 must be greater than tile_col[0] = 0"));
  }
  {
    auto t = make();
    t.tile_col()[2] = 5;
    REQUIRE(has(error_text([&] { validate(t); }), "tile row 1: tile_col[2] = 5 is out of range for 3 tile columns"));
  }
  {
    auto t = make();
    t.data()[48 + 16 + 1] = 0;  // tile 0: positions 0, 1 -> 0, 0
    REQUIRE(has(error_text([&] { validate(t); }), "tile 0, sub-tile 0: position[1] = 0 must be greater than position[0] = 0"));
  }
  {
    auto t = make();
    std::uint16_t bad = 7;
    std::memcpy(t.data().data() + 2, &bad, 2);  // start[1] = 7 > start[2]
    REQUIRE(has(error_text([&] { validate(t); }), "tile 0: start[1] = 7 > start[2]"));
  }
  {
    auto t = make();
    // tile 2 holds (69, 129): row 5 of the tile, column 1 of tile column 2 -> sub-tile 0, position 5 * 16 + 1.
    // Move it to position 6 * 16 + 1: row 70, outside the matrix.
    std::size_t const at = std::size_t(t.tile_offset()[2]) * 16 + 48 + 16;
    REQUIRE(t.data()[at] == 5 * 16 + 1);
    t.data()[at] = 6 * 16 + 1;
    REQUIRE(has(error_text([&] { validate(t); }), "tile 2, sub-tile 0: value 0 sits at (70, 129), outside the 70 x 130 matrix"));
  }
  {
    auto t = make();
    t.tile_offset()[1] += 1;
    REQUIRE(has(error_text([&] { validate(t); }), "tile 0: a record of 2 values takes 80 bytes, tile_offset gives 96"));
  }
  REQUIRE(has(error_text([] { tile_offsets_from_dense(dense_view<bf16 const>{}, 48, 24); }),
              "tiles must be multiples of 16 x 16"));
}

TEST_CASE("prune_magnitude and prune_blocks_l2: targets, ties and refusals", "[train][tc]") {
  dense_matrix<float> w(2, 2);
  w(0, 0) = 1;
  w(0, 1) = -3;
  w(1, 0) = 2;
  w(1, 1) = 0.5f;
  auto p = train::prune_magnitude(w.view(), 0.5);
  REQUIRE(std::vector<float>(p.values().begin(), p.values().end()) == std::vector<float>{0, -3, 2, 0});
  dense_matrix<float> ties(2, 2);
  for (auto& x : ties.values()) x = -1.f;
  auto pt = train::prune_magnitude(ties.view(), 0.5);  // equal magnitudes: the lower flat index goes first
  REQUIRE(std::vector<float>(pt.values().begin(), pt.values().end()) == std::vector<float>{0, 0, -1, -1});
  REQUIRE(train::prune_magnitude(w.view(), 0.0).values()[3] == 0.5f);
  auto big = random_sparse(64, 96, 1.0, 3);
  auto pb = train::prune_magnitude(big.view(), 0.9);
  std::int64_t nz = 0;
  for (auto x : pb.values()) nz += float(x) != 0.f;
  REQUIRE(nz == 64 * 96 - std::llround(0.9 * 64 * 96));

  w(1, 0) = std::numeric_limits<float>::quiet_NaN();
  REQUIRE(has(error_text([&] { train::prune_magnitude(w.view(), 0.5); }), "prune_magnitude: w(1, 0) is NaN"));
  REQUIRE(has(error_text([&] { train::prune_blocks_l2(w.view(), 1, 1, 0.5); }), "prune_blocks_l2: w(1, 0) is NaN"));
  w(1, 0) = 2;
  REQUIRE(has(error_text([&] { train::prune_magnitude(w.view(), 1.0); }), "target sparsity must be in [0, 1), got 1"));
  REQUIRE(has(error_text([&] { train::prune_magnitude(w.view(), -0.1); }), "target sparsity must be in [0, 1), got -0.1"));
  REQUIRE(has(error_text([&] { train::prune_blocks_l2(w.view(), 0, 2, 0.5); }), "block shape must be positive"));

  // 4 x 5 in 2 x 2 blocks (a 2 x 3 block grid, last column partial). Squared norms:
  // block 0: 1+1+1+1 = 4, block 1: 9, block 2: 4 (one element 2), block 3: 0.25, block 4: 4, block 5: 100.
  dense_matrix<float> b(4, 5);
  for (auto& x : b.values()) x = 0;
  b(0, 0) = b(0, 1) = b(1, 0) = b(1, 1) = 1;
  b(0, 2) = 3;
  b(1, 4) = 2;
  b(2, 0) = 0.5f;
  b(3, 3) = 2;
  b(2, 4) = 10;
  auto q = train::prune_blocks_l2(b.view(), 2, 2, 0.5);  // zero 3: block 3 (0.25), then blocks 0 and 2 (4; ties by index)
  REQUIRE(q(0, 0) == 0);
  REQUIRE(q(1, 4) == 0);
  REQUIRE(q(2, 0) == 0);
  REQUIRE(q(0, 2) == 3);
  REQUIRE(q(3, 3) == 2);
  REQUIRE(q(2, 4) == 10);
  auto qb = block_sparse_from_dense(q.view(), 2, 2);
  REQUIRE(qb.nnzb() == 3);
}

TEST_CASE("tc_linear references on hand-computed cases", "[linear][tc]") {
  // X 2 x 3, W 2 x 3 (out x in): Y = X W^T.
  dense_matrix<bf16> x(2, 3), w(2, 3);
  float xv[] = {1, 2, 3, -1, 0.5f, 4}, wv[] = {1, 0, -1, 2, 1, 0};
  for (int i = 0; i < 6; ++i) {
    x.values()[std::size_t(i)] = bf16(xv[i]);
    w.values()[std::size_t(i)] = bf16(wv[i]);
  }
  dense_matrix<float> y(2, 2);
  ops::tc_linear(host_exec{}, std::as_const(x).view(), std::as_const(w).view(), y.view());
  // row 0: (1 - 3, 2 + 2) = (-2, 4); row 1: (-1 - 4, -2 + 0.5) = (-5, -1.5)
  REQUIRE(std::vector<float>(y.values().begin(), y.values().end()) == std::vector<float>{-2, 4, -5, -1.5f});
  float bias[] = {10, -3};
  auto epi = epilogue_relu<float>(bias);  // bias per output feature m, then ReLU
  ops::tc_linear(host_exec{}, std::as_const(x).view(), std::as_const(w).view(), y.view(), epi);
  REQUIRE(std::vector<float>(y.values().begin(), y.values().end()) == std::vector<float>{8, 1, 5, 0});
  // bf16 output: rounded once (1/3 * 3 would not be exact; here 257 -> 256 under bf16's 8 bits).
  dense_matrix<bf16> x1(1, 1), w1(1, 1);
  x1(0, 0) = bf16(1.f);
  w1(0, 0) = bf16(256.f);
  dense_matrix<bf16> y1(1, 1);
  float one = 1;
  basic_epilogue<float> e1;
  e1.bias = &one;
  ops::tc_linear(host_exec{}, std::as_const(x1).view(), std::as_const(w1).view(), y1.view(), e1);
  REQUIRE(float(y1(0, 0)) == 256.f);

  // The three references agree on finite data (the same products summed with k ascending).
  auto wr = random_sparse(70, 90, 0.2, 11);
  auto xr = random_sparse(5, 90, 0.9, 12);
  dense_matrix<float> yd(5, 70), yb(5, 70), yt(5, 70);
  reference::tc_linear(std::as_const(xr).view(), std::as_const(wr).view(), yd.view(), epilogue_none<float>());
  auto wb = block_sparse_from_dense(wr.view(), 16, 32);
  reference::tc_linear(std::as_const(xr).view(), wb.view(), yb.view(), epilogue_none<float>());
  auto wt = tile_offsets_from_dense(wr.view());
  reference::tc_linear(std::as_const(xr).view(), wt.view(), yt.view(), epilogue_none<float>());
  REQUIRE(same_bits(yd, yb));
  REQUIRE(same_bits(yd, yt));

  // NaN in X spreads through a stored block's zeros, not through a block that is not stored.
  dense_matrix<bf16> ws(32, 32), xs(1, 32);
  for (auto& v : ws.values()) v = bf16(0.f);
  for (auto& v : xs.values()) v = bf16(1.f);
  ws(0, 0) = bf16(1.f);                                     // block (0, 0) of 16 x 16 stored
  xs(0, 1) = bf16(std::numeric_limits<float>::quiet_NaN());  // column 1: inside block (0, 0)
  dense_matrix<float> yn(1, 32);
  reference::tc_linear(std::as_const(xs).view(), block_sparse_from_dense(ws.view(), 16, 16).view(), yn.view(), epilogue_none<float>());
  REQUIRE(std::isnan(yn(0, 0)));
  REQUIRE(std::isnan(yn(0, 15)));  // W row 15 is zero inside the stored block: 0 * NaN
  REQUIRE(yn(0, 16) == 0.f);       // block row 1 stores nothing
}

TEST_CASE("tc_linear_can_implement refuses what the kernels cannot take", "[linear][tc]") {
  REQUIRE(ops::tc_linear_can_implement(policy::tc_dense_mma{}, 4000, 3000, arch{9, 0}));
  REQUIRE(has(ops::tc_linear_can_implement(policy::tc_dense_mma{}, 10, 10, arch{7, 5}).why(), "needs sm_80 or newer"));
  REQUIRE(has(ops::tc_linear_can_implement(policy::tc_block_sparse_mma{}, 64, 64, 8, 16).why(),
              "blocks of 8 x 16 are not compiled"));
  REQUIRE(ops::tc_linear_can_implement(policy::tc_block_sparse_mma{}, 64, 64, 64, 16));
  REQUIRE(has(ops::tc_linear_can_implement(policy::tc_tile_offsets_mma{}, 64, 64, 32, 64).why(),
              "tiles of 32 x 64 are not compiled"));
  REQUIRE(policy::tc_choose_splits(172, 264, 64, policy::tc_tuning_sm90) == 3);  // 516 blocks: 1.95 waves
  REQUIRE(policy::tc_choose_splits(4 * 264, 264, 64, policy::tc_tuning_sm90) == 1);  // whole waves already
  REQUIRE(policy::tc_choose_splits(10, 264, 6, policy::tc_tuning_sm90) == 1);  // too few k-blocks to split
}

// A host replay of the streaming kernel's bookkeeping (linear/kernel/tc_stream.cuh) on a
// schedule: each warp walks its run, writes the panels it holds alone, leaves the others in
// slot 0 (its first panel) or 1 (its last); each block adds its warps' slots in warp order and
// writes the panels it holds alone or leaves a partial (slot 0: its first panel, 1: its last);
// the last block of a panel adds the blocks' partials. Every panel must come out exactly once,
// with every one of its units counted exactly once.
namespace {
void replay_stream_schedule(std::vector<std::int32_t> const& ptr, std::vector<std::int64_t> const& bytes, int max_ctas,
                            int warps, std::int64_t unit_cost) {
  std::int32_t const panels = std::int32_t(ptr.size()) - 1, units = ptr.back();
  std::vector<std::uint32_t> off(std::size_t(units) + 1, 0);
  for (std::int32_t u = 0; u < units; ++u) off[std::size_t(u) + 1] = off[std::size_t(u)] + std::uint32_t(bytes[std::size_t(u)] / 16);
  auto const s = ops::detail::build_tc_stream_schedule(
      panels, ptr.data(), [&](std::int64_t u) { return bytes[std::size_t(u)]; },
      [&](std::int64_t u) { return off[std::size_t(u)]; }, max_ctas, warps, unit_cost);
  INFO("panels " << panels << " units " << units << " blocks " << s.ctas << " x " << warps);
  REQUIRE(s.ctas >= 1);
  REQUIRE(s.ctas <= max_ctas);
  std::int64_t const gw = std::int64_t(s.ctas) * warps;
  REQUIRE(s.at(s.warp_begin, 0) == 0);
  REQUIRE(s.at(s.warp_begin, gw) == units);
  std::int64_t total = 0, biggest = 0;
  for (std::int32_t u = 0; u < units; ++u) {
    total += bytes[std::size_t(u)] + unit_cost;
    biggest = std::max(biggest, bytes[std::size_t(u)] + unit_cost);
  }
  for (std::int64_t k = 0; k < gw; ++k) {
    std::int32_t const a = s.at(s.warp_begin, k), b = s.at(s.warp_begin, k + 1);
    REQUIRE(a <= b);
    REQUIRE(std::uint32_t(s.at(s.warp_off, k)) == off[std::size_t(a)]);
    std::int64_t c = 0;
    for (std::int32_t u = a; u < b; ++u) c += bytes[std::size_t(u)] + unit_cost;
    REQUIRE(c <= total / gw + 2 * biggest);  // balanced to within a unit or two
  }
  auto panel_of = [&](std::int32_t u) {
    return std::int32_t(std::upper_bound(ptr.begin(), ptr.end(), u) - ptr.begin()) - 1;
  };
  // per panel: the units counted into its final output, and how many times it was written
  std::vector<std::int64_t> counted(std::size_t(panels), 0);
  std::vector<int> writes(std::size_t(panels), 0);
  std::vector<std::array<std::int64_t, 2>> cta_partial(std::size_t(s.ctas), {-1, -1});  // units in slot 0 / 1
  std::vector<int> arrivals(std::size_t(panels), 0);
  for (std::int32_t c = 0; c < s.ctas; ++c) {
    std::int32_t const Ta = s.at(s.warp_begin, std::int64_t(c) * warps), Tb = s.at(s.warp_begin, std::int64_t(c + 1) * warps);
    std::int32_t const Pa = s.at(s.cta_panel, c);
    if (Ta < Tb) REQUIRE(Pa == panel_of(Ta));
    std::vector<std::pair<int, std::int64_t>> slots;  // (panel, units), in (warp, slot) order
    for (int w = 0; w < warps; ++w) {
      std::int64_t const k = std::int64_t(c) * warps + w;
      std::int32_t const ta = s.at(s.warp_begin, k), tb = s.at(s.warp_begin, k + 1);
      if (ta == tb) {
        REQUIRE(s.at(s.warp_panel, k) == -1);
        continue;
      }
      std::int32_t const pa = s.at(s.warp_panel, k);
      REQUIRE(pa == panel_of(ta));
      std::pair<int, std::int64_t> slot[2] = {{-1, 0}, {-1, 0}};
      std::int32_t cur = pa;
      std::int64_t acc = 0;
      for (std::int32_t u = ta; u < tb; ++u) {  // as the kernel: segment ends at a panel end or the run's end
        REQUIRE(panel_of(u) == cur);
        ++acc;
        if (u + 1 == ptr[std::size_t(cur) + 1] || u + 1 == tb) {
          bool const last = u + 1 == tb, whole = ptr[std::size_t(cur)] >= ta && ptr[std::size_t(cur) + 1] <= tb;
          if (whole) {
            counted[std::size_t(cur)] += acc;
            ++writes[std::size_t(cur)];
          } else if (!last) {
            REQUIRE(cur == pa);
            slot[0] = {cur, acc};
          } else {
            slot[cur == pa ? 0 : 1] = {cur, acc};
          }
          acc = 0;
          if (!last) {
            ++cur;
            while (ptr[std::size_t(cur) + 1] <= u + 1) ++cur;
          }
        }
      }
      slots.push_back(slot[0]);
      slots.push_back(slot[1]);
    }
    int prev = -1, npend = 0;
    for (std::size_t k = 0; k < slots.size(); ++k) {
      int const pk = slots[k].first;
      if (pk < 0 || pk == prev) continue;
      prev = pk;
      std::int64_t sum = 0;
      for (std::size_t k2 = k; k2 < slots.size(); ++k2)
        if (slots[k2].first == pk) sum += slots[k2].second;
      bool const whole = ptr[std::size_t(pk)] >= Ta && ptr[std::size_t(pk) + 1] <= Tb;
      if (whole) {
        counted[std::size_t(pk)] += sum;
        ++writes[std::size_t(pk)];
      } else {
        REQUIRE(npend < 2);
        ++npend;
        auto& dst = cta_partial[std::size_t(c)][pk == Pa ? 0 : 1];
        REQUIRE(dst == -1);
        dst = sum;
        ++arrivals[std::size_t(pk)];
      }
    }
  }
  for (std::int32_t p = 0; p < panels; ++p) {  // the fix-up of the last block, and the empty panels
    std::int32_t const c0 = s.at(s.panel_cta, 2 * p), cnt = s.at(s.panel_cta, 2 * p + 1);
    if (ptr[std::size_t(p)] == ptr[std::size_t(p) + 1]) {
      REQUIRE(cnt == 0);
      continue;
    }
    if (arrivals[std::size_t(p)] == 0) continue;
    REQUIRE(arrivals[std::size_t(p)] == cnt);
    std::int64_t sum = 0;
    for (std::int32_t c = c0, seen = 0; seen < cnt; ++c) {
      REQUIRE(c < s.ctas);
      if (s.at(s.warp_begin, std::int64_t(c) * warps) == s.at(s.warp_begin, std::int64_t(c + 1) * warps)) continue;
      ++seen;
      auto const v = cta_partial[std::size_t(c)][p == s.at(s.cta_panel, c) ? 0 : 1];
      REQUIRE(v >= 0);
      sum += v;
    }
    counted[std::size_t(p)] += sum;
    ++writes[std::size_t(p)];
  }
  std::vector<bool> is_empty(std::size_t(panels), false);
  for (std::int32_t i = 0; i < s.n_empty; ++i) is_empty[std::size_t(s.at(s.empty, i))] = true;
  for (std::int32_t p = 0; p < panels; ++p) {
    INFO("panel " << p);
    bool const empty = ptr[std::size_t(p)] == ptr[std::size_t(p) + 1];
    REQUIRE(is_empty[std::size_t(p)] == empty);
    REQUIRE(writes[std::size_t(p)] == (empty ? 0 : 1));
    REQUIRE(counted[std::size_t(p)] == ptr[std::size_t(p) + 1] - ptr[std::size_t(p)]);
  }
}
}  // namespace

TEST_CASE("tc_stream schedule: balanced runs, and every panel summed once", "[linear][tc]") {
  std::mt19937 rng(5);
  // The bench shape (172 panels x 64 tiles of ~1.3 KB) on 132 blocks x 8 warps, and odd ones.
  {
    std::vector<std::int32_t> ptr{0};
    for (int p = 0; p < 172; ++p) ptr.push_back(ptr.back() + 64);
    std::vector<std::int64_t> bytes(std::size_t(ptr.back()));
    for (auto& b : bytes) b = 16 * (70 + int(rng() % 20));
    replay_stream_schedule(ptr, bytes, 132, 8, 192);
  }
  for (int trial = 0; trial < 300; ++trial) {
    int const panels = 1 + int(rng() % 40), warps = 1 + int(rng() % 8), ctas = 1 + int(rng() % 20);
    std::vector<std::int32_t> ptr{0};
    for (int p = 0; p < panels; ++p) ptr.push_back(ptr.back() + (rng() % 3 == 0 ? 0 : int(rng() % 30)));
    std::vector<std::int64_t> bytes(std::size_t(ptr.back()));
    for (auto& b : bytes) b = 16 * (3 + int(rng() % (rng() % 5 == 0 ? 800 : 40)));
    replay_stream_schedule(ptr, bytes, ctas, warps, trial % 2 ? 192 : 0);
  }
  replay_stream_schedule({0, 0, 0}, {}, 132, 8, 192);  // nothing stored
}

TEST_CASE("bitmap_tiles: round trips, the fragment order, the record's counts", "[formats][tc]") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-4.f, 4.f), pick(0.f, 1.f);
  for (auto [m, k, density] : {std::tuple<int, int, float>{1, 1, 1.f}, {17, 33, 0.3f}, {40, 16, 0.05f}, {16, 48, 0.f},
                               {35, 71, 1.f}}) {
    dense_matrix<bf16> w(m, k);
    for (auto& v : w.values()) v = pick(rng) < density ? bf16(u(rng)) : bf16(0.f);
    auto const b = bitmap_tiles_from_dense(std::as_const(w).view());
    REQUIRE(b.tile_rows() == (m + 15) / 16);
    REQUIRE(b.tile_cols() == (k + 63) / 64 * 4);
    REQUIRE(b.records().size() == std::size_t(b.tile_rows() * b.tile_cols()));  // every tile, empty ones too
    std::int64_t pairs = 0;  // pairs (i, 2c), (i, 2c + 1) with a nonzero
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < k; j += 2) pairs += float(w(i, j)) != 0.f || (j + 1 < k && float(w(i, j + 1)) != 0.f);
    REQUIRE(b.pairs() == pairs);
    auto const d = to_dense(b);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < k; ++j) REQUIRE(float(d(i, j)) == float(w(i, j)));
    // Each record: start = pairs before the tile; before[j] = the set bits of mask[0 .. j-1].
    std::uint32_t start = 0;
    for (auto const& r : b.records()) {
      REQUIRE(r.start == start);
      std::uint32_t seen = 0;
      for (int q = 0; q < 4; ++q) {
        REQUIRE(r.before[q] == seen);
        seen += std::uint32_t(__builtin_popcount(r.mask[q]));
      }
      REQUIRE(r.count == seen);
      REQUIRE(r.zero == 0);
      start += seen;
    }
    REQUIRE(start == b.pairs());
  }
  // Row 9, column 27 of a group: 27 = 16 t + 4 u + 2 (j / 2) + 1 with t = 1, u = 2, j / 2 = 1, and row
  // 9 = g + 8 with g = 1: register j = 3 of lane g * 4 + t = 5 in tile 2: bit 5 of its mask[3]; the
  // pair is (0, 3).
  dense_matrix<fp16> one(16, 30);
  one(9, 27) = fp16(3.f);
  auto const b = bitmap_tiles_from_dense(std::as_const(one).view());
  REQUIRE(b.records().size() == 4);
  for (int u = 0; u < 4; ++u)
    for (int q = 0; q < 4; ++q) REQUIRE(b.records()[std::size_t(u)].mask[q] == (u == 2 && q == 3 ? (1u << 5) : 0u));
  REQUIRE(b.pairs() == 1);
  REQUIRE(float(b.values()[0]) == 0.f);
  REQUIRE(float(b.values()[1]) == 3.f);
  REQUIRE(float(b.at(9, 27)) == 3.f);
  REQUIRE(float(b.at(9, 26)) == 0.f);
  REQUIRE(float(b.at(11, 9)) == 0.f);
  REQUIRE(has(error_text([&] { (void)b.at(16, 0); }), "outside"));
}
