// sdnn/layers/sparse_linear.cuh - the device side of layers::sparse_linear: weights held as
// W^T (out x in CSR = W in CSC) in device memory, and one implementation per policy.
//
// Two entry points per policy (spec: sparse_linear_impl<Policy>, primary template asserts):
//   forward_rows(state, a, c, list, count, max_live, flags): c[r] = epi(a[r] * W) for the listed
//       rows (list == nullptr: rows 0..max_live-1); flags[i] = 1 when listed row i has a nonzero
//       output (flags may be nullptr). Used by pipelines that share one live-row list.
//   forward_dense(state, in, out): every row of out written (the layer<T> contract).
// Including this header also gives layers::sparse_linear (sparse_linear.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <type_traits>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/kernels/challenge.cuh"
#include "sdnn/kernels/spmm_dense_csc.cuh"
#include "sdnn/ops/live_rows.cuh"
#include "sdnn/policies/sparse_linear.hpp"
#include "sdnn/vendor/cusparse_challenge.cuh"

namespace sdnn::layers::detail {

template <class T>
struct sparse_linear_device {
  using acc_type = accumulator_t<T>;
  csr_matrix<T, std::int32_t, device_space> wt;  // W^T: out_features x in_features
  buffer<acc_type, device_space> bias;           // [out_features] or empty
  basic_epilogue<acc_type> epi;                  // epi.bias points into `bias` (device)
  vendor::cusparse_spmm<T> spmm_reuse{vendor::cusparse_workspace::reuse};
  vendor::cusparse_spmm<T> spmm_per_call{vendor::cusparse_workspace::per_call};
  // Workspace of forward_dense and of cusparse_filter_rows, sized by reserve().
  std::int64_t reserved = 0;
  buffer<int, device_space> flags;
  buffer<std::int32_t, device_space> list, count;
  kernels::live_row_compactor<std::int32_t> compactor;
  buffer<T, device_space> pack_in, pack_out;  // filter_rows: live rows packed contiguously
  std::int64_t packed_rows = 0;
  // csc_tiled: footprint tiles of W^T (built once by prepare_tiles)
  bool tiles_built = false, tiles_ok = false;
  buffer<std::int32_t, device_space> t_fp_ptr, t_fp, t_col_ptr, t_cols, t_nnz_ptr;
  buffer<std::uint16_t, device_space> t_lidx;
  buffer<T, device_space> t_vals;
  kernels::csc_tiles_view<T> tiles;

  // Plan-time tiles in three steps, so a pipeline can build many layers' tiles on host
  // threads: fetch_wt (device -> host copies enqueued; sync before use), build (host only,
  // kernels::build_csc_tiles), install_tiles (upload; synchronises exec.stream).
  struct host_wt {
    host_buffer<std::int32_t> rp, ci;
    host_buffer<T> vv;
    csr_view<T, std::int32_t> view() const {
      return {static_cast<std::int32_t>(rp.size()) - 1, cols, static_cast<std::int32_t>(ci.size()), rp.data(), ci.data(),
              vv.data()};
    }
    std::int32_t cols = 0;
  };
  host_wt fetch_wt(cuda_exec exec) const {
    host_wt h{host_buffer<std::int32_t>(wt.row_ptr().size()), host_buffer<std::int32_t>(wt.col_idx().size()),
              host_buffer<T>(wt.values().size()), wt.cols()};
    copy(h.rp, wt.row_ptr(), exec);
    copy(h.ci, wt.col_idx(), exec);
    copy(h.vv, wt.values(), exec);
    return h;
  }
  void install_tiles(kernels::csc_tiles_host<T> const& th, bool ok, cuda_exec exec) {
    tiles_built = true;
    tiles_ok = ok;
    if (!ok) return;
    auto up = [&](auto const& v) {
      using E = typename std::decay_t<decltype(v)>::value_type;
      buffer<E, device_space> d(v.size(), exec);
      if (!v.empty())
        SDNN_CUDA_CHECK(cudaMemcpyAsync(d.data(), v.data(), v.size() * sizeof(E), cudaMemcpyHostToDevice, exec.stream));
      return d;
    };
    t_fp_ptr = up(th.fp_ptr);
    t_fp = up(th.fp);
    t_col_ptr = up(th.col_ptr);
    t_cols = up(th.cols);
    t_nnz_ptr = up(th.nnz_ptr);
    t_lidx = up(th.lidx);
    t_vals = up(th.vals);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));  // th may die after this returns
    tiles = {th.n, th.k, th.tiles, th.max_footprint, t_fp_ptr.data(), t_fp.data(), t_col_ptr.data(), t_cols.data(),
             t_nnz_ptr.data(), t_lidx.data(), t_vals.data()};
  }
  // All three steps for this layer. Synchronises exec.stream (plan-time work).
  void prepare_tiles(std::int32_t tile_cols, std::int32_t max_footprint, cuda_exec exec) {
    if (tiles_built) return;
    auto h = fetch_wt(exec);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
    kernels::csc_tiles_host<T> th;
    bool const ok = kernels::build_csc_tiles(h.view(), tile_cols, max_footprint, th);
    install_tiles(th, ok, exec);
  }

  // W (in x out) in device memory -> W^T; bias (host, out values or empty) copied.
  sparse_linear_device(csr_view<T, std::int32_t> w_device, basic_epilogue<acc_type> e, acc_type const* host_bias,
                       cuda_exec exec)
      : wt(vendor::transpose_csr(w_device, exec)), epi(e) {
    if (host_bias) {
      bias = buffer<acc_type, device_space>(static_cast<std::size_t>(w_device.cols), exec);
      SDNN_CUDA_CHECK(cudaMemcpyAsync(bias.data(), host_bias, bias.size() * sizeof(acc_type), cudaMemcpyHostToDevice,
                                      exec.stream));
      SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));  // host_bias may be freed after construction
    }
    epi.bias = host_bias ? bias.data() : nullptr;
  }

  void reserve(std::int64_t rows, cuda_exec exec) {
    if (rows <= reserved) return;
    flags = buffer<int, device_space>(static_cast<std::size_t>(rows), exec);
    list = buffer<std::int32_t, device_space>(static_cast<std::size_t>(rows), exec);
    count = buffer<std::int32_t, device_space>(1, exec);
    compactor.reserve(static_cast<std::int32_t>(rows), exec);
    reserved = rows;
  }
  void reserve_packed(std::int64_t rows, cuda_exec exec) {
    if (rows <= packed_rows) return;
    pack_in = buffer<T, device_space>(static_cast<std::size_t>(rows) * wt.cols(), exec);
    pack_out = buffer<T, device_space>(static_cast<std::size_t>(rows) * wt.rows(), exec);
    packed_rows = rows;
  }
};

template <class Policy>
struct sparse_linear_impl {
  static_assert(sdnn::detail::dependent_false<Policy>, "sparse_linear: no device implementation for this policy");
};

// What a policy without a row list or tiles declares, and its (empty) plan-time preparation.
struct sparse_linear_untiled {
  static constexpr bool uses_row_list = false;
  static constexpr bool uses_tiles = false;
  static constexpr std::int32_t tile_cols = 0, max_footprint = 0;
  template <class T>
  static void prepare(sparse_linear_device<T>&, cuda_exec) {}
};

template <int R, int Th>
struct sparse_linear_impl<policy::csc_gather<R, Th>> : sparse_linear_untiled {
  template <class T>
  static void forward_rows(sparse_linear_device<T>& s, dense_view<T const> a, dense_view<T> c, std::int32_t const* list,
                           std::int32_t const* count, std::int32_t max_live, int* flags, cuda_exec exec) {
    kernels::dense_csc_spmm_flagged<R, Th>(a, s.wt.view(), c, s.epi, list, count, max_live, flags, exec.stream);
  }
  template <class T>
  static void forward_dense(sparse_linear_device<T>& s, dense_view<T const> in, dense_view<T> out, cuda_exec exec) {
    forward_rows(s, in, out, nullptr, nullptr, static_cast<std::int32_t>(in.rows), nullptr, exec);
  }
};

// Footprint tiles when the weights allow them (build_csc_tiles), else csc_gather.
template <int R, int Th>
struct sparse_linear_impl<policy::csc_tiled<R, Th>> {
  static constexpr bool uses_row_list = false;
  static constexpr bool uses_tiles = true;
  static constexpr std::int32_t tile_cols = Th, max_footprint = policy::csc_tiled<R, Th>::max_footprint;
  template <class T>
  static void prepare(sparse_linear_device<T>& s, cuda_exec exec) {
    s.prepare_tiles(Th, policy::csc_tiled<R, Th>::max_footprint, exec);
  }
  template <class T>
  static void forward_rows(sparse_linear_device<T>& s, dense_view<T const> a, dense_view<T> c, std::int32_t const* list,
                           std::int32_t const* count, std::int32_t max_live, int* flags, cuda_exec exec) {
    prepare(s, exec);
    if (s.tiles_ok)
      kernels::tiled_csc_spmm<R, Th>(a, s.tiles, c, s.epi, list, count, max_live, flags, exec.stream);
    else
      kernels::dense_csc_spmm_flagged<R, Th>(a, s.wt.view(), c, s.epi, list, count, max_live, flags, exec.stream);
  }
  template <class T>
  static void forward_dense(sparse_linear_device<T>& s, dense_view<T const> in, dense_view<T> out, cuda_exec exec) {
    forward_rows(s, in, out, nullptr, nullptr, static_cast<std::int32_t>(in.rows), nullptr, exec);
  }
};

template <class Inner>
struct sparse_linear_impl<policy::skip_empty_rows<Inner>> {
  static constexpr bool uses_row_list = true;
  static constexpr bool uses_tiles = sparse_linear_impl<Inner>::uses_tiles;
  static constexpr std::int32_t tile_cols = sparse_linear_impl<Inner>::tile_cols,
                                max_footprint = sparse_linear_impl<Inner>::max_footprint;
  template <class T>
  static void prepare(sparse_linear_device<T>& s, cuda_exec exec) {
    sparse_linear_impl<Inner>::prepare(s, exec);
  }
  template <class T>
  static void forward_rows(sparse_linear_device<T>& s, dense_view<T const> a, dense_view<T> c, std::int32_t const* list,
                           std::int32_t const* count, std::int32_t max_live, int* flags, cuda_exec exec) {
    sparse_linear_impl<Inner>::forward_rows(s, a, c, list, count, max_live, flags, exec);
  }
  // Finds the nonzero input rows, zeroes `out`, and runs Inner on those rows only. An
  // epilogue that maps 0 to nonzero (bias on zero) cannot skip rows: Inner runs on all.
  template <class T>
  static void forward_dense(sparse_linear_device<T>& s, dense_view<T const> in, dense_view<T> out, cuda_exec exec) {
    if (!s.epi.zero_preserving()) return sparse_linear_impl<Inner>::forward_dense(s, in, out, exec);
    if (in.rows == 0) return;
    s.reserve(in.rows, exec);
    auto const rows = static_cast<std::int32_t>(in.rows);
    kernels::dense_nonzero_rows(in, s.flags.data(), exec);
    s.compactor.select(nullptr, s.flags.data(), s.list.data(), s.count.data(), rows, exec);
    SDNN_CUDA_CHECK(cudaMemset2DAsync(out.data, out.ld * sizeof(T), 0, out.cols * sizeof(T), out.rows, exec.stream));
    sparse_linear_impl<Inner>::forward_rows(s, in, out, s.list.data(), s.count.data(), rows, nullptr, exec);
  }
};

template <class Policy>
struct sparse_linear_cusparse_all_rows : sparse_linear_untiled {
  template <class T>
  static void forward_rows(sparse_linear_device<T>& s, dense_view<T const> a, dense_view<T> c, std::int32_t const* list,
                           std::int32_t const* count, std::int32_t max_live, int* flags, cuda_exec exec) {
    SDNN_EXPECTS(list == nullptr && count == nullptr, "sparse_linear: policy ", policy::name<Policy>(),
                 " runs on every row and takes no row list");
    auto& spmm = std::is_same_v<Policy, policy::cusparse_reuse_buffer> ? s.spmm_reuse : s.spmm_per_call;
    spmm.run(a, s.wt.view(), c, max_live, s.epi, flags, exec);
  }
  template <class T>
  static void forward_dense(sparse_linear_device<T>& s, dense_view<T const> in, dense_view<T> out, cuda_exec exec) {
    forward_rows(s, in, out, nullptr, nullptr, static_cast<std::int32_t>(in.rows), nullptr, exec);
  }
};
template <>
struct sparse_linear_impl<policy::cusparse_reuse_buffer> : sparse_linear_cusparse_all_rows<policy::cusparse_reuse_buffer> {
};
template <>
struct sparse_linear_impl<policy::cusparse_buffer_per_call>
    : sparse_linear_cusparse_all_rows<policy::cusparse_buffer_per_call> {};

// Packs the listed rows, multiplies the packed block with cusparseSpMM (workspace reused),
// unpacks. cuSPARSE takes its sizes on the host, so this policy reads the live count back
// every call: it synchronises exec.stream (the seed paper's "filter rows" baseline does too).
template <>
struct sparse_linear_impl<policy::cusparse_filter_rows> {
  static constexpr bool uses_row_list = true;
  static constexpr bool uses_tiles = false;
  static constexpr std::int32_t tile_cols = 0, max_footprint = 0;
  template <class T>
  static void prepare(sparse_linear_device<T>&, cuda_exec) {}
  template <class T>
  static void forward_rows(sparse_linear_device<T>& s, dense_view<T const> a, dense_view<T> c, std::int32_t const* list,
                           std::int32_t const* count, std::int32_t max_live, int* flags, cuda_exec exec) {
    std::int32_t live = max_live;
    if (count) {
      SDNN_CUDA_CHECK(cudaMemcpyAsync(&live, count, sizeof live, cudaMemcpyDeviceToHost, exec.stream));
      SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
      live = std::min(live, max_live);
    }
    if (live <= 0) return;
    if (list == nullptr) return s.spmm_reuse.run(a, s.wt.view(), c, live, s.epi, flags, exec);
    s.reserve_packed(live, exec);
    dense_view<T> pin{live, a.cols, a.cols, s.pack_in.data()};
    dense_view<T> pout{live, c.cols, c.cols, s.pack_out.data()};
    kernels::move_listed_rows<true>(a, list, static_cast<std::int32_t const*>(nullptr), live, pin, exec);
    s.spmm_reuse.run(dense_view<T const>(pin), s.wt.view(), pout, live, s.epi, flags, exec);
    kernels::move_listed_rows<false>(dense_view<T const>(pout), list, static_cast<std::int32_t const*>(nullptr), live,
                                     c, exec);
  }
  template <class T>
  static void forward_dense(sparse_linear_device<T>& s, dense_view<T const> in, dense_view<T> out, cuda_exec exec) {
    if (!s.epi.zero_preserving()) return s.spmm_reuse.run(in, s.wt.view(), out, in.rows, s.epi, nullptr, exec);
    if (in.rows == 0) return;
    s.reserve(in.rows, exec);
    auto const rows = static_cast<std::int32_t>(in.rows);
    kernels::dense_nonzero_rows(in, s.flags.data(), exec);
    s.compactor.select(nullptr, s.flags.data(), s.list.data(), s.count.data(), rows, exec);
    SDNN_CUDA_CHECK(cudaMemset2DAsync(out.data, out.ld * sizeof(T), 0, out.cols * sizeof(T), out.rows, exec.stream));
    forward_rows(s, in, out, s.list.data(), s.count.data(), rows, nullptr, exec);
  }
};

}  // namespace sdnn::layers::detail

#include "sdnn/layers/sparse_linear.hpp"
