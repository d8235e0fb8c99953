// sdnn/challenge/reference.hpp - the official serial Sparse DNN Graph Challenge computation
// (plain host code; the oracle for every device pipeline): challenge_layer, challenge_infer (all
// layers) and challenge_categories (the 1-based ids of the rows of the final Y whose sum is
// nonzero, ascending). Every Z(i, j) is summed over k ascending with one float rounding per add,
// the order of a serial row-by-row product (docs/challenge.md#the-computation).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/linear/reference/spmm.hpp"  // add_scaled_row: the one host Y * W order

namespace sdnn::reference {

// One layer, Y (inputs x N, CSR, row = input) and W (N x N', CSR, row = input neuron):
//   Z = Y * W;  where Z != 0: Y' = Z + bias, elsewhere Y' = 0;  Y' = min(max(Y', 0), cap),
// i.e. sdnn::epilogue_capped_relu(bias, cap) (core/epilogue.hpp), the device kernels' rule too.
// Only nonzero Y' entries are stored (rows that die stay empty), columns ascending.
// Z is accumulated in float, row by row (Gustavson): for row i of Y, its stored entries k are
// visited in ascending column order and Y(i,k) * W(k,:) is added into a dense float row
// (reference::add_scaled_row, linear/reference/spmm.hpp, shared with every host Y * W). Z(i,j)
// counts as nonzero by value (a structural entry that sums to exactly 0 gets no bias).
inline csr_matrix<float, std::int32_t> challenge_layer(csr_matrix<float, std::int32_t> const& y,
                                                       csr_matrix<float, std::int32_t> const& w, float bias,
                                                       float cap = 32.f) {
  SDNN_EXPECTS(y.cols() == w.rows(), "challenge_layer: Y is ", y.rows(), " x ", y.cols(), " but W is ", w.rows(),
               " x ", w.cols(), " (Y.cols must equal W.rows)");
  auto const ep = epilogue_capped_relu<float>(bias, cap);
  std::int32_t const rows = y.rows(), n = w.cols();
  auto const yv = y.view();
  auto const wv = w.view();

  std::vector<float> acc(static_cast<std::size_t>(n), 0.f);
  std::vector<char> touched(static_cast<std::size_t>(n), 0);
  std::vector<std::int32_t> cols_touched;  // columns of the current Z row, unordered
  std::vector<std::int32_t> row_ptr(static_cast<std::size_t>(rows) + 1, 0);
  std::vector<std::int32_t> col_idx;
  std::vector<float> values;
  for (std::int32_t i = 0; i < rows; ++i) {
    cols_touched.clear();
    for (std::int32_t a = yv.row_ptr[i]; a < yv.row_ptr[i + 1]; ++a) {
      float const yk = yv.values[a];
      if (yk == 0.f) continue;  // a stored zero adds nothing (the one Y * W order skips zero inputs)
      add_scaled_row(yk, wv, yv.col_idx[a], acc.data(), [&](std::int32_t j) {
        if (!touched[static_cast<std::size_t>(j)]) {
          touched[static_cast<std::size_t>(j)] = 1;
          cols_touched.push_back(j);
        }
      });
    }
    // Emit in ascending column order: scan the dense row when the row is dense enough,
    // else sort the touched list.
    auto emit = [&](std::int32_t j) {
      float const z = acc[static_cast<std::size_t>(j)];
      float const out = ep(z, j);
      if (out != 0.f) {
        col_idx.push_back(j);
        values.push_back(out);
      }
      acc[static_cast<std::size_t>(j)] = 0.f;
      touched[static_cast<std::size_t>(j)] = 0;
    };
    if (cols_touched.size() * 16 > static_cast<std::size_t>(n)) {
      for (std::int32_t j = 0; j < n; ++j)
        if (touched[static_cast<std::size_t>(j)]) emit(j);
    } else {
      std::sort(cols_touched.begin(), cols_touched.end());
      for (std::int32_t j : cols_touched) emit(j);
    }
    row_ptr[static_cast<std::size_t>(i) + 1] = static_cast<std::int32_t>(col_idx.size());
  }
  csr_matrix<float, std::int32_t> out(rows, n, static_cast<std::int32_t>(col_idx.size()));
  std::copy(row_ptr.begin(), row_ptr.end(), out.row_ptr().begin());
  std::copy(col_idx.begin(), col_idx.end(), out.col_idx().begin());
  std::copy(values.begin(), values.end(), out.values().begin());
  return out;
}

// All layers in order; returns the final Y (inputs x N).
inline csr_matrix<float, std::int32_t> challenge_infer(csr_matrix<float, std::int32_t> const& y0,
                                                       std::vector<csr_matrix<float, std::int32_t>> const& layers,
                                                       float bias, float cap = 32.f) {
  if (layers.empty()) {
    csr_matrix<float, std::int32_t> y(y0.rows(), y0.cols(), y0.nnz());
    std::copy(y0.row_ptr().begin(), y0.row_ptr().end(), y.row_ptr().begin());
    std::copy(y0.col_idx().begin(), y0.col_idx().end(), y.col_idx().begin());
    std::copy(y0.values().begin(), y0.values().end(), y.values().begin());
    return y;
  }
  csr_matrix<float, std::int32_t> y = challenge_layer(y0, layers[0], bias, cap);
  for (std::size_t l = 1; l < layers.size(); ++l) y = challenge_layer(y, layers[l], bias, cap);
  return y;
}

// 1-based ids of the rows with a nonzero sum (summed in double), ascending.
inline std::vector<std::int32_t> challenge_categories(csr_matrix<float, std::int32_t> const& y) {
  std::vector<std::int32_t> ids;
  auto const v = y.view();
  for (std::int32_t i = 0; i < v.rows; ++i) {
    double s = 0;
    for (std::int32_t a = v.row_ptr[i]; a < v.row_ptr[i + 1]; ++a) s += v.values[a];
    if (s != 0) ids.push_back(i + 1);
  }
  return ids;
}

}  // namespace sdnn::reference
