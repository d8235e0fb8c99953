// python/src/module.cpp - sdnn._sdnn, the compiled half of the Python package: the host part
// (structure analysis, pruning, the structured formats, the 16-bit linear reference) that every
// build has, and, where the module was compiled with CUDA, the device layers (device.cu). Arrays
// come in through DLPack (tensor_arg.hpp) and results are written into arrays the Python side
// allocated, so that the module depends on no array library's C++ ABI.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <utility>

#include <chrono>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "sdnn/challenge/inputs.hpp"
#include "sdnn/challenge/radixnet.hpp"
#include "sdnn/challenge/reference.hpp"
#include "sdnn/challenge/tsv.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/io/mnist_idx.hpp"
#include "sdnn/formats/block_sparse.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/formats/sparse24.hpp"
#include "sdnn/linear/op/tc_auto.hpp"
#include "sdnn/train/op/prune_sparse24.hpp"
#include "sdnn/train/op/prune_structured.hpp"

#include "device.hpp"
#include "tensor_arg.hpp"

namespace sdnn_py {

namespace {

template <class T>
sdnn::dense_view<T const> host_matrix(tensor_arg const& a) {
  a.expect_host().expect_ndim(2).expect_contiguous();
  return {a.dim(0), a.dim(1), a.dim(1), static_cast<T const*>(a.data())};
}
template <class T>
sdnn::dense_view<T> host_out(tensor_arg const& out, std::int64_t rows, std::int64_t cols) {
  out.expect_host().expect_contiguous().expect_shape({rows, cols});
  return {rows, cols, cols, static_cast<T*>(out.data())};
}
template <class T>
void copy_into(sdnn::dense_matrix<T> const& m, tensor_arg const& out) {
  auto o = host_out<T>(out, m.rows(), m.cols());
  if (m.size()) std::memcpy(o.data, m.data(), m.size() * sizeof(T));
}
void same_type(tensor_arg const& a, tensor_arg const& b) {
  if (a.type() != b.type())
    throw py::type_error(std::string(b.what()) + ": expected the type of " + a.what() + " (" + dtype_name(a.type()) +
                         "), got " + b.describe());
}

py::dict analyze(py::handle w_obj) {
  tensor_arg w(w_obj, "weight");
  return dispatch_float(w.type(), "weight", [&](auto t) {
    using T = decltype(t);
    auto const s = sdnn::ops::analyze_weights(host_matrix<T>(w));
    py::dict d;
    d["rows"] = s.m;
    d["cols"] = s.k;
    d["nnz"] = s.nnz;
    d["density"] = s.density();
    d["blocks32"] = s.blocks32;
    d["blocks32_total"] = s.blocks32_total;
    d["tiles64"] = s.tiles64;
    d["tiles64_total"] = s.tiles64_total;
    d["is_24"] = s.is_24;
    d["description"] = s.describe();
    return d;
  });
}

// The structured formats, over the three value types.
template <template <class> class M>
using any_of = std::variant<M<float>, M<sdnn::fp16>, M<sdnn::bf16>>;
template <class T>
using block_sparse = sdnn::block_sparse_matrix<T>;

dtype dtype_of(float) { return dtype::f32; }
dtype dtype_of(sdnn::fp16) { return dtype::f16; }
dtype dtype_of(sdnn::bf16) { return dtype::bf16; }

// The dense matrix of whichever format a variant holds, into `out` (of its type and shape).
template <class Variant>
void variant_to_dense(Variant const& m, py::handle out_obj) {
  tensor_arg out(out_obj, "out");
  std::visit(
      [&](auto const& a) {
        using T = typename std::decay_t<decltype(a)>::value_type;
        out.expect_type(dtype_of(T{}));
        copy_into(sdnn::to_dense(a), out);
      },
      m);
}
// The element type's name of whichever format a variant holds.
template <class Variant>
std::string variant_dtype(Variant const& m) {
  return std::visit(
      [](auto const& a) {
        using T = typename std::decay_t<decltype(a)>::value_type;
        return std::string(dtype_name(dtype_of(T{})));
      },
      m);
}

struct py_block_sparse {
  any_of<block_sparse> m;

  static py_block_sparse from_dense(py::handle w_obj, int br, int bc) {
    tensor_arg w(w_obj, "weight");
    return dispatch_float(w.type(), "weight", [&](auto t) {
      using T = decltype(t);
      return py_block_sparse{sdnn::block_sparse_from_dense(host_matrix<T>(w), br, bc)};
    });
  }
  void to_dense(py::handle out_obj) const { variant_to_dense(m, out_obj); }
  template <class F>
  auto get(F f) const {
    return std::visit(f, m);
  }
};

struct py_sparse24 {
  any_of<sdnn::sparse24_matrix> m;

  // prune = false: w must already be 2:4 along its rows (ValueError naming the first group that
  // is not); prune = true: the two largest magnitudes of every group are kept.
  static py_sparse24 from_dense(py::handle w_obj, bool prune) {
    tensor_arg w(w_obj, "weight");
    return dispatch_float(w.type(), "weight", [&](auto t) {
      using T = decltype(t);
      auto v = host_matrix<T>(w);
      return py_sparse24{prune ? sdnn::ops::prune_sparse24(v) : sdnn::sparse24_from_dense(v)};
    });
  }
  void to_dense(py::handle out_obj) const { variant_to_dense(m, out_obj); }
};

// CSR with float values and int32 indices (the layout of scipy.sparse.csr_matrix).
struct py_csr {
  sdnn::csr_matrix<float, std::int32_t> m;

  static py_csr from_arrays(std::int64_t rows, std::int64_t cols, py::handle indptr_obj, py::handle indices_obj,
                            py::handle data_obj) {
    tensor_arg ip(indptr_obj, "indptr"), ix(indices_obj, "indices"), dv(data_obj, "data");
    for (tensor_arg const* a : {&ip, &ix, &dv}) a->expect_host().expect_ndim(1).expect_contiguous();
    ip.expect_type(dtype::i32);
    ix.expect_type(dtype::i32);
    dv.expect_type(dtype::f32);
    if (rows < 0 || cols < 0 || rows > INT32_MAX || cols > INT32_MAX)
      throw py::value_error("CSR: the shape " + std::to_string(rows) + " x " + std::to_string(cols) +
                            " is negative or does not fit int32 indices");
    auto const* p = static_cast<std::int32_t const*>(ip.data());
    auto const* c = static_cast<std::int32_t const*>(ix.data());
    auto const* v = static_cast<float const*>(dv.data());
    return py_csr{sdnn::make_csr<float, std::int32_t>(
        static_cast<std::int32_t>(rows), static_cast<std::int32_t>(cols), std::vector<std::int32_t>(p, p + ip.numel()),
        std::vector<std::int32_t>(c, c + ix.numel()), std::vector<float>(v, v + dv.numel()))};
  }
  static py_csr from_dense(py::handle w_obj) {
    tensor_arg w(w_obj, "weight");
    w.expect_type(dtype::f32);
    auto const v = host_matrix<float>(w);
    std::vector<std::int32_t> rp{0}, ci;
    std::vector<float> vals;
    if (v.rows > INT32_MAX || v.cols > INT32_MAX) throw py::value_error("CSR: the matrix does not fit int32 indices");
    for (std::int64_t i = 0; i < v.rows; ++i) {
      for (std::int64_t j = 0; j < v.cols; ++j)
        if (v(i, j) != 0.0f) {
          ci.push_back(static_cast<std::int32_t>(j));
          vals.push_back(v(i, j));
        }
      if (ci.size() > std::size_t(INT32_MAX)) throw py::value_error("CSR: more than 2^31 - 1 nonzeros");
      rp.push_back(static_cast<std::int32_t>(ci.size()));
    }
    return py_csr{sdnn::make_csr<float, std::int32_t>(static_cast<std::int32_t>(v.rows),
                                                      static_cast<std::int32_t>(v.cols), rp, ci, vals)};
  }
  // Copies the three arrays into the given int32 / int32 / float32 arrays of the right lengths.
  void export_arrays(py::handle indptr_obj, py::handle indices_obj, py::handle data_obj) const {
    tensor_arg ip(indptr_obj, "indptr"), ix(indices_obj, "indices"), dv(data_obj, "data");
    ip.expect_host().expect_contiguous().expect_type(dtype::i32).expect_shape({std::int64_t(m.rows()) + 1});
    ix.expect_host().expect_contiguous().expect_type(dtype::i32).expect_shape({std::int64_t(m.nnz())});
    dv.expect_host().expect_contiguous().expect_type(dtype::f32).expect_shape({std::int64_t(m.nnz())});
    std::memcpy(ip.data(), m.row_ptr().data(), m.row_ptr().size() * sizeof(std::int32_t));
    if (m.nnz()) {
      std::memcpy(ix.data(), m.col_idx().data(), m.col_idx().size() * sizeof(std::int32_t));
      std::memcpy(dv.data(), m.values().data(), m.values().size() * sizeof(float));
    }
  }
};

void prune_magnitude(py::handle w_obj, py::handle out_obj, double sparsity) {
  tensor_arg w(w_obj, "weight"), out(out_obj, "out");
  same_type(w, out);
  dispatch_float(w.type(), "weight", [&](auto t) {
    using T = decltype(t);
    copy_into(sdnn::train::prune_magnitude(host_matrix<T>(w), sparsity), out);
  });
}
void prune_blocks(py::handle w_obj, py::handle out_obj, int br, int bc, double sparsity) {
  tensor_arg w(w_obj, "weight"), out(out_obj, "out");
  same_type(w, out);
  dispatch_float(w.type(), "weight", [&](auto t) {
    using T = decltype(t);
    copy_into(sdnn::train::prune_blocks_l2(host_matrix<T>(w), br, bc, sparsity), out);
  });
}
void prune_24(py::handle w_obj, py::handle out_obj) {
  tensor_arg w(w_obj, "weight"), out(out_obj, "out");
  same_type(w, out);
  dispatch_float(w.type(), "weight", [&](auto t) {
    using T = decltype(t);
    copy_into(sdnn::to_dense(sdnn::ops::prune_sparse24(host_matrix<T>(w))), out);
  });
}

// y = epi(x w^T) on the host (the reference the device layers are tested against): 16-bit x, w
// and y of one type, float accumulation, optional float bias and ReLU, one rounding.
void linear_reference(py::handle x_obj, py::handle w_obj, py::object bias_obj, bool relu, py::handle y_obj) {
  tensor_arg x(x_obj, "x"), w(w_obj, "weight"), y(y_obj, "out");
  same_type(x, w);
  same_type(x, y);
  std::vector<float> bias;
  if (!bias_obj.is_none()) {
    tensor_arg b(bias_obj, "bias");
    b.expect_host().expect_ndim(1).expect_contiguous().expect_type(dtype::f32);
    auto const* p = static_cast<float const*>(b.data());
    bias.assign(p, p + b.numel());
  }
  dispatch_16bit(x.type(), "x", [&](auto t) {
    using T = decltype(t);
    auto xv = host_matrix<T>(x);
    auto wv = host_matrix<T>(w);
    if (xv.cols != wv.cols)
      throw py::value_error("linear_reference: x has " + std::to_string(xv.cols) + " features, the weight takes " +
                            std::to_string(wv.cols));
    if (!bias.empty() && std::int64_t(bias.size()) != wv.rows)
      throw py::value_error("linear_reference: the bias has " + std::to_string(bias.size()) + " values, the weight " +
                            std::to_string(wv.rows) + " rows");
    auto yv = host_out<T>(y, xv.rows, wv.rows);
    sdnn::basic_epilogue<float> epi;
    epi.relu = relu;
    if (!bias.empty()) {
      epi.bias = bias.data();
      epi.bias_count = static_cast<std::int64_t>(bias.size());
    }
    py::gil_scoped_release nogil;
    sdnn::ops::tc_auto_linear(sdnn::host_exec{}, xv, wv, yv, epi);
  });
}

// The Graph Challenge: the network's layers and inputs as sdnn.CSR, the host reference and the
// device engine.
std::vector<sdnn::csr_matrix<float, std::int32_t>> layer_list(py::list const& layers, std::int64_t& n) {
  std::vector<sdnn::csr_matrix<float, std::int32_t>> out;
  out.reserve(layers.size());
  n = -1;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    auto const& c = layers[l].cast<py_csr const&>().m;
    if (c.rows() != c.cols() || (n >= 0 && c.rows() != n))
      throw py::value_error("challenge: layer " + std::to_string(l) + " is " + std::to_string(c.rows()) + " x " +
                            std::to_string(c.cols()) + "; every layer must be N x N with one N" +
                            (n >= 0 ? " (" + std::to_string(n) + ")" : std::string()));
    n = c.rows();
    auto copy = sdnn::make_csr<float, std::int32_t>(
        c.rows(), c.cols(), std::vector<std::int32_t>(c.row_ptr().begin(), c.row_ptr().end()),
        std::vector<std::int32_t>(c.col_idx().begin(), c.col_idx().end()),
        std::vector<float>(c.values().begin(), c.values().end()));
    out.push_back(std::move(copy));
  }
  if (out.empty()) throw py::value_error("challenge: needs at least one layer");
  return out;
}
void check_inputs(py_csr const& in, std::int64_t n) {
  if (in.m.cols() != n)
    throw py::value_error("challenge: the inputs have " + std::to_string(in.m.cols()) + " columns, the network " +
                          std::to_string(n) + " neurons");
}
std::vector<std::int32_t> challenge_reference(py::list const& layers, py_csr const& inputs, float bias, float cap) {
  std::int64_t n = 0;
  auto ls = layer_list(layers, n);
  check_inputs(inputs, n);
  py::gil_scoped_release nogil;
  return sdnn::reference::challenge_categories(sdnn::reference::challenge_infer(inputs.m, ls, bias, cap));
}
py::dict challenge_device(py::list const& layers, py_csr const& inputs, float bias, float cap, std::uintptr_t stream) {
  std::int64_t n = 0;
  auto ls = layer_list(layers, n);
  check_inputs(inputs, n);
  challenge_run r;
  {
    py::gil_scoped_release nogil;
    r = challenge_infer_device(ls, inputs.m, bias, cap, stream);
  }
  py::dict d;
  d["categories"] = r.categories;
  d["plan_seconds"] = r.plan_seconds;
  d["run_seconds"] = r.run_seconds;
  d["summary"] = r.summary;
  return d;
}

// sdnn.Linear's compiled half: the weights and bias are copied from host arrays here; runs take
// device pointers (forward_ptr, the fast path torch's module uses) or DLPack arrays (forward).
class py_linear {
 public:
  py_linear(py::handle w_obj, py::object bias_obj, bool relu, std::int64_t max_rows) {
    tensor_arg w(w_obj, "weight");
    w.expect_host().expect_ndim(2).expect_contiguous();
    type_ = w.type();
    dispatch_16bit(type_, "weight", [](auto) { return 0; });
    out_ = w.dim(0);
    in_ = w.dim(1);
    std::vector<float> bias = float_vector(bias_obj, "bias", out_);
    h_ = make_linear(type_, w.data(), out_, in_, std::move(bias), relu, max_rows);
  }
  void plan(std::int64_t batch, std::uintptr_t stream) {
    if (batch < 1) throw py::value_error("Linear.plan: the batch must be >= 1, got " + std::to_string(batch));
    py::gil_scoped_release nogil;
    h_->plan(batch, stream);
  }
  void forward_ptr(std::uintptr_t x, std::uintptr_t y, std::int64_t rows, std::uintptr_t stream) {
    if (rows < 0) throw py::value_error("Linear.forward: rows must be >= 0");
    if (rows == 0) return;
    if (!x || !y) throw py::value_error("Linear.forward: null data pointer");
    py::gil_scoped_release nogil;
    h_->forward(x, y, rows, stream);
  }
  void forward(py::handle x_obj, py::handle y_obj, std::uintptr_t stream) {
    tensor_arg x(x_obj, "x"), y(y_obj, "out");
    for (tensor_arg const* a : {&x, &y}) {
      a->expect_cuda().expect_ndim(2).expect_contiguous().expect_type(type_);
      if (a->device_id() != h_->device())
        throw py::value_error(std::string(a->what()) + ": the layer lives on cuda:" + std::to_string(h_->device()) +
                              ", got " + a->describe());
    }
    if (x.dim(1) != in_) x.expect_shape({x.dim(0), in_});
    y.expect_shape({x.dim(0), out_});
    forward_ptr(reinterpret_cast<std::uintptr_t>(x.data()), reinterpret_cast<std::uintptr_t>(y.data()), x.dim(0),
                stream);
  }
  std::string reason(std::int64_t rows) const { return h_->reason(rows); }
  // Host seconds per call of `iters` back-to-back C++ forwards (no synchronisation): the cost of
  // the call without Python, for the benchmark of the Python layer's overhead.
  double time_calls(std::uintptr_t x, std::uintptr_t y, std::int64_t rows, std::uintptr_t stream, int iters) {
    if (iters < 1 || rows < 1 || !x || !y) throw py::value_error("time_calls: iters, rows >= 1 and pointers needed");
    py::gil_scoped_release nogil;
    auto const t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) h_->forward(x, y, rows, stream);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
  }
  int device() const { return h_->device(); }
  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }
  std::string type_name() const { return dtype_name(type_); }

  static std::vector<float> float_vector(py::object obj, char const* what, std::int64_t n) {
    std::vector<float> v;
    if (obj.is_none()) return v;
    tensor_arg b(obj, what);
    b.expect_host().expect_ndim(1).expect_contiguous().expect_type(dtype::f32).expect_shape({n});
    auto const* p = static_cast<float const*>(b.data());
    v.assign(p, p + n);
    return v;
  }

 private:
  dtype type_ = dtype::other;
  std::int64_t in_ = 0, out_ = 0;
  std::unique_ptr<linear_handle> h_;
};

// sdnn.Conv2d's compiled half: weight_gemm is the K x R*S*C GEMM view (the KRSC filter; the
// Python side permutes torch's KCRS); activations are NHWC in memory.
class py_conv {
 public:
  py_conv(py::handle w_obj, int C, int R, int S, std::pair<int, int> stride, std::pair<int, int> padding,
          std::pair<int, int> dilation, py::object bias_obj, bool relu, bool pool) {
    tensor_arg w(w_obj, "weight");
    w.expect_host().expect_ndim(2).expect_contiguous();
    type_ = w.type();
    dispatch_16bit(type_, "weight", [](auto) { return 0; });
    if (C < 1 || R < 1 || S < 1 || w.dim(1) != std::int64_t(C) * R * S)
      throw py::value_error("Conv2d: the GEMM view of the weights is " + w.describe() + ", expected K x R*S*C with C=" +
                            std::to_string(C) + ", R=" + std::to_string(R) + ", S=" + std::to_string(S));
    g_.C = C;
    g_.K = static_cast<int>(w.dim(0));
    g_.R = R;
    g_.S = S;
    g_.stride_h = stride.first;
    g_.stride_w = stride.second;
    g_.pad_h = padding.first;
    g_.pad_w = padding.second;
    g_.dil_h = dilation.first;
    g_.dil_w = dilation.second;
    h_ = make_conv(type_, g_, w.data(), py_linear::float_vector(bias_obj, "bias", g_.K), relu, pool);
  }
  std::pair<int, int> out_hw(int H, int W) const { return h_->out_hw(H, W); }
  void forward_ptr(std::uintptr_t x, std::uintptr_t y, std::int64_t batch, int H, int W, std::uintptr_t stream) {
    if (batch < 1) throw py::value_error("Conv2d.forward: the batch must be >= 1");
    if (!x || !y) throw py::value_error("Conv2d.forward: null data pointer");
    py::gil_scoped_release nogil;
    h_->forward(x, y, batch, H, W, stream);
  }
  // x: (N, C, H, W) channels_last or (N, H, W, C) contiguous; y likewise, of the output's shape.
  void forward(py::handle x_obj, py::handle y_obj, std::uintptr_t stream) {
    tensor_arg x(x_obj, "x"), y(y_obj, "out");
    for (tensor_arg const* a : {&x, &y}) {
      a->expect_cuda().expect_ndim(4).expect_type(type_);
      if (a->device_id() != h_->device())
        throw py::value_error(std::string(a->what()) + ": the layer lives on cuda:" + std::to_string(h_->device()) +
                              ", got " + a->describe());
    }
    auto nhwc = [](tensor_arg const& a, int& n, int& c, int& h, int& w) {
      if (a.channels_last()) {
        n = int(a.dim(0)), c = int(a.dim(1)), h = int(a.dim(2)), w = int(a.dim(3));
      } else if (a.contiguous()) {
        n = int(a.dim(0)), h = int(a.dim(1)), w = int(a.dim(2)), c = int(a.dim(3));
      } else {
        throw py::value_error(std::string(a.what()) + ": expected NHWC memory (torch's channels_last, or a contiguous "
                              "N x H x W x C array), got a strided " + a.describe() +
                              "; pass x.contiguous(memory_format=torch.channels_last)");
      }
    };
    int n, c, h, w, yn, yc, yh, yw;
    nhwc(x, n, c, h, w);
    nhwc(y, yn, yc, yh, yw);
    if (c != g_.C) throw py::value_error("x: expected " + std::to_string(g_.C) + " channels, got " + x.describe());
    auto const o = out_hw(h, w);
    if (yn != n || yc != g_.K || yh != o.first || yw != o.second)
      throw py::value_error("out: expected N=" + std::to_string(n) + ", K=" + std::to_string(g_.K) + ", " +
                            std::to_string(o.first) + " x " + std::to_string(o.second) + ", got " + y.describe());
    forward_ptr(reinterpret_cast<std::uintptr_t>(x.data()), reinterpret_cast<std::uintptr_t>(y.data()), n, h, w,
                stream);
  }
  std::string reason(std::int64_t batch, int H, int W) const { return h_->reason(batch, H, W); }
  int device() const { return h_->device(); }
  int in_channels() const { return g_.C; }
  int out_channels() const { return g_.K; }
  std::string type_name() const { return dtype_name(type_); }

 private:
  dtype type_ = dtype::other;
  conv_geometry g_;
  std::unique_ptr<conv_handle> h_;
};

}  // namespace

}  // namespace sdnn_py

PYBIND11_MODULE(_sdnn, m) {
  using namespace sdnn_py;
  m.doc() = "sdnn's compiled module; use the `sdnn` package";

  // sdnn::error (bad input) arrives as sdnn.Error, a ValueError; a failed CUDA or library call
  // (sdnn::library_error) as sdnn.CudaError, a RuntimeError; a part this build lacks
  // (sdnn::not_compiled) as NotImplementedError. Messages are sdnn's own.
  static py::exception<sdnn::error> error_type(m, "Error", PyExc_ValueError);
  static py::exception<sdnn::library_error> library_type(m, "CudaError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (sdnn::not_compiled const& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    } catch (sdnn::library_error const& e) {
      PyErr_SetString(library_type.ptr(), e.what());
    } catch (sdnn::error const& e) {
      PyErr_SetString(error_type.ptr(), e.what());
    }
  });

  m.def("analyze", &analyze, py::arg("weight"),
        "Structure of a host weight matrix: nonzeros, occupied 32x32 blocks and 64x64 tiles, 2:4-ness");
  m.def("prune_magnitude", &prune_magnitude, py::arg("weight"), py::arg("out"), py::arg("sparsity"));
  m.def("prune_blocks", &prune_blocks, py::arg("weight"), py::arg("out"), py::arg("block_rows"),
        py::arg("block_cols"), py::arg("sparsity"));
  m.def("prune_24", &prune_24, py::arg("weight"), py::arg("out"));
  m.def("linear_reference", &linear_reference, py::arg("x"), py::arg("weight"), py::arg("bias"), py::arg("relu"),
        py::arg("out"));

  py::class_<py_block_sparse>(m, "BlockSparse")
      .def_static("from_dense", &py_block_sparse::from_dense, py::arg("weight"), py::arg("block_rows"),
                  py::arg("block_cols"))
      .def("to_dense", &py_block_sparse::to_dense, py::arg("out"))
      .def_property_readonly("shape",
                             [](py_block_sparse const& b) {
                               return b.get([](auto const& a) { return py::make_tuple(a.rows(), a.cols()); });
                             })
      .def_property_readonly("block_shape",
                             [](py_block_sparse const& b) {
                               return b.get(
                                   [](auto const& a) { return py::make_tuple(a.block_rows(), a.block_cols()); });
                             })
      .def_property_readonly("nnzb", [](py_block_sparse const& b) { return b.get([](auto const& a) { return a.nnzb(); }); })
      .def_property_readonly("dtype", [](py_block_sparse const& b) { return variant_dtype(b.m); })
      .def_property_readonly("nbytes", [](py_block_sparse const& b) {
        return b.get([](auto const& a) {
          using T = typename std::decay_t<decltype(a)>::value_type;
          return a.values().size() * sizeof(T) + (a.row_ptr().size() + a.col_idx().size()) * 4;
        });
      });

  py::class_<py_sparse24>(m, "Sparse24")
      .def_static("from_dense", &py_sparse24::from_dense, py::arg("weight"), py::arg("prune") = false)
      .def("to_dense", &py_sparse24::to_dense, py::arg("out"))
      .def_property_readonly("shape",
                             [](py_sparse24 const& s) {
                               return std::visit([](auto const& a) { return py::make_tuple(a.rows(), a.cols()); },
                                                 s.m);
                             })
      .def_property_readonly("dtype", [](py_sparse24 const& s) { return variant_dtype(s.m); })
      .def_property_readonly("nbytes", [](py_sparse24 const& s) {
        return std::visit(
            [](auto const& a) {
              using T = typename std::decay_t<decltype(a)>::value_type;
              return std::size_t(a.rows() * a.kept_per_row()) * sizeof(T) + std::size_t(a.rows() * a.meta_ld());
            },
            s.m);
      });

  py::class_<py_csr>(m, "CSR")
      .def_static("from_arrays", &py_csr::from_arrays, py::arg("rows"), py::arg("cols"), py::arg("indptr"),
                  py::arg("indices"), py::arg("data"))
      .def_static("from_dense", &py_csr::from_dense, py::arg("weight"))
      .def("export_arrays", &py_csr::export_arrays, py::arg("indptr"), py::arg("indices"), py::arg("data"))
      .def_property_readonly("shape", [](py_csr const& c) { return py::make_tuple(c.m.rows(), c.m.cols()); })
      .def_property_readonly("nnz", [](py_csr const& c) { return c.m.nnz(); });

  py::class_<py_linear>(m, "Linear")
      .def(py::init<py::handle, py::object, bool, std::int64_t>(), py::arg("weight"), py::arg("bias"),
           py::arg("relu") = false, py::arg("max_rows") = 0)
      .def("plan", &py_linear::plan, py::arg("batch"), py::arg("stream"))
      .def("forward_ptr", &py_linear::forward_ptr, py::arg("x"), py::arg("out"), py::arg("rows"), py::arg("stream"))
      .def("forward", &py_linear::forward, py::arg("x"), py::arg("out"), py::arg("stream"))
      .def("reason", &py_linear::reason, py::arg("rows"))
      .def("time_calls", &py_linear::time_calls, py::arg("x"), py::arg("out"), py::arg("rows"), py::arg("stream"),
           py::arg("iters"))
      .def_property_readonly("device", &py_linear::device)
      .def_property_readonly("in_features", &py_linear::in_features)
      .def_property_readonly("out_features", &py_linear::out_features)
      .def_property_readonly("dtype", &py_linear::type_name);

  py::class_<py_conv>(m, "Conv2d")
      .def(py::init<py::handle, int, int, int, std::pair<int, int>, std::pair<int, int>, std::pair<int, int>,
                    py::object, bool, bool>(),
           py::arg("weight_gemm"), py::arg("in_channels"), py::arg("kernel_h"), py::arg("kernel_w"), py::arg("stride"),
           py::arg("padding"), py::arg("dilation"), py::arg("bias"), py::arg("relu") = false, py::arg("pool") = false)
      .def("out_hw", &py_conv::out_hw, py::arg("H"), py::arg("W"))
      .def("forward_ptr", &py_conv::forward_ptr, py::arg("x"), py::arg("out"), py::arg("batch"), py::arg("H"),
           py::arg("W"), py::arg("stream"))
      .def("forward", &py_conv::forward, py::arg("x"), py::arg("out"), py::arg("stream"))
      .def("reason", &py_conv::reason, py::arg("batch"), py::arg("H"), py::arg("W"))
      .def_property_readonly("device", &py_conv::device)
      .def_property_readonly("in_channels", &py_conv::in_channels)
      .def_property_readonly("out_channels", &py_conv::out_channels)
      .def_property_readonly("dtype", &py_conv::type_name);

  m.def("challenge_reference", &challenge_reference, py::arg("layers"), py::arg("inputs"), py::arg("bias"),
        py::arg("cap"));
  m.def("challenge_device", &challenge_device, py::arg("layers"), py::arg("inputs"), py::arg("bias"), py::arg("cap"),
        py::arg("stream"));
  m.def("challenge_bias", &sdnn::data::challenge_bias, py::arg("neurons"));
  m.def("challenge_official_1024_layer", [](std::int32_t l) { return py_csr{sdnn::data::official_1024_layer(l)}; },
        py::arg("layer"));
  m.def("challenge_radixnet_layer",
        [](std::int32_t n, std::int32_t l, std::uint64_t seed) { return py_csr{sdnn::data::radixnet_layer(n, l, seed)}; },
        py::arg("neurons"), py::arg("layer"), py::arg("seed"));
  m.def("challenge_read_layer",
        [](std::string const& path, std::int32_t n) { return py_csr{sdnn::io::read_challenge_layer(path, n)}; },
        py::arg("path"), py::arg("neurons"));
  m.def("challenge_read_images",
        [](std::string const& path, std::int32_t n, std::int32_t images) {
          return py_csr{sdnn::io::read_challenge_images(path, n, images)};
        },
        py::arg("path"), py::arg("neurons"), py::arg("images") = -1);
  m.def("challenge_mnist_inputs",
        [](std::string const& path, std::int32_t n, std::int32_t count, float threshold) {
          auto const mnist = sdnn::io::read_idx_images(sdnn::io::input::file(path));
          return py_csr{sdnn::data::challenge_inputs_from_mnist(mnist, n, count, threshold)};
        },
        py::arg("path"), py::arg("neurons"), py::arg("count"), py::arg("threshold") = 0.7f);

  m.attr("has_cuda") = device_compiled();
}
