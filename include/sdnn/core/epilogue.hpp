// sdnn/core/epilogue.hpp - the fused epilogue shared by every product kernel:
// y = min(max(acc + bias, 0), cap), each stage optional (basic_epilogue below).
// Kernels evaluate it in the accumulator type Acc (float for float/__half, double for double)
// and convert once on store.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "sdnn/core/config.hpp"

namespace sdnn {

// The stages, in order:
//   bias: per output column (bias[col]) plus a scalar (bias_scalar); with bias_on_zero = false
//         bias is added only where the accumulated product is nonzero, and a zero product
//         stays exactly zero;
//   relu: clamp below at 0;
//   cap:  clamp above at cap (applied when has_cap).
template <class Acc>
struct basic_epilogue {
  Acc const* bias = nullptr;  // [output columns] or nullptr
  Acc bias_scalar = 0;
  bool bias_on_zero = true;
  bool relu = false;
  bool has_cap = false;
  Acc cap = 0;
  // Values at bias, where known (set with it by the factories that take a container); -1: a
  // bare pointer, trusted to hold one per output column. Layers and ops::spmm_dense_sparse
  // check it against the output width; kernels never read it.
  std::int64_t bias_count = -1;

  SDNN_HOST_DEVICE Acc operator()(Acc acc, std::int64_t col) const {
    return finish(acc, [&] { return bias[col]; });
  }
  // The same in two steps, for kernels that read a column's bias once for many rows:
  // apply(acc, bias_at(col)) == (*this)(acc, col), bit for bit.
  SDNN_HOST_DEVICE Acc bias_at(std::int64_t col) const { return bias ? bias[col] : Acc(0); }
  SDNN_HOST_DEVICE Acc apply(Acc acc, Acc col_bias) const {
    return finish(acc, [&] { return col_bias; });
  }
  // True when f(0) == 0 for every column, so all-zero input rows give all-zero outputs
  // and kernels may skip them entirely: no bias reaches a zero product, and no negative cap
  // (f(0) = cap < 0).
  SDNN_HOST_DEVICE bool zero_preserving() const {
    return (!bias_on_zero || (bias == nullptr && bias_scalar == Acc(0))) && !(has_cap && cap < Acc(0));
  }

 private:
  // The bias reaches a column only where bias_on_zero or the product is non-zero: column_bias()
  // (bias[col]) is evaluated only then.
  template <class ColumnBias>
  SDNN_HOST_DEVICE Acc finish(Acc acc, ColumnBias&& column_bias) const {
    if (bias_on_zero || acc != Acc(0)) {
      if (bias) acc += column_bias();
      acc += bias_scalar;
    }
    if (relu && acc < Acc(0)) acc = Acc(0);
    if (has_cap && acc > cap) acc = cap;
    return acc;
  }
};

using epilogue = basic_epilogue<float>;

namespace detail {
// The element type of a contiguous container (data(), size()), or void.
template <class R, class = void>
struct bias_range_value {
  using type = void;
};
template <class R>
struct bias_range_value<R, std::void_t<decltype(std::declval<R const&>().data()),
                                       decltype(std::declval<R const&>().size())>> {
  using type = std::remove_cv_t<std::remove_pointer_t<decltype(std::declval<R const&>().data())>>;
};
// Acc when given, else the container's element type; SFINAE when they differ.
template <class Acc, class R, class V = typename bias_range_value<R>::type,
          class A = std::conditional_t<std::is_void_v<Acc>, V, Acc>>
using bias_range_acc = std::enable_if_t<!std::is_void_v<V> && std::is_same_v<V, A>, A>;
}  // namespace detail

// Factories for the common cases.
template <class Acc = float>
constexpr basic_epilogue<Acc> epilogue_none() { return {}; }
// bias: one value per output column, or nullptr; a bare pointer carries no length (below: a
// container, or the count).
template <class Acc = float>
constexpr basic_epilogue<Acc> epilogue_relu(Acc const* bias = nullptr, std::int64_t bias_count = -1) {
  basic_epilogue<Acc> e;
  e.bias = bias;
  e.bias_count = bias_count;
  e.relu = true;
  return e;
}
// The same from a container (std::vector<Acc>, ...), whose size the layers check; it must
// outlive the epilogue (a layer copies it).
template <class Acc = void, class Range, class A = detail::bias_range_acc<Acc, Range>>
basic_epilogue<A> epilogue_relu(Range const& bias) {
  return epilogue_relu<A>(bias.size() ? bias.data() : nullptr, static_cast<std::int64_t>(bias.size()));  // empty: 0
}
// Bias only on nonzero products, then ReLU and a cap (default 32): the layer of a capped-ReLU
// network such as the Sparse DNN Graph Challenge's.
template <class Acc = float>
constexpr basic_epilogue<Acc> epilogue_capped_relu(Acc bias, Acc cap = Acc(32)) {
  basic_epilogue<Acc> e;
  e.bias_scalar = bias;
  e.bias_on_zero = false;
  e.relu = true;
  e.has_cap = true;
  e.cap = cap;
  return e;
}

}  // namespace sdnn
