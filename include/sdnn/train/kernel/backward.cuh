// sdnn/train/kernel/backward.cuh - device kernels of the training primitives and their launchers
// (epilogue and bias gradients, dX = dP * W^T, the SDDMM dW, softmax cross-entropy, SGD); the
// public calls (argument checks, the one-layer backward) are in train/op/backward.cuh, the rules
// and the host oracle in train/reference/backward.hpp. No floating-point atomics: every result is
// deterministic (run to run, and independent of the launch shape). Nothing here synchronises;
// every launcher enqueues on exec.stream and skips empty shapes. Orders of summation against the
// host's: docs/train.md#orders-of-summation.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "sdnn/core/cuda.cuh"
#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/exec.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn::kernels {

namespace train_detail {

inline constexpr int threads = 256;
inline constexpr unsigned max_grid = 65535;

// Rounded, never-contracted arithmetic in the accumulator type: the gradient kernels and sgd
// use it so nvcc cannot contract products and sums into FMAs; with a host compiler that does
// not contract either, the results are bitwise the host reference's.
__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ inline float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double add_rn(double a, double b) { return __dadd_rn(a, b); }

__device__ inline double inf_d() { return __longlong_as_double(0x7ff0000000000000ll); }
__device__ inline double nan_d() { return __longlong_as_double(0x7ff8000000000000ll); }

// label in [0, c) (no sign test for an unsigned label type).
template <class Label>
__device__ inline bool label_ok(Label lab, std::int64_t c) {
  if constexpr (std::is_signed_v<Label>) return lab >= 0 && static_cast<std::int64_t>(lab) < c;
  else return static_cast<std::uint64_t>(lab) < static_cast<std::uint64_t>(c);
}

inline unsigned grid_for(std::int64_t n, int per_block) {
  std::int64_t const b = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(b < 1 ? 1 : (b > max_grid ? max_grid : b));
}

}  // namespace train_detail

// ---- epilogue backward / bias gradient ---------------------------------------------------

// Columns over threads (x: blockIdx.x * blockDim.x + threadIdx.x, grid-strided); rows split
// over blockIdx.y in chunks of rows_per_y. dbias (may be nullptr) needs gridDim.y == 1 so one
// thread owns a column's whole sum, walking the rows r ascending: the host's order, so dbias
// is bitwise the host's. dp may alias dy (each element is read, then written, by one thread).
template <class T, class Acc, class Out>
__global__ void epilogue_backward_kernel(dense_view<T const> p, dense_view<T const> dy, basic_epilogue<Acc> epi,
                                         dense_view<T> dp, Out* dbias, std::int64_t rows_per_y) {
  std::int64_t const r0 = blockIdx.y * rows_per_y;
  std::int64_t const r1 = r0 + rows_per_y < p.rows ? r0 + rows_per_y : p.rows;
  for (std::int64_t j = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; j < p.cols;
       j += std::int64_t(gridDim.x) * blockDim.x) {
    Acc sum(0);
    for (std::int64_t r = r0; r < r1; ++r) {
      Acc a = value_cast<Acc>(p(r, j));
      bool const biased = epi.bias_on_zero || a != Acc(0);
      if (biased) {
        if (epi.bias) a = train_detail::add_rn(a, epi.bias[j]);
        a = train_detail::add_rn(a, epi.bias_scalar);
      }
      bool const pass = (!epi.relu || a > Acc(0)) && (!epi.has_cap || a < epi.cap);
      Acc const g = pass ? value_cast<Acc>(dy(r, j)) : Acc(0);
      dp(r, j) = value_cast<T>(g);
      if (biased) sum = train_detail::add_rn(sum, g);
    }
    if (dbias) dbias[j] = value_cast<Out>(sum);
  }
}

// dP = dY * epi'(P); dbias[j] (nullptr: skipped) = the column sums of dP over biased entries,
// stored as Out. Never synchronises.
template <class T, class Acc, class Out>
void epilogue_backward(dense_view<T const> p, dense_view<T const> dy, basic_epilogue<Acc> const& epi,
                       dense_view<T> dp, Out* dbias, cuda_exec exec) {
  using namespace train_detail;
  if (p.cols <= 0) return;
  if (p.rows <= 0) {  // the sums of no rows
    if (dbias) SDNN_CUDA_CHECK(cudaMemsetAsync(dbias, 0, static_cast<std::size_t>(p.cols) * sizeof(Out), exec.stream));
    return;
  }
  unsigned const gx = grid_for(p.cols, threads);
  // Without a bias gradient, split the rows so narrow layers still fill the device.
  std::int64_t rows_per_y = p.rows;
  if (!dbias) {
    rows_per_y = 64;
    while ((p.rows + rows_per_y - 1) / rows_per_y > max_grid) rows_per_y *= 2;
  }
  dim3 const grid(gx, static_cast<unsigned>((p.rows + rows_per_y - 1) / rows_per_y));
  epilogue_backward_kernel<<<grid, threads, 0, exec.stream>>>(p, dy, epi, dp, dbias, rows_per_y);
  SDNN_CUDA_CHECK_LAUNCH();
}

template <class T, class Out>
__global__ void bias_backward_kernel(dense_view<T const> dp, Out* dbias) {
  using Acc = accumulator_t<T>;
  for (std::int64_t j = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; j < dp.cols;
       j += std::int64_t(gridDim.x) * blockDim.x) {
    Acc sum(0);
    for (std::int64_t r = 0; r < dp.rows; ++r) sum = train_detail::add_rn(sum, value_cast<Acc>(dp(r, j)));
    dbias[j] = value_cast<Out>(sum);
  }
}

// dbias[j] = sum_r dP[r, j] (r ascending, in accumulator_t<T>). Never synchronises.
template <class T, class Out>
void bias_backward(dense_view<T const> dp, Out* dbias, cuda_exec exec) {
  if (dp.cols <= 0) return;
  bias_backward_kernel<<<train_detail::grid_for(dp.cols, train_detail::threads), train_detail::threads, 0,
                         exec.stream>>>(dp, dbias);
  SDNN_CUDA_CHECK_LAUNCH();
}

// ---- sparse_linear backward --------------------------------------------------------------

// dX[r, i] = sum_{p in row i of W} W[p] * dP[r, col[p]]; x over i, y over r (grid-strided).
// One thread per (r, i), p ascending: the host's order.
template <class T, class Index>
__global__ void backward_input_kernel(dense_view<T const> dp, csr_view<T, Index> w, dense_view<T> dx) {
  using Acc = accumulator_t<T>;
  for (std::int64_t r = blockIdx.y; r < dp.rows; r += gridDim.y) {
    T const* g = dp.row(r);
    T* out = dx.row(r);
    for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < w.rows;
         i += std::int64_t(gridDim.x) * blockDim.x) {
      Acc s(0);
      for (Index q = w.row_ptr[i]; q < w.row_ptr[i + 1]; ++q)
        s = train_detail::add_rn(s, train_detail::mul_rn(value_cast<Acc>(w.values[q]), value_cast<Acc>(g[w.col_idx[q]])));
      out[i] = value_cast<T>(s);
    }
  }
}

// dX (dp.rows x w.rows) = dP * W^T. Never synchronises.
template <class T, class Index>
void sparse_linear_backward_input(dense_view<T const> dp, csr_view<T, Index> w, dense_view<T> dx, cuda_exec exec) {
  using namespace train_detail;
  if (dp.rows <= 0 || w.rows <= 0) return;
  dim3 const grid(grid_for(w.rows, threads), static_cast<unsigned>(dp.rows < max_grid ? dp.rows : max_grid));
  backward_input_kernel<<<grid, threads, 0, exec.stream>>>(dp, w, dx);
  SDNN_CUDA_CHECK_LAUNCH();
}

// dW[p] = sum_r X[r, i] * dP[r, col[p]] for every stored p = (i, j); one warp per row i of W,
// lanes over its entries, each lane walking r ascending and skipping X[r, i] == 0: the host's
// order.
template <class T, class Index>
__global__ void backward_weight_kernel(dense_view<T const> x, dense_view<T const> dp, csr_view<T, Index> w, T* dw) {
  using Acc = accumulator_t<T>;
  int const lane = static_cast<int>(threadIdx.x) & 31;
  std::int64_t const warps = std::int64_t(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t i = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) / 32; i < w.rows; i += warps) {
    for (Index q = w.row_ptr[i] + lane; q < w.row_ptr[i + 1]; q += 32) {
      Index const j = w.col_idx[q];
      Acc s(0);
      for (std::int64_t r = 0; r < x.rows; ++r) {
        Acc const xi = value_cast<Acc>(x(r, i));
        if (xi == Acc(0)) continue;
        s = train_detail::add_rn(s, train_detail::mul_rn(xi, value_cast<Acc>(dp(r, j))));
      }
      dw[q] = value_cast<T>(s);
    }
  }
}

// dw[0 .. w.nnz) = the gradient on W's pattern. Never synchronises.
template <class T, class Index>
void sparse_linear_backward_weight(dense_view<T const> x, dense_view<T const> dp, csr_view<T, Index> w, T* dw,
                                   cuda_exec exec) {
  using namespace train_detail;
  if (w.nnz <= 0) return;
  backward_weight_kernel<<<grid_for(w.rows, threads / 32), threads, 0, exec.stream>>>(x, dp, w, dw);
  SDNN_CUDA_CHECK_LAUNCH();
}

// ---- softmax cross-entropy ---------------------------------------------------------------

// One warp per row r of logits (B x C): row_loss[r] = logsumexp(z_r) - z_r[label_r] in double,
// and (when dlogits.data) dlogits(r, j) = (softmax(z_r)_j - [j == label_r]) / B. The max is
// exact in any order; the sum of exp(z - max) is per-lane strided partials then a fixed
// shuffle tree: deterministic, NOT the host's order, and CUDA's exp/log are not glibc's, so
// the loss and the gradient match the host within a tolerance, not bitwise. A label outside
// [0, C) gives a NaN row loss and a NaN gradient row and atomicMin's its row into *bad_row (an
// integer: the lowest bad row, whatever the schedule).
template <class T, class Label>
__global__ void softmax_xent_rows_kernel(dense_view<T const> logits, Label const* labels, double* row_loss,
                                         dense_view<T> dlogits, unsigned long long* bad_row) {
  std::int64_t const B = logits.rows, C = logits.cols;
  int const lane = static_cast<int>(threadIdx.x) & 31;
  std::int64_t const warps = std::int64_t(gridDim.x) * (blockDim.x / 32);
  double const b = double(B);
  for (std::int64_t r = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) / 32; r < B; r += warps) {
    T const* z = logits.row(r);
    double m = -train_detail::inf_d();
    for (std::int64_t j = lane; j < C; j += 32) m = fmax(m, value_cast<double>(z[j]));
    for (int o = 16; o > 0; o >>= 1) m = fmax(m, __shfl_xor_sync(0xffffffffu, m, o));
    double s = 0.0;
    for (std::int64_t j = lane; j < C; j += 32) s = __dadd_rn(s, exp(value_cast<double>(z[j]) - m));
    for (int o = 16; o > 0; o >>= 1) s = __dadd_rn(s, __shfl_xor_sync(0xffffffffu, s, o));  // same tree on every lane
    auto const lab = labels[r];
    bool const ok = train_detail::label_ok(lab, C);
    std::int64_t const y = ok ? static_cast<std::int64_t>(lab) : 0;
    double const zy = C > 0 ? value_cast<double>(z[y]) : 0.0;
    if (lane == 0) {
      row_loss[r] = ok ? log(s) - (zy - m) : train_detail::nan_d();
      if (!ok) atomicMin(bad_row, static_cast<unsigned long long>(r));
    }
    __syncwarp();  // every lane's reads of row r (z[y] included) before any lane overwrites it (aliasing)
    if (dlogits.data) {
      T* d = dlogits.row(r);  // may alias z: each element is read (above, and here) before this lane writes it
      for (std::int64_t j = lane; j < C; j += 32) {
        double const e = exp(value_cast<double>(z[j]) - m);
        d[j] = value_cast<T>(ok ? (e / s - (j == y ? 1.0 : 0.0)) / b : train_detail::nan_d());
      }
    }
  }
}

// *loss = (sum_r row_loss[r]) / B: one block, thread t sums rows t, t + T, ... ascending, then a
// fixed tree over the threads (deterministic).
template <int Threads>
__global__ void __launch_bounds__(Threads) mean_kernel(double const* row_loss, std::int64_t B, double* loss) {
  __shared__ double part[Threads];
  double s = 0.0;
  for (std::int64_t r = threadIdx.x; r < B; r += Threads) s = __dadd_rn(s, row_loss[r]);
  part[threadIdx.x] = s;
  __syncthreads();
  for (int h = Threads / 2; h > 0; h >>= 1) {
    if (static_cast<int>(threadIdx.x) < h) part[threadIdx.x] = __dadd_rn(part[threadIdx.x], part[threadIdx.x + h]);
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = B > 0 ? part[0] / double(B) : 0.0;
}

// Mean softmax cross-entropy into *loss (device double); row_loss: [B] device workspace;
// bad_row: device scalar the caller set to ~0ull (receives the lowest row whose label is out
// of range). Never synchronises.
template <class T, class Label>
void softmax_cross_entropy(dense_view<T const> logits, Label const* labels, double* loss, dense_view<T> dlogits,
                           double* row_loss, unsigned long long* bad_row, cuda_exec exec) {
  using namespace train_detail;
  if (logits.rows > 0) {
    softmax_xent_rows_kernel<<<grid_for(logits.rows, threads / 32), threads, 0, exec.stream>>>(logits, labels, row_loss,
                                                                                                dlogits, bad_row);
    SDNN_CUDA_CHECK_LAUNCH();
  }
  mean_kernel<threads><<<1, threads, 0, exec.stream>>>(row_loss, logits.rows, loss);
  SDNN_CUDA_CHECK_LAUNCH();
}

// ---- SGD ---------------------------------------------------------------------------------

// The host sgd_step per element (train/reference/backward.hpp), in double with rounded operations:
//   g' = g + lambda * w;  v = mu * v + g';  w -= lr * (nesterov ? g' + mu * v : v)
template <class T>
__global__ void sgd_kernel(T* w, T const* g, T* velocity, std::int64_t n, double lr, double mu, double wd,
                           int nesterov) {
  for (std::int64_t k = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; k < n;
       k += std::int64_t(gridDim.x) * blockDim.x) {
    double const wk = value_cast<double>(w[k]);
    double const gk = __dadd_rn(value_cast<double>(g[k]), __dmul_rn(wd, wk));
    double step = gk;
    if (velocity) {
      double const v = __dadd_rn(__dmul_rn(mu, value_cast<double>(velocity[k])), gk);
      velocity[k] = value_cast<T>(v);
      step = nesterov ? __dadd_rn(gk, __dmul_rn(mu, v)) : v;
    }
    w[k] = value_cast<T>(__dsub_rn(wk, __dmul_rn(lr, step)));
  }
}

// One SGD step on n device values (velocity may be nullptr for plain SGD). Never synchronises.
template <class T>
void sgd_step(T* w, T const* g, T* velocity, std::int64_t n, double lr, double momentum, double weight_decay,
              bool nesterov, cuda_exec exec) {
  if (n <= 0) return;
  sgd_kernel<<<train_detail::grid_for(n, train_detail::threads), train_detail::threads, 0, exec.stream>>>(
      w, g, velocity, n, lr, momentum, weight_decay, nesterov ? 1 : 0);
  SDNN_CUDA_CHECK_LAUNCH();
}

}  // namespace sdnn::kernels
