// sdnn/conv/vendor/cudnn16.cuh - vendor::cudnn_conv2d_nhwc<T>: the dense 16-bit (bf16 / fp16) NHWC
// convolution baseline through cuDNN for the implicit-GEMM convolution, with bias, ReLU and an
// optional 2x2 max-pool (needs SDNN_HAS_CUDNN, i.e. linking sdnn::cudnn; without it this header
// declares nothing). The constructor plans and SYNCHRONISES: it chooses the forward algorithm with
// cudnnFindConvolutionForwardAlgorithm, re-timing its four fastest, once per (layer, batch, T, GPU)
// in this process (later plans of the same key read the cached choice); run() only enqueues on
// exec.stream.
#pragma once

#if defined(SDNN_HAS_CUDNN)

#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "sdnn/conv/kernel/nhwc_epilogue.cuh"
#include "sdnn/conv/nhwc.hpp"
#include "sdnn/conv/shape.hpp"
#include "sdnn/conv/vendor/cudnn.cuh"
#include "sdnn/core/cuda.cuh"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/memory.cuh"
#include "sdnn/core/numeric.cuh"
#include "sdnn/core/plan.cuh"
#include "sdnn/formats/dense.hpp"

namespace sdnn::vendor {

// A forward algorithm as planned: what cudnnFindConvolutionForwardAlgorithm timed fastest.
struct cudnn_conv16_choice {
  cudnnConvolutionFwdAlgo_t algo{};
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  std::size_t workspace = 0;  // bytes cuDNN needs for algo
  float time_ms = 0;          // its time when searched: cuDNN's, or the plan's median when re-timed
};

namespace detail {
// The process-wide cache of algorithm choices: key = (geometry, batch, data type, device ordinal).
using cudnn_conv16_key = std::tuple<int, int, int, int, int, int, int, int, int, int, int, int, std::int64_t, int, int>;
struct cudnn_conv16_cache {
  std::mutex mu;
  std::map<cudnn_conv16_key, cudnn_conv16_choice> choices;
  std::int64_t searches = 0;
};
inline cudnn_conv16_cache& conv16_cache() {
  static cudnn_conv16_cache c;  // one per process (inline function: one instance across translation units)
  return c;
}
inline cudnn_conv16_key conv16_key(conv::conv_shape const& s, std::int64_t batch, cudnnDataType_t dt, int device) {
  return {s.C, s.H, s.W, s.K, s.R, s.S, s.stride_h, s.stride_w, s.pad_h, s.pad_w, s.dil_h, s.dil_w, batch,
          static_cast<int>(dt), device};
}
}  // namespace detail

// How many algorithm searches this process has made, and forgetting the cached choices (tests, or
// after a change cuDNN cannot see, e.g. another process now sharing the GPU).
inline std::int64_t cudnn_conv16_searches() {
  auto& c = detail::conv16_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.searches;
}
inline void cudnn_conv16_cache_clear() {
  auto& c = detail::conv16_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.choices.clear();
}

struct cudnn_conv16_options {
  // Bias + ReLU inside cudnnConvolutionBiasActivationForward when relu is set, a trial call at
  // plan time succeeds for the chosen algorithm and it is faster than the separate pass, both
  // timed by this plan (cuDNN then adds the bias rounded to T); otherwise cudnnConvolutionForward
  // and one elementwise pass (the bias in float, on the output rounded to T).
  bool fuse = true;
  bool own_workspace = true;  // false: every run() is given a workspace of workspace_bytes()
};

// y = pool2x2?(relu?(conv(x, W) + bias)), all NHWC: x batch x H x W x C, W the KRSC filter (= the
// GEMM view Wg, K x R*S*C, conv/nhwc.hpp), y batch x OH' x OW' x K (OH' = OH, or OH/2 pooled).
// T: sdnn::bf16 or sdnn::fp16 (CUDNN_DATA_BFLOAT16 / CUDNN_DATA_HALF), float compute type, tensor-op
// math allowed. Any stride, padding and dilation of conv_shape; the batch is fixed at plan time.
template <class T>
class cudnn_conv2d_nhwc {
  static_assert(is_16bit_float_v<T>, "cudnn_conv2d_nhwc: T must be sdnn::bf16 or sdnn::fp16");

 public:
  static constexpr cudnnDataType_t data_type = std::is_same_v<T, bf16> ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;

  // Why a layer cannot be planned (host-side checks only; cuDNN may still refuse at plan time).
  static plan_status can_implement(conv::conv_shape const& s, std::int64_t batch, bool pool2x2) {
    try {
      conv::check_implicit_gemm_extents(s, batch);  // also bounds cuDNN's int descriptor arguments
    } catch (::sdnn::error const& e) {
      return plan_status::failure(e.what());
    }
    if (pool2x2 && (s.OH() < 2 || s.OW() < 2))
      return plan_status::failure(::sdnn::detail::concat("cudnn_conv2d_nhwc: a 2x2 pool needs an output of at least 2 x 2, got ",
                                                         s.OH(), " x ", s.OW()));
    return {};
  }

  // Plans (SYNCHRONISES exec.stream): checks, uploads w (host, K x R*S*C) and bias (K floats or
  // empty), sets the descriptors, chooses the algorithm (cached, see the file comment), tries the
  // fused epilogue (opt.fuse) and allocates the workspace.
  cudnn_conv2d_nhwc(conv::conv_shape shape, std::int64_t batch, dense_view<T const> w_gemm, std::vector<float> bias,
                    bool relu, bool pool2x2, cuda_exec exec, cudnn_conv16_options opt = {})
      : s_(shape), batch_(batch), relu_(relu), pool_(pool2x2), runs_(exec) {
    ::sdnn::detail::implementable(can_implement(s_, batch_, pool_), 0);
    SDNN_EXPECTS_DIMS(w_gemm.rows == s_.K && w_gemm.cols == conv::gemm_reduction(s_) && w_gemm.ld >= w_gemm.cols,
                      "cudnn_conv2d_nhwc: the weights are ", w_gemm.rows, " x ", w_gemm.cols, " (ld ", w_gemm.ld,
                      "), the layer needs K x R*S*C = ", s_.K, " x ", conv::gemm_reduction(s_));
    SDNN_EXPECTS_DIMS(bias.empty() || bias.size() == static_cast<std::size_t>(s_.K), "cudnn_conv2d_nhwc: bias must have K = ",
                      s_.K, " entries (or none), got ", bias.size());
    SDNN_CUDNN_CHECK(cudnnCreate(&d_.h));
    SDNN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_.x));
    SDNN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_.y));
    SDNN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_.b));
    SDNN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d_.f));
    SDNN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d_.c));
    SDNN_CUDNN_CHECK(cudnnCreateActivationDescriptor(&d_.a));
    SDNN_CUDNN_CHECK(cudnnSetStream(d_.h, exec.stream));

    cuda_exec const own = runs_.owned(exec);
    std::int64_t const RSC = conv::gemm_reduction(s_);
    host_buffer<T> hw(static_cast<std::size_t>(s_.K * RSC));
    for (std::int64_t k = 0; k < s_.K; ++k)
      for (std::int64_t j = 0; j < RSC; ++j) hw[static_cast<std::size_t>(k * RSC + j)] = w_gemm(k, j);
    w_ = copy_to<device_space>(hw, own);
    if (!bias.empty()) {
      host_buffer<float> hb(bias.begin(), bias.end());
      bias_ = copy_to<device_space>(hb, own);
    }

    int const n = static_cast<int>(batch_), OH = s_.OH(), OW = s_.OW();
    SDNN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d_.x, CUDNN_TENSOR_NHWC, data_type, n, s_.C, s_.H, s_.W));
    SDNN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d_.y, CUDNN_TENSOR_NHWC, data_type, n, s_.K, OH, OW));
    SDNN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(d_.f, data_type, CUDNN_TENSOR_NHWC, s_.K, s_.C, s_.R, s_.S));
    SDNN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d_.c, s_.pad_h, s_.pad_w, s_.stride_h, s_.stride_w, s_.dil_h,
                                                     s_.dil_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    SDNN_CUDNN_CHECK(cudnnSetConvolutionMathType(d_.c, CUDNN_TENSOR_OP_MATH));
    int on = 1, oc = 0, oh = 0, ow = 0;  // cuDNN's view of the output must be ours
    SDNN_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(d_.c, d_.x, d_.f, &on, &oc, &oh, &ow));
    SDNN_EXPECTS(on == n && oc == s_.K && oh == OH && ow == OW, "cudnn_conv2d_nhwc: cuDNN computes a ", on, " x ", oc,
                 " x ", oh, " x ", ow, " output, conv_shape ", n, " x ", s_.K, " x ", OH, " x ", OW);

    choose_algorithm(own);
    SDNN_CUDNN_CHECK(cudnnSetConvolutionMathType(d_.c, choice_.math));

    if (relu_ && opt.fuse) try_fused(own, bias);

    conv_bytes_ = pool_ ? ::sdnn::detail::workspace_carver::bytes_of<T>(static_cast<std::size_t>(pixels() * s_.K)) : 0;
    ws_bytes_ = conv_bytes_ + choice_.workspace;
    if (opt.own_workspace && ws_bytes_) ws_ = device_buffer<unsigned char>(ws_bytes_, own);
    SDNN_CUDA_CHECK(cudaStreamSynchronize(exec.stream));
  }

  cudnn_conv2d_nhwc(cudnn_conv2d_nhwc const&) = delete;
  cudnn_conv2d_nhwc& operator=(cudnn_conv2d_nhwc const&) = delete;

  static std::string name() { return ::sdnn::detail::concat("cudnn_conv2d_nhwc<", value_type_name<T>(), ">"); }
  conv::conv_shape const& shape() const noexcept { return s_; }
  std::int64_t batch() const noexcept { return batch_; }
  // Output extents (after the pool when there is one) and element counts of x and y.
  int out_h() const { return pool_ ? conv::pooled_extent(s_.OH()) : s_.OH(); }
  int out_w() const { return pool_ ? conv::pooled_extent(s_.OW()) : s_.OW(); }
  std::int64_t x_elements() const { return batch_ * s_.H * s_.W * s_.C; }
  std::int64_t y_elements() const { return batch_ * out_h() * out_w() * s_.K; }

  cudnnConvolutionFwdAlgo_t algorithm() const noexcept { return choice_.algo; }
  cudnnMathType_t math_type() const noexcept { return choice_.math; }
  cudnn_conv16_choice const& choice() const noexcept { return choice_; }
  bool searched() const noexcept { return searched_; }  // this plan ran the search (not a cache hit)
  bool fused() const noexcept { return fused_; }        // bias + ReLU inside cuDNN
  std::string const& fusion_note() const noexcept { return fusion_note_; }  // why not fused, when tried
  std::size_t workspace_bytes() const noexcept { return ws_bytes_; }

  std::string describe() const {
    return ::sdnn::detail::concat(name(), ": batch ", batch_, ", C ", s_.C, " ", s_.H, "x", s_.W, " -> K ", s_.K, " ",
                                  s_.OH(), "x", s_.OW(), ", kernel ", s_.R, "x", s_.S, " stride ", s_.stride_h, "x",
                                  s_.stride_w, " pad ", s_.pad_h, "x", s_.pad_w, " dil ", s_.dil_h, "x", s_.dil_w,
                                  "; algo ", static_cast<int>(choice_.algo), ", math ", static_cast<int>(choice_.math),
                                  ", ", choice_.workspace, " B cuDNN workspace, ",
                                  searched_ ? "searched" : "cached choice", ", epilogue ",
                                  fused_ ? "fused (cudnnConvolutionBiasActivationForward)" : "separate pass",
                                  pool_ ? ", 2x2 max-pool" : "");
  }

  // y = pool?(relu?(conv(x) + bias)) on exec.stream; x: x_elements(), y: y_elements() device
  // elements. Never synchronises. One run at a time per plan (runs share the cuDNN handle, whose
  // stream run() sets; two streams: two plans, which share the cached algorithm choice).
  void run(cuda_exec exec, T const* x, T* y, workspace ws = {}) const {
    SDNN_EXPECTS(x != nullptr && y != nullptr, name(), ": x and y must not be null");
    workspace const w = ws_bytes_ ? ::sdnn::detail::plan_workspace(ws, ws_, ws_bytes_, "cudnn_conv2d_nhwc") : workspace{};
    runs_.note(exec);
    SDNN_CUDNN_CHECK(cudnnSetStream(d_.h, exec.stream));
    auto* base = static_cast<unsigned char*>(w.data);
    T* conv_out = pool_ ? reinterpret_cast<T*>(base) : y;
    void* cudnn_ws = choice_.workspace ? static_cast<void*>(base + conv_bytes_) : nullptr;
    float const one = 1.0f, zero = 0.0f;
    if (fused_) {
      // alpha2 = 0: z (= the output) is not added.
      SDNN_CUDNN_CHECK(cudnnConvolutionBiasActivationForward(
          d_.h, &one, d_.x, to_native(x), d_.f, to_native(w_.data()), d_.c, choice_.algo, cudnn_ws, choice_.workspace, &zero,
          d_.y, to_native(conv_out), d_.b, to_native(tbias_.data()), d_.a, d_.y, to_native(conv_out)));
    } else {
      SDNN_CUDNN_CHECK(cudnnConvolutionForward(d_.h, &one, d_.x, to_native(x), d_.f, to_native(w_.data()), d_.c, choice_.algo,
                                               cudnn_ws, choice_.workspace, &zero, d_.y, to_native(conv_out)));
      conv::detail::nhwc_bias_relu(conv_out, pixels(), s_.K, bias_.empty() ? nullptr : bias_.data(), relu_, exec);
    }
    if (pool_) conv::detail::nhwc_max_pool2x2(conv_out, y, batch_, s_.OH(), s_.OW(), s_.K, exec);
  }

  // The convolution alone into a batch x OH x OW x K output (no bias, ReLU or pool): what
  // benchmarks compare against. Uses the cuDNN part of the workspace.
  void convolution_only(cuda_exec exec, T const* x, T* y, workspace ws = {}) const {
    workspace const w = ws_bytes_ ? ::sdnn::detail::plan_workspace(ws, ws_, ws_bytes_, "cudnn_conv2d_nhwc") : workspace{};
    runs_.note(exec);
    SDNN_CUDNN_CHECK(cudnnSetStream(d_.h, exec.stream));
    void* cudnn_ws = choice_.workspace ? static_cast<void*>(static_cast<unsigned char*>(w.data) + conv_bytes_) : nullptr;
    float const one = 1.0f, zero = 0.0f;
    SDNN_CUDNN_CHECK(cudnnConvolutionForward(d_.h, &one, d_.x, to_native(x), d_.f, to_native(w_.data()), d_.c, choice_.algo,
                                             cudnn_ws, choice_.workspace, &zero, d_.y, to_native(y)));
  }

 private:
  std::int64_t pixels() const { return batch_ * s_.OH() * s_.OW(); }

  // The cached choice for this key, or a search (cuDNN times every algorithm: synchronises and
  // allocates its own scratch) whose fastest successful result is cached. The lock is held during
  // the search, so two threads planning the same layer search once.
  void choose_algorithm(cuda_exec own) {
    int dev = 0;
    SDNN_CUDA_CHECK(cudaGetDevice(&dev));
    auto& cache = detail::conv16_cache();
    auto const key = detail::conv16_key(s_, batch_, data_type, dev);
    std::lock_guard<std::mutex> lock(cache.mu);
    if (auto it = cache.choices.find(key); it != cache.choices.end()) {
      choice_ = it->second;
      return;
    }
    int returned = 0;
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    SDNN_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(d_.h, d_.x, d_.f, d_.c, d_.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                          &returned, perf));
    ++cache.searches;
    searched_ = true;
    // cuDNN times each algorithm once, so its order between close candidates changes from run to
    // run: the (up to) four fastest that succeeded are timed again here, median of 7 runs after 2,
    // each after an L2 flush.
    std::vector<cudnn_conv16_choice> top;
    for (int i = 0; i < returned && top.size() < 4; ++i)  // sorted fastest first
      if (perf[i].status == CUDNN_STATUS_SUCCESS) top.push_back({perf[i].algo, perf[i].mathType, perf[i].memory, perf[i].time});
    SDNN_EXPECTS(!top.empty(), name(), ": cuDNN found no forward algorithm for this layer (", returned, " tried)");
    if (top.size() > 1) {
      device_buffer<T> x(static_cast<std::size_t>(x_elements()), own), y(static_cast<std::size_t>(pixels() * s_.K), own);
      SDNN_CUDA_CHECK(cudaMemsetAsync(x.data(), 0x3c, x.size() * sizeof(T), own.stream));
      ::sdnn::detail::flushed_timer time(own);
      float const one = 1.0f, zero = 0.0f;
      float best = 0;
      cudnn_conv16_choice chosen = top.front();
      for (auto& c : top) {
        device_buffer<unsigned char> ws(c.workspace, own);
        SDNN_CUDNN_CHECK(cudnnSetConvolutionMathType(d_.c, c.math));
        std::vector<float> t;
        for (int r = 0; r < 9; ++r) {
          float const ms = time([&] {
            SDNN_CUDNN_CHECK(cudnnConvolutionForward(d_.h, &one, d_.x, to_native(x.data()), d_.f, to_native(w_.data()),
                                                     d_.c, c.algo, c.workspace ? ws.data() : nullptr, c.workspace,
                                                     &zero, d_.y, to_native(y.data())));
          });
          if (r >= 2) t.push_back(ms);
        }
        std::sort(t.begin(), t.end());
        c.time_ms = t[t.size() / 2];
        if (&c == &top.front() || c.time_ms < best) {
          best = c.time_ms;
          chosen = c;
        }
      }
      top.front() = chosen;
    }
    choice_ = top.front();
    cache.choices.emplace(key, choice_);
  }

  // One trial of cudnnConvolutionBiasActivationForward (bias rounded to T, ReLU) with the chosen
  // algorithm on scratch x and y; fused_ only when cuDNN accepts it (its support depends on the
  // algorithm, layout and data type).
  void try_fused(cuda_exec const& own, std::vector<float> const& bias) {
    SDNN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d_.b, CUDNN_TENSOR_NHWC, data_type, 1, s_.K, 1, 1));
    SDNN_CUDNN_CHECK(cudnnSetActivationDescriptor(d_.a, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    host_buffer<T> hb(static_cast<std::size_t>(s_.K));
    for (std::size_t k = 0; k < hb.size(); ++k) hb[k] = T(bias.empty() ? 0.0f : bias[k]);
    tbias_ = copy_to<device_space>(hb, own);
    device_buffer<T> x(static_cast<std::size_t>(batch_ * s_.H * s_.W * s_.C), own);
    device_buffer<T> y(static_cast<std::size_t>(pixels() * s_.K), own);
    device_buffer<unsigned char> ws(choice_.workspace, own);
    SDNN_CUDA_CHECK(cudaMemsetAsync(x.data(), 0x3c, x.size() * sizeof(T), own.stream));
    float const one = 1.0f, zero = 0.0f;
    cudnnStatus_t const st = cudnnConvolutionBiasActivationForward(
        d_.h, &one, d_.x, to_native(x.data()), d_.f, to_native(w_.data()), d_.c, choice_.algo, ws.data(), choice_.workspace,
        &zero, d_.y, to_native(y.data()), d_.b, to_native(tbias_.data()), d_.a, d_.y, to_native(y.data()));
    fused_ = st == CUDNN_STATUS_SUCCESS;
    if (!fused_) {
      fusion_note_ = ::sdnn::detail::concat("cudnnConvolutionBiasActivationForward: ", cudnnGetErrorString(st));
      tbias_ = device_buffer<T>();
    }
    SDNN_CUDA_CHECK(cudaStreamSynchronize(own.stream));  // the trial's errors surface here, not in a later run
    if (!fused_) return;
    // The fused call is not always the faster: for some layers cuDNN's fused kernels are slower
    // than its convolution plus the separate pass. Both are timed, alternately (3 warm-up rounds,
    // then the median of 9), and the faster kept. Per plan, not cached: the same fused call ran at
    // different speeds in plans of the same layer (each plan has its own cuDNN handle).
    ::sdnn::detail::flushed_timer time(own);
    auto fused_call = [&] {
      SDNN_CUDNN_CHECK(cudnnConvolutionBiasActivationForward(
          d_.h, &one, d_.x, to_native(x.data()), d_.f, to_native(w_.data()), d_.c, choice_.algo, ws.data(),
          choice_.workspace, &zero, d_.y, to_native(y.data()), d_.b, to_native(tbias_.data()), d_.a, d_.y,
          to_native(y.data())));
    };
    auto split_call = [&] {
      SDNN_CUDNN_CHECK(cudnnConvolutionForward(d_.h, &one, d_.x, to_native(x.data()), d_.f, to_native(w_.data()), d_.c,
                                               choice_.algo, ws.data(), choice_.workspace, &zero, d_.y,
                                               to_native(y.data())));
      conv::detail::nhwc_bias_relu(y.data(), pixels(), s_.K, bias_.empty() ? nullptr : bias_.data(), relu_, own);
    };
    std::vector<float> tf, ts;
    for (int r = 0; r < 12; ++r) {
      float const f = time(fused_call), p = time(split_call);
      if (r >= 3) tf.push_back(f), ts.push_back(p);
    }
    std::sort(tf.begin(), tf.end());
    std::sort(ts.begin(), ts.end());
    float const t_fused = tf[tf.size() / 2], t_split = ts[ts.size() / 2];
    if (t_split < t_fused) {
      fused_ = false;
      tbias_ = device_buffer<T>();
      fusion_note_ = ::sdnn::detail::concat("the separate pass was faster (", t_split * 1e3f, " us against ",
                                            t_fused * 1e3f, " us fused)");
    }
  }

  conv::conv_shape s_;
  std::int64_t batch_;
  bool relu_, pool_;
  bool searched_ = false, fused_ = false;
  std::string fusion_note_;
  cudnn_conv16_choice choice_;
  std::size_t conv_bytes_ = 0, ws_bytes_ = 0;
  // The cuDNN handle and descriptors, destroyed last (also when the constructor throws).
  struct cudnn_objects {
    cudnnHandle_t h = nullptr;
    cudnnTensorDescriptor_t x = nullptr, y = nullptr, b = nullptr;
    cudnnFilterDescriptor_t f = nullptr;
    cudnnConvolutionDescriptor_t c = nullptr;
    cudnnActivationDescriptor_t a = nullptr;
    cudnn_objects() = default;
    cudnn_objects(cudnn_objects const&) = delete;
    cudnn_objects& operator=(cudnn_objects const&) = delete;
    ~cudnn_objects() {
      using ::sdnn::detail::cudnn_check_noexcept;
      if (a) cudnn_check_noexcept(cudnnDestroyActivationDescriptor(a), "cudnnDestroyActivationDescriptor");
      if (x) cudnn_check_noexcept(cudnnDestroyTensorDescriptor(x), "cudnnDestroyTensorDescriptor");
      if (y) cudnn_check_noexcept(cudnnDestroyTensorDescriptor(y), "cudnnDestroyTensorDescriptor");
      if (b) cudnn_check_noexcept(cudnnDestroyTensorDescriptor(b), "cudnnDestroyTensorDescriptor");
      if (f) cudnn_check_noexcept(cudnnDestroyFilterDescriptor(f), "cudnnDestroyFilterDescriptor");
      if (c) cudnn_check_noexcept(cudnnDestroyConvolutionDescriptor(c), "cudnnDestroyConvolutionDescriptor");
      if (h) cudnn_check_noexcept(cudnnDestroy(h), "cudnnDestroy");
    }
  };
  cudnn_objects d_;
  // The streams it was planned or ran on: the buffers below are allocated through runs_.owned(), so
  // the destructor releases them after that work (core/plan.cuh). Declared before the buffers.
  ::sdnn::detail::run_streams runs_;
  device_buffer<T> w_;         // K x R*S*C (KRSC)
  device_buffer<float> bias_;  // [K] or empty: the separate pass
  device_buffer<T> tbias_;     // [K] rounded to T: the fused epilogue
  device_buffer<unsigned char> ws_;
};

}  // namespace sdnn::vendor

#endif  // SDNN_HAS_CUDNN
