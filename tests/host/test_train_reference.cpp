// The host training primitives (train/reference/backward.hpp, train/op/backward.hpp): the backward pass of
// sparse_linear and its epilogue, softmax cross-entropy, SGD/momentum on a CSR pattern and
// magnitude pruning of a CSR, each against central finite differences (double) on small
// seeded random cases or hand-computed values, plus edge cases.
#include "sdnn_catch.hpp"

#include <sdnn/train/op/backward.hpp>
#include <sdnn/linear/reference/spmm.hpp>
#include <sdnn/train/reference/backward.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

using namespace sdnn;

namespace {
// A random in x out CSR in double: each entry stored with probability `density`; row
// `empty_row` (if >= 0) and column `empty_col` (if >= 0) hold nothing.
csr_matrix<double, int> random_csr(int in, int out, double density, std::uint32_t seed, int empty_row = -1,
                                   int empty_col = -1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0), val(-1.0, 1.0);
  std::vector<int> rp{0}, ci;
  std::vector<double> v;
  for (int i = 0; i < in; ++i) {
    for (int j = 0; j < out; ++j)
      if (i != empty_row && j != empty_col && u(rng) < density) {
        ci.push_back(j);
        v.push_back(val(rng));
      }
    rp.push_back(static_cast<int>(ci.size()));
  }
  return make_csr<double, int>(in, out, rp, ci, v);
}
dense_matrix<double> random_dense(std::int64_t r, std::int64_t c, std::uint32_t seed, double zero_share = 0.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0), val(-1.0, 1.0);
  dense_matrix<double> m(r, c);
  for (auto& x : m.values()) x = u(rng) < zero_share ? 0.0 : val(rng);
  return m;
}

// Layer + a linear probe: L = sum_{r,j} G[r,j] * epi(X W)[r,j].
struct probe_case {
  dense_matrix<double> x, g;
  csr_matrix<double, int> w;
  std::vector<double> bias;
  basic_epilogue<double> epi;

  double loss() {
    basic_epilogue<double> e = epi;
    if (!bias.empty()) e.bias = bias.data();
    dense_matrix<double> y(x.rows(), w.cols());
    reference::dense_sparse_spmm<double, int, double>(x.view(), w.view(), y.view(), e);
    double l = 0;
    for (std::size_t k = 0; k < y.size(); ++k) l += y.values()[k] * g.values()[k];
    return l;
  }
};

double central_difference(std::function<double()> const& f, double& param, double h = 1e-6) {
  double const keep = param;
  param = keep + h;
  double const up = f();
  param = keep - h;
  double const down = f();
  param = keep;
  return (up - down) / (2 * h);
}

// Analytic gradients of probe_case through ops::sparse_linear_backward vs finite differences.
void check_against_fd(probe_case& c, bool check_x = true) {
  std::int64_t const B = c.x.rows(), out = c.w.cols();
  basic_epilogue<double> e = c.epi;
  if (!c.bias.empty()) e.bias = c.bias.data();
  dense_matrix<double> p(B, out), dp(B, out), dx(B, c.w.rows());
  reference::dense_sparse_spmm<double, int, double>(c.x.view(), c.w.view(), p.view(), epilogue_none<double>());
  std::vector<double> dw(static_cast<std::size_t>(c.w.nnz())), db(static_cast<std::size_t>(out), -7.0);
  ops::sparse_linear_grads<double> grads{dp.view(), dw.data(), c.bias.empty() ? nullptr : db.data(), dx.view()};
  dense_matrix<double> const& gc = c.g;
  dense_matrix<double> const& pc = p;
  dense_matrix<double> const& xc = c.x;
  ops::sparse_linear_backward(host_exec{}, xc.view(), pc.view(), gc.view(), c.w.view(), e, grads);
  auto f = [&] { return c.loss(); };
  for (int q = 0; q < c.w.nnz(); ++q)
    REQUIRE(dw[static_cast<std::size_t>(q)] == sdnn_test::Approx(central_difference(f, c.w.values()[q])).margin(1e-7));
  for (std::size_t j = 0; j < c.bias.size(); ++j)
    REQUIRE(db[j] == sdnn_test::Approx(central_difference(f, c.bias[j])).margin(1e-7));
  if (check_x)
    for (std::size_t k = 0; k < c.x.size(); ++k)
      REQUIRE(dx.values()[k] == sdnn_test::Approx(central_difference(f, c.x.values()[k])).margin(1e-7));
}
}  // namespace

TEST_CASE("sparse_linear backward: dW (on the pattern), dbias and dX match finite differences", "[train]") {
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    for (int mode = 0; mode < 3; ++mode) {
      probe_case c;
      c.x = random_dense(5, 7, seed, 0.3);  // some zero inputs (skipped by the weight gradient)
      c.w = random_csr(7, 6, 0.5, seed + 10, /*empty_row=*/2, /*empty_col=*/4);
      c.g = random_dense(5, 6, seed + 20);
      c.bias = {0.1, -0.2, 0.3, 0.05, -0.1, 0.2};
      c.epi = mode == 2 ? epilogue_none<double>() : epilogue_relu<double>();  // bias only; bias + ReLU
      if (mode == 1) {  // bias + ReLU + cap, some outputs capped
        c.epi.has_cap = true;
        c.epi.cap = 0.3;
      }
      INFO("seed " << seed << " mode " << mode);
      check_against_fd(c);
    }
  }
}

TEST_CASE("sparse_linear backward: empty rows of W give zero input gradient; empty column, zero grad", "[train]") {
  probe_case c;
  c.x = random_dense(3, 7, 5);
  c.w = random_csr(7, 6, 0.6, 6, 2, 4);
  c.g = random_dense(3, 6, 7);
  c.epi = epilogue_none<double>();
  std::int64_t const B = 3;
  dense_matrix<double> p(B, 6), dp(B, 6), dx(B, 7);
  std::vector<double> dw(static_cast<std::size_t>(c.w.nnz()));
  dense_matrix<double> const& g = c.g;
  dense_matrix<double> const& x = c.x;
  reference::sparse_linear_backward_input<double, int>(g.view(), c.w.view(), dx.view());
  for (int r = 0; r < B; ++r) REQUIRE(dx(r, 2) == 0.0);
  reference::sparse_linear_backward_weight<double, int>(x.view(), g.view(), c.w.view(), dw.data());
  // dW[i, j] = sum_r X[r, i] G[r, j], computed directly for every stored entry.
  for (int i = 0; i < 7; ++i)
    for (int q = c.w.row_ptr()[i]; q < c.w.row_ptr()[i + 1]; ++q) {
      double s = 0;
      for (int r = 0; r < B; ++r) s += x(r, i) * g(r, c.w.col_idx()[q]);
      REQUIRE(dw[static_cast<std::size_t>(q)] == sdnn_test::Approx(s).margin(1e-12));
    }
}

TEST_CASE("Graph Challenge epilogue backward: bias only where P != 0, gradient 0 at P == 0", "[train]") {
  // Hand-computed: P = [[0, 1, 3, -0.5]], bias 0.5 (scalar), ReLU, cap 2.
  // a = [0 (no bias), 1.5, 3.5, 0]: pass = [no (a == 0), yes, no (a >= cap), no (a == 0)].
  dense_matrix<double> p(1, 4), dy(1, 4), dp(1, 4);
  double const pv[] = {0, 1, 3, -0.5};
  for (int j = 0; j < 4; ++j) {
    p(0, j) = pv[j];
    dy(0, j) = j + 1.0;
  }
  double dscalar = -1;
  dense_matrix<double> const& pc = p;
  dense_matrix<double> const& dyc = dy;
  reference::epilogue_backward(pc.view(), dyc.view(), epilogue_capped_relu<double>(0.5, 2.0), dp.view(), nullptr,
                               &dscalar);
  REQUIRE(dp(0, 0) == 0.0);
  REQUIRE(dp(0, 1) == 2.0);
  REQUIRE(dp(0, 2) == 0.0);
  REQUIRE(dp(0, 3) == 0.0);
  REQUIRE(dscalar == 2.0);

  // Finite differences away from the jump: X has no zeros, W an empty column (P == 0 there for
  // every row, and no perturbation of X or W moves it off 0).
  probe_case c;
  c.x = random_dense(4, 6, 11);
  c.w = random_csr(6, 5, 0.7, 12, -1, /*empty_col=*/3);
  c.g = random_dense(4, 5, 13);
  c.epi = epilogue_capped_relu<double>(0.2, 0.8);
  check_against_fd(c);
  // The scalar bias gradient too.
  dense_matrix<double> p2(4, 5), dp2(4, 5);
  dense_matrix<double> const& x = c.x;
  dense_matrix<double> const& g = c.g;
  reference::dense_sparse_spmm<double, int, double>(x.view(), c.w.view(), p2.view(), epilogue_none<double>());
  dense_matrix<double> const& p2c = p2;
  double ds = 0;
  reference::epilogue_backward(p2c.view(), g.view(), c.epi, dp2.view(), nullptr, &ds);
  auto f = [&] { return c.loss(); };
  REQUIRE(ds == sdnn_test::Approx(central_difference(f, c.epi.bias_scalar)).margin(1e-7));
  for (int r = 0; r < 4; ++r) REQUIRE(dp2(r, 3) == 0.0);
}

TEST_CASE("softmax cross-entropy: mean loss and gradient match finite differences; stable", "[train]") {
  dense_matrix<double> z = random_dense(4, 5, 21);
  for (auto& v : z.values()) v *= 4;
  std::vector<int> labels{0, 3, 4, 1};
  dense_matrix<double> dz(4, 5);
  dense_matrix<double> const& zc = z;
  double const l = reference::softmax_cross_entropy(zc.view(), labels.data(), dz.view());
  // Direct formula.
  double ref = 0;
  for (int r = 0; r < 4; ++r) {
    double s = 0;
    for (int j = 0; j < 5; ++j) s += std::exp(z(r, j));
    ref += std::log(s) - z(r, labels[static_cast<std::size_t>(r)]);
  }
  REQUIRE(l == sdnn_test::Approx(ref / 4).epsilon(1e-12));
  auto f = [&] { return reference::softmax_cross_entropy(zc.view(), labels.data()); };
  for (std::size_t k = 0; k < z.size(); ++k)
    REQUIRE(dz.values()[k] == sdnn_test::Approx(central_difference(f, z.values()[k])).margin(1e-8));
  for (int r = 0; r < 4; ++r) {
    double s = 0;
    for (int j = 0; j < 5; ++j) s += dz(r, j);
    REQUIRE(std::fabs(s) < 1e-15);
  }
  // Huge logits: no overflow. loss of [1000, 1001] with label 1 is log(1 + e^-1).
  dense_matrix<float> big(1, 2), dbig(1, 2);
  big(0, 0) = 1000.f;
  big(0, 1) = 1001.f;
  int const one = 1;
  dense_matrix<float> const& bigc = big;
  double const lb = reference::softmax_cross_entropy(bigc.view(), &one, dbig.view());
  REQUIRE(lb == sdnn_test::Approx(std::log1p(std::exp(-1.0))).epsilon(1e-12));
  REQUIRE(std::isfinite(dbig(0, 0)));
  REQUIRE(dbig(0, 1) == sdnn_test::Approx(1.0 / (1.0 + std::exp(-1.0)) - 1.0).epsilon(1e-6));
  // One class: loss 0, gradient 0. An empty batch: 0.
  dense_matrix<double> one_class(2, 1), d1(2, 1);
  int const zeros[2] = {0, 0};
  dense_matrix<double> const& oc = one_class;
  REQUIRE(reference::softmax_cross_entropy(oc.view(), zeros, d1.view()) == 0.0);
  REQUIRE(d1(0, 0) == 0.0);
  dense_matrix<double> const empty(0, 10);
  REQUIRE(reference::softmax_cross_entropy(empty.view(), zeros) == 0.0);
  // A label out of range is an error.
  int const bad = 5;
  REQUIRE_THROWS_AS(reference::softmax_cross_entropy(oc.view(), &bad), sdnn::error);
}

TEST_CASE("backward on empty and one-element shapes", "[train]") {
  // Empty W (0 x 0), batch of 3: nothing to compute, nothing thrown.
  csr_matrix<float, int> w0;
  dense_matrix<float> x0(3, 0), g0(3, 0), dx0(3, 0);
  dense_matrix<float> const& x0c = x0;
  dense_matrix<float> const& g0c = g0;
  std::vector<float> dw0;
  reference::sparse_linear_backward_weight<float, int>(x0c.view(), g0c.view(), w0.view(), dw0.data());
  reference::sparse_linear_backward_input<float, int>(g0c.view(), w0.view(), dx0.view());
  // An all-empty W (3 x 2, nnz 0): dX is zero.
  auto we = make_csr<float, int>(3, 2, {0, 0, 0, 0}, {}, {});
  {
    // ... and the whole layer backward needs no weight gradient buffer for no weights (an
    // empty std::vector's data() may be nullptr).
    dense_matrix<float> xe(2, 3), pe(2, 2), dye(2, 2), dpe(2, 2), dxe(2, 3);
    dense_matrix<float> const& xec = xe;
    dense_matrix<float> const& pec = pe;
    dense_matrix<float> const& dyec = dye;
    ops::sparse_linear_backward(host_exec{}, xec.view(), pec.view(), dyec.view(), we.view(), epilogue_none<float>(),
                                ops::sparse_linear_grads<float>{dpe.view(), nullptr, nullptr, dxe.view()});
    for (auto v : dxe.values()) REQUIRE(v == 0.f);
  }
  dense_matrix<float> g(2, 2), dx(2, 3);
  for (auto& v : g.values()) v = 1.f;
  for (auto& v : dx.values()) v = 9.f;
  dense_matrix<float> const& gc = g;
  reference::sparse_linear_backward_input<float, int>(gc.view(), we.view(), dx.view());
  for (auto v : dx.values()) REQUIRE(v == 0.f);
  // One element: y = relu(x * w + b); x = 2, w = 3, b = -1 -> y = 5, dy = 1: dw = 2, dx = 3, db = 1.
  auto w1 = make_csr<float, int>(1, 1, {0, 1}, {0}, {3.f});
  dense_matrix<float> x(1, 1), p(1, 1), dy(1, 1), dp(1, 1), dx1(1, 1);
  x(0, 0) = 2.f;
  p(0, 0) = 6.f;
  dy(0, 0) = 1.f;
  float bias = -1.f, db = 0.f, dw = 0.f;
  dense_matrix<float> const& xc = x;
  dense_matrix<float> const& pc = p;
  dense_matrix<float> const& dyc = dy;
  ops::sparse_linear_backward(host_exec{}, xc.view(), pc.view(), dyc.view(), w1.view(), epilogue_relu<float>(&bias),
                              ops::sparse_linear_grads<float>{dp.view(), &dw, &db, dx1.view()});
  REQUIRE(dw == 2.f);
  REQUIRE(db == 1.f);
  REQUIRE(dx1(0, 0) == 3.f);
  // Below the ReLU (p + b <= 0): every gradient 0.
  p(0, 0) = 0.5f;
  ops::sparse_linear_backward(host_exec{}, xc.view(), pc.view(), dyc.view(), w1.view(), epilogue_relu<float>(&bias),
                              ops::sparse_linear_grads<float>{dp.view(), &dw, &db, dx1.view()});
  REQUIRE(dw == 0.f);
  REQUIRE(db == 0.f);
  REQUIRE(dx1(0, 0) == 0.f);
}

TEST_CASE("float backward agrees with the double backward", "[train]") {
  auto wd = random_csr(40, 30, 0.2, 31);
  auto xd = random_dense(8, 40, 32, 0.5);
  auto gd = random_dense(8, 30, 33);
  auto wf = make_csr<float, int>(40, 30, {wd.row_ptr().begin(), wd.row_ptr().end()},
                                 {wd.col_idx().begin(), wd.col_idx().end()},
                                 std::vector<float>(wd.values().begin(), wd.values().end()));
  dense_matrix<float> xf(8, 40), gf(8, 30), dxf(8, 40);
  for (std::size_t k = 0; k < xd.size(); ++k) xf.values()[k] = static_cast<float>(xd.values()[k]);
  for (std::size_t k = 0; k < gd.size(); ++k) gf.values()[k] = static_cast<float>(gd.values()[k]);
  dense_matrix<double> dxd(8, 40);
  std::vector<double> dwd(static_cast<std::size_t>(wd.nnz()));
  std::vector<float> dwf(static_cast<std::size_t>(wd.nnz()));
  dense_matrix<double> const& xdc = xd;
  dense_matrix<double> const& gdc = gd;
  dense_matrix<float> const& xfc = xf;
  dense_matrix<float> const& gfc = gf;
  reference::sparse_linear_backward_weight<double, int>(xdc.view(), gdc.view(), wd.view(), dwd.data());
  reference::sparse_linear_backward_weight<float, int>(xfc.view(), gfc.view(), wf.view(), dwf.data());
  reference::sparse_linear_backward_input<double, int>(gdc.view(), wd.view(), dxd.view());
  reference::sparse_linear_backward_input<float, int>(gfc.view(), wf.view(), dxf.view());
  for (std::size_t q = 0; q < dwd.size(); ++q) REQUIRE(dwf[q] == sdnn_test::Approx(dwd[q]).margin(1e-5));
  for (std::size_t k = 0; k < dxd.size(); ++k) REQUIRE(dxf.values()[k] == sdnn_test::Approx(dxd.values()[k]).margin(1e-5));
}

TEST_CASE("SGD with momentum and weight decay keeps the CSR pattern exactly", "[train]") {
  auto w = make_csr<float, int>(3, 4, {0, 2, 2, 3}, {1, 3, 0}, {0.5f, -1.f, 2.f});
  std::vector<float> const g{5.f, 1.f, -1.f};
  std::vector<float> vel;
  reference::sgd_options o;
  o.lr = 0.1;
  o.momentum = 0.9;
  reference::sgd_step(w, g, vel, o);
  // Step 1: v = g, w -= 0.1 g: 0.5 - 0.5 = 0 exactly -- still stored.
  REQUIRE(w.nnz() == 3);
  REQUIRE(std::vector<int>(w.row_ptr().begin(), w.row_ptr().end()) == std::vector<int>{0, 2, 2, 3});
  REQUIRE(std::vector<int>(w.col_idx().begin(), w.col_idx().end()) == std::vector<int>{1, 3, 0});
  REQUIRE(w.values()[0] == 0.f);
  REQUIRE(w.values()[1] == sdnn_test::Approx(-1.1));
  REQUIRE(w.values()[2] == sdnn_test::Approx(2.1));
  // Step 2 with weight decay 0.01: g' = g + 0.01 w; v = 0.9 v + g'; w -= 0.1 v.
  o.weight_decay = 0.01;
  double const w1 = -1.1, v1 = 1.0, g1 = 1.0 + 0.01 * w1, v2 = 0.9 * v1 + g1;
  reference::sgd_step(w, g, vel, o);
  REQUIRE(w.values()[1] == sdnn_test::Approx(w1 - 0.1 * v2).epsilon(1e-6));
  REQUIRE(vel[1] == sdnn_test::Approx(v2).epsilon(1e-6));
  REQUIRE(w.values()[0] == sdnn_test::Approx(-0.1 * (0.9 * 5.0 + 5.0)).epsilon(1e-6));
  // No parameters: no velocity needed, even with momentum.
  reference::sgd_step(static_cast<float*>(nullptr), static_cast<float const*>(nullptr), static_cast<float*>(nullptr), 0, o);
  // Plain SGD needs no velocity; a mismatched gradient is an error.
  float x = 1.f, gx = 2.f;
  reference::sgd_step(&x, &gx, static_cast<float*>(nullptr), 1, reference::sgd_options{0.5, 0.0, 0.0, false});
  REQUIRE(x == 0.f);
  REQUIRE_THROWS_AS(reference::sgd_step(w, std::vector<float>{1.f}, vel, o), sdnn::error);
  // Nesterov: w -= lr * (g + mu * v) with v = g on the first step.
  float y = 1.f, gy = 1.f, vy = 0.f;
  reference::sgd_step(&y, &gy, &vy, 1, reference::sgd_options{0.1, 0.5, 0.0, true});
  REQUIRE(y == sdnn_test::Approx(1.0 - 0.1 * 1.5));
}

TEST_CASE("prune_csr_magnitude: per layer and uniform per row, ties to the lower position", "[train][prune]") {
  // 2 x 4 dense values.
  auto w = make_csr<float, int>(2, 4, {0, 4, 8}, {0, 1, 2, 3, 0, 1, 2, 3},
                                {0.1f, -0.9f, 0.5f, 0.2f, 0.3f, 0.3f, -0.05f, 0.8f});
  auto layer = ops::prune_csr_magnitude(w, 0.5, ops::csr_prune::layer);  // keeps 4 of 8
  validate(layer.w);
  REQUIRE(layer.w.nnz() == 4);
  // |w| order: 0.9 (1), 0.8 (7), 0.5 (2), then 0.3 tie (4 before 5).
  REQUIRE(layer.kept == std::vector<int>{1, 2, 4, 7});
  REQUIRE(std::vector<int>(layer.w.row_ptr().begin(), layer.w.row_ptr().end()) == std::vector<int>{0, 2, 4});
  REQUIRE(std::vector<float>(layer.w.values().begin(), layer.w.values().end()) ==
          std::vector<float>{-0.9f, 0.5f, 0.3f, 0.8f});
  auto rows = ops::prune_csr_magnitude(w, 0.75, ops::csr_prune::uniform_rows);  // 1 per row
  REQUIRE(rows.kept == std::vector<int>{1, 7});
  REQUIRE(std::vector<int>(rows.w.col_idx().begin(), rows.w.col_idx().end()) == std::vector<int>{1, 3});
  // Iterating: 75 % of the dense size from the 50 % result keeps 2; momentum follows.
  auto again = ops::prune_csr_magnitude(layer.w, 0.75);
  REQUIRE(again.w.nnz() == 2);
  std::vector<float> vel{10, 20, 30, 40};
  REQUIRE(ops::gather_kept(vel, again.kept) == std::vector<float>{10, 40});
  // Edge cases: an empty matrix, sparsity 0 (keeps all), sparsity 1 (keeps none), bad sparsity.
  csr_matrix<float, int> empty;
  REQUIRE(ops::prune_csr_magnitude(empty, 0.9).w.nnz() == 0);
  REQUIRE(ops::prune_csr_magnitude(w, 0.0).w.nnz() == 8);
  auto none = ops::prune_csr_magnitude(w, 1.0, ops::csr_prune::uniform_rows);
  REQUIRE(none.w.nnz() == 0);
  validate(none.w);
  REQUIRE_THROWS_AS(ops::prune_csr_magnitude(w, 1.5), sdnn::error);
}
