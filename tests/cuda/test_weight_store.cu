// Out-of-core weights (pipeline/weight_store.cuh): a network streamed from pinned host
// memory through a ring of K device slots gives bitwise the categories and final activations
// of the same network with resident weights (the same kernels read the same arrays, only from
// another address); budgets that force streaming, budgets too small, and a failed upload.
#include "sdnn_gpu_test.cuh"

#include <sdnn/challenge/inputs.hpp>
#include <sdnn/challenge/radixnet.hpp>
#include <sdnn/formats/copy.cuh>
#include <sdnn/io/mnist_idx.hpp>
#include <sdnn/linear/sparse_linear.cuh>
#include <sdnn/challenge/pipeline.cuh>
#include <sdnn/pipeline/weight_store.cuh>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

using namespace sdnn;

namespace {


template <class Policy>
using ws_layer = layers::sparse_linear<float, format::csr, Policy>;

template <class Policy>
std::vector<std::shared_ptr<ws_layer<Policy>>> host_layers(std::vector<csr_matrix<float, std::int32_t>> const& ws,
                                                           float bias) {
  std::vector<std::shared_ptr<ws_layer<Policy>>> layers;
  for (auto const& w : ws) {
    csr_matrix<float, std::int32_t> c(w.rows(), w.cols(), w.nnz());
    std::copy(w.row_ptr().begin(), w.row_ptr().end(), c.row_ptr().begin());
    std::copy(w.col_idx().begin(), w.col_idx().end(), c.col_idx().begin());
    std::copy(w.values().begin(), w.values().end(), c.values().begin());
    layers.push_back(std::make_shared<ws_layer<Policy>>(std::move(c), epilogue_capped_relu<float>(bias)));
  }
  return layers;
}

csr_matrix<float, std::int32_t> some_inputs(std::int32_t n, std::int32_t count) {
  auto mnist = io::read_idx_images(std::string(sdnn_test::data_dir()) + "/mnist-10k-images-idx3-ubyte.gz");
  io::idx_images pick;
  pick.rows = mnist.rows;
  pick.cols = mnist.cols;
  std::size_t const px = static_cast<std::size_t>(mnist.rows) * mnist.cols;
  for (std::int32_t i = 0; i < count; ++i) {  // spread over the file (it is grouped by digit)
    std::size_t const src = static_cast<std::size_t>((i * 331) % mnist.count) * px;
    pick.pixels.insert(pick.pixels.end(), mnist.pixels.begin() + static_cast<std::ptrdiff_t>(src),
                       mnist.pixels.begin() + static_cast<std::ptrdiff_t>(src + px));
    ++pick.count;
  }
  return data::challenge_inputs_from_mnist(pick, n, count);
}

template <class Policy>
pipeline::challenge_result run_net(std::vector<csr_matrix<float, std::int32_t>> const& ws, float bias,
                                   csr_matrix<float, std::int32_t> const& inputs, cuda_exec exec,
                                   pipeline::challenge_options opt, pipeline::weight_store_decision* placement = nullptr,
                                   pipeline::weight_store_stats* stats = nullptr) {
  pipeline::challenge_network<Policy> net(host_layers<Policy>(ws, bias));
  net.plan(inputs.rows(), exec, opt);
  auto in_d = to_device(inputs, exec);
  auto r1 = net.run(exec, in_d.view(), true);
  auto r2 = net.run(exec, in_d.view(), false);  // a second run reuses the ring and its events
  REQUIRE(r2.categories == r1.categories);
  if (placement) *placement = net.weight_placement_chosen();
  if (stats) *stats = net.weight_stats();
  return r1;
}

void require_same(pipeline::challenge_result const& a, pipeline::challenge_result const& b) {
  REQUIRE(a.categories == b.categories);
  REQUIRE(a.final.rows() == b.final.rows());
  REQUIRE(a.final.cols() == b.final.cols());
  std::int64_t differ = 0;
  for (std::int64_t i = 0; i < a.final.rows(); ++i)
    for (std::int64_t j = 0; j < a.final.cols(); ++j) differ += a.final(i, j) != b.final(i, j);
  REQUIRE(differ == 0);  // bitwise: == on every value
}

template <class Policy>
void streamed_equals_resident(std::int32_t n, int depth, std::int32_t count, cuda_exec exec) {
  INFO("policy " << policy::name<Policy>() << ", N = " << n << ", layers = " << depth);
  std::vector<csr_matrix<float, std::int32_t>> ws;
  for (int l = 0; l < depth; ++l) ws.push_back(data::radixnet_layer(n, l, 2026));
  float const bias = data::challenge_bias(n);
  auto const inputs = some_inputs(n, count);
  pipeline::challenge_options res_opt;
  auto const resident = run_net<Policy>(ws, bias, inputs, exec, res_opt);
  REQUIRE(!resident.categories.empty());
  for (int k : {2, 3}) {
    for (std::int64_t batch : {std::int64_t{0}, std::int64_t{count / 3 + 1}}) {
      INFO("K = " << k << ", max_batch = " << batch);
      pipeline::challenge_options opt;
      opt.weights = pipeline::weight_placement::host;
      opt.weight_slots = k;
      opt.max_batch = batch;
      pipeline::weight_store_decision d;
      pipeline::weight_store_stats st;
      auto const streamed = run_net<Policy>(ws, bias, inputs, exec, opt, &d, &st);
      require_same(streamed, resident);
      REQUIRE(d.streamed);
      REQUIRE(d.slots == k);
      REQUIRE(st.streamed);
      REQUIRE(st.uploads == static_cast<std::int64_t>(depth) * streamed.batches);  // every layer once per batch
      REQUIRE(st.bytes > 0);
      REQUIRE(st.copy_seconds > 0);
    }
  }
}

}  // namespace

TEST_CASE("weight_store: streamed weights give bitwise the resident result (K = 2 and 3)", "[cuda][weight_store]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard sg{cudaStreamNonBlocking};
  cuda_exec exec{sg.s};
  streamed_equals_resident<policy::sparse_linear_default>(1024, 24, 240, exec);
  streamed_equals_resident<policy::skip_empty_rows<policy::csc_gather<16>>>(1024, 12, 120, exec);
  streamed_equals_resident<policy::csc_tiled<16>>(1024, 7, 90, exec);  // no row list; odd depth
  streamed_equals_resident<policy::skip_empty_rows<policy::csc_tiled<32>>>(4096, 9, 60, exec);
}

TEST_CASE("weight_store: a budget below the network streams it (automatic), one above keeps it resident",
          "[cuda][weight_store]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard sg{cudaStreamNonBlocking};
  cuda_exec exec{sg.s};
  std::int32_t const n = 1024;
  std::vector<csr_matrix<float, std::int32_t>> ws;
  for (int l = 0; l < 16; ++l) ws.push_back(data::radixnet_layer(n, l, 7));
  float const bias = data::challenge_bias(n);
  auto const inputs = some_inputs(n, 150);
  using P = policy::sparse_linear_default;
  pipeline::challenge_network<P> probe(host_layers<P>(ws, bias));
  std::uint64_t total = 0, largest = 0;
  for (auto b : probe.resident_layer_bytes()) {
    total += b;
    largest = std::max(largest, b);
  }
  auto const resident = run_net<P>(ws, bias, inputs, exec, {});

  pipeline::challenge_options opt;
  opt.weights = pipeline::weight_placement::automatic;
  opt.device_memory_budget = total / 4;  // holds a few layers, not 16
  pipeline::weight_store_decision d;
  auto const streamed = run_net<P>(ws, bias, inputs, exec, opt, &d);
  REQUIRE(d.streamed);
  REQUIRE(d.slots >= 2);
  REQUIRE(d.device_bytes <= opt.device_memory_budget);
  require_same(streamed, resident);

  opt.device_memory_budget = total + largest;  // fits: resident
  auto const kept = run_net<P>(ws, bias, inputs, exec, opt, &d);
  REQUIRE(!d.streamed);
  require_same(kept, resident);
}

TEST_CASE("weight_store: a budget too small for two slots is an sdnn::error naming the numbers",
          "[cuda][weight_store]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard sg{cudaStreamNonBlocking};
  cuda_exec exec{sg.s};
  std::int32_t const n = 1024;
  std::vector<csr_matrix<float, std::int32_t>> ws;
  for (int l = 0; l < 4; ++l) ws.push_back(data::radixnet_layer(n, l, 7));
  using P = policy::sparse_linear_default;
  for (auto mode : {pipeline::weight_placement::host, pipeline::weight_placement::automatic}) {
    pipeline::challenge_network<P> net(host_layers<P>(ws, -0.3f));
    pipeline::challenge_options opt;
    opt.weights = mode;
    opt.device_memory_budget = 100 * 1024;  // one 1024-neuron layer is ~300 KB
    try {
      net.plan(10, exec, opt);
      FAIL("no error for a budget below two slots");
    } catch (sdnn::error const& e) {
      std::string const what = e.what();
      INFO(what);
      REQUIRE(what.find("streaming needs at least 2") != std::string::npos);
      REQUIRE(what.find("102400") != std::string::npos);
    }
  }
  // resident weights asked for with a budget they exceed
  pipeline::challenge_network<P> net(host_layers<P>(ws, -0.3f));
  pipeline::challenge_options opt;
  opt.weights = pipeline::weight_placement::device;
  opt.device_memory_budget = 100 * 1024;
  REQUIRE_THROWS_AS(net.plan(10, exec, opt), sdnn::error);
  // the cuSPARSE baselines do not stream
  using V = policy::cusparse_reuse_buffer;
  pipeline::challenge_network<V> vnet(host_layers<V>(ws, -0.3f));
  opt.weights = pipeline::weight_placement::host;
  opt.device_memory_budget = 0;
  REQUIRE_THROWS_AS(vnet.plan(10, exec, opt), sdnn::error);
  // layers built from device weights have nothing on the host to stream
  std::vector<std::shared_ptr<ws_layer<P>>> dl;
  for (auto const& w : ws) dl.push_back(std::make_shared<ws_layer<P>>(to_device(w, exec), epilogue_capped_relu<float>(-0.3f), exec));
  pipeline::challenge_network<P> dnet(dl);
  REQUIRE_THROWS_AS(dnet.plan(10, exec, opt), sdnn::error);
}

TEST_CASE("weight_store: a failed upload is an sdnn::cuda_error, not a hang; the store then runs again",
          "[cuda][weight_store]") {
  SDNN_REQUIRE_DEVICE();
  sdnn_test::stream_guard sg{cudaStreamNonBlocking};
  cuda_exec exec{sg.s};
  std::int32_t const n = 1024, rows = 64;
  using P = policy::csc_tiled<16>;
  std::vector<csr_matrix<float, std::int32_t>> ws;
  for (int l = 0; l < 5; ++l) ws.push_back(data::radixnet_layer(n, l, 11));
  std::vector<csr_view<float, std::int32_t>> views;
  std::vector<float const*> biases;
  std::vector<float> bias(static_cast<std::size_t>(n), -0.3f);
  for (auto const& w : ws) {
    views.push_back(w.view());
    biases.push_back(bias.data());
  }
  pipeline::weight_store<P, float> store(views, biases);
  store.allocate(2, exec);
  REQUIRE(store.slots() == 2);
  auto const x = some_inputs(n, rows);
  dense_matrix<float> xd(rows, n);
  for (std::int32_t r = 0; r < rows; ++r)
    for (std::int32_t p = x.row_ptr()[r]; p < x.row_ptr()[r + 1]; ++p) xd(r, x.col_idx()[p]) = x.values()[p];
  buffer<float, device_space> y[2] = {to_device(xd.data(), xd.size(), exec),
                                      buffer<float, device_space>(xd.size(), exec)};
  basic_epilogue<float> epi = epilogue_capped_relu<float>(0.f);
  epi.bias_scalar = 0;
  auto pass = [&] {
    store.begin_pass(exec);
    for (std::size_t l = 0; l < ws.size(); ++l) {
      dense_view<float const> in{rows, n, n, y[l % 2].data()};
      dense_view<float> out{rows, n, n, y[1 - l % 2].data()};
      store.forward_rows(l, exec, in, out, epi, ops::listed_rows{nullptr, nullptr, rows}, nullptr);
    }
    store.end_pass(exec);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
  };
  store.fail_upload_of(3);
  REQUIRE_THROWS_AS(pass(), sdnn::cuda_error);
  SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
  store.fail_upload_of(-1);
  // same input again: the pass completes and matches the resident layers
  auto y0 = to_device(xd.data(), xd.size(), exec);
  SDNN_CUDA_CHECK(cudaMemcpyAsync(y[0].data(), y0.data(), xd.size() * sizeof(float), cudaMemcpyDeviceToDevice, exec.stream));
  store.reset_stats();
  pass();
  REQUIRE(store.uploads() == 5);
  auto const got = sdnn_test::to_vector(y[ws.size() % 2], exec.stream);

  auto const layers = host_layers<P>(ws, -0.3f);
  buffer<float, device_space> r[2] = {to_device(xd.data(), xd.size(), exec),
                                      buffer<float, device_space>(xd.size(), exec)};
  for (std::size_t l = 0; l < ws.size(); ++l) {
    dense_view<float const> in{rows, n, n, r[l % 2].data()};
    dense_view<float> out{rows, n, n, r[1 - l % 2].data()};
    layers[l]->forward(exec, in, out);
  }
  auto const want = sdnn_test::to_vector(r[ws.size() % 2], exec.stream);
  REQUIRE(got == want);
}
