// sdnn/io/sparse_model.hpp - a binary file of a trained sparse model (host only): its linear and
// conv2d layers, each a weight matrix in the structure that stores it compactly (dense, CSR,
// blocks, 2:4) and a value type (f32, bf16, fp16, or int8 with a scale per output row), with its
// bias and activation. The writer checks the whole model before writing a byte and stores the
// weights bit for bit; the reader checks every count against the bytes the file holds before it
// allocates, verifies a checksum, and refuses any inconsistency with an sdnn::error. The layout
// is below; docs/model_file.md explains it at length.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <istream>
#include <limits>
#include <new>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/core/numeric.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/io/file_stream.hpp"

namespace sdnn::io {

// File layout, version 1. All integers and floats little endian; f32 is IEEE binary32, bf16 and
// fp16 the 16 bits of sdnn::bf16 / sdnn::fp16, int8 a two's complement byte.
//
//   magic        8 bytes "SDNNMODL"
//   version      u32 = 1
//   layers       u32
//   description  u32 length (at most 65536), then that many bytes (free text)
//   per layer, a 52-byte header:
//     u8 kind (model_layer_kind), u8 structure, u8 value, u8 activation (2: conv2d only)
//     i32 block_rows, i32 block_cols     blocks only (br x bc, at most 2^20 elements), else 0
//     i32 out, i32 in                    the weight matrix is out x in, both >= 1
//     i32 in_channels, kernel_h, kernel_w, stride, pad
//                                        conv2d only; a linear layer holds 0, 0, 0, 1, 0
//     u64 nnz                            dense: out * in; unstructured: the nonzeros;
//                                        blocks: the stored blocks; sparse24: kept values,
//                                        out * ceil(in / 4) * 2
//     u32 bias count                     0 or out
//   then its payload, in this order:
//     scales     f32 [out], int8 only
//     index      dense: none
//                unstructured (CSR): row_ptr i64 [out + 1], col_idx i32 [nnz], columns increasing
//                  within a row
//                blocks (BSR): row_ptr i32 [ceil(out / br) + 1], col_idx i32 [nnz] block columns,
//                  increasing within a block row
//                sparse24: positions u8 [out * ceil(in / 4)]: group g of row r (columns 4g..4g+3,
//                  the last one zero padded) keeps positions i0 < i1 (0..3), stored as the byte
//                  i0 | i1 << 2 (the nibble code of sparse24_matrix)
//     values     of the value type: dense [out * in] row-major; unstructured [nnz] in CSR order;
//                blocks [nnz * br * bc], block after block, each row-major, edge blocks zero
//                padded; sparse24 [nnz], row after row, per group the values at i0 then i1
//     bias       f32 [bias count]
//   checksum     u64, FNV-1a 64 of every preceding byte; nothing may follow it.
//
// A weight is w = value, or w = q * scales[row] (a float product) for int8, and reads back with
// its exact bits, except a -0 that is not stored (outside the entries a sparse structure keeps)
// or stored as int8 (q = 0): it reads back as +0.

enum class model_structure : std::uint8_t { dense = 0, unstructured = 1 /* CSR */, blocks = 2 /* BSR */, sparse24 = 3 };
enum class model_value : std::uint8_t { f32 = 0, bf16 = 1, fp16 = 2, int8 = 3 /* w = q * scales[row] */ };
// relu_maxpool2x2 (conv2d only): ReLU, then a 2x2 stride-2 max-pool (an odd last row / column dropped).
enum class model_activation : std::uint8_t { none = 0, relu = 1, relu_maxpool2x2 = 2 };
enum class model_layer_kind : std::uint8_t { linear = 0, conv2d = 1 };

// A conv2d layer's filter: its weight matrix is out_channels x (kernel_h * kernel_w *
// in_channels), the GEMM view of the filter with columns in (r, s, c) order: column
// (r * kernel_w + s) * in_channels + c holds filter row r, column s, input channel c (the KRSC
// filter; conv::filter_to_gemm's order).
struct model_conv_shape {
  std::int32_t in_channels = 0, kernel_h = 0, kernel_w = 0, stride = 1, pad = 0;
};

struct model_layer {
  model_layer_kind kind = model_layer_kind::linear;
  model_structure structure = model_structure::dense;
  model_value value = model_value::f32;
  std::int32_t block_rows = 0, block_cols = 0;  // blocks only (e.g. 32 x 32); ignored otherwise
  model_activation activation = model_activation::none;
  model_conv_shape conv;      // conv2d only; ignored for linear layers
  dense_matrix<float> w;      // out x in (nn.Linear's layout): the exact values, already rounded to `value`
  std::vector<float> bias;    // empty or out values
  std::vector<float> scales;  // int8 only: out values, finite and > 0
};

struct sparse_model {
  std::vector<model_layer> layers;
  std::string description;  // free text, at most 64 KiB
};

inline std::string to_string(model_structure s) {
  switch (s) {
    case model_structure::dense:
      return "dense";
    case model_structure::unstructured:
      return "unstructured";
    case model_structure::blocks:
      return "blocks";
    case model_structure::sparse24:
      return "sparse24";
  }
  return "structure(" + std::to_string(int(s)) + ")";
}
inline std::string to_string(model_value v) {
  switch (v) {
    case model_value::f32:
      return "f32";
    case model_value::bf16:
      return "bf16";
    case model_value::fp16:
      return "fp16";
    case model_value::int8:
      return "int8";
  }
  return "value(" + std::to_string(int(v)) + ")";
}
inline std::string to_string(model_activation a) {
  switch (a) {
    case model_activation::none:
      return "none";
    case model_activation::relu:
      return "relu";
    case model_activation::relu_maxpool2x2:
      return "relu_maxpool2x2";
  }
  return "activation(" + std::to_string(int(a)) + ")";
}
inline std::string to_string(model_layer_kind k) {
  switch (k) {
    case model_layer_kind::linear:
      return "linear";
    case model_layer_kind::conv2d:
      return "conv2d";
  }
  return "kind(" + std::to_string(int(k)) + ")";
}

namespace detail {
inline constexpr char model_magic[8] = {'S', 'D', 'N', 'N', 'M', 'O', 'D', 'L'};
inline constexpr std::uint32_t model_version = 1;
inline constexpr std::uint32_t model_max_description = 65536;
inline constexpr std::int64_t model_max_block = std::int64_t(1) << 20;  // elements of one block

inline std::uint64_t fnv1a64(void const* data, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto const* p = static_cast<unsigned char const*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
inline std::size_t model_value_bytes(model_value v) {
  return v == model_value::f32 ? 4 : v == model_value::int8 ? 1 : 2;
}
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// ---- writing -------------------------------------------------------------------------------

struct model_encoder {
  std::string bytes;
  void put(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
  }
  void i32(std::int64_t v) { put(static_cast<std::uint32_t>(static_cast<std::int32_t>(v)), 4); }
  void f32(float f) { put(sdnn::detail::float_bits(f), 4); }
};

// Checks that w(r, c) = x is stored exactly by layer L's value type and appends it.
inline void put_model_value(model_encoder& o, model_layer const& L, std::size_t li, std::int64_t r, std::int64_t c,
                            float x) {
  auto exact16 = [&](std::uint16_t b, float back, char const* name) {
    SDNN_EXPECTS(sdnn::detail::float_bits(back) == sdnn::detail::float_bits(x), "write_sparse_model: layer ", li,
                 ": w(", r, ", ", c, ") = ", x, " is not exactly a ", name, " (it would read back as ", back,
                 "); round the weights to ", name, " first");
    o.put(b, 2);
  };
  switch (L.value) {
    case model_value::f32:
      o.f32(x);
      break;
    case model_value::bf16: {
      bf16 const v = bf16::from_bits(bf16::from_float(x));
      exact16(v.bits, static_cast<float>(v), "bf16");
      break;
    }
    case model_value::fp16: {
      fp16 const v = fp16::from_bits(fp16::from_float(x));
      exact16(v.bits, static_cast<float>(v), "fp16");
      break;
    }
    case model_value::int8: {
      float const s = L.scales[static_cast<std::size_t>(r)];
      float const q = std::nearbyint(x / s);
      SDNN_EXPECTS(std::fabs(q) <= 127.0f && q * s == x, "write_sparse_model: layer ", li, ": w(", r, ", ", c,
                   ") = ", x, " is not q * scales[", r, "] = q * ", s,
                   " for an integer q in [-127, 127]; quantize the weights first");
      o.put(static_cast<std::uint8_t>(static_cast<std::int8_t>(q)), 1);
      break;
    }
  }
}

inline void check_model_layer(model_layer const& L, std::size_t li, model_layer const* prev) {
  auto const out = L.w.rows(), in = L.w.cols();
  char const* const W = "write_sparse_model: layer ";
  SDNN_EXPECTS(std::uint8_t(L.kind) <= 1 && std::uint8_t(L.structure) <= 3 && std::uint8_t(L.value) <= 3 &&
                   std::uint8_t(L.activation) <= 2,
               W, li, ": unknown ", to_string(L.kind), " / ", to_string(L.structure), " / ", to_string(L.value), " / ",
               to_string(L.activation));
  SDNN_EXPECTS(L.activation != model_activation::relu_maxpool2x2 || L.kind == model_layer_kind::conv2d, W, li,
               ": relu_maxpool2x2 is for conv2d layers only");
  std::int64_t const imax = std::numeric_limits<std::int32_t>::max();
  SDNN_EXPECTS(out >= 1 && in >= 1 && out <= imax && in <= imax, W, li, ": w is ", out, " x ", in,
               "; both extents must be in [1, 2^31 - 1]");
  if (L.structure == model_structure::blocks)
    SDNN_EXPECTS(L.block_rows >= 1 && L.block_cols >= 1 && std::int64_t(L.block_rows) * L.block_cols <= model_max_block,
                 W, li, ": block shape ", L.block_rows, " x ", L.block_cols,
                 " must be positive, at most 2^20 elements");
  if (L.kind == model_layer_kind::conv2d) {
    auto const& k = L.conv;
    SDNN_EXPECTS(k.in_channels >= 1 && k.kernel_h >= 1 && k.kernel_w >= 1 && k.stride >= 1 && k.pad >= 0, W, li,
                 ": conv2d shape in_channels ", k.in_channels, ", kernel ", k.kernel_h, " x ", k.kernel_w, ", stride ",
                 k.stride, ", pad ", k.pad, " (all >= 1, pad >= 0)");
    SDNN_EXPECTS(std::int64_t(k.kernel_h) * k.kernel_w * k.in_channels == in, W, li, ": conv2d w has ", in,
                 " columns, but kernel_h * kernel_w * in_channels = ", k.kernel_h, " * ", k.kernel_w, " * ",
                 k.in_channels);
  }
  if (prev && prev->kind == model_layer_kind::linear && L.kind == model_layer_kind::linear)
    SDNN_EXPECTS(prev->w.rows() == in, W, li, ": takes ", in, " inputs, but layer ", li - 1, " has ", prev->w.rows(),
                 " outputs (linear layers must chain)");
  SDNN_EXPECTS(L.bias.empty() || std::int64_t(L.bias.size()) == out, W, li, ": ", L.bias.size(), " bias values for ",
               out, " outputs (0 or ", out, ")");
  if (L.value == model_value::int8) {
    SDNN_EXPECTS(std::int64_t(L.scales.size()) == out, W, li, ": int8 needs ", out, " scales (one per row), got ",
                 L.scales.size());
    for (std::size_t r = 0; r < L.scales.size(); ++r)
      SDNN_EXPECTS(std::isfinite(L.scales[r]) && L.scales[r] > 0, W, li, ": scales[", r, "] = ", L.scales[r],
                   " must be finite and > 0");
  } else {
    SDNN_EXPECTS(L.scales.empty(), W, li, ": ", L.scales.size(), " scales given, but scales are for int8 only (value ",
                 to_string(L.value), ")");
  }
}

inline void encode_model_layer(model_encoder& o, model_layer const& L, std::size_t li) {
  std::int64_t const out = L.w.rows(), in = L.w.cols();
  bool const blocks = L.structure == model_structure::blocks;
  std::int64_t const br = blocks ? L.block_rows : 0, bc = blocks ? L.block_cols : 0;
  auto nz = [&](std::int64_t r, std::int64_t c) { return r < out && c < in && L.w(r, c) != 0.0f; };
  auto at = [&](std::int64_t r, std::int64_t c) { return r < out && c < in ? L.w(r, c) : 0.0f; };

  // The structure's index arrays, and nnz.
  std::vector<std::int64_t> row_ptr{0};
  std::vector<std::int32_t> cols;
  std::vector<std::uint8_t> positions;
  std::uint64_t nnz = 0;
  if (L.structure == model_structure::dense) {
    nnz = std::uint64_t(out) * std::uint64_t(in);
  } else if (L.structure == model_structure::unstructured) {
    for (std::int64_t r = 0; r < out; ++r) {
      for (std::int64_t c = 0; c < in; ++c)
        if (nz(r, c)) cols.push_back(static_cast<std::int32_t>(c));
      row_ptr.push_back(static_cast<std::int64_t>(cols.size()));
    }
    nnz = cols.size();
  } else if (blocks) {
    for (std::int64_t bi = 0; bi < ceil_div(out, br); ++bi) {
      for (std::int64_t bj = 0; bj < ceil_div(in, bc); ++bj) {
        bool any = false;
        for (std::int64_t r = bi * br; r < std::min(out, bi * br + br) && !any; ++r)
          for (std::int64_t c = bj * bc; c < std::min(in, bj * bc + bc) && !any; ++c) any = nz(r, c);
        if (any) cols.push_back(static_cast<std::int32_t>(bj));
      }
      SDNN_EXPECTS(cols.size() <= std::size_t(std::numeric_limits<std::int32_t>::max()), "write_sparse_model: layer ",
                   li, ": more than 2^31 - 1 stored blocks");
      row_ptr.push_back(static_cast<std::int64_t>(cols.size()));
    }
    nnz = cols.size();
  } else {  // sparse24
    for (std::int64_t r = 0; r < out; ++r)
      for (std::int64_t g = 0; g < ceil_div(in, 4); ++g) {
        int keep[4], n = 0;
        for (int i = 0; i < 4; ++i)
          if (nz(r, 4 * g + i)) {
            SDNN_EXPECTS(n < 2, "write_sparse_model: layer ", li, ": row ", r, ", group ", g, " (columns ", 4 * g, "..",
                         4 * g + 3, ") holds more than 2 nonzeros, so it is not 2:4 sparse");
            keep[n++] = i;
          }
        for (int i = 0; n < 2; ++i)  // fewer than 2 nonzeros: the smallest free positions
          if (n == 0 || (keep[0] != i)) keep[n++] = i;
        if (keep[0] > keep[1]) std::swap(keep[0], keep[1]);
        positions.push_back(static_cast<std::uint8_t>(keep[0] | keep[1] << 2));
      }
    nnz = positions.size() * 2;
  }

  // The 52-byte header.
  o.put(std::uint8_t(L.kind), 1);
  o.put(std::uint8_t(L.structure), 1);
  o.put(std::uint8_t(L.value), 1);
  o.put(std::uint8_t(L.activation), 1);
  o.i32(br);
  o.i32(bc);
  o.i32(out);
  o.i32(in);
  model_conv_shape const k = L.kind == model_layer_kind::conv2d ? L.conv : model_conv_shape{};
  for (std::int32_t v : {k.in_channels, k.kernel_h, k.kernel_w, k.stride, k.pad}) o.i32(v);
  o.put(nnz, 8);
  o.put(L.bias.size(), 4);

  // The payload.
  for (float s : L.scales) o.f32(s);
  if (L.structure == model_structure::dense) {
    for (std::int64_t r = 0; r < out; ++r)
      for (std::int64_t c = 0; c < in; ++c) put_model_value(o, L, li, r, c, L.w(r, c));
  } else if (L.structure == model_structure::unstructured) {
    for (std::int64_t p : row_ptr) o.put(static_cast<std::uint64_t>(p), 8);
    for (std::int32_t c : cols) o.i32(c);
    for (std::int64_t r = 0; r < out; ++r)
      for (std::int64_t p = row_ptr[r]; p < row_ptr[r + 1]; ++p) put_model_value(o, L, li, r, cols[p], L.w(r, cols[p]));
  } else if (blocks) {
    for (std::int64_t p : row_ptr) o.i32(p);
    for (std::int32_t c : cols) o.i32(c);
    for (std::int64_t bi = 0; bi + 1 < std::int64_t(row_ptr.size()); ++bi)
      for (std::int64_t p = row_ptr[bi]; p < row_ptr[bi + 1]; ++p)
        for (std::int64_t i = 0; i < br; ++i)
          for (std::int64_t j = 0; j < bc; ++j) {
            std::int64_t const r = bi * br + i, c = std::int64_t(cols[p]) * bc + j;
            // Padding outside the matrix is a zero of the row's scale (row 0's below the last row).
            if (r < out)
              put_model_value(o, L, li, r, c, at(r, c));
            else
              put_model_value(o, L, li, 0, c, 0.0f);
          }
  } else {
    for (std::uint8_t p : positions) o.put(p, 1);
    std::int64_t const groups = ceil_div(in, 4);
    for (std::int64_t r = 0; r < out; ++r)
      for (std::int64_t g = 0; g < groups; ++g) {
        std::uint8_t const p = positions[r * groups + g];
        for (int i : {p & 3, p >> 2}) put_model_value(o, L, li, r, 4 * g + i, at(r, 4 * g + i));
      }
  }
  for (float b : L.bias) o.f32(b);
}

// ---- reading -------------------------------------------------------------------------------

// Bounds-checked little-endian reads over the bytes of a file; `layer` < 0 means the file header.
struct model_cursor {
  unsigned char const* data;
  std::size_t size, pos;
  std::string const& name;

  [[noreturn]] void truncated(std::uint64_t count, std::uint64_t elem, long long layer, char const* what) const {
    std::string const need =
        count == 1 || elem == 1 ? std::to_string(count * elem) : sdnn::detail::concat(count, " x ", elem);
    SDNN_FAIL("io: '", name, "' is truncated or corrupt: ", layer >= 0 ? "layer " + std::to_string(layer) + " " : "",
              what, " needs ", need, " bytes at offset ", pos, ", but only ", size - pos, " are left");
  }
  // Skips count elements of elem bytes, checked against the bytes left before any product is
  // formed; returns where they start.
  std::size_t skip(std::uint64_t count, std::uint64_t elem, long long layer, char const* what) {
    if (elem != 0 && count > (size - pos) / elem) truncated(count, elem, layer, what);
    std::size_t const at = pos;
    pos += static_cast<std::size_t>(count * elem);
    return at;
  }
  std::uint64_t get(int n, long long layer, char const* what) {
    std::size_t const at = skip(1, std::uint64_t(n), layer, what);
    return load(at, n);
  }
  std::uint64_t load(std::size_t at, int n) const {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= std::uint64_t(data[at + i]) << (8 * i);
    return v;
  }
};

// A layer's header and where its arrays start, from the first (framing) pass.
struct model_frame {
  model_layer_kind kind;
  model_structure structure;
  model_value value;
  model_activation activation;
  std::int32_t br, bc, out, in;
  model_conv_shape conv;
  std::uint64_t nnz;
  std::uint32_t nbias;
  std::size_t scales_at, row_ptr_at, cols_at, values_at, bias_at;
};

// budget: the bytes the decoded dense matrices may still take.
inline model_frame frame_model_layer(model_cursor& in, long long li, std::uint64_t& budget) {
  std::string const& name = in.name;
  model_frame f{};
  std::size_t at = in.skip(1, 52, li, "header");
  auto i32 = [&] {
    at += 4;
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(in.load(at - 4, 4)));
  };
  std::uint8_t const* code = in.data + at;
  SDNN_EXPECTS(code[0] <= 1 && code[1] <= 3 && code[2] <= 3 && code[3] <= 2, "io: '", name, "': layer ", li,
               ": unknown codes kind ", int(code[0]), ", structure ", int(code[1]), ", value ", int(code[2]),
               ", activation ", int(code[3]), " (this reader knows 0..1, 0..3, 0..3, 0..2)");
  SDNN_EXPECTS(code[3] != 2 || code[0] == 1, "io: '", name, "': layer ", li,
               ": activation 2 (relu_maxpool2x2) on a linear layer; it is for conv2d layers only");
  f.kind = model_layer_kind(code[0]);
  f.structure = model_structure(code[1]);
  f.value = model_value(code[2]);
  f.activation = model_activation(code[3]);
  at += 4;
  f.br = i32();
  f.bc = i32();
  f.out = i32();
  f.in = i32();
  for (std::int32_t* v : {&f.conv.in_channels, &f.conv.kernel_h, &f.conv.kernel_w, &f.conv.stride, &f.conv.pad})
    *v = i32();
  f.nnz = in.load(at, 8);
  f.nbias = static_cast<std::uint32_t>(in.load(at + 8, 4));

  std::string const L = "io: '" + name + "': layer " + std::to_string(li) + ": ";
  SDNN_EXPECTS(f.out >= 1 && f.in >= 1, L, "w is ", f.out, " x ", f.in, "; both extents must be >= 1");
  bool const blocks = f.structure == model_structure::blocks;
  if (blocks)
    SDNN_EXPECTS(f.br >= 1 && f.bc >= 1 && std::int64_t(f.br) * f.bc <= model_max_block, L, "block shape ", f.br, " x ",
                 f.bc, " must be positive, at most 2^20 elements");
  else
    SDNN_EXPECTS(f.br == 0 && f.bc == 0, L, "block shape ", f.br, " x ", f.bc, " given for structure ",
                 to_string(f.structure), " (must be 0 x 0)");
  auto const& k = f.conv;
  if (f.kind == model_layer_kind::conv2d) {
    SDNN_EXPECTS(k.in_channels >= 1 && k.kernel_h >= 1 && k.kernel_w >= 1 && k.stride >= 1 && k.pad >= 0, L,
                 "conv2d shape in_channels ", k.in_channels, ", kernel ", k.kernel_h, " x ", k.kernel_w, ", stride ",
                 k.stride, ", pad ", k.pad, " (all >= 1, pad >= 0)");
    SDNN_EXPECTS(std::int64_t(k.kernel_h) * k.kernel_w * k.in_channels == f.in, L, "conv2d w has ", f.in,
                 " columns, but kernel_h * kernel_w * in_channels = ", k.kernel_h, " * ", k.kernel_w, " * ",
                 k.in_channels);
  } else {
    SDNN_EXPECTS(k.in_channels == 0 && k.kernel_h == 0 && k.kernel_w == 0 && k.stride == 1 && k.pad == 0, L,
                 "a linear layer must hold the conv fields 0, 0, 0, 1, 0");
  }
  std::uint64_t const out = std::uint64_t(f.out), cols = std::uint64_t(f.in), dense = out * cols;
  std::uint64_t const row_blocks = blocks ? ceil_div(f.out, f.br) : 0, col_blocks = blocks ? ceil_div(f.in, f.bc) : 0;
  std::uint64_t const groups = ceil_div(f.in, 4);
  switch (f.structure) {
    case model_structure::dense:
      SDNN_EXPECTS(f.nnz == dense, L, "nnz = ", f.nnz, ", but a dense ", f.out, " x ", f.in, " matrix has ", dense);
      break;
    case model_structure::unstructured:
      SDNN_EXPECTS(f.nnz <= dense, L, "nnz = ", f.nnz, " exceeds the ", dense, " entries of ", f.out, " x ", f.in);
      break;
    case model_structure::blocks:
      SDNN_EXPECTS(f.nnz <= row_blocks * col_blocks, L, "nnz = ", f.nnz, " blocks exceed the ", row_blocks * col_blocks,
                   " blocks of the grid");
      break;
    case model_structure::sparse24:
      SDNN_EXPECTS(f.nnz == out * groups * 2, L, "nnz = ", f.nnz, ", but 2:4 of ", f.out, " x ", f.in, " keeps ",
                   out * groups * 2);
      break;
  }
  SDNN_EXPECTS(f.nbias == 0 || f.nbias == out, L, f.nbias, " bias values for ", f.out, " outputs (0 or ", f.out, ")");
  SDNN_EXPECTS(dense <= budget / 4, L, "its dense ", f.out, " x ", f.in,
               " weights would pass the memory budget: at "
               "most 4 bytes per file byte plus read_options::max_claimed_bytes (raise it to read this file)");
  budget -= dense * 4;

  std::uint64_t const vb = model_value_bytes(f.value);
  f.scales_at = in.skip(f.value == model_value::int8 ? out : 0, 4, li, "scales");
  if (f.structure == model_structure::unstructured) {
    f.row_ptr_at = in.skip(out + 1, 8, li, "row_ptr");
    f.cols_at = in.skip(f.nnz, 4, li, "col_idx");
  } else if (blocks) {
    f.row_ptr_at = in.skip(row_blocks + 1, 4, li, "block row_ptr");
    f.cols_at = in.skip(f.nnz, 4, li, "block col_idx");
  } else if (f.structure == model_structure::sparse24) {
    f.cols_at = in.skip(out * groups, 1, li, "2:4 positions");
  }
  f.values_at = in.skip(f.nnz, blocks ? std::uint64_t(f.br) * std::uint64_t(f.bc) * vb : vb, li, "values");
  f.bias_at = in.skip(f.nbias, 4, li, "bias");
  return f;
}

inline model_layer decode_model_layer(model_cursor const& in, model_frame const& f, long long li) {
  std::string const L = "io: '" + in.name + "': layer " + std::to_string(li) + ": ";
  model_layer m;
  m.kind = f.kind;
  m.structure = f.structure;
  m.value = f.value;
  m.activation = f.activation;
  m.block_rows = f.br;
  m.block_cols = f.bc;
  if (f.kind == model_layer_kind::conv2d) m.conv = f.conv;
  for (std::uint64_t r = 0; f.value == model_value::int8 && r < std::uint64_t(f.out); ++r) {
    float const s = sdnn::detail::bits_float(static_cast<std::uint32_t>(in.load(f.scales_at + 4 * r, 4)));
    SDNN_EXPECTS(std::isfinite(s) && s > 0, L, "scales[", r, "] = ", s, " must be finite and > 0");
    m.scales.push_back(s);
  }
  // The k-th stored value, in row r.
  auto value = [&](std::uint64_t k, std::int64_t r) -> float {
    switch (f.value) {
      case model_value::f32:
        return sdnn::detail::bits_float(static_cast<std::uint32_t>(in.load(f.values_at + 4 * k, 4)));
      case model_value::bf16:
        return float(bf16::from_bits(static_cast<std::uint16_t>(in.load(f.values_at + 2 * k, 2))));
      case model_value::fp16:
        return float(fp16::from_bits(static_cast<std::uint16_t>(in.load(f.values_at + 2 * k, 2))));
      case model_value::int8:
        break;
    }
    int const q = static_cast<std::int8_t>(in.data[f.values_at + k]);
    SDNN_EXPECTS(q >= -127, L, "stored value ", k, " is q = -128; int8 weights are in [-127, 127]");
    return float(q) * m.scales[static_cast<std::size_t>(r)];
  };
  m.w = dense_matrix<float>(f.out, f.in);
  std::int64_t const out = f.out, cols = f.in;
  if (f.structure == model_structure::dense) {
    for (std::int64_t r = 0, k = 0; r < out; ++r)
      for (std::int64_t c = 0; c < cols; ++c, ++k) m.w(r, c) = value(k, r);
  } else if (f.structure == model_structure::unstructured || f.structure == model_structure::blocks) {
    bool const csr = f.structure == model_structure::unstructured;
    std::int64_t const rows = csr ? out : ceil_div(out, f.br), ncols = csr ? cols : ceil_div(cols, f.bc);
    int const pb = csr ? 8 : 4;
    char const* const what = csr ? "row_ptr" : "block row_ptr";
    auto row_ptr = [&](std::int64_t i) {
      std::uint64_t const v = in.load(f.row_ptr_at + pb * i, pb);
      return csr ? static_cast<std::int64_t>(v) : std::int64_t(static_cast<std::int32_t>(std::uint32_t(v)));
    };
    SDNN_EXPECTS(row_ptr(0) == 0, L, what, "[0] = ", row_ptr(0), ", must be 0");
    for (std::int64_t i = 0; i < rows; ++i) {
      std::int64_t const b = row_ptr(i), e = row_ptr(i + 1);
      SDNN_EXPECTS(e >= b && std::uint64_t(e) <= f.nnz, L, what, "[", i + 1, "] = ", e, " is not in [", b,
                   ", nnz = ", f.nnz, "]");
      for (std::int64_t p = b; p < e; ++p) {
        std::int64_t const c = static_cast<std::int32_t>(static_cast<std::uint32_t>(in.load(f.cols_at + 4 * p, 4)));
        std::int64_t const prev =
            p > b ? static_cast<std::int32_t>(static_cast<std::uint32_t>(in.load(f.cols_at + 4 * (p - 1), 4))) : -1;
        SDNN_EXPECTS(c > prev && c < ncols, L, csr ? "col_idx[" : "block col_idx[", p, "] = ", c, " in ",
                     csr ? "row " : "block row ", i, " is out of range [0, ", ncols, ") or not increasing");
        if (csr) {
          m.w(i, c) = value(p, i);
          continue;
        }
        for (std::int64_t y = 0; y < f.br; ++y)
          for (std::int64_t x = 0; x < f.bc; ++x) {
            std::int64_t const r = i * f.br + y, cc = c * f.bc + x;
            float const v = value(std::uint64_t(p) * f.br * f.bc + y * f.bc + x, r < out ? r : 0);
            if (r < out && cc < cols)
              m.w(r, cc) = v;
            else
              SDNN_EXPECTS(v == 0.0f, L, "block ", p, " holds ", v, " at (", r, ", ", cc, "), outside the ", out, " x ",
                           cols, " matrix (edge padding must be zero)");
          }
      }
      if (i + 1 == rows) SDNN_EXPECTS(std::uint64_t(e) == f.nnz, L, what, "[", rows, "] = ", e, ", but nnz = ", f.nnz);
    }
  } else {  // sparse24
    std::int64_t const groups = ceil_div(cols, 4);
    for (std::int64_t r = 0; r < out; ++r)
      for (std::int64_t g = 0; g < groups; ++g) {
        std::uint8_t const p = in.data[f.cols_at + r * groups + g];
        int const pos[2] = {p & 3, (p >> 2) & 3};
        SDNN_EXPECTS(p >> 4 == 0 && pos[0] < pos[1], L, "row ", r, ", group ", g, ": position byte 0x", std::hex,
                     int(p), std::dec, " is not two increasing positions i0 | i1 << 2");
        for (int j = 0; j < 2; ++j) {
          std::int64_t const c = 4 * g + pos[j];
          float const v = value(std::uint64_t(r * groups + g) * 2 + j, r);
          if (c < cols)
            m.w(r, c) = v;
          else
            SDNN_EXPECTS(v == 0.0f, L, "row ", r, " keeps ", v, " at column ", c, ", past the ", cols,
                         " columns (padding must be zero)");
        }
      }
  }
  for (std::uint32_t i = 0; i < f.nbias; ++i)
    m.bias.push_back(sdnn::detail::bits_float(static_cast<std::uint32_t>(in.load(f.bias_at + 4 * std::size_t(i), 4))));
  return m;
}

inline sparse_model decode_sparse_model(std::string const& bytes, std::string const& name, read_options const& opt) {
  model_cursor in{reinterpret_cast<unsigned char const*>(bytes.data()), bytes.size(), 0, name};
  std::size_t const magic_at = in.skip(8, 1, -1, "magic");
  SDNN_EXPECTS(std::memcmp(bytes.data() + magic_at, model_magic, 8) == 0, "io: '", name,
               "' is not an sdnn model file (its first 8 bytes are not \"SDNNMODL\")");
  std::uint32_t const version = static_cast<std::uint32_t>(in.get(4, -1, "version"));
  SDNN_EXPECTS(version == model_version, "io: '", name, "' is a model file of version ", version,
               ", this reader knows ", model_version);
  std::uint32_t const layers = static_cast<std::uint32_t>(in.get(4, -1, "layer count"));
  std::uint32_t const desc = static_cast<std::uint32_t>(in.get(4, -1, "description length"));
  SDNN_EXPECTS(desc <= model_max_description, "io: '", name, "': a description of ", desc, " bytes (at most ",
               model_max_description, ")");
  std::size_t const desc_at = in.skip(desc, 1, -1, "description");

  // Pass 1: frame every layer (every count against the bytes left), then the checksum.
  std::vector<model_frame> frames;
  std::uint64_t const file4 = 4 * std::uint64_t(bytes.size());
  std::uint64_t budget = opt.max_claimed_bytes > ~file4 ? ~std::uint64_t(0) : opt.max_claimed_bytes + file4;
  for (std::uint32_t i = 0; i < layers; ++i) frames.push_back(frame_model_layer(in, i, budget));
  std::size_t const sum_at = in.pos;
  std::uint64_t const sum = in.get(8, -1, "checksum");
  std::uint64_t const want = fnv1a64(bytes.data(), sum_at);
  SDNN_EXPECTS(sum == want, "io: '", name, "': checksum mismatch (stored 0x", std::hex, sum, ", computed 0x", want,
               "): the file is corrupt");
  SDNN_EXPECTS(in.pos == bytes.size(), "io: '", name, "': ", bytes.size() - in.pos,
               " bytes follow the checksum (a wrong count, or two files joined?)");

  // Pass 2: decode and check the contents.
  for (std::size_t i = 1; i < frames.size(); ++i)
    if (frames[i - 1].kind == model_layer_kind::linear && frames[i].kind == model_layer_kind::linear)
      SDNN_EXPECTS(frames[i].in == frames[i - 1].out, "io: '", name, "': layer ", i, " takes ", frames[i].in,
                   " inputs, but layer ", i - 1, " has ", frames[i - 1].out, " outputs (linear layers must chain)");
  sparse_model m;
  m.description.assign(bytes.data() + desc_at, desc);
  for (std::size_t i = 0; i < frames.size(); ++i) m.layers.push_back(decode_model_layer(in, frames[i], i));
  return m;
}
}  // namespace detail

// Writes m to `os`; checks the whole model first, so a refused model writes nothing. Refused:
// unknown enum values; w empty or an extent above 2^31 - 1; a non-positive block shape
// (blocks); a conv2d shape out of range or whose kernel_h * kernel_w * in_channels is not w's
// columns; a linear layer whose input count is not the previous linear layer's output count
// (across a conv2d layer nothing is checked: pooling and flattening are not in the file); a bias
// of neither 0 nor out values; int8 without out finite positive scales, or scales given for
// another value type; a group of 4 with more than 2 nonzeros (sparse24); a weight that is not
// exactly a bf16 / fp16, or not q * scales[row] for an integer q in [-127, 127] (int8); a
// description above 64 KiB. Every error names the layer and what is wrong.
inline void write_sparse_model(std::ostream& os, sparse_model const& m) {
  SDNN_EXPECTS(m.description.size() <= detail::model_max_description, "write_sparse_model: the description has ",
               m.description.size(), " bytes (at most ", detail::model_max_description, ")");
  SDNN_EXPECTS(m.layers.size() <= std::numeric_limits<std::uint32_t>::max(), "write_sparse_model: too many layers");
  for (std::size_t i = 0; i < m.layers.size(); ++i)
    detail::check_model_layer(m.layers[i], i, i ? &m.layers[i - 1] : nullptr);
  detail::model_encoder o;
  o.bytes.append(detail::model_magic, 8);
  o.put(detail::model_version, 4);
  o.put(m.layers.size(), 4);
  o.put(m.description.size(), 4);
  o.bytes += m.description;
  for (std::size_t i = 0; i < m.layers.size(); ++i) detail::encode_model_layer(o, m.layers[i], i);
  o.put(detail::fnv1a64(o.bytes.data(), o.bytes.size()), 8);
  os.write(o.bytes.data(), static_cast<std::streamsize>(o.bytes.size()));
  os.flush();
  SDNN_EXPECTS(os.good(), "write_sparse_model: writing ", o.bytes.size(), " bytes to the stream failed");
}

inline void write_sparse_model(std::string const& path, sparse_model const& m) {
  std::ostringstream buf;  // encoded (and checked) before the file is created
  write_sparse_model(buf, m);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  SDNN_EXPECTS(f.is_open(), "io: cannot open '", path, "' for writing: ", std::strerror(errno));
  std::string const bytes = buf.str();
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  SDNN_EXPECTS(!f.fail(), "io: writing ", bytes.size(), " bytes to '", path, "' failed (disk full?)");
}

// Reads a model from the rest of `is` (to its end). Refused, each with an sdnn::error naming
// the input and, where it applies, the layer: a wrong magic, another version, a file shorter
// than its counts (naming what was being read), a checksum mismatch, bytes after the checksum,
// and every inconsistency the writer refuses (shapes, counts, row_ptr or col_idx out of order or
// range, 2:4 positions not two increasing ones, q = -128, scales not finite and > 0, nonzero
// padding, linear layers that do not chain). Memory: the file's bytes, then the decoded dense
// matrices, which may take at most 4 bytes per file byte plus read_options::max_claimed_bytes;
// every array is checked against the bytes the file holds before it is allocated.
inline sparse_model read_sparse_model(std::istream& is, read_options const& opt = {},
                                      std::string const& name = "<stream>") {
  try {
    std::string bytes;
    char chunk[1 << 16];
    while (is.read(chunk, sizeof chunk) || is.gcount() > 0) bytes.append(chunk, static_cast<std::size_t>(is.gcount()));
    SDNN_EXPECTS(!is.bad(), "io: reading '", name, "' failed");
    return detail::decode_sparse_model(bytes, name, opt);
  } catch (std::bad_alloc const&) {
    SDNN_FAIL("io: '", name, "': out of memory while reading it");
  } catch (std::length_error const&) {
    SDNN_FAIL("io: '", name, "': out of memory while reading it (a size beyond the library's maximum)");
  }
}

inline sparse_model read_sparse_model(std::string const& path, read_options const& opt = {}) {
  std::ifstream f(path, std::ios::binary);
  SDNN_EXPECTS(f.is_open(), "io: cannot open '", path, "' for reading: ", std::strerror(errno));
  return read_sparse_model(f, opt, path);
}

}  // namespace sdnn::io
