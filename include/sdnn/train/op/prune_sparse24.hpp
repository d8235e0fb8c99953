// sdnn/train/op/prune_sparse24.hpp - magnitude 2:4 pruning of a dense matrix (host): in every
// aligned group of 4 consecutive entries of a row keep the 2 of largest |w| and drop the others,
// giving the canonical sparse24_matrix (formats/sparse24.hpp). Ties are broken by position (the
// lower column wins), so the result depends only on the values; +0 and -0 tie. NaN is refused,
// naming the entry. On a matrix that already is 2:4 the result equals sparse24_from_dense.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "sdnn/core/error.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/formats/sparse24.hpp"

namespace sdnn::ops {

template <class T>
sparse24_matrix<std::remove_const_t<T>> prune_sparse24(dense_view<T> a) {
  using V = std::remove_const_t<T>;
  SDNN_EXPECTS(a.rows >= 0 && a.cols >= 0 && (a.rows == 0 || a.ld >= a.cols), "prune_sparse24: a ", a.rows, " x ",
               a.cols, " view with ld ", a.ld, " is not a valid dense view");
  sparse24_matrix<V> w(a.rows, a.cols);
  for (std::int64_t r = 0; r < a.rows; ++r) {
    for (std::int64_t g = 0; g < w.groups_per_row(); ++g) {
      float mag[sparse24_group];
      for (int i = 0; i < sparse24_group; ++i) {
        std::int64_t const c = g * sparse24_group + i;
        if (c >= a.cols) {
          mag[i] = 0.0f;  // the padding of the last group: a zero
          continue;
        }
        float const v = static_cast<float>(a(r, c));
        SDNN_EXPECTS(!std::isnan(v), "prune_sparse24: entry (", r, ", ", c, ") is NaN: magnitude pruning needs an order");
        mag[i] = std::fabs(v);
      }
      // The two largest magnitudes; on a tie the lower position (strict > keeps the first seen).
      int best = 0;
      for (int i = 1; i < sparse24_group; ++i)
        if (mag[i] > mag[best]) best = i;
      int second = best == 0 ? 1 : 0;
      for (int i = 0; i < sparse24_group; ++i)
        if (i != best && mag[i] > mag[second]) second = i;
      int const i0 = best < second ? best : second, i1 = best < second ? second : best;
      auto at = [&](int i) {
        std::int64_t const c = g * sparse24_group + i;
        return c < a.cols ? V(a(r, c)) : V{};
      };
      w.set_group(r, g, i0, at(i0), i1, at(i1));
    }
  }
  return w;
}

}  // namespace sdnn::ops
