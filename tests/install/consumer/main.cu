// Device use of the installed sdnn, as in the README: a CSR matrix built on the host,
// moved to the GPU and back. Without a visible GPU it only checks that the device
// headers compiled and linked.
#include <sdnn/sdnn.hpp>

#include <cstdio>

int main() {
  auto a = sdnn::make_csr<float, int>(3, 4, {0, 2, 2, 3}, {0, 3, 1}, {1.f, 2.f, 3.f});
  auto s = sdnn::compute_stats(a);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("consumer_cu: built; %d empty rows; no CUDA device, device part not run\n",
                static_cast<int>(s.empty_rows));
    return 0;
  }
  cudaStream_t stream;
  SDNN_CUDA_CHECK(cudaStreamCreate(&stream));
  sdnn::cuda_exec exec{stream};
  sdnn::csr_matrix<float, int> back;
  {
    auto d_a = sdnn::to_device(a, exec);  // device buffers must not outlive their stream
    back = sdnn::to_host(d_a, exec);      // synchronises the stream
  }
  bool same = back.nnz() == a.nnz();
  for (int k = 0; same && k < a.nnz(); ++k)
    same = back.col_idx()[k] == a.col_idx()[k] && back.values()[k] == a.values()[k];
  SDNN_CUDA_CHECK(cudaStreamDestroy(stream));
  std::printf("consumer_cu: device round trip %s\n", same ? "ok" : "MISMATCH");
  return same ? 0 : 1;
}
