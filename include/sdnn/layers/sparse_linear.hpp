// sdnn/layers/sparse_linear.hpp - a fully connected layer with sparse weights:
//
//   Y_out = epi(Y_in * W)      Y: batch x in_features (dense, row-major), W: in_features x out_features (sparse)
//
// with the fused epilogue of core/epilogue.hpp; epilogue_challenge(bias) gives the Sparse DNN
// Graph Challenge rule (bias only where the product is nonzero, ReLU, cap 32).
//
// Host execution is the plain reference loop (reference::dense_sparse_spmm).
// Device execution (compiled by nvcc: this header then pulls in layers/sparse_linear.cuh)
// follows Policy (policies/sparse_linear.hpp): the weights are uploaded and transposed to
// CSC once (at plan() or the first device call), then reused.
//
// Note: the device member functions exist only in translation units compiled by nvcc; a
// plain C++ translation unit sees the layer<T> defaults (which throw "no device
// implementation"). Use the device path from .cu files.
#pragma once

#if defined(__CUDACC__)
#include "sdnn/layers/sparse_linear.cuh"
#endif

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/pipeline/layer.hpp"
#include "sdnn/policies/sparse_linear.hpp"
#include "sdnn/reference/spmm.hpp"

namespace sdnn::layers {

template <class T, class Format = format::csr, class Policy = policy::sparse_linear_default>
class sparse_linear : public layer<T> {
  static_assert(std::is_same_v<Format, format::csr>, "sparse_linear: only format::csr weights are implemented");

 public:
  using value_type = T;
  using acc_type = accumulator_t<T>;
  using policy_type = Policy;

  // w: in_features x out_features (row = input neuron), host. epi.bias, when set, points to
  // out_features host values; they are copied (the pointer need not outlive the layer).
  sparse_linear(csr_matrix<T, std::int32_t> w, basic_epilogue<acc_type> epi)
      : in_(w.rows()), out_(w.cols()), nnz_(w.nnz()), w_(std::move(w)), epi_(epi) {
    if (epi.bias) bias_.assign(epi.bias, epi.bias + out_);
    epi_.bias = nullptr;
  }

  std::string name() const override { return "sparse_linear<" + policy::name<Policy>() + ">"; }
  std::int64_t out_features(std::int64_t in_features) const override {
    SDNN_EXPECTS(in_features == in_, "sparse_linear: expected ", in_, " input features, got ", in_features);
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

#if defined(__CUDACC__)
  // Builds the layer from weights already in device memory (W: in x out); no host copy is
  // kept, so forward(host_exec) is unavailable. Transposes to CSC on exec.stream.
  sparse_linear(csr_matrix<T, std::int32_t, device_space> const& w_device, basic_epilogue<acc_type> epi, cuda_exec exec)
      : in_(w_device.rows()), out_(w_device.cols()), nnz_(w_device.nnz()), epi_(epi) {
    if (epi.bias) bias_.assign(epi.bias, epi.bias + out_);
    epi_.bias = nullptr;
    device_ = std::make_shared<detail::sparse_linear_device<T>>(w_device.view(), epi_,
                                                                bias_.empty() ? nullptr : bias_.data(), exec);
    // Plan-time preparation (csc_tiled: tiles) is left to plan() or the first device call, so
    // that a pipeline can prepare many layers at once.
  }

  // Uploads and transposes the weights (first call only; csc_tiled also builds its tiles) and sizes the workspace for
  // `batch` rows. May synchronise exec.stream.
  void plan(std::int64_t batch, std::int64_t in_features, cuda_exec exec) override {
    out_features(in_features);
    device(exec).reserve(batch, exec);
    detail::sparse_linear_impl<Policy>::prepare(device(exec), exec);
  }
  void forward(cuda_exec exec, dense_view<T const> in, dense_view<T> out) override {
    check_shapes(in, out);
    detail::sparse_linear_impl<Policy>::forward_dense(device(exec), in, out, exec);
  }
  // out[r] = epi(in[r] * W) for the listed rows (device list of row ids, device count <=
  // max_live; list == nullptr: rows 0..max_live-1). flags[i] (device, optional) is set to 1
  // when listed row i has a nonzero output (the caller zeroes flags). No synchronisation
  // except for policy::cusparse_filter_rows (see its comment).
  void forward_rows(cuda_exec exec, dense_view<T const> in, dense_view<T> out, std::int32_t const* list,
                    std::int32_t const* count, std::int32_t max_live, int* flags) {
    SDNN_EXPECTS(in.cols == in_ && out.cols == out_, "sparse_linear: expected ", in_, " -> ", out_,
                 " features, got ", in.cols, " -> ", out.cols);
    detail::sparse_linear_impl<Policy>::forward_rows(device(exec), in, out, list, count, max_live, flags, exec);
  }
  static constexpr bool uses_row_list() { return detail::sparse_linear_impl<Policy>::uses_row_list; }
  static constexpr bool uses_tiles() { return detail::sparse_linear_impl<Policy>::uses_tiles; }

  detail::sparse_linear_device<T>& device(cuda_exec exec) {
    if (!device_) {
      SDNN_EXPECTS(has_host_weights(), "sparse_linear: no weights to upload");
      auto wd = csr_matrix<T, std::int32_t, device_space>(static_cast<std::int32_t>(in_), static_cast<std::int32_t>(out_),
                                                         static_cast<std::int32_t>(nnz_), exec);
      copy(wd.row_ptr(), w_.row_ptr(), exec);
      copy(wd.col_idx(), w_.col_idx(), exec);
      copy(wd.values(), w_.values(), exec);
      device_ = std::make_shared<detail::sparse_linear_device<T>>(wd.view(), epi_,
                                                                  bias_.empty() ? nullptr : bias_.data(), exec);
      detail::sparse_linear_impl<Policy>::prepare(*static_cast<detail::sparse_linear_device<T>*>(device_.get()), exec);
    }
    return *static_cast<detail::sparse_linear_device<T>*>(device_.get());
  }
#endif

 private:
  void check_shapes(dense_view<T const> in, dense_view<T> out) const {
    SDNN_EXPECTS(in.cols == in_, "sparse_linear: input has ", in.cols, " features, the layer takes ", in_);
    SDNN_EXPECTS(out.cols == out_, "sparse_linear: output has ", out.cols, " features, the layer gives ", out_);
    SDNN_EXPECTS(out.rows == in.rows, "sparse_linear: input has ", in.rows, " rows, output ", out.rows);
  }

  std::int64_t in_ = 0, out_ = 0, nnz_ = 0;
  csr_matrix<T, std::int32_t> w_;       // host copy (empty when built from device weights)
  std::vector<acc_type> bias_;          // [out] or empty
  basic_epilogue<acc_type> epi_;        // bias pointer left null: each backend installs its own
  std::shared_ptr<void> device_;        // detail::sparse_linear_device<T> once the device path ran
};

}  // namespace sdnn::layers
