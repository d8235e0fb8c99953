// Device training primitives (train/op/backward.cuh, train/kernel/backward.cuh) against the host reference
// (train/reference/backward.hpp, train/op/backward.hpp) on seeded random inputs and edge cases (no rows, one
// element, empty rows and columns of W, nnz = 0, padded leading dimensions), in float and
// double, plus a finite-difference check of a whole layer + softmax cross-entropy backward.
//
// Exactness: the device follows the host's order of operations without FMA contraction, so the
// gradients and the SGD step are compared bitwise, provided the host compiler did not contract
// a * b + c into an FMA in the reference either; fp_contracted<T>() probes that in this very
// translation unit and, if it did, the comparison falls back to a relative 1e-5 (float) /
// 1e-12 (double) (reported with WARN). The softmax loss and gradient use the device exp/log and
// another summation order: compared within 1e-12 relative (loss) and within a float/double
// rounding of the gradient.
#include "sdnn_gpu_test.cuh"

#include <sdnn/formats/copy.cuh>
#include <sdnn/train/op/backward.cuh>
#include <sdnn/train/op/backward.hpp>
#include <sdnn/linear/reference/spmm.hpp>
#include <sdnn/train/reference/backward.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace sdnn_train_device_test {
using namespace sdnn;

namespace {

// ---- host and device matrices ------------------------------------------------------------

// A host dense matrix with leading dimension ld >= cols (padding filled with a sentinel).
template <class T>
struct hmat {
  std::int64_t rows = 0, cols = 0, ld = 0;
  std::vector<T> v;
  hmat() = default;
  hmat(std::int64_t r, std::int64_t c, std::int64_t pad = 0)
      : rows(r), cols(c), ld(c + pad), v(static_cast<std::size_t>(r * (c + pad)), T(-99)) {}
  T& operator()(std::int64_t i, std::int64_t j) { return v[static_cast<std::size_t>(i * ld + j)]; }
  T operator()(std::int64_t i, std::int64_t j) const { return v[static_cast<std::size_t>(i * ld + j)]; }
  dense_view<T> view() { return {rows, cols, ld, v.data()}; }
  dense_view<T const> cview() const { return {rows, cols, ld, v.data()}; }
};

template <class T>
hmat<T> random_mat(std::int64_t r, std::int64_t c, std::uint32_t seed, double zero_share = 0.0,
                   std::int64_t pad = 0, double lo = -1.0, double hi = 1.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0), val(lo, hi);
  hmat<T> m(r, c, pad);
  for (std::int64_t i = 0; i < r; ++i)
    for (std::int64_t j = 0; j < c; ++j) m(i, j) = u(rng) < zero_share ? T(0) : static_cast<T>(val(rng));
  return m;
}

// A random in x out CSR: entries with probability `density`; row empty_row and column
// empty_col (if >= 0) hold nothing; row full_row (if >= 0) holds every column but empty_col.
template <class T, class Index>
csr_matrix<T, Index> random_w(Index in, Index out, double density, std::uint32_t seed, Index empty_row = -1,
                              Index empty_col = -1, Index full_row = -1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0), val(-1.0, 1.0);
  std::vector<Index> rp{0}, ci;
  std::vector<T> v;
  for (Index i = 0; i < in; ++i) {
    for (Index j = 0; j < out; ++j)
      if (i != empty_row && j != empty_col && (i == full_row || u(rng) < density)) {
        ci.push_back(j);
        v.push_back(static_cast<T>(val(rng)));
      }
    rp.push_back(static_cast<Index>(ci.size()));
  }
  return make_csr<T, Index>(in, out, rp, ci, v);
}

using sdnn_test::download;  // tests/common/sdnn_gpu_test.cuh
using sdnn_test::upload;

template <class T>
struct dmat {
  std::int64_t rows, cols, ld;
  device_buffer<T> b;
  dmat(hmat<T> const& h, cuda_exec e) : rows(h.rows), cols(h.cols), ld(h.ld), b(upload(h.v, e)) {}
  dense_view<T> view() { return {rows, cols, ld, b.data()}; }
  dense_view<T const> cview() const { return {rows, cols, ld, b.data()}; }
  hmat<T> back(cuda_exec e) const {
    hmat<T> h;
    h.rows = rows;
    h.cols = cols;
    h.ld = ld;
    h.v = download(b.data(), b.size(), e);
    return h;
  }
};

template <class T, class Index>
struct dcsr {
  Index rows, cols, nnz;
  device_buffer<Index> rp, ci;
  device_buffer<T> v;
  dcsr(csr_matrix<T, Index> const& h, cuda_exec e)
      : rows(h.rows()), cols(h.cols()), nnz(h.nnz()),
        rp(to_device(h.row_ptr().data(), h.row_ptr().size(), e)),
        ci(to_device(h.col_idx().data(), h.col_idx().size(), e)),
        v(to_device(h.values().data(), h.values().size(), e)) {}
  csr_view<T, Index> view() const { return {rows, cols, nnz, rp.data(), ci.data(), v.data()}; }
};

// ---- comparisons ---------------------------------------------------------------------------

// Whether the host compiler contracts a * b + c into an FMA here (then the reference can
// differ from the device in the last bits). a = b = 1 + 2^-12 (float) / 1 + 2^-27 (double):
// a * b rounds the 2^-24 / 2^-54 term away, the FMA keeps it.
template <class T>
__attribute__((noinline)) T mul_add(T a, T b, T c) { return a * b + c; }
template <class T>
bool fp_contracted() {
  volatile T const e = std::is_same_v<T, float> ? T(1.0 / 4096) : T(1.0 / 134217728.0);
  T const a = T(1) + e;
  T const c = -(T(1) + T(2) * e);
  return mul_add<T>(a, a, c) != T(0);
}

template <class T>
double rel_tol() { return std::is_same_v<T, float> ? 1e-5 : 1e-12; }

template <class T>
bool same_bits(T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0; }

// Bitwise (or within rel_tol when the host contracts) over the rows x cols of two matrices.
template <class T>
void require_match(hmat<T> const& ref, hmat<T> const& got, std::string const& what) {
  REQUIRE(ref.rows == got.rows);
  REQUIRE(ref.cols == got.cols);
  bool const exact = !fp_contracted<T>();
  if (!exact) WARN("the host compiler contracts a*b+c to an FMA: " << what << " compared within a tolerance");
  for (std::int64_t i = 0; i < ref.rows; ++i)
    for (std::int64_t j = 0; j < ref.cols; ++j) {
      INFO(what << " at (" << i << ", " << j << "): host " << ref(i, j) << " device " << got(i, j));
      if (exact) REQUIRE(same_bits(ref(i, j), got(i, j)));
      else REQUIRE(double(got(i, j)) == sdnn_test::Approx(double(ref(i, j))).epsilon(rel_tol<T>()).margin(1e-30));
    }
}
template <class T>
void require_match(std::vector<T> const& ref, std::vector<T> const& got, std::string const& what,
                   bool contracted = fp_contracted<T>()) {
  REQUIRE(ref.size() == got.size());
  for (std::size_t k = 0; k < ref.size(); ++k) {
    INFO(what << " [" << k << "]: host " << ref[k] << " device " << got[k]);
    if (!contracted) REQUIRE(same_bits(ref[k], got[k]));
    else REQUIRE(double(got[k]) == sdnn_test::Approx(double(ref[k])).epsilon(rel_tol<T>()).margin(1e-30));
  }
}

// The message of what f() throws ("" if it does not throw).
template <class F>
std::string thrown_message(F&& f) {
  try {
    f();
  } catch (std::exception const& ex) {
    return ex.what();
  }
  return "";
}

using sdnn_test::stream_guard;

// ---- the cases -----------------------------------------------------------------------------

struct layer_case {
  char const* name;
  int m, k, n;  // X is m x k, W is k x n, dY is m x n
  double density;
  int empty_row = -1, empty_col = -1, full_row = -1;
  std::int64_t pad = 0;
};

std::vector<layer_case> layer_cases() {
  return {
      {"no rows (M = 0)", 0, 7, 5, 0.5},
      {"one element", 1, 1, 1, 1.0},
      {"nnz = 0", 6, 9, 4, 0.0},
      {"empty row and column of W", 5, 7, 6, 0.5, 2, 4},
      {"W with no columns", 4, 3, 0, 0.5},
      {"W with no rows", 4, 0, 3, 0.5},
      {"padded ld, a full row", 33, 70, 45, 0.1, 3, 10, 5, 3},
      {"wider", 130, 300, 97, 0.05, 0, 96, 299},
  };
}

// The epilogues the backward is checked through, evaluated on P with some exact zeros.
template <class Acc>
basic_epilogue<Acc> make_epi(int mode, Acc const* bias) {
  switch (mode) {
    case 0: return epilogue_none<Acc>();
    case 1: return epilogue_relu<Acc>(bias);
    case 2: {
      auto e = epilogue_relu<Acc>(bias);
      e.has_cap = true;
      e.cap = Acc(0.3);
      e.bias_scalar = Acc(0.05);
      return e;
    }
    default: return epilogue_capped_relu<Acc>(Acc(-0.1), Acc(0.5));  // bias only where P != 0
  }
}
constexpr int epi_modes = 4;

}  // namespace

TEMPLATE_TEST_CASE("train device: epilogue backward and bias gradient match the host", "[cuda][train]", float,
                   double) {
  SDNN_REQUIRE_DEVICE();
  using T = TestType;
  using Acc = accumulator_t<T>;
  stream_guard sg;
  auto const e = sg.exec();
  std::uint32_t seed = 100;
  for (auto const& c : layer_cases()) {
    for (int mode = 0; mode < epi_modes; ++mode) {
      ++seed;
      INFO(c.name << ", epilogue mode " << mode);
      auto const p = random_mat<T>(c.m, c.n, seed, 0.2, c.pad);  // exact zeros: the Graph Challenge rule
      auto const dy = random_mat<T>(c.m, c.n, seed + 1, 0.0, c.pad);
      std::vector<Acc> bias(static_cast<std::size_t>(c.n));
      for (std::size_t j = 0; j < bias.size(); ++j) bias[j] = Acc(0.1) * Acc(int(j % 7) - 3);
      auto const d_bias = upload(bias, e);
      auto const he = make_epi<Acc>(mode, bias.data());
      auto const de = make_epi<Acc>(mode, c.n ? d_bias.data() : nullptr);

      hmat<T> dp_ref(c.m, c.n, c.pad);
      std::vector<Acc> db_ref(static_cast<std::size_t>(c.n), Acc(-5));
      reference::epilogue_backward(p.cview(), dy.cview(), he, dp_ref.view(), db_ref.data());

      dmat<T> d_p(p, e), d_dy(dy, e), d_dp(hmat<T>(c.m, c.n, c.pad), e);
      device_buffer<Acc> d_db(static_cast<std::size_t>(c.n), e);
      ops::epilogue_backward(e, d_p.cview(), d_dy.cview(), de, d_dp.view(), d_db.data());
      require_match(dp_ref, d_dp.back(e), "dP");
      require_match(db_ref, download(d_db.data(), d_db.size(), e), "dbias");

      // dP written over dY (allowed), no bias gradient (rows split over blocks)
      ops::epilogue_backward(e, d_p.cview(), d_dy.cview(), de, d_dy.view());
      require_match(dp_ref, d_dy.back(e), "dP in place of dY");

      // bias_backward: the plain column sums of dP
      std::vector<T> cs_ref(static_cast<std::size_t>(c.n), T(7));
      reference::bias_backward(dp_ref.cview(), cs_ref.data());
      device_buffer<T> d_cs(static_cast<std::size_t>(c.n), e);
      ops::bias_backward(e, d_dp.cview(), d_cs.data());
      require_match(cs_ref, download(d_cs.data(), d_cs.size(), e), "bias_backward");
    }
  }
}

TEMPLATE_TEST_CASE("train device: input gradient dX = dY W^T and weight gradient on W's pattern match the host",
                   "[cuda][train]", float, double) {
  SDNN_REQUIRE_DEVICE();
  using T = TestType;
  stream_guard sg;
  auto const e = sg.exec();
  std::uint32_t seed = 200;
  for (auto const& c : layer_cases()) {
    seed += 3;
    INFO(c.name);
    auto const w = random_w<T, int>(c.k, c.n, c.density, seed, c.empty_row, c.empty_col, c.full_row);
    auto const x = random_mat<T>(c.m, c.k, seed + 1, 0.3, c.pad);  // zero inputs: skipped by dW
    auto const dy = random_mat<T>(c.m, c.n, seed + 2, 0.1, c.pad);
    hmat<T> dx_ref(c.m, c.k, c.pad);
    reference::sparse_linear_backward_input(dy.cview(), w.view(), dx_ref.view());
    std::vector<T> dw_ref(static_cast<std::size_t>(w.nnz()));
    reference::sparse_linear_backward_weight(x.cview(), dy.cview(), w.view(), dw_ref.data());

    dcsr<T, int> dw_mat(w, e);
    dmat<T> d_x(x, e), d_dy(dy, e), d_dx(hmat<T>(c.m, c.k, c.pad), e);
    device_buffer<T> d_dw(static_cast<std::size_t>(w.nnz()), e);
    ops::sparse_linear_backward_input(e, d_dy.cview(), dw_mat.view(), d_dx.view());
    ops::sparse_linear_backward_weight(e, d_x.cview(), d_dy.cview(), dw_mat.view(), d_dw.data());
    auto const dx = d_dx.back(e);
    require_match(dx_ref, dx, "dX");
    require_match(dw_ref, download(d_dw.data(), d_dw.size(), e), "dW");
    if (c.empty_row >= 0)
      for (int r = 0; r < c.m; ++r) REQUIRE(dx(r, c.empty_row) == T(0));
    // padding of dX untouched
    for (int r = 0; r < c.m; ++r)
      for (std::int64_t j = c.k; j < dx.ld; ++j) REQUIRE(dx(r, j) == T(-99));
  }
}

TEST_CASE("train device: int64 indices and a second run give the same bits", "[cuda][train]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  auto const e = sg.exec();
  auto const w = random_w<float, std::int64_t>(200, 150, 0.05, 31, 7, 8, 9);
  auto const x = random_mat<float>(64, 200, 32, 0.3);
  auto const dy = random_mat<float>(64, 150, 33);
  dcsr<float, std::int64_t> dw_mat(w, e);
  dmat<float> d_x(x, e), d_dy(dy, e), d_dx(hmat<float>(64, 200), e);
  device_buffer<float> d_dw(static_cast<std::size_t>(w.nnz()), e);
  std::vector<float> first_dx, first_dw;
  for (int run = 0; run < 2; ++run) {
    ops::sparse_linear_backward_input(e, d_dy.cview(), dw_mat.view(), d_dx.view());
    ops::sparse_linear_backward_weight(e, d_x.cview(), d_dy.cview(), dw_mat.view(), d_dw.data());
    auto const dx = d_dx.back(e).v;
    auto const dw = download(d_dw.data(), d_dw.size(), e);
    if (run == 0) {
      first_dx = dx;
      first_dw = dw;
    } else {
      require_match(first_dx, dx, "dX run to run", false);
      require_match(first_dw, dw, "dW run to run", false);
    }
  }
  hmat<float> dx_ref(64, 200);
  reference::sparse_linear_backward_input(dy.cview(), w.view(), dx_ref.view());
  std::vector<float> dw_ref(static_cast<std::size_t>(w.nnz()));
  reference::sparse_linear_backward_weight(x.cview(), dy.cview(), w.view(), dw_ref.data());
  require_match(dx_ref.v, first_dx, "dX int64");
  require_match(dw_ref, first_dw, "dW int64");
}

TEMPLATE_TEST_CASE("train device: sparse_linear_backward matches the host executor", "[cuda][train]", float,
                   double) {
  SDNN_REQUIRE_DEVICE();
  using T = TestType;
  using Acc = accumulator_t<T>;
  stream_guard sg;
  auto const e = sg.exec();
  std::uint32_t seed = 300;
  for (auto const& c : layer_cases()) {
    for (int mode = 1; mode < 3; ++mode) {  // bias + ReLU, bias + ReLU + cap
      seed += 5;
      INFO(c.name << ", epilogue mode " << mode);
      auto const w = random_w<T, int>(c.k, c.n, c.density, seed, c.empty_row, c.empty_col, c.full_row);
      auto const x = random_mat<T>(c.m, c.k, seed + 1, 0.3, c.pad);
      auto const dy = random_mat<T>(c.m, c.n, seed + 2, 0.0, c.pad);
      std::vector<Acc> bias(static_cast<std::size_t>(c.n));
      for (std::size_t j = 0; j < bias.size(); ++j) bias[j] = Acc(0.05) * Acc(int(j % 5) - 2);
      auto const d_bias = upload(bias, e);
      hmat<T> p(c.m, c.n, c.pad);
      for (int r = 0; r < c.m; ++r)
        for (int j = 0; j < c.n; ++j) p(r, j) = T(0);  // the padding keeps its sentinel
      for (int r = 0; r < c.m; ++r)  // P = X * W
        for (int i = 0; i < c.k; ++i)
          for (int q = w.row_ptr()[i]; q < w.row_ptr()[i + 1]; ++q) p(r, w.col_idx()[q]) += x(r, i) * w.values()[q];

      hmat<T> dp_ref(c.m, c.n, c.pad), dx_ref(c.m, c.k, c.pad);
      std::vector<T> dw_ref(static_cast<std::size_t>(w.nnz())), db_ref(static_cast<std::size_t>(c.n));
      ops::sparse_linear_grads<T> hg{dp_ref.view(), dw_ref.data(), db_ref.data(), dx_ref.view()};
      ops::sparse_linear_backward(host_exec{}, x.cview(), p.cview(), dy.cview(), w.view(),
                                  make_epi<Acc>(mode, bias.data()), hg);

      dcsr<T, int> dw_mat(w, e);
      dmat<T> d_x(x, e), d_p(p, e), d_dy(dy, e), d_dp(hmat<T>(c.m, c.n, c.pad), e), d_dx(hmat<T>(c.m, c.k, c.pad), e);
      device_buffer<T> d_dw(static_cast<std::size_t>(w.nnz()), e), d_db(static_cast<std::size_t>(c.n), e);
      ops::sparse_linear_grads<T> dg{d_dp.view(), d_dw.data(), d_db.data(), d_dx.view()};
      ops::sparse_linear_backward(e, d_x.cview(), d_p.cview(), d_dy.cview(), dw_mat.view(),
                                  make_epi<Acc>(mode, c.n ? d_bias.data() : nullptr), dg);
      require_match(dp_ref, d_dp.back(e), "dP");
      require_match(dx_ref, d_dx.back(e), "dX");
      require_match(dw_ref, download(d_dw.data(), d_dw.size(), e), "dW");
      require_match(db_ref, download(d_db.data(), d_db.size(), e), "dbias");
    }
  }
}

TEMPLATE_TEST_CASE("train device: softmax cross-entropy loss and gradient match the host", "[cuda][train]", float,
                   double) {
  SDNN_REQUIRE_DEVICE();
  using T = TestType;
  stream_guard sg;
  auto const e = sg.exec();
  struct sc {
    int b, c;
    double scale;
    std::int64_t pad;
  };
  std::uint32_t seed = 400;
  for (auto const& s : {sc{0, 10, 1, 0}, sc{1, 1, 1, 0}, sc{1, 10, 1, 0}, sc{7, 3, 5, 2}, sc{300, 10, 3, 0},
                        sc{65, 100, 30, 1}, sc{33, 1000, 2, 0}}) {
    ++seed;
    INFO("B " << s.b << ", C " << s.c << ", scale " << s.scale);
    auto const z = random_mat<T>(s.b, s.c, seed, 0.0, s.pad, -s.scale, s.scale);
    std::mt19937 rng(seed);
    std::vector<std::uint8_t> lab8(static_cast<std::size_t>(s.b));
    std::vector<std::int32_t> lab32(static_cast<std::size_t>(s.b));
    for (int r = 0; r < s.b; ++r) lab32[r] = static_cast<std::int32_t>(lab8[r] = static_cast<std::uint8_t>(rng() % std::min(s.c, 256)));
    hmat<T> g_ref(s.b, s.c, s.pad);
    double const l_ref = reference::softmax_cross_entropy(z.cview(), lab32.data(), g_ref.view());

    dmat<T> d_z(z, e), d_g(hmat<T>(s.b, s.c, s.pad), e);
    auto const d_l32 = upload(lab32, e);
    auto const d_l8 = upload(lab8, e);
    double const l32 = ops::softmax_cross_entropy(e, d_z.cview(), d_l32.data(), d_g.view());
    REQUIRE(l32 == sdnn_test::Approx(l_ref).epsilon(1e-12).margin(1e-14));
    auto const g = d_g.back(e);
    // One rounding of T relative, or an absolute 1e-15 where softmax - 1 cancels (a few double
    // ulps of softmax <= 1, divided by B).
    double const gtol = std::is_same_v<T, float> ? 2e-7 : 1e-13;
    for (int r = 0; r < s.b; ++r)
      for (int j = 0; j < s.c; ++j) {
        INFO("dlogits(" << r << ", " << j << ")");
        REQUIRE(double(g(r, j)) == sdnn_test::Approx(double(g_ref(r, j))).epsilon(gtol).margin(1e-15));
      }
    // uint8 labels, loss only (into device memory, asynchronously), twice: the same bits
    device_buffer<double> d_loss(2, e);
    ops::softmax_cross_entropy_async(e, d_z.cview(), d_l8.data(), d_loss.data());
    ops::softmax_cross_entropy_async(e, d_z.cview(), d_l8.data(), d_loss.data() + 1);
    auto const l8 = download(d_loss.data(), 2, e);
    REQUIRE(same_bits(l8[0], l32));
    REQUIRE(same_bits(l8[1], l32));
    // gradient written over the logits
    double const l_alias = ops::softmax_cross_entropy(e, d_z.cview(), d_l32.data(), d_z.view());
    REQUIRE(same_bits(l_alias, l32));
    auto const g_alias = d_z.back(e);
    for (int r = 0; r < s.b; ++r)
      for (int j = 0; j < s.c; ++j) REQUIRE(same_bits(g_alias(r, j), g(r, j)));
  }
}

TEST_CASE("train device: softmax cross-entropy rejects a label out of range as the host does", "[cuda][train]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  auto const e = sg.exec();
  auto const z = random_mat<float>(5, 4, 9);
  std::vector<int> lab{0, 3, 4, -1, 2};  // rows 2 and 3 are bad: the lowest is named
  dmat<float> d_z(z, e);
  auto const d_lab = upload(lab, e);
  auto const dev_msg = thrown_message([&] { ops::softmax_cross_entropy(e, d_z.cview(), d_lab.data()); });
  auto const host_msg = thrown_message([&] { reference::softmax_cross_entropy(z.cview(), lab.data()); });
  INFO("device: " << dev_msg << "\nhost: " << host_msg);
  REQUIRE(dev_msg.find("label of row 2 is 4, not in [0, 4)") != std::string::npos);
  REQUIRE(host_msg.find("label of row 2 is 4, not in [0, 4)") != std::string::npos);
  device_buffer<double> d_loss(1, e);
  ops::softmax_cross_entropy_async(e, d_z.cview(), d_lab.data(), d_loss.data());
  REQUIRE(std::isnan(download(d_loss.data(), 1, e)[0]));
  dmat<float> no_classes(hmat<float>(2, 0), e);
  REQUIRE_THROWS(ops::softmax_cross_entropy(e, no_classes.cview(), d_lab.data()));
}

TEMPLATE_TEST_CASE("train device: SGD with momentum, weight decay, Nesterov matches the host and keeps the pattern",
                   "[cuda][train]", float, double) {
  SDNN_REQUIRE_DEVICE();
  using T = TestType;
  stream_guard sg;
  auto const e = sg.exec();
  reference::sgd_options plain;
  plain.lr = 0.1;
  reference::sgd_options mom = plain;
  mom.momentum = 0.9;
  mom.weight_decay = 1e-3;
  reference::sgd_options nest = mom;
  nest.nesterov = true;
  bool const contracted = fp_contracted<double>();  // the step is computed in double
  for (int n : {0, 1, 1000}) {
    int k = 0;
    for (auto const& o : {plain, mom, nest}) {
      ++k;
      INFO("n " << n << ", options " << k);
      auto const w0 = random_mat<T>(1, n, 500 + n + k).v;
      auto const g = random_mat<T>(1, n, 600 + n + k).v;
      auto w_ref = w0;
      std::vector<T> v_ref(static_cast<std::size_t>(n), T(0));
      auto d_w = upload(w0, e);
      auto const d_g = upload(g, e);
      device_buffer<T> d_v(static_cast<std::size_t>(n), e);
      if (n) SDNN_CUDA_CHECK(cudaMemsetAsync(d_v.data(), 0, n * sizeof(T), e.stream));
      bool const use_v = o.momentum != 0.0;
      for (int step = 0; step < 3; ++step) {
        reference::sgd_step(w_ref.data(), g.data(), use_v ? v_ref.data() : nullptr, w_ref.size(), o);
        ops::sgd_step(e, d_w.data(), d_g.data(), use_v ? d_v.data() : nullptr, static_cast<std::size_t>(n), o);
      }
      require_match(w_ref, download(d_w.data(), d_w.size(), e), "w", contracted);
      if (use_v) require_match(v_ref, download(d_v.data(), d_v.size(), e), "velocity", contracted);
    }
  }
  // the CSR form: the velocity is allocated and zeroed, row_ptr / col_idx never change
  auto w = random_w<T, int>(40, 30, 0.2, 77, 3, 4);
  auto dwm = to_device(w, e);
  auto const dw = random_mat<T>(1, w.nnz(), 78).v;
  auto const d_dw = upload(dw, e);
  device_buffer<T> d_vel;
  std::vector<T> v_ref;
  for (int step = 0; step < 2; ++step) {
    reference::sgd_step(w, dw, v_ref, mom);
    ops::sgd_step(e, dwm, d_dw, d_vel, mom);
  }
  REQUIRE(d_vel.size() == static_cast<std::size_t>(w.nnz()));
  auto const back = to_host(dwm, e);
  REQUIRE(std::vector<int>(back.row_ptr().begin(), back.row_ptr().end()) ==
          std::vector<int>(w.row_ptr().begin(), w.row_ptr().end()));
  REQUIRE(std::vector<int>(back.col_idx().begin(), back.col_idx().end()) ==
          std::vector<int>(w.col_idx().begin(), w.col_idx().end()));
  require_match(std::vector<T>(w.values().begin(), w.values().end()),
                std::vector<T>(back.values().begin(), back.values().end()), "CSR values", contracted);
  require_match(v_ref, download(d_vel.data(), d_vel.size(), e), "CSR velocity", contracted);
  device_buffer<T> wrong(3, e);
  REQUIRE_THROWS(ops::sgd_step(e, dwm, wrong, d_vel, mom));
  REQUIRE_THROWS(ops::sgd_step(e, dwm.values().data(), d_dw.data(), static_cast<T*>(nullptr), dw.size(), mom));
}

TEST_CASE("train device: layer + softmax cross-entropy gradients match central differences", "[cuda][train]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  auto const e = sg.exec();
  int const B = 4, in = 6, out = 5;
  auto w = random_w<double, int>(in, out, 0.6, 901, /*empty_row=*/1, /*empty_col=*/3);
  auto x = random_mat<double>(B, in, 902, 0.2);
  std::vector<double> bias{0.1, -0.2, 0.3, 0.05, -0.1};
  std::vector<int> labels{0, 4, 2, 2};
  // L(x, W, bias) = mean softmax cross-entropy of relu(X W + bias), all on the host in double.
  auto loss = [&] {
    hmat<double> y(B, out);
    reference::dense_sparse_spmm<double, int, double>(x.cview(), w.view(), y.view(), epilogue_relu<double>(bias.data()));
    return reference::softmax_cross_entropy(y.cview(), labels.data());
  };
  hmat<double> p(B, out), y(B, out);
  reference::dense_sparse_spmm<double, int, double>(x.cview(), w.view(), p.view(), epilogue_none<double>());
  reference::apply_epilogue(p.cview(), epilogue_relu<double>(bias.data()), y.view());

  // device: dY from the loss, then the layer's backward
  dmat<double> d_y(y, e), d_p(p, e), d_x(x, e), d_dy(hmat<double>(B, out), e), d_dp(hmat<double>(B, out), e),
      d_dx(hmat<double>(B, in), e);
  dcsr<double, int> d_w(w, e);
  auto const d_bias = upload(bias, e);
  auto const d_lab = upload(labels, e);
  device_buffer<double> d_dw(static_cast<std::size_t>(w.nnz()), e), d_db(bias.size(), e);
  double const l = ops::softmax_cross_entropy(e, d_y.cview(), d_lab.data(), d_dy.view());
  REQUIRE(l == sdnn_test::Approx(loss()).epsilon(1e-12));
  ops::sparse_linear_backward(e, d_x.cview(), d_p.cview(), d_dy.cview(), d_w.view(),
                              epilogue_relu<double>(d_bias.data()),
                              ops::sparse_linear_grads<double>{d_dp.view(), d_dw.data(), d_db.data(), d_dx.view()});
  auto const dw = download(d_dw.data(), d_dw.size(), e);
  auto const db = download(d_db.data(), d_db.size(), e);
  auto const dx = d_dx.back(e);

  auto central = [&](double& param) {
    double const keep = param, h = 1e-6;
    param = keep + h;
    double const up = loss();
    param = keep - h;
    double const down = loss();
    param = keep;
    return (up - down) / (2 * h);
  };
  REQUIRE(w.nnz() > 0);
  for (int q = 0; q < w.nnz(); ++q) {
    INFO("dW[" << q << "]");
    REQUIRE(dw[q] == sdnn_test::Approx(central(w.values()[q])).margin(1e-7));
  }
  for (int j = 0; j < out; ++j) {
    INFO("dbias[" << j << "]");
    REQUIRE(db[j] == sdnn_test::Approx(central(bias[j])).margin(1e-7));
  }
  for (int r = 0; r < B; ++r)
    for (int i = 0; i < in; ++i) {
      INFO("dX(" << r << ", " << i << ")");
      REQUIRE(dx(r, i) == sdnn_test::Approx(central(x(r, i))).margin(1e-7));
    }
  for (int r = 0; r < B; ++r) REQUIRE(dx(r, 1) == 0.0);  // the empty row of W
}

}  // namespace sdnn_train_device_test
