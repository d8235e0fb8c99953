// sdnn/train/kernel/mixed_precision.cuh - device kernels of mixed-precision training
// (train/op/mixed_mlp.cuh): the bias + activation forward, the activation backward with the
// bias gradient, the block SDDMM weight gradient on the tensor cores, the loss-scale
// bookkeeping (unscale and finiteness check, the scale update), the group-lasso gradient and the
// SGD / Adam steps that keep a mask and write the low-precision copy of the weights. Rules and
// host oracle: train/reference/mixed_precision.hpp. No floating-point atomics: every result is
// deterministic run to run. Nothing here synchronises.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>
#include <type_traits>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/numeric.cuh"
#include "sdnn/core/numeric.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/train/mixed_precision.hpp"

namespace sdnn::kernels {

namespace mixed_detail {

inline constexpr int threads = 256;

inline unsigned grid_for(std::int64_t n, int per_block) {
  std::int64_t const b = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

// Sum of one value per thread over the block (blockDim.x a multiple of 32, <= 1024): a fixed
// shuffle tree per warp, then warp 0 over the warp sums. Deterministic. Every thread gets it.
__device__ inline float block_sum(float v, float* scratch /* [32] shared */) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  int const lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  int const warps = blockDim.x >> 5;
  float t = lane < warps ? scratch[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  __syncthreads();  // scratch may be reused by the caller
  return t;
}

}  // namespace mixed_detail

// ---- forward epilogue --------------------------------------------------------------------

// y(r, j) = act(p(r, j) + bias[j]) rounded to Out once; p is the float GEMM result.
template <class Out>
__global__ void bias_act_forward_kernel(dense_view<float const> p, float const* bias, bool relu, dense_view<Out> y) {
  std::int64_t const n = p.rows * p.cols;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < n;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t const r = e / p.cols, j = e % p.cols;
    float a = p(r, j);
    if (bias) a = __fadd_rn(a, bias[j]);
    if (relu && a <= 0.0f) a = 0.0f;  // NaN stays NaN
    y(r, j) = value_cast<Out>(a);
  }
}

template <class Out>
void bias_act_forward(dense_view<float const> p, float const* bias, bool relu, dense_view<Out> y, cuda_exec exec) {
  std::int64_t const n = p.rows * p.cols;
  if (n <= 0) return;
  bias_act_forward_kernel<<<mixed_detail::grid_for(n, mixed_detail::threads), mixed_detail::threads, 0,
                            exec.stream>>>(p, bias, relu, y);
  SDNN_CUDA_CHECK_LAUNCH();
}

// ---- activation backward + bias gradient ---------------------------------------------------

// Rows are taken in chunks of act_backward_chunk: one thread per (column j, chunk) walks its rows
// ascending: g = dy(r, j) * (*scale) (scale nullptr: 1), zeroed where relu and y(r, j) <= 0 (y: the
// stored activation; nullptr: no activation); dp(r, j) = T(g); the chunk's float sum of g goes to
// dbias[j] (one chunk) or to partial[chunk * cols + j], which a second pass adds in chunk order.
// Bitwise train::reference::act_backward.
inline constexpr std::int64_t act_backward_chunk = 256;

template <class Y, class T>
__global__ void act_backward_kernel(dense_view<float const> dy, Y const* y, std::int64_t ldy, float const* scale,
                                    dense_view<T> dp, float* sums) {
  float const s = scale ? *scale : 1.0f;
  std::int64_t const r0 = std::int64_t(blockIdx.y) * act_backward_chunk;
  std::int64_t const r1 = r0 + act_backward_chunk < dy.rows ? r0 + act_backward_chunk : dy.rows;
  for (std::int64_t j = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; j < dy.cols;
       j += std::int64_t(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (std::int64_t r = r0; r < r1; ++r) {
      float g = scale ? __fmul_rn(dy(r, j), s) : dy(r, j);
      if (y && !(value_cast<float>(y[r * ldy + j]) > 0.0f)) g = 0.0f;
      dp(r, j) = value_cast<T>(g);
      sum = __fadd_rn(sum, g);
    }
    if (sums) sums[std::int64_t(blockIdx.y) * dy.cols + j] = sum;
  }
}

template <class F>  // float; a template so that every translation unit may define it
__global__ void sum_chunks_kernel(F const* partial, std::int64_t chunks, std::int64_t cols, F* out) {
  for (std::int64_t j = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; j < cols;
       j += std::int64_t(gridDim.x) * blockDim.x) {
    F t = partial[j];
    for (std::int64_t c = 1; c < chunks; ++c) t = __fadd_rn(t, partial[c * cols + j]);
    out[j] = t;
  }
}

// The partial sums act_backward needs for rows x cols (0: none).
inline std::int64_t act_backward_scratch(std::int64_t rows, std::int64_t cols) {
  std::int64_t const chunks = (rows + act_backward_chunk - 1) / act_backward_chunk;
  return chunks > 1 ? chunks * cols : 0;
}

// partial: act_backward_scratch(dy.rows, dy.cols) floats (may be nullptr when that is 0 or
// dbias is nullptr).
template <class Y, class T>
void act_backward(dense_view<float const> dy, Y const* y, std::int64_t ldy, float const* scale, dense_view<T> dp,
                  float* dbias, cuda_exec exec, float* partial = nullptr) {
  if (dy.cols <= 0) return;
  if (dy.rows <= 0) {  // an empty batch: the bias gradient is the empty sum
    if (dbias) SDNN_CUDA_CHECK(cudaMemsetAsync(dbias, 0, static_cast<std::size_t>(dy.cols) * sizeof(float), exec.stream));
    return;
  }
  std::int64_t const chunks = (dy.rows + act_backward_chunk - 1) / act_backward_chunk;
  SDNN_EXPECTS(chunks <= 65535, "act_backward: ", dy.rows, " rows are more than 65535 chunks of ",
               act_backward_chunk);
  SDNN_EXPECTS(!dbias || chunks == 1 || partial, "act_backward: ", dy.rows,
               " rows need act_backward_scratch floats of scratch for the bias gradient");
  dim3 const grid(mixed_detail::grid_for(dy.cols, 128), static_cast<unsigned>(chunks));
  act_backward_kernel<<<grid, 128, 0, exec.stream>>>(dy, y, ldy, scale, dp, !dbias ? nullptr : chunks == 1 ? dbias : partial);
  SDNN_CUDA_CHECK_LAUNCH();
  if (dbias && chunks > 1) {
    sum_chunks_kernel<float><<<mixed_detail::grid_for(dy.cols, 128), 128, 0, exec.stream>>>(partial, chunks, dy.cols, dbias);
    SDNN_CUDA_CHECK_LAUNCH();
  }
}

// ---- block SDDMM: the weight gradient on kept blocks only ----------------------------------

// dW (out x in, row-major float, ld ldw) = dP^T X on the kept 32 x 32 blocks only: blockIdx.x
// names a kept block (blocks[b] = block_row * block_cols + block_col); its 4 warps each own a
// 16 x 16 quarter and accumulate 16-row slices of the batch with one bf16/fp16 wmma each,
// loading straight from global memory. Invariants (checked by the launcher's caller): the
// batch, `in` and `out` are multiples of 16, the leading dimensions multiples of 8 and the base
// pointers 32-byte aligned, so every wmma load and store is legal; a quarter that lies outside
// the matrix (the last block column or row of a dimension that is 16 mod 32) is skipped.
template <class T>
__global__ void __launch_bounds__(128) block_sddmm_kernel(dense_view<T const> x, dense_view<T const> dp,
                                                          std::int32_t const* blocks, std::int32_t block_cols,
                                                          float* dw, std::int64_t ldw, std::int64_t out,
                                                          std::int64_t in) {
  using namespace nvcuda;
  using W = native_t<T>;  // the CUDA type wmma knows, with T's bits
  std::int32_t const b = blocks[blockIdx.x];
  int const warp = threadIdx.x >> 5;
  std::int64_t const o0 = std::int64_t(b / block_cols) * 32 + (warp >> 1) * 16;
  std::int64_t const i0 = std::int64_t(b % block_cols) * 32 + (warp & 1) * 16;
  if (o0 >= out || i0 >= in) return;  // warp-uniform
  wmma::fragment<wmma::matrix_a, 16, 16, 16, W, wmma::col_major> a;  // dP^T: (o, r) at dp[r * ld + o]
  wmma::fragment<wmma::matrix_b, 16, 16, 16, W, wmma::row_major> bm;  // X: (r, i) at x[r * ld + i]
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  W const* pa = to_native(dp.data);
  W const* pb = to_native(x.data);
  for (std::int64_t r = 0; r < x.rows; r += 16) {
    wmma::load_matrix_sync(a, pa + r * dp.ld + o0, static_cast<unsigned>(dp.ld));
    wmma::load_matrix_sync(bm, pb + r * x.ld + i0, static_cast<unsigned>(x.ld));
    wmma::mma_sync(acc, a, bm, acc);
  }
  wmma::store_matrix_sync(dw + o0 * ldw + i0, acc, static_cast<unsigned>(ldw), wmma::mem_row_major);
}

template <class T>
void block_sddmm(dense_view<T const> x, dense_view<T const> dp, std::int32_t const* blocks, std::int32_t nblocks,
                 std::int32_t block_cols, float* dw, std::int64_t ldw, std::int64_t out, std::int64_t in,
                 cuda_exec exec) {
  if (nblocks <= 0) return;
  block_sddmm_kernel<T><<<static_cast<unsigned>(nblocks), 128, 0, exec.stream>>>(x, dp, blocks, block_cols, dw, ldw,
                                                                               out, in);
  SDNN_CUDA_CHECK_LAUNCH();
}

// ---- loss scaling --------------------------------------------------------------------------

// g[e] = g[e] * st->inv_scale; any non-finite result sets st->found_inf (every writer stores
// the same 1: the outcome does not depend on the schedule).
// (Every kernel here is a template, so that each translation unit including this header gets
// its own instance rather than a second definition.)
template <class State>
__global__ void unscale_check_kernel(float* g, std::int64_t n, State* st) {
  float const inv = st->inv_scale;
  bool bad = false;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < n;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    float const v = __fmul_rn(g[e], inv);
    g[e] = v;
    if (!isfinite(v)) bad = true;
  }
  if (bad) st->found_inf = 1;
}

inline void unscale_check(float* g, std::int64_t n, train::step_state* st, cuda_exec exec) {
  if (n <= 0) return;
  unscale_check_kernel<train::step_state>
      <<<mixed_detail::grid_for(n, mixed_detail::threads), mixed_detail::threads, 0, exec.stream>>>(g, n, st);
  SDNN_CUDA_CHECK_LAUNCH();
}

// After every parameter's step: the loss-scale update and the step counters
// (train::finish_step's rule).
template <class State>
__global__ void finish_step_kernel(State* st, train::loss_scale_rule rule, train::optimizer_rule opt) {
  train::finish_step(*st, rule, opt);
}

inline void finish_step(train::step_state* st, train::loss_scale_rule const& rule,
                        train::optimizer_rule const& opt, cuda_exec exec) {
  finish_step_kernel<train::step_state><<<1, 1, 0, exec.stream>>>(st, rule, opt);
  SDNN_CUDA_CHECK_LAUNCH();
}

// Records one step's loss (a device double): adds it to st->loss_sum and, when it is not
// finite and none was before, st->first_bad_step = st->iteration.
template <class State>
__global__ void track_loss_kernel(double const* loss, State* st) {
  train::track_loss(*st, *loss);
}

inline void track_loss(double const* loss, train::step_state* st, cuda_exec exec) {
  track_loss_kernel<train::step_state><<<1, 1, 0, exec.stream>>>(loss, st);
  SDNN_CUDA_CHECK_LAUNCH();
}

// ---- group lasso ---------------------------------------------------------------------------

// One block per group g (grid-strided): norm = sqrt(sum of w[idx]^2) (per-thread strided
// partials, then block_sum: deterministic, not the host's serial order), then
// grad[idx] += lambda * (w[idx] / norm) where norm > 0. Skipped when st->found_inf.
template <class State>
__global__ void group_lasso_grad_kernel(float const* w, std::int64_t const* ptr, std::int64_t const* idx,
                                        std::int64_t groups, float lambda, float* grad, State const* st) {
  __shared__ float scratch[32];
  if (st->found_inf) return;
  for (std::int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    float s = 0.0f;
    for (std::int64_t q = ptr[g] + threadIdx.x; q < ptr[g + 1]; q += blockDim.x) {
      float const v = w[idx[q]];
      s = __fadd_rn(s, __fmul_rn(v, v));
    }
    float const norm = sqrtf(mixed_detail::block_sum(s, scratch));
    if (!(norm > 0.0f)) continue;
    for (std::int64_t q = ptr[g] + threadIdx.x; q < ptr[g + 1]; q += blockDim.x) {
      std::int64_t const e = idx[q];
      grad[e] = __fadd_rn(grad[e], __fmul_rn(lambda, __fdiv_rn(w[e], norm)));
    }
  }
}

inline void group_lasso_grad(float const* w, std::int64_t const* ptr, std::int64_t const* idx, std::int64_t groups,
                             float lambda, float* grad, train::step_state const* st, cuda_exec exec) {
  if (groups <= 0 || lambda == 0.0f) return;
  group_lasso_grad_kernel<train::step_state><<<mixed_detail::grid_for(groups, 1), mixed_detail::threads, 0,
                                               exec.stream>>>(
      w, ptr, idx, groups, lambda, grad, st);
  SDNN_CUDA_CHECK_LAUNCH();
}

// ---- optimizer step ------------------------------------------------------------------------

// train::optimizer_update on every element (skipped entirely when st->found_inf), then
// low[e] = Low(w[e]) when low is set: the forward's copy of the weights follows each step.
template <class Low>
__global__ void optimizer_step_kernel(float* w, float const* g, float* m, float* v, std::uint8_t const* mask,
                                      Low* low, std::int64_t n, train::optimizer_rule rule,
                                      train::step_state const* st) {
  if (st->found_inf) return;
  train::adam_bias const bc = train::adam_bias_correction(rule, *st);
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < n;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    float we = w[e], me = m ? m[e] : 0.0f, ve = v ? v[e] : 0.0f;
    train::optimizer_update(rule, bc, mask ? mask[e] != 0 : true, g[e], we, me, ve);
    w[e] = we;
    if (m) m[e] = me;
    if (v) v[e] = ve;
    if (low) low[e] = value_cast<Low>(we);
  }
}

template <class Low>
void optimizer_step(float* w, float const* g, float* m, float* v, std::uint8_t const* mask, Low* low, std::int64_t n,
                    train::optimizer_rule const& rule, train::step_state const* st,
                    cuda_exec exec) {
  if (n <= 0) return;
  optimizer_step_kernel<Low><<<mixed_detail::grid_for(n, mixed_detail::threads), mixed_detail::threads, 0,
                               exec.stream>>>(w, g, m, v, mask, low, n, rule, st);
  SDNN_CUDA_CHECK_LAUNCH();
}

// low[e] = Low(w[e]) and, with a mask, w[e] = 0 where mask[e] == 0 (applied first).
template <class Low>
__global__ void mask_and_round_kernel(float* w, std::uint8_t const* mask, Low* low, std::int64_t n) {
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < n;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    if (mask && !mask[e]) w[e] = 0.0f;
    if (low) low[e] = value_cast<Low>(w[e]);
  }
}

template <class Low>
void mask_and_round(float* w, std::uint8_t const* mask, Low* low, std::int64_t n, cuda_exec exec) {
  if (n <= 0) return;
  mask_and_round_kernel<Low><<<mixed_detail::grid_for(n, mixed_detail::threads), mixed_detail::threads, 0,
                               exec.stream>>>(w, mask, low, n);
  SDNN_CUDA_CHECK_LAUNCH();
}

// ---- batches and evaluation ----------------------------------------------------------------

// x.row(b) = data.row(order[first + b]) and labels_out[b] = labels[order[first + b]] for b < x.rows.
template <class T, class Label>
__global__ void gather_rows_kernel(dense_view<T const> data, Label const* labels, std::int32_t const* order,
                                   std::int64_t first, dense_view<T> x, Label* labels_out) {
  for (std::int64_t b = blockIdx.x; b < x.rows; b += gridDim.x) {
    std::int64_t const src = order ? order[first + b] : first + b;
    for (std::int64_t j = threadIdx.x; j < x.cols; j += blockDim.x) x(b, j) = data(src, j);
    if (threadIdx.x == 0 && labels_out) labels_out[b] = labels[src];
  }
}

template <class T, class Label>
void gather_rows(dense_view<T const> data, Label const* labels, std::int32_t const* order, std::int64_t first,
                 dense_view<T> x, Label* labels_out, cuda_exec exec) {
  if (x.rows <= 0) return;
  gather_rows_kernel<<<mixed_detail::grid_for(x.rows, 1), 128, 0, exec.stream>>>(data, labels, order, first, x,
                                                                                labels_out);
  SDNN_CUDA_CHECK_LAUNCH();
}

// *correct += the rows whose first maximal logit is at their label (one thread per row; the
// integer atomic's sum does not depend on the order).
template <class Label>
__global__ void count_correct_kernel(dense_view<float const> logits, Label const* labels,
                                     unsigned long long* correct) {
  for (std::int64_t r = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; r < logits.rows;
       r += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t best = 0;
    for (std::int64_t j = 1; j < logits.cols; ++j)
      if (logits(r, j) > logits(r, best)) best = j;
    if (best == static_cast<std::int64_t>(labels[r])) atomicAdd(correct, 1ull);
  }
}

template <class Label>
void count_correct(dense_view<float const> logits, Label const* labels, unsigned long long* correct,
                   cuda_exec exec) {
  if (logits.rows <= 0) return;
  count_correct_kernel<<<mixed_detail::grid_for(logits.rows, 128), 128, 0, exec.stream>>>(logits, labels, correct);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace sdnn::kernels
