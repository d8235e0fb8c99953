// python/src/dtype.hpp - the element types the Python module takes (no pybind11 here: device.cu
// includes it).
#pragma once

namespace sdnn_py {

enum class dtype { f32, f16, bf16, i32, i64, u8, other };

inline char const* dtype_name(dtype t) {
  switch (t) {
    case dtype::f32: return "float32";
    case dtype::f16: return "float16";
    case dtype::bf16: return "bfloat16";
    case dtype::i32: return "int32";
    case dtype::i64: return "int64";
    case dtype::u8: return "uint8";
    default: return "an unsupported type";
  }
}

}  // namespace sdnn_py
