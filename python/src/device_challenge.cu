// python/src/device_challenge.cu - sdnn.challenge.infer's device half: the depth-first engine
// (ops::challenge_engine_plan) planned on the given layers, run on the inputs on `stream`. The
// run reads the categories back, so it synchronises that stream.
#include <cuda_runtime.h>

#include <chrono>

#include "device.hpp"
#include "sdnn/challenge/engine.cuh"
#include "sdnn/core/cuda.cuh"
#include "sdnn/formats/copy.cuh"

namespace sdnn_py {

challenge_run challenge_infer_device(std::vector<sdnn::csr_matrix<float, std::int32_t>> const& layers,
                                     sdnn::csr_matrix<float, std::int32_t> const& inputs, float bias, float cap,
                                     std::uintptr_t stream) {
  sdnn::cuda_exec const exec(reinterpret_cast<CUstream_st*>(stream));
  sdnn::ops::challenge_engine_options opt;
  opt.cap = cap;
  auto const t0 = std::chrono::steady_clock::now();
  sdnn::ops::challenge_engine_plan plan(layers, bias, exec, opt);
  auto in_d = sdnn::to_device(inputs, exec);
  SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
  auto const t1 = std::chrono::steady_clock::now();
  auto res = plan.run(exec, in_d.view());
  auto const t2 = std::chrono::steady_clock::now();
  challenge_run r;
  r.categories = std::move(res.categories);
  r.plan_seconds = std::chrono::duration<double>(t1 - t0).count();
  r.run_seconds = std::chrono::duration<double>(t2 - t1).count();
  r.summary = plan.summary();
  return r;
}

}  // namespace sdnn_py
