// Host-only use of the installed sdnn: build and validate a CSR matrix.
#include <sdnn/sdnn.hpp>

#include <cstdio>

int main() {
  auto a = sdnn::make_csr<float, int>(2, 3, {0, 2, 3}, {0, 2, 1}, {1.f, 2.f, 3.f});
  try {
    sdnn::make_csr<float, int>(1, 2, {0, 1}, {5}, {1.f});
    std::puts("consumer_cpp: an out-of-range column was accepted");
    return 1;
  } catch (sdnn::error const& e) {
    std::printf("consumer_cpp: rejected as expected: %s\n", e.what());
  }
  std::printf("consumer_cpp: %d x %d, nnz %d\n", a.rows(), a.cols(), a.nnz());
  return a.nnz() == 3 ? 0 : 1;
}
