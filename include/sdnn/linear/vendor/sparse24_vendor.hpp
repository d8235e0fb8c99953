// sdnn/linear/vendor/sparse24_vendor.hpp - the hook through which an optional vendor library offers
// its 2:4 matmul to the automatic 16-bit layer (linear/op/tc_auto.cuh): an interface for one batch
// size and a process-wide maker per value type, empty until a header that has the library sets it
// (linear/vendor/cusparselt.cuh with SDNN_HAS_CUSPARSELT). The automatic plan reads the maker at
// run time, so its own code is the same in every translation unit, with the library or without.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "sdnn/core/exec.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn::vendor {

// Y[N x M] = X[N x K] W^T for the N it was made for; W 2:4 along K. X and Y: device, contiguous
// rows (ld == cols). Enqueues on exec.stream and never synchronises.
template <class T>
class sparse24_matmul {
 public:
  virtual ~sparse24_matmul() = default;
  virtual void run(cuda_exec exec, dense_view<T const> x, dense_view<T> y) const = 0;
  virtual std::size_t device_bytes() const = 0;  // the compressed W and workspace it holds
};

// Makes the matmul for W (device, M x K, 2:4 along K; read only while it is made) and batch size n
// (may synchronise exec.stream); throws an sdnn error if it cannot.
template <class T>
using sparse24_matmul_maker = std::unique_ptr<sparse24_matmul<T>> (*)(dense_view<T const> w, std::int64_t n,
                                                                      cuda_exec exec);
template <class T>
inline std::atomic<sparse24_matmul_maker<T>> sparse24_vendor_maker{nullptr};

}  // namespace sdnn::vendor
