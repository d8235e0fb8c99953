// The automatic 16-bit linear layer's host part: the structure analysis of W (nonzeros,
// occupied tiles and blocks, 2:4-ness at tails), the candidate rules and the cost model's
// choices on the benchmark's shapes, the host reference, the tc_linear layer on the host, and
// tune()'s results saved and loaded.
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/linear/op/tc_auto.hpp>
#include <sdnn/linear/tc_linear_layer.hpp>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

using namespace sdnn;
using policy::tc_path;

namespace {
unsigned bit(tc_path p) { return 1u << int(p); }
}  // namespace

TEST_CASE("tc_auto: analyze_weights counts nonzeros, pairs, tiles, blocks and 2:4 at odd sizes", "[tc_auto]") {
  dense_matrix<bf16> w(70, 130);  // 2 x 3 tiles of 64, 3 x 5 blocks of 32, a 2-column tail group
  for (auto& v : w.values()) v = bf16(0.f);
  SECTION("all zero (and -0)") {
    w(3, 4) = bf16(-0.f);
    auto s = ops::analyze_weights(std::as_const(w).view());
    CHECK(s.nnz == 0);
    CHECK(s.tiles64 == 0);
    CHECK(s.tiles64_total == 6);
    CHECK(s.blocks32 == 0);
    CHECK(s.blocks32_total == 15);
    CHECK(s.is_24);
  }
  SECTION("a few entries") {
    w(0, 0) = bf16(1.f);
    w(0, 1) = bf16(std::numeric_limits<float>::quiet_NaN());  // NaN counts as a nonzero
    w(69, 129) = bf16(2.f);                                    // the corner: last tile, last block
    w(33, 64) = bf16(3.f);
    auto s = ops::analyze_weights(std::as_const(w).view());
    CHECK(s.nnz == 4);
    CHECK(s.pairs == 3);     // columns (0, 1), (128, 129), (64, 65)
    CHECK(s.tiles64 == 3);   // (0,0), (1,2), (0,1)
    CHECK(s.blocks32 == 3);  // (0,0), (2,4), (1,2)
    CHECK(s.is_24);
    w(0, 2) = bf16(1.f);  // three in the group 0..3
    CHECK_FALSE(ops::analyze_weights(std::as_const(w).view()).is_24);
    w(0, 2) = bf16(0.f);
    w(5, 128) = bf16(1.f);
    w(5, 129) = bf16(1.f);  // two in the zero-padded tail group
    CHECK(ops::analyze_weights(std::as_const(w).view()).is_24);
  }
}

TEST_CASE("tc_auto: candidates and the cost model's choices", "[tc_auto]") {
  auto const t = policy::tc_auto_tuning_for(arch{9, 0});
  CHECK(std::string(t.gpu).find("H100") != std::string::npos);
  policy::weight_structure dense{11008, 4096, 11008ll * 4096, 172 * 64, 172 * 64, 344 * 128, 344 * 128, false,
                                 11008ll * 2048};
  CHECK(policy::tc_candidates(t, dense) == bit(tc_path::cublas_dense));
  auto blocks = dense;  // 90 % of the 32 x 32 blocks empty, every tile occupied
  blocks.blocks32 = blocks.blocks32_total / 10;
  blocks.nnz = blocks.blocks32 * 1024;
  unsigned const cb = policy::tc_candidates(t, blocks);
  CHECK((cb & bit(tc_path::tc_block32)) != 0);
  CHECK(policy::tc_choose(t, blocks, 8, cb).path == tc_path::tc_block32);
  auto un = dense;  // 90 % unstructured: 1 - 0.9^2 of the column pairs hold a nonzero
  un.nnz = un.nnz / 10;
  un.pairs = un.pairs * 19 / 100;
  unsigned const cu = policy::tc_candidates(t, un);
  CHECK((cu & bit(tc_path::tc_tile_offsets)) != 0);
  CHECK((cu & bit(tc_path::tc_bitmap)) != 0);
  CHECK((cu & bit(tc_path::tc_block32)) == 0);  // every block occupied
  CHECK((cu & bit(tc_path::cusparse_csr)) != 0);
  CHECK((cu & bit(tc_path::csr_gather)) != 0);
  unsigned const no_gather = cu & ~bit(tc_path::csr_gather);
  // Measured here: csr_gather 3.2x cuBLAS at one row, 2.5x at 8; without it, at one row cuSPARSE's
  // SpMM and the bitmap tiles within 5 % of each other (29.5 and 30.7 us; 30.3 and 30.6 in a later
  // run; the model, which counts the bitmap kernel's 688 panels as 3 whole waves, picks cuSPARSE),
  // at 8 tc_bitmap (1.7x).
  CHECK(policy::tc_choose(t, un, 1, cu).path == tc_path::csr_gather);
  CHECK(policy::tc_choose(t, un, 8, cu).path == tc_path::csr_gather);
  CHECK(policy::tc_choose(t, un, 1, no_gather).path == tc_path::cusparse_csr);
  CHECK(policy::tc_choose(t, un, 1, no_gather & ~bit(tc_path::cusparse_csr)).path == tc_path::tc_bitmap);
  CHECK(policy::tc_choose(t, un, 8, no_gather).path == tc_path::tc_bitmap);
  CHECK(policy::tc_choose(t, un, 8, no_gather & ~bit(tc_path::tc_bitmap)).path == tc_path::tc_tile_offsets);
  CHECK(policy::tc_runnable(cu, 2) == (cu & ~bit(tc_path::cusparse_csr)));  // cuSPARSE: one row only
  CHECK(policy::tc_runnable(cu, 16) == (cu & ~bit(tc_path::cusparse_csr)));
  CHECK(policy::tc_runnable(cu, 17) == (no_gather & ~bit(tc_path::cusparse_csr)));  // csr_gather: up to 16
  CHECK(policy::tc_runnable(cu, 1) == cu);
  auto wide = un;  // csr_gather keeps a column in 16 bits
  wide.k = 65537;
  CHECK((policy::tc_candidates(t, wide) & bit(tc_path::csr_gather)) == 0);
  CHECK(policy::tc_choose(t, un, 2048, cu).path == tc_path::cublas_dense);
  auto s24 = dense;
  s24.nnz /= 2;
  s24.pairs = s24.pairs * 5 / 6;  // two kept of four: a pair is empty one time in six
  s24.is_24 = true;
  unsigned const cs = policy::tc_candidates(t, s24);
  CHECK((cs & bit(tc_path::sparse24)) != 0);
  CHECK((cs & bit(tc_path::cusparselt)) != 0);
  CHECK((cu & bit(tc_path::cusparselt)) == 0);  // not 2:4
  CHECK(policy::tc_choose(t, s24, 8, cs).path == tc_path::sparse24);
  // At 2048 rows cuSPARSELt's 2:4 matmul beats dense cuBLAS (measured 1.38-1.48x on these shapes);
  // without it, cuBLAS (sdnn's mma.sp kernel runs at half of cuBLAS there).
  CHECK(policy::tc_choose(t, s24, 2048, cs).path == tc_path::cusparselt);
  CHECK(policy::tc_choose(t, s24, 2048, cs & ~bit(tc_path::cusparselt)).path == tc_path::cublas_dense);
  // A build with the wgmma.sp tiles (90a) has its own sparse24 row on sm_90: at 128 rows its 2:4
  // kernel ran 1.27x cuBLAS here, the mma.sp build's 0.8x; other GPUs keep the common table.
  auto const t90a = policy::tc_auto_tuning_for(arch{9, 0}, true);
  auto const t90 = policy::tc_auto_tuning_for(arch{9, 0}, false);
  unsigned const no_lt = cs & ~bit(tc_path::cusparselt);
  CHECK(policy::tc_choose(t90a, s24, 128, no_lt).path == tc_path::sparse24);
  CHECK(policy::tc_choose(t90, s24, 128, no_lt).path == tc_path::cublas_dense);
  CHECK(t90a.paths[std::size_t(tc_path::sparse24)].rate[3] == policy::tc_sparse24_rates_sm90a.rate[3]);
  // 4096 x 4096 2:4 at 32 rows (the grid run behind the 90a row: the 2:4 kernel 17.5 us, the bitmap
  // tiles 19.1, cuBLAS 21.6): the 2:4 kernel, no longer a modelled tie with the bitmap tiles.
  policy::weight_structure sq{4096, 4096, 4096ll * 4096 / 2, 64 * 64, 64 * 64, 128 * 128, 128 * 128, true,
                              6990860};
  CHECK(policy::tc_choose(t90a, sq, 32, policy::tc_candidates(t90a, sq) & ~bit(tc_path::cusparselt)).path ==
        tc_path::sparse24);
  CHECK(t90a.paths[std::size_t(tc_path::cublas_dense)].rate[3] == t90.paths[std::size_t(tc_path::cublas_dense)].rate[3]);
  CHECK(policy::tc_auto_tuning_for(arch{10, 0}, true).paths[std::size_t(tc_path::sparse24)].rate[3] ==
        t90.paths[std::size_t(tc_path::sparse24)].rate[3]);
  // The reason names the choice and every candidate's estimate.
  auto const c = policy::tc_choose(t, blocks, 32, cb);
  CHECK(sdnn_test::has(c.reason, "N = 32: tc_block32"));
  CHECK(sdnn_test::has(c.reason, "cublas_dense"));
  // The caller's mask: only cuBLAS.
  CHECK(policy::tc_candidates(t, blocks, bit(tc_path::cublas_dense)) == bit(tc_path::cublas_dense));
  CHECK(policy::tc_candidates(t, dense, bit(tc_path::sparse24)) == 0u);
  // run()'s allocation-free pick agrees with the described choice.
  for (auto const& w : {dense, blocks, un, s24})
    for (std::int64_t n : {1, 5, 8, 20, 32, 128, 300, 512, 2048, 5000}) {
      unsigned const c = policy::tc_candidates(t, w);
      CHECK(policy::tc_pick(t, w, n, c) == policy::tc_choose(t, w, n, c).path);
    }
  // Estimates grow with N for every path (the fitted launch terms may dip: tc_bitmap measured 8 %
  // faster at N = 8 than at N = 1 on most shapes).
  for (int p = 0; p < policy::tc_path_count; ++p) {
    double prev = 0;
    for (std::int64_t n : {1, 8, 32, 100, 128, 512, 2048, 4096}) {
      double const e = policy::tc_estimate_us(t, tc_path(p), blocks, n);
      CHECK(e >= 0.9 * prev);
      prev = e;
    }
  }
}

TEST_CASE("tc_auto: the bitmap tiles' waves and csr_gather's second count", "[tc_auto]") {
  // Up to 8 rows the bitmap kernel runs two 16-row panels an SM: 11008 rows are 688 panels, 3 waves
  // of 264 on 132 SMs; 4096 rows 256 panels, one wave; 8448 rows exactly two.
  CHECK(policy::tc_bitmap_wave(11008, 1, 132) == Approx(792.0 / 688.0));
  CHECK(policy::tc_bitmap_wave(11008, 8, 132) == Approx(792.0 / 688.0));
  CHECK(policy::tc_bitmap_wave(4096, 1, 132) == Approx(264.0 / 256.0));
  CHECK(policy::tc_bitmap_wave(8448, 1, 132) == 1.0);
  CHECK(policy::tc_bitmap_wave(11008, 9, 132) == 1.0);  // beyond 8 rows: no rounding
  CHECK(policy::tc_bitmap_wave(0, 1, 132) == 1.0);
  auto const t = policy::tc_auto_tuning_for(arch{9, 0});
  CHECK(t.sms == 132);
  policy::weight_structure w{4096, 11008, 4096ll * 11008 / 10, 64 * 172, 64 * 172, 128 * 344, 128 * 344, false,
                             4096ll * 5504 / 5};
  double const tiles = double(w.tiles16()) * 1e-3;
  CHECK(policy::tc_path_units(t, tc_path::tc_bitmap, w, 1) == Approx(tiles * 264.0 / 256.0));
  CHECK(policy::tc_path_units(t, tc_path::tc_bitmap, w, 32) == Approx(tiles));
  CHECK(policy::tc_path_units2(t, tc_path::csr_gather, w) == Approx(11.008));  // K / 1e3
  CHECK(policy::tc_path_units2(t, tc_path::tc_bitmap, w) == Approx(double(w.pairs) * 1e-6));
  // The direct block kernel: a thread block a block row, three an SM (396 slots on 132 SMs). 4096
  // rows are 128 block rows, each walked by one thread block: its blocks / 128; 11008 rows are 344
  // block rows, 20000 rows 625, more than the slots: blocks / 396.
  CHECK(policy::tc_path_units2(t, tc_path::tc_block32, w) == Approx(double(w.blocks32) / 128.0));
  auto tall = w;
  tall.m = 20000;
  CHECK(policy::tc_block32_chain(tall, 132) == Approx(double(tall.blocks32) / 396.0));
  tall.m = 11008;
  CHECK(policy::tc_block32_chain(tall, 132) == Approx(double(tall.blocks32) / 344.0));
  CHECK(policy::tc_path_units2(t, tc_path::cublas_dense, w) == 0.0);
}

TEST_CASE("tc_auto: the host reference and its shape checks", "[tc_auto]") {
  dense_matrix<bf16> w(3, 5), x(2, 5);
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 5; ++j) w(i, j) = bf16(float(i - j) * 0.5f);
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 5; ++j) x(i, j) = bf16(float(i + j));
  dense_matrix<float> y(2, 3);
  ops::tc_auto_linear(host_exec{}, std::as_const(x).view(), std::as_const(w).view(), y.view());
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j) {
      float s = 0;
      for (std::int64_t q = 0; q < 5; ++q) s += float(x(i, q)) * float(w(j, q));
      CHECK(y(i, j) == s);
    }
  dense_matrix<float> bad(2, 4);
  CHECK(sdnn_test::has(sdnn_test::error_text([&] {
                         ops::tc_auto_linear(host_exec{}, std::as_const(x).view(), std::as_const(w).view(), bad.view());
                       }),
                       "tc_auto_linear"));
}

TEST_CASE("tc_linear layer: host forward is the reference; bias and shape checks", "[tc_auto]") {
  dense_matrix<fp16> w(4, 6), x(3, 6);
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 6; ++j) w(i, j) = fp16(float((i * 7 + j) % 5) - 2.f);
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 6; ++j) x(i, j) = fp16(0.25f * float(i - j));
  std::vector<float> bias{0.5f, -1.f, 2.f, 0.f};
  layers::tc_linear<fp16> l(std::move(w), epilogue_relu(bias));
  CHECK(l.name() == "tc_linear<fp16>");
  CHECK(l.out_features(6) == 4);
  dense_matrix<fp16> y(3, 4);
  l.forward(host_exec{}, std::as_const(x).view(), y.view());
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j) {
      float s = 0;
      for (std::int64_t q = 0; q < 6; ++q) s += float(x(i, q)) * float(l.weights()(j, q));
      s += bias[std::size_t(j)];
      CHECK(float(y(i, j)) == float(fp16(s > 0 ? s : 0.f)));
    }
  CHECK(sdnn_test::has(sdnn_test::error_text([&] { l.out_features(5); }), "expected 6 input features"));
  std::vector<float> short_bias(2);
  CHECK(sdnn_test::has(sdnn_test::error_text([&] {
                         layers::tc_linear<fp16> b(dense_matrix<fp16>(4, 6), epilogue_relu(short_bias));
                       }),
                       "the bias has 2 values"));
  float raw[4] = {};
  CHECK(sdnn_test::has(sdnn_test::error_text([&] {
                         layers::tc_linear<fp16> b(dense_matrix<fp16>(4, 6), epilogue_relu<float>(raw));
                       }),
                       "bare pointer"));
}

TEST_CASE("tc_auto: tune() results saved and loaded as text; malformed input refused whole", "[tc_auto]") {
  ops::tc_tuning_clear();
  std::string const text =
      "sdnn-tc-auto-tuning 1\n"
      "NVIDIA H100 80GB HBM3\t11008\t4096\t4506922\t11008\t44032\t0\t2\t1\tcusparse_csr\n"
      "NVIDIA H100 80GB HBM3\t11008\t4096\t4506922\t11008\t44032\t0\t2\t8\ttc_tile_offsets\n"
      "\n"
      "NVIDIA H100 80GB HBM3\t4096\t4096\t8388608\t4096\t16384\t1\t4\t2048\tcublas_dense\n";
  std::istringstream in(text);
  CHECK(ops::tc_tuning_load(in) == 3);
  std::ostringstream out;
  CHECK(ops::tc_tuning_save(out) == 3);
  // Saved in key order: the 4096 x 4096 entry first; the round trip gives the same entries.
  std::string const saved = out.str();
  CHECK(saved.rfind("sdnn-tc-auto-tuning 1\nNVIDIA H100 80GB HBM3\t4096\t4096\t", 0) == 0);
  ops::tc_tuning_clear();
  std::istringstream again(saved);
  CHECK(ops::tc_tuning_load(again) == 3);
  std::ostringstream out2;
  ops::tc_tuning_save(out2);
  CHECK(out2.str() == saved);

  auto refused = [](std::string const& t) {
    std::istringstream s(t);
    return sdnn_test::error_text([&] { ops::tc_tuning_load(s); });
  };
  CHECK(sdnn_test::has(refused("sdnn-tc-auto-tuning 2\n"), "first line"));
  CHECK(sdnn_test::has(refused("sdnn-tc-auto-tuning 1\nGPU\t1\t2\t3\t4\t5\t0\t2\t8\tno_such_path\n"),
                       "line 2: unknown path 'no_such_path'"));
  CHECK(sdnn_test::has(refused("sdnn-tc-auto-tuning 1\nGPU\t1\t2\t3\t4\t5\t0\t2\t8\tsparse24\nGPU\t1\t2\t3\n"),
                       "line 3 is not"));
  CHECK(sdnn_test::has(refused("sdnn-tc-auto-tuning 1\nGPU\t1\t2\t3\t4\t5\t0\t3\t8\tsparse24\n"), "line 2 is not"));
  // Nothing of a refused input was kept.
  std::ostringstream out3;
  CHECK(ops::tc_tuning_save(out3) == 3);
  ops::tc_tuning_clear();
}
