// Convolutional training on the device (train/kernel/conv_training.cuh, train/op/mixed_cnn.cuh)
// and the channel removal of conv/filter_removal.hpp: im2col against conv::im2col_nhwc, col2im
// and the pool backward against train/reference/conv_training.hpp, the chunked bias gradient
// against its reference, the network's float gradients against finite differences, its bf16
// gradients against the float path (with a channel-block mask's SDDMM against the dense
// product), bitwise determinism with masks that hold, the compacted network's logits against
// the full one's, and the argument checks.
//
// Bounds: im2col, col2im, the pool backward and the bias gradient are bitwise the host's (the
// same float additions in the same order). Finite differences: |fd - g| <= 2e-3 + 5e-2 |g| (as
// for the MLP). bf16 against float: relative Frobenius error of each weight gradient below
// 5e-2. The channel-block SDDMM against the dense product on the same bf16 data: 1e-5 relative
// (float accumulation of exact products in another order). The compacted network drops only
// products with an exact zero, so its logits match the full one's to 1e-5 relative (the GEMMs
// may sum in another order).
#include "sdnn_gpu_test.cuh"
#include "sdnn_train_fixtures.hpp"

#include <sdnn/conv/filter_removal.hpp>
#include <sdnn/conv/nhwc.hpp>
#include <sdnn/train/op/mixed_cnn.cuh>
#include <sdnn/train/op/structured_sparsity.hpp>
#include <sdnn/train/reference/conv_training.hpp>
#include <sdnn/train/reference/mixed_precision.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace sdnn_train_cnn_test {
using namespace sdnn;
namespace ref = sdnn::train::reference;
using sdnn_test::float_options;
using sdnn_test::random_floats;
using sdnn_test::rounded;
using sdnn_test::same_bits;
using sdnn_test::throws_with;

namespace {

// n H x W x 1 images whose class (of 4) is the quadrant holding a bright square, with noise.
struct toy {
  std::vector<float> x;
  std::vector<std::int32_t> y;
};
toy quadrants(std::int64_t n, int H, int W, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(0.0f, 0.3f);
  toy t;
  t.x.resize(std::size_t(n * H * W));
  t.y.resize(std::size_t(n));
  for (std::int64_t i = 0; i < n; ++i) {
    int const c = int(g() % 4u);
    t.y[std::size_t(i)] = c;
    for (int h = 0; h < H; ++h)
      for (int w = 0; w < W; ++w) {
        bool const lit = (h < H / 2) == (c < 2) && (w < W / 2) == (c % 2 == 0);
        t.x[std::size_t((i * H + h) * W + w)] = u(g) + (lit ? 0.7f : 0.0f);
      }
  }
  return t;
}

}  // namespace

TEST_CASE("cnn training: im2col, col2im and the pool backward are bitwise the host's", "[cuda][train][cnn]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard s;
  auto ex = s.exec();
  struct geo {
    int C, H, W, K, R, S, stride, pad, dil;
  };
  for (geo g : {geo{3, 7, 6, 4, 3, 3, 1, 1, 1}, geo{2, 9, 9, 5, 3, 3, 2, 1, 1}, geo{5, 8, 7, 3, 3, 2, 1, 2, 2},
                geo{1, 5, 5, 2, 1, 1, 1, 0, 1}, geo{4, 6, 6, 4, 5, 5, 1, 2, 1}}) {
    conv::conv_shape const sh = conv::conv_shape::conv2d(g.C, g.H, g.W, g.K, g.R, g.S, g.stride, g.pad, g.dil);
    std::int64_t const B = 3;
    INFO("C " << g.C << " H " << g.H << " W " << g.W << " R " << g.R << " S " << g.S << " stride " << g.stride
              << " pad " << g.pad << " dil " << g.dil);
    auto const x = rounded<bf16>(random_floats(std::size_t(B * sh.in_features()), 3));
    auto dx = sdnn_test::upload(x, ex);
    std::int64_t const rows = B * sh.OH() * sh.OW(), k = sh.filter_size();
    device_buffer<bf16> dcol(std::size_t(rows * k), ex);
    kernels::im2col_nhwc(dx.data(), sh, B, dcol.data(), ex);
    auto const want = conv::im2col_nhwc(sh, B, x.data());
    auto const got = sdnn_test::download(dcol.data(), dcol.size(), ex);
    for (std::int64_t i = 0; i < rows * k; ++i)
      REQUIRE(std::memcmp(&got[std::size_t(i)], &want.data()[i], sizeof(bf16)) == 0);

    auto const gcol = random_floats(std::size_t(rows * k), 5);
    auto dg = sdnn_test::upload(gcol, ex);
    device_buffer<float> dgx(std::size_t(B * sh.in_features()), ex);
    kernels::col2im_nhwc(dg.data(), sh, B, dgx.data(), ex);
    auto const gx = sdnn_test::download(dgx.data(), dgx.size(), ex);
    auto const rx = ref::col2im_nhwc(gcol, sh, B);
    for (std::size_t i = 0; i < gx.size(); ++i) REQUIRE(same_bits(gx[i], rx[i]));
  }
  // the pool's backward, with ties (values from a set of 3) and odd sides
  for (int H : {6, 7}) {
    int const W = H + 2, K = 5;
    std::int64_t const B = 2;
    std::mt19937 g(9);
    std::vector<bf16> y(std::size_t(B * H * W * K));
    for (auto& v : y) v = bf16(float(int(g() % 3u)) - 0.5f);
    auto const dout = random_floats(std::size_t(B * (H / 2) * (W / 2) * K), 11);
    auto dy = sdnn_test::upload(y, ex);
    auto dd = sdnn_test::upload(dout, ex);
    device_buffer<float> dgy(y.size(), ex);
    kernels::max_pool2x2_backward(dy.data(), dd.data(), B, H, W, K, dgy.data(), ex);
    auto const got = sdnn_test::download(dgy.data(), dgy.size(), ex);
    auto const want = ref::max_pool2x2_backward(y, dout, B, H, W, K);
    for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(same_bits(got[i], want[i]));
  }
}

TEST_CASE("cnn training: the bias gradient of a tall GEMM is summed in chunks, bitwise the host's",
          "[cuda][train][cnn]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard s;
  auto ex = s.exec();
  for (std::int64_t rows : {1, 255, 256, 257, 700, 2048}) {
    std::int64_t const N = 37;
    INFO("rows " << rows);
    auto const g = random_floats(std::size_t(rows * N), 21);
    auto const y = rounded<bf16>(random_floats(std::size_t(rows * N), 23));
    auto dg = sdnn_test::upload(g, ex);
    auto dy = sdnn_test::upload(y, ex);
    device_buffer<bf16> dp(std::size_t(rows * N), ex);
    device_buffer<float> db(std::size_t(N), ex);
    device_buffer<float> part(std::size_t(std::max<std::int64_t>(1, kernels::act_backward_scratch(rows, N))), ex);
    kernels::act_backward<bf16, bf16>({rows, N, N, dg.data()}, dy.data(), N, nullptr, dense_view<bf16>{rows, N, N, dp.data()},
                                      db.data(), ex, part.data());
    std::vector<bf16> hp(std::size_t(rows * N));
    std::vector<float> hb(static_cast<std::size_t>(N));
    ref::act_backward<bf16, bf16>({rows, N, N, g.data()}, y.data(), N, nullptr, dense_view<bf16>{rows, N, N, hp.data()},
                                  hb.data());
    auto const gb = sdnn_test::download(db.data(), db.size(), ex);
    auto const gp = sdnn_test::download(dp.data(), dp.size(), ex);
    for (std::size_t j = 0; j < hb.size(); ++j) REQUIRE(same_bits(gb[j], hb[j]));
    for (std::size_t i = 0; i < hp.size(); ++i) REQUIRE(std::memcmp(&gp[i], &hp[i], sizeof(bf16)) == 0);
  }
  // without the scratch, more than one chunk is refused
  device_buffer<float> dg(512, ex), db(1, ex);
  device_buffer<bf16> dp(512, ex);
  CHECK(throws_with(
      [&] {
        kernels::act_backward<bf16, bf16>({512, 1, 1, dg.data()}, static_cast<bf16 const*>(nullptr), 1, nullptr,
                                          dense_view<bf16>{512, 1, 1, dp.data()}, db.data(), ex);
      },
      "scratch"));
}

TEST_CASE("cnn training: float gradients of the whole network agree with finite differences", "[cuda][train][cnn]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard s;
  auto ex = s.exec();
  std::int64_t const B = 4;
  auto t = quadrants(B, 8, 8, 31);
  auto dx = sdnn_test::upload(t.x, ex);
  auto dy = sdnn_test::upload(t.y, ex);
  // a pooled layer, an unpooled one, and a 5x5 kernel with its own padding
  train::mixed_cnn<float> m(8, 8, 1, {{6, 3, 1, true}, {5, 3, 1, false}, {4, 5, 2, true}}, 4, 3, float_options(B), ex);
  dense_view<float const> x{B, 64, 64, dx.data()};
  m.compute_gradients(ex, x, dy.data());
  std::mt19937 g(32);
  int checked = 0;
  for (std::size_t l = 0; l < m.layer_count(); ++l) {
    auto w = m.layer(l).weights(ex);
    auto b = m.layer(l).bias(ex);
    auto gw = m.layer(l).weight_gradient(ex);
    auto gb = m.layer(l).bias_gradient(ex);
    for (int t2 = 0; t2 < 10; ++t2) {
      bool const bias = t2 >= 8;
      std::int64_t const i = std::int64_t(g() % std::uint32_t(w.rows())), j = std::int64_t(g() % std::uint32_t(w.cols()));
      float& p = bias ? b[std::size_t(i)] : w(i, j);
      float const p0 = p, an = bias ? gb[std::size_t(i)] : gw(i, j);
      // A central difference at h; where it misses, once more at h / 8: a ReLU or a pool that
      // switches within h of the point spoils the larger step, a wrong gradient spoils both.
      auto fd_at = [&](float h) {
        p = p0 + h;
        m.layer(l).set_weights(ex, w.view(), b);
        double const lp = m.loss(ex, x, dy.data());
        p = p0 - h;
        m.layer(l).set_weights(ex, w.view(), b);
        double const lm = m.loss(ex, x, dy.data());
        p = p0;
        m.layer(l).set_weights(ex, w.view(), b);
        return (lp - lm) / (double(p0 + h) - double(p0 - h));
      };
      auto close = [&](double fd) { return std::fabs(fd - an) <= 2e-3 + 5e-2 * std::fabs(an); };
      double fd = fd_at(1e-3f);
      if (!close(fd)) fd = fd_at(1.25e-4f);
      INFO("layer " << l << (bias ? " bias " : " weight ") << i << ", " << j << ": fd " << fd << ", gradient " << an);
      REQUIRE(close(fd));
      ++checked;
    }
  }
  CHECK(checked == 40);
}

TEST_CASE("cnn training: bf16 gradients follow the float path; a channel-block mask's SDDMM equals the dense product",
          "[cuda][train][cnn]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard s;
  auto ex = s.exec();
  std::int64_t const B = 16;
  auto t = quadrants(B, 8, 8, 41);
  std::vector<float> xr(t.x.size());
  for (std::size_t i = 0; i < xr.size(); ++i) xr[i] = float(bf16(t.x[i]));
  auto dx16 = sdnn_test::upload(rounded<bf16>(t.x), ex);
  auto dxr = sdnn_test::upload(xr, ex);
  auto dy = sdnn_test::upload(t.y, ex);
  std::vector<train::conv_layer_spec> const arch{{32, 3, 1, true}, {64, 3, 1, true}};
  train::mixed_options o16;
  o16.max_batch = B;
  o16.loss_scale.initial = 1024.0f;
  train::mixed_cnn<bf16> m16(8, 8, 1, arch, 4, 7, o16, ex);
  train::mixed_cnn<float> m32(8, 8, 1, arch, 4, 7, float_options(B), ex);
  sdnn_test::share_bf16_weights(m16, m32, ex);
  m16.compute_gradients(ex, dense_view<bf16 const>{B, 64, 64, dx16.data()}, dy.data());
  m32.compute_gradients(ex, dense_view<float const>{B, 64, 64, dxr.data()}, dy.data());
  for (std::size_t l = 0; l < m16.layer_count(); ++l) {
    double const e = sdnn_test::relative_frobenius(m16.layer(l).weight_gradient(ex), m32.layer(l).weight_gradient(ex));
    INFO("layer " << l << ": relative error " << e);
    REQUIRE(e < 5e-2);
  }

  // Half of the second layer's 32 x 32 channel blocks: its weight gradient through the SDDMM
  // (the channel blocks are 32 x 32 GEMM blocks at every tap) against the dense product.
  auto grads = [&](bool blocks) {
    train::mixed_cnn<bf16> m(8, 8, 1, arch, 4, 7, o16, ex);
    auto w = m.layer(1).weights(ex);
    auto const mask = train::group_mask(w.view(), train::conv_channel_block_groups(64, 3, 3, 32, 32, 32), 0.5);
    m.layer(1).set_mask(ex, mask, blocks ? 32 : 0, blocks ? 32 : 0);
    CHECK((m.layer(1).sddmm_blocks() == (blocks ? 9 : 0)));  // 1 of 2 channel blocks, 9 taps
    m.compute_gradients(ex, dense_view<bf16 const>{B, 64, 64, dx16.data()}, dy.data());
    auto gw = m.layer(1).weight_gradient(ex);
    for (std::int64_t e = 0; e < gw.rows() * gw.cols(); ++e)
      if (!mask[std::size_t(e)]) gw.data()[e] = 0.0f;  // the step ignores them
    return gw;
  };
  auto gs = grads(true), gd = grads(false);
  for (std::int64_t e = 0; e < gs.rows() * gs.cols(); ++e)
    REQUIRE(std::fabs(gs.data()[e] - gd.data()[e]) <= 1e-5f * (1.0f + std::fabs(gd.data()[e])));
}

TEST_CASE("cnn training: a seeded run gives the same bits, learns, and channel-block and filter masks hold",
          "[cuda][train][cnn]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard s;
  auto ex = s.exec();
  std::int64_t const n = 256, B = 32;
  auto t = quadrants(n, 8, 8, 51);
  auto dx = sdnn_test::upload(rounded<bf16>(t.x), ex);
  auto dy = sdnn_test::upload(t.y, ex);
  std::vector<train::conv_layer_spec> const arch{{32, 3, 1, true}, {64, 3, 1, true}};
  auto run = [&](int masked) {
    train::mixed_options o;
    o.max_batch = 64;
    o.optimizer.lr = 3e-3f;
    train::mixed_cnn<bf16> m(8, 8, 1, arch, 4, 9, o, ex);
    std::vector<std::uint8_t> mask, bias_mask;
    if (masked == 1) {  // channel blocks of the second layer, with group lasso on the first's filters
      auto w = m.layer(1).weights(ex);
      mask = train::group_mask(w.view(), train::conv_channel_block_groups(64, 3, 3, 32, 32, 32), 0.5);
      m.layer(1).set_mask(ex, mask, 32, 32);
      m.layer(0).set_group_lasso(ex, train::conv_filter_groups(32, 3, 3, 1), 1e-3f);
    }
    if (masked == 2) {  // the second block of 32 filters of the second layer, bias included
      mask.assign(std::size_t(64 * 288), 1);
      bias_mask.assign(64, 1);
      for (int k = 32; k < 64; ++k) {
        bias_mask[std::size_t(k)] = 0;
        for (int j = 0; j < 288; ++j) mask[std::size_t(k * 288 + j)] = 0;
      }
      m.layer(1).set_mask(ex, mask, 32, 32);
      m.layer(1).set_bias_mask(ex, bias_mask);
    }
    for (int epoch = 0; epoch < 8; ++epoch)
      for (std::int64_t r = 0; r + B <= n; r += B)
        m.train_step(ex, dense_view<bf16 const>{B, 64, 64, dx.data() + r * 64}, dy.data() + r);
    auto st = m.take_stats(ex);
    CHECK(st.step == 8 * (n / B));
    double const acc = double(m.count_correct(ex, dense_view<bf16 const>{n, 64, 64, dx.data()}, dy.data())) / double(n);
    INFO("masked " << masked << ": accuracy " << acc);
    CHECK(acc > 0.9);
    std::vector<dense_matrix<float>> w;
    for (std::size_t l = 0; l < m.layer_count(); ++l) w.push_back(m.layer(l).weights(ex));
    for (std::size_t e = 0; e < mask.size(); ++e)
      if (!mask[e]) REQUIRE(w[1].data()[e] == 0.0f);
    auto const b = m.layer(1).bias(ex);
    for (std::size_t k = 0; k < bias_mask.size(); ++k)
      if (!bias_mask[k]) REQUIRE(b[k] == 0.0f);
    w.push_back(dense_matrix<float>(1, 64));
    std::copy(b.begin(), b.end(), w.back().data());
    return w;
  };
  for (int masked : {0, 1, 2}) {
    auto a = run(masked), b = run(masked);
    for (std::size_t l = 0; l < a.size(); ++l)
      REQUIRE(std::memcmp(a[l].data(), b[l].data(), std::size_t(a[l].rows() * a[l].cols()) * sizeof(float)) == 0);
  }
}

TEST_CASE("cnn training: the network without its dead channels computes the same logits", "[cuda][train][cnn]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard s;
  auto ex = s.exec();
  std::int64_t const B = 8;
  auto t = quadrants(B, 12, 12, 61);
  auto dx = sdnn_test::upload(t.x, ex);
  std::vector<train::conv_layer_spec> const arch{{16, 3, 1, true}, {12, 3, 1, false}, {10, 3, 1, true}};
  train::mixed_cnn<float> full(12, 12, 1, arch, 4, 13, float_options(B), ex);
  std::vector<conv::gemm_conv_layer> layers;
  std::mt19937 g(62);
  for (std::size_t l = 0; l < full.conv_count(); ++l) {
    conv::gemm_conv_layer c;
    c.shape = full.shape(l);
    c.pool = full.pooled(l);
    auto w = full.layer(l).weights(ex);
    c.w.assign(w.data(), w.data() + w.rows() * w.cols());
    c.bias = random_floats(std::size_t(c.shape.K), 63 + std::uint32_t(l), -0.1f, 0.1f);
    std::int64_t const cols = c.shape.filter_size();
    for (int k = 0; k < c.shape.K; ++k) {
      int const kind = int(g() % 4u);
      if (kind == 0) {  // a dead filter: weights and bias zero
        for (std::int64_t j = 0; j < cols; ++j) c.w[std::size_t(k * cols + j)] = 0.0f;
        c.bias[std::size_t(k)] = 0.0f;
      }
      if (kind == 1) c.bias[std::size_t(k)] = 0.0f;  // zero bias, live weights: kept
    }
    layers.push_back(c);
  }
  // a channel of layer 1 that layer 2 never reads
  {
    auto& n = layers[2];
    for (int o = 0; o < n.shape.K; ++o)
      for (int tap = 0; tap < 9; ++tap) n.w[std::size_t(o * n.shape.filter_size() + tap * n.shape.C + 3)] = 0.0f;
  }
  auto cls = full.layer(3).weights(ex);
  std::vector<float> cw(cls.data(), cls.data() + cls.rows() * cls.cols());
  for (std::size_t l = 0; l < layers.size(); ++l)
    full.layer(l).set_weights(ex, dense_view<float const>{layers[l].shape.K, layers[l].shape.filter_size(),
                                                          layers[l].shape.filter_size(), layers[l].w.data()},
                              layers[l].bias);
  auto const c = conv::drop_dead_channels(layers, cw, 4);
  REQUIRE(c.convs.size() == 3);
  CHECK(c.kept[1].size() < std::size_t(12));
  CHECK(std::find(c.kept[1].begin(), c.kept[1].end(), 3) == c.kept[1].end());
  std::vector<train::conv_layer_spec> small;
  for (auto const& L : c.convs) small.push_back({L.shape.K, 3, 1, L.pool});
  train::mixed_cnn<float> compact(12, 12, 1, small, 4, 13, float_options(B), ex);
  for (std::size_t l = 0; l < c.convs.size(); ++l)
    compact.layer(l).set_weights(ex, dense_view<float const>{c.convs[l].shape.K, c.convs[l].shape.filter_size(),
                                                             c.convs[l].shape.filter_size(), c.convs[l].w.data()},
                                 c.convs[l].bias);
  REQUIRE(compact.flat_features() == c.flat);
  compact.layer(3).set_weights(ex, dense_view<float const>{4, c.flat, c.flat, c.classifier.data()},
                               full.layer(3).bias(ex));
  dense_view<float const> x{B, 144, 144, dx.data()};
  auto const a = sdnn_test::download(full.logits(ex, x).data, std::size_t(B * 4), ex);
  auto const b = sdnn_test::download(compact.logits(ex, x).data, std::size_t(B * 4), ex);
  for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(std::fabs(a[i] - b[i]) <= 1e-5f * (1.0f + std::fabs(a[i])));
}

TEST_CASE("cnn training: bad arguments are refused before training", "[cuda][train][cnn]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard s;
  auto ex = s.exec();
  auto o = float_options(4);
  CHECK(throws_with([&] { train::mixed_cnn<float>(4, 4, 1, {}, 4, 1, o, ex); }, "at least one convolution"));
  CHECK(throws_with([&] { train::mixed_cnn<float>(4, 4, 1, {{4, 3, 1, true}, {4, 3, 1, true}, {4, 3, 1, true}}, 4, 1, o, ex); },
                    "too small for a 2x2 pool"));
  auto bad = o;
  bad.optimizer.lr = 0.0f;
  CHECK(throws_with([&] { train::mixed_cnn<float>(8, 8, 1, {{4, 3, 1, true}}, 4, 1, bad, ex); }, "learning rate"));
  train::mixed_cnn<float> m(8, 8, 1, {{4, 3, 1, true}}, 4, 1, o, ex);
  device_buffer<float> x(std::size_t(8 * 64), ex);
  device_buffer<std::int32_t> y(8, ex);
  CHECK(throws_with([&] { m.train_step(ex, dense_view<float const>{8, 64, 64, x.data()}, y.data()); }, "max_batch"));
  CHECK(throws_with([&] { m.train_step(ex, dense_view<float const>{2, 63, 63, x.data()}, y.data()); }, "values per image"));
  CHECK(throws_with([&] { m.layer(0).set_bias_mask(ex, std::vector<std::uint8_t>(3, 1)); }, "set_bias_mask"));
  CHECK(throws_with([&] { conv::drop_dead_channels({}, {}, 4); }, "need a convolution layer"));
}

}  // namespace sdnn_train_cnn_test
