// sdnn/formats/copy.cuh - moving matrices between host and device, and device validate(), for
// csr_matrix, coo_matrix, ell_matrix, tiled_dense_matrix and dense_matrix:
//   to_device(host_matrix, cuda_exec)   enqueued on exec.stream; returns once the host source has
//                                       been read (pageable memory is staged by CUDA before
//                                       cudaMemcpyAsync returns), so the source may be destroyed;
//   to_host(device_matrix, cuda_exec)   SYNCHRONISES exec.stream: the result is readable on return;
//   validate(device_matrix, cuda_exec)  copies to the host and validates there (SYNCHRONISES); for
//                                       tests and debugging, not the inference path;
//   detail::bind_record(device_matrix, record)  binds its buffers to an owner's stream record.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/formats/coo.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/formats/ell.hpp"
#include "sdnn/formats/tiled_dense.hpp"

namespace sdnn {

namespace detail {
inline void sync_stream(cuda_exec exec) { SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream)); }

// A host-space buffer holding a copy of a device buffer (pageable: the copy completes
// before return, after the work already queued on exec.stream).
template <class T>
buffer<T, host_space> to_host_buffer(buffer<T, device_space> const& d, cuda_exec exec) {
  buffer<T, host_space> h(d.size());
  copy(h, d, exec);
  return h;
}

// Binds a device container's buffers to an owner's stream record (detail::run_streams::record(),
// core/plan.cuh), as if allocated through run_streams::owned(): e.g. a matrix a plan takes over.
template <class T, class Index>
void bind_record(csr_matrix<T, Index, device_space>& m, std::shared_ptr<stream_use> const& r) noexcept {
  m.row_ptr().bind(r), m.col_idx().bind(r), m.values().bind(r);
}
template <class T, class Index>
void bind_record(coo_matrix<T, Index, device_space>& m, std::shared_ptr<stream_use> const& r) noexcept {
  m.row_idx().bind(r), m.col_idx().bind(r), m.values().bind(r);
}
template <class T, class Index>
void bind_record(ell_matrix<T, Index, device_space>& m, std::shared_ptr<stream_use> const& r) noexcept {
  m.col_idx().bind(r), m.values().bind(r);
}
template <class T>
void bind_record(tiled_dense_matrix<T, device_space>& m, std::shared_ptr<stream_use> const& r) noexcept {
  m.values().bind(r), m.occupied().bind(r), m.tile_row_ptr().bind(r), m.tile_col().bind(r);
}
template <class T>
void bind_record(dense_matrix<T, device_space>& m, std::shared_ptr<stream_use> const& r) noexcept {
  m.values().bind(r);
}
}  // namespace detail

// ---------------------------------------------------------------------------------------
// CSR

template <class T, class Index>
csr_matrix<T, Index, device_space> to_device(csr_matrix<T, Index, host_space> const& a, cuda_exec exec) {
  csr_matrix<T, Index, device_space> d(a.rows(), a.cols(), a.nnz(), exec);
  copy(d.row_ptr(), a.row_ptr(), exec);
  copy(d.col_idx(), a.col_idx(), exec);
  copy(d.values(), a.values(), exec);
  return d;
}
// Synchronises exec.stream.
template <class T, class Index>
csr_matrix<T, Index> to_host(csr_matrix<T, Index, device_space> const& d, cuda_exec exec) {
  csr_matrix<T, Index> h(d.rows(), d.cols(), d.nnz());
  copy(h.row_ptr(), d.row_ptr(), exec);
  copy(h.col_idx(), d.col_idx(), exec);
  copy(h.values(), d.values(), exec);
  detail::sync_stream(exec);
  return h;
}

// ---------------------------------------------------------------------------------------
// COO

template <class T, class Index>
coo_matrix<T, Index, device_space> to_device(coo_matrix<T, Index, host_space> const& a, cuda_exec exec) {
  coo_matrix<T, Index, device_space> d(a.rows(), a.cols(), a.nnz(), exec);
  copy(d.row_idx(), a.row_idx(), exec);
  copy(d.col_idx(), a.col_idx(), exec);
  copy(d.values(), a.values(), exec);
  return d;
}
// Synchronises exec.stream.
template <class T, class Index>
coo_matrix<T, Index> to_host(coo_matrix<T, Index, device_space> const& d, cuda_exec exec) {
  coo_matrix<T, Index> h(d.rows(), d.cols(), d.nnz());
  copy(h.row_idx(), d.row_idx(), exec);
  copy(h.col_idx(), d.col_idx(), exec);
  copy(h.values(), d.values(), exec);
  detail::sync_stream(exec);
  return h;
}

// ---------------------------------------------------------------------------------------
// ELL

template <class T, class Index>
ell_matrix<T, Index, device_space> to_device(ell_matrix<T, Index, host_space> const& a, cuda_exec exec) {
  ell_matrix<T, Index, device_space> d(a.rows(), a.cols(), a.width(), a.nnz(), exec);
  copy(d.col_idx(), a.col_idx(), exec);
  copy(d.values(), a.values(), exec);
  return d;
}
// Synchronises exec.stream.
template <class T, class Index>
ell_matrix<T, Index> to_host(ell_matrix<T, Index, device_space> const& d, cuda_exec exec) {
  ell_matrix<T, Index> h(d.rows(), d.cols(), d.width(), d.nnz());
  copy(h.col_idx(), d.col_idx(), exec);
  copy(h.values(), d.values(), exec);
  detail::sync_stream(exec);
  return h;
}

// ---------------------------------------------------------------------------------------
// Tiled dense

template <class T>
tiled_dense_matrix<T, device_space> to_device(tiled_dense_matrix<T, host_space> const& a, cuda_exec exec) {
  tiled_dense_matrix<T, device_space> d(a.rows(), a.cols(), a.tile_rows(), a.tile_cols(), exec);
  copy(d.values(), a.values(), exec);
  copy(d.occupied(), a.occupied(), exec);
  copy(d.tile_row_ptr(), a.tile_row_ptr(), exec);
  d.tile_col() = copy_to<device_space>(a.tile_col(), exec);
  return d;
}
// Synchronises exec.stream.
template <class T>
tiled_dense_matrix<T> to_host(tiled_dense_matrix<T, device_space> const& d, cuda_exec exec) {
  tiled_dense_matrix<T> h(d.rows(), d.cols(), d.tile_rows(), d.tile_cols());
  copy(h.values(), d.values(), exec);
  copy(h.occupied(), d.occupied(), exec);
  copy(h.tile_row_ptr(), d.tile_row_ptr(), exec);
  h.tile_col() = detail::to_host_buffer(d.tile_col(), exec);
  detail::sync_stream(exec);
  return h;
}

// ---------------------------------------------------------------------------------------
// Dense

template <class T>
dense_matrix<T, device_space> to_device(dense_matrix<T, host_space> const& a, cuda_exec exec) {
  dense_matrix<T, device_space> d(a.rows(), a.cols(), exec);
  copy(d.values(), a.values(), exec);
  return d;
}
// Synchronises exec.stream.
template <class T>
dense_matrix<T> to_host(dense_matrix<T, device_space> const& d, cuda_exec exec) {
  dense_matrix<T> h(d.rows(), d.cols());
  copy(h.values(), d.values(), exec);
  detail::sync_stream(exec);
  return h;
}

// ---------------------------------------------------------------------------------------
// Device validate(): copy to the host and validate there. Synchronises exec.stream.
// Sizes are those of the device buffers, so size mismatches are caught too.

template <class T, class Index>
void validate(csr_matrix<T, Index, device_space> const& d, cuda_exec exec) {
  auto rp = detail::to_host_buffer(d.row_ptr(), exec);
  auto ci = detail::to_host_buffer(d.col_idx(), exec);
  auto v = detail::to_host_buffer(d.values(), exec);
  detail::sync_stream(exec);
  SDNN_EXPECTS(!rp.empty(), "csr: row_ptr must have rows + 1 = ", static_cast<std::int64_t>(d.rows()) + 1,
               " entries, got 0");
  validate(csr_view<T, Index>{d.rows(), d.cols(), d.nnz(), rp.data(), ci.data(), v.data()}, rp.size(), ci.size(),
           v.size());
}

template <class T, class Index>
void validate(coo_matrix<T, Index, device_space> const& d, cuda_exec exec) {
  auto ri = detail::to_host_buffer(d.row_idx(), exec);
  auto ci = detail::to_host_buffer(d.col_idx(), exec);
  auto v = detail::to_host_buffer(d.values(), exec);
  detail::sync_stream(exec);
  validate(coo_view<T, Index>{d.rows(), d.cols(), d.nnz(), ri.data(), ci.data(), v.data()}, ri.size(), ci.size(),
           v.size());
}

template <class T, class Index>
void validate(ell_matrix<T, Index, device_space> const& d, cuda_exec exec) {
  auto ci = detail::to_host_buffer(d.col_idx(), exec);
  auto v = detail::to_host_buffer(d.values(), exec);
  detail::sync_stream(exec);
  validate(ell_view<T, Index>{d.rows(), d.cols(), d.width(), d.nnz(), ci.data(), v.data()}, ci.size(), v.size());
}

template <class T>
void validate(tiled_dense_matrix<T, device_space> const& d, cuda_exec exec) {
  auto data = detail::to_host_buffer(d.values(), exec);
  auto occ = detail::to_host_buffer(d.occupied(), exec);
  auto trp = detail::to_host_buffer(d.tile_row_ptr(), exec);
  auto tc = detail::to_host_buffer(d.tile_col(), exec);
  detail::sync_stream(exec);
  SDNN_EXPECTS(!trp.empty(), "tiled_dense: tile_row_ptr must have grid_rows + 1 = ", d.grid_rows() + 1,
               " entries, got 0");
  auto v = d.view();
  tiled_dense_view<T const> h{v.rows,           v.cols,      v.tile_rows, v.tile_cols, v.grid_rows, v.grid_cols,
                              v.occupied_tiles, data.data(), occ.data(),  trp.data(),  tc.data()};
  validate<T>(h, data.size(), occ.size(), trp.size(), tc.size());
}

}  // namespace sdnn
