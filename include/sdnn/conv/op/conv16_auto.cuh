// sdnn/conv/op/conv16_auto.cuh - ops::conv16_auto_plan<T>: one 16-bit NHWC convolution layer
// (bias, ReLU, optional 2x2 max-pool) that runs the fastest of cuDNN (dense, its best algorithm)
// and the tensor-core implicit GEMMs the filter's structure allows (blocks of 64 x 32, 32 x 32 or
// 16 x 16 of its GEMM view, as channel-block pruning leaves them, the 64 x 32 and 32 x 32 ones also
// through the TMA block kernel on sm_90, which pools in its epilogue; 64 x 64 tiles of its nonzeros; 2:4
// along the reduction dimension on mma.sp), for a 1x1 stride-1 unpadded layer the plain GEMM
// through cuBLASLt with the bias and ReLU fused (where cuDNN runs them as a pass of their own),
// and for a short reduction (R*S*C <= 256: a first layer) the direct kernel of small_c_conv.cuh.
// The choice is a tuning run at plan time: every candidate is timed on this GPU with this batch,
// in interleaved rounds (the plan SYNCHRONISES, as cuDNN's own algorithm search does), the result
// cached for the process per (GPU, layer, batch, type, epilogue, structure). Only the chosen path
// keeps device memory afterwards.
// path(), reason() say what runs and why; run() only enqueues on exec.stream.
#pragma once

#if defined(SDNN_HAS_CUDNN)

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "sdnn/conv/kernel/nhwc_epilogue.cuh"
#include "sdnn/conv/op/small_c_conv.cuh"
#include "sdnn/conv/op/sparse24_conv.cuh"
#include "sdnn/conv/op/tc_conv.cuh"
#include "sdnn/conv/vendor/cudnn16.cuh"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/formats/block_sparse.hpp"
#include "sdnn/formats/tile_offsets.hpp"
#include "sdnn/linear/op/tc_auto.hpp"
#include "sdnn/linear/vendor/cublaslt.cuh"

namespace sdnn::ops {

enum class conv16_path {
  cudnn,
  tc_dense,
  tc_blocks64x32,
  tc_blocks32,
  tc_blocks16,
  tc_tiles,
  cublaslt_1x1,
  tc_sparse24,
  tc_blocks64x32_tma,  // the block kernels of linear/kernel/tc_block_tma.cuh (sm_90, C % 32 == 0)
  tc_blocks32_tma,
  small_c  // the direct kernel of conv/op/small_c_conv.cuh (R*S*C <= 256, K % 8 == 0)
};
inline char const* conv16_path_name(conv16_path p) {
  switch (p) {
    case conv16_path::cudnn: return "cudnn";
    case conv16_path::tc_dense: return "tc_dense";
    case conv16_path::tc_blocks64x32: return "tc_blocks64x32";
    case conv16_path::tc_blocks32: return "tc_blocks32";
    case conv16_path::tc_blocks16: return "tc_blocks16";
    case conv16_path::cublaslt_1x1: return "cublaslt_1x1";
    case conv16_path::tc_sparse24: return "tc_sparse24";
    case conv16_path::tc_blocks64x32_tma: return "tc_blocks64x32_tma";
    case conv16_path::tc_blocks32_tma: return "tc_blocks32_tma";
    case conv16_path::small_c: return "small_c";
    default: return "tc_tiles";
  }
}
inline constexpr unsigned conv16_all_paths = 0x7ff;

struct conv16_auto_options {
  unsigned allowed = conv16_all_paths;  // mask of 1 << conv16_path
  double max_block_occupancy = 0.6;     // a block path is a candidate when at most this share of
                                        // its GEMM blocks holds a nonzero
  double max_tile_density = 0.3;        // the tile path: at most this share of nonzeros
  int reps = 7;                         // timed runs per candidate (median), after one warm-up
};

namespace detail {
struct conv16_key {
  std::string gpu;
  int C, H, W, K, R, S, sh, sw, ph, pw, dh, dw;
  std::int64_t batch;
  int type_bytes, type_tag;
  bool relu, pool, bias;
  std::int64_t nnz, b64, b32, b16;
  bool is24;
  unsigned allowed;
  bool operator<(conv16_key const& o) const {
    auto t = [](conv16_key const& k) {
      return std::tie(k.gpu, k.C, k.H, k.W, k.K, k.R, k.S, k.sh, k.sw, k.ph, k.pw, k.dh, k.dw, k.batch, k.type_bytes,
                      k.type_tag, k.relu, k.pool, k.bias, k.nnz, k.b64, k.b32, k.b16, k.is24, k.allowed);
    };
    return t(*this) < t(o);
  }
};
struct conv16_tuned {
  std::mutex mu;
  std::map<conv16_key, std::pair<conv16_path, std::string>> choices;
  static conv16_tuned& get() {
    static conv16_tuned c;
    return c;
  }
};
// Occupied br x bc blocks of a dense view.
template <class T>
std::int64_t occupied_blocks(dense_view<T const> w, int br, int bc) {
  std::int64_t const rb = (w.rows + br - 1) / br, cb = (w.cols + bc - 1) / bc;
  std::vector<unsigned char> hit(static_cast<std::size_t>(cb));
  std::int64_t n = 0;
  for (std::int64_t i0 = 0; i0 < rb; ++i0) {
    std::fill(hit.begin(), hit.end(), 0);
    for (std::int64_t i = i0 * br; i < std::min<std::int64_t>(w.rows, (i0 + 1) * br); ++i)
      for (std::int64_t j = 0; j < w.cols; ++j)
        if (::sdnn::detail::is_nonzero(w(i, j))) hit[std::size_t(j / bc)] = 1;
    for (auto h : hit) n += h;
  }
  return n;
}
}  // namespace detail

template <class T>
class conv16_auto_plan {
  static_assert(is_16bit_float_v<T>, "conv16_auto_plan: T must be sdnn::bf16 or sdnn::fp16");

 public:
  // w_gemm: the filter's GEMM view on the host (K x R*S*C, conv/nhwc.hpp); bias: K floats or
  // none. Plans every candidate, times them on exec.stream (SYNCHRONISES) unless the process
  // has timed this key before, and keeps the fastest.
  conv16_auto_plan(conv::conv_shape shape, std::int64_t batch, dense_view<T const> w_gemm, std::vector<float> bias,
                   bool relu, bool pool2x2, cuda_exec exec, conv16_auto_options opt = {})
      : s_(shape), batch_(batch), relu_(relu), pool_(pool2x2), runs_(exec) {
    ::sdnn::detail::implementable(vendor::cudnn_conv2d_nhwc<T>::can_implement(s_, batch_, pool_), 0);
    ::sdnn::detail::implementable(tc_conv_can_run(s_, batch_), 0);
    SDNN_EXPECTS_DIMS(w_gemm.rows == s_.K && w_gemm.cols == s_.filter_size(), "conv16_auto_plan: the GEMM view is ",
                      w_gemm.rows, " x ", w_gemm.cols, ", the layer needs K x R*S*C = ", s_.K, " x ", s_.filter_size());
    SDNN_EXPECTS_DIMS(bias.empty() || bias.size() == std::size_t(s_.K), "conv16_auto_plan: bias must have K = ", s_.K,
                      " entries (or none), got ", bias.size());
    cuda_exec const own = runs_.owned(exec);

    // The structure the candidates need: nonzeros and occupied 32 x 32 blocks as the linear
    // layer's analysis counts them, 64 x 32 and 16 x 16 blocks here.
    std::int64_t const total = s_.K * s_.filter_size();
    auto const analysed = analyze_weights(w_gemm);
    std::int64_t const nnz = analysed.nnz;
    auto all_blocks = [&](int br, int bc) {
      return ((w_gemm.rows + br - 1) / br) * ((w_gemm.cols + bc - 1) / bc);
    };
    std::int64_t const b64 = detail::occupied_blocks(w_gemm, 64, 32), b32 = analysed.blocks32,
                       b16 = detail::occupied_blocks(w_gemm, 16, 16);
    auto allowed = [&](conv16_path p) { return (opt.allowed >> unsigned(p)) & 1u; };
    std::vector<conv16_path> cands;
    if (allowed(conv16_path::cudnn)) cands.push_back(conv16_path::cudnn);
    if (allowed(conv16_path::tc_dense)) cands.push_back(conv16_path::tc_dense);
    if (allowed(conv16_path::tc_blocks64x32) && b64 <= opt.max_block_occupancy * all_blocks(64, 32))
      cands.push_back(conv16_path::tc_blocks64x32);
    if (allowed(conv16_path::tc_blocks32) && b32 <= opt.max_block_occupancy * all_blocks(32, 32))
      cands.push_back(conv16_path::tc_blocks32);
    if (allowed(conv16_path::tc_blocks16) && b16 <= opt.max_block_occupancy * all_blocks(16, 16))
      cands.push_back(conv16_path::tc_blocks16);
    // The TMA kernel reads an input whose channels fill whole 32-wide blocks, on sm_90 and newer
    // (elsewhere its plan would run the tiled kernels, a candidate already).
    bool const tma = s_.C % 32 == 0 && arch{9, 0} <= ::sdnn::detail::current_arch();
    if (tma && allowed(conv16_path::tc_blocks64x32_tma) && b64 <= opt.max_block_occupancy * all_blocks(64, 32))
      cands.push_back(conv16_path::tc_blocks64x32_tma);
    if (tma && allowed(conv16_path::tc_blocks32_tma) && b32 <= opt.max_block_occupancy * all_blocks(32, 32))
      cands.push_back(conv16_path::tc_blocks32_tma);
    if (allowed(conv16_path::tc_tiles) && nnz <= opt.max_tile_density * double(total))
      cands.push_back(conv16_path::tc_tiles);
    if (allowed(conv16_path::cublaslt_1x1) && is_plain_gemm()) cands.push_back(conv16_path::cublaslt_1x1);
    if (allowed(conv16_path::tc_sparse24) && analysed.is_24) cands.push_back(conv16_path::tc_sparse24);
    if (allowed(conv16_path::small_c) && small_c_conv_can_implement<T>(s_)) cands.push_back(conv16_path::small_c);
    SDNN_EXPECTS(!cands.empty(), "conv16_auto_plan: no allowed path (allowed mask ", opt.allowed, ")");
    if (!bias.empty()) bias_dev_ = copy_to<device_space>(host_buffer<float>(bias.begin(), bias.end()), own);

    std::string const structure = ::sdnn::detail::concat(
        "W ", nnz, " of ", total, " nonzero, occupied blocks 64x32 ", b64, "/", all_blocks(64, 32), ", 32x32 ", b32, "/",
        all_blocks(32, 32), ", 16x16 ", b16, "/", all_blocks(16, 16), analysed.is_24 ? ", 2:4" : "");
    if (cands.size() == 1) {  // a forced path: nothing to time
      path_ = cands.front();
      reason_ = ::sdnn::detail::concat(conv16_path_name(path_), ": the only allowed path; ", structure);
      build(path_, w_gemm, bias, own);
      finish(own);
      return;
    }
    int dev = 0;
    SDNN_CUDA_CHECK(cudaGetDevice(&dev));
    cudaDeviceProp prop{};
    SDNN_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    detail::conv16_key key{prop.name, s_.C, s_.H, s_.W, s_.K, s_.R, s_.S, s_.stride_h, s_.stride_w, s_.pad_h, s_.pad_w,
                           s_.dil_h, s_.dil_w, batch_, int(sizeof(T)), std::is_same_v<T, bf16> ? 1 : 0, relu_, pool_,
                           !bias.empty(), nnz, b64, b32, b16, analysed.is_24, opt.allowed};
    auto& cache = detail::conv16_tuned::get();
    {
      std::lock_guard<std::mutex> lock(cache.mu);
      if (auto it = cache.choices.find(key); it != cache.choices.end()) {
        path_ = it->second.first;
        reason_ = it->second.second + " (cached choice); " + structure;
        build(path_, w_gemm, bias, own);
        finish(own);
        return;
      }
    }
    // Every candidate as a plan of its own, timed in interleaved rounds (one warm-up round, then
    // opt.reps rounds, each candidate once a round, each run after an L2 flush as the benchmarks
    // time it; median per candidate), so that a change of the GPU's clocks during the tuning weighs
    // on every candidate alike. Scratch input of nonzero values (bytes 0x3c: about 1.06 in fp16,
    // 0.0115 in bf16) and output.
    std::vector<std::unique_ptr<conv16_auto_plan>> subs;
    std::vector<conv16_path> timed;
    std::string log;
    for (auto p : cands) {
      conv16_auto_options one = opt;
      one.allowed = 1u << unsigned(p);
      try {
        subs.push_back(std::make_unique<conv16_auto_plan>(s_, batch_, w_gemm, bias, relu_, pool_, own, one));
        timed.push_back(p);
      } catch (::sdnn::error const& e) {
        log += ::sdnn::detail::concat(log.empty() ? "" : ", ", conv16_path_name(p), " refused (", e.what(), ")");
      }
    }
    SDNN_EXPECTS(!subs.empty(), "conv16_auto_plan: every candidate failed: ", log);
    device_buffer<T> x(std::size_t(batch_ * s_.H * s_.W * s_.C), own), y(std::size_t(y_elements()), own);
    SDNN_CUDA_CHECK(cudaMemsetAsync(x.data(), 0x3c, x.size() * sizeof(T), own.stream));
    std::vector<std::vector<float>> ms(subs.size());
    {
      ::sdnn::detail::flushed_timer timer(own);
      for (int r = 0; r <= std::max(1, opt.reps); ++r)
        for (std::size_t i = 0; i < subs.size(); ++i) {
          float const v = timer([&] { subs[i]->run(own, x.data(), y.data()); });
          if (r > 0) ms[i].push_back(v);
        }
    }
    double best = 0;
    for (std::size_t i = 0; i < subs.size(); ++i) {
      std::sort(ms[i].begin(), ms[i].end());
      double const t = ms[i][ms[i].size() / 2] * 1e3;
      log += ::sdnn::detail::concat(log.empty() ? "" : ", ", conv16_path_name(timed[i]), " ", int(t * 10) / 10.0, " us");
      if (best == 0 || t < best) {
        best = t;
        path_ = timed[i];
      }
    }
    // The winner runs as it was timed: its plan is kept (not made again), the others freed.
    for (std::size_t i = 0; i < subs.size(); ++i)
      if (timed[i] == path_) sub_ = std::move(subs[i]);
    subs.clear();
    reason_ = ::sdnn::detail::concat(conv16_path_name(path_), ": fastest of the candidates timed at plan time (", log,
                                     "); ", structure);
    std::lock_guard<std::mutex> lock(cache.mu);
    cache.choices.emplace(key, std::make_pair(path_, reason_.substr(0, reason_.find(';'))));
  }

  conv16_auto_plan(conv16_auto_plan const&) = delete;
  conv16_auto_plan& operator=(conv16_auto_plan const&) = delete;

  conv16_path path() const noexcept { return path_; }
  std::string const& reason() const noexcept { return reason_; }
  std::string describe() const {
    std::string d = ::sdnn::detail::concat("conv16_auto<", value_type_name<T>(), ">: ", reason_, "; runs ");
    if (sub_) d += sub_->describe();
    else if (cudnn_) d += cudnn_->describe();
    else if (lt_) d += lt_->describe();
    else if (s24_) d += s24_->describe(batch_);
    else if (sc_) d += sc_->describe(batch_);
    else d += with_tc([&](auto const& p) { return p.describe(batch_); });
    if (!sub_ && pool_ && !cudnn_)
      d += fused_pool_ ? "; the 2x2 max-pool fused into its epilogue" : "; then a 2x2 max-pool pass";
    return d;
  }
  int out_h() const { return pool_ ? s_.OH() / 2 : s_.OH(); }
  int out_w() const { return pool_ ? s_.OW() / 2 : s_.OW(); }
  std::int64_t x_elements() const { return batch_ * s_.H * s_.W * s_.C; }
  std::int64_t y_elements() const { return batch_ * out_h() * out_w() * s_.K; }
  std::size_t workspace_bytes() const noexcept { return sub_ ? sub_->workspace_bytes() : ws_bytes_; }

  // y (NHWC, batch x out_h() x out_w() x K) = pool?(relu?(conv(x) + bias)), x NHWC batch x H x W x C.
  // Where the plan pools in the TMA kernel's epilogue (describe() says so), x must be 16-byte
  // aligned (the kernel reads it through a tensor map); another x is refused before any launch.
  void run(cuda_exec exec, T const* x, T* y, workspace ws = {}) const {
    SDNN_EXPECTS(x != nullptr && y != nullptr, "conv16_auto_plan: x and y must not be null");
    runs_.note(exec);
    if (sub_) sub_->run(exec, x, y, ws);
    else run_path(exec, x, y, ws);
  }

 private:
  // A 1x1, stride-1, unpadded layer (any dilation) is the plain product Y = X Wg^T over the NHWC
  // activations, with channel counts that give 16-byte rows.
  bool is_plain_gemm() const {
    return s_.R == 1 && s_.S == 1 && s_.stride_h == 1 && s_.stride_w == 1 && s_.pad_h == 0 && s_.pad_w == 0 &&
           s_.C % 8 == 0 && s_.K % 8 == 0;
  }
  // The tensor-core plan in use (not for the cuDNN, cuBLASLt, 2:4 or small-C paths).
  template <class F>
  auto with_tc(F&& f) const {
    if (dense_) return f(*dense_);
    if (blocks_) return f(*blocks_);
    return f(*tiles_);
  }

  void build(conv16_path p, dense_view<T const> w, std::vector<float> const& bias, cuda_exec own) {
    lt_.reset();
    cudnn_.reset();
    dense_.reset();
    blocks_.reset();
    tiles_.reset();
    s24_.reset();
    sc_.reset();
    pool_buf_ = {};
    switch (p) {
      case conv16_path::cudnn:
        cudnn_ = std::make_unique<vendor::cudnn_conv2d_nhwc<T>>(s_, batch_, w, bias, relu_, pool_, own);
        break;
      case conv16_path::tc_dense: {
        dense_matrix<T> d(w.rows, w.cols);
        for (std::int64_t i = 0; i < w.rows; ++i)
          for (std::int64_t j = 0; j < w.cols; ++j) d(i, j) = w(i, j);
        dense_ = std::make_unique<tc_conv_plan<policy::tc_dense_mma, T>>(s_, d, own);
        break;
      }
      case conv16_path::tc_blocks64x32:
      case conv16_path::tc_blocks32:
      case conv16_path::tc_blocks16: {
        int const br = p == conv16_path::tc_blocks64x32 ? 64 : p == conv16_path::tc_blocks32 ? 32 : 16;
        int const bc = p == conv16_path::tc_blocks16 ? 16 : 32;
        blocks_ = std::make_unique<tc_conv_plan<policy::tc_block_sparse_mma, T>>(
            s_, block_sparse_from_dense(w, br, bc), own, plan_options{}, policy::tc_shape::tiled);
        break;
      }
      case conv16_path::tc_blocks64x32_tma:
      case conv16_path::tc_blocks32_tma: {
        int const br = p == conv16_path::tc_blocks64x32_tma ? 64 : 32;
        blocks_ = std::make_unique<tc_conv_plan<policy::tc_block_sparse_mma, T>>(
            s_, block_sparse_from_dense(w, br, 32), own, plan_options{}, policy::tc_shape::tma);
        break;
      }
      case conv16_path::tc_sparse24:  // a filter that is not 2:4 is refused here, naming its first bad group
        s24_ = std::make_unique<sparse24_conv_plan<T>>(s_, sparse24_from_dense(w), own);
        break;
      case conv16_path::small_c:
        sc_ = std::make_unique<small_c_conv_plan<T>>(s_, w, own);
        break;
      case conv16_path::cublaslt_1x1:
        lt_ = std::make_unique<vendor::cublaslt_linear16<T>>(batch_ * s_.H * s_.W, s_.K, s_.C, w, bias, relu_, own);
        break;
      default:
        tiles_ = std::make_unique<tc_conv_plan<policy::tc_tile_offsets_mma, T>>(s_, tile_offsets_from_dense(w), own);
    }
  }
  // The epilogue and the pool's staging buffer of a tensor-core path.
  void finish(cuda_exec own) {
    epi_ = {};
    epi_.bias = bias_dev_.size() ? bias_dev_.data() : nullptr;
    epi_.relu = relu_;
    ws_bytes_ = cudnn_ ? cudnn_->workspace_bytes()
                       : lt_  ? 0  // the cuBLASLt plan owns its workspace
                       : s24_ ? s24_->workspace_bytes()
                       : sc_  ? 0
                              : with_tc([](auto const& p) { return p.workspace_bytes(); });
    // The TMA block kernel pools in its epilogue (for any 16-byte-aligned input): no staging buffer.
    fused_pool_ = pool_ && blocks_ && blocks_->fuses_pool2x2(batch_);
    if (!cudnn_ && pool_ && !fused_pool_)
      pool_buf_ = device_buffer<T>(std::size_t(batch_ * s_.OH() * s_.OW() * s_.K), own);
  }
  void run_path(cuda_exec exec, T const* x, T* y, workspace ws) const {
    if (cudnn_) {
      cudnn_->run(exec, x, y, ws);
      return;
    }
    if (fused_pool_) {
      // fuses_pool2x2(batch_) held at plan time; of the input it asks only 16-byte alignment.
      SDNN_EXPECTS(reinterpret_cast<std::uintptr_t>(x) % 16 == 0, "conv16_auto_plan: ", conv16_path_name(path_),
                   " pools in the TMA kernel, which reads x through a tensor map: x must be 16-byte aligned");
      blocks_->run_pool2x2(exec, x, batch_, y, epi_);
      return;
    }
    T* out = pool_ ? const_cast<T*>(pool_buf_.data()) : y;
    if (lt_) lt_->run(exec, x, out);
    else if (s24_) s24_->run(exec, x, batch_, out, epi_, ws);
    else if (sc_) sc_->run(exec, x, batch_, out, epi_);
    else
      with_tc([&](auto const& p) {
        p.run(exec, x, batch_, out, epi_, ws);
        return 0;
      });
    if (pool_) conv::detail::nhwc_max_pool2x2(out, y, batch_, s_.OH(), s_.OW(), s_.K, exec);
  }

  conv::conv_shape s_;
  std::int64_t batch_ = 0;
  bool relu_ = false, pool_ = false;
  bool fused_pool_ = false;  // the pool runs in the TMA block kernel's epilogue (finish())
  conv16_path path_ = conv16_path::cudnn;
  std::string reason_;
  device_buffer<float> bias_dev_;
  basic_epilogue<float> epi_{};
  std::size_t ws_bytes_ = 0;
  std::unique_ptr<vendor::cudnn_conv2d_nhwc<T>> cudnn_;
  std::unique_ptr<tc_conv_plan<policy::tc_dense_mma, T>> dense_;
  std::unique_ptr<tc_conv_plan<policy::tc_block_sparse_mma, T>> blocks_;
  std::unique_ptr<tc_conv_plan<policy::tc_tile_offsets_mma, T>> tiles_;
  std::unique_ptr<vendor::cublaslt_linear16<T>> lt_;
  std::unique_ptr<sparse24_conv_plan<T>> s24_;
  std::unique_ptr<small_c_conv_plan<T>> sc_;
  device_buffer<T> pool_buf_;
  std::unique_ptr<conv16_auto_plan> sub_;  // after a tuning run: the winner's own plan, as timed
  ::sdnn::detail::run_streams runs_;
};

}  // namespace sdnn::ops

#endif  // SDNN_HAS_CUDNN
