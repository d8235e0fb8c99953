// The README's device code blocks (each region between markers is one block:
// scripts/check_readme_snippets.py keeps them equal). Built in CUDA builds; CTest
// example.readme.quickstart_device runs main, the quickstart, on a GPU (label gpu); the other
// blocks are functions compiled here and not run.
// [readme:quickstart_device]
// mlp.cu: the same MLP on the GPU. Build: a CUDA target linking sdnn::sdnn (the layers' device
// code is compiled in this .cu, where sdnn.hpp also includes the device headers).
#include <sdnn/sdnn.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

int main() {
  using layer = sdnn::layers::sparse_linear<float>;
  cudaStream_t stream;
  SDNN_CUDA_CHECK(cudaStreamCreate(&stream));
  {  // everything on the device is released (in stream order) before the stream goes
    sdnn::cuda_exec exec{stream};  // every device call below is enqueued on this stream
    std::vector<float> b1 = {0.5f, 0.f, -0.5f};
    sdnn::sequential<float> mlp;
    mlp.add(std::make_shared<layer>(sdnn::make_csr<float, int>(4, 3, {0, 2, 3, 4, 5}, {0, 2, 1, 0, 2},
                                                               {0.5f, -1.f, 2.f, 1.f, 0.25f}),
                                    sdnn::epilogue_relu(b1)))
        .add(std::make_shared<layer>(sdnn::make_csr<float, int>(3, 2, {0, 1, 2, 3}, {0, 1, 0}, {1.f, -1.f, 0.5f}),
                                     sdnn::epilogue_none<float>()));
    mlp.plan(/*batch*/ 2, /*in_features*/ 4, exec);  // once: uploads W, allocates; may synchronise

    sdnn::dense_matrix<float> x(2, 4);
    float const samples[] = {1, 2, 0, 1,   0, 0, 3, 1};
    std::copy(samples, samples + 8, x.data());
    auto dx = sdnn::to_device(x, exec);  // async
    sdnn::dense_matrix<float, sdnn::device_space> dy(2, 2, exec);
    mlp.forward(exec, dx.view(), dy.view());  // enqueued: no allocation, no synchronisation
    auto y = sdnn::to_host(dy, exec);         // synchronises the stream
    std::printf("y = [%g %g; %g %g]\n", y(0, 0), y(0, 1), y(1, 0), y(1, 1));
  }
  SDNN_CUDA_CHECK(cudaStreamDestroy(stream));
}
// [/readme:quickstart_device]

// [readme:using_sdnn]
#include <sdnn/sdnn.hpp>   // in a .cu file: device containers, kernels and baselines too

void csr_on_host_and_device(cudaStream_t stream) {
  // A 3 x 4 CSR matrix built on the host from raw arrays. make_csr validates: a bad
  // matrix throws sdnn::error naming the first bad entry: with col_idx {0, 3, 7} here, what()
  // is "csr: row 2: col_idx[2] = 7 is out of range for 4 columns", then the check's [file:line].
  auto a = sdnn::make_csr<float, int>(3, 4, /*row_ptr*/ {0, 2, 2, 3},
                                      /*col_idx*/ {0, 3, 1}, /*values*/ {1.f, 2.f, 3.f});

  sdnn::cuda_exec exec{stream};                 // every device op is enqueued on this stream
  auto d_a = sdnn::to_device(a, exec);          // csr_matrix<float, int, device_space>, async
  auto s   = sdnn::compute_stats(a);            // nnz per row, empty rows, tile occupancy
  auto back = sdnn::to_host(d_a, exec);         // documented: synchronises the stream
}
// [/readme:using_sdnn]

// [readme:plan_protocol]
void plan_protocol(sdnn::cuda_exec exec, sdnn::csr_matrix<float, int> const& w_host,  // W: k x n on the host
                   sdnn::dense_view<float const> y_in, sdnn::dense_view<float> y_out,  // device activations
                   sdnn::csr_view<float, int> a, sdnn::dense_view<float const> b, sdnn::dense_view<float> c) {
  using plan_t = sdnn::ops::dense_sparse_plan<sdnn::policy::sparse_linear_default, float>;
  if (auto st = plan_t::can_implement(w_host.rows(), w_host.cols(), w_host.nnz()); !st)
    throw std::runtime_error(st.why());  // why this W cannot be planned
  plan_t plan(w_host, exec, sdnn::plan_options{/*max_rows*/ 4096});   // W^T and tiles built on the host, one upload
  plan.run(exec, y_in, y_out, sdnn::epilogue_capped_relu<float>(-0.3f));  // every row; run_rows() for a live-row list
  sdnn::ops::csr_spmm_plan<sdnn::policy::csr_nnz_balanced<>, float, int> sp(a, b, c, exec);  // A sparse (device)
  sp.run(exec, b, c, sdnn::epilogue_none<float>());                      // same protocol, executor first
}
// [/readme:plan_protocol]

// [readme:tc_auto]
// A pruned bf16 layer (W: out x in, the nn.Linear layout, on the host) that is never slower than
// running it dense: the plan reads W's structure and picks cuBLAS, blocks, tiles, 2:4 or
// cuSPARSE per batch size; reason(n) says which and why.
void pruned_bf16_layer(sdnn::cuda_exec exec, sdnn::dense_matrix<sdnn::bf16> const& w,
                       sdnn::dense_view<sdnn::bf16 const> x, sdnn::dense_view<sdnn::bf16> y) {
  sdnn::ops::tc_auto_options opt;
  opt.max_rows = 2048;                                     // the largest batch it will run
  sdnn::ops::tc_auto_linear_plan<sdnn::bf16> plan(w.view(), exec, opt);  // uploads the chosen encodings
  std::printf("%s\n", plan.reason(x.rows).c_str());       // e.g. "N = 8: tc_block32 (cost model ...)"
  plan.run(exec, x, y, sdnn::epilogue_none<float>());      // no allocation, no synchronisation
  plan.tune(exec, {1, 8, 32});  // optional: measure instead of model (synchronises), kept per GPU
}
// [/readme:tc_auto]
