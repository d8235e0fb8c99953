// sdnn/pipeline/weight_store.cuh - the device part of the out-of-core weights: weight_store packs
// every layer once into pinned host memory and streams it, per batch, through a ring of K device
// slots on a copy stream, overlapped with the products (docs/foundation.md#the-weight-store).
// Only the dense x sparse policies with sdnn's own kernels stream (streams_weights_v); the
// cuSPARSE baselines keep vendor descriptors on a resident W^T and are refused by the constructor.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/formats/convert.hpp"
#include "sdnn/formats/csc_tiles.hpp"
#include "sdnn/linear/kernel/spmm_dense_csc.cuh"
#include "sdnn/linear/op/dense_sparse.cuh"
#include "sdnn/pipeline/weight_store.hpp"

namespace sdnn::pipeline {

// Whether policy P can run from streamed weights (its product is one of sdnn's CSC kernels:
// csc_gather, csc_tiled, and skip_empty_rows of either).
template <class P>
inline constexpr bool streams_weights_v =
    ops::detail::is_csc_gather_v<typename ops::detail::unwrap_skip<P>::type> ||
    ops::detail::is_csc_tiled_v<typename ops::detail::unwrap_skip<P>::type>;

// One pass over the layers (the host arrays are not needed after the constructor):
//   pipeline::weight_store<Policy, T> ws(weights, biases);  // packs pinned blocks (host threads)
//   ws.allocate(slots, exec);   // K device slots of the largest block, copy stream, events
//   ws.begin_pass(exec);        // uploads of layers 0 .. K-2 start on the copy stream
//   for l: ws.forward_rows(l, exec, in, out, epi, rows, flags);  // waits "loaded", runs, records
//                                                                // "free", uploads l + K - 1
//   ws.end_pass(exec);          // the compute stream joins the copy stream
template <class Policy, class T>
class weight_store {
  using inner = typename ops::detail::unwrap_skip<Policy>::type;
  static constexpr bool tiled = ops::detail::is_csc_tiled_v<inner>;
  static constexpr int tile_threads() {
    if constexpr (tiled) return inner::threads;
    else return 0;
  }
  static constexpr int tile_footprint() {
    if constexpr (tiled) return inner::max_footprint;
    else return 0;
  }

 public:
  using acc_type = accumulator_t<T>;

  // The packed form of one layer (host block + where each array sits in it).
  struct packed {
    pinned_buffer<unsigned char> block;
    std::size_t bytes = 0;
    bool tiles_ok = false;
    std::int32_t n = 0, k = 0, tiles = 0, max_footprint = 0;
    std::int64_t nnz = 0, fp_n = 0, cols_n = 0;
    std::size_t off_bias = 0, off[7] = {};  // tiles: fp_ptr fp col_ptr cols nnz_ptr lidx vals; csr: row_ptr col vals
    bool has_bias = false;
  };

  // Packs W_l (k x n, host CSR) and bias_l (n accumulator values or nullptr) into pinned host
  // blocks, on up to 16 host threads; the host arrays are not used after this returns. Throws
  // sdnn::error when pinning fails (naming the layer and the bytes) or the policy cannot stream.
  // allocate() then makes the device ring.
  weight_store(std::vector<csr_view<T, std::int32_t>> const& weights, std::vector<acc_type const*> const& biases)
      : layers_(weights.size()) {
    if constexpr (!streams_weights_v<Policy>) {
      SDNN_FAIL("weight_store: policy ", policy::name<Policy>(),
                " cannot stream its weights (the cuSPARSE baselines keep vendor descriptors on resident W^T); "
                "streamed weights run with csc_gather, csc_tiled and skip_empty_rows of them");
    } else {
      SDNN_EXPECTS(!weights.empty() && biases.size() == weights.size(),
                   "weight_store: needs one bias pointer (or nullptr) per layer, got ", biases.size(), " for ",
                   weights.size(), " layers");
      std::atomic<std::size_t> next{0};
      std::exception_ptr failed;
      std::mutex mu;
      auto work = [&] {
        for (std::size_t l = next++; l < layers_.size(); l = next++) {
          try {
            pack(l, weights[l], biases[l]);
          } catch (...) {
            std::lock_guard<std::mutex> lock(mu);
            if (!failed) failed = std::current_exception();
            next = layers_.size();
          }
        }
      };
      unsigned const workers = static_cast<unsigned>(
          std::max<std::size_t>(1, std::min<std::size_t>({16u, layers_.size(), std::thread::hardware_concurrency()})));
      std::vector<std::thread> pool;
      for (unsigned t = 1; t < workers; ++t) pool.emplace_back(work);
      work();
      for (auto& t : pool) t.join();
      if (failed) std::rethrow_exception(failed);
    }
  }
  // The packed size of every layer (what one upload moves).
  std::vector<std::uint64_t> layer_sizes() const {
    std::vector<std::uint64_t> sizes;
    for (auto const& p : layers_) sizes.push_back(p.bytes);
    return sizes;
  }
  // Makes `slots` (>= 2) device slots of the largest block (stream-ordered on exec.stream), the
  // copy stream and the events.
  void allocate(int slots, cuda_exec exec) {
    SDNN_EXPECTS(slot_.empty(), "weight_store: allocate() was already called");
    init_device(layer_sizes(), slots, exec);
  }

  weight_store(weight_store const&) = delete;
  weight_store& operator=(weight_store const&) = delete;
  ~weight_store() {
    // Nothing may still write a slot when it is freed (slots are freed on the compute stream).
    if (copy_) sdnn::detail::cuda_check_noexcept(cudaStreamSynchronize(copy_), "cudaStreamSynchronize");
    for (auto e : loaded_) destroy(e);
    for (auto e : free_) destroy(e);
    for (auto e : t_begin_) destroy(e);
    for (auto e : t_end_) destroy(e);
    destroy(fork_);
    destroy(join_);
    if (copy_) sdnn::detail::cuda_check_noexcept(cudaStreamDestroy(copy_), "cudaStreamDestroy");
  }

  std::size_t depth() const noexcept { return layers_.size(); }
  int slots() const noexcept { return static_cast<int>(slot_.size()); }
  std::uint64_t slot_bytes() const noexcept { return slot_bytes_; }
  std::uint64_t layer_bytes(std::size_t l) const { return layers_.at(l).bytes; }
  std::uint64_t pinned_bytes() const noexcept {
    std::uint64_t s = 0;
    for (auto const& p : layers_) s += p.bytes;
    return s;
  }

  // Starts a pass over the layers 0 .. depth()-1 on exec.stream: the copy stream joins after the
  // work already on exec.stream, and the uploads of the first K - 1 layers are enqueued.
  void begin_pass(cuda_exec exec) {
    runs_.note(exec);
    SDNN_CUDA_CHECK(cudaEventRecord(fork_, exec.stream));
    SDNN_CUDA_CHECK(cudaStreamWaitEvent(copy_, fork_, 0));
    next_upload_ = 0;
    for (std::size_t l = 0; l + 1 < slot_.size() && l < layers_.size(); ++l) upload(l);
  }

  // out[r] = epi(in[r] * W_l) for the listed rows (as ops::dense_sparse_plan::run_rows), from
  // the slot of layer l. epi: the layer's epilogue; its bias pointer is replaced by the
  // streamed one. Layers must come in order 0, 1, ... within a pass.
  template <class Acc>
  void forward_rows(std::size_t l, cuda_exec exec, dense_view<T const> in, dense_view<T> out, basic_epilogue<Acc> epi,
                    ops::listed_rows rows, int* flags) {
    SDNN_EXPECTS(l < layers_.size(), "weight_store: layer ", l, " of ", layers_.size());
    SDNN_EXPECTS(!slot_.empty(), "weight_store: call allocate() before running");
    SDNN_EXPECTS_DIMS(out.rows >= in.rows, "weight_store: out has ", out.rows, " rows, fewer than the ", in.rows,
                      " rows of in (a listed row indexes both)");
    runs_.note(exec);
    // the upload of layer l + K - 1 goes into the slot layer l - 1 used (its "free" is recorded)
    while (next_upload_ < layers_.size() && next_upload_ < l + slot_.size()) upload(next_upload_);
    std::size_t const s = l % slot_.size();
    SDNN_CUDA_CHECK(cudaStreamWaitEvent(exec.stream, loaded_[s], 0));
    auto const& p = layers_[l];
    unsigned char const* base = slot_[s].data();
    (void)epi;  // unused for the policies that cannot stream (the constructor refused them)
    (void)base;
    SDNN_EXPECTS_DIMS(in.cols == p.k && out.cols == p.n, "weight_store: layer ", l, " is ", p.k, " -> ", p.n,
                      ", got ", in.cols, " -> ", out.cols);
    if constexpr (streams_weights_v<Policy>) {
      epi.bias = p.has_bias ? reinterpret_cast<Acc const*>(base + p.off_bias) : nullptr;
      bool done = rows.max_live <= 0 || p.n == 0;
      if constexpr (tiled) {
        if (!done && p.tiles_ok) {
          csc_tiles_view<T> tv{p.n,
                               p.k,
                               p.tiles,
                               p.max_footprint,
                               reinterpret_cast<std::int32_t const*>(base + p.off[0]),
                               reinterpret_cast<std::int32_t const*>(base + p.off[1]),
                               reinterpret_cast<std::int32_t const*>(base + p.off[2]),
                               reinterpret_cast<std::int32_t const*>(base + p.off[3]),
                               reinterpret_cast<std::int32_t const*>(base + p.off[4]),
                               reinterpret_cast<std::uint16_t const*>(base + p.off[5]),
                               reinterpret_cast<T const*>(base + p.off[6])};
          kernels::tiled_csc_spmm<inner::rows, inner::threads>(in, tv, out, epi, rows.list, rows.count, rows.max_live,
                                                               flags, exec);
          done = true;
        }
      }
      if (!done) {  // W^T as CSR: csc_gather, or csc_tiled whose tiles were refused (as the resident plan)
        csr_view<T, std::int32_t> wt{p.n, p.k, static_cast<std::int32_t>(p.nnz),
                                     reinterpret_cast<std::int32_t const*>(base + p.off[0]),
                                     reinterpret_cast<std::int32_t const*>(base + p.off[1]),
                                     reinterpret_cast<T const*>(base + p.off[2])};
        kernels::dense_csc_spmm_flagged<inner::rows, inner::threads>(in, wt, out, epi, rows.list, rows.count,
                                                                    rows.max_live, flags, exec);
      }
    }
    SDNN_CUDA_CHECK(cudaEventRecord(free_[s], exec.stream));
  }

  // Ends the pass: exec.stream waits for the copy stream (so synchronising exec.stream also
  // covers the uploads, and the next pass starts from a quiet copy stream).
  void end_pass(cuda_exec exec) {
    runs_.note(exec);
    while (next_upload_ < layers_.size()) upload(next_upload_);  // a pass that skipped layers
    SDNN_CUDA_CHECK(cudaEventRecord(join_, copy_));
    SDNN_CUDA_CHECK(cudaStreamWaitEvent(exec.stream, join_, 0));
  }

  // Bytes and upload count since the last reset_stats(); copy_seconds reads the uploads' timing
  // events, so call it after the stream was synchronised (it synchronises the copy stream).
  void reset_stats() {
    bytes_ = 0;
    uploads_ = 0;
    copy_ms_ = 0;
    pending_.clear();
  }
  std::uint64_t bytes() const noexcept { return bytes_; }
  std::int64_t uploads() const noexcept { return uploads_; }
  double copy_seconds() {
    SDNN_CUDA_CHECK(cudaStreamSynchronize(copy_));
    for (auto l : pending_) {
      float ms = 0;
      SDNN_CUDA_CHECK(cudaEventElapsedTime(&ms, t_begin_[l], t_end_[l]));
      copy_ms_ += ms;
    }
    pending_.clear();
    return copy_ms_ / 1e3;
  }

  // For tests: the upload of this layer is made to fail (cudaMemcpyAsync into a null slot, which
  // the runtime refuses at once); -1 = none. The failure surfaces as sdnn::cuda_error from the
  // call that enqueues it, never as a hang.
  void fail_upload_of(std::int64_t layer) noexcept { fail_layer_ = layer; }

 private:
  static void destroy(cudaEvent_t e) noexcept {
    if (e) sdnn::detail::cuda_check_noexcept(cudaEventDestroy(e), "cudaEventDestroy");
  }
  static std::size_t align(std::size_t x) { return (x + 255) & ~std::size_t{255}; }

  void pack(std::size_t l, csr_view<T, std::int32_t> w, acc_type const* bias) {
    auto& p = layers_[l];
    csr_matrix<T, std::int32_t> wm(w.rows, w.cols, w.nnz);
    std::copy(w.row_ptr, w.row_ptr + w.rows + 1, wm.row_ptr().begin());
    std::copy(w.col_idx, w.col_idx + w.nnz, wm.col_idx().begin());
    std::copy(w.values, w.values + w.nnz, wm.values().begin());
    auto wt = transpose(wm);  // n x k
    p.n = static_cast<std::int32_t>(w.cols);
    p.k = static_cast<std::int32_t>(w.rows);
    p.nnz = wt.nnz();
    p.has_bias = bias != nullptr;
    std::size_t at = 0;
    p.off_bias = at;
    if (bias) at = align(at + static_cast<std::size_t>(p.n) * sizeof(acc_type));
    csc_tiles_host<T> th;
    if constexpr (tiled) p.tiles_ok = build_csc_tiles(wt.view(), tile_threads(), tile_footprint(), th);
    struct part {
      void const* src;
      std::size_t bytes;
    };
    std::vector<part> parts;
    auto add = [&](auto const& v) {
      parts.push_back({v.data(), v.size() * sizeof(v[0])});
    };
    if (p.tiles_ok) {
      p.tiles = th.tiles;
      p.max_footprint = th.max_footprint;
      add(th.fp_ptr);
      add(th.fp);
      add(th.col_ptr);
      add(th.cols);
      add(th.nnz_ptr);
      add(th.lidx);
      add(th.vals);
    } else {
      parts.push_back({wt.row_ptr().data(), static_cast<std::size_t>(p.n + 1) * sizeof(std::int32_t)});
      parts.push_back({wt.col_idx().data(), static_cast<std::size_t>(p.nnz) * sizeof(std::int32_t)});
      parts.push_back({wt.values().data(), static_cast<std::size_t>(p.nnz) * sizeof(T)});
    }
    for (std::size_t i = 0; i < parts.size(); ++i) {
      p.off[i] = at;
      at = align(at + parts[i].bytes);
    }
    p.bytes = std::max<std::size_t>(at, 256);
    try {
      p.block = pinned_buffer<unsigned char>(p.bytes);
    } catch (std::exception const& e) {
      cudaGetLastError();
      SDNN_FAIL("weight_store: pinning ", format_bytes(p.bytes), " of host memory for layer ", l + 1,
                " failed (cudaHostAlloc: ", e.what(),
                "); the streamed network needs its packed layers in pinned host memory: free host memory, "
                "raise the locked-memory limit, or keep the weights on the device");
    }
    unsigned char* dst = p.block.data();
    if (bias) std::memcpy(dst + p.off_bias, bias, static_cast<std::size_t>(p.n) * sizeof(acc_type));
    for (std::size_t i = 0; i < parts.size(); ++i)
      if (parts[i].bytes) std::memcpy(dst + p.off[i], parts[i].src, parts[i].bytes);
  }

  void init_device(std::vector<std::uint64_t> const& sizes, int slots, cuda_exec exec) {
    SDNN_EXPECTS(slots >= 2, "weight_store: a streamed ring needs at least 2 slots, asked for ", slots);
    slot_bytes_ = *std::max_element(sizes.begin(), sizes.end());
    for (int s = 0; s < slots; ++s) slot_.emplace_back(static_cast<std::size_t>(slot_bytes_), runs_.owned(exec));
    SDNN_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    auto make = [](cudaEvent_t& e, bool timing) {
      SDNN_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
    };
    loaded_.assign(static_cast<std::size_t>(slots), nullptr);
    free_.assign(static_cast<std::size_t>(slots), nullptr);
    for (auto& e : loaded_) make(e, false);
    for (auto& e : free_) make(e, false);
    t_begin_.assign(layers_.size(), nullptr);
    t_end_.assign(layers_.size(), nullptr);
    for (auto& e : t_begin_) make(e, true);
    for (auto& e : t_end_) make(e, true);
    make(fork_, false);
    make(join_, false);
    // the slots were allocated on exec.stream: the copy stream must not write them earlier
    SDNN_CUDA_CHECK(cudaEventRecord(fork_, exec.stream));
    SDNN_CUDA_CHECK(cudaStreamWaitEvent(copy_, fork_, 0));
  }

  void upload(std::size_t l) {
    std::size_t const s = l % slot_.size();
    auto const& p = layers_[l];
    SDNN_EXPECTS(p.bytes <= slot_bytes_, "weight_store: layer ", l, " (", p.bytes, " bytes) exceeds a slot (",
                 slot_bytes_, " bytes)");
    SDNN_CUDA_CHECK(cudaStreamWaitEvent(copy_, free_[s], 0));  // the layer that used slot s last has run
    SDNN_CUDA_CHECK(cudaEventRecord(t_begin_[l], copy_));
    void* dst = static_cast<std::int64_t>(l) == fail_layer_ ? nullptr : static_cast<void*>(slot_[s].data());
    cudaError_t const st = cudaMemcpyAsync(dst, p.block.data(), p.bytes, cudaMemcpyHostToDevice, copy_);
    if (st != cudaSuccess) {
      cudaGetLastError();
      throw cuda_error(sdnn::detail::concat("cudaMemcpyAsync (weight_store: upload of layer ", l + 1, ", ",
                                            format_bytes(p.bytes), ", into slot ", s, ")"),
                       static_cast<int>(st), cudaGetErrorString(st), __FILE__, __LINE__);
    }
    SDNN_CUDA_CHECK(cudaEventRecord(t_end_[l], copy_));
    SDNN_CUDA_CHECK(cudaEventRecord(loaded_[s], copy_));
    bytes_ += p.bytes;
    ++uploads_;
    pending_.push_back(l);
    next_upload_ = l + 1;
  }

  // The compute streams of the passes: the slots (allocated through runs_.owned()) are released
  // after their work. The copy stream is not noted: the destructor synchronises and destroys it.
  sdnn::detail::run_streams runs_;
  std::vector<packed> layers_;
  std::vector<buffer<unsigned char, device_space>> slot_;
  std::uint64_t slot_bytes_ = 0;
  cudaStream_t copy_ = nullptr;
  std::vector<cudaEvent_t> loaded_, free_, t_begin_, t_end_;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
  std::size_t next_upload_ = 0;
  std::uint64_t bytes_ = 0;
  std::int64_t uploads_ = 0;
  double copy_ms_ = 0;
  std::vector<std::size_t> pending_;
  std::int64_t fail_layer_ = -1;
};

// Peak host -> device bandwidth from pinned memory (bytes/s): `reps` copies of `bytes` on a
// fresh stream, timed with events; the best copy counts. Allocates and frees its buffers.
inline double measure_h2d_peak(std::size_t bytes = std::size_t{256} << 20, int reps = 10) {
  cudaStream_t s;
  SDNN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double best = 0;
  {
    pinned_buffer<unsigned char> h(bytes);
    std::memset(h.data(), 1, bytes);
    buffer<unsigned char, device_space> d(bytes, cuda_exec{s});
    cudaEvent_t a, b;
    SDNN_CUDA_CHECK(cudaEventCreate(&a));
    SDNN_CUDA_CHECK(cudaEventCreate(&b));
    for (int r = 0; r < reps; ++r) {
      SDNN_CUDA_CHECK(cudaEventRecord(a, s));
      SDNN_CUDA_CHECK(cudaMemcpyAsync(d.data(), h.data(), bytes, cudaMemcpyHostToDevice, s));
      SDNN_CUDA_CHECK(cudaEventRecord(b, s));
      SDNN_CUDA_CHECK(cudaEventSynchronize(b));
      float ms = 0;
      SDNN_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
      if (ms > 0) best = std::max(best, static_cast<double>(bytes) / (ms / 1e3));
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    d.reset();
    SDNN_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  SDNN_CUDA_CHECK(cudaStreamDestroy(s));
  return best;
}

}  // namespace sdnn::pipeline
