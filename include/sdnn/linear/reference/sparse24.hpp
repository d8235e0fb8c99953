// sdnn/linear/reference/sparse24.hpp - the host oracle of the 2:4 sparse linear layer:
//
//   Y[N x M] = epi(X[N x K] * W^T)      W: M x K in 2:4 form (formats/sparse24.hpp), X, Y row-major
//
// on the values as stored: float accumulation over the kept values of each W row in storage order
// (stored zeros included: 0 * Inf is NaN here as in the kernels), epi in float, one rounding to Out.
#pragma once

#include <cstdint>
#include <type_traits>

#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/formats/sparse24.hpp"

namespace sdnn::reference {

// y(n, m) = epi(sum over kept j of float(x(n, column(m, j))) * float(value(m, j)), m), j ascending,
// a kept value past K skipped (it is zero). TX: T or T const.
template <class TX, class T, class Out>
void sparse24_linear(dense_view<TX> x, sparse24_matrix<T> const& w, dense_view<Out> y,
                     basic_epilogue<float> const& epi) {
  static_assert(std::is_same_v<std::remove_const_t<TX>, T>, "sparse24_linear: X and W must have the same value type");
  SDNN_EXPECTS_DIMS(x.cols == w.cols(), "sparse24_linear: X is ", x.rows, " x ", x.cols, " but W is ", w.rows(),
                    " x ", w.cols(), " (K must match)");
  SDNN_EXPECTS_DIMS(y.rows == x.rows && y.cols == w.rows(), "sparse24_linear: Y must be ", x.rows, " x ", w.rows(),
                    ", got ", y.rows, " x ", y.cols);
  for (std::int64_t n = 0; n < x.rows; ++n) {
    for (std::int64_t m = 0; m < w.rows(); ++m) {
      float s = 0.0f;
      for (std::int64_t j = 0; j < w.kept_per_row(); ++j) {
        std::int64_t const c = w.column(m, j);
        if (c < w.cols()) s += static_cast<float>(x(n, c)) * static_cast<float>(w.value(m, j));
      }
      y(n, m) = static_cast<Out>(epi(s, m));
    }
  }
}

}  // namespace sdnn::reference
