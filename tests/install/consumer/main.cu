// Device use of the installed sdnn: move a CSR matrix to the GPU and back.
// Without a visible GPU it only checks that the device headers compiled and linked.
#include <sdnn/sdnn.hpp>

#include <cstdio>

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::puts("consumer_cu: built; no CUDA device, device part not run");
    return 0;
  }
  sdnn::cuda_exec exec{};
  sdnn::host_buffer<float> h(1000, 2.5f);
  auto d = sdnn::copy_to<sdnn::device_space>(h, exec);
  auto back = sdnn::copy_to<sdnn::host_space>(d, exec);
  SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
  for (float v : back)
    if (v != 2.5f) return 1;
  std::puts("consumer_cu: device round trip ok");
  return 0;
}
