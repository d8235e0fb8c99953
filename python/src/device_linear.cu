// python/src/device_linear.cu - sdnn.Linear's device half: layers::tc_linear<T> (the automatic
// 16-bit layer) behind linear_handle. The plan is made on the caller's stream at the first
// forward (or plan()), and again when a batch exceeds the planned one; a mutex serialises
// planning against runs of the same object from several Python threads.
#include <cuda_runtime.h>

#include <mutex>

#include "device.hpp"
#include "sdnn/core/cuda.cuh"
#include "sdnn/linear/tc_linear_layer.cuh"

template class sdnn::layers::tc_linear<sdnn::bf16>;
template class sdnn::layers::tc_linear<sdnn::fp16>;

namespace sdnn_py {

bool device_compiled() noexcept { return true; }

namespace {

// Makes `device` current for the scope (the caller's tensors live there), restoring the old one.
class device_scope {
 public:
  explicit device_scope(int device) {
    SDNN_CUDA_CHECK(cudaGetDevice(&old_));
    if (old_ != device) SDNN_CUDA_CHECK(cudaSetDevice(device));
  }
  ~device_scope() {
    int now = old_;
    if (cudaGetDevice(&now) == cudaSuccess && now != old_) cudaSetDevice(old_);
  }

 private:
  int old_ = 0;
};

template <class T>
class linear_impl final : public linear_handle {
 public:
  linear_impl(T const* w, std::int64_t out, std::int64_t in, std::vector<float> bias, bool relu, std::int64_t max_rows)
      : layer_(make_weights(w, out, in), make_epilogue(bias, relu), options(max_rows)), in_(in), out_(out) {
    SDNN_CUDA_CHECK(cudaGetDevice(&device_));
  }
  void plan(std::int64_t batch, std::uintptr_t stream) override {
    device_scope on(device_);
    std::lock_guard<std::mutex> lock(mu_);
    layer_.plan(batch, in_, exec(stream));
    planned_ = std::max(planned_, batch);
  }
  void forward(std::uintptr_t x, std::uintptr_t y, std::int64_t rows, std::uintptr_t stream) override {
    device_scope on(device_);
    std::lock_guard<std::mutex> lock(mu_);
    sdnn::dense_view<T const> in{rows, in_, in_, reinterpret_cast<T const*>(x)};
    sdnn::dense_view<T> outv{rows, out_, out_, reinterpret_cast<T*>(y)};
    layer_.forward(exec(stream), in, outv);
  }
  std::string reason(std::int64_t rows) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return layer_.reason(rows);
  }
  int device() const noexcept override { return device_; }

 private:
  static sdnn::dense_matrix<T> make_weights(T const* w, std::int64_t out, std::int64_t in) {
    sdnn::dense_matrix<T> m(out, in);
    if (m.size()) std::memcpy(m.data(), w, m.size() * sizeof(T));
    return m;
  }
  static sdnn::basic_epilogue<float> make_epilogue(std::vector<float> const& bias, bool relu) {
    sdnn::basic_epilogue<float> e;
    e.relu = relu;
    if (!bias.empty()) {
      e.bias = bias.data();  // copied by the layer's constructor
      e.bias_count = static_cast<std::int64_t>(bias.size());
    }
    return e;
  }
  static sdnn::ops::tc_auto_options options(std::int64_t max_rows) {
    sdnn::ops::tc_auto_options o;
    if (max_rows > 0) o.max_rows = max_rows;
    return o;
  }
  static sdnn::cuda_exec exec(std::uintptr_t stream) {
    return sdnn::cuda_exec(reinterpret_cast<CUstream_st*>(stream));
  }

  sdnn::layers::tc_linear<T> layer_;
  std::int64_t in_, out_, planned_ = 0;
  int device_ = 0;
  mutable std::mutex mu_;
};

}  // namespace

std::unique_ptr<linear_handle> make_linear(dtype type, void const* w, std::int64_t out, std::int64_t in,
                                           std::vector<float> bias, bool relu, std::int64_t max_rows) {
  if (type == dtype::bf16)
    return std::make_unique<linear_impl<sdnn::bf16>>(static_cast<sdnn::bf16 const*>(w), out, in, std::move(bias), relu,
                                                     max_rows);
  if (type == dtype::f16)
    return std::make_unique<linear_impl<sdnn::fp16>>(static_cast<sdnn::fp16 const*>(w), out, in, std::move(bias), relu,
                                                     max_rows);
  SDNN_FAIL("sdnn.Linear: the weights must be bfloat16 or float16, got ", dtype_name(type));
}

}  // namespace sdnn_py
