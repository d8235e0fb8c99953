// Device products with quantized CSR weights (linear/op/quantized_spmm.cuh, linear/kernel/spmm_quantized.cuh)
// against the host references (linear/op/quantized_spmm.hpp):
//  - dense x sparse Y = epi(X * W): bitwise equal (same order, zero inputs skipped, one rounding
//    per product and per add) for int8 per layer / per channel, symmetric / asymmetric, a
//    clipped variant, and codebook4; on seeded random non-integer data (X with zeros and
//    negative zeros), the three epilogues of sdnn_spmm_fixtures.hpp, and edge cases: no rows
//    of X, W with no rows / no columns / no entries, 1 x 1 x 1, empty rows and columns of W,
//    entries at the largest indices, K large enough that X is not staged in shared memory,
//    padded leading dimensions (the padding must stay untouched);
//  - sparse x dense C = epi(A * B): the device sums in float, the host in double, so random
//    data compare within |d - r| <= 2^-22 (len + 2) (sum_k |a_ik b_kj| + |bias|) (float
//    rounding of len products and adds plus the epilogue's adds), and small-integer data
//    (int8 symmetric per layer with max |w| = 127, so scale = 1; codebook of integers) with ==;
//  - the plan protocol: runs on a stream other than the home stream, can_implement refusing
//    inconsistent containers, shape errors, a container with no entries and no parameters.
#include "sdnn_gpu_test.cuh"
#include "sdnn_spmm_fixtures.hpp"

#include <sdnn/formats/quantized.hpp>
#include <sdnn/linear/op/quantized_spmm.cuh>
#include <sdnn/linear/op/quantized_spmm.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace sdnn_quantized_spmm_test {
using namespace sdnn;
using namespace sdnn_test;

namespace {

struct qcase {
  std::string name;
  std::int64_t m, k, n;     // X: m x k, W: k x n
  double density;           // of W
  double empty_rows = 0;    // fraction of W's rows (inputs) forced empty
  double empty_cols = 0;    // fraction of W's columns (outputs) forced empty
  bool corner = false;      // force the entry (k - 1, n - 1)
  std::int64_t ld_pad = 0;  // X and Y leading dimension = cols + ld_pad
};

std::vector<qcase> qcases() {
  return {
      {"no rows of X", 0, 5, 7, 0.5},
      {"W has no rows (K = 0)", 6, 0, 9, 0.5},
      {"W has no columns (N = 0)", 6, 9, 0, 0.5},
      {"no entries", 10, 12, 13, 0.0},
      {"1x1x1", 1, 1, 1, 1.0},
      {"one entry at the corner", 3, 17, 19, 0.0, 0, 0, true},
      {"empty rows and columns", 37, 53, 41, 0.3, 0.3, 0.3},
      {"odd sizes, padded ld", 131, 77, 133, 0.2, 0.1, 0.1, true, 3},
      {"stage 8 rows (K = 1500)", 45, 1500, 300, 0.05, 0.1, 0.05, true},
      {"stage 4 rows (K = 3000)", 21, 3000, 260, 0.02, 0.0, 0.0, true, 1},
      {"unstaged (K = 7000)", 19, 7000, 70, 0.02, 0.2, 0.1, true},
      {"many rows, few columns", 1030, 64, 5, 0.4, 0.0, 0.0, true},
  };
}

// W (k x n) with Laplace-like non-integer values; forced empty rows / columns, optional corner.
csr_matrix<float, int> random_w(qcase const& c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<char> col_off(static_cast<std::size_t>(c.n));
  for (auto& e : col_off) e = u(rng) < c.empty_cols;
  std::vector<int> rp{0}, ci;
  std::vector<float> v;
  for (std::int64_t i = 0; i < c.k; ++i) {
    bool const empty = u(rng) < c.empty_rows;
    for (std::int64_t j = 0; j < c.n; ++j) {
      bool take = !empty && !col_off[static_cast<std::size_t>(j)] && u(rng) < c.density;
      if (c.corner && i == c.k - 1 && j == c.n - 1) take = true;
      if (!take) continue;
      ci.push_back(static_cast<int>(j));
      double const e = -std::log(1.0 - u(rng)) * 0.05 * (u(rng) < 0.5 ? -1 : 1);
      v.push_back(static_cast<float>(e + 0.01 * (j % 3)));
    }
    rp.push_back(static_cast<int>(ci.size()));
  }
  return make_csr<float, int>(static_cast<int>(c.k), static_cast<int>(c.n), rp, ci, v);
}

// X (r x c): uniform in (-1, 1), 30 % zeros (some of them -0), the last column nonzero.
dense_matrix<float> random_x(std::int64_t r, std::int64_t c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f), z(0.f, 1.f);
  dense_matrix<float> m(r, c);
  for (std::int64_t i = 0; i < r; ++i)
    for (std::int64_t j = 0; j < c; ++j) {
      float const p = z(rng);
      m(i, j) = p < 0.25f ? 0.f : (p < 0.3f ? -0.f : u(rng));
      if (j == c - 1 && m(i, j) == 0.f) m(i, j) = 0.75f;
    }
  return m;
}

std::uint32_t bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// Every int8 variant the tests run, and a name for messages.
struct int8_variant {
  char const* name;
  int8_options o;
};
std::vector<int8_variant> int8_variants() {
  std::vector<int8_variant> v;
  for (auto g : {quant_granularity::per_layer, quant_granularity::per_channel})
    for (bool sym : {true, false}) {
      int8_options o;
      o.granularity = g;
      o.symmetric = sym;
      v.push_back({g == quant_granularity::per_layer ? (sym ? "int8 layer sym" : "int8 layer asym")
                                                     : (sym ? "int8 channel sym" : "int8 channel asym"),
                   o});
    }
  int8_options o;
  o.granularity = quant_granularity::per_channel;
  o.symmetric = false;
  o.clip = int8_clip::percentile;
  o.percentile = 0.95;
  v.push_back({"int8 channel asym percentile", o});
  return v;
}

// Y = epi(X * W) on the device (plan) against the host reference, bit for bit; Y's padding
// (ld > cols) must keep its 99s.
template <class Encoding>
void check_dense_sparse(quantized_csr<Encoding> const& q, qcase const& c, std::uint32_t seed, cuda_exec e,
                        std::string const& what) {
  auto const x = random_x(c.m, c.k, seed);
  epilogue_set const eps(c.n, e);
  ops::quantized_dense_sparse_plan<Encoding> plan(q, e);
  REQUIRE(plan.in_features() == c.k);
  REQUIRE(plan.out_features() == c.n);
  REQUIRE(plan.workspace_bytes() == 0);
  device_dense<float> dx(x, c.k + c.ld_pad, e);
  for (int ep = 0; ep < epilogue_set::count; ++ep) {
    dense_matrix<float> ref(c.m, c.n);
    ops::quantized_dense_sparse_spmm(host_exec{}, x.view(), q, ref.view(), eps.get(ep, false));
    device_dense<float> dy(dense_matrix<float>(c.m, c.n), c.n + c.ld_pad, e);
    plan.run(e, dx.cview(), dy.view(), eps.get(ep, true));
    auto const h = download(dy.d.data(), dy.d.size(), e);
    std::int64_t bad = 0;
    for (std::int64_t i = 0; i < c.m; ++i)
      for (std::int64_t j = 0; j < dy.ld; ++j) {
        float const d = h[static_cast<std::size_t>(i * dy.ld + j)];
        float const r = j < c.n ? ref(i, j) : 99.f;
        if (bits(d) != bits(r) && bad++ < 3)
          UNSCOPED_INFO(what << " / " << c.name << " / epilogue " << ep << ": Y(" << i << ", " << j << ") = " << d
                             << ", expected " << r);
      }
    CHECK(bad == 0);
  }
}

// C = epi(A * B) on the device against the host reference (double sums): == when `exact`,
// else within the float rounding bound of the file comment.
template <class Encoding>
void check_sparse_dense(quantized_csr<Encoding> const& q, std::int64_t n, std::uint32_t seed, bool exact,
                        cuda_exec e, std::string const& what) {
  std::int64_t const m = q.rows, k = q.cols;
  auto const b = exact ? random_dense(k, n, seed) : random_x(k, n, seed);
  epilogue_set const eps(n, e);
  auto const deq = dequantize(q);
  ops::quantized_spmm_plan<Encoding> plan(q, e);
  device_dense<float> db(b, n + 2, e);
  for (int ep = 0; ep < epilogue_set::count; ++ep) {
    auto const he = eps.get(ep, false);
    dense_matrix<float> ref(m, n);
    ops::quantized_spmm(host_exec{}, q, b.view(), ref.view(), he);
    device_dense<float> dc(dense_matrix<float>(m, n), n + 1, e);
    plan.run(e, db.cview(), dc.view(), eps.get(ep, true));
    auto const h = download(dc.d.data(), dc.d.size(), e);
    std::int64_t bad = 0;
    for (std::int64_t i = 0; i < m; ++i) {
      int const len = deq.row_ptr()[i + 1] - deq.row_ptr()[i];
      for (std::int64_t j = 0; j < dc.ld; ++j) {
        double const d = h[static_cast<std::size_t>(i * dc.ld + j)];
        bool ok;
        double r = 99.0, tol = 0.0;
        if (j < n) {
          r = ref(i, j);
          double s = std::fabs(he.bias ? he.bias[j] : 0.0) + std::fabs(double(he.bias_scalar));
          for (int p = deq.row_ptr()[i]; p < deq.row_ptr()[i + 1]; ++p)
            s += std::fabs(double(deq.values()[p]) * double(b(deq.col_idx()[p], j)));
          tol = exact ? 0.0 : std::ldexp(s, -22) * (len + 2);
        }
        ok = std::fabs(d - r) <= tol;
        if (!ok && bad++ < 3)
          UNSCOPED_INFO(what << " / epilogue " << ep << ": C(" << i << ", " << j << ") = " << d << ", expected " << r
                             << " (tolerance " << tol << ")");
      }
    }
    CHECK(bad == 0);
  }
}

}  // namespace

TEST_CASE("quantized dense x sparse on the device equals the host reference bit for bit",
          "[cuda][quantized][quantized_dense_sparse]") {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  {
    cuda_exec e{s};
    std::uint32_t seed = 4100;
    for (auto const& c : qcases()) {
      seed += 10;
      auto const w = random_w(c, seed);
      for (auto const& v : int8_variants()) check_dense_sparse(quantize_int8(w, v.o), c, seed + 1, e, v.name);
      check_dense_sparse(quantize_codebook4(w), c, seed + 2, e, "codebook4");
    }
  }
  SDNN_CUDA_CHECK(cudaStreamSynchronize(s));
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

TEST_CASE("quantized dense x sparse: duplicate entries keep the host's order; a wide codebook range",
          "[cuda][quantized][quantized_dense_sparse]") {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  {
    cuda_exec e{s};
    // Duplicates of (k, j) within a row of W, out of order, are summed in storage order by the
    // host; the transposed upload must keep that order. (csr_matrix refuses them, so the
    // quantized container is edited after quantization.) Values of very different magnitude
    // (within half range, for the codebook) make the order visible in float.
    std::vector<int> rp{0, 3, 5, 8}, ci{0, 1, 2, 0, 2, 0, 1, 2};
    std::vector<float> v{3e4f, 0.5f, -3e4f, 3.25f, 1e-3f, -7.f, 2.f, 1.f};
    auto const w = make_csr<float, int>(3, 3, rp, ci, v);
    std::vector<std::int32_t> const dup{2, 0, 2, 2, 2, 1, 0, 2};
    qcase const c{"duplicates", 5, 3, 3, 0};
    for (auto const& iv : int8_variants()) {
      auto q = quantize_int8(w, iv.o);
      q.col_idx = dup;
      check_dense_sparse(q, c, 77, e, iv.name);
    }
    auto q = quantize_codebook4(w);
    q.col_idx = dup;
    check_dense_sparse(q, c, 78, e, "codebook4");
  }
  SDNN_CUDA_CHECK(cudaStreamSynchronize(s));
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

TEST_CASE("quantized sparse x dense on the device matches the host reference (float vs double sums)",
          "[cuda][quantized][quantized_spmm]") {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  {
    cuda_exec e{s};
    std::uint32_t seed = 5100;
    // A (m x k) is the case's W (k x n) read as a CSR of k rows; B has `bn` columns.
    for (auto const& c : qcases()) {
      seed += 10;
      auto const a = random_w(c, seed);
      for (std::int64_t bn : {std::int64_t(1), std::int64_t(130), std::int64_t(515)}) {
        if (c.k * bn > 2000000) continue;
        std::string const what = c.name + " / B columns " + std::to_string(bn);
        for (auto const& v : int8_variants())
          check_sparse_dense(quantize_int8(a, v.o), bn, seed + 1, false, e, what + " / " + v.name);
        check_sparse_dense(quantize_codebook4(a), bn, seed + 2, false, e, what + " / codebook4");
      }
    }
    // No columns of B.
    auto const a = random_w(qcase{"", 0, 20, 30, 0.3}, 9);
    check_sparse_dense(quantize_codebook4(a), 0, 10, false, e, "B with no columns");
  }
  SDNN_CUDA_CHECK(cudaStreamSynchronize(s));
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

TEST_CASE("quantized sparse x dense is exact on small-integer data", "[cuda][quantized][quantized_spmm]") {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  {
    cuda_exec e{s};
    for (auto const& cs : csr_edge_cases()) {
      // int8 symmetric per layer: integers in [-127, 127] with 127 present, so scale = 1 and
      // every code decodes to its integer.
      auto const a = random_csr(cs, 600 + static_cast<std::uint32_t>(cs.m));
      std::vector<float> wv(a.values().begin(), a.values().end());
      for (auto& x : wv) x = float(int(x) * 40 % 127);
      if (!wv.empty()) wv[0] = 127.f;
      auto const wide = make_csr<float, int>(a.rows(), a.cols(), std::vector<int>(a.row_ptr().begin(), a.row_ptr().end()),
                                             std::vector<int>(a.col_idx().begin(), a.col_idx().end()), wv);
      auto const q8 = quantize_int8(wide);
      if (wide.nnz() > 0) REQUIRE(q8.enc.scale[0] == 1.0f);
      check_sparse_dense(q8, cs.n, 700, true, e, cs.name + " / int8 integers");
      // codebook4 of integers in [-3, 3]: k-means ends on the integers themselves.
      auto const qc = quantize_codebook4(a);
      auto const d = dequantize(qc);
      bool integral = true;
      for (std::int32_t p = 0; p < d.nnz(); ++p) integral &= d.values()[p] == a.values()[p];
      REQUIRE(integral);
      check_sparse_dense(qc, cs.n, 701, true, e, cs.name + " / codebook4 integers");
    }
  }
  SDNN_CUDA_CHECK(cudaStreamSynchronize(s));
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

TEST_CASE("quantized plans: other streams, can_implement, shape errors", "[cuda][quantized][plan]") {
  SDNN_REQUIRE_DEVICE();
  stream_pair sp;
  cuda_exec home{sp.a}, other{sp.b};
  qcase const c{"streams", 33, 40, 50, 0.2, 0.1, 0.1, true};
  auto const w = random_w(c, 31);
  auto const q = quantize_codebook4(w);
  auto const x = random_x(c.m, c.k, 32);
  dense_matrix<float> ref(c.m, c.n);
  ops::quantized_dense_sparse_spmm(host_exec{}, x.view(), q, ref.view(), epilogue_none<float>());
  {
    device_dense<float> dx(x, c.k, other), dy(dense_matrix<float>(c.m, c.n), c.n, other);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(other.stream));
    {
      ops::quantized_dense_sparse_plan<codebook4_encoding> plan(q, home);
      SDNN_CUDA_CHECK(cudaStreamSynchronize(home.stream));  // the upload is on the home stream
      plan.run(other, dx.cview(), dy.view(), epilogue_none<float>());
    }  // destroyed right after a run on another stream: the release waits for it
    auto const h = download(dy.d.data(), dy.d.size(), other);
    for (std::int64_t i = 0; i < c.m; ++i)
      for (std::int64_t j = 0; j < c.n; ++j) REQUIRE(bits(h[static_cast<std::size_t>(i * c.n + j)]) == bits(ref(i, j)));
    // The one-shot function on the device.
    device_dense<float> dy2(dense_matrix<float>(c.m, c.n), c.n, other);
    ops::quantized_dense_sparse_spmm(other, dx.cview(), q, dy2.view(), epilogue_none<float>());
    auto const h2 = download(dy2.d.data(), dy2.d.size(), other);
    for (std::int64_t i = 0; i < c.m; ++i)
      for (std::int64_t j = 0; j < c.n; ++j) REQUIRE(bits(h2[static_cast<std::size_t>(i * c.n + j)]) == bits(ref(i, j)));

    // Shape errors.
    ops::quantized_dense_sparse_plan<codebook4_encoding> plan(q, home);
    device_dense<float> bad(dense_matrix<float>(c.m, c.n + 1), c.n + 1, other);
    REQUIRE_THROWS_AS(plan.run(other, dx.cview(), bad.view(), epilogue_none<float>()), sdnn::error);
    ops::quantized_spmm_plan<codebook4_encoding> splan(q, home);
    REQUIRE_THROWS_AS(splan.run(other, dx.cview(), bad.view(), epilogue_none<float>()), sdnn::error);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(home.stream));
    SDNN_CUDA_CHECK(cudaStreamSynchronize(other.stream));
  }

  // A hand-made container without entries and without parameters: nothing is read, Y = epi(0).
  {
    quantized_csr<int8_encoding> empty;
    empty.rows = 4;
    empty.cols = 3;
    empty.row_ptr.assign(5, 0);
    empty.enc.granularity = quant_granularity::per_channel;
    REQUIRE(ops::quantized_dense_sparse_plan<int8_encoding>::can_implement(empty).ok());
    dense_matrix<float> x4(2, 4);
    for (auto& v : x4.values()) v = 1.f;
    device_dense<float> dx4(x4, 4, home), dy4(dense_matrix<float>(2, 3), 3, home);
    auto epi = epilogue_none<float>();
    epi.bias_scalar = 0.5f;
    ops::quantized_dense_sparse_spmm(home, dx4.cview(), empty, dy4.view(), epi);
    for (float v : download(dy4.d.data(), dy4.d.size(), home)) REQUIRE(v == 0.5f);
    device_dense<float> db4(dense_matrix<float>(3, 2), 2, home), dc4(dense_matrix<float>(4, 2), 2, home);
    ops::quantized_spmm(home, empty, db4.cview(), dc4.view(), epi);
    for (float v : download(dc4.d.data(), dc4.d.size(), home)) REQUIRE(v == 0.5f);
  }

  // Inconsistent containers are refused before anything reaches the device.
  auto q8 = quantize_int8(w);
  REQUIRE(ops::quantized_dense_sparse_plan<int8_encoding>::can_implement(q8).ok());
  auto broken = q8;
  broken.col_idx.back() = broken.cols;
  REQUIRE_FALSE(ops::quantized_dense_sparse_plan<int8_encoding>::can_implement(broken).ok());
  REQUIRE_THROWS_AS(ops::quantized_spmm_plan<int8_encoding>(broken, home), sdnn::error);
  broken = q8;
  broken.enc.q.pop_back();
  REQUIRE_FALSE(ops::quantized_spmm_plan<int8_encoding>::can_implement(broken).ok());
  broken = q8;
  broken.row_ptr[1] = broken.row_ptr[2] + 1;
  REQUIRE_FALSE(ops::quantized_spmm_plan<int8_encoding>::can_implement(broken).ok());
  auto qb = q;
  qb.enc.packed.pop_back();
  REQUIRE_FALSE(ops::quantized_dense_sparse_plan<codebook4_encoding>::can_implement(qb).ok());
  REQUIRE_THROWS_AS(ops::quantized_dense_sparse_plan<codebook4_encoding>(qb, home), sdnn::error);
}

}  // namespace sdnn_quantized_spmm_test
