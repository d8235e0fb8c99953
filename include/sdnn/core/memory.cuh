// sdnn/core/memory.cuh - device and pinned buffers, and explicit copies between spaces.
//
// Device buffers are allocated with cudaMallocAsync on the executor's stream and freed
// with cudaFreeAsync on that same stream, so allocation is stream-ordered and never
// synchronises the device.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/memory.hpp"
#include "sdnn/core/weight_placement.hpp"

namespace sdnn {

namespace detail {
// The streams an owner of device memory (a plan, layer, pipeline or vendor wrapper) enqueued work
// on. Every device buffer allocated through an executor that carries it (cuda_exec::owner) makes
// its free stream wait for all of them before it is released or replaced: an event per stream, no
// host synchronisation. So no member order, move-assignment or re-plan can free memory that work
// already enqueued on another stream still reads. The noted streams must exist at that moment.
class stream_use {
 public:
  // Thread-safe; a lock and a short scan.
  void note(cudaStream_t s) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto t : streams_)
      if (t == s) return;
    streams_.push_back(s);
  }
  // Makes `s` wait for the work enqueued so far on every other noted stream.
  void order_before(cudaStream_t s) const noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto t : streams_) {
      if (t == s) continue;
      cudaEvent_t ev = nullptr;
      if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
        cuda_check_noexcept(cudaGetLastError(), "cudaEventCreateWithFlags (stream-ordered release)");
        continue;
      }
      cuda_check_noexcept(cudaEventRecord(ev, t), "cudaEventRecord (stream-ordered release)");
      cuda_check_noexcept(cudaStreamWaitEvent(s, ev, 0), "cudaStreamWaitEvent (stream-ordered release)");
      cuda_check_noexcept(cudaEventDestroy(ev), "cudaEventDestroy (stream-ordered release)");
    }
  }
  std::vector<cudaStream_t> streams() const {
    std::lock_guard<std::mutex> lock(mu_);
    return streams_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<cudaStream_t> streams_;
};

// A failed cudaMallocAsync of `bytes`: out of memory names the bytes asked for and free (read
// only now, on failure) and how to get by.
[[noreturn]] inline void throw_device_allocation_failure(cudaError_t st, std::size_t bytes, char const* file,
                                                         int line) {
  cudaGetLastError();  // not sticky: consumed here, so it is reported once
  std::string text = concat(cudaGetErrorName(st), " (", cudaGetErrorString(st), ")");
  if (st == cudaErrorMemoryAllocation) {
    int dev = 0;
    std::size_t free_b = 0, total_b = 0;
    bool const known = cudaGetDevice(&dev) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess;
    cudaGetLastError();
    text += concat(": asked for ", format_bytes(bytes), ", ",
                   known ? concat(format_bytes(free_b), " free of ", format_bytes(total_b), " on device ", dev)
                         : std::string("free memory unknown"),
                   "; run fewer rows per batch, or keep weights that do not fit on the device in host memory and "
                   "stream them (--weight-store host, weight_placement::host)");
  }
  throw cuda_error("cudaMallocAsync", static_cast<int>(st), text, file, line);
}
}  // namespace detail

template <class T>
class buffer<T, device_space> {
 public:
  using value_type = T;
  using space = device_space;

  buffer() = default;
  // Uninitialised device memory for n elements, stream-ordered on exec.stream. With
  // exec.owner set, releasing it first waits for every stream the owner ran on.
  // A failed allocation throws sdnn::cuda_error saying how much was asked and is free.
  buffer(std::size_t n, cuda_exec const& exec) : size_(n), stream_(exec.stream), owner_(exec.owner) {
    if (n == 0) return;
    SDNN_EXPECTS(n <= std::numeric_limits<std::size_t>::max() / sizeof(T), "device buffer: ", n, " elements of ",
                 sizeof(T), " bytes overflow a byte count");
    cudaError_t const st = cudaMallocAsync(reinterpret_cast<void**>(&data_), n * sizeof(T), stream_);
    if (st != cudaSuccess) detail::throw_device_allocation_failure(st, n * sizeof(T), __FILE__, __LINE__);
  }
  ~buffer() { reset(); }

  buffer(buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        stream_(o.stream_),
        owner_(std::move(o.owner_)) {}
  buffer& operator=(buffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      stream_ = o.stream_;
      owner_ = std::move(o.owner_);
    }
    return *this;
  }
  buffer(buffer const&) = delete;
  buffer& operator=(buffer const&) = delete;

  // Frees on the allocating stream, which must still exist (destroy device buffers
  // before the stream they were allocated on). Errors cannot be thrown from here: a
  // failed free is reported on stderr.
  void reset() noexcept {
    if (data_) {
      if (owner_) owner_->order_before(stream_);
      detail::cuda_check_noexcept(cudaFreeAsync(data_, stream_), "cudaFreeAsync");
    }
    data_ = nullptr;
    size_ = 0;
    owner_.reset();
  }
  // Binds the buffer to an owner's streams (as if allocated through an executor carrying it).
  void bind(std::shared_ptr<detail::stream_use> owner) noexcept { owner_ = std::move(owner); }

  T* data() noexcept { return data_; }
  T const* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  cudaStream_t stream() const noexcept { return stream_; }
  detail::stream_use const* owner() const noexcept { return owner_.get(); }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<detail::stream_use> owner_;  // null: freed in the order of stream_ alone
};

template <class T>
class buffer<T, pinned_space> {
 public:
  using value_type = T;
  using space = pinned_space;

  buffer() = default;
  explicit buffer(std::size_t n) : size_(n) {
    if (n) SDNN_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&data_), n * sizeof(T)));
  }
  ~buffer() {
    if (data_) detail::cuda_check_noexcept(cudaFreeHost(data_), "cudaFreeHost");
  }
  buffer(buffer&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  buffer& operator=(buffer&& o) noexcept {
    if (this != &o) {
      if (data_) detail::cuda_check_noexcept(cudaFreeHost(data_), "cudaFreeHost");
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  buffer(buffer const&) = delete;
  buffer& operator=(buffer const&) = delete;

  T* data() noexcept { return data_; }
  T const* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  T const& operator[](std::size_t i) const noexcept { return data_[i]; }
  T* begin() noexcept { return data_; }
  T* end() noexcept { return data_ + size_; }
  T const* begin() const noexcept { return data_; }
  T const* end() const noexcept { return data_ + size_; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

template <class T>
using device_buffer = buffer<T, device_space>;
template <class T>
using pinned_buffer = buffer<T, pinned_space>;

namespace detail {
template <class Dst, class Src>
constexpr cudaMemcpyKind copy_kind() {
  constexpr bool dd = std::is_same_v<Dst, device_space>, sd = std::is_same_v<Src, device_space>;
  if constexpr (dd && sd) return cudaMemcpyDeviceToDevice;
  else if constexpr (dd) return cudaMemcpyHostToDevice;
  else if constexpr (sd) return cudaMemcpyDeviceToHost;
  else return cudaMemcpyHostToHost;
}
}  // namespace detail

// Copies n elements (default: all of src) from src to dst on exec.stream. Sizes must fit.
// A device->host copy into pageable host memory completes before this returns (a CUDA
// property of pageable memory); into pinned memory it is asynchronous.
template <class T, class DS, class SS>
void copy(buffer<T, DS>& dst, buffer<T, SS> const& src, cuda_exec exec) {
  SDNN_EXPECTS(dst.size() >= src.size(), "copy: destination holds ", dst.size(),
               " elements, source has ", src.size());
  if (src.size() == 0) return;
  SDNN_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.size() * sizeof(T),
                                  detail::copy_kind<DS, SS>(), exec.stream));
}

// A new buffer in space DS holding a copy of src.
template <class DS, class T, class SS>
buffer<T, DS> copy_to(buffer<T, SS> const& src, cuda_exec exec) {
  if constexpr (std::is_same_v<DS, device_space>) {
    buffer<T, DS> dst(src.size(), exec);
    copy(dst, src, exec);
    return dst;
  } else {
    buffer<T, DS> dst(src.size());
    copy(dst, src, exec);
    return dst;
  }
}

// A new device buffer holding a copy of the n host elements at src, enqueued on exec.stream.
// From pageable memory (a std::vector, a host_buffer) CUDA stages the copy before this
// returns, so src may be freed then; from pinned memory the copy is asynchronous.
template <class T>
buffer<T, device_space> to_device(T const* src, std::size_t n, cuda_exec exec) {
  buffer<T, device_space> dst(n, exec);
  if (n) SDNN_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src, n * sizeof(T), cudaMemcpyHostToDevice, exec.stream));
  return dst;
}

// Allocates a buffer of n elements in space S (uniform construction for generic code).
template <class T, class S>
buffer<T, S> make_buffer(std::size_t n, cuda_exec exec) {
  if constexpr (std::is_same_v<S, device_space>) return buffer<T, S>(n, exec);
  else return buffer<T, S>(n);
}

}  // namespace sdnn
