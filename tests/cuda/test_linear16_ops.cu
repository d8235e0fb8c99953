// bf16 and fp16 values through the CUDA-core ("float") linear kernels on the device: ops::spmm
// with every sdnn CSR / COO / ELL / tiled policy, ops::dense_sparse_plan with every sdnn
// dense x sparse policy, layers::sparse_linear<T> alone and in sequential<T> next to
// layers::tc_linear<T>, and the streamed weight store.
//
// The bound. Inputs are the same 16-bit values on both sides (exact in float). The exact result
// of an output is computed on the host in double, s = sum_k a_k b_k (K terms), then the epilogue
// (bias, ReLU) in double. A kernel sums the K products in float in its own order (fused
// multiply-adds included) and adds the bias in float: within (K + 1) * 2^-23 * (sum_k |a_k b_k|
// + |bias|) of the exact value (a loose gamma_K, u = 2^-24). ReLU does not increase a difference.
// The float result is then rounded once to T: half an ulp of T (bf16: 8 significant bits, fp16:
// 11, subnormals below 2^-14) at the larger of the two magnitudes. So
//   |dev - exact| <= (K + 1) * 2^-23 * (sum |a b| + |bias|) + ulp_T(max(|dev|, |exact|)) / 2.
// With small-integer data every sum is exact, and device results equal the host layer's bits.
#include "sdnn_gpu_test.cuh"

#include <sdnn/formats/convert.hpp>
#include <sdnn/formats/copy.cuh>
#include <sdnn/linear/op/dense_sparse.cuh>
#include <sdnn/linear/op/spmm.cuh>
#include <sdnn/linear/reference/spmm.hpp>
#include <sdnn/linear/sparse_linear.cuh>
#include <sdnn/linear/tc_linear_layer.cuh>
#include <sdnn/pipeline/sequential.cuh>
#include <sdnn/pipeline/weight_store.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace sdnn;

namespace {

using sdnn_test::stream_guard;

template <class T>
double to_d(T v) {
  return static_cast<double>(static_cast<float>(v));
}

// Half an ulp of T at |x| (x finite).
template <class T>
double half_ulp(double x) {
  constexpr int digits = std::is_same_v<T, bf16> ? 8 : 11;  // significant bits
  constexpr int emin = std::is_same_v<T, bf16> ? -126 : -14;
  int e = x == 0 ? emin : static_cast<int>(std::floor(std::log2(std::fabs(x))));
  e = std::max(e, emin);
  return std::ldexp(1.0, e - digits);
}

// The stated bound for one output (see the file's opening comment).
template <class T>
bool within_bound(T dev, double exact, double abs_sum, std::int64_t k) {
  double const d = to_d(dev);
  if (std::isnan(exact)) return std::isnan(d);
  if (std::isinf(exact)) return d == exact;
  if (!std::isfinite(d)) return false;
  double const bound = static_cast<double>(k + 1) * std::ldexp(1.0, -23) * abs_sum +
                       half_ulp<T>(std::max(std::fabs(d), std::fabs(exact)));
  return std::fabs(d - exact) <= bound;
}

template <class T>
bool same_bits(std::vector<T> const& a, std::vector<T> const& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// rows x cols CSR with values uniform in [-1, 1] rounded to T (or small integers in
// {-2, -1, 1, 2}), `empty` of the rows empty.
template <class T>
csr_matrix<T, std::int32_t> random_csr(std::int32_t rows, std::int32_t cols, double density, double empty,
                                       std::uint32_t seed, bool integers = false) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::uniform_real_distribution<float> val(-1.f, 1.f);
  std::vector<std::int32_t> rp{0}, ci;
  std::vector<T> v;
  for (std::int32_t i = 0; i < rows; ++i) {
    bool const skip = u(g) < empty;
    for (std::int32_t j = 0; j < cols && !skip; ++j)
      if (u(g) < density) {
        ci.push_back(j);
        int const q = static_cast<int>(g() % 4);
        v.push_back(integers ? T(static_cast<float>(q < 2 ? q - 2 : q - 1)) : T(val(g)));
      }
    rp.push_back(static_cast<std::int32_t>(ci.size()));
  }
  return make_csr<T, std::int32_t>(rows, cols, rp, ci, v);
}

// rows x cols dense, uniform in [-1, 1] rounded to T, `zeros` of the entries 0, row 0 all zero
// when zero_row.
template <class T>
dense_matrix<T> random_dense(std::int64_t rows, std::int64_t cols, double zeros, std::uint32_t seed,
                             bool zero_row = false) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::uniform_real_distribution<float> val(-1.f, 1.f);
  dense_matrix<T> d(rows, cols);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) d(i, j) = (u(g) < zeros || (zero_row && i == 0)) ? T(0.f) : T(val(g));
  return d;
}

std::vector<float> random_bias(std::int64_t n, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> val(-0.5f, 0.5f);
  std::vector<float> b(static_cast<std::size_t>(n));
  for (auto& x : b) x = val(g);
  return b;
}

template <class T>
std::vector<T> download(dense_matrix<T, device_space> const& d, cuda_exec exec) {
  return sdnn_test::download(d.data(), static_cast<std::size_t>(d.rows() * d.cols()), exec);
}

// Exact (double) C = relu(A_csr * B + bias) and sum |a b| + |bias| per output.
template <class T>
void exact_spmm(csr_matrix<T, std::int32_t> const& a, dense_matrix<T> const& b, std::vector<float> const& bias,
                std::vector<double>& exact, std::vector<double>& abs_sum) {
  std::int64_t const m = a.rows(), n = b.cols();
  exact.assign(static_cast<std::size_t>(m * n), 0.0);
  abs_sum.assign(static_cast<std::size_t>(m * n), 0.0);
  auto v = a.view();
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0, sa = 0;
      for (std::int32_t p = v.row_ptr[i]; p < v.row_ptr[i + 1]; ++p) {
        double const t = to_d(v.values[p]) * to_d(b(v.col_idx[p], j));
        s += t;
        sa += std::fabs(t);
      }
      double const bj = bias[static_cast<std::size_t>(j)];
      exact[static_cast<std::size_t>(i * n + j)] = std::max(s + bj, 0.0);
      abs_sum[static_cast<std::size_t>(i * n + j)] = sa + std::fabs(bj);
    }
}

// Exact (double) Y = relu(X * W + bias), W in CSR (k x n).
template <class T>
void exact_dense_sparse(dense_matrix<T> const& x, csr_matrix<T, std::int32_t> const& w, std::vector<float> const& bias,
                        std::vector<double>& exact, std::vector<double>& abs_sum) {
  std::int64_t const m = x.rows(), n = w.cols();
  std::vector<double> s(static_cast<std::size_t>(n)), sa(static_cast<std::size_t>(n));
  exact.assign(static_cast<std::size_t>(m * n), 0.0);
  abs_sum.assign(static_cast<std::size_t>(m * n), 0.0);
  auto v = w.view();
  for (std::int64_t i = 0; i < m; ++i) {
    std::fill(s.begin(), s.end(), 0.0);
    std::fill(sa.begin(), sa.end(), 0.0);
    for (std::int32_t k = 0; k < v.rows; ++k) {
      double const xk = to_d(x(i, k));
      if (xk == 0) continue;
      for (std::int32_t p = v.row_ptr[k]; p < v.row_ptr[k + 1]; ++p) {
        double const t = xk * to_d(v.values[p]);
        s[static_cast<std::size_t>(v.col_idx[p])] += t;
        sa[static_cast<std::size_t>(v.col_idx[p])] += std::fabs(t);
      }
    }
    for (std::int64_t j = 0; j < n; ++j) {
      double const bj = bias[static_cast<std::size_t>(j)];
      exact[static_cast<std::size_t>(i * n + j)] = std::max(s[static_cast<std::size_t>(j)] + bj, 0.0);
      abs_sum[static_cast<std::size_t>(i * n + j)] = sa[static_cast<std::size_t>(j)] + std::fabs(bj);
    }
  }
}

// Every output within the bound; reports the first one that is not.
template <class T>
void require_within(std::vector<T> const& dev, std::vector<double> const& exact, std::vector<double> const& abs_sum,
                    std::int64_t k, std::string const& what) {
  REQUIRE(dev.size() == exact.size());
  std::size_t bad = dev.size();
  for (std::size_t i = 0; i < dev.size() && bad == dev.size(); ++i)
    if (!within_bound(dev[i], exact[i], abs_sum[i], k)) bad = i;
  INFO(what << ": output " << bad << " of " << dev.size()
            << (bad < dev.size() ? " is " + std::to_string(to_d(dev[bad])) + ", exact " + std::to_string(exact[bad])
                                 : std::string()));
  REQUIRE(bad == dev.size());
}

// ops::spmm with one policy on one A (in the format `form` gives), run twice.
template <class T, class Policy, class Make>
void check_spmm_policy(Make form, csr_matrix<T, std::int32_t> const& a, dense_matrix<T> const& b,
                       std::vector<float> const& bias, std::string const& what, cuda_exec exec) {
  std::vector<double> exact, abs_sum;
  exact_spmm(a, b, bias, exact, abs_sum);
  auto a_d = form(a, exec);
  auto b_d = to_device(b, exec);
  dense_matrix<T, device_space> c_d(a.rows(), b.cols(), exec);
  auto bias_d = sdnn_test::upload(bias, exec);
  auto const epi = epilogue_relu<float>(bias_d.data(), static_cast<std::int64_t>(bias.size()));
  std::vector<T> runs[2];
  for (auto& r : runs) {
    SDNN_CUDA_CHECK(cudaMemsetAsync(c_d.data(), 0xff, sizeof(T) * static_cast<std::size_t>(a.rows() * b.cols()),
                                    exec.stream));  // NaN poison: every output must be written
    ops::spmm(exec, Policy{}, a_d.view(), b_d.view(), c_d.view(), epi);
    r = download(c_d, exec);
  }
  INFO(what << ": " << a.rows() << " x " << a.cols() << " x " << b.cols());
  REQUIRE(same_bits(runs[0], runs[1]));
  require_within(runs[0], exact, abs_sum, a.cols(), what);
}

template <class T>
void check_every_spmm_policy(std::int32_t m, std::int32_t k, std::int32_t n, double density, std::uint32_t seed,
                             cuda_exec exec) {
  auto a = random_csr<T>(m, k, density, 0.2, seed);
  auto b = random_dense<T>(k, n, 0.1, seed + 1);
  auto bias = random_bias(n, seed + 2);
  auto csr = [](csr_matrix<T, std::int32_t> const& x, cuda_exec e) { return to_device(x, e); };
  auto coo = [](csr_matrix<T, std::int32_t> const& x, cuda_exec e) { return to_device(to_coo(x), e); };
  auto ell = [](csr_matrix<T, std::int32_t> const& x, cuda_exec e) { return to_device(to_ell(x), e); };
  auto tiled = [](csr_matrix<T, std::int32_t> const& x, cuda_exec e) { return to_device(to_tiled_dense(x), e); };
  check_spmm_policy<T, policy::csr_row_split<2, 4, false>>(csr, a, b, bias, "csr_row_split", exec);
  check_spmm_policy<T, policy::csr_row_split<1, 4, true>>(csr, a, b, bias, "csr_row_split rows in x", exec);
  check_spmm_policy<T, policy::csr_staged_b<32, 64>>(csr, a, b, bias, "csr_staged_b", exec);
  check_spmm_policy<T, policy::csr_panels<8, 64, 1>>(csr, a, b, bias, "csr_panels", exec);
  check_spmm_policy<T, policy::csr_nnz_balanced<2, 4>>(csr, a, b, bias, "csr_nnz_balanced", exec);
  check_spmm_policy<T, policy::skip_empty_rows_mask<policy::csr_row_split<>>>(csr, a, b, bias, "skip mask", exec);
  check_spmm_policy<T, policy::skip_empty_rows_compact<policy::csr_row_split<>>>(csr, a, b, bias, "skip compact",
                                                                                 exec);
  check_spmm_policy<T, policy::automatic>(csr, a, b, bias, "automatic", exec);
  check_spmm_policy<T, policy::coo_nnz_split<256, 2>>(coo, a, b, bias, "coo_nnz_split", exec);
  check_spmm_policy<T, policy::ell_row_split<2, 4>>(ell, a, b, bias, "ell_row_split", exec);
  check_spmm_policy<T, policy::tiled_dense_spmm>(tiled, a, b, bias, "tiled_dense_spmm", exec);
}

// dense_sparse_plan with one policy: Y = relu(X W + bias), run twice.
template <class T, class Policy>
void check_dense_sparse_policy(dense_matrix<T> const& x, csr_matrix<T, std::int32_t> const& w,
                               std::vector<float> const& bias, cuda_exec exec) {
  std::vector<double> exact, abs_sum;
  exact_dense_sparse(x, w, bias, exact, abs_sum);
  auto x_d = to_device(x, exec);
  dense_matrix<T, device_space> y_d(x.rows(), w.cols(), exec);
  auto bias_d = sdnn_test::upload(bias, exec);
  auto const epi = epilogue_relu<float>(bias_d.data(), static_cast<std::int64_t>(bias.size()));
  ops::dense_sparse_plan<Policy, T> plan(w, exec, plan_options{std::max<std::int64_t>(x.rows(), 1), true});
  std::vector<T> runs[2];
  for (auto& r : runs) {
    SDNN_CUDA_CHECK(cudaMemsetAsync(y_d.data(), 0xff, sizeof(T) * static_cast<std::size_t>(x.rows() * w.cols()),
                                    exec.stream));
    plan.run(exec, dense_view<T const>{x.rows(), x.cols(), x.cols(), x_d.data()}, y_d.view(), epi);
    r = download(y_d, exec);
  }
  INFO(policy::name<Policy>() << ": " << x.rows() << " x " << x.cols() << " x " << w.cols());
  REQUIRE(same_bits(runs[0], runs[1]));
  require_within(runs[0], exact, abs_sum, x.cols(), policy::name<Policy>());
}

template <class T>
void check_every_dense_sparse_policy(std::int32_t batch, std::int32_t k, std::int32_t n, double density,
                                     std::uint32_t seed, cuda_exec exec) {
  auto x = random_dense<T>(batch, k, 0.3, seed, /*zero_row*/ true);
  auto w = random_csr<T>(k, n, density, 0.2, seed + 1);
  auto bias = random_bias(n, seed + 2);
  check_dense_sparse_policy<T, policy::csc_gather<16, 256>>(x, w, bias, exec);
  check_dense_sparse_policy<T, policy::csc_gather<4, 128>>(x, w, bias, exec);
  check_dense_sparse_policy<T, policy::csc_tiled<16, 256>>(x, w, bias, exec);
  check_dense_sparse_policy<T, policy::skip_empty_rows<policy::csc_gather<16, 256>>>(x, w, bias, exec);
  check_dense_sparse_policy<T, policy::sparse_linear_default>(x, w, bias, exec);
}

}  // namespace

TEMPLATE_TEST_CASE("linear16: ops::spmm, every sdnn CSR/COO/ELL/tiled policy, within the bound at odd sizes",
                   "[cuda][linear16]", bf16, fp16) {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  auto exec = sg.exec();
  check_every_spmm_policy<TestType>(1, 1, 1, 1.0, 1, exec);
  check_every_spmm_policy<TestType>(33, 17, 3, 0.3, 2, exec);
  check_every_spmm_policy<TestType>(65, 130, 17, 0.1, 3, exec);
  check_every_spmm_policy<TestType>(300, 257, 1, 0.05, 4, exec);
  check_every_spmm_policy<TestType>(513, 700, 300, 0.02, 5, exec);
  check_every_spmm_policy<TestType>(40, 50, 17, 0.0, 6, exec);  // all-zero A: relu(bias) everywhere
}

TEMPLATE_TEST_CASE("linear16: dense x sparse plans, every sdnn policy, within the bound; 4000 x 3000 weights",
                   "[cuda][linear16]", bf16, fp16) {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  auto exec = sg.exec();
  check_every_dense_sparse_policy<TestType>(1, 1, 1, 1.0, 11, exec);
  check_every_dense_sparse_policy<TestType>(3, 17, 3, 0.3, 12, exec);
  check_every_dense_sparse_policy<TestType>(37, 130, 17, 0.1, 13, exec);
  check_every_dense_sparse_policy<TestType>(64, 4000, 3000, 0.01, 14, exec);  // staged with 4 rows
  check_every_dense_sparse_policy<TestType>(5, 30000, 7, 0.01, 15, exec);     // K too wide to stage: gathers
  check_every_dense_sparse_policy<TestType>(20, 50, 17, 0.0, 16, exec);       // all-zero W
}

TEMPLATE_TEST_CASE("linear16: NaN and Inf weights propagate on the device", "[cuda][linear16]", bf16, fp16) {
  using T = TestType;
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  auto exec = sg.exec();
  float const inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // W (3 x 4): column 0 gets a NaN, column 1 an Inf, column 2 Inf and -Inf (NaN), column 3 finite.
  auto w = make_csr<T, std::int32_t>(3, 4, {0, 3, 5, 6}, {0, 1, 2, 2, 3, 3},
                                     {T(nan), T(inf), T(inf), T(-inf), T(1.f), T(2.f)});
  dense_matrix<T> x(2, 3);
  for (std::int64_t i = 0; i < 6; ++i) x.data()[i] = T(static_cast<float>(1 + i));  // no zero input
  auto x_d = to_device(x, exec);
  dense_matrix<T, device_space> y_d(2, 4, exec);
  auto check = [&](std::vector<T> const& y, std::string const& what) {
    INFO(what);
    for (int i = 0; i < 2; ++i) {
      REQUIRE(std::isnan(to_d(y[static_cast<std::size_t>(i * 4 + 0)])));
      REQUIRE(to_d(y[static_cast<std::size_t>(i * 4 + 1)]) == static_cast<double>(inf));
      REQUIRE(std::isnan(to_d(y[static_cast<std::size_t>(i * 4 + 2)])));
      REQUIRE(to_d(y[static_cast<std::size_t>(i * 4 + 3)]) == to_d(x(i, 1)) * 1 + to_d(x(i, 2)) * 2);
    }
  };
  dense_view<T const> xv{2, 3, 3, x_d.data()};
  ops::dense_sparse_plan<policy::csc_gather<16, 256>, T>(w, exec).run(exec, xv, y_d.view(), epilogue_none<float>());
  check(download(y_d, exec), "csc_gather");
  ops::dense_sparse_plan<policy::sparse_linear_default, T>(w, exec).run(exec, xv, y_d.view(), epilogue_none<float>());
  check(download(y_d, exec), "sparse_linear_default");
  // The same through ops::spmm: Y^T (4 x 2) = W^T (4 x 3) X^T (3 x 2).
  auto wt = to_csr(to_coo(w));
  {
    std::vector<std::int32_t> rp(5, 0), ci;
    std::vector<T> v;
    auto wv = w.view();
    for (std::int32_t j = 0; j < 4; ++j) {
      for (std::int32_t k = 0; k < 3; ++k)
        for (std::int32_t p = wv.row_ptr[k]; p < wv.row_ptr[k + 1]; ++p)
          if (wv.col_idx[p] == j) {
            ci.push_back(k);
            v.push_back(wv.values[p]);
          }
      rp[static_cast<std::size_t>(j) + 1] = static_cast<std::int32_t>(ci.size());
    }
    wt = make_csr<T, std::int32_t>(4, 3, rp, ci, v);
  }
  dense_matrix<T> xt(3, 2);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k) xt(k, i) = x(i, k);
  auto xt_d = to_device(xt, exec);
  auto wt_d = to_device(wt, exec);
  dense_matrix<T, device_space> yt_d(4, 2, exec);
  ops::spmm(exec, policy::csr_row_split<>{}, wt_d.view(), xt_d.view(), yt_d.view(), epilogue_none<float>());
  auto yt = download(yt_d, exec);
  std::vector<T> y(8);
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 2; ++i) y[static_cast<std::size_t>(i * 4 + j)] = yt[static_cast<std::size_t>(j * 2 + i)];
  check(y, "ops::spmm csr_row_split");
}

TEMPLATE_TEST_CASE("linear16: sparse_linear<T> on the device equals the host layer, alone and in sequential<T> "
                   "next to tc_linear<T>",
                   "[cuda][linear16][sparse_linear]", bf16, fp16) {
  using T = TestType;
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  auto exec = sg.exec();
  // Small integers and a cap of 32: every sum is exact in float and every output exact in T.
  std::int32_t const in = 300, hidden = 129, out = 17, batch = 70;
  auto w1 = random_csr<T>(in, hidden, 0.05, 0.2, 21, /*integers*/ true);
  dense_matrix<T> x(batch, in);
  std::mt19937 g(22);
  for (std::int64_t i = 0; i < batch * in; ++i) x.data()[i] = T(static_cast<float>(g() % 4));
  for (std::int64_t j = 0; j < in; ++j) x(3, j) = T(0.f);  // an all-zero row
  dense_matrix<T> w2(out, hidden);
  for (std::int64_t i = 0; i < out * hidden; ++i)
    w2.data()[i] = (g() % 4 == 0) ? T(static_cast<float>(static_cast<int>(g() % 3) - 1)) : T(0.f);
  std::vector<float> b1(static_cast<std::size_t>(hidden));
  for (auto& b : b1) b = static_cast<float>(static_cast<int>(g() % 5) - 2);
  auto epi1 = epilogue_relu(b1);
  epi1.has_cap = true;
  epi1.cap = 32.f;
  auto l1 = std::make_shared<layers::sparse_linear<T>>(std::move(w1), epi1);
  auto l2 = std::make_shared<layers::tc_linear<T>>(std::move(w2), epilogue_none<float>());

  auto x_d = to_device(x, exec);
  dense_view<T const> xv{batch, in, in, x_d.data()};
  // the layer alone
  dense_matrix<T> h_host(batch, hidden);
  l1->forward(host_exec{}, x.view(), h_host.view());
  dense_matrix<T, device_space> h_d(batch, hidden, exec);
  l1->plan(batch, in, exec);
  l1->forward(exec, xv, h_d.view());
  auto h_dev = download(h_d, exec);
  REQUIRE(same_bits(h_dev, std::vector<T>(h_host.data(), h_host.data() + batch * hidden)));
  bool some_positive = false;
  for (auto v : h_dev) some_positive |= to_d(v) > 0;
  REQUIRE(some_positive);

  // the stack
  sequential<T> net;
  net.add(l1).add(l2);
  dense_matrix<T> y_host(batch, out);
  net.forward(host_exec{}, x.view(), y_host.view());
  net.plan(32, in, exec);  // three slices of at most 32 rows
  dense_matrix<T, device_space> y_d(batch, out, exec);
  net.forward(exec, xv, y_d.view());
  auto y_dev = download(y_d, exec);
  REQUIRE(same_bits(y_dev, std::vector<T>(y_host.data(), y_host.data() + batch * out)));
}

TEMPLATE_TEST_CASE("linear16: the streamed weight store equals the resident plan bit for bit, 2-byte values packed",
                   "[cuda][linear16][weight_store]", bf16, fp16) {
  using T = TestType;
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  auto exec = sg.exec();
  std::int32_t const batch = 45;
  std::vector<std::int32_t> widths = {200, 301, 17, 64};
  std::vector<csr_matrix<T, std::int32_t>> ws;
  std::vector<std::vector<float>> bs;
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    ws.push_back(random_csr<T>(widths[l], widths[l + 1], 0.1, 0.1, 31 + static_cast<std::uint32_t>(l)));
    bs.push_back(random_bias(widths[l + 1], 41 + static_cast<std::uint32_t>(l)));
  }
  auto x = random_dense<T>(batch, widths[0], 0.3, 51, true);
  auto run = [&](auto policy_tag) {
    using P = decltype(policy_tag);
    std::vector<csr_view<T, std::int32_t>> views;
    std::vector<float const*> biases;
    for (std::size_t l = 0; l < ws.size(); ++l) {
      views.push_back(ws[l].view());
      biases.push_back(bs[l].data());
    }
    pipeline::weight_store<P, T> store(views, biases);
    if constexpr (std::is_same_v<P, policy::csc_gather<16, 256>>)
      for (std::size_t l = 0; l < ws.size(); ++l)
        REQUIRE(store.layer_bytes(l) == pipeline::streamed_csr_layer_bytes<T>(ws[l].cols(), ws[l].nnz(), true));
    store.allocate(2, exec);
    auto x_d = to_device(x, exec);
    std::vector<dense_matrix<T, device_space>> acts, ref;
    for (std::size_t l = 0; l < ws.size(); ++l) {
      acts.emplace_back(batch, widths[l + 1], exec);
      ref.emplace_back(batch, widths[l + 1], exec);
    }
    ops::listed_rows const rows{nullptr, nullptr, batch};
    store.begin_pass(exec);
    for (std::size_t l = 0; l < ws.size(); ++l) {
      T const* in = l == 0 ? x_d.data() : acts[l - 1].data();
      dense_view<T const> iv{batch, widths[l], widths[l], in};
      store.forward_rows(l, exec, iv, acts[l].view(), epilogue_relu<float>(nullptr, -1), rows, nullptr);
    }
    store.end_pass(exec);
    // the resident plans on the same inputs
    for (std::size_t l = 0; l < ws.size(); ++l) {
      ops::dense_sparse_plan<P, T> plan(ws[l], exec, plan_options{batch, true});
      auto bias_d = sdnn_test::upload(bs[l], exec);
      T const* in = l == 0 ? x_d.data() : ref[l - 1].data();
      plan.run_rows(exec, dense_view<T const>{batch, widths[l], widths[l], in}, ref[l].view(),
                    epilogue_relu<float>(bias_d.data(), widths[l + 1]), rows, nullptr);
      INFO(policy::name<P>() << " layer " << l);
      REQUIRE(same_bits(download(acts[l], exec), download(ref[l], exec)));
    }
  };
  run(policy::csc_gather<16, 256>{});
  run(policy::sparse_linear_default{});
}
