// python/src/tensor_arg.hpp - an array argument of the Python module, taken through DLPack
// (`obj.__dlpack__()`: PyTorch, NumPy >= 1.22, CuPy, JAX): its data pointer, device, element type,
// shape and strides, without a copy. The capsule is consumed as the protocol asks (renamed to
// "used_dltensor"); the producer's deleter runs when the tensor_arg goes, so the memory stays
// valid exactly as long as the tensor_arg (the caller holds the array object as well).
#pragma once

#include <pybind11/pybind11.h>

#if defined(SDNN_PY_DLPACK_HEADER)
#include SDNN_PY_DLPACK_HEADER  // a full path: PyTorch's copy (its folder also holds pybind11: not on the path)
#else
#include <dlpack/dlpack.h>
#endif

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "dtype.hpp"
#include "sdnn/core/numeric.hpp"

namespace sdnn_py {

namespace py = pybind11;

class tensor_arg {
 public:
  // what: the argument's name in messages ("x", "weight", ...).
  tensor_arg(py::handle obj, char const* what, std::intptr_t stream = -2) : what_(what) {
    if (!py::hasattr(obj, "__dlpack__"))
      throw py::type_error(std::string(what) + ": expected an array with __dlpack__ (a torch.Tensor, numpy.ndarray "
                                                "or cupy.ndarray), got " + std::string(py::str(py::type::of(obj))));
    // stream: -2 = let the producer choose (no argument); otherwise the consumer's stream, so
    // that a producer that orders its work on another stream makes ours wait for it.
    py::object cap = stream == -2 ? obj.attr("__dlpack__")() : obj.attr("__dlpack__")(py::arg("stream") = stream);
    PyObject* c = cap.ptr();
    if (!PyCapsule_IsValid(c, "dltensor"))
      throw py::type_error(std::string(what) + ": __dlpack__ did not return a 'dltensor' capsule");
    mt_ = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
    if (PyCapsule_SetName(c, "used_dltensor") != 0) throw py::error_already_set();
    DLTensor const& t = mt_->dl_tensor;
    data_ = static_cast<char*>(t.data) + t.byte_offset;
    device_type_ = static_cast<int>(t.device.device_type);
    device_id_ = t.device.device_id;
    shape_.assign(t.shape, t.shape + t.ndim);
    if (t.strides) strides_.assign(t.strides, t.strides + t.ndim);
    else {  // NULL strides: compact row-major
      strides_.assign(static_cast<std::size_t>(t.ndim), 1);
      for (int i = t.ndim - 2; i >= 0; --i) strides_[i] = strides_[i + 1] * shape_[i + 1];
    }
    type_ = dtype::other;
    if (t.dtype.lanes == 1) {
      if (t.dtype.code == kDLFloat && t.dtype.bits == 32) type_ = dtype::f32;
      else if (t.dtype.code == kDLFloat && t.dtype.bits == 16) type_ = dtype::f16;
      else if (t.dtype.code == kDLBfloat && t.dtype.bits == 16) type_ = dtype::bf16;
      else if (t.dtype.code == kDLInt && t.dtype.bits == 32) type_ = dtype::i32;
      else if (t.dtype.code == kDLInt && t.dtype.bits == 64) type_ = dtype::i64;
      else if (t.dtype.code == kDLUInt && t.dtype.bits == 8) type_ = dtype::u8;
    }
  }
  tensor_arg(tensor_arg const&) = delete;
  tensor_arg& operator=(tensor_arg const&) = delete;
  ~tensor_arg() {
    if (mt_ && mt_->deleter) mt_->deleter(mt_);
  }

  void* data() const noexcept { return data_; }
  dtype type() const noexcept { return type_; }
  int ndim() const noexcept { return static_cast<int>(shape_.size()); }
  std::int64_t dim(int i) const { return shape_.at(static_cast<std::size_t>(i)); }
  std::vector<std::int64_t> const& shape() const noexcept { return shape_; }
  bool on_host() const noexcept { return device_type_ == kDLCPU || device_type_ == kDLCUDAHost; }
  bool on_cuda() const noexcept { return device_type_ == kDLCUDA; }
  int device_id() const noexcept { return device_id_; }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto d : shape_) n *= d;
    return n;
  }
  // Row-major and compact (a dimension of extent 1 may have any stride).
  bool contiguous() const {
    std::int64_t expect = 1;
    for (int i = ndim() - 1; i >= 0; --i) {
      if (shape_[i] != 1 && strides_[i] != expect) return false;
      expect *= shape_[i];
    }
    return true;
  }

  // An (N, C, H, W) array whose memory is NHWC (torch's channels_last): strides (HWC, 1, WC, C).
  bool channels_last() const {
    if (ndim() != 4) return false;
    std::int64_t const C = shape_[1], H = shape_[2], W = shape_[3];
    auto ok = [&](int i, std::int64_t s) { return shape_[i] == 1 || strides_[i] == s; };
    return ok(3, C) && ok(2, W * C) && ok(1, 1) && ok(0, H * W * C);
  }

  std::string describe() const {
    std::ostringstream s;
    s << dtype_name(type_) << " [";
    for (std::size_t i = 0; i < shape_.size(); ++i) s << (i ? ", " : "") << shape_[i];
    s << "] on " << (on_host() ? "the host" : on_cuda() ? "cuda:" + std::to_string(device_id_) : "another device");
    return s.str();
  }

  // Checks that raise ValueError / TypeError naming the argument and what came.
  tensor_arg const& expect_host() const {
    if (!on_host()) throw py::value_error(std::string(what_) + ": expected a host (CPU) array, got " + describe());
    return *this;
  }
  tensor_arg const& expect_cuda() const {
    if (!on_cuda()) throw py::value_error(std::string(what_) + ": expected a CUDA tensor, got " + describe());
    return *this;
  }
  tensor_arg const& expect_ndim(int n) const {
    if (ndim() != n)
      throw py::value_error(std::string(what_) + ": expected " + std::to_string(n) + " dimensions, got " + describe());
    return *this;
  }
  tensor_arg const& expect_contiguous() const {
    if (!contiguous())
      throw py::value_error(std::string(what_) + ": expected a contiguous (row-major) array, got a strided " +
                            describe() + "; pass x.contiguous() (torch) or numpy.ascontiguousarray(x)");
    return *this;
  }
  tensor_arg const& expect_type(dtype t) const {
    if (type_ != t)
      throw py::type_error(std::string(what_) + ": expected " + dtype_name(t) + ", got " + describe());
    return *this;
  }
  tensor_arg const& expect_shape(std::vector<std::int64_t> const& s) const {
    if (shape_ != s) {
      std::ostringstream o;
      o << what_ << ": expected shape [";
      for (std::size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
      o << "], got " << describe();
      throw py::value_error(o.str());
    }
    return *this;
  }
  char const* what() const noexcept { return what_; }

 private:
  DLManagedTensor* mt_ = nullptr;
  void* data_ = nullptr;
  int device_type_ = 0, device_id_ = 0;
  dtype type_ = dtype::other;
  std::vector<std::int64_t> shape_, strides_;
  char const* what_;
};

// Calls f(T{}) with T = float, sdnn::fp16 or sdnn::bf16 for a floating dtype; TypeError otherwise.
template <class F>
decltype(auto) dispatch_float(dtype t, char const* what, F&& f) {
  switch (t) {
    case dtype::f32: return f(float{});
    case dtype::f16: return f(sdnn::fp16{});
    case dtype::bf16: return f(sdnn::bf16{});
    default: throw py::type_error(std::string(what) + ": expected float32, float16 or bfloat16, got " + dtype_name(t));
  }
}
template <class F>
decltype(auto) dispatch_16bit(dtype t, char const* what, F&& f) {
  switch (t) {
    case dtype::f16: return f(sdnn::fp16{});
    case dtype::bf16: return f(sdnn::bf16{});
    default: throw py::type_error(std::string(what) + ": expected float16 or bfloat16, got " + dtype_name(t));
  }
}

}  // namespace sdnn_py
