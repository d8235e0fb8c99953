// The README's "Train, prune, quantize" code block, compiled and run (CTest
// example.readme.train) on a small random layer: one step of Y = relu(X W + b) with W sparse,
// the backward pass, an SGD step on W's pattern, pruning and quantization. The region between
// the markers is the README's block (scripts/check_readme_snippets.py keeps them equal).
#include <sdnn/sdnn.hpp>

#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

using namespace sdnn;

int main() {
  std::int32_t const B = 8, K = 16, N = 10;  // batch, inputs, outputs
  std::mt19937 g(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<std::int32_t> rp{0}, ci;
  std::vector<float> wv;
  for (std::int32_t i = 0; i < K; ++i) {
    for (std::int32_t j = 0; j < N; ++j)
      if ((i + 3 * j) % 4 == 0) {
        ci.push_back(j);
        wv.push_back(u(g));
      }
    rp.push_back(static_cast<std::int32_t>(ci.size()));
  }
  auto W = make_csr<float, std::int32_t>(K, N, rp, ci, wv);
  std::vector<float> b(N, 0.1f), dW(static_cast<std::size_t>(W.nnz())), db(N), vel;
  std::vector<int> labels(B);
  dense_matrix<float> X(B, K), P(B, N), Y(B, N), dY(B, N), dP(B, N);
  for (std::int32_t r = 0; r < B; ++r) {
    labels[static_cast<std::size_t>(r)] = r % N;
    for (std::int32_t k = 0; k < K; ++k) X(r, k) = u(g);
  }
  auto const &cX = X, &cP = P, &cY = Y, &cdY = dY;

  // [readme:train]
  auto epi = epilogue_relu(b);                                                          // Y = relu(X W + b)
  reference::dense_sparse_spmm<float, int, float>(X.view(), W.view(), P.view(), epilogue_none());  // P = X W (CSR W)
  reference::apply_epilogue(cP.view(), epi, Y.view());
  double loss = reference::softmax_cross_entropy(cY.view(), labels.data(), dY.view());  // mean over the batch
  ops::sparse_linear_backward(host_exec{}, cX.view(), cP.view(), cdY.view(), W.view(), epi,
                              {dP.view(), dW.data(), db.data(), {}});                  // dW on W's pattern only
  reference::sgd_step(W, dW, vel, {0.05, 0.9, 1e-4});                                   // the CSR pattern is kept
  auto pruned = ops::prune_csr_magnitude(W, 0.9, ops::csr_prune::uniform_rows);         // then fine-tune
  auto Wq = quantize_codebook4(pruned.w);  // or quantize_int8(pruned.w, {quant_granularity::per_channel})
  ops::quantized_dense_sparse_spmm(host_exec{}, cX.view(), Wq, Y.view(), epi);         // decodes on the fly
  // [/readme:train]

  std::printf("readme train: loss %.4f, %d of %d weights kept after pruning\n", loss, pruned.w.nnz(), W.nnz());
  return loss > 0 && pruned.w.nnz() < W.nnz() ? 0 : 1;
}
