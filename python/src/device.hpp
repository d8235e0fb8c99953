// python/src/device.hpp - the device layers behind sdnn.Linear and sdnn.Conv2d, as plain C++
// interfaces: device.cu (compiled by nvcc, no pybind11 there) implements them where the module
// has CUDA, device_stub.cpp where it has not (every factory raises sdnn::not_compiled).
// Pointers and streams cross as integers (torch's data_ptr() and cuda_stream); shapes and types
// have been checked by the caller (module.cpp) before any of these runs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dtype.hpp"
#include "sdnn/formats/csr.hpp"

namespace sdnn_py {

bool device_compiled() noexcept;

// y[rows x out] = epi(x[rows x in] w^T), bf16 or fp16, on `stream`; the automatic plan
// (layers::tc_linear) picks dense cuBLAS or a sparse tensor-core path per batch size.
class linear_handle {
 public:
  virtual ~linear_handle() = default;
  virtual void plan(std::int64_t batch, std::uintptr_t stream) = 0;
  virtual void forward(std::uintptr_t x, std::uintptr_t y, std::int64_t rows, std::uintptr_t stream) = 0;
  virtual std::string reason(std::int64_t rows) const = 0;
  virtual int device() const noexcept = 0;
};
// w_host: out x in values of `type` (f16 / bf16), row-major; copied.
std::unique_ptr<linear_handle> make_linear(dtype type, void const* w_host, std::int64_t out, std::int64_t in,
                                           std::vector<float> bias, bool relu, std::int64_t max_rows);

// NHWC y = pool?(relu?(conv(x) + bias)); the automatic plan (ops::conv16_auto_plan) per
// (batch, H, W), made on first use (a tuning run: it synchronises the stream).
struct conv_geometry {
  int C = 1, K = 1, R = 1, S = 1;
  int stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
};
class conv_handle {
 public:
  virtual ~conv_handle() = default;
  // (OH, OW) of an H x W input (after the pool when there is one); raises for a shape the
  // convolution cannot take.
  virtual std::pair<int, int> out_hw(int H, int W) const = 0;
  virtual void forward(std::uintptr_t x, std::uintptr_t y, std::int64_t batch, int H, int W,
                       std::uintptr_t stream) = 0;
  virtual std::string reason(std::int64_t batch, int H, int W) const = 0;  // "" before that plan exists
  virtual int device() const noexcept = 0;
};
// w_gemm_host: K x R*S*C (the KRSC filter) of `type`; copied.
std::unique_ptr<conv_handle> make_conv(dtype type, conv_geometry g, void const* w_gemm_host, std::vector<float> bias,
                                       bool relu, bool pool2x2);

// The Graph Challenge on the device: the depth-first engine planned on `layers` (each N x N,
// row = input neuron), run on `inputs` (rows x N) on `stream`, which it synchronises.
struct challenge_run {
  std::vector<std::int32_t> categories;  // 1-based ids of the rows with a nonzero final row
  double plan_seconds = 0, run_seconds = 0;  // host wall times: plan + upload, run + read-back
  std::string summary;                   // what the plan proved about the layers
};
challenge_run challenge_infer_device(std::vector<sdnn::csr_matrix<float, std::int32_t>> const& layers,
                                     sdnn::csr_matrix<float, std::int32_t> const& inputs, float bias, float cap,
                                     std::uintptr_t stream);

}  // namespace sdnn_py
