// The README's host quickstart (the region between the markers is the README's block:
// scripts/check_readme_snippets.py keeps them equal); CTest example.readme.quickstart_host
// runs it and checks its output.
// [readme:quickstart_host]
// mlp.cpp: a pruned 4-3-2 MLP on the host. Build: a CMake target linking sdnn::sdnn (or
// g++ -std=c++17 -I<prefix>/include mlp.cpp); no CUDA needed, even against a CUDA-enabled install.
#include <sdnn/sdnn.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

int main() {
  using layer = sdnn::layers::sparse_linear<float>;  // Y = epilogue(X W), W sparse (CSR)
  // The weights pruning kept: W1 is 4 inputs x 3 outputs (row = input), 5 of 12 entries.
  auto w1 = sdnn::make_csr<float, int>(4, 3, /*row_ptr*/ {0, 2, 3, 4, 5}, /*col_idx*/ {0, 2, 1, 0, 2},
                                       /*values*/ {0.5f, -1.f, 2.f, 1.f, 0.25f});
  auto w2 = sdnn::make_csr<float, int>(3, 2, {0, 1, 2, 3}, {0, 1, 0}, {1.f, -1.f, 0.5f});
  std::vector<float> b1 = {0.5f, 0.f, -0.5f};  // one bias per output of layer 1

  sdnn::sequential<float> mlp;  // itself a layer: forward(host_exec) or forward(cuda_exec)
  mlp.add(std::make_shared<layer>(std::move(w1), sdnn::epilogue_relu(b1)))    // relu(X W1 + b1)
      .add(std::make_shared<layer>(std::move(w2), sdnn::epilogue_none<float>()));  // H W2

  sdnn::dense_matrix<float> x(2, 4), y(2, 2);  // 2 samples x 4 features, row-major
  float const samples[] = {1, 2, 0, 1,   0, 0, 3, 1};
  std::copy(samples, samples + 8, x.data());
  mlp.forward(sdnn::host_exec{}, x.view(), y.view());
  std::printf("y = [%g %g; %g %g]\n", y(0, 0), y(0, 1), y(1, 0), y(1, 1));
}
// [/readme:quickstart_host]
