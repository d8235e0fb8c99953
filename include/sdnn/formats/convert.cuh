// sdnn/formats/convert.cuh - device conversions among COO, CSR, ELL, tiled-dense and dense: the
// names of the host conversions (formats/convert.hpp) with a trailing cuda_exec, inputs and
// results in device_space, results equal to the host's exactly (same integers, same values).
// Everything is enqueued on exec.stream (allocations too: cudaMallocAsync), built from CUB /
// Thrust primitives and the one-thread-per-element kernel of core/kernel/for_each.cuh. Nothing
// synchronises EXCEPT where an output size must be read back to allocate the result; each such
// function says "Synchronises exec.stream" (docs/foundation.md#conversions lists them).
#pragma once

#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/binary_search.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/sequence.h>
#include <thrust/system/cuda/execution_policy.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/convert.hpp"
#include "sdnn/formats/copy.cuh"
#include "sdnn/core/kernel/for_each.cuh"

namespace sdnn {
namespace detail {

// Two-phase CUB call: f(temp, bytes) sizes the temporary storage, then runs with it.
template <class F>
void cub_call(F&& f, cuda_exec exec) {
  std::size_t bytes = 0;
  SDNN_CUDA_CHECK(f(nullptr, bytes));
  device_buffer<unsigned char> temp(std::max<std::size_t>(bytes, 1), exec);
  SDNN_CUDA_CHECK(f(temp.data(), bytes));
}

inline auto thrust_on(cuda_exec exec) { return thrust::cuda::par_nosync.on(exec.stream); }

// Reads one value back to the host. Synchronises exec.stream.
template <class T>
T read_back(T const* d, cuda_exec exec) {
  T h{};
  SDNN_CUDA_CHECK(cudaMemcpyAsync(&h, d, sizeof(T), cudaMemcpyDeviceToHost, exec.stream));
  sync_stream(exec);
  return h;
}

template <class T>
void fill_zero(T* d, std::size_t n, cuda_exec exec) {
  if (n) SDNN_CUDA_CHECK(cudaMemsetAsync(d, 0, n * sizeof(T), exec.stream));
}

// Functors for transform iterators (host-device, so Thrust/CUB can query their types).
template <class Index>
struct row_length_op {
  Index const* row_ptr;
  SDNN_HOST_DEVICE std::int64_t operator()(std::int64_t i) const {
    return static_cast<std::int64_t>(row_ptr[i + 1] - row_ptr[i]);
  }
};
template <class Index>
struct row_length_sq_op {
  Index const* row_ptr;
  SDNN_HOST_DEVICE std::int64_t operator()(std::int64_t i) const {
    auto const l = static_cast<std::int64_t>(row_ptr[i + 1] - row_ptr[i]);
    return l * l;
  }
};
template <class Index>
struct row_empty_op {
  Index const* row_ptr;
  SDNN_HOST_DEVICE std::int64_t operator()(std::int64_t i) const { return row_ptr[i + 1] == row_ptr[i] ? 1 : 0; }
};
struct times_op {
  std::int64_t m;
  SDNN_HOST_DEVICE std::int64_t operator()(std::int64_t i) const { return i * m; }
};
struct widen_op {
  SDNN_HOST_DEVICE std::int64_t operator()(std::uint8_t x) const { return x; }
};
// Element lin (row-major logical index) of a dense view with leading dimension ld.
template <class T>
struct dense_at {
  T const* data;
  std::int64_t cols, ld;
  SDNN_HOST_DEVICE T operator()(std::int64_t lin) const { return data[(lin / cols) * ld + lin % cols]; }
};
// Element lin (row-major logical index) of a tiled-dense matrix.
template <class T>
struct tiled_at {
  tiled_dense_view<T const> v;
  SDNN_HOST_DEVICE T operator()(std::int64_t lin) const { return v(lin / v.cols, lin % v.cols); }
};
template <class Acc>
struct nonzero_at {
  Acc acc;
  SDNN_HOST_DEVICE bool operator()(std::int64_t lin) const { return is_nonzero(acc(lin)); }
};
template <class Acc>
struct nonzero_count_at {
  Acc acc;
  SDNN_HOST_DEVICE std::int64_t operator()(std::int64_t lin) const { return is_nonzero(acc(lin)) ? 1 : 0; }
};
template <class T>
struct nonzero_flag_at {
  T const* data;
  SDNN_HOST_DEVICE std::uint8_t operator()(std::int64_t i) const { return is_nonzero(data[i]) ? 1 : 0; }
};

// row_of[k] = the row of CSR entry k (vectorised upper_bound over row_ptr[1..rows]).
template <class Index>
void expand_rows(Index const* row_ptr, Index rows, Index nnz, Index* row_of, cuda_exec exec) {
  if (nnz <= 0 || rows <= 0) return;
  thrust::upper_bound(thrust_on(exec), row_ptr + 1, row_ptr + 1 + rows, thrust::counting_iterator<Index>(0),
                      thrust::counting_iterator<Index>(nnz), row_of);
}

// out[i] = number of keys in sorted[0, n) that are < bounds[i], for i in [0, count):
// row pointers from row-sorted keys (vectorised lower_bound).
template <class Key, class BoundIt, class Out>
void lower_bounds(Key const* sorted, std::int64_t n, BoundIt bounds, std::int64_t count, Out* out, cuda_exec exec) {
  if (count <= 0) return;
  if (n <= 0) return fill_zero(out, static_cast<std::size_t>(count), exec);
  thrust::lower_bound(thrust_on(exec), sorted, sorted + n, bounds, bounds + count, out);
}

// out (zero-filled here) gets values[k] at (row_of[k], col_idx[k]).
template <class T, class Index>
void scatter_to_dense(Index const* row_of, Index const* col_idx, T const* values, Index nnz,
                      dense_matrix<T, device_space>& out, cuda_exec exec) {
  fill_zero(out.data(), out.size(), exec);
  T* o = out.data();
  std::int64_t const cols = out.cols();
  for_each_index(
      nnz, [=] __device__(std::int64_t k) { o[static_cast<std::int64_t>(row_of[k]) * cols + col_idx[k]] = values[k]; },
      exec);
}

// Recomputes occupied, tile_row_ptr and tile_col of a device tiled-dense matrix from its
// data: a segmented max over each (contiguous) tile, then a select of the occupied tile
// numbers. Synchronises exec.stream (the number of occupied tiles sizes tile_col).
template <class T>
void build_tile_index(tiled_dense_matrix<T, device_space>& r, cuda_exec exec) {
  std::int64_t const tiles = r.num_tiles(), grid_cols = r.grid_cols(), grid_rows = r.grid_rows();
  if (tiles == 0) {
    fill_zero(r.tile_row_ptr().data(), r.tile_row_ptr().size(), exec);
    r.tile_col() = device_buffer<std::int64_t>(0, exec);
    return;
  }
  auto const flags = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                                     nonzero_flag_at<T>{r.values().data()});
  auto const begins = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                                      times_op{r.tile_rows() * r.tile_cols()});
  std::uint8_t* occ = r.occupied().data();
  cub_call([&](void* t, std::size_t& b) {
    return cub::DeviceSegmentedReduce::Max(t, b, flags, occ, tiles, begins, begins + 1, exec.stream);
  }, exec);
  device_buffer<std::int64_t> lin(static_cast<std::size_t>(tiles), exec), d_count(1, exec);
  std::int64_t* l = lin.data();
  cub_call([&](void* t, std::size_t& b) {
    return cub::DeviceSelect::Flagged(t, b, thrust::counting_iterator<std::int64_t>(0), occ, l, d_count.data(), tiles,
                                      exec.stream);
  }, exec);
  std::int64_t const count = read_back(d_count.data(), exec);
  lower_bounds(l, count, thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0), times_op{grid_cols}),
               grid_rows + 1, r.tile_row_ptr().data(), exec);
  device_buffer<std::int64_t> tile_col(static_cast<std::size_t>(count), exec);
  std::int64_t* tc = tile_col.data();
  for_each_index(count, [=] __device__(std::int64_t k) { tc[k] = l[k] % grid_cols; }, exec);
  r.tile_col() = std::move(tile_col);
}

// The CSR of the nonzeros of a rows x cols matrix read through acc(row-major index):
// count (reduce), read nnz back, select the nonzero positions, then row pointers by
// binary search. Synchronises exec.stream (nnz sizes the result).
template <class Index, class T, class Acc>
csr_matrix<T, Index, device_space> csr_from_nonzeros(std::int64_t rows, std::int64_t cols, Acc acc, cuda_exec exec) {
  Index const r_rows = checked_index<Index>(rows, "rows", "to_csr"), r_cols = checked_index<Index>(cols, "cols", "to_csr");
  std::int64_t const n = rows * cols;
  std::int64_t nnz = 0;
  if (n > 0) {
    device_buffer<std::int64_t> d_nnz(1, exec);
    auto const counts = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0), nonzero_count_at<Acc>{acc});
    cub_call([&](void* t, std::size_t& b) { return cub::DeviceReduce::Sum(t, b, counts, d_nnz.data(), n, exec.stream); },
             exec);
    nnz = read_back(d_nnz.data(), exec);
  }
  csr_matrix<T, Index, device_space> r(r_rows, r_cols, checked_index<Index>(nnz, "nnz", "to_csr"), exec);
  if (nnz == 0) {
    fill_zero(r.row_ptr().data(), r.row_ptr().size(), exec);
    return r;
  }
  device_buffer<std::int64_t> sel(static_cast<std::size_t>(nnz), exec), d_count(1, exec);
  std::int64_t* s = sel.data();
  cub_call([&](void* t, std::size_t& b) {
    return cub::DeviceSelect::If(t, b, thrust::counting_iterator<std::int64_t>(0), s, d_count.data(), n,
                                 nonzero_at<Acc>{acc}, exec.stream);
  }, exec);
  lower_bounds(s, nnz, thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0), times_op{cols}),
               rows + 1, r.row_ptr().data(), exec);
  Index* ci = r.col_idx().data();
  T* v = r.values().data();
  for_each_index(
      nnz,
      [=] __device__(std::int64_t k) {
        std::int64_t const lin = s[k];
        ci[k] = static_cast<Index>(lin % cols);
        v[k] = acc(lin);
      },
      exec);
  return r;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------
// COO <-> CSR (never synchronise)

// The COO must be canonical (sorted by (row, col), as validate() checks); entry order is kept.
template <class T, class Index>
csr_matrix<T, Index, device_space> to_csr(coo_matrix<T, Index, device_space> const& a, cuda_exec exec) {
  csr_matrix<T, Index, device_space> r(a.rows(), a.cols(), a.nnz(), exec);
  detail::lower_bounds(a.row_idx().data(), a.nnz(), thrust::counting_iterator<Index>(0),
                       static_cast<std::int64_t>(a.rows()) + 1, r.row_ptr().data(), exec);
  copy(r.col_idx(), a.col_idx(), exec);
  copy(r.values(), a.values(), exec);
  return r;
}

template <class T, class Index>
coo_matrix<T, Index, device_space> to_coo(csr_matrix<T, Index, device_space> const& a, cuda_exec exec) {
  coo_matrix<T, Index, device_space> r(a.rows(), a.cols(), a.nnz(), exec);
  detail::expand_rows(a.row_ptr().data(), a.rows(), a.nnz(), r.row_idx().data(), exec);
  copy(r.col_idx(), a.col_idx(), exec);
  copy(r.values(), a.values(), exec);
  return r;
}

// ---------------------------------------------------------------------------------------
// CSR <-> ELL

// width = 0 picks the longest row; a smaller width than the longest row is an error.
// Synchronises exec.stream (reads the longest row back to size and check the result).
template <class T, class Index>
ell_matrix<T, Index, device_space> to_ell(csr_matrix<T, Index, device_space> const& a,
                                          detail::type_identity_t<Index> width, cuda_exec exec) {
  SDNN_EXPECTS(width >= 0, "to_ell: width must be >= 0 (0 = longest row), got ", width);
  Index const rows = a.rows();
  std::int64_t longest = 0;
  if (rows > 0) {
    device_buffer<std::int64_t> d_max(1, exec);
    auto const len = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                                     detail::row_length_op<Index>{a.row_ptr().data()});
    detail::cub_call([&](void* t, std::size_t& b) {
      return cub::DeviceReduce::Max(t, b, len, d_max.data(), static_cast<std::int64_t>(rows), exec.stream);
    }, exec);
    longest = detail::read_back(d_max.data(), exec);
  }
  SDNN_EXPECTS(width == 0 || width >= longest, "to_ell: requested width ", width,
               " is smaller than the longest row (", longest, " entries)");
  if (width == 0) width = static_cast<Index>(longest);
  ell_matrix<T, Index, device_space> r(rows, a.cols(), width, a.nnz(), exec);
  Index const* rp = a.row_ptr().data();
  Index const* aci = a.col_idx().data();
  T const* av = a.values().data();
  Index* ci = r.col_idx().data();
  T* v = r.values().data();
  // One thread per slot s = k * rows + i: consecutive threads write consecutive slots.
  detail::for_each_index(
      static_cast<std::int64_t>(width) * rows,
      [=] __device__(std::int64_t s) {
        Index const i = static_cast<Index>(s % rows), k = static_cast<Index>(s / rows);
        Index const b = rp[i];
        bool const stored = k < rp[i + 1] - b;
        ci[s] = stored ? aci[b + k] : ell_padding<Index>;
        v[s] = stored ? av[b + k] : value_cast<T>(0.0f);
      },
      exec);
  return r;
}
template <class T, class Index>
ell_matrix<T, Index, device_space> to_ell(csr_matrix<T, Index, device_space> const& a, cuda_exec exec) {
  return to_ell(a, Index(0), exec);
}

// Never synchronises: nnz is known from the ELL. Counts each row's stored slots (they
// precede the padding), exclusive-scans the counts into row_ptr, then copies the slots.
template <class T, class Index>
csr_matrix<T, Index, device_space> to_csr(ell_matrix<T, Index, device_space> const& a, cuda_exec exec) {
  Index const rows = a.rows(), width = a.width(), nnz = a.nnz();
  csr_matrix<T, Index, device_space> r(rows, a.cols(), nnz, exec);
  device_buffer<Index> counts(static_cast<std::size_t>(rows) + 1, exec);  // counts[rows] = 0 for the scan's total
  detail::fill_zero(counts.data(), counts.size(), exec);
  Index* cnt = counts.data();
  Index const* eci = a.col_idx().data();
  T const* ev = a.values().data();
  detail::for_each_index(
      rows,
      [=] __device__(std::int64_t i) {
        Index c = 0;
        while (c < width && eci[static_cast<std::int64_t>(c) * rows + i] != ell_padding<Index>) ++c;
        cnt[i] = c;
      },
      exec);
  Index* rp = r.row_ptr().data();
  detail::cub_call([&](void* t, std::size_t& b) {
    return cub::DeviceScan::ExclusiveSum(t, b, cnt, rp, static_cast<std::int64_t>(rows) + 1, exec.stream);
  }, exec);
  Index* ci = r.col_idx().data();
  T* v = r.values().data();
  detail::for_each_index(
      static_cast<std::int64_t>(width) * rows,
      [=] __device__(std::int64_t s) {
        Index const i = static_cast<Index>(s % rows), k = static_cast<Index>(s / rows);
        Index const dst = rp[i] + k;
        if (k < rp[i + 1] - rp[i] && dst < nnz) {  // dst < nnz guards an ELL whose nnz is wrong
          ci[dst] = eci[s];
          v[dst] = ev[s];
        }
      },
      exec);
  return r;
}

// ---------------------------------------------------------------------------------------
// CSR / COO -> dense (never synchronise)

template <class T, class Index>
dense_matrix<T, device_space> to_dense(csr_matrix<T, Index, device_space> const& a, cuda_exec exec) {
  dense_matrix<T, device_space> r(a.rows(), a.cols(), exec);
  device_buffer<Index> row_of(static_cast<std::size_t>(a.nnz()), exec);
  detail::expand_rows(a.row_ptr().data(), a.rows(), a.nnz(), row_of.data(), exec);
  detail::scatter_to_dense(row_of.data(), a.col_idx().data(), a.values().data(), a.nnz(), r, exec);
  return r;
}

template <class T, class Index>
dense_matrix<T, device_space> to_dense(coo_matrix<T, Index, device_space> const& a, cuda_exec exec) {
  dense_matrix<T, device_space> r(a.rows(), a.cols(), exec);
  detail::scatter_to_dense(a.row_idx().data(), a.col_idx().data(), a.values().data(), a.nnz(), r, exec);
  return r;
}

template <class T, class Index>
dense_matrix<T, device_space> to_dense(ell_matrix<T, Index, device_space> const& a, cuda_exec exec) {
  return to_dense(to_csr(a, exec), exec);
}

// ---------------------------------------------------------------------------------------
// dense -> CSR / COO. Synchronises exec.stream (nnz is read back to allocate).

// The view points to device memory (any ld >= cols).
template <class Index = std::int32_t, class T>
csr_matrix<std::remove_const_t<T>, Index, device_space> to_csr(dense_view<T> const& a, cuda_exec exec) {
  using V = std::remove_const_t<T>;
  return detail::csr_from_nonzeros<Index, V>(a.rows, a.cols, detail::dense_at<V>{a.data, a.cols, a.ld}, exec);
}
template <class Index = std::int32_t, class T>
csr_matrix<T, Index, device_space> to_csr(dense_matrix<T, device_space> const& a, cuda_exec exec) {
  return to_csr<Index>(a.view(), exec);
}
template <class Index = std::int32_t, class T>
coo_matrix<T, Index, device_space> to_coo(dense_matrix<T, device_space> const& a, cuda_exec exec) {
  return to_coo(to_csr<Index>(a, exec), exec);
}

// ---------------------------------------------------------------------------------------
// CSR / dense <-> tiled dense

// Synchronises exec.stream (the number of occupied tiles sizes tile_col).
template <class T, class Index>
tiled_dense_matrix<T, device_space> to_tiled_dense(csr_matrix<T, Index, device_space> const& a,
                                                   std::int64_t tile_rows, std::int64_t tile_cols, cuda_exec exec) {
  tiled_dense_matrix<T, device_space> r(a.rows(), a.cols(), tile_rows, tile_cols, exec);
  detail::fill_zero(r.values().data(), r.values().size(), exec);  // padding and absent entries
  device_buffer<Index> row_of(static_cast<std::size_t>(a.nnz()), exec);
  detail::expand_rows(a.row_ptr().data(), a.rows(), a.nnz(), row_of.data(), exec);
  auto const tv = r.view();
  Index const* ro = row_of.data();
  Index const* ci = a.col_idx().data();
  T const* v = a.values().data();
  detail::for_each_index(a.nnz(), [=] __device__(std::int64_t k) { tv(ro[k], ci[k]) = v[k]; }, exec);
  detail::build_tile_index(r, exec);
  return r;
}
// Synchronises exec.stream (see above).
template <class T, class Index>
tiled_dense_matrix<T, device_space> to_tiled_dense(csr_matrix<T, Index, device_space> const& a, cuda_exec exec) {
  return to_tiled_dense(a, 32, 32, exec);
}

// Synchronises exec.stream (the number of occupied tiles sizes tile_col).
template <class T>
tiled_dense_matrix<T, device_space> to_tiled_dense(dense_matrix<T, device_space> const& a, std::int64_t tile_rows,
                                                   std::int64_t tile_cols, cuda_exec exec) {
  tiled_dense_matrix<T, device_space> r(a.rows(), a.cols(), tile_rows, tile_cols, exec);
  detail::fill_zero(r.values().data(), r.values().size(), exec);
  auto const tv = r.view();
  T const* d = a.data();
  std::int64_t const cols = a.cols();
  detail::for_each_index(a.rows() * cols, [=] __device__(std::int64_t lin) { tv(lin / cols, lin % cols) = d[lin]; },
                         exec);
  detail::build_tile_index(r, exec);
  return r;
}
// Synchronises exec.stream (see above).
template <class T>
tiled_dense_matrix<T, device_space> to_tiled_dense(dense_matrix<T, device_space> const& a, cuda_exec exec) {
  return to_tiled_dense(a, 32, 32, exec);
}

// Never synchronises.
template <class T>
dense_matrix<T, device_space> to_dense(tiled_dense_matrix<T, device_space> const& a, cuda_exec exec) {
  dense_matrix<T, device_space> r(a.rows(), a.cols(), exec);
  auto const tv = a.view();
  T* o = r.data();
  std::int64_t const cols = a.cols();
  detail::for_each_index(a.rows() * cols, [=] __device__(std::int64_t lin) { o[lin] = tv(lin / cols, lin % cols); },
                         exec);
  return r;
}

// Synchronises exec.stream (nnz is read back to allocate).
template <class Index = std::int32_t, class T>
csr_matrix<T, Index, device_space> to_csr(tiled_dense_matrix<T, device_space> const& a, cuda_exec exec) {
  return detail::csr_from_nonzeros<Index, T>(a.rows(), a.cols(), detail::tiled_at<T>{a.view()}, exec);
}

// ---------------------------------------------------------------------------------------
// Transpose: the CSR of A^T (the CSC of A). Never synchronises. A stable radix sort of
// the entries by column keeps rows increasing within each column; row pointers of the
// result come from a vectorised lower_bound over the sorted columns. `a` is a view of a
// device CSR (its arrays must stay valid until the enqueued work has read them).
template <class T, class Index>
csr_matrix<T, Index, device_space> transpose(csr_view<T, Index> a, cuda_exec exec) {
  Index const nnz = a.nnz;
  csr_matrix<T, Index, device_space> r(a.cols, a.rows, nnz, exec);
  if (nnz == 0) {
    detail::fill_zero(r.row_ptr().data(), r.row_ptr().size(), exec);
    return r;
  }
  auto const n = static_cast<std::size_t>(nnz);
  device_buffer<Index> row_of(n, exec), perm_in(n, exec), perm_out(n, exec), cols_sorted(n, exec);
  detail::expand_rows(a.row_ptr, a.rows, nnz, row_of.data(), exec);
  thrust::sequence(detail::thrust_on(exec), perm_in.data(), perm_in.data() + nnz);
  detail::cub_call([&](void* t, std::size_t& b) {
    return cub::DeviceRadixSort::SortPairs(t, b, a.col_idx, cols_sorted.data(), perm_in.data(), perm_out.data(),
                                           nnz, 0, static_cast<int>(sizeof(Index) * 8), exec.stream);
  }, exec);
  detail::lower_bounds(cols_sorted.data(), nnz, thrust::counting_iterator<Index>(0),
                       static_cast<std::int64_t>(a.cols) + 1, r.row_ptr().data(), exec);
  Index const* p = perm_out.data();
  Index const* ro = row_of.data();
  T const* av = a.values;
  Index* ci = r.col_idx().data();
  T* v = r.values().data();
  detail::for_each_index(
      nnz,
      [=] __device__(std::int64_t k) {
        Index const src = p[k];
        ci[k] = ro[src];
        v[k] = av[src];
      },
      exec);
  return r;
}
template <class T, class Index>
csr_matrix<T, Index, device_space> transpose(csr_matrix<T, Index, device_space> const& a, cuda_exec exec) {
  return transpose(a.view(), exec);
}

}  // namespace sdnn
