// Mixed-precision training on the device (train/kernel/mixed_precision.cuh, train/op/mixed_mlp.cuh)
// against the host rules of train/reference/mixed_precision.hpp and the group-lasso reference of
// train/op/structured_sparsity.hpp, on seeded random inputs and edge cases; the whole network's
// float gradients against finite differences, its bf16 gradients against the float path, the
// block SDDMM against the dense product, bitwise determinism, the non-finite loss stop, loss-scale
// back-off and the argument checks.
//
// Bounds: the elementwise kernels (forward epilogue, activation backward, optimizer steps, the
// loss-scale update) are bitwise the host's (the same __host__ __device__ rules, no FMA
// contraction). The block SDDMM sums exact products of 16-bit values in float in the tensor
// cores' order: |dev - exact| <= B * 2^-22 * sum |products| is asserted. The group-lasso norm is
// a tree sum (not the host's serial one): relative 1e-5. bf16 against float gradients: the
// relative Frobenius error of each layer's weight gradient is below 5e-2 (bf16 keeps 8 bits;
// three products and roundings of activations and gradients separate the two).
#include "sdnn_gpu_test.cuh"
#include "sdnn_train_fixtures.hpp"

#include <sdnn/train/op/mixed_mlp.cuh>
#include <sdnn/train/op/structured_sparsity.hpp>
#include <sdnn/train/reference/mixed_precision.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace sdnn_train_mixed_test {
using namespace sdnn;
namespace ref = sdnn::train::reference;
using sdnn_test::float_options;
using sdnn_test::random_floats;
using sdnn_test::rounded;
using sdnn_test::same_bits;
using sdnn_test::throws_with;

namespace {

train::step_state state_on_host(train::step_state const* d, cuda_exec ex) {
  return sdnn_test::download(d, 1, ex)[0];
}

}  // namespace

TEST_CASE("mixed training: forward epilogue and activation backward are bitwise the host's", "[cuda][train][mixed]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard s;
  auto ex = s.exec();
  for (auto [B, N] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {7, 33}, {64, 130}, {0, 5}}) {
    auto p = random_floats(std::size_t(B * N), 11 + std::uint32_t(N), -2, 2);
    if (!p.empty()) p[0] = std::numeric_limits<float>::quiet_NaN();  // relu(NaN) = NaN
    auto bias = random_floats(std::size_t(N), 12);
    auto dp = sdnn_test::upload(p, ex);
    auto db = sdnn_test::upload(bias, ex);
    device_buffer<bf16> dy(std::size_t(B * N) + 1, ex);
    kernels::bias_act_forward<bf16>({B, N, N, dp.data()}, db.data(), true, dense_view<bf16>{B, N, N, dy.data()}, ex);
    std::vector<bf16> hy(std::size_t(B * N));
    ref::bias_act_forward<bf16>({B, N, N, p.data()}, bias.data(), true, dense_view<bf16>{B, N, N, hy.data()});
    auto got = sdnn_test::download(dy.data(), hy.size(), ex);
    for (std::size_t i = 0; i < hy.size(); ++i)  // a NaN is a NaN whatever its payload
      REQUIRE((same_bits(got[i], hy[i]) || (std::isnan(float(got[i])) && std::isnan(float(hy[i])))));

    // backward with the scale (the logits' layer) and without (a hidden layer with ReLU)
    auto g = random_floats(std::size_t(B * N), 13, -1, 1);
    auto dg = sdnn_test::upload(g, ex);
    float const scale = 1024.0f;
    auto dscale = sdnn_test::upload(std::vector<float>{scale}, ex);
    for (bool with_y : {false, true}) {
      device_buffer<bf16> ddp(std::size_t(B * N) + 1, ex);
      device_buffer<float> ddb(std::size_t(N), ex);
      kernels::act_backward<bf16, bf16>({B, N, N, dg.data()}, with_y ? dy.data() : nullptr, N,
                                        with_y ? nullptr : dscale.data(), dense_view<bf16>{B, N, N, ddp.data()},
                                        ddb.data(), ex);
      std::vector<bf16> hdp(std::size_t(B * N));
      std::vector<float> hdb(static_cast<std::size_t>(N));
      ref::act_backward<bf16, bf16>({B, N, N, g.data()}, with_y ? hy.data() : nullptr, N, with_y ? nullptr : &scale,
                                    dense_view<bf16>{B, N, N, hdp.data()}, hdb.data());
      auto gdp = sdnn_test::download(ddp.data(), hdp.size(), ex);
      auto gdb = sdnn_test::download(ddb.data(), hdb.size(), ex);
      for (std::size_t i = 0; i < hdp.size(); ++i) REQUIRE(same_bits(gdp[i], hdp[i]));
      for (std::size_t i = 0; i < hdb.size(); ++i) REQUIRE(same_bits(gdb[i], hdb[i]));
    }
  }
}

TEMPLATE_TEST_CASE("mixed training: the block SDDMM weight gradient is the exact product within float accumulation",
                   "[cuda][train][mixed]", bf16, fp16) {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard s;
  auto ex = s.exec();
  // out x in = 80 x 112: the last block row and column are half blocks (16 of 32)
  std::int64_t const B = 48, out = 80, in = 112;
  std::int32_t const bcols = 4;
  auto x = rounded<TestType>(random_floats(std::size_t(B * in), 21));
  auto dp = rounded<TestType>(random_floats(std::size_t(B * out), 22));
  std::vector<std::int32_t> blocks{0, 3, 5, 6, 11};  // (0,0) (0,3) (1,1) (1,2) (2,3): edge blocks included
  auto dx = sdnn_test::upload(x, ex);
  auto ddp = sdnn_test::upload(dp, ex);
  auto dblocks = sdnn_test::upload(blocks, ex);
  std::vector<float> sentinel(std::size_t(out * in), -7.0f);
  auto dw = sdnn_test::upload(sentinel, ex);
  kernels::block_sddmm<TestType>({B, in, in, dx.data()}, {B, out, out, ddp.data()}, dblocks.data(),
                                 std::int32_t(blocks.size()), bcols, dw.data(), in, out, in, ex);
  auto got = sdnn_test::download(dw.data(), sentinel.size(), ex);
  dense_matrix<double> want(out, in);
  for (std::int64_t i = 0; i < out; ++i)
    for (std::int64_t j = 0; j < in; ++j) want(i, j) = -7.0;
  ref::block_weight_grad<TestType>({B, in, in, x.data()}, {B, out, out, dp.data()}, blocks, 32, 32, want.view());
  std::int64_t touched = 0;
  for (std::int64_t i = 0; i < out; ++i)
    for (std::int64_t j = 0; j < in; ++j) {
      double mag = 0;
      for (std::int64_t r = 0; r < B; ++r)
        mag += std::fabs(double(float(dp[std::size_t(r * out + i)])) * double(float(x[std::size_t(r * in + j)])));
      double const g = got[std::size_t(i * in + j)];
      if (want(i, j) == -7.0) {
        REQUIRE(g == -7.0);  // outside the kept blocks: untouched
        continue;
      }
      ++touched;
      REQUIRE(std::fabs(g - want(i, j)) <= double(B) * std::ldexp(1.0, -22) * mag);
    }
  CHECK(touched == 32 * 32 + 32 * 16 + 32 * 32 + 32 * 32 + 16 * 16);
}

TEST_CASE("mixed training: SGD and Adam steps, masks, skipped steps and the loss scale are bitwise the host's",
          "[cuda][train][mixed]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard s;
  auto ex = s.exec();
  std::size_t const n = 1000;
  for (auto kind : {train::optimizer_kind::sgd, train::optimizer_kind::adam}) {
    train::optimizer_rule rule;
    rule.kind = kind;
    rule.lr = 0.01f;
    rule.weight_decay = 1e-3f;
    train::loss_scale_rule ls;
    ls.initial = 256.0f;
    ls.interval = 2;
    auto w = random_floats(n, 31), g = random_floats(n, 32, -300, 300);
    std::vector<std::uint8_t> mask(n);
    for (std::size_t i = 0; i < n; ++i) mask[i] = (i % 7) != 3;
    std::vector<float> m(n, 0.0f), v(n, 0.0f);
    auto dw = sdnn_test::upload(w, ex), dm = sdnn_test::upload(m, ex), dv = sdnn_test::upload(v, ex);
    auto dmask = sdnn_test::upload(mask, ex);
    device_buffer<bf16> low(n, ex);
    train::step_state hs = train::initial_state(ls);
    auto dst = sdnn_test::upload(std::vector<train::step_state>{hs}, ex);
    for (int step = 0; step < 5; ++step) {
      auto gs = g;
      if (step == 2) gs[17] = std::numeric_limits<float>::infinity();  // a skipped step
      auto dg = sdnn_test::upload(gs, ex);
      kernels::unscale_check(dg.data(), std::int64_t(n), dst.data(), ex);
      kernels::optimizer_step<bf16>(dw.data(), dg.data(), dm.data(), dv.data(), dmask.data(), low.data(),
                                    std::int64_t(n), rule, dst.data(), ex);
      kernels::finish_step(dst.data(), ls, rule, ex);
      // host
      bool bad = false;
      for (auto& x : gs) {
        x = train::mul_rn(x, hs.inv_scale);
        if (!std::isfinite(x)) bad = true;
      }
      hs.found_inf = bad;
      if (!bad) {
        auto const bc = train::adam_bias_correction(rule, hs);
        for (std::size_t i = 0; i < n; ++i) train::optimizer_update(rule, bc, mask[i] != 0, gs[i], w[i], m[i], v[i]);
      }
      train::finish_step(hs, ls, rule);
      auto const ds = state_on_host(dst.data(), ex);
      REQUIRE(same_bits(ds.scale, hs.scale));
      REQUIRE(ds.step == hs.step);
      REQUIRE(ds.skipped == hs.skipped);
      REQUIRE(ds.iteration == step + 1);
      auto gw = sdnn_test::download(dw.data(), n, ex);
      auto gl = sdnn_test::download(low.data(), n, ex);
      for (std::size_t i = 0; i < n; ++i) {
        REQUIRE(same_bits(gw[i], w[i]));
        if (!bad) REQUIRE(same_bits(gl[i], bf16(w[i])));
        if (!mask[i]) REQUIRE(gw[i] == 0.0f);
      }
    }
    auto const ds = state_on_host(dst.data(), ex);
    CHECK(ds.skipped == 1);
    CHECK(ds.step == 4);
    CHECK(ds.scale == 512.0f);  // x2 after steps 0 and 1, /2 at the skipped step 2, x2 after 3 and 4
  }
}

TEST_CASE("mixed training: the group-lasso gradient matches the host reference", "[cuda][train][mixed]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard s;
  auto ex = s.exec();
  std::int64_t const M = 70, K = 100;
  auto w = random_floats(std::size_t(M * K), 41);
  for (std::int64_t i = 0; i < 32; ++i)
    for (std::int64_t j = 32; j < 64; ++j) w[std::size_t(i * K + j)] = 0.0f;  // a zero block: no gradient
  auto g0 = random_floats(std::size_t(M * K), 42);
  auto groups = train::block_groups(M, K, 32, 32);
  float const lambda = 0.03f;
  auto dw = sdnn_test::upload(w, ex), dg = sdnn_test::upload(g0, ex);
  auto dptr = sdnn_test::upload(groups.ptr, ex), didx = sdnn_test::upload(groups.idx, ex);
  auto dst = sdnn_test::upload(std::vector<train::step_state>{train::step_state{}}, ex);
  kernels::group_lasso_grad(dw.data(), dptr.data(), didx.data(), groups.count(), lambda, dg.data(), dst.data(), ex);
  auto got = sdnn_test::download(dg.data(), g0.size(), ex);
  auto want = g0;
  train::group_lasso_add_grad(dense_view<float const>{M, K, K, w.data()}, groups, lambda,
                              dense_view<float>{M, K, K, want.data()});
  for (std::size_t i = 0; i < want.size(); ++i) REQUIRE(std::fabs(got[i] - want[i]) <= 1e-5f * (std::fabs(want[i]) + lambda));
  for (std::int64_t i = 0; i < 32; ++i)
    for (std::int64_t j = 32; j < 64; ++j) REQUIRE(same_bits(got[std::size_t(i * K + j)], g0[std::size_t(i * K + j)]));
}

namespace {

// A small seeded classification problem: 10 Gaussian clusters in `in` dimensions.
struct toy_data {
  std::int64_t n, in;
  std::vector<float> x;
  std::vector<std::int32_t> y;
};
toy_data make_toy(std::int64_t n, std::int64_t in, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> centers(std::size_t(10 * in));
  for (auto& c : centers) c = nd(g);
  toy_data d{n, in, std::vector<float>(std::size_t(n * in)), std::vector<std::int32_t>(std::size_t(n))};
  for (std::int64_t r = 0; r < n; ++r) {
    d.y[std::size_t(r)] = std::int32_t(r % 10);
    for (std::int64_t j = 0; j < in; ++j)
      d.x[std::size_t(r * in + j)] = centers[std::size_t(d.y[std::size_t(r)] * in + j)] + 0.7f * nd(g);
  }
  return d;
}

}  // namespace

TEST_CASE("mixed training: float gradients of the whole network agree with finite differences",
          "[cuda][train][mixed]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard s;
  auto ex = s.exec();
  auto d = make_toy(8, 24, 51);
  auto dx = sdnn_test::upload(d.x, ex);
  auto dy = sdnn_test::upload(d.y, ex);
  train::mixed_mlp<float> m({24, 20, 16, 10}, 5, float_options(8), ex);
  dense_view<float const> x{8, 24, 24, dx.data()};
  m.compute_gradients(ex, x, dy.data());
  std::mt19937 g(52);
  int checked = 0;
  for (std::size_t l = 0; l < m.layer_count(); ++l) {
    auto w = m.layer(l).weights(ex);
    auto b = m.layer(l).bias(ex);
    auto gw = m.layer(l).weight_gradient(ex);
    for (int t = 0; t < 12; ++t) {
      std::int64_t const i = std::int64_t(g() % std::uint32_t(w.rows())), j = std::int64_t(g() % std::uint32_t(w.cols()));
      float const h = 1e-3f, w0 = w(i, j);
      w(i, j) = w0 + h;
      m.layer(l).set_weights(ex, w.view(), b);
      double const lp = m.loss(ex, x, dy.data());
      w(i, j) = w0 - h;
      m.layer(l).set_weights(ex, w.view(), b);
      double const lm = m.loss(ex, x, dy.data());
      w(i, j) = w0;
      m.layer(l).set_weights(ex, w.view(), b);
      double const fd = (lp - lm) / (double(w0 + h) - double(w0 - h));
      INFO("layer " << l << " (" << i << ", " << j << "): fd " << fd << ", gradient " << gw(i, j));
      REQUIRE(std::fabs(fd - gw(i, j)) <= 2e-3 + 5e-2 * std::fabs(gw(i, j)));
      ++checked;
    }
  }
  CHECK(checked == 36);
}

TEST_CASE("mixed training: bf16 gradients follow the float path; the block mask's SDDMM equals the dense product",
          "[cuda][train][mixed]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard s;
  auto ex = s.exec();
  std::int64_t const B = 64, in = 96, h = 64;
  auto d = make_toy(B, in, 61);
  auto dx32 = sdnn_test::upload(d.x, ex);
  auto dx16 = sdnn_test::upload(rounded<bf16>(d.x), ex);
  // the float model sees the same bf16-rounded inputs and weights
  std::vector<float> xr(d.x.size());
  for (std::size_t i = 0; i < xr.size(); ++i) xr[i] = float(bf16(d.x[i]));
  auto dxr = sdnn_test::upload(xr, ex);
  auto dy = sdnn_test::upload(d.y, ex);
  train::mixed_options o16;
  o16.max_batch = B;
  o16.loss_scale.initial = 1024.0f;
  train::mixed_mlp<bf16> m16({in, h, h, 10}, 7, o16, ex);
  train::mixed_mlp<float> m32({in, h, h, 10}, 7, float_options(B), ex);
  sdnn_test::share_bf16_weights(m16, m32, ex);
  m16.compute_gradients(ex, dense_view<bf16 const>{B, in, in, dx16.data()}, dy.data());
  m32.compute_gradients(ex, dense_view<float const>{B, in, in, dxr.data()}, dy.data());
  for (std::size_t l = 0; l < 3; ++l) {
    double const e = sdnn_test::relative_frobenius(m16.layer(l).weight_gradient(ex), m32.layer(l).weight_gradient(ex));
    INFO("layer " << l << ": relative error " << e);
    REQUIRE(e < 5e-2);
  }

  // A 32 x 32 block mask on the hidden layers: the SDDMM's gradient on kept blocks against the
  // dense GemmEx's on the same model (without a block shape), and zero elsewhere.
  auto dense_grads = [&](bool blocks) {
    train::mixed_mlp<bf16> m({in, h, h, 10}, 7, o16, ex);
    std::vector<std::vector<std::uint8_t>> masks;
    for (std::size_t l = 0; l < 2; ++l) {
      auto const& L = m.layer(l);
      std::vector<std::uint8_t> mask(std::size_t(L.out_features() * L.in_features()));
      for (std::int64_t i = 0; i < L.out_features(); ++i)
        for (std::int64_t j = 0; j < L.in_features(); ++j)
          mask[std::size_t(i * L.in_features() + j)] = ((i / 32) + (j / 32)) % 2 == 0;
      m.layer(l).set_mask(ex, mask, blocks ? 32 : 0, blocks ? 32 : 0);
      masks.push_back(mask);
      CHECK((m.layer(l).sddmm_blocks() > 0) == blocks);
    }
    m.compute_gradients(ex, dense_view<bf16 const>{B, in, in, dx16.data()}, dy.data());
    std::vector<dense_matrix<float>> g;
    for (std::size_t l = 0; l < 2; ++l) {
      g.push_back(m.layer(l).weight_gradient(ex));
      for (std::int64_t i = 0; i < g.back().rows(); ++i)
        for (std::int64_t j = 0; j < g.back().cols(); ++j)
          if (!masks[l][std::size_t(i * g.back().cols() + j)]) g.back()(i, j) = 0.0f;  // the step ignores them
    }
    return g;
  };
  auto gs = dense_grads(true), gd = dense_grads(false);
  for (std::size_t l = 0; l < 2; ++l)
    for (std::int64_t i = 0; i < gs[l].rows(); ++i)
      for (std::int64_t j = 0; j < gs[l].cols(); ++j)
        REQUIRE(std::fabs(gs[l](i, j) - gd[l](i, j)) <= 1e-5f * (1.0f + std::fabs(gd[l](i, j))));
}

TEST_CASE("mixed training: a seeded run gives the same bits, learns, and block masks hold", "[cuda][train][mixed]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard s;
  auto ex = s.exec();
  std::int64_t const n = 512, in = 64, B = 32;
  auto d = make_toy(n, in, 71);
  auto dx = sdnn_test::upload(rounded<bf16>(d.x), ex);
  auto dy = sdnn_test::upload(d.y, ex);
  auto run = [&](bool masked) {
    train::mixed_options o;
    o.max_batch = 128;
    o.optimizer.lr = 3e-3f;
    train::mixed_mlp<bf16> m({in, 64, 64, 10}, 9, o, ex);
    std::vector<std::uint8_t> mask;
    if (masked) {
      auto w = m.layer(1).weights(ex);
      mask = train::group_mask(w.view(), train::block_groups(64, 64, 32, 32), 0.5);
      m.layer(1).set_mask(ex, mask, 32, 32);
      m.layer(0).set_group_lasso(ex, train::block_groups(64, in, 32, 32), 1e-3f);
    }
    for (int epoch = 0; epoch < 6; ++epoch)
      for (std::int64_t r = 0; r + B <= n; r += B)
        m.train_step(ex, dense_view<bf16 const>{B, in, in, dx.data() + r * in}, dy.data() + r);
    auto st = m.take_stats(ex);
    CHECK(st.step == 6 * (n / B));
    double const acc = double(m.count_correct(ex, dense_view<bf16 const>{n, in, in, dx.data()}, dy.data())) / double(n);
    CHECK(acc > 0.9);
    std::vector<dense_matrix<float>> w;
    for (std::size_t l = 0; l < 3; ++l) w.push_back(m.layer(l).weights(ex));
    if (masked)
      for (std::size_t e = 0; e < mask.size(); ++e)
        if (!mask[e]) REQUIRE(w[1].data()[e] == 0.0f);
    return w;
  };
  for (bool masked : {false, true}) {
    auto a = run(masked), b = run(masked);
    for (std::size_t l = 0; l < 3; ++l)
      REQUIRE(std::memcmp(a[l].data(), b[l].data(), std::size_t(a[l].rows() * a[l].cols()) * sizeof(float)) == 0);
  }
}

TEST_CASE("mixed training: a NaN loss stops with the step named; fp16 overflow backs the loss scale off",
          "[cuda][train][mixed]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard s;
  auto ex = s.exec();
  auto d = make_toy(64, 32, 81);
  auto dx = sdnn_test::upload(rounded<fp16>(d.x), ex);
  auto dy = sdnn_test::upload(d.y, ex);
  dense_view<fp16 const> x{64, 32, 32, dx.data()};
  {
    train::mixed_options o;
    o.max_batch = 64;
    train::mixed_mlp<fp16> m({32, 32, 10}, 3, o, ex);
    m.train_step(ex, x, dy.data());
    m.train_step(ex, x, dy.data());
    auto w = m.layer(0).weights(ex);
    w(3, 4) = std::numeric_limits<float>::quiet_NaN();
    m.layer(0).set_weights(ex, w.view(), {});
    m.train_step(ex, x, dy.data());  // iteration 2: NaN logits
    m.train_step(ex, x, dy.data());
    try {
      m.take_stats(ex);
      FAIL("no error for a NaN loss");
    } catch (train::nonfinite_loss const& e) {
      CHECK(e.step() == 2);
      CHECK(std::string(e.what()).find("step 2") != std::string::npos);
    }
  }
  {
    train::mixed_options o;
    o.max_batch = 64;
    o.loss_scale.initial = 1e30f;  // overflows fp16 products: steps are skipped and the scale backs off
    train::mixed_mlp<fp16> m({32, 32, 10}, 3, o, ex);
    auto const w0 = m.layer(0).weights(ex);
    m.train_step(ex, x, dy.data());
    auto const w1 = m.layer(0).weights(ex);
    REQUIRE(std::memcmp(w0.data(), w1.data(), std::size_t(w0.rows() * w0.cols()) * sizeof(float)) == 0);
    for (int i = 0; i < 200; ++i) m.train_step(ex, x, dy.data());
    auto st = m.take_stats(ex);
    CHECK(st.skipped >= 1);
    CHECK(st.step >= 1);
    CHECK(st.loss_scale < 1e30f);
  }
}

TEST_CASE("mixed training: bad arguments are refused before training", "[cuda][train][mixed]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard s;
  auto ex = s.exec();
  train::mixed_options o;
  o.optimizer.lr = 0.0f;
  REQUIRE(throws_with([&] { train::mixed_mlp<bf16>({16, 16, 10}, 1, o, ex); }, "learning rate"));
  o.optimizer.lr = -1.0f;
  REQUIRE_THROWS_AS(train::mixed_mlp<bf16>({16, 16, 10}, 1, o, ex), sdnn::error);
  o.optimizer.lr = 1e-3f;
  o.max_batch = 8;
  train::mixed_mlp<bf16> m({16, 16, 10}, 1, o, ex);
  REQUIRE(throws_with([&] { m.layer(0).set_group_lasso(ex, train::block_groups(16, 16, 8, 8), -1.0f); }, "penalty"));
  REQUIRE_THROWS_AS(m.layer(0).set_mask(ex, std::vector<std::uint8_t>(5, 1)), sdnn::error);
  device_buffer<bf16> x(16 * 16, ex);
  device_buffer<std::int32_t> y(16, ex);
  REQUIRE(throws_with([&] { m.train_step(ex, dense_view<bf16 const>{16, 16, 16, x.data()}, y.data()); }, "max_batch"));
  REQUIRE_THROWS_AS(m.train_step(ex, dense_view<bf16 const>{4, 15, 15, x.data()}, y.data()), sdnn::dimension_mismatch);
  sdnn_test::stream_guard other;  // the buffers are ordered on the model's stream: another is refused
  REQUIRE(throws_with([&] { m.train_step(other.exec(), dense_view<bf16 const>{4, 16, 16, x.data()}, y.data()); },
                      "another stream"));
  REQUIRE(throws_with([&] { train::check_options({1e-3, 0.0, 1.0}); }, "[0, 1)"));
}

}  // namespace sdnn_train_mixed_test
