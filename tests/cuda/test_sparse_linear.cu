// Device sparse_linear: dense_csc_spmm edge cases, every policy of layers::sparse_linear and
// pipeline::challenge_network against the host reference (sdnn::reference) and the official
// Graph Challenge truth.
//
// Tolerances: the csc_gather kernels sum each output in the reference's order (k ascending,
// float), so their results are compared with ==. cuSPARSE sums in its own order: final
// activations are compared with |a - b| <= 1e-4 * max(1, |b|) there (categories exactly).
#include "sdnn_gpu_test.cuh"

#include <cuda_fp16.h>

#include <sdnn/challenge/inputs.hpp>
#include <sdnn/challenge/kernel/radixnet.cuh>
#include <sdnn/challenge/radixnet.hpp>
#include <sdnn/challenge/tsv.hpp>
#include <sdnn/io/mnist_idx.hpp>
#include <sdnn/linear/kernel/spmm_dense_csc.cuh>
#include <sdnn/linear/sparse_linear.cuh>
#include <sdnn/challenge/pipeline.cuh>
#include <sdnn/pipeline/sequential.cuh>
#include <sdnn/challenge/reference.hpp>
#include <sdnn/linear/reference/spmm.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace sdnn;

namespace {

using sdnn_test::stream_guard;

csr_matrix<float, std::int32_t> random_csr(std::int32_t rows, std::int32_t cols, double density, std::uint32_t seed,
                                           double empty_row_fraction = 0.0) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::int32_t> rp{0}, ci;
  std::vector<float> v;
  for (std::int32_t i = 0; i < rows; ++i) {
    bool const empty = u(g) < empty_row_fraction;
    for (std::int32_t j = 0; j < cols && !empty; ++j)
      if (u(g) < density) {
        ci.push_back(j);
        v.push_back(static_cast<float>(1 + g() % 3));
      }
    rp.push_back(static_cast<std::int32_t>(ci.size()));
  }
  return make_csr<float, std::int32_t>(rows, cols, rp, ci, v);
}

template <class T>
csr_matrix<T, std::int32_t, device_space> upload(csr_matrix<float, std::int32_t> const& h, cuda_exec exec) {
  csr_matrix<T, std::int32_t, device_space> d(h.rows(), h.cols(), h.nnz(), exec);
  copy(d.row_ptr(), h.row_ptr(), exec);
  copy(d.col_idx(), h.col_idx(), exec);
  host_buffer<T> v(h.values().size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = value_cast<T>(h.values()[i]);
  copy(d.values(), v, exec);
  SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
  return d;
}

csr_matrix<float, std::int32_t> transpose_host(csr_matrix<float, std::int32_t> const& a) {
  auto v = a.view();
  std::vector<std::int32_t> rp(static_cast<std::size_t>(v.cols) + 1, 0), ci(static_cast<std::size_t>(v.nnz));
  std::vector<float> vals(static_cast<std::size_t>(v.nnz));
  for (std::int32_t p = 0; p < v.nnz; ++p) ++rp[static_cast<std::size_t>(v.col_idx[p]) + 1];
  for (std::size_t j = 0; j < static_cast<std::size_t>(v.cols); ++j) rp[j + 1] += rp[j];
  std::vector<std::int32_t> pos(rp.begin(), rp.end() - 1);
  for (std::int32_t i = 0; i < v.rows; ++i)
    for (std::int32_t p = v.row_ptr[i]; p < v.row_ptr[i + 1]; ++p) {
      auto const q = pos[static_cast<std::size_t>(v.col_idx[p])]++;
      ci[static_cast<std::size_t>(q)] = i;
      vals[static_cast<std::size_t>(q)] = v.values[p];
    }
  return make_csr<float, std::int32_t>(v.cols, v.rows, rp, ci, vals);
}

dense_matrix<float> to_dense_host(csr_matrix<float, std::int32_t> const& a) {
  dense_matrix<float> d(a.rows(), a.cols());
  auto v = a.view();
  for (std::int32_t i = 0; i < v.rows; ++i)
    for (std::int32_t p = v.row_ptr[i]; p < v.row_ptr[i + 1]; ++p) d(i, v.col_idx[p]) = v.values[p];
  return d;
}

// dense_csc_spmm on (rows x k) * (k x n) with an optional row list; checks listed rows against
// the host reference and unlisted rows keep their poison.
template <class T>
void check_dense_csc(std::int32_t rows, std::int32_t k, std::int32_t n, double keep_fraction, std::uint32_t seed,
                     cuda_exec exec) {
  auto ah = random_csr(rows, k, 0.3, seed, 0.2);
  auto b = random_csr(k, n, 0.1, seed + 7, 0.1);  // B: k x n, some empty rows
  auto bt = transpose_host(b);
  auto ad = to_dense_host(ah);
  std::mt19937 g(seed);
  std::vector<std::int32_t> list;
  for (std::int32_t r = 0; r < rows; ++r)
    if (std::uniform_real_distribution<double>(0, 1)(g) < keep_fraction) list.push_back(r);
  bool const use_list = keep_fraction < 1.0;
  auto const epi = epilogue_capped_relu<float>(-1.f, 32.f);

  host_buffer<T> a_h(static_cast<std::size_t>(rows) * k);
  for (std::size_t i = 0; i < a_h.size(); ++i) a_h[i] = value_cast<T>(ad.data()[i]);
  auto a_d = copy_to<device_space>(a_h, exec);
  T const poison = value_cast<T>(-7.f);
  host_buffer<T> c_h(static_cast<std::size_t>(rows) * n, poison);
  auto c_d = copy_to<device_space>(c_h, exec);
  auto bt_d = upload<T>(bt, exec);
  host_buffer<std::int32_t> list_h(list.begin(), list.end());
  auto list_d = copy_to<device_space>(list_h, exec);
  host_buffer<std::int32_t> cnt_h(std::size_t{1}, static_cast<std::int32_t>(list.size()));
  auto cnt_d = copy_to<device_space>(cnt_h, exec);

  dense_view<T const> a{rows, k, k, a_d.data()};
  dense_view<T> c{rows, n, n, c_d.data()};
  // variant 0: dense_csc_spmm; variant 1: footprint tiles (tiled_csc_spmm)
  for (int variant = 0; variant < 2; ++variant) {
    copy(c_d, c_h, exec);
    if (variant == 0) {
      if (use_list)
        kernels::dense_csc_spmm(a, bt_d.view(), c, epi, list_d.data(), cnt_d.data(), rows, exec);
      else
        kernels::dense_csc_spmm(a, bt_d.view(), c, epi, static_cast<std::int32_t const*>(nullptr),
                                static_cast<std::int32_t const*>(nullptr), -1, exec);
    } else {
      csr_matrix<T, std::int32_t> bt_t(bt.rows(), bt.cols(), bt.nnz());
      std::copy(bt.row_ptr().begin(), bt.row_ptr().end(), bt_t.row_ptr().begin());
      std::copy(bt.col_idx().begin(), bt.col_idx().end(), bt_t.col_idx().begin());
      for (std::size_t i = 0; i < bt.values().size(); ++i) bt_t.values()[i] = value_cast<T>(bt.values()[i]);
      csc_tiles_host<T> th;
      if (!build_csc_tiles(bt_t.view(), 256, 1024, th)) continue;
      auto up = [&](auto const& v) {
        using E = typename std::decay_t<decltype(v)>::value_type;
        host_buffer<E> hb(v.begin(), v.end());
        return copy_to<device_space>(hb, exec);
      };
      auto fp_ptr = up(th.fp_ptr), fp = up(th.fp), col_ptr = up(th.col_ptr), cols = up(th.cols),
           nnz_ptr = up(th.nnz_ptr);
      auto lidx = up(th.lidx);
      auto vals = up(th.vals);
      csc_tiles_view<T> tv{th.n, th.k, th.tiles, th.max_footprint, fp_ptr.data(), fp.data(), col_ptr.data(),
                                    cols.data(), nnz_ptr.data(), lidx.data(), vals.data()};
      if (use_list)
        kernels::tiled_csc_spmm<16, 256>(a, tv, c, epi, list_d.data(), cnt_d.data(), rows, static_cast<int*>(nullptr),
                                         exec);
      else
        kernels::tiled_csc_spmm<16, 256>(a, tv, c, epi, static_cast<std::int32_t const*>(nullptr),
                                         static_cast<std::int32_t const*>(nullptr), -1, static_cast<int*>(nullptr),
                                         exec);
      SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    }
    auto out = sdnn_test::to_vector(c_d, exec.stream);

    std::vector<bool> listed(static_cast<std::size_t>(rows), !use_list);
    for (auto r : list) listed[static_cast<std::size_t>(r)] = true;
    std::vector<float> acc;
    std::vector<float> ref(static_cast<std::size_t>(n));
    for (std::int32_t r = 0; r < rows; ++r) {
      reference::dense_sparse_row(ad.data() + static_cast<std::int64_t>(r) * k, b.view(), epi, acc, ref.data());
      for (std::int32_t j = 0; j < n; ++j) {
        float const got = value_cast<float>(out[static_cast<std::size_t>(r) * n + j]);
        float const want = listed[static_cast<std::size_t>(r)] ? value_cast<float>(value_cast<T>(ref[j])) : -7.f;
        if (got != want) {
          INFO("variant " << variant << " rows " << rows << " k " << k << " n " << n << " row " << r << " col " << j);
          REQUIRE(got == want);
        }
      }
    }
  }
}

template <class Policy>
using layer_of = layers::sparse_linear<float, format::csr, Policy>;

template <class Policy>
pipeline::challenge_result run_device(std::vector<csr_matrix<float, std::int32_t>> const& ws, float bias,
                                      csr_matrix<float, std::int32_t> const& inputs, cuda_exec exec,
                                      std::int64_t max_batch = 0) {
  // Odd layers from host weights (transposed and tiled on the host, uploaded once at plan
  // time), even layers from device weights (transposed on the device): both paths of the plan.
  std::vector<std::shared_ptr<layer_of<Policy>>> layers;
  for (std::size_t l = 0; l < ws.size(); ++l) {
    if (l % 2) {
      csr_matrix<float, std::int32_t> w(ws[l].rows(), ws[l].cols(), ws[l].nnz());
      std::copy(ws[l].row_ptr().begin(), ws[l].row_ptr().end(), w.row_ptr().begin());
      std::copy(ws[l].col_idx().begin(), ws[l].col_idx().end(), w.col_idx().begin());
      std::copy(ws[l].values().begin(), ws[l].values().end(), w.values().begin());
      layers.push_back(std::make_shared<layer_of<Policy>>(std::move(w), epilogue_capped_relu<float>(bias)));
    } else {
      auto d = upload<float>(ws[l], exec);
      layers.push_back(std::make_shared<layer_of<Policy>>(d, epilogue_capped_relu<float>(bias), exec));
    }
  }
  pipeline::challenge_network<Policy> net(layers);
  pipeline::challenge_options opt;
  opt.max_batch = max_batch;
  net.plan(inputs.rows(), exec, opt);
  auto in_d = upload<float>(inputs, exec);
  auto r1 = net.run(exec, in_d.view(), true);
  auto r2 = net.run(exec, in_d.view(), false);  // replay (graph reuse)
  REQUIRE(r2.categories == r1.categories);
  return r1;
}

template <class Policy>
void check_against(pipeline::challenge_result const& got, dense_matrix<float> const& ref_final,
                   std::vector<std::int32_t> const& ref_cats) {
  INFO("policy " << policy::name<Policy>());
  REQUIRE(got.categories == ref_cats);
  bool const exact = !policy::is_cusparse_v<Policy>;
  for (std::int64_t i = 0; i < ref_final.rows(); ++i)
    for (std::int64_t j = 0; j < ref_final.cols(); ++j) {
      float const a = got.final(i, j), b = ref_final(i, j);
      bool const ok = exact ? a == b : std::fabs(a - b) <= 1e-4f * std::max(1.f, std::fabs(b));
      if (!ok) {
        INFO("row " << i << " col " << j << " got " << a << " want " << b);
        REQUIRE(ok);
      }
    }
}

template <class... Policies>
void check_all_policies(std::vector<csr_matrix<float, std::int32_t>> const& ws, float bias,
                        csr_matrix<float, std::int32_t> const& inputs, cuda_exec exec, std::int64_t max_batch = 0) {
  auto ref = reference::challenge_infer(inputs, ws, bias);
  auto cats = reference::challenge_categories(ref);
  auto refd = to_dense_host(ref);
  (check_against<Policies>(run_device<Policies>(ws, bias, inputs, exec, max_batch), refd, cats), ...);
}

#define SDNN_ALL_CHALLENGE_POLICIES                                                                            \
  policy::sparse_linear_default, policy::skip_empty_rows<policy::csc_gather<16>>,                              \
      policy::skip_empty_rows<policy::csc_tiled<8>>, policy::csc_tiled<16>,                                     \
      policy::skip_empty_rows<policy::csc_tiled<32>>, policy::skip_empty_rows<policy::csc_gather<8>>,                               \
      policy::skip_empty_rows<policy::csc_gather<32>>, policy::csc_gather<16>, policy::cusparse_reuse_buffer, \
      policy::cusparse_buffer_per_call, policy::cusparse_filter_rows

}  // namespace

TEST_CASE("dense_csc_spmm matches the host reference on edge cases", "[cuda][sparse_linear]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  cuda_exec exec{sg.s};
  struct shape {
    std::int32_t rows, k, n;
  };
  // 0 rows; one column; one row; non-multiples of 4/16/256; a k too wide to stage in shared
  // memory (global gathers); and one needing the 4-row stage.
  for (shape s : {shape{0, 5, 7}, shape{1, 1, 1}, shape{37, 1, 65}, shape{50, 64, 1}, shape{100, 300, 257},
                  shape{33, 7000, 70}, shape{19, 5000, 300}, shape{70, 1024, 1024}}) {
    for (double keep : {1.0, 0.5, 0.0}) {
      check_dense_csc<float>(s.rows, s.k, s.n, keep, 11u + static_cast<std::uint32_t>(s.k), exec);
    }
  }
  check_dense_csc<__half>(45, 200, 130, 1.0, 5u, exec);
  check_dense_csc<__half>(45, 9000, 130, 0.5, 6u, exec);
  check_dense_csc<double>(21, 100, 33, 0.7, 7u, exec);
}

TEST_CASE("dense_csc_spmm with all rows dead writes nothing", "[cuda][sparse_linear]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  cuda_exec exec{sg.s};
  auto bt = upload<float>(transpose_host(random_csr(64, 64, 0.2, 3u)), exec);
  buffer<float, device_space> a(64 * 64, exec), c(64 * 64, exec);
  SDNN_CUDA_CHECK(cudaMemsetAsync(a.data(), 0, a.size() * sizeof(float), exec.stream));
  host_buffer<float> poison(std::size_t{64 * 64}, 5.f);
  copy(c, poison, exec);
  buffer<std::int32_t, device_space> list(64, exec), cnt(1, exec);
  SDNN_CUDA_CHECK(cudaMemsetAsync(cnt.data(), 0, sizeof(std::int32_t), exec.stream));
  kernels::dense_csc_spmm(dense_view<float const>{64, 64, 64, a.data()}, bt.view(), dense_view<float>{64, 64, 64, c.data()},
                          epilogue_capped_relu<float>(-0.3f), list.data(), cnt.data(), 64, exec);
  auto out = sdnn_test::to_vector(c, exec.stream);
  for (float v : out) REQUIRE(v == 5.f);
}

TEST_CASE("sparse_linear device policies and sequential match the host layer", "[cuda][sparse_linear]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  cuda_exec exec{sg.s};
  std::int32_t const n0 = 150, n1 = 90, n2 = 130, batch = 77;
  auto x = to_dense_host(random_csr(batch, n0, 0.2, 1u, 0.3));
  std::vector<float> bias(n2);
  for (std::int32_t j = 0; j < n2; ++j) bias[static_cast<std::size_t>(j)] = static_cast<float>(j % 3) - 1.f;
  auto e1 = epilogue_capped_relu<float>(-2.f);
  auto e2 = epilogue_relu(bias);  // bias on zeros: no row may be skipped
  sequential<float> host_seq;
  host_seq.add(std::make_shared<layers::sparse_linear<float>>(random_csr(n0, n1, 0.1, 2u), e1));
  host_seq.add(std::make_shared<layers::sparse_linear<float>>(random_csr(n1, n2, 0.1, 3u), e2));
  dense_matrix<float> want(batch, n2);
  host_seq.forward(host_exec{}, dense_view<float const>(x.view()), want.view());

  auto run = [&](auto tag) {
    using P = decltype(tag);
    sequential<float> seq;
    seq.add(std::make_shared<layer_of<P>>(random_csr(n0, n1, 0.1, 2u), e1));
    seq.add(std::make_shared<layer_of<P>>(random_csr(n1, n2, 0.1, 3u), e2));
    seq.plan(32, n0, exec);  // batches of 32 rows
    host_buffer<float> xh(x.data(), x.data() + x.size());
    auto xd = copy_to<device_space>(xh, exec);
    buffer<float, device_space> yd(static_cast<std::size_t>(batch) * n2, exec);
    seq.forward(exec, dense_view<float const>{batch, n0, n0, xd.data()}, dense_view<float>{batch, n2, n2, yd.data()});
    auto got = sdnn_test::to_vector(yd, exec.stream);
    INFO("policy " << policy::name<P>());
    for (std::int64_t i = 0; i < batch * n2; ++i) {
      float const a = got[static_cast<std::size_t>(i)], b = want.data()[i];
      bool const ok = policy::is_cusparse_v<P> ? std::fabs(a - b) <= 1e-4f * std::max(1.f, std::fabs(b)) : a == b;
      if (!ok) {
        INFO("element " << i << " got " << a << " want " << b);
        REQUIRE(ok);
      }
    }
  };
  run(policy::sparse_linear_default{});
  run(policy::csc_gather<4>{});
  run(policy::csc_tiled<16>{});
  run(policy::skip_empty_rows<policy::csc_tiled<8>>{});
  run(policy::skip_empty_rows<policy::csc_gather<32>>{});
  run(policy::cusparse_reuse_buffer{});
  run(policy::cusparse_buffer_per_call{});
  run(policy::cusparse_filter_rows{});
}

TEST_CASE("challenge_network: every policy on the official 1024 x 120 network, first 1200 images",
          "[cuda][sparse_linear][challenge]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  cuda_exec exec{sg.s};
  std::string const dir = sdnn_test::data_dir();
  auto images = io::read_challenge_images(dir + "/sparse-images-1024-first1200.tsv.gz", 1024, 1200);
  auto truth = io::read_categories(dir + "/neuron1024-l120-categories-first1200.tsv");
  std::vector<csr_matrix<float, std::int32_t>> ws;
  for (int l = 0; l < 120; ++l) ws.push_back(data::official_1024_layer(l));
  auto ref = reference::challenge_infer(images, ws, -0.3f);
  REQUIRE(reference::challenge_categories(ref) == truth);
  check_all_policies<SDNN_ALL_CHALLENGE_POLICIES>(ws, -0.3f, images, exec);
  // batches of 500 rows (3 batches, the last partial) give the same result
  check_all_policies<policy::sparse_linear_default>(ws, -0.3f, images, exec, 500);

  // the device-generated official network gives the same categories
  std::vector<std::shared_ptr<layer_of<policy::sparse_linear_default>>> layers;
  for (int l = 0; l < 120; ++l)
    layers.push_back(std::make_shared<layer_of<policy::sparse_linear_default>>(data::official_1024_layer_device(l, exec),
                                                                               epilogue_capped_relu<float>(-0.3f), exec));
  pipeline::challenge_network<> net(layers);
  net.plan(images.rows(), exec);
  auto in_d = upload<float>(images, exec);
  REQUIRE(net.run(exec, in_d.view()).categories == truth);
}

TEST_CASE("challenge_network: every policy on generated networks of the four sizes", "[cuda][sparse_linear][challenge]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  cuda_exec exec{sg.s};
  auto mnist = io::read_idx_images(std::string(sdnn_test::data_dir()) + "/mnist-10k-images-idx3-ubyte.gz");
  struct cfg {
    std::int32_t n, layers, inputs;
  };
  for (cfg c : {cfg{1024, 24, 300}, cfg{4096, 16, 120}, cfg{16384, 12, 48}, cfg{65536, 14, 16}}) {
    INFO("N = " << c.n << ", layers = " << c.layers << ", inputs = " << c.inputs);
    // every 7th MNIST digit, so that all ten classes appear (the file is grouped by digit)
    io::idx_images pick;
    pick.rows = mnist.rows;
    pick.cols = mnist.cols;
    std::size_t const px = static_cast<std::size_t>(mnist.rows) * mnist.cols;
    for (std::int32_t i = 0; i < c.inputs; ++i) {
      std::size_t const src = static_cast<std::size_t>((i * 331) % mnist.count) * px;
      pick.pixels.insert(pick.pixels.end(), mnist.pixels.begin() + static_cast<std::ptrdiff_t>(src),
                         mnist.pixels.begin() + static_cast<std::ptrdiff_t>(src + px));
      ++pick.count;
    }
    auto inputs = data::challenge_inputs_from_mnist(pick, c.n, c.inputs);
    std::vector<csr_matrix<float, std::int32_t>> ws;
    for (int l = 0; l < c.layers; ++l) ws.push_back(data::radixnet_layer(c.n, l, 2026));
    check_all_policies<SDNN_ALL_CHALLENGE_POLICIES>(ws, data::challenge_bias(c.n), inputs, exec);
  }
}
