// sdnn/linear/tc_linear_layer.hpp - layers::tc_linear<T>, the 16-bit fully connected layer on the
// tensor cores, for sequential<bf16> / sequential<fp16>:
//
//   Y = epi(X W^T)      X: batch x in_features, W: out_features x in_features (the nn.Linear layout)
//
// bf16 or fp16 values, float accumulation and epilogue, one rounding to T. Host execution is
// the reference (ops::tc_auto_linear); device execution is ops::tc_auto_linear_plan
// (linear/op/tc_auto.cuh), which picks cuBLAS dense or a sparse tensor-core path per batch
// size from W's structure. Device members as in layers::sparse_linear (the same class in every
// compiler; bodies in linear/tc_linear_layer.cuh).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sdnn/core/config.hpp"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/numeric.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/layers/layer.hpp"
#include "sdnn/linear/op/tc_auto.hpp"

namespace sdnn::layers {

template <class T>
class tc_linear : public layer<T> {
  static_assert(is_16bit_float_v<T>, "tc_linear: T must be sdnn::bf16 or sdnn::fp16");

 public:
  using value_type = T;

  // w: out_features x in_features on the host. epi.bias, when set, holds out_features floats
  // with its length (epilogue_relu(std::vector<float>) or bias_count); copied. opt: the
  // automatic plan's options (allowed paths, host copy, staging); its max_rows is set by plan().
  tc_linear(dense_matrix<T> w, basic_epilogue<float> epi, ops::tc_auto_options opt = {})
      : w_(std::move(w)), epi_(epi), opt_(opt) {
    request_device_code();
    SDNN_EXPECTS_DIMS(epi.bias_count < 0 || epi.bias_count == w_.rows(), "tc_linear: the bias has ", epi.bias_count,
                      " values, the layer has ", w_.rows(), " outputs");
    SDNN_EXPECTS(!epi.bias || epi.bias_count >= 0, "tc_linear: the bias is a bare pointer of unknown length; give it "
                 "with its length (epilogue_relu(std::vector<float>), epilogue_relu(ptr, n) or epi.bias_count = n)");
    if (epi.bias) bias_.assign(epi.bias, epi.bias + w_.rows());
    epi_.bias = nullptr;
    epi_.bias_count = -1;
  }

  std::string name() const override { return std::string("tc_linear<") + value_type_name<T>() + ">"; }
  std::int64_t out_features(std::int64_t in_features) const override {
    SDNN_EXPECTS_DIMS(in_features == w_.cols(), "tc_linear: expected ", w_.cols(), " input features, got ", in_features);
    return w_.rows();
  }
  dense_matrix<T> const& weights() const noexcept { return w_; }
  basic_epilogue<float> host_epilogue() const {
    basic_epilogue<float> e = epi_;
    e.bias = bias_.empty() ? nullptr : bias_.data();
    e.bias_count = bias_.empty() ? -1 : static_cast<std::int64_t>(bias_.size());
    return e;
  }

  void forward(host_exec, dense_view<T const> in, dense_view<T> out) override {
    check_shapes(in, out);
    ops::tc_auto_linear(host_exec{}, in, std::as_const(w_).view(), out, host_epilogue());
  }
  // Makes the automatic plan for batches up to `batch` (a larger batch later makes a new one):
  // reads W's structure, uploads the chosen encodings and the bias. May synchronise.
  void plan(std::int64_t batch, std::int64_t in_features, cuda_exec exec) override {
    (this->*device_members("plan(cuda_exec)").plan)(batch, in_features, exec);
  }
  // out = epi(in W^T) on exec.stream; plans first when needed (which allocates).
  void forward(cuda_exec exec, dense_view<T const> in, dense_view<T> out) override {
    (this->*device_members("forward(cuda_exec)").forward)(exec, in, out);
  }
  // What a batch of n rows runs and why (after plan()).
  std::string reason(std::int64_t n) const { return (this->*device_members("reason()").reason)(n); }

 private:
  void check_shapes(dense_view<T const> in, dense_view<T> out) const {
    SDNN_EXPECTS_DIMS(in.cols == w_.cols(), "tc_linear: input has ", in.cols, " features, the layer takes ", w_.cols());
    SDNN_EXPECTS_DIMS(out.cols == w_.rows(), "tc_linear: output has ", out.cols, " features, the layer gives ", w_.rows());
    SDNN_EXPECTS_DIMS(out.rows == in.rows, "tc_linear: input has ", in.rows, " rows, output ", out.rows);
  }

  struct device_state;  // linear/tc_linear_layer.cuh: the plan and the device bias
  void plan_body(std::int64_t batch, std::int64_t in_features, cuda_exec exec);
  void forward_body(cuda_exec exec, dense_view<T const> in, dense_view<T> out);
  std::string reason_body(std::int64_t n) const;
  struct device_table {
    void (tc_linear::*plan)(std::int64_t, std::int64_t, cuda_exec);
    void (tc_linear::*forward)(cuda_exec, dense_view<T const>, dense_view<T>);
    std::string (tc_linear::*reason)(std::int64_t) const;
  };
  static device_table const device_bodies;                    // linear/tc_linear_layer.cuh
  static inline device_table const* device_table_ = nullptr;  // null: no .cu compiled the bodies
  template <class>
  friend struct ::sdnn::detail::device_registration;

  static device_table const& device_members(char const* member) {
    if (device_table_) return *device_table_;
    std::string const type = std::string("layers::tc_linear<") + value_type_name<T>() + ">";
    throw not_compiled(type + "::" + member,
                       ::sdnn::detail::no_device_code(type, std::string("`template class sdnn::layers::tc_linear<") +
                                                                value_type_name<T>() + ">;`"),
                       __FILE__, __LINE__);
  }
  static void request_device_code() noexcept {
#if defined(__CUDACC__)
    request_device_members(::sdnn::detail::device_tag<tc_linear>{}, 0);
#endif
  }

  dense_matrix<T> w_;
  std::vector<float> bias_;  // [out] or empty
  basic_epilogue<float> epi_;
  ops::tc_auto_options opt_;
  std::shared_ptr<device_state> device_;
};

}  // namespace sdnn::layers
