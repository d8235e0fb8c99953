// The "same class in every compiler" test, device half (compiled by nvcc): see host_side.cpp.
// It installs sparse_linear<float>'s device members by constructing the type in a function
// that never runs (the documented rule: a .cu that includes sdnn.hpp and constructs the type;
// tests/common/device_instances.cu covers SDNN_INSTANTIATE_SPARSE_LINEAR), and calls plan()
// and forward(cuda_exec) through the base class only.
#include <sdnn/sdnn.hpp>

#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

std::shared_ptr<sdnn::layer<float>> never_called(sdnn::csr_matrix<float, int> w) {
  return std::make_shared<sdnn::layers::sparse_linear<float>>(std::move(w), sdnn::epilogue_none<float>());
}

int run_on_device(sdnn::layer<float>& l, std::vector<float> const& in, std::vector<float> const& expected, int rows,
                  int k, int n) {
  if (dynamic_cast<sdnn::layers::sparse_linear<float>*>(&l) == nullptr) {
    std::puts("link_order: not a sparse_linear<float>");
    return 3;
  }
  int devices = 0;
  bool const gpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  cudaGetLastError();
  try {
    sdnn::cuda_exec exec{};
    l.plan(rows, k, exec);
    sdnn::buffer<float, sdnn::device_space> din(in.size(), exec), dout(expected.size(), exec);
    SDNN_CUDA_CHECK(cudaMemcpyAsync(din.data(), in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice));
    l.forward(exec, sdnn::dense_view<float const>{rows, k, k, din.data()}, sdnn::dense_view<float>{rows, n, n, dout.data()});
    std::vector<float> out(expected.size());
    SDNN_CUDA_CHECK(cudaMemcpy(out.data(), dout.data(), out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return std::memcmp(out.data(), expected.data(), out.size() * sizeof(float)) == 0 ? 0 : 1;
  } catch (sdnn::cuda_error const& e) {
    std::printf("link_order: %s\n", e.what());
    return gpu ? 3 : 2;
  } catch (std::exception const& e) {
    std::printf("link_order: %s\n", e.what());
    return 3;
  }
}
