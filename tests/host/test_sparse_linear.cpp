// Host backend of layers::sparse_linear, sequential and pipeline::challenge_network against
// sdnn::reference (plain loops) and the official Graph Challenge truth.
#include "sdnn_catch.hpp"

#include <sdnn/challenge/radixnet.hpp>
#include <sdnn/challenge/tsv.hpp>
#include <sdnn/linear/sparse_linear.hpp>
#include <sdnn/challenge/pipeline.hpp>
#include <sdnn/pipeline/sequential.hpp>
#include <sdnn/challenge/reference.hpp>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace sdnn;

namespace {
// rows x cols CSR with small-integer values (1..3), about `density` of the entries set.
csr_matrix<float, std::int32_t> random_csr(std::int32_t rows, std::int32_t cols, double density, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::int32_t> rp{0}, ci;
  std::vector<float> v;
  for (std::int32_t i = 0; i < rows; ++i) {
    for (std::int32_t j = 0; j < cols; ++j)
      if (u(g) < density) {
        ci.push_back(j);
        v.push_back(static_cast<float>(1 + g() % 3));
      }
    rp.push_back(static_cast<std::int32_t>(ci.size()));
  }
  return make_csr<float, std::int32_t>(rows, cols, rp, ci, v);
}
dense_matrix<float> to_dense_host(csr_matrix<float, std::int32_t> const& a) {
  dense_matrix<float> d(a.rows(), a.cols());
  auto v = a.view();
  for (std::int32_t i = 0; i < v.rows; ++i)
    for (std::int32_t p = v.row_ptr[i]; p < v.row_ptr[i + 1]; ++p) d(i, v.col_idx[p]) = v.values[p];
  return d;
}
using layer_t = layers::sparse_linear<float>;
}  // namespace

TEST_CASE("sparse_linear host: a hand-computed layer with the challenge rule", "[sparse_linear]") {
  // W (3 x 2): W(0,0) = 1, W(1,0) = 2, W(2,1) = 4.  Y = [[1, 1, 0], [0, 0, 0], [0, 0, 10]]
  auto w = make_csr<float, std::int32_t>(3, 2, {0, 1, 2, 3}, {0, 0, 1}, {1.f, 2.f, 4.f});
  layer_t l(std::move(w), epilogue_capped_relu<float>(-1.f, 32.f));
  dense_matrix<float> y(3, 3), z(3, 2);
  y(0, 0) = 1;
  y(0, 1) = 1;
  y(2, 2) = 10;
  l.forward(host_exec{}, dense_view<float const>(y.view()), z.view());
  CHECK(z(0, 0) == 2.f);   // 1 + 2 - 1
  CHECK(z(0, 1) == 0.f);   // zero product: no bias
  CHECK(z(1, 0) == 0.f);   // dead row stays dead
  CHECK(z(2, 1) == 32.f);  // 40 - 1 capped
  CHECK(l.out_features(3) == 2);
  REQUIRE_THROWS_AS(l.out_features(4), sdnn::error);
  dense_matrix<float> bad(3, 3);
  REQUIRE_THROWS_AS(l.forward(host_exec{}, dense_view<float const>(y.view()), bad.view()), sdnn::error);
}

TEST_CASE("sparse_linear host: per-column bias applied on zeros when asked", "[sparse_linear]") {
  auto w = make_csr<float, std::int32_t>(2, 2, {0, 1, 1}, {1}, {3.f});
  float bias[2] = {5.f, -1.f};
  auto e = epilogue_relu<float>(bias, 2);  // bias_on_zero = true; the length travels with the pointer
  layer_t l(std::move(w), e);
  bias[0] = 99.f;  // the layer copied the bias
  dense_matrix<float> y(1, 2), z(1, 2);
  y(0, 0) = 2;
  l.forward(host_exec{}, dense_view<float const>(y.view()), z.view());
  CHECK(z(0, 0) == 5.f);
  CHECK(z(0, 1) == 5.f);  // 6 - 1
}

TEST_CASE("sparse_linear host and sequential match reference::challenge_layer on random data", "[sparse_linear]") {
  auto const seed = GENERATE(1u, 2u, 3u);
  std::int32_t const n = 97, batch = 41;
  auto y0 = random_csr(batch, n, 0.2, seed);
  std::vector<csr_matrix<float, std::int32_t>> ws;
  sequential<float> seq;
  for (int l = 0; l < 4; ++l) {
    ws.push_back(random_csr(n, n, 0.05, seed * 10 + l));
    seq.add(std::make_shared<layer_t>(random_csr(n, n, 0.05, seed * 10 + l), epilogue_capped_relu<float>(-2.f, 32.f)));
  }
  auto ref = to_dense_host(reference::challenge_infer(y0, ws, -2.f, 32.f));
  auto x = to_dense_host(y0);
  dense_matrix<float> out(batch, n);
  seq.forward(host_exec{}, dense_view<float const>(x.view()), out.view());
  REQUIRE(seq.out_features(n) == n);
  for (std::int64_t i = 0; i < batch; ++i)
    for (std::int64_t j = 0; j < n; ++j) REQUIRE(out(i, j) == ref(i, j));
}

TEST_CASE("challenge_network host: official 1024 x 120, first 1200 images, equals the official truth",
          "[sparse_linear][challenge]") {
  std::string const dir = sdnn_test::data_dir();
  auto images = io::read_challenge_images(dir + "/sparse-images-1024-first1200.tsv.gz", 1024, 1200);
  auto truth = io::read_categories(dir + "/neuron1024-l120-categories-first1200.tsv");
  std::vector<std::shared_ptr<layer_t>> layers;
  std::vector<csr_matrix<float, std::int32_t>> ws;
  for (int l = 0; l < 120; ++l) {
    ws.push_back(data::official_1024_layer(l));
    layers.push_back(std::make_shared<layer_t>(data::official_1024_layer(l), epilogue_capped_relu<float>(-0.3f)));
  }
  pipeline::challenge_network<> net(layers);
  REQUIRE(net.connections() == 120LL * 1024 * 32);
  auto res = net.run(host_exec{}, images.view(), true);
  CHECK(res.categories == truth);
  auto ref = reference::challenge_infer(images, ws, -0.3f);
  CHECK(reference::challenge_categories(ref) == truth);
  auto refd = to_dense_host(ref);
  for (std::int64_t i = 0; i < refd.rows(); ++i)
    for (std::int64_t j = 0; j < refd.cols(); ++j) REQUIRE(res.final(i, j) == refd(i, j));
}
