// sdnn/linear/op/quantized_spmm.cuh - the device side of the products with quantized CSR weights
// (linear/op/quantized_spmm.hpp has the host references; linear/kernel/spmm_quantized.cuh the
// kernels): device_quantized_csr (the upload), ops::quantized_dense_sparse_plan
// (Y = epi(X * W)), ops::quantized_spmm_plan (C = epi(A * B)) and their one-shot calls.
// Operands x, y, b, c and epi.bias are device memory; the weights are the host containers of
// formats/quantized.hpp, which the plans copy (the container may be destroyed after the
// constructor returns). Results against the host: docs/linear.md#quantized-products.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/formats/dense.hpp"
#include "sdnn/formats/quantized.hpp"
#include "sdnn/linear/kernel/spmm_quantized.cuh"
#include "sdnn/linear/op/quantized_spmm.hpp"

namespace sdnn {

namespace detail {
template <class Encoding>
struct quantized_values_of;
template <>
struct quantized_values_of<int8_encoding> {
  using type = kernels::int8_values_view;
};
template <>
struct quantized_values_of<codebook4_encoding> {
  using type = kernels::codebook4_values_view;
};
}  // namespace detail

// A quantized CSR in device memory: row_ptr, col_idx and the encoding's arrays (int8: codes,
// scales, zero points; codebook4: packed indices, the codebook widened to float). `groups_by_row`
// (the W^T upload of the dense x sparse plan) makes an int8 channel a row of this matrix
// instead of a column; the arrays are copied as given.
template <class Encoding>
class device_quantized_csr {
 public:
  using values_view = typename detail::quantized_values_of<Encoding>::type;
  device_quantized_csr() = default;
  device_quantized_csr(quantized_csr<Encoding> const& q, cuda_exec exec)
      : rows_(q.rows), cols_(q.cols), nnz_(q.nnz()),
        row_ptr_(to_device(q.row_ptr.data(), q.row_ptr.size(), exec)),
        col_idx_(to_device(q.col_idx.data(), q.col_idx.size(), exec)) {
    if constexpr (std::is_same_v<Encoding, int8_encoding>) {
      q_ = to_device(q.enc.q.data(), q.enc.q.size(), exec);
      scale_ = to_device(q.enc.scale.data(), q.enc.scale.size(), exec);
      zero_ = to_device(q.enc.zero.data(), q.enc.zero.size(), exec);
      per_channel_ = q.enc.granularity == quant_granularity::per_channel;
    } else {
      packed_ = to_device(q.enc.packed.data(), q.enc.packed.size(), exec);
      for (int c = 0; c < 16; ++c) codebook_[c] = q.enc.centroid(static_cast<unsigned>(c));
    }
  }

  std::int32_t rows() const noexcept { return rows_; }
  std::int32_t cols() const noexcept { return cols_; }
  std::int32_t nnz() const noexcept { return nnz_; }

  kernels::quantized_csr_view<values_view> view() const {
    kernels::quantized_csr_view<values_view> v;
    v.rows = rows_;
    v.cols = cols_;
    v.nnz = nnz_;
    v.row_ptr = row_ptr_.data();
    v.col_idx = col_idx_.data();
    if constexpr (std::is_same_v<Encoding, int8_encoding>) {
      v.values.q = q_.data();
      v.values.scale = scale_.data();
      v.values.zero = zero_.data();
      v.values.per_channel = per_channel_;
    } else {
      v.values.packed = packed_.data();
      for (int c = 0; c < 16; ++c) v.values.codebook[c] = codebook_[c];
    }
    return v;
  }

  // Device bytes of the weights: indices, values, parameters (as footprint() on the host).
  weight_footprint bytes() const noexcept {
    weight_footprint f;
    f.index_bytes = (row_ptr_.size() + col_idx_.size()) * sizeof(std::int32_t);
    if constexpr (std::is_same_v<Encoding, int8_encoding>) {
      f.value_bytes = q_.size();
      f.param_bytes = scale_.size() * sizeof(float) + zero_.size() * sizeof(std::int32_t);
    } else {
      f.value_bytes = packed_.size();
      f.param_bytes = 16 * sizeof(std::uint16_t);
    }
    return f;
  }

 private:
  std::int32_t rows_ = 0, cols_ = 0, nnz_ = 0;
  buffer<std::int32_t, device_space> row_ptr_, col_idx_;
  buffer<std::int8_t, device_space> q_;
  buffer<float, device_space> scale_;
  buffer<std::int32_t, device_space> zero_;
  bool per_channel_ = false;
  buffer<std::uint8_t, device_space> packed_;
  float codebook_[16] = {};
};

namespace ops {

// Why a quantized_csr cannot be planned (empty: it can): sizes and indices are checked, as a
// device kernel reading an inconsistent container would read out of bounds (inconsistent
// sizes, indices out of range, more than int32 entries). Both plans follow the protocol of
// core/plan.hpp: their constructors check this and throw sdnn::error; run() is const,
// enqueues on exec.stream and never allocates, frees or synchronises; neither plan needs a
// workspace (workspace_bytes() is 0; a workspace argument is accepted and ignored, for
// uniformity).
template <class Encoding>
plan_status quantized_can_implement(quantized_csr<Encoding> const& q) {
  using ::sdnn::detail::concat;
  if (q.rows < 0 || q.cols < 0)
    return plan_status::failure(concat("quantized weights: ", q.rows, " x ", q.cols, ": sizes must be >= 0"));
  if (q.row_ptr.size() != static_cast<std::size_t>(q.rows) + 1)
    return plan_status::failure(concat("quantized weights: row_ptr has ", q.row_ptr.size(), " entries, need ",
                                       static_cast<std::int64_t>(q.rows) + 1));
  if (q.col_idx.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    return plan_status::failure(concat("quantized weights: ", q.col_idx.size(), " entries exceed int32"));
  std::size_t const nnz = q.col_idx.size();
  if (q.row_ptr[0] != 0 || static_cast<std::size_t>(q.row_ptr.back()) != nnz)
    return plan_status::failure(concat("quantized weights: row_ptr must run from 0 to nnz = ", nnz, ", got ",
                                       q.row_ptr[0], " .. ", q.row_ptr.back()));
  for (std::int32_t i = 0; i < q.rows; ++i)
    if (q.row_ptr[static_cast<std::size_t>(i) + 1] < q.row_ptr[static_cast<std::size_t>(i)])
      return plan_status::failure(concat("quantized weights: row_ptr decreases at row ", i));
  for (std::size_t p = 0; p < nnz; ++p)
    if (q.col_idx[p] < 0 || q.col_idx[p] >= q.cols)
      return plan_status::failure(concat("quantized weights: col_idx[", p, "] = ", q.col_idx[p], " outside [0, ",
                                         q.cols, ")"));
  if constexpr (std::is_same_v<Encoding, int8_encoding>) {
    std::size_t const groups =
        q.enc.granularity == quant_granularity::per_layer ? 1 : static_cast<std::size_t>(q.cols);
    if (q.enc.q.size() != nnz)
      return plan_status::failure(concat("quantized weights (int8): ", q.enc.q.size(), " codes for ", nnz, " entries"));
    if (nnz > 0 && (q.enc.scale.size() < groups || q.enc.zero.size() < groups))
      return plan_status::failure(concat("quantized weights (int8): ", q.enc.scale.size(), " scales and ",
                                         q.enc.zero.size(), " zero points for ", groups, " groups"));
  } else {
    if (q.enc.packed.size() < (nnz + 1) / 2)
      return plan_status::failure(concat("quantized weights (codebook4): ", q.enc.packed.size(),
                                         " packed bytes for ", nnz, " entries"));
  }
  return {};
}

namespace detail {
// The codes of W^T (N x K; row j lists column j of W in the order the host reference meets
// its entries: k ascending, storage order among duplicates), a stable counting sort. int8
// parameters are copied (an int8 channel of the result is its row); codebook indices are
// repacked. The result is a quantized_csr only as a container for the upload.
template <class Encoding>
quantized_csr<Encoding> transpose_codes(quantized_csr<Encoding> const& w) {
  quantized_csr<Encoding> t;
  t.rows = w.cols;
  t.cols = w.rows;
  std::size_t const nnz = w.col_idx.size();
  t.row_ptr.assign(static_cast<std::size_t>(w.cols) + 1, 0);
  for (std::size_t p = 0; p < nnz; ++p) ++t.row_ptr[static_cast<std::size_t>(w.col_idx[p]) + 1];
  for (std::size_t j = 0; j < static_cast<std::size_t>(w.cols); ++j) t.row_ptr[j + 1] += t.row_ptr[j];
  std::vector<std::int32_t> next(t.row_ptr.begin(), t.row_ptr.end() - 1);
  std::vector<std::size_t> from(nnz);  // from[position in W^T] = position in W
  t.col_idx.resize(nnz);
  for (std::int32_t k = 0; k < w.rows; ++k)
    for (std::int32_t p = w.row_ptr[static_cast<std::size_t>(k)]; p < w.row_ptr[static_cast<std::size_t>(k) + 1];
         ++p) {
      auto const dst = static_cast<std::size_t>(next[static_cast<std::size_t>(w.col_idx[static_cast<std::size_t>(p)])]++);
      t.col_idx[dst] = k;
      from[dst] = static_cast<std::size_t>(p);
    }
  if constexpr (std::is_same_v<Encoding, int8_encoding>) {
    t.enc.granularity = w.enc.granularity;
    t.enc.symmetric = w.enc.symmetric;
    t.enc.scale = w.enc.scale;
    t.enc.zero = w.enc.zero;
    t.enc.q.resize(nnz);
    for (std::size_t d = 0; d < nnz; ++d) t.enc.q[d] = w.enc.q[from[d]];
  } else {
    t.enc.codebook = w.enc.codebook;
    t.enc.packed.assign((nnz + 1) / 2, 0);
    for (std::size_t d = 0; d < nnz; ++d) {
      auto const c = static_cast<std::uint8_t>(w.enc.index(static_cast<std::int64_t>(from[d])));
      t.enc.packed[d >> 1] |= static_cast<std::uint8_t>((d & 1) ? (c << 4) : c);
    }
  }
  return t;
}

template <class Encoding>
quantized_csr<Encoding> const& checked_quantized(quantized_csr<Encoding> const& q) {
  return ::sdnn::detail::implementable(quantized_can_implement(q), q);
}
}  // namespace detail

// Y[M x N] = epi(X[M x K] * W[K x N]), W quantized; bitwise equal to the host reference.
template <class Encoding>
class quantized_dense_sparse_plan {
 public:
  using encoding_type = Encoding;
  static plan_status can_implement(quantized_csr<Encoding> const& w) { return quantized_can_implement(w); }

  // Transposes W's codes on the host and uploads them on exec.stream (pageable copies are
  // staged, so W may be destroyed when this returns). opt is accepted for the protocol (no
  // workspace, no row limit).
  quantized_dense_sparse_plan(quantized_csr<Encoding> const& w, cuda_exec exec, plan_options = {})
      : runs_(exec),
        k_(detail::checked_quantized(w).rows),
        n_(w.cols),
        wt_(detail::transpose_codes(w), runs_.owned(exec)) {}

  quantized_dense_sparse_plan(quantized_dense_sparse_plan&&) noexcept = default;
  quantized_dense_sparse_plan& operator=(quantized_dense_sparse_plan&&) noexcept = default;

  std::int64_t in_features() const noexcept { return k_; }
  std::int64_t out_features() const noexcept { return n_; }
  std::size_t workspace_bytes() const noexcept { return 0; }
  // Device bytes of the weights (W^T of the codes: the same sizes as footprint(w) but for
  // row_ptr, which has N + 1 entries instead of K + 1).
  weight_footprint weight_bytes() const noexcept { return wt_.bytes(); }
  // W^T of the codes on the device (int8 channel = row).
  auto wt() const { return wt_.view(); }

  // y = epi(x * W): x M x K, y M x N, device; epi.bias device or nullptr.
  void run(cuda_exec exec, dense_view<float const> x, dense_view<float> y, basic_epilogue<float> const& epi,
           workspace = {}) const {
    SDNN_EXPECTS_DIMS(x.cols == k_ && y.rows == x.rows && y.cols == n_, "quantized_dense_sparse_plan: X ", x.rows,
                      " x ", x.cols, ", W ", k_, " x ", n_, ", Y ", y.rows, " x ", y.cols);
    runs_.note(exec);
    kernels::quantized_dense_csc_spmm(x, wt_.view(), y, epi, exec);
  }

 private:
  sdnn::detail::run_streams runs_;  // first: wt_ is allocated through runs_.owned() (core/plan.cuh)
  std::int64_t k_ = 0, n_ = 0;
  device_quantized_csr<Encoding> wt_;
};

// C[M x N] = epi(A[M x K] * B[K x N]), A quantized; float sums, which differ from the host
// reference (double sums) only by float rounding (bound in linear/kernel/spmm_quantized.cuh);
// with small-integer data the result is exact.
template <class Encoding>
class quantized_spmm_plan {
 public:
  using encoding_type = Encoding;
  static plan_status can_implement(quantized_csr<Encoding> const& a) { return quantized_can_implement(a); }

  // Uploads A as stored on exec.stream (A may be destroyed when this returns).
  quantized_spmm_plan(quantized_csr<Encoding> const& a, cuda_exec exec, plan_options = {})
      : runs_(exec), a_(detail::checked_quantized(a), runs_.owned(exec)) {}

  quantized_spmm_plan(quantized_spmm_plan&&) noexcept = default;
  quantized_spmm_plan& operator=(quantized_spmm_plan&&) noexcept = default;

  std::size_t workspace_bytes() const noexcept { return 0; }
  weight_footprint weight_bytes() const noexcept { return a_.bytes(); }
  auto a() const { return a_.view(); }

  // c = epi(A * b): b K x N, c M x N, device; epi.bias device or nullptr.
  void run(cuda_exec exec, dense_view<float const> b, dense_view<float> c, basic_epilogue<float> const& epi,
           workspace = {}) const {
    SDNN_EXPECTS_DIMS(b.rows == a_.cols() && c.rows == a_.rows() && c.cols == b.cols, "quantized_spmm_plan: A ",
                      a_.rows(), " x ", a_.cols(), ", B ", b.rows, " x ", b.cols, ", C ", c.rows, " x ", c.cols);
    runs_.note(exec);
    kernels::quantized_csr_spmm(a_.view(), b, c, epi, exec);
  }

 private:
  sdnn::detail::run_streams runs_;  // first: a_ is allocated through runs_.owned() (core/plan.cuh)
  device_quantized_csr<Encoding> a_;
};

// One shot on the device: x, y, epi.bias device; w host. Makes a plan and runs it once
// (the plan's buffers are released stream-ordered after the run).
template <class Encoding>
void quantized_dense_sparse_spmm(cuda_exec exec, dense_view<float const> x, quantized_csr<Encoding> const& w,
                                 dense_view<float> y, basic_epilogue<float> const& epi) {
  SDNN_EXPECTS_DIMS(x.cols == w.rows, "quantized_dense_sparse_spmm: X is ", x.rows, " x ", x.cols, " but W has ",
                    w.rows, " rows");
  SDNN_EXPECTS_DIMS(y.rows == x.rows && y.cols == w.cols, "quantized_dense_sparse_spmm: Y must be ", x.rows, " x ",
                    w.cols, ", got ", y.rows, " x ", y.cols);
  quantized_dense_sparse_plan<Encoding>(w, exec).run(exec, x, y, epi);
}

// One shot on the device: b, c, epi.bias device; a host.
template <class Encoding>
void quantized_spmm(cuda_exec exec, quantized_csr<Encoding> const& a, dense_view<float const> b, dense_view<float> c,
                    basic_epilogue<float> const& epi) {
  SDNN_EXPECTS_DIMS(b.rows == a.cols, "quantized_spmm: A is ", a.rows, " x ", a.cols, " but B has ", b.rows, " rows");
  SDNN_EXPECTS_DIMS(c.rows == a.rows && c.cols == b.cols, "quantized_spmm: C must be ", a.rows, " x ", b.cols,
                    ", got ", c.rows, " x ", c.cols);
  quantized_spmm_plan<Encoding>(a, exec).run(exec, b, c, epi);
}

}  // namespace ops
}  // namespace sdnn
