// A host-only program (one .cpp, no .cu) using the installed sdnn's layer types: it must link
// against any install, a CUDA-enabled one included (there every translation unit sees
// SDNN_HAS_CUDA=1), run on host_exec, and get sdnn::not_compiled from the device path, which
// no .cu of this program compiled.
#include <sdnn/sdnn.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

int main() {
  using layer_t = sdnn::layers::sparse_linear<float>;
  // 3 -> 2 -> 1, small integers: exact sums.
  auto w1 = sdnn::make_csr<float, int>(3, 2, {0, 1, 2, 3}, {0, 1, 1}, {1.f, 2.f, 3.f});
  auto w2 = sdnn::make_csr<float, int>(2, 1, {0, 1, 2}, {0, 0}, {1.f, -1.f});
  std::vector<float> b1 = {1.f, 0.f};
  sdnn::sequential<float> net;
  net.add(std::make_shared<layer_t>(std::move(w1), sdnn::epilogue_relu(b1)))
      .add(std::make_shared<layer_t>(std::move(w2), sdnn::epilogue_none<float>()));
  std::vector<float> x = {1.f, 1.f, 1.f, 2.f, 0.f, 0.f}, y(2);
  net.forward(sdnn::host_exec{}, sdnn::dense_view<float const>{2, 3, 3, x.data()},
              sdnn::dense_view<float>{2, 1, 1, y.data()});
  // row 0: h = relu([1 + 1, 2 + 3]) = [2, 5], y = 2 - 5 = -3; row 1: h = [3, 0], y = 3
  if (y[0] != -3.f || y[1] != 3.f) {
    std::printf("consumer_host_layers: host result %g %g, expected -3 3\n", y[0], y[1]);
    return 1;
  }
  try {
    net.plan(2, 3, sdnn::cuda_exec{});
    std::puts("consumer_host_layers: the device path ran without device code");
    return 1;
  } catch (sdnn::not_compiled const& e) {
    std::string const what = e.what();
    bool const named = what.find("sequential<float>::plan(cuda_exec)") != std::string::npos;
#if SDNN_HAS_CUDA
    bool const remedy = what.find("include <sdnn/sdnn.hpp> in one .cu") != std::string::npos;
#else
    bool const remedy = what.find("SDNN_ENABLE_CUDA=OFF") != std::string::npos;
#endif
    std::printf("consumer_host_layers: device path refused: %s\n", e.what());
    if (!named || !remedy) return 1;
  }
  try {
    net[0].forward(sdnn::cuda_exec{}, sdnn::dense_view<float const>{2, 3, 3, x.data()},
                   sdnn::dense_view<float>{2, 2, 2, y.data()});
    return 1;
  } catch (sdnn::not_compiled const& e) {
    if (e.function().find("layers::sparse_linear<float, csr, ") != 0) return 1;
  }
  std::puts("consumer_host_layers: host forward ok, device path not_compiled as expected");
  return 0;
}
