// sdnn/linear/sparse_linear.hpp - layers::sparse_linear, a fully connected sparse layer:
//
//   Y_out = epi(Y_in * W)      Y: batch x in_features (dense, row-major), W: in_features x out_features (sparse)
//
// with the fused epilogue of core/epilogue.hpp (e.g. epilogue_capped_relu(bias): bias only where
// the product is nonzero, ReLU, cap 32). The device members run the bodies of
// linear/sparse_linear.cuh when one .cu of the program compiled them (see the class;
// docs/linear.md#the-sparse-linear-layer), else throw not_compiled.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sdnn/core/config.hpp"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/numeric.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/layers/layer.hpp"
#include "sdnn/linear/op/dense_sparse.hpp"
#include "sdnn/linear/policy/dense_sparse.hpp"
#include "sdnn/linear/reference/spmm.hpp"

namespace sdnn::layers {

// Host execution is the plain reference (reference::dense_sparse_spmm's order). Device
// execution runs ops::dense_sparse_plan<Policy, T> (linear/op/dense_sparse.cuh), the one dense x
// sparse path of sdnn: the layer adds the bias on the device and the layer<T> interface.
//
// The same class in every compiler: the device members are defined here for every translation
// unit, as calls through the type's table (layers/layer.hpp, detail::device_registration). The
// bodies are in linear/sparse_linear.cuh; a .cu that includes it (sdnn.hpp does) and constructs
// the type installs them, as does SDNN_INSTANTIATE_SPARSE_LINEAR(T, Policy) in any .cu. A
// program where no .cu does (a host-only program, or SDNN_HAS_CUDA=0) links, and the device
// members throw sdnn::not_compiled saying so.
template <class T, class Format = format::csr, class Policy = policy::sparse_linear_default>
class sparse_linear : public layer<T> {
  static_assert(std::is_same_v<Format, format::csr>, "sparse_linear: only format::csr weights are implemented");

 public:
  using value_type = T;
  using acc_type = accumulator_t<T>;
  using policy_type = Policy;
  using plan_type = ops::dense_sparse_plan<Policy, T>;

  // w: in_features x out_features (row = input neuron), host; validated here (validate(w):
  // the first bad entry is named). epi.bias, when set, holds out_features host values: checked
  // when the epilogue carries its length (epi.bias_count, set by the factories that take a
  // container), trusted for a bare pointer; they are copied (the pointer need not outlive the
  // layer). The device plan is made from this host copy (transposed and tiled on the host,
  // uploaded once).
  sparse_linear(csr_matrix<T, std::int32_t> w, basic_epilogue<acc_type> epi)
      : in_(w.rows()), out_(w.cols()), nnz_(w.nnz()), w_(std::move(w)), epi_(epi) {
    request_device_code();
    validate(w_);
    take_bias(epi);
  }
  // From weights already in device memory (W: in x out; not validated: they are not read on
  // the host); no host copy is kept, so forward(host_exec) is unavailable. Transposes W on
  // exec.stream (async); plan() makes the device plan (csc_tiled policies synchronise once).
  sparse_linear(csr_matrix<T, std::int32_t, device_space> const& w_device, basic_epilogue<acc_type> epi, cuda_exec exec)
      : in_(w_device.rows()), out_(w_device.cols()), nnz_(w_device.nnz()), epi_(epi) {
    request_device_code();
    take_bias(epi);
    (this->*device_members("sparse_linear(device weights)").from_device)(w_device, exec);
  }

  std::string name() const override { return "sparse_linear<" + policy::name<Policy>() + ">"; }
  std::int64_t out_features(std::int64_t in_features) const override {
    SDNN_EXPECTS_DIMS(in_features == in_, "sparse_linear: expected ", in_, " input features, got ", in_features);
    return out_;
  }
  std::int64_t in_features() const noexcept { return in_; }
  std::int64_t out_features() const noexcept { return out_; }
  std::int64_t nnz() const noexcept { return nnz_; }
  bool has_host_weights() const noexcept { return w_.rows() == in_ && w_.nnz() == nnz_ && (in_ > 0 || nnz_ == 0); }
  csr_matrix<T, std::int32_t> const& weights() const noexcept { return w_; }
  // The epilogue with the host bias pointer (valid while the layer lives) and its length.
  basic_epilogue<acc_type> host_epilogue() const {
    basic_epilogue<acc_type> e = epi_;
    e.bias = bias_.empty() ? nullptr : bias_.data();
    e.bias_count = bias_.empty() ? -1 : static_cast<std::int64_t>(bias_.size());
    return e;
  }

  void forward(host_exec, dense_view<T const> in, dense_view<T> out) override {
    check_shapes(in, out);
    SDNN_EXPECTS(has_host_weights(), "sparse_linear: this layer was built from device weights; it has no host copy");
    reference::dense_sparse_spmm(in, w_.view(), out, host_epilogue());
  }

  // Makes the device plan (first call: upload, transpose, tiles) with a workspace for `batch`
  // rows. May synchronise exec.stream.
  void plan(std::int64_t batch, std::int64_t in_features, cuda_exec exec) override {
    (this->*device_members("plan(cuda_exec)").plan)(batch, in_features, exec);
  }
  // Every row of out = epi(in * W), on exec.stream. Plans first (for in.rows rows) when plan()
  // was not called or was called for fewer rows: that allocates.
  void forward(cuda_exec exec, dense_view<T const> in, dense_view<T> out) override {
    (this->*device_members("forward(cuda_exec)").forward)(exec, in, out);
  }
  // out[r] = epi(in[r] * W) for the listed rows only; rows and flags as for
  // ops::dense_sparse_plan::run_rows. Needs plan(). No synchronisation except for
  // policy::cusparse_filter_rows (see its comment).
  void forward_rows(cuda_exec exec, dense_view<T const> in, dense_view<T> out, ops::listed_rows rows,
                    int* flags) const {
    (this->*device_members("forward_rows(cuda_exec)").forward_rows)(exec, in, out, rows, flags);
  }
  // The device plan (after plan()), e.g. for its tiles_ok() or workspace_bytes().
  plan_type const& device_plan() const { return (this->*device_members("device_plan()").device_plan)(); }

  static constexpr bool uses_row_list() { return policy::dense_sparse_traits<Policy>::uses_row_list; }
  static constexpr bool uses_tiles() { return policy::dense_sparse_traits<Policy>::uses_tiles; }

 private:
  void check_shapes(dense_view<T const> in, dense_view<T> out) const {
    SDNN_EXPECTS_DIMS(in.cols == in_, "sparse_linear: input has ", in.cols, " features, the layer takes ", in_);
    SDNN_EXPECTS_DIMS(out.cols == out_, "sparse_linear: output has ", out.cols, " features, the layer gives ", out_);
    SDNN_EXPECTS_DIMS(out.rows == in.rows, "sparse_linear: input has ", in.rows, " rows, output ", out.rows);
  }

  // The bias of epi, copied; the layer's epilogue keeps a null pointer (each backend installs
  // its own copy).
  void take_bias(basic_epilogue<acc_type> const& epi) {
    SDNN_EXPECTS_DIMS(epi.bias_count < 0 || epi.bias_count == out_, "sparse_linear: the bias has ", epi.bias_count,
                      " values, the layer has ", out_, " outputs");
    SDNN_EXPECTS(epi.bias || epi.bias_count <= 0, "sparse_linear: bias_count is ", epi.bias_count,
                 " but the bias pointer is null");
    SDNN_EXPECTS(!epi.bias || epi.bias_count >= 0, "sparse_linear: the bias is a bare pointer of unknown length; give "
                 "it with its length (epilogue_relu(std::vector), epilogue_relu(ptr, n) or epi.bias_count = n)");
    if (epi.bias) bias_.assign(epi.bias, epi.bias + out_);
    epi_.bias = nullptr;
    epi_.bias_count = -1;
  }

  struct device_state;  // defined in linear/sparse_linear.cuh: the plan and the device bias

  // The device members' bodies, defined in linear/sparse_linear.cuh and called only through
  // the type's table (layers/layer.hpp, detail::device_registration).
  void from_device_body(csr_matrix<T, std::int32_t, device_space> const& w_device, cuda_exec exec);
  void plan_body(std::int64_t batch, std::int64_t in_features, cuda_exec exec);
  void forward_body(cuda_exec exec, dense_view<T const> in, dense_view<T> out);
  void forward_rows_body(cuda_exec exec, dense_view<T const> in, dense_view<T> out, ops::listed_rows rows,
                         int* flags) const;
  plan_type const& device_plan_body() const;
  struct device_table {
    void (sparse_linear::*from_device)(csr_matrix<T, std::int32_t, device_space> const&, cuda_exec);
    void (sparse_linear::*plan)(std::int64_t, std::int64_t, cuda_exec);
    void (sparse_linear::*forward)(cuda_exec, dense_view<T const>, dense_view<T>);
    void (sparse_linear::*forward_rows)(cuda_exec, dense_view<T const>, dense_view<T>, ops::listed_rows, int*) const;
    plan_type const& (sparse_linear::*device_plan)() const;
  };
  static device_table const device_bodies;                    // linear/sparse_linear.cuh
  static inline device_table const* device_table_ = nullptr;  // null: no .cu compiled the bodies
  template <class>
  friend struct ::sdnn::detail::device_registration;

  static device_table const& device_members(char const* member) {
    if (device_table_) return *device_table_;
    std::string const type = std::string("layers::sparse_linear<") + value_type_name<T>() + ", csr, " +
                             policy::name<Policy>() + ">";
    throw not_compiled(type + "::" + member,
                       ::sdnn::detail::no_device_code(
                           type, std::string("SDNN_INSTANTIATE_SPARSE_LINEAR(") + value_type_name<T>() + ", Policy)"),
                       __FILE__, __LINE__);
  }
  // Compiled by a CUDA compiler: asks for this type's registration (layers/layer.hpp).
  static void request_device_code() noexcept {
#if defined(__CUDACC__)
    request_device_members(::sdnn::detail::device_tag<sparse_linear>{}, 0);
#endif
  }

  std::int64_t in_ = 0, out_ = 0, nnz_ = 0;
  csr_matrix<T, std::int32_t> w_;         // host copy (empty when built from device weights)
  std::vector<acc_type> bias_;            // [out] or empty
  basic_epilogue<acc_type> epi_;          // bias pointer left null: each backend installs its own
  std::shared_ptr<device_state> device_;  // once a device plan was made
};

}  // namespace sdnn::layers
