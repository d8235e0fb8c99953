// bf16 and fp16 values through the CUDA-core ("float") linear path on the host: formats and
// conversions keep the 16-bit bits, the host references take the rounded 16-bit inputs, sum in
// float (Y * W) or double (sparse x dense), apply the epilogue in float and round once to T,
// layers::sparse_linear<T> and sequential<T> run them (next to layers::tc_linear<T>), and the
// weight store's byte arithmetic counts 2-byte values.
#include "sdnn_catch.hpp"

#include <sdnn/formats/convert.hpp>
#include <sdnn/linear/op/dense_sparse.hpp>
#include <sdnn/linear/op/spmm.hpp>
#include <sdnn/linear/reference/gemm.hpp>
#include <sdnn/linear/reference/spmm.hpp>
#include <sdnn/linear/sparse_linear.hpp>
#include <sdnn/linear/tc_linear_layer.hpp>
#include <sdnn/pipeline/sequential.hpp>
#include <sdnn/pipeline/weight_store.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

using namespace sdnn;

namespace {

template <class T>
std::vector<T> to16(std::vector<float> const& v) {
  std::vector<T> r;
  for (float x : v) r.push_back(T(x));
  return r;
}

template <class T>
float f(T v) {
  return static_cast<float>(v);
}

template <class T>
bool same_bits(T a, T b) {
  return a.bits == b.bits;
}

// A random W (rows x cols) with small-integer values in {-2, -1, 1, 2}, some empty rows.
template <class T>
csr_matrix<T, std::int32_t> random_w(std::int32_t rows, std::int32_t cols, double density, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::int32_t> rp{0}, ci;
  std::vector<T> v;
  for (std::int32_t i = 0; i < rows; ++i) {
    bool const empty = u(g) < 0.2;
    for (std::int32_t j = 0; j < cols && !empty; ++j)
      if (u(g) < density) {
        ci.push_back(j);
        int const k = static_cast<int>(g() % 4);
        v.push_back(T(static_cast<float>(k < 2 ? k - 2 : k - 1)));
      }
    rp.push_back(static_cast<std::int32_t>(ci.size()));
  }
  return make_csr<T, std::int32_t>(rows, cols, rp, ci, v);
}

}  // namespace

TEMPLATE_TEST_CASE("linear16: conversions between formats keep the 16-bit bits", "[linear16][formats]", bf16, fp16) {
  using T = TestType;
  // 1/3 and 1e-3 are not representable: their rounded bits must survive every round trip.
  auto w = make_csr<T, std::int32_t>(3, 4, {0, 2, 2, 4}, {0, 3, 1, 2}, to16<T>({1.f / 3, -2.5f, 1e-3f, 7.f}));
  auto coo = to_coo(w);
  auto back = to_csr(coo);
  auto ell = to_ell(w);
  auto from_ell = to_csr(ell);
  auto d = to_dense(w);
  auto td = to_tiled_dense(w);
  auto from_td = to_csr(td);
  auto from_dense = to_csr(d);
  REQUIRE(back.nnz() == 4);
  REQUIRE(from_ell.nnz() == 4);
  REQUIRE(from_td.nnz() == 4);
  REQUIRE(from_dense.nnz() == 4);
  for (std::size_t p = 0; p < 4; ++p) {
    REQUIRE(same_bits(back.values()[p], w.values()[p]));
    REQUIRE(same_bits(from_ell.values()[p], w.values()[p]));
    REQUIRE(same_bits(from_td.values()[p], w.values()[p]));
    REQUIRE(same_bits(from_dense.values()[p], w.values()[p]));
    REQUIRE(back.col_idx()[p] == w.col_idx()[p]);
  }
  REQUIRE(same_bits(d(0, 0), T(1.f / 3)));
  REQUIRE(same_bits(d(2, 2), T(7.f)));
  REQUIRE(f(d(1, 1)) == 0.f);
}

// Sums that show where the rounding to T happens: bf16 keeps 8 significant bits, fp16 11.
// 1 + e + e with e = half an ulp of 1: rounding after each add gives 1 twice (ties to even),
// one rounding of the float sum gives 1 + 2e (representable). The references must give 1 + 2e.
TEMPLATE_TEST_CASE("linear16: host references sum in float and round once to T", "[linear16][reference]", bf16, fp16) {
  using T = TestType;
  float const e = std::is_same_v<T, bf16> ? std::ldexp(1.f, -8) : std::ldexp(1.f, -11);
  REQUIRE(f(T(1.f + e)) == 1.f);        // a tie: rounds to even
  REQUIRE(f(T(1.f + 2 * e)) == 1.f + 2 * e);  // representable
  // A (1 x 3) = [1 e e] as a sparse row, B (3 x 1) = ones: C = 1 + 2e.
  auto a = make_csr<T, std::int32_t>(1, 3, {0, 3}, {0, 1, 2}, to16<T>({1.f, e, e}));
  dense_matrix<T> b(3, 1), c(1, 1);
  for (int k = 0; k < 3; ++k) b(k, 0) = T(1.f);
  dense_view<T const> bv{3, 1, 1, b.data()};
  reference::spmm(a.view(), bv, c.view(), epilogue_none<float>());
  REQUIRE(f(c(0, 0)) == 1.f + 2 * e);
  c(0, 0) = T(0.f);
  reference::spmm(to_coo(a).view(), bv, c.view(), epilogue_none<float>());
  REQUIRE(f(c(0, 0)) == 1.f + 2 * e);
  c(0, 0) = T(0.f);
  reference::spmm(to_ell(a).view(), bv, c.view(), epilogue_none<float>());
  REQUIRE(f(c(0, 0)) == 1.f + 2 * e);
  auto ad = to_dense(a);
  c(0, 0) = T(0.f);
  reference::gemm(dense_view<T const>{1, 3, 3, ad.data()}, bv, c.view(), epilogue_none<float>());
  REQUIRE(f(c(0, 0)) == 1.f + 2 * e);
  // Y * W: Y (1 x 3) = [1 e e], W (3 x 1) = ones.
  auto w = make_csr<T, std::int32_t>(3, 1, {0, 1, 2, 3}, {0, 0, 0}, to16<T>({1.f, 1.f, 1.f}));
  c(0, 0) = T(0.f);
  reference::dense_sparse_spmm(dense_view<T const>{1, 3, 3, ad.data()}, w.view(), c.view(), epilogue_none<float>());
  REQUIRE(f(c(0, 0)) == 1.f + 2 * e);
  // ops::spmm / spmm_dense_sparse on host_exec are the references, for every policy.
  c(0, 0) = T(0.f);
  ops::spmm(host_exec{}, policy::csr_row_split<>{}, a.view(), bv, c.view(), epilogue_none<float>());
  REQUIRE(f(c(0, 0)) == 1.f + 2 * e);
  c(0, 0) = T(0.f);
  ops::spmm_dense_sparse(host_exec{}, policy::csc_gather<>{}, dense_view<T const>{1, 3, 3, ad.data()}, w.view(),
                         c.view(), epilogue_none<float>());
  REQUIRE(f(c(0, 0)) == 1.f + 2 * e);
}

TEMPLATE_TEST_CASE("linear16: the epilogue runs in float before the one rounding", "[linear16][reference]", bf16,
                   fp16) {
  using T = TestType;
  // Y (2 x 2) * W (2 x 3), bias per column, ReLU: hand-computed.
  auto w = make_csr<T, std::int32_t>(2, 3, {0, 2, 3}, {0, 2, 1}, to16<T>({1.5f, -2.f, 0.5f}));
  dense_matrix<T> y(2, 2), c(2, 3);
  float const yv[] = {2.f, 4.f, -1.f, 0.f};
  for (int i = 0; i < 4; ++i) y.data()[i] = T(yv[i]);
  std::vector<float> bias = {0.25f, -1.f, 3.f};
  reference::dense_sparse_spmm(dense_view<T const>{2, 2, 2, y.data()}, w.view(), c.view(), epilogue_relu(bias));
  // row 0: [2*1.5 + .25, 4*.5 - 1, 2*-2 + 3] = [3.25, 1, -1 -> 0]; row 1: [-1.5 + .25 -> 0, -1 -> 0, 2 + 3]
  float const want[] = {3.25f, 1.f, 0.f, 0.f, 0.f, 5.f};
  for (int i = 0; i < 6; ++i) REQUIRE(f(c.data()[i]) == want[i]);
}

TEMPLATE_TEST_CASE("linear16: NaN and Inf weights propagate through the host references", "[linear16][reference]",
                   bf16, fp16) {
  using T = TestType;
  float const inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto w = make_csr<T, std::int32_t>(2, 3, {0, 2, 3}, {0, 1, 2}, to16<T>({nan, inf, 1.f}));
  dense_matrix<T> y(1, 2), c(1, 3);
  y(0, 0) = T(1.f);
  y(0, 1) = T(2.f);
  reference::dense_sparse_spmm(dense_view<T const>{1, 2, 2, y.data()}, w.view(), c.view(), epilogue_none<float>());
  REQUIRE(std::isnan(f(c(0, 0))));
  REQUIRE(std::isinf(f(c(0, 1))));
  REQUIRE(f(c(0, 1)) > 0);
  REQUIRE(f(c(0, 2)) == 2.f);
  dense_matrix<T> b(3, 1), cc(2, 1);
  for (int k = 0; k < 3; ++k) b(k, 0) = T(1.f);
  reference::spmm(w.view(), dense_view<T const>{3, 1, 1, b.data()}, cc.view(), epilogue_none<float>());
  REQUIRE(std::isnan(f(cc(0, 0))));  // NaN + Inf
  REQUIRE(f(cc(1, 0)) == 1.f);
}

TEMPLATE_TEST_CASE("linear16: sparse_linear<T> on the host is the reference, alone and in sequential<T> with tc_linear",
                   "[linear16][sparse_linear]", bf16, fp16) {
  using T = TestType;
  std::int32_t const in = 37, hidden = 17, out = 3, batch = 5;
  auto w1 = random_w<T>(in, hidden, 0.3, 11);
  auto w1_copy = to_csr(to_coo(w1));
  std::mt19937 g(7);
  dense_matrix<T> x(batch, in);
  for (std::int64_t i = 0; i < x.rows() * x.cols(); ++i) x.data()[i] = T(static_cast<float>(g() % 4));
  for (std::int64_t j = 0; j < in; ++j) x(1, j) = T(0.f);  // an all-zero input row
  std::vector<float> b1(hidden);
  for (auto& v : b1) v = static_cast<float>(static_cast<int>(g() % 5) - 2);
  auto l1 = std::make_shared<layers::sparse_linear<T>>(std::move(w1), epilogue_relu(b1));

  dense_matrix<T> h(batch, hidden), want_h(batch, hidden);
  l1->forward(host_exec{}, x.view(), h.view());
  reference::dense_sparse_spmm(dense_view<T const>{batch, in, in, x.data()}, w1_copy.view(), want_h.view(),
                               epilogue_relu(b1));
  for (std::int64_t i = 0; i < h.rows() * h.cols(); ++i) REQUIRE(same_bits(h.data()[i], want_h.data()[i]));
  for (std::int64_t j = 0; j < hidden; ++j) REQUIRE(f(h(1, j)) == std::max(b1[static_cast<std::size_t>(j)], 0.f));

  // tc_linear's W is out x in (nn.Linear): Y = H W2^T.
  dense_matrix<T> w2(out, hidden);
  for (std::int64_t i = 0; i < w2.rows() * w2.cols(); ++i)
    w2.data()[i] = (g() % 3 == 0) ? T(static_cast<float>(static_cast<int>(g() % 5) - 2)) : T(0.f);
  dense_matrix<T> w2_copy(out, hidden);
  std::memcpy(w2_copy.data(), w2.data(), sizeof(T) * static_cast<std::size_t>(out * hidden));
  sequential<T> net;
  net.add(l1).add(std::make_shared<layers::tc_linear<T>>(std::move(w2), epilogue_none<float>()));
  REQUIRE(net.out_features(in) == out);
  dense_matrix<T> y(batch, out);
  net.forward(host_exec{}, x.view(), y.view());
  // Small integers: every sum is exact in float; the result is that sum rounded once to T.
  for (std::int64_t i = 0; i < batch; ++i)
    for (std::int64_t o = 0; o < out; ++o) {
      float s = 0;
      for (std::int64_t k = 0; k < hidden; ++k) s += f(h(i, k)) * f(w2_copy(o, k));
      REQUIRE(same_bits(y(i, o), T(s)));
    }
}

TEST_CASE("linear16: weight store byte arithmetic counts 2-byte values and float biases", "[linear16][weight_store]") {
  using pipeline::csr_layer_bytes_of;
  using pipeline::streamed_csr_layer_bytes;
  // (rows + 1) offsets and nnz indices of 4 bytes, nnz values of sizeof(T), a float bias.
  REQUIRE(csr_layer_bytes_of<float>(1024, 32768, 1024) == 1025ull * 4 + 32768ull * 8 + 1024ull * 4);
  REQUIRE(csr_layer_bytes_of<bf16>(1024, 32768, 1024) == 1025ull * 4 + 32768ull * 6 + 1024ull * 4);
  REQUIRE(csr_layer_bytes_of<fp16>(1024, 32768) == 1025ull * 4 + 32768ull * 6);
  REQUIRE(csr_layer_bytes_of<float>(1024, 32768) - csr_layer_bytes_of<bf16>(1024, 32768) == 32768ull * 2);
  // The streamed packing: each part starts at a multiple of 256 bytes.
  // n = 100, nnz = 1000, bias: bias 400 -> 512; offsets 404 -> 512 + 512; indices 4000 -> 4096;
  // values 2000 (16-bit) -> 2048 or 4000 (float) -> 4096.
  REQUIRE(streamed_csr_layer_bytes<bf16>(100, 1000, true) == 512 + 512 + 4096 + 2048);
  REQUIRE(streamed_csr_layer_bytes<fp16>(100, 1000, false) == 512 + 4096 + 2048);
  REQUIRE(streamed_csr_layer_bytes<float>(100, 1000, true) == 512 + 512 + 4096 + 4096);
  REQUIRE(streamed_csr_layer_bytes<bf16>(0, 0, false) == 256);
  // A budget that holds the 16-bit layers resident streams the float ones.
  std::vector<std::uint64_t> f32, b16;
  for (int l = 0; l < 4; ++l) {
    f32.push_back(csr_layer_bytes_of<float>(4096, 1 << 20, 4096));
    b16.push_back(csr_layer_bytes_of<bf16>(4096, 1 << 20, 4096));
  }
  std::uint64_t const budget = 26000000;  // 4 x 6324228 (16-bit) fits, 4 x 8421380 (float) does not
  auto const d16 = pipeline::choose_weight_store(b16, budget, weight_placement::automatic);
  auto const d32 = pipeline::choose_weight_store(f32, budget, weight_placement::automatic);
  REQUIRE_FALSE(d16.streamed);
  REQUIRE(d16.device_bytes == 4 * b16[0]);
  REQUIRE(d32.streamed);
  REQUIRE(d32.slots == 3);
  REQUIRE(d32.device_bytes == 3 * f32[0]);
}
