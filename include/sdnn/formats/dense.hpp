// sdnn/formats/dense.hpp - a plain row-major dense matrix and its view.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "sdnn/core/config.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/memory.hpp"
#include "sdnn/core/numeric.hpp"

namespace sdnn {

// Non-owning view of a row-major matrix; element (i, j) is data[i * ld + j].
// T may be const-qualified for read-only views. Passed to kernels by value.
template <class T>
struct dense_view {
  std::int64_t rows = 0, cols = 0, ld = 0;
  T* data = nullptr;

  SDNN_HOST_DEVICE T& operator()(std::int64_t i, std::int64_t j) const { return data[i * ld + j]; }
  SDNN_HOST_DEVICE T* row(std::int64_t i) const { return data + i * ld; }
  // Mutable -> read-only view (only declared for non-const T, so no self-conversion:
  // nvcc warns #554 about a conversion operator to the class's own type).
  template <class U = T, class = std::enable_if_t<!std::is_const_v<U>>>
  operator dense_view<U const>() const { return {rows, cols, ld, data}; }
};

namespace detail {
// True when v is not zero (-0 counts as zero, NaN does not). Works for __half (through float)
// when the caller has included cuda_fp16.h; sdnn::bf16 / fp16 by their bits; usable in device code.
template <class T>
SDNN_HOST_DEVICE inline bool is_nonzero(T const& v) {
  if constexpr (std::is_arithmetic_v<T>) return v != T(0);
  else if constexpr (is_16bit_float_v<T>) return (v.bits & 0x7fffu) != 0;  // no conversion: same answer
  else return static_cast<float>(v) != 0.0f;
}

template <class T, class Space, class... Exec>
buffer<T, Space> alloc(std::size_t n, Exec... exec) {
  if constexpr (std::is_same_v<Space, host_space>) return buffer<T, Space>(n);
  else if constexpr (std::is_same_v<Space, pinned_space>) return buffer<T, Space>(n);
  else return buffer<T, Space>(n, exec...);
}
}  // namespace detail

// Owning row-major matrix (ld == cols). On the device the constructor takes the
// cuda_exec whose stream orders the allocation; contents are uninitialised there and
// zero-initialised on the host.
template <class T, class Space = host_space>
class dense_matrix {
 public:
  using value_type = T;
  using space = Space;

  dense_matrix() = default;
  template <class... Exec>
  dense_matrix(std::int64_t rows, std::int64_t cols, Exec... exec)
      : rows_(rows), cols_(cols), data_(detail::alloc<T, Space>(checked_size(rows, cols), exec...)) {}

  std::int64_t rows() const noexcept { return rows_; }
  std::int64_t cols() const noexcept { return cols_; }
  std::int64_t ld() const noexcept { return cols_; }
  std::size_t size() const noexcept { return data_.size(); }
  buffer<T, Space>& values() noexcept { return data_; }
  buffer<T, Space> const& values() const noexcept { return data_; }
  T* data() noexcept { return data_.data(); }
  T const* data() const noexcept { return data_.data(); }

  dense_view<T> view() noexcept { return {rows_, cols_, cols_, data_.data()}; }
  dense_view<T const> view() const noexcept { return {rows_, cols_, cols_, data_.data()}; }

  // Host only: element access.
  T& operator()(std::int64_t i, std::int64_t j) { return data_[static_cast<std::size_t>(i * cols_ + j)]; }
  T const& operator()(std::int64_t i, std::int64_t j) const { return data_[static_cast<std::size_t>(i * cols_ + j)]; }

 private:
  static std::size_t checked_size(std::int64_t rows, std::int64_t cols) {
    SDNN_EXPECTS(rows >= 0 && cols >= 0, "dense_matrix: shape must be non-negative, got ", rows, " x ", cols);
    return detail::checked_extent(rows, cols, "dense_matrix");
  }
  std::int64_t rows_ = 0, cols_ = 0;
  buffer<T, Space> data_;
};

}  // namespace sdnn
