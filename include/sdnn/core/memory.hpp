// sdnn/core/memory.hpp - owning, move-only buffers tagged by memory space.
//
//   buffer<T, host_space>    plain host memory (this header, no CUDA needed)
//   buffer<T, device_space>  stream-ordered device memory (core/memory.cuh)
//   buffer<T, pinned_space>  page-locked host memory for async copies (core/memory.cuh)
//
// Buffers are move-only; copies between spaces are explicit (sdnn::copy in memory.cuh,
// or clone() within the host space). Elements of a host buffer are value-initialised.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <iterator>
#include <utility>

#include "sdnn/core/config.hpp"
#include "sdnn/core/error.hpp"

namespace sdnn {

struct host_space {};
struct device_space {};
struct pinned_space {};  // host memory the GPU can DMA from; host-accessible

template <class Space>
inline constexpr bool is_host_accessible_v = !std::is_same_v<Space, device_space>;

template <class T, class Space>
class buffer {
  static_assert(detail::dependent_false<T, Space>,
                "buffer<T, device_space/pinned_space> needs sdnn/core/memory.cuh (compile with nvcc)");
};

template <class T>
class buffer<T, host_space> {
 public:
  using value_type = T;
  using space = host_space;

  buffer() = default;
  explicit buffer(std::size_t n) : data_(n ? new T[n]() : nullptr), size_(n) {}
  buffer(std::size_t n, T const& fill) : buffer(n) { std::fill(begin(), end(), fill); }
  template <class It>
  buffer(It first, It last) : buffer(static_cast<std::size_t>(std::distance(first, last))) {
    std::copy(first, last, begin());
  }

  buffer(buffer&& o) noexcept : data_(std::move(o.data_)), size_(std::exchange(o.size_, 0)) {}
  buffer& operator=(buffer&& o) noexcept {
    data_ = std::move(o.data_);
    size_ = std::exchange(o.size_, 0);
    return *this;
  }
  buffer(buffer const&) = delete;
  buffer& operator=(buffer const&) = delete;

  // An explicit deep copy.
  buffer clone() const { return buffer(begin(), end()); }

  T* data() noexcept { return data_.get(); }
  T const* data() const noexcept { return data_.get(); }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  T const& operator[](std::size_t i) const noexcept { return data_[i]; }
  T* begin() noexcept { return data(); }
  T* end() noexcept { return data() + size_; }
  T const* begin() const noexcept { return data(); }
  T const* end() const noexcept { return data() + size_; }

 private:
  std::unique_ptr<T[]> data_;
  std::size_t size_ = 0;
};

template <class T>
using host_buffer = buffer<T, host_space>;

}  // namespace sdnn
