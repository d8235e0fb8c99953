// sdnn/linear/sparse_linear.hpp - layers::sparse_linear, a fully connected sparse layer:
//
//   Y_out = epi(Y_in * W)      Y: batch x in_features (dense, row-major), W: in_features x out_features (sparse)
//
// with the fused epilogue of core/epilogue.hpp (e.g. epilogue_capped_relu(bias): bias only where
// the product is nonzero, ReLU, cap 32). A program with CUDA must compile
// linear/sparse_linear.cuh, where the device members are defined, in one .cu (see the class;
// docs/linear.md#the-sparse-linear-layer).
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
// The same class in every compiler: the device members are declared here for every
// translation unit. They are defined in linear/sparse_linear.cuh; a program with CUDA
// (SDNN_HAS_CUDA=1) must compile that header in at least one .cu that instantiates the layer
// type: constructing the type there is enough, else SDNN_INSTANTIATE_SPARSE_LINEAR(T, Policy)
// in any .cu; without either, the link names the missing member. Without CUDA
// (SDNN_HAS_CUDA=0) they throw sdnn::not_compiled.
template <class T, class Format = format::csr, class Policy = policy::sparse_linear_default>
class sparse_linear : public layer<T> {
  static_assert(std::is_same_v<Format, format::csr>, "sparse_linear: only format::csr weights are implemented");

 public:
  using value_type = T;
  using acc_type = accumulator_t<T>;
  using policy_type = Policy;
  using plan_type = ops::dense_sparse_plan<Policy, T>;

  // w: in_features x out_features (row = input neuron), host. epi.bias, when set, points to
  // out_features host values; they are copied (the pointer need not outlive the layer). The
  // device plan is made from this host copy (transposed and tiled on the host, uploaded once).
  sparse_linear(csr_matrix<T, std::int32_t> w, basic_epilogue<acc_type> epi)
      : in_(w.rows()), out_(w.cols()), nnz_(w.nnz()), w_(std::move(w)), epi_(epi) {
    if (epi.bias) bias_.assign(epi.bias, epi.bias + out_);
    epi_.bias = nullptr;
  }
  // From weights already in device memory (W: in x out); no host copy is kept, so
  // forward(host_exec) is unavailable. Makes the device plan on exec.stream (see
  // ops::dense_sparse_plan: csc_tiled policies synchronise it once).
  sparse_linear(csr_matrix<T, std::int32_t, device_space> const& w_device, basic_epilogue<acc_type> epi, cuda_exec exec);

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
  // The epilogue with the host bias pointer (valid while the layer lives).
  basic_epilogue<acc_type> host_epilogue() const {
    basic_epilogue<acc_type> e = epi_;
    e.bias = bias_.empty() ? nullptr : bias_.data();
    return e;
  }

  void forward(host_exec, dense_view<T const> in, dense_view<T> out) override {
    check_shapes(in, out);
    SDNN_EXPECTS(has_host_weights(), "sparse_linear: this layer was built from device weights; it has no host copy");
    reference::dense_sparse_spmm(in, w_.view(), out, host_epilogue());
  }

  // Makes the device plan (first call: upload, transpose, tiles) with a workspace for `batch`
  // rows. May synchronise exec.stream.
  void plan(std::int64_t batch, std::int64_t in_features, cuda_exec exec) override;
  // Every row of out = epi(in * W), on exec.stream. Plans first (for in.rows rows) when plan()
  // was not called or was called for fewer rows: that allocates.
  void forward(cuda_exec exec, dense_view<T const> in, dense_view<T> out) override;
  // out[r] = epi(in[r] * W) for the listed rows only; rows and flags as for
  // ops::dense_sparse_plan::run_rows. Needs plan(). No synchronisation except for
  // policy::cusparse_filter_rows (see its comment).
  void forward_rows(cuda_exec exec, dense_view<T const> in, dense_view<T> out, ops::listed_rows rows,
                    int* flags) const;
  // The device plan (after plan()), e.g. for its tiles_ok() or workspace_bytes().
  plan_type const& device_plan() const;

  static constexpr bool uses_row_list() { return policy::dense_sparse_traits<Policy>::uses_row_list; }
  static constexpr bool uses_tiles() { return policy::dense_sparse_traits<Policy>::uses_tiles; }

 private:
  void check_shapes(dense_view<T const> in, dense_view<T> out) const {
    SDNN_EXPECTS_DIMS(in.cols == in_, "sparse_linear: input has ", in.cols, " features, the layer takes ", in_);
    SDNN_EXPECTS_DIMS(out.cols == out_, "sparse_linear: output has ", out.cols, " features, the layer gives ", out_);
    SDNN_EXPECTS_DIMS(out.rows == in.rows, "sparse_linear: input has ", in.rows, " rows, output ", out.rows);
  }

  struct device_state;  // defined in linear/sparse_linear.cuh: the plan and the device bias

  std::int64_t in_ = 0, out_ = 0, nnz_ = 0;
  csr_matrix<T, std::int32_t> w_;         // host copy (empty when built from device weights)
  std::vector<acc_type> bias_;            // [out] or empty
  basic_epilogue<acc_type> epi_;          // bias pointer left null: each backend installs its own
  std::shared_ptr<device_state> device_;  // once a device plan was made
};

#if !SDNN_HAS_CUDA
// A build without CUDA: the device members exist and say so.
template <class T, class F, class P>
sparse_linear<T, F, P>::sparse_linear(csr_matrix<T, std::int32_t, device_space> const&, basic_epilogue<acc_type>,
                                      cuda_exec) {
  SDNN_NOT_COMPILED("layers::sparse_linear(device weights)", "this build has no CUDA (SDNN_ENABLE_CUDA=OFF)");
}
template <class T, class F, class P>
void sparse_linear<T, F, P>::plan(std::int64_t, std::int64_t, cuda_exec) {
  SDNN_NOT_COMPILED("layers::sparse_linear::plan(cuda_exec)", "this build has no CUDA (SDNN_ENABLE_CUDA=OFF)");
}
template <class T, class F, class P>
void sparse_linear<T, F, P>::forward(cuda_exec, dense_view<T const>, dense_view<T>) {
  SDNN_NOT_COMPILED("layers::sparse_linear::forward(cuda_exec)", "this build has no CUDA (SDNN_ENABLE_CUDA=OFF)");
}
template <class T, class F, class P>
void sparse_linear<T, F, P>::forward_rows(cuda_exec, dense_view<T const>, dense_view<T>, ops::listed_rows,
                                          int*) const {
  SDNN_NOT_COMPILED("layers::sparse_linear::forward_rows(cuda_exec)", "this build has no CUDA (SDNN_ENABLE_CUDA=OFF)");
}
template <class T, class F, class P>
auto sparse_linear<T, F, P>::device_plan() const -> plan_type const& {
  SDNN_NOT_COMPILED("layers::sparse_linear::device_plan()", "this build has no CUDA (SDNN_ENABLE_CUDA=OFF)");
}
#endif

}  // namespace sdnn::layers
