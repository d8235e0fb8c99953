// sdnn/linear/op/quantized_spmm.hpp - products with quantized CSR weights (formats/quantized.hpp),
// host executor: the references the device kernels (linear/kernel/spmm_quantized.cuh) are
// tested against. Values are decoded on the fly to float and summed in float (Y * W) or
// double (A * B), in exactly the order of the float references (linear/reference/spmm.hpp), so
//     quantized_dense_sparse_spmm(x, q, y, epi) == dense_sparse_spmm(x, dequantize(q), y, epi)
//     quantized_spmm(q, b, c, epi)              == spmm(dequantize(q), b, c, epi)
// bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/formats/quantized.hpp"

namespace sdnn::ops {

// Y[M x N] = epi(X[M x K] * W[K x N]), W quantized (the sparse_linear forward): per output,
// k ascending, zero inputs skipped, one float rounding per add (reference::dense_sparse_row).
template <class Encoding>
void quantized_dense_sparse_spmm(host_exec, dense_view<float const> x, quantized_csr<Encoding> const& w,
                                 dense_view<float> y, basic_epilogue<float> const& epi) {
  SDNN_EXPECTS_DIMS(x.cols == w.rows, "quantized_dense_sparse_spmm: X is ", x.rows, " x ", x.cols, " but W has ",
                    w.rows, " rows");
  SDNN_EXPECTS_DIMS(y.rows == x.rows && y.cols == w.cols, "quantized_dense_sparse_spmm: Y must be ", x.rows, " x ",
                    w.cols, ", got ", y.rows, " x ", y.cols);
  std::vector<float> acc(static_cast<std::size_t>(w.cols));
  for (std::int64_t r = 0; r < x.rows; ++r) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    float const* in = x.row(r);
    for (std::int32_t k = 0; k < w.rows; ++k) {
      float const v = in[k];
      if (v == 0.0f) continue;
      for (std::int32_t p = w.row_ptr[static_cast<std::size_t>(k)]; p < w.row_ptr[static_cast<std::size_t>(k) + 1]; ++p) {
        std::int32_t const j = w.col_idx[static_cast<std::size_t>(p)];
        acc[static_cast<std::size_t>(j)] += v * w.enc.decode(p, j);
      }
    }
    for (std::int32_t j = 0; j < w.cols; ++j) y(r, j) = epi(acc[static_cast<std::size_t>(j)], j);
  }
}

// C[M x N] = epi(A[M x K] * B[K x N]), A quantized: sums in double in storage order, as
// reference::spmm(csr).
template <class Encoding>
void quantized_spmm(host_exec, quantized_csr<Encoding> const& a, dense_view<float const> b, dense_view<float> c,
                    basic_epilogue<float> const& epi) {
  SDNN_EXPECTS_DIMS(b.rows == a.cols, "quantized_spmm: A is ", a.rows, " x ", a.cols, " but B has ", b.rows, " rows");
  SDNN_EXPECTS_DIMS(c.rows == a.rows && c.cols == b.cols, "quantized_spmm: C must be ", a.rows, " x ", b.cols,
                    ", got ", c.rows, " x ", c.cols);
  std::vector<double> acc(static_cast<std::size_t>(b.cols));
  for (std::int32_t i = 0; i < a.rows; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (std::int32_t p = a.row_ptr[static_cast<std::size_t>(i)]; p < a.row_ptr[static_cast<std::size_t>(i) + 1]; ++p) {
      double const v = static_cast<double>(a.decode(p));
      std::int32_t const k = a.col_idx[static_cast<std::size_t>(p)];
      for (std::int64_t j = 0; j < b.cols; ++j) acc[static_cast<std::size_t>(j)] += v * static_cast<double>(b(k, j));
    }
    for (std::int64_t j = 0; j < b.cols; ++j) c(i, j) = epi(static_cast<float>(acc[static_cast<std::size_t>(j)]), j);
  }
}

}  // namespace sdnn::ops
