// Device buffers and copies between spaces.
#include "sdnn_gpu_test.cuh"

#include <sdnn/sdnn.hpp>

#include <limits>
#include <string>

using namespace sdnn;

TEST_CASE("device and pinned buffers round-trip through every copy direction", "[cuda][core]") {
  SDNN_REQUIRE_DEVICE();
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreate(&s));
  cuda_exec exec{s};
  {
    host_buffer<int> h(1 << 20);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<int>(i * 7 + 1);
    auto d = copy_to<device_space>(h, exec);
    device_buffer<int> d2(h.size(), exec);
    copy(d2, d, exec);
    auto p = copy_to<pinned_space>(d2, exec);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(s));
    for (std::size_t i = 0; i < h.size(); ++i) REQUIRE(p[i] == h[i]);
    device_buffer<int> moved = std::move(d2);
    REQUIRE(d2.data() == nullptr);
    REQUIRE(moved.size() == h.size());
    device_buffer<int> empty(0, exec);
    REQUIRE(empty.data() == nullptr);
    host_buffer<int> small(3);
    REQUIRE_THROWS_AS(copy(small, moved, exec), sdnn::error);
  }
  SDNN_CUDA_CHECK(cudaStreamSynchronize(s));
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
}

TEST_CASE("a failing CUDA call throws sdnn::cuda_error with the call text", "[cuda][core]") {
  SDNN_REQUIRE_DEVICE();
  try {
    SDNN_CUDA_CHECK(cudaSetDevice(1 << 20));
    FAIL("no throw");
  } catch (cuda_error const& e) {
    REQUIRE(e.code() == static_cast<int>(cudaErrorInvalidDevice));
    REQUIRE(std::string(e.what()).find("cudaSetDevice") != std::string::npos);
    // The message names the library and the status by name, as every library_error does.
    REQUIRE(e.library() == "CUDA");
    REQUIRE(std::string(e.what()).find("CUDA: ") != std::string::npos);
    REQUIRE(std::string(e.what()).find("cudaErrorInvalidDevice") != std::string::npos);
  }
  // The failure is reported once: it must not linger for the next launch check.
  REQUIRE(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("a device allocation that does not fit says how much was asked, how much is free, and what to do",
          "[cuda][core][oom]") {
  SDNN_REQUIRE_DEVICE();
  std::size_t free_b = 0, total_b = 0;
  SDNN_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  std::size_t const ask = 2 * total_b;  // never fits
  try {
    device_buffer<unsigned char> b(ask, cuda_exec{});
    FAIL("no throw");
  } catch (cuda_error const& e) {
    std::string const what = e.what();
    INFO(what);
    REQUIRE(e.code() == static_cast<int>(cudaErrorMemoryAllocation));
    REQUIRE(what.find("cudaMallocAsync") != std::string::npos);
    REQUIRE(what.find(std::to_string(ask) + " bytes") != std::string::npos);  // asked for
    REQUIRE(what.find(" free of ") != std::string::npos);                     // free (cudaMemGetInfo)
    REQUIRE(what.find("fewer rows per batch") != std::string::npos);
    REQUIRE(what.find("--weight-store host") != std::string::npos);
    REQUIRE(what.find("weight_placement::host") != std::string::npos);
  }
  REQUIRE(cudaGetLastError() == cudaSuccess);  // reported once, not left for the next check
  // an element count whose bytes overflow size_t: refused before asking CUDA
  REQUIRE_THROWS_AS(device_buffer<double>(std::numeric_limits<std::size_t>::max() / 4, cuda_exec{}), error);
}
