// sdnn/linear/op/tc_auto.cuh - ops::tc_auto_linear_plan<T, Out>: Y[N x M] = epi(X[N x K] W^T)
// for a 16-bit W given dense on the host, run by whichever of cuBLAS dense, 32 x 32 block-sparse,
// 64 x 64 tile-offsets, 16 x 16 bitmap tiles, packed CSR on the CUDA cores, 2:4, cuSPARSE CSR or
// (where the program has it) cuSPARSELt 2:4 is fastest for the batch size. The constructor reads
// W's structure (analyze_weights), asks the cost model (linear/policy/tc_auto.hpp) which paths win
// at the batch sizes up to max_rows, and uploads only those encodings. run() picks among them per
// N without synchronising; path(n) and reason(n) say what it runs and why. tune() replaces the
// model by measurement: it times every candidate at the given batch sizes (synchronising),
// keeps the winners, frees the rest, and remembers them for this GPU and structure in a
// process-wide cache that later plans of the same structure read.
#pragma once

#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>
#include <limits>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/formats/bitmap_tiles.hpp"
#include "sdnn/formats/block_sparse.hpp"
#include "sdnn/formats/convert.hpp"
#include "sdnn/formats/copy.cuh"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/packed_csr.hpp"
#include "sdnn/formats/sparse24.hpp"
#include "sdnn/formats/tile_offsets.hpp"
#include "sdnn/linear/kernel/epilogue.cuh"
#include "sdnn/linear/op/csr_gather.cuh"
#include "sdnn/linear/op/sparse24_linear.cuh"
#include "sdnn/linear/op/tc_auto.hpp"
#include "sdnn/linear/op/tc_bitmap.cuh"
#include "sdnn/linear/op/tc_linear.cuh"
#include "sdnn/linear/vendor/cublas.cuh"
#include "sdnn/linear/vendor/cusparse.cuh"
#include "sdnn/linear/vendor/sparse24_vendor.hpp"
#if SDNN_HAS_CUSPARSELT
#include "sdnn/linear/vendor/cusparselt.cuh"  // offers cuSPARSELt through the hook above
#endif

namespace sdnn::ops {

namespace detail {
inline std::string current_gpu_name() {
  int dev = 0;
  SDNN_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp p{};
  SDNN_CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  return p.name;
}
}  // namespace detail

template <class T, class Out>
class tc_auto_linear_plan {
  static_assert(is_16bit_float_v<T>, "tc_auto_linear_plan: T must be sdnn::bf16 or sdnn::fp16");
  static_assert(std::is_same_v<Out, T> || std::is_same_v<Out, float>, "tc_auto_linear_plan: Out must be T or float");
  using blocks_plan = tc_linear_plan<policy::tc_block_sparse_mma, T>;
  using tiles_plan = tc_linear_plan<policy::tc_tile_offsets_mma, T>;
  using s24_plan = sparse24_linear_plan<T, Out>;
  using bitmap_plan = tc_bitmap_plan<T, Out>;
  using gather_plan = csr_gather_plan<T, Out>;

 public:
  using value_type = T;
  using output_type = Out;

  // W: M x K on the host (row-major, ld >= K). Reads its structure, chooses the paths for the
  // batch sizes up to opt.max_rows by the cost model (or by an earlier tune() of the same
  // structure on this GPU in this process) and uploads their encodings on exec.stream (where
  // cuSPARSELt is chosen for some batch size, making its plans synchronises exec.stream).
  // Refuses a GPU below sm_80, sizes over int32 and an empty `allowed` set.
  tc_auto_linear_plan(dense_view<T const> w, cuda_exec exec, tc_auto_options opt = {}) : opt_(opt), runs_(exec) {
    SDNN_EXPECTS(opt.max_rows >= 1, "tc_auto_linear_plan: max_rows must be >= 1, got ", opt.max_rows);
    SDNN_EXPECTS(w.rows == 0 || w.ld >= w.cols, "tc_auto_linear_plan: W's leading dimension ", w.ld, " is below its ",
                 w.cols, " columns");
    arch_ = ::sdnn::detail::current_arch();
    ::sdnn::detail::implementable(detail::tc_common_can_implement("tc_auto_linear_plan", w.rows, w.cols, arch_), 0);
    tuning_ = policy::tc_auto_tuning_for(arch_);
    structure_ = analyze_weights(w);
    candidates_ = policy::tc_candidates(tuning_, structure_, opt.allowed);
    // cuSPARSELt: where the program offers it (vendor/sparse24_vendor.hpp), for a 16-bit Y.
    if (!std::is_same_v<Out, T> || vendor::sparse24_vendor_maker<T>.load() == nullptr) candidates_ &= ~lt_bit;
    SDNN_EXPECTS((candidates_ & ~lt_bit) != 0, "tc_auto_linear_plan: no path left: allowed mask ", opt.allowed,
                 " excludes cuBLAS and W (", structure_.describe(), ") suits none of the allowed sparse paths ",
                 "(cusparselt alone does not do: it runs only the batch sizes it was planned for)");
    // (the runnable paths only shrink as N grows: what runs max_rows rows runs fewer)
    SDNN_EXPECTS(policy::tc_runnable(candidates_ & ~lt_bit, opt.max_rows) != 0, "tc_auto_linear_plan: no path left "
                 "for ", opt.max_rows, " rows (max_rows): cusparse_csr runs one row only, csr_gather up to 16");
    host_w_.resize(std::size_t(w.rows) * std::size_t(w.cols));  // packed: the encodings are built from it
    for (std::int64_t i = 0; i < w.rows; ++i)
      std::copy(w.data + i * w.ld, w.data + i * w.ld + w.cols, host_w_.begin() + std::size_t(i * w.cols));
    gpu_ = detail::current_gpu_name();
    // Earlier measurements of this structure on this GPU.
    {
      auto& c = detail::tc_tuned_cache::get();
      std::lock_guard<std::mutex> lock(c.mu);
      for (auto const& [key, p] : c.paths)
        if (same_structure(key) && (candidates_ & (1u << int(p)))) tuned_[key.n] = p;
    }
    std::vector<std::int64_t> lt_ns;
    unsigned const need = sample_picks([](std::int64_t) { return 0u; }, lt_ns);
    build(with_fallback(need, candidates_), exec, lt_ns);
    if (!opt.keep_host_copy) std::vector<T>().swap(host_w_);
  }

  tc_auto_linear_plan(tc_auto_linear_plan&&) noexcept = default;
  tc_auto_linear_plan& operator=(tc_auto_linear_plan&&) noexcept = default;

  std::int64_t out_features() const noexcept { return structure_.m; }
  std::int64_t max_rows() const noexcept { return opt_.max_rows; }
  std::int64_t in_features() const noexcept { return structure_.k; }
  policy::weight_structure const& structure() const noexcept { return structure_; }
  // Mask of the paths whose encodings are on the device.
  unsigned built() const noexcept { return built_; }
  // Device bytes of the encodings and workspaces the plan holds.
  std::size_t device_bytes() const {
    std::size_t b = dense_w_.size() * sizeof(T) + stage_.size() * sizeof(float);
    if (blocks_) b += blocks_->weight_bytes() + blocks_->workspace_bytes();
    if (tiles_) b += tiles_->weight_bytes() + tiles_->workspace_bytes();
    if (s24_) b += std::size_t(structure_.m) * std::size_t(structure_.k) * 9 / 16 + s24_->workspace_bytes();
    if (bitmap_) b += bitmap_->weight_bytes();
    if (gather_) b += gather_->weight_bytes() + gather_->workspace_bytes();
    for (auto const& [n, lt] : lt_) b += lt->device_bytes();
    b += csr_w_.row_ptr().size() * 4 + csr_w_.col_idx().size() * 4 + csr_w_.values().size() * sizeof(T) +
         csr_ws_.size();
    return b;
  }

  // The path a run with n rows takes: the measured winner of the nearest tuned N (log scale)
  // when tune() ran for this structure, else the cost model's, among the built paths
  // (cusparselt only at a batch size it was planned for: the model's anchors up to max_rows,
  // max_rows and tune()'s sizes where it won).
  policy::tc_path path(std::int64_t n) const { return pick(n, ready(n)); }
  // Why: the cost model's estimate of every candidate, or the measurement behind a tuned choice.
  std::string reason(std::int64_t n) const {
    auto const p = path(n);
    std::string r;
    if (auto t = tuned_for(n, ready(n))) {
      r = ::sdnn::detail::concat("N = ", n, ": ", policy::tc_path_name(p), " (measured by tune() at N = ", t->first, ")");
      if (auto it = measured_.find(t->first); it != measured_.end()) r += " " + it->second;
    } else {
      r = policy::tc_choose(tuning_, structure_, n, ready(n)).reason;
    }
    return r + "; " + structure_.describe();
  }
  std::string describe() const {
    std::string d = ::sdnn::detail::concat("tc_auto_linear_plan<", value_type_name<T>(), " -> ", value_type_name<Out>(),
                                           ">: ", structure_.describe(), "; built:");
    for (int p = 0; p < policy::tc_path_count; ++p)
      if (built_ & (1u << p)) d += ::sdnn::detail::concat(" ", policy::tc_path_name(policy::tc_path(p)));
    if (!lt_.empty()) {
      d += " (cusparselt at N =";
      for (auto const& [n, lt] : lt_) d += ::sdnn::detail::concat(" ", n);
      d += ")";
    }
    if (!lt_refused_.empty()) d += "; cusparselt refused: " + lt_refused_;
    return d + ::sdnn::detail::concat("; ", device_bytes(), " device bytes; max_rows ", opt_.max_rows);
  }

  // y = epi(x W^T) on exec.stream, by path(x.rows). epi.bias: device memory, M floats. Never
  // synchronises or allocates. The cusparselt path rounds the product to T before a
  // non-identity epilogue (two roundings; every other path rounds once) and needs contiguous
  // rows in X and Y: with others the run takes the best other built path.
  void run(cuda_exec exec, dense_view<T const> x, dense_view<Out> y, basic_epilogue<float> const& epi = {}) const {
    SDNN_EXPECTS_DIMS(x.cols == structure_.k && y.rows == x.rows && y.cols == structure_.m, "tc_auto_linear_plan: X is ",
                      x.rows, " x ", x.cols, ", Y ", y.rows, " x ", y.cols, "; need X N x ", structure_.k, ", Y N x ",
                      structure_.m);
    SDNN_EXPECTS(x.rows <= opt_.max_rows, "tc_auto_linear_plan: ", x.rows, " rows exceed the plan's max_rows ",
                 opt_.max_rows);
    runs_.note(exec);
    if (x.rows == 0) return;
    auto p = path(x.rows);
    if (p == policy::tc_path::cusparselt && !((x.rows <= 1 || x.ld == x.cols) && (y.rows <= 1 || y.ld == y.cols)))
      p = pick(x.rows, ready(x.rows) & ~lt_bit);
    run_path(p, exec, x, y, epi);
  }

  // Measures every candidate path at each n in ns (each <= max_rows) on this plan's W, with the
  // epilogue the runs will use (epi.bias: device memory, M floats; the default: none): 2 warm-up
  // runs and the median of 7, each after an L2 flush, as the benchmark times them. A fused
  // epilogue is free in sdnn's kernels and a second pass after cuBLAS, so the winner can depend
  // on it; the tuned choice (and the process-wide cache, keyed by structure and N) is for this one.
  // Synchronises exec.stream; allocates X, Y and a flush buffer for the duration; builds the
  // encodings it lacks (needs keep_host_copy, else measures the built paths only), then keeps
  // only the winners. The results also go to the process-wide cache.
  void tune(cuda_exec exec, std::vector<std::int64_t> const& ns, basic_epilogue<float> const& epi = {}) {
    if (ns.empty()) return;
    for (auto n : ns)
      SDNN_EXPECTS(n >= 1 && n <= opt_.max_rows, "tc_auto_linear_plan::tune: N = ", n, " outside [1, max_rows = ",
                   opt_.max_rows, "]");
    cuda_exec const own = runs_.owned(exec);
    build(host_w_.empty() ? 0u : candidates_, exec, ns);
    std::int64_t const nmax = *std::max_element(ns.begin(), ns.end());
    std::vector<T> hx(std::size_t(nmax) * std::size_t(structure_.k));
    for (std::size_t i = 0; i < hx.size(); ++i) hx[i] = T(float(int(i % 17) - 8) * 0.0625f);
    auto dx = to_device(hx.data(), hx.size(), own);
    buffer<Out, device_space> dy(std::size_t(nmax) * std::size_t(std::max<std::int64_t>(structure_.m, 1)), own);
    // Each run after an L2 flush between two events, the stream not held (as bench_linear16 times).
    ::sdnn::detail::flushed_timer timer(own, /*hold=*/false);
    std::string err;
    try {
      for (auto n : ns) {
        dense_view<T const> xv{n, structure_.k, structure_.k, dx.data()};
        dense_view<Out> yv{n, structure_.m, structure_.m, dy.data()};
        double best = 1e300;
        policy::tc_path win = policy::tc_path::cublas_dense;
        std::string line = "(median us:";
        for (int p = 0; p < policy::tc_path_count; ++p) {
          if (!(policy::tc_runnable(ready(n), n) & (1u << p))) continue;
          for (int i = 0; i < 2; ++i) run_path(policy::tc_path(p), own, xv, yv, epi);
          std::vector<float> ms(7);
          for (auto& t : ms) t = timer([&] { run_path(policy::tc_path(p), own, xv, yv, epi); });
          std::nth_element(ms.begin(), ms.begin() + 3, ms.end());
          double const us = double(ms[3]) * 1e3;
          line += ::sdnn::detail::concat(" ", policy::tc_path_name(policy::tc_path(p)), " ", std::round(us * 10) / 10);
          if (us < best) {
            best = us;
            win = policy::tc_path(p);
          }
        }
        tuned_[n] = win;
        measured_[n] = line + ")";
        auto& c = detail::tc_tuned_cache::get();
        std::lock_guard<std::mutex> lock(c.mu);
        c.paths[key(n)] = win;
      }
    } catch (error const& e) {
      err = e.what();
    }
    if (!err.empty()) SDNN_FAIL("tc_auto_linear_plan::tune: ", err);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(own.stream));
    // Keep what some batch size up to max_rows still uses (and cuSPARSELt's plans where they win).
    std::vector<std::int64_t> lt_keep;
    unsigned keep = sample_picks([&](std::int64_t n) { return ready(n); }, lt_keep);
    for (auto it = lt_.begin(); it != lt_.end();)
      it = std::find(lt_keep.begin(), lt_keep.end(), it->first) == lt_keep.end() ? lt_.erase(it) : std::next(it);
    if (lt_.empty()) keep &= ~lt_bit;
    release(built_ & ~with_fallback(keep, built_));
  }

 private:
  // Batch sizes whose choice decides which encodings to build: the model's anchors up to
  // max_rows, max_rows itself and every tuned N.
  std::vector<std::int64_t> sample_ns() const {
    std::vector<std::int64_t> ns;
    for (double a : policy::tc_anchors)
      if (std::int64_t(a) <= opt_.max_rows) ns.push_back(std::int64_t(a));
    ns.push_back(opt_.max_rows);
    for (auto const& [n, p] : tuned_)
      if (n <= opt_.max_rows) ns.push_back(n);
    return ns;
  }
  // The tuned entry nearest n on a log scale, if any and if its path is among `among` and can
  // run n rows.
  std::optional<std::pair<std::int64_t, policy::tc_path>> tuned_for(std::int64_t n, unsigned among) const {
    std::optional<std::pair<std::int64_t, policy::tc_path>> best;
    if (tuned_.empty()) return best;
    double bd = 1e300;
    for (auto const& [tn, p] : tuned_) {
      double const d = std::fabs(std::log(double(tn)) - std::log(double(std::max<std::int64_t>(n, 1))));
      if (d < bd) {
        bd = d;
        best = std::make_pair(tn, p);
      }
    }
    if (best && !(policy::tc_runnable(among, n) & (1u << int(best->second)))) best.reset();
    return best;
  }
  static constexpr unsigned lt_bit = 1u << int(policy::tc_path::cusparselt);
  // The paths the sample sizes pick among among(n) (0: every candidate); the sizes that pick
  // cusparselt are appended to lt_ns.
  template <class Among>
  unsigned sample_picks(Among among, std::vector<std::int64_t>& lt_ns) const {
    unsigned m = 0;
    for (std::int64_t n : sample_ns()) {
      auto const p = pick(n, among(n));
      m |= 1u << int(p);
      if (p == policy::tc_path::cusparselt) lt_ns.push_back(n);
    }
    return m;
  }
  // cuSPARSELt runs only the sizes it was planned for (and contiguous rows): `need` plus, if it
  // lacks one, the path of `among` that runs the rest (every n > 1, and one row).
  unsigned with_fallback(unsigned need, unsigned among) const {
    if (opt_.max_rows > 1 && policy::tc_runnable(need & ~lt_bit, 2) == 0)
      need |= 1u << int(pick(opt_.max_rows, policy::tc_runnable(among & ~lt_bit, 2)));
    if ((need & ~lt_bit) == 0) need |= 1u << int(pick(1, among & ~lt_bit));
    return need;
  }
  // The built paths that can run n rows now: cusparselt only where it has a plan for n.
  unsigned ready(std::int64_t n) const { return lt_.count(n) ? built_ : built_ & ~lt_bit; }
  policy::tc_path pick(std::int64_t n, unsigned among = 0) const {
    if (among == 0) among = candidates_;
    if (auto t = tuned_for(n, among)) return t->second;
    return policy::tc_pick(tuning_, structure_, n, among);
  }
  bool same_structure(detail::tc_tuned_key const& k) const {
    return k.gpu == gpu_ && k.m == structure_.m && k.k == structure_.k && k.nnz == structure_.nnz &&
           k.tiles64 == structure_.tiles64 && k.blocks32 == structure_.blocks32 && k.is_24 == structure_.is_24 &&
           k.out_bytes == int(sizeof(Out));
  }
  detail::tc_tuned_key key(std::int64_t n) const {
    return {gpu_, structure_.m, structure_.k, structure_.nnz, structure_.tiles64, structure_.blocks32, structure_.is_24,
            int(sizeof(Out)), n};
  }

  // Uploads the encodings of the paths in `mask` not yet built (from the host copy); cusparselt:
  // a cuSPARSELt plan for each of lt_ns it lacks (its making synchronises exec.stream; one that
  // cuSPARSELt refuses is left out and the refusal shown by describe()).
  void build(unsigned mask, cuda_exec exec, std::vector<std::int64_t> const& lt_ns = {}) {
    if ((mask & candidates_ & lt_bit) && !host_w_.empty()) build_lt(lt_ns, exec);
    mask &= candidates_ & ~built_ & ~lt_bit;
    if (!mask) return;
    SDNN_EXPECTS(!host_w_.empty(), "tc_auto_linear_plan: W's host copy was dropped (keep_host_copy = false)");
    cuda_exec const own = runs_.owned(exec);
    dense_view<T const> w{structure_.m, structure_.k, structure_.k, host_w_.data()};
    plan_options po;
    po.max_rows = opt_.max_rows;
    using P = policy::tc_path;
    if (mask & (1u << int(P::cublas_dense))) {
      dense_w_ = to_device(host_w_.data(), host_w_.size(), own);
      built_ |= 1u << int(P::cublas_dense);
    }
    if (mask & (1u << int(P::tc_block32))) {
      blocks_ = std::make_unique<blocks_plan>(block_sparse_from_dense(w, 32, 32), exec, po);
      built_ |= 1u << int(P::tc_block32);
    }
    if (mask & (1u << int(P::tc_tile_offsets))) {
      tiles_ = std::make_unique<tiles_plan>(tile_offsets_from_dense(w), exec, po);
      built_ |= 1u << int(P::tc_tile_offsets);
    }
    if (mask & (1u << int(P::sparse24))) {
      s24_ = std::make_unique<s24_plan>(sparse24_from_dense(w), exec, po);
      built_ |= 1u << int(P::sparse24);
    }
    if (mask & (1u << int(P::cusparse_csr))) {
      build_csr(w, own);
      built_ |= 1u << int(P::cusparse_csr);
    }
    if (mask & (1u << int(P::tc_bitmap))) {
      bitmap_ = std::make_unique<bitmap_plan>(bitmap_tiles_from_dense(w), exec);
      built_ |= 1u << int(P::tc_bitmap);
    }
    if (mask & (1u << int(P::csr_gather))) {
      gather_ = std::make_unique<gather_plan>(packed_csr_from_dense(w), exec);
      built_ |= 1u << int(P::csr_gather);
    }
    if ((built_ & ((1u << int(P::cublas_dense)) | (1u << int(P::cusparse_csr)))) && stage_.size() == 0) {
      if constexpr (!std::is_same_v<Out, float>) {
        // the vendor paths' staging for a non-identity epilogue: float rows, one chunk of at most
        // the option's bytes
        std::size_t const row_bytes = std::size_t(std::max<std::int64_t>(structure_.m, 1)) * sizeof(float);
        chunk_rows_ = std::max<std::int64_t>(
            1, std::min<std::int64_t>(opt_.max_rows, std::int64_t(opt_.epilogue_workspace_bytes / row_bytes)));
        stage_ = buffer<float, device_space>(std::size_t(chunk_rows_) * std::size_t(std::max<std::int64_t>(structure_.m, 1)),
                                             own);
      }
    }
  }

  void build_lt(std::vector<std::int64_t> const& ns, cuda_exec exec) {
    auto const maker = vendor::sparse24_vendor_maker<T>.load();
    cuda_exec const own = runs_.owned(exec);
    buffer<T, device_space> tmp;  // W dense on the device while the plans compress it
    T const* wd = dense_w_.data();
    for (std::int64_t n : ns) {
      if (lt_.count(n)) continue;
      if (wd == nullptr) {
        tmp = to_device(host_w_.data(), host_w_.size(), own);
        wd = tmp.data();
      }
      try {
        lt_[n] = maker(dense_view<T const>{structure_.m, structure_.k, structure_.k, wd}, n, own);
      } catch (error const& e) {
        lt_refused_ += ::sdnn::detail::concat(lt_refused_.empty() ? "" : "; ", "N = ", n, ": ", e.what());
      }
    }
    if (!lt_.empty()) built_ |= lt_bit;
  }

  // W in CSR (16-bit values, int32 indices) and its cuSPARSE descriptor; the SpMM workspace for
  // every batch size up to max_rows and both output types (queried at the anchors and max_rows).
  void build_csr(dense_view<T const> w, cuda_exec own) {
    SDNN_EXPECTS(structure_.nnz <= std::numeric_limits<std::int32_t>::max(), "tc_auto_linear_plan: ",
                 structure_.nnz, " nonzeros exceed cuSPARSE's int32 CSR indices");
    csr_w_ = to_device(to_csr<std::int32_t>(w, host_exec{}), own);
    // With no nonzero the index and value arrays are empty; cuSPARSE reads neither, and row_ptr
    // stands in for their pointers.
    void* const none = csr_w_.row_ptr().data();
    void* const col = csr_w_.nnz() > 0 ? static_cast<void*>(csr_w_.col_idx().data()) : none;
    void* const val = csr_w_.nnz() > 0 ? static_cast<void*>(csr_w_.values().data()) : none;
    SDNN_CUSPARSE_CHECK(cusparseCreateCsr(csr_.out(), structure_.m, structure_.k, csr_w_.nnz(), csr_w_.row_ptr().data(),
                                          col, val, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                          cuda_type()));
    std::size_t need = 0;
    for (std::int64_t n : sample_ns()) {
      need = std::max(need, csr_buffer_bytes(n, std::is_same_v<Out, float> ? CUDA_R_32F : cuda_type()));
      need = std::max(need, csr_buffer_bytes(n, CUDA_R_32F));
    }
    csr_ws_ = buffer<unsigned char, device_space>(std::max<std::size_t>(need, 1), own);
  }
  static cudaDataType_t cuda_type() { return std::is_same_v<T, bf16> ? CUDA_R_16BF : CUDA_R_16F; }
  // cusparseSpMM's workspace for n rows of X and a Y of type ct (descriptors on null data).
  std::size_t csr_buffer_bytes(std::int64_t n, cudaDataType_t ct) const {
    vendor::cusparse_dnmat b, c;
    SDNN_CUSPARSE_CHECK(cusparseCreateDnMat(b.out(), structure_.k, n, std::max<std::int64_t>(structure_.k, 1), nullptr,
                                            cuda_type(), CUSPARSE_ORDER_COL));
    SDNN_CUSPARSE_CHECK(cusparseCreateDnMat(c.out(), structure_.m, n, std::max<std::int64_t>(structure_.m, 1), nullptr,
                                            ct, CUSPARSE_ORDER_COL));
    std::size_t bytes = 0;
    float const alpha = 1.f, beta = 0.f;
    SDNN_CUSPARSE_CHECK(cusparseSpMM_bufferSize(vendor::cusparse_handle(), CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, csr_.get(), b.get(), &beta,
                                                c.get(), CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, &bytes));
    return bytes;
  }
  // Y (ct) = W X^T through cusparseSpMM: B = X as K x N column-major, C = Y as M x N column-major.
  void csr_spmm(cuda_exec exec, dense_view<T const> x, void* y, std::int64_t ldy, cudaDataType_t ct) const {
    cusparseHandle_t h = vendor::cusparse_handle();
    SDNN_CUSPARSE_CHECK(cusparseSetStream(h, exec.stream));
    std::int64_t const ldx = x.rows > 1 ? x.ld : std::max<std::int64_t>(x.cols, 1);
    vendor::cusparse_dnmat b, c;
    SDNN_CUSPARSE_CHECK(cusparseCreateDnMat(b.out(), structure_.k, x.rows, ldx, const_cast<T*>(x.data), cuda_type(),
                                            CUSPARSE_ORDER_COL));
    SDNN_CUSPARSE_CHECK(cusparseCreateDnMat(c.out(), structure_.m, x.rows,
                                            x.rows > 1 ? ldy : std::max<std::int64_t>(structure_.m, 1), y, ct,
                                            CUSPARSE_ORDER_COL));
    float const alpha = 1.f, beta = 0.f;
    std::size_t bytes = 0;
    SDNN_CUSPARSE_CHECK(cusparseSpMM_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                &alpha, csr_.get(), b.get(), &beta, c.get(), CUDA_R_32F,
                                                CUSPARSE_SPMM_ALG_DEFAULT, &bytes));
    SDNN_EXPECTS(bytes <= csr_ws_.size(), "tc_auto_linear_plan: cuSPARSE asks for ", bytes,
                 " workspace bytes at N = ", x.rows, ", more than the ", csr_ws_.size(), " sized at plan time");
    SDNN_CUSPARSE_CHECK(cusparseSpMM(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha,
                                     csr_.get(), b.get(), &beta, c.get(), CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT,
                                     const_cast<unsigned char*>(csr_ws_.data())));
  }
  void release(unsigned mask) {
    using P = policy::tc_path;
    if (mask & (1u << int(P::cublas_dense))) dense_w_ = {};
    if (mask & (1u << int(P::tc_block32))) blocks_.reset();
    if (mask & (1u << int(P::tc_tile_offsets))) tiles_.reset();
    if (mask & (1u << int(P::sparse24))) s24_.reset();
    if (mask & (1u << int(P::tc_bitmap))) bitmap_.reset();
    if (mask & (1u << int(P::csr_gather))) gather_.reset();
    if (mask & (1u << int(P::cusparse_csr))) {
      csr_.reset();
      csr_w_ = {};
      csr_ws_ = {};
    }
    if (mask & lt_bit) lt_.clear();
    built_ &= ~mask;
    if (!(built_ & ((1u << int(P::cublas_dense)) | (1u << int(P::cusparse_csr))))) stage_ = {};
  }

  void run_path(policy::tc_path p, cuda_exec exec, dense_view<T const> x, dense_view<Out> y,
                basic_epilogue<float> const& epi) const {
    using P = policy::tc_path;
    switch (p) {
      case P::tc_block32: return blocks_->run(exec, x, y, epi);
      case P::tc_tile_offsets: return tiles_->run(exec, x, y, epi);
      case P::sparse24: return s24_->run(exec, x, y, epi);
      case P::tc_bitmap: return bitmap_->run(exec, x, y, epi);
      case P::csr_gather: return gather_->run(exec, x, y, epi);
      case P::cusparselt:
        if constexpr (std::is_same_v<Out, T>) {  // never a candidate otherwise
          lt_.at(x.rows)->run(exec, x, y);
          if (!kernels::is_identity(epi)) kernels::apply_epilogue(y, epi, exec);
        }
        return;
      case P::cublas_dense:
      case P::cusparse_csr: break;
    }
    if (x.rows == 0 || y.cols == 0) return;
    bool const csr = p == P::cusparse_csr;
    dense_view<T const> w{structure_.m, structure_.k, structure_.k, dense_w_.data()};
    // Y (of type U) = X W^T by the vendor library, no epilogue
    auto product = [&](dense_view<T const> xs, auto ys) {
      using U = std::remove_const_t<std::remove_pointer_t<decltype(ys.data)>>;
      if (csr) return csr_spmm(exec, xs, ys.data, ys.ld, std::is_same_v<U, float> ? CUDA_R_32F : cuda_type());
      vendor::cublas_linear16(vendor::default_cublas_handle().get(), xs, w, ys, exec.stream);
    };
    if (kernels::is_identity(epi)) return product(x, y);
    if constexpr (std::is_same_v<Out, float>) {
      product(x, y);
      kernels::apply_epilogue(y, epi, exec);
    } else {  // float staging, then the epilogue and one rounding to Out, chunk by chunk
      for (std::int64_t r0 = 0; r0 < x.rows; r0 += chunk_rows_) {
        std::int64_t const rows = std::min(chunk_rows_, x.rows - r0);
        product(dense_view<T const>{rows, x.cols, x.ld, x.data + r0 * x.ld},
                dense_view<float>{rows, y.cols, y.cols, const_cast<float*>(stage_.data())});
        kernels::store_epilogue(dense_view<float const>{rows, y.cols, y.cols, stage_.data()},
                                dense_view<Out>{rows, y.cols, y.ld, y.data + r0 * y.ld}, epi, exec);
      }
    }
  }

  tc_auto_options opt_;
  ::sdnn::detail::run_streams runs_;  // the streams its own buffers wait for when released (core/plan.cuh)
  arch arch_{};
  policy::tc_auto_tuning tuning_{};
  policy::weight_structure structure_{};
  unsigned candidates_ = 0, built_ = 0;
  std::string gpu_;
  std::vector<T> host_w_;
  std::map<std::int64_t, policy::tc_path> tuned_;  // tune()'s winners (and the cache's), by N
  std::map<std::int64_t, std::string> measured_;   // tune()'s timings, by N
  buffer<T, device_space> dense_w_;
  buffer<float, device_space> stage_;
  std::int64_t chunk_rows_ = 0;
  std::unique_ptr<blocks_plan> blocks_;
  std::unique_ptr<tiles_plan> tiles_;
  std::unique_ptr<s24_plan> s24_;
  std::unique_ptr<bitmap_plan> bitmap_;
  std::unique_ptr<gather_plan> gather_;
  std::map<std::int64_t, std::unique_ptr<vendor::sparse24_matmul<T>>> lt_;  // cuSPARSELt, by batch size
  std::string lt_refused_;
  csr_matrix<T, std::int32_t, device_space> csr_w_;
  buffer<unsigned char, device_space> csr_ws_;
  vendor::cusparse_spmat csr_;  // declared after the arrays it points into: destroyed first
};

}  // namespace sdnn::ops
