// sdnn/formats/stats.cuh - matrix_stats of a device CSR, through CUB reductions.
//
// compute_stats(csr, [tile_rows, tile_cols,] cuda_exec) reduces the same integers as the
// host version (min / max / sum of squares of the row lengths, empty rows, occupied
// tiles) and finishes with the same host code, so it returns exactly the host result.
// Synchronises exec.stream: the statistics are returned by value to the host (one
// read-back of all five integers at the end).
#pragma once

#include <cuda_runtime.h>

#include <cub/device/device_reduce.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cstdint>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/formats/convert.cuh"
#include "sdnn/formats/stats.hpp"

namespace sdnn {

template <class T, class Index>
matrix_stats compute_stats(csr_matrix<T, Index, device_space> const& a, std::int64_t tile_rows,
                           std::int64_t tile_cols, cuda_exec exec) {
  detail::check_tile_shape(tile_rows, tile_cols);
  std::int64_t const rows = a.rows(), cols = a.cols();
  // The tile marks below are a byte per tile: the tile grid must be addressable (checked before
  // any work is enqueued; the host version needs no such bound).
  std::int64_t const grid_cols = detail::ceil_div(cols, tile_cols);
  std::int64_t const tiles =
      a.nnz() > 0 ? static_cast<std::int64_t>(detail::checked_extent(detail::ceil_div(rows, tile_rows), grid_cols,
                                                                      "compute_stats(device): tile marks"))
                  : 0;
  // [min row nnz, max row nnz, sum of squared row nnz, empty rows, occupied tiles]
  device_buffer<std::int64_t> out(5, exec);
  detail::fill_zero(out.data(), out.size(), exec);
  std::int64_t* o = out.data();
  Index const* rp = a.row_ptr().data();
  if (rows > 0) {
    auto const it = thrust::counting_iterator<std::int64_t>(0);
    auto const len = thrust::make_transform_iterator(it, detail::row_length_op<Index>{rp});
    auto const sq = thrust::make_transform_iterator(it, detail::row_length_sq_op<Index>{rp});
    auto const empty = thrust::make_transform_iterator(it, detail::row_empty_op<Index>{rp});
    detail::cub_call([&](void* t, std::size_t& b) { return cub::DeviceReduce::Min(t, b, len, o + 0, rows, exec.stream); },
                     exec);
    detail::cub_call([&](void* t, std::size_t& b) { return cub::DeviceReduce::Max(t, b, len, o + 1, rows, exec.stream); },
                     exec);
    detail::cub_call([&](void* t, std::size_t& b) { return cub::DeviceReduce::Sum(t, b, sq, o + 2, rows, exec.stream); },
                     exec);
    detail::cub_call([&](void* t, std::size_t& b) { return cub::DeviceReduce::Sum(t, b, empty, o + 3, rows, exec.stream); },
                     exec);
  }
  if (a.nnz() > 0 && tiles > 0) {
    // Mark each tile holding an entry (concurrent writes all store 1), then count marks.
    device_buffer<std::uint8_t> seen(static_cast<std::size_t>(tiles), exec);
    detail::fill_zero(seen.data(), seen.size(), exec);
    device_buffer<Index> row_of(static_cast<std::size_t>(a.nnz()), exec);
    detail::expand_rows(rp, a.rows(), a.nnz(), row_of.data(), exec);
    std::uint8_t* s = seen.data();
    Index const* ro = row_of.data();
    Index const* ci = a.col_idx().data();
    detail::for_each_index(
        a.nnz(),
        [=] __device__(std::int64_t k) {
          s[(static_cast<std::int64_t>(ro[k]) / tile_rows) * grid_cols + ci[k] / tile_cols] = 1;
        },
        exec);
    auto const marks = thrust::make_transform_iterator(s, detail::widen_op{});
    detail::cub_call([&](void* t, std::size_t& b) { return cub::DeviceReduce::Sum(t, b, marks, o + 4, tiles, exec.stream); },
                     exec);
  }
  std::int64_t h[5] = {};
  SDNN_CUDA_CHECK(cudaMemcpyAsync(h, o, sizeof h, cudaMemcpyDeviceToHost, exec.stream));
  detail::sync_stream(exec);
  return detail::finish_stats(rows, cols, a.nnz(), h[0], h[1], h[2], h[3], tile_rows, tile_cols, h[4]);
}

// 32 x 32 tiles. Synchronises exec.stream.
template <class T, class Index>
matrix_stats compute_stats(csr_matrix<T, Index, device_space> const& a, cuda_exec exec) {
  return compute_stats(a, 32, 32, exec);
}

}  // namespace sdnn
