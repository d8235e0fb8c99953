// The device RadiX-Net generator against the host generator, entry by entry.
#include "sdnn_gpu_test.cuh"

#include <sdnn/challenge/kernel/radixnet.cuh>
#include <sdnn/challenge/radixnet.hpp>

#include <cstdint>
#include <vector>

using namespace sdnn;

namespace {
// Copies a device CSR back and compares every array with the host CSR exactly.
void require_equal(csr_matrix<float, std::int32_t, device_space> const& d, csr_matrix<float, std::int32_t> const& h,
                   cudaStream_t s) {
  REQUIRE(d.rows() == h.rows());
  REQUIRE(d.cols() == h.cols());
  REQUIRE(d.nnz() == h.nnz());
  auto const rp = sdnn_test::to_vector(d.row_ptr(), s);
  auto const ci = sdnn_test::to_vector(d.col_idx(), s);
  auto const v = sdnn_test::to_vector(d.values(), s);
  // First differing index (-1: none), so a failure prints one number, not 2M elements.
  auto first_diff = [](auto const& host, auto const& dev) -> long long {
    for (std::size_t i = 0; i < dev.size(); ++i)
      if (!(host[i] == dev[i])) return static_cast<long long>(i);
    return -1;
  };
  REQUIRE(first_diff(h.row_ptr(), rp) == -1);
  REQUIRE(first_diff(h.col_idx(), ci) == -1);
  REQUIRE(first_diff(h.values(), v) == -1);
}
}  // namespace

TEST_CASE("radixnet_layer_device equals radixnet_layer at every challenge size", "[cuda][radixnet]") {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  cuda_exec exec(s);
  for (std::int32_t n : {32, 64, 1024, 4096, 16384, 65536}) {  // 32, 64: K = 1, 2 (smallest networks)
    std::int32_t const k = data::radixnet_block_layers(n);
    for (std::int32_t l : {0, k - 1, k, 3 * k + 1}) {
      INFO("N = " << n << ", layer " << l);
      auto const d = data::radixnet_layer_device(n, l, 2024, exec);
      require_equal(d, data::radixnet_layer(n, l, 2024), s);
    }
  }
  SDNN_CUDA_CHECK(cudaStreamSynchronize(s));
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

TEST_CASE("radixnet_block_device equals radixnet_layer for every layer of the block", "[cuda][radixnet]") {
  SDNN_REQUIRE_DEVICE();
  cuda_exec exec;
  for (std::int32_t n : {1024, 16384}) {
    std::int32_t const k = data::radixnet_block_layers(n);
    for (std::int32_t b : {0, 2}) {
      auto const layers = data::radixnet_block_device(n, b, 77, exec);
      REQUIRE(layers.size() == static_cast<std::size_t>(k));
      for (std::int32_t t = 0; t < k; ++t) {
        INFO("N = " << n << ", block " << b << ", layer " << b * k + t);
        require_equal(layers[static_cast<std::size_t>(t)], data::radixnet_layer(n, b * k + t, 77), nullptr);
      }
    }
  }
}

TEST_CASE("official_1024_layer_device equals official_1024_layer", "[cuda][radixnet]") {
  SDNN_REQUIRE_DEVICE();
  cuda_exec exec;  // the default stream
  for (std::int32_t l : {0, 5, 6, 11, 64, 119}) {
    INFO("layer " << l);
    auto const d = data::official_1024_layer_device(l, exec);
    require_equal(d, data::official_1024_layer(l), nullptr);
  }
  REQUIRE_THROWS_AS(data::official_1024_layer_device(120, exec), sdnn::error);
  REQUIRE_THROWS_AS(data::radixnet_layer_device(1000, 0, 0, exec), sdnn::error);
}
