// What a new user gets wrong with the layer types, and what they get back: device members that
// no .cu compiled (not_compiled, never a link error), hand-filled weights with a bad entry, a
// bias of the wrong length (a clear error, never a read past its end), and sequential's shape
// errors (dimension_mismatch naming the layer).
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/challenge/pipeline.hpp>
#include <sdnn/linear/op/dense_sparse.hpp>
#include <sdnn/linear/sparse_linear.hpp>
#include <sdnn/pipeline/sequential.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

using namespace sdnn;
using sdnn_test::has;

namespace {
// 3 x 2 CSR filled by hand, without make_csr's check: row 1 holds column `col`.
csr_matrix<float, std::int32_t> hand_filled(std::int32_t col) {
  csr_matrix<float, std::int32_t> w(3, 2, 3);
  std::int32_t const rp[] = {0, 1, 2, 3}, ci[] = {0, col, 1};
  for (int i = 0; i < 4; ++i) w.row_ptr()[i] = rp[i];
  for (int i = 0; i < 3; ++i) {
    w.col_idx()[i] = ci[i];
    w.values()[i] = 1.f + static_cast<float>(i);
  }
  return w;
}
template <class E, class F>
std::string thrown(F&& f) {
  try {
    f();
  } catch (E const& e) {
    return e.what();
  }
  return "not thrown";
}
}  // namespace

TEST_CASE("a device member that no .cu compiled links and throws not_compiled naming the type", "[layer_checks]") {
  // No .cu of this program constructs these types (tests/common/device_instances.cu installs
  // the float ones only): with SDNN_HAS_CUDA=1 this file used not to link.
  sequential<double> seq;
  std::string w = thrown<not_compiled>([&] { seq.plan(4, 3, cuda_exec{}); });
  INFO(w);
  CHECK(has(w, "sequential<double>::plan(cuda_exec) is not compiled in this build"));
#if SDNN_HAS_CUDA
  CHECK(has(w, "this program compiled no device code for sequential<double>: include <sdnn/sdnn.hpp> in one .cu"));
#else
  CHECK(has(w, "SDNN_ENABLE_CUDA=OFF"));
#endif
  layers::sparse_linear<double> l(make_csr<double, std::int32_t>(1, 1, {0, 1}, {0}, {1.0}), epilogue_none<double>());
  w = thrown<not_compiled>([&] { l.device_plan(); });
  CHECK(has(w, "layers::sparse_linear<double, csr, skip_empty_rows_csc_tiled16>::device_plan()"));
  CHECK(has(thrown<not_compiled>([&] {
              dense_view<double const> x{};
              l.forward(cuda_exec{}, x, dense_view<double>{});
            }),
            "::forward(cuda_exec) is not compiled"));
  using net_t = pipeline::challenge_network<policy::csc_gather<>>;
  auto lw = std::make_shared<net_t::layer_type>(make_csr<float, std::int32_t>(1, 1, {0, 1}, {0}, {1.f}),
                                                epilogue_capped_relu<float>(-0.3f));
  net_t net({lw});
  CHECK(has(thrown<not_compiled>([&] { net.run(cuda_exec{}, csr_view<float, std::int32_t>{}); }),
            "pipeline::challenge_network<csc_gather"));
  // The host path of the same objects runs.
  std::vector<double> x = {2.0}, y(1);
  l.forward(host_exec{}, dense_view<double const>{1, 1, 1, x.data()}, dense_view<double>{1, 1, 1, y.data()});
  CHECK(y[0] == 2.0);
}

#if SDNN_HAS_CUDA
TEST_CASE("the float types installed by device_instances.cu reach their device bodies", "[layer_checks]") {
  // SDNN_INSTANTIATE_SPARSE_LINEAR and `template class sequential<float>;` in a .cu: plan() runs
  // the device body (which, without a GPU, fails inside CUDA).
  auto l = std::make_shared<layers::sparse_linear<float>>(make_csr<float, std::int32_t>(1, 1, {0, 1}, {0}, {1.f}),
                                                          epilogue_none<float>());
  sequential<float> seq;
  seq.add(l);
  try {
    seq.plan(4, 1, cuda_exec{});
  } catch (not_compiled const& e) {
    FAIL(e.what());
  } catch (library_error const& e) {
    INFO(e.what());  // no GPU visible
  }
}
#endif

TEST_CASE("sparse_linear and spmm_dense_sparse validate hand-filled weights", "[layer_checks]") {
  // Column 7 of 2: read and written out of bounds before the check.
  std::string w = thrown<error>([] { layers::sparse_linear<float> l(hand_filled(7), epilogue_none<float>()); });
  CHECK(has(w, "csr: row 1: col_idx[1] = 7 is out of range for 2 columns"));
  CHECK(has(thrown<error>([] { layers::sparse_linear<float> l(hand_filled(-1), epilogue_none<float>()); }),
            "col_idx[1] = -1 is out of range"));
  auto bad = hand_filled(7);
  std::vector<float> a(6, 1.f), c(4);
  dense_view<float const> av{2, 3, 3, a.data()};
  dense_view<float> cv{2, 2, 2, c.data()};
  w = thrown<error>([&] { ops::spmm_dense_sparse(host_exec{}, policy::csc_gather<>{}, av, bad.view(), cv); });
  CHECK(has(w, "csr: row 1: col_idx[1] = 7 is out of range for 2 columns"));
  auto bad_rows = hand_filled(0);
  bad_rows.row_ptr()[2] = 5;
  w = thrown<error>([&] { ops::spmm_dense_sparse(host_exec{}, policy::csc_gather<>{}, av, bad_rows.view(), cv); });
  CHECK(has(w, "csr: row_ptr[2] = 5 exceeds nnz = 3"));
  // Valid weights run.
  auto good = hand_filled(1);
  ops::spmm_dense_sparse(host_exec{}, policy::csc_gather<>{}, av, good.view(), cv);
  CHECK(c[0] == 1.f);
  CHECK(c[1] == 5.f);  // 2 + 3
}

TEST_CASE("a bias that carries its length is checked against the outputs", "[layer_checks]") {
  std::vector<float> short_bias = {1.f}, bias = {1.f, -1.f}, none;
  auto e = epilogue_relu(short_bias);
  CHECK(e.bias == short_bias.data());
  CHECK(e.bias_count == 1);
  CHECK(e.relu);
  CHECK(epilogue_relu<float>(bias.data()).bias_count == -1);  // a bare pointer: no length
  CHECK(epilogue_relu(bias.data(), 2).bias_count == 2);
  std::string w = thrown<dimension_mismatch>([&] { layers::sparse_linear<float> l(hand_filled(1), e); });
  CHECK(has(w, "sparse_linear: the bias has 1 values, the layer has 2 outputs"));
  CHECK(has(thrown<dimension_mismatch>([&] { layers::sparse_linear<float> l(hand_filled(1), epilogue_relu(none)); }),
            "the bias has 0 values, the layer has 2 outputs"));
  // A bare pointer has no length the layer could check: refused, saying how to give it.
  CHECK(has(thrown<sdnn::error>([&] { layers::sparse_linear<float> l(hand_filled(1), epilogue_relu<float>(bias.data())); }),
            "the bias is a bare pointer of unknown length"));
  std::vector<float> a(6, 1.f), c(4);
  dense_view<float const> av{2, 3, 3, a.data()};
  dense_view<float> cv{2, 2, 2, c.data()};
  auto good = hand_filled(1);
  w = thrown<dimension_mismatch>(
      [&] { ops::spmm_dense_sparse(host_exec{}, policy::csc_gather<>{}, av, good.view(), cv, e); });
  CHECK(has(w, "spmm_dense_sparse: the bias has 1 values, C has 2 columns"));

  // The right length: copied and applied (Y = relu(X W + b)).
  layers::sparse_linear<float> l(hand_filled(1), epilogue_relu(bias));
  bias[0] = 100.f;  // the layer holds its own copy
  CHECK(l.host_epilogue().bias_count == 2);
  l.forward(host_exec{}, av, cv);
  CHECK(c[0] == 2.f);  // 1 + 1
  CHECK(c[1] == 4.f);  // 2 + 3 - 1
  ops::spmm_dense_sparse(host_exec{}, policy::csc_gather<>{}, av, good.view(), cv, epilogue_relu(bias));
  CHECK(c[0] == 101.f);
}

TEST_CASE("sequential's shape errors are dimension_mismatch naming the layer", "[layer_checks]") {
  using layer_t = layers::sparse_linear<float>;
  sequential<float> seq;
  seq.add(std::make_shared<layer_t>(hand_filled(1), epilogue_none<float>()))  // 3 -> 2
      .add(std::make_shared<layer_t>(hand_filled(0), epilogue_none<float>()));  // takes 3, gets 2
  std::string w = thrown<dimension_mismatch>([&] { seq.out_features(3); });
  INFO(w);
  CHECK(has(w, "sequential: layer 1 of 2 (sparse_linear<skip_empty_rows_csc_tiled16>) does not take 2 features"));
  CHECK(has(w, "sparse_linear: expected 3 input features, got 2"));
  std::vector<float> a(6, 1.f), c(4);
  // forward(host_exec) of `net` from rows x k to m x n.
  auto run = [&](sequential<float>& net, std::int64_t rows, std::int64_t k, std::int64_t m, std::int64_t n) {
    return thrown<dimension_mismatch>([&] {
      net.forward(host_exec{}, dense_view<float const>{rows, k, k, a.data()}, dense_view<float>{m, n, n, c.data()});
    });
  };
  CHECK(has(run(seq, 2, 3, 2, 2), "sequential: layer 1 of 2"));
  CHECK(has(run(seq, 2, 2, 2, 2),
            "sequential: layer 0 of 2 (sparse_linear<skip_empty_rows_csc_tiled16>) does not take 2 features"));

  sequential<float> one;
  one.add(std::make_shared<layer_t>(hand_filled(1), epilogue_none<float>()));
  CHECK(has(run(one, 2, 3, 2, 1), "sequential: output has 1 features, the chain gives 2 (layer 0, sparse_linear<"));
  CHECK(has(run(one, 2, 3, 1, 2), "sequential: input has 2 rows, output 1"));
  CHECK(has(thrown<error>([] { sequential<float> s({nullptr}); }), "sequential: layer 0 is null"));
}
