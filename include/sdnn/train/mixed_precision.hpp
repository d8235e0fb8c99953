// sdnn/train/mixed_precision.hpp - the rules of mixed-precision training: float master weights,
// a 16-bit (or float) copy for the products, a loss scale that grows and backs off on the device,
// SGD with momentum and Adam steps that keep a mask, and the per-step bookkeeping (skipped steps,
// the first non-finite loss). The rule functions are __host__ __device__, so the device kernels
// (train/kernel/mixed_precision.cuh) and the host oracle (train/reference/mixed_precision.hpp) run
// the very same arithmetic, rounded and never contracted into FMAs: a step is bitwise the host's.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "sdnn/core/config.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/numeric.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/formats/dense.hpp"

namespace sdnn::train {

// Rounded float arithmetic that no compiler may contract (the device intrinsics under nvcc).
SDNN_HOST_DEVICE inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
SDNN_HOST_DEVICE inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
SDNN_HOST_DEVICE inline float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
SDNN_HOST_DEVICE inline float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}
SDNN_HOST_DEVICE inline bool finite(double v) {
#if defined(__CUDA_ARCH__)
  return isfinite(v);
#else
  return std::isfinite(v);
#endif
}

// How the loss scale moves: with `dynamic`, a step whose gradients hold an Inf or NaN is
// skipped and the scale multiplied by `backoff` (not below min_scale); after `interval`
// good steps in a row it is multiplied by `growth`. Without it the scale stays put (a
// non-finite gradient still skips the step).
struct loss_scale_rule {
  bool dynamic = true;
  float initial = 65536.0f, growth = 2.0f, backoff = 0.5f, min_scale = 1.0f;
  std::int32_t interval = 1000;
};

enum class optimizer_kind : std::int32_t { sgd = 0, adam = 1 };

// SGD: m = momentum m + g, w -= lr m. Adam (Kingma & Ba): m = b1 m + (1 - b1) g,
// v = b2 v + (1 - b2) g^2, w -= lr (m / c1) / (sqrt(v / c2) + eps) with c = 1 - b^t.
// weight_decay adds wd * w to g first (L2, not decoupled).
struct optimizer_rule {
  optimizer_kind kind = optimizer_kind::adam;
  float lr = 1e-3f, momentum = 0.9f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
};

// The training loop's device-resident state (one per model): read by every step kernel,
// changed only by finish_step and track_loss (single-thread kernels), so nothing needs the host.
struct step_state {
  float scale = 1.0f, inv_scale = 1.0f;  // the loss scale and 1 / it
  std::int32_t found_inf = 0;            // set by the finiteness check of this step's gradients
  std::int32_t good_steps = 0;           // steps since the scale last changed
  std::int64_t step = 0;                 // optimizer steps taken
  std::int64_t iteration = 0;            // training steps run (skipped ones too)
  std::int64_t skipped = 0;              // steps skipped for a non-finite gradient
  std::int64_t first_bad_step = -1;      // the iteration of the first non-finite loss, or -1
  double loss_sum = 0.0;                 // the finite losses since the last reset, and how many
  std::int64_t loss_count = 0;
  float beta1_pow = 1.0f, beta2_pow = 1.0f;  // beta^step (Adam's bias correction)
};

inline step_state initial_state(loss_scale_rule const& r) {
  step_state s;
  s.scale = r.initial;
  s.inv_scale = 1.0f / r.initial;
  return s;
}

struct adam_bias {
  float c1 = 1.0f, c2 = 1.0f;
};

// The bias corrections of the step about to be taken (t = step + 1), from the running powers.
SDNN_HOST_DEVICE inline adam_bias adam_bias_correction(optimizer_rule const& r, step_state const& s) {
  return {add_rn(1.0f, -mul_rn(s.beta1_pow, r.beta1)), add_rn(1.0f, -mul_rn(s.beta2_pow, r.beta2))};
}

// One element's update; keep == false zeroes the weight and its moments (a pruned weight stays
// zero and restarts from zero if it is ever let back).
SDNN_HOST_DEVICE inline void optimizer_update(optimizer_rule const& r, adam_bias bc, bool keep, float g, float& w,
                                              float& m, float& v) {
  if (!keep) {
    w = m = v = 0.0f;
    return;
  }
  if (r.weight_decay != 0.0f) g = add_rn(g, mul_rn(r.weight_decay, w));
  if (r.kind == optimizer_kind::sgd) {
    m = add_rn(mul_rn(r.momentum, m), g);
    w = add_rn(w, -mul_rn(r.lr, m));
  } else {
    m = add_rn(mul_rn(r.beta1, m), mul_rn(add_rn(1.0f, -r.beta1), g));
    v = add_rn(mul_rn(r.beta2, v), mul_rn(add_rn(1.0f, -r.beta2), mul_rn(g, g)));
    float const mh = div_rn(m, bc.c1), vh = div_rn(v, bc.c2);
    w = add_rn(w, -mul_rn(r.lr, div_rn(mh, add_rn(sqrt_rn(vh), r.eps))));
  }
}

// After every parameter of one training step: count it, move the loss scale, reset found_inf.
SDNN_HOST_DEVICE inline void finish_step(step_state& s, loss_scale_rule const& r, optimizer_rule const& o) {
  if (s.found_inf) {
    ++s.skipped;
    s.good_steps = 0;
    if (r.dynamic) {
      float const next = mul_rn(s.scale, r.backoff);
      s.scale = next < r.min_scale ? r.min_scale : next;
    }
  } else {
    ++s.step;
    s.beta1_pow = mul_rn(s.beta1_pow, o.beta1);
    s.beta2_pow = mul_rn(s.beta2_pow, o.beta2);
    if (r.dynamic && ++s.good_steps >= r.interval) {
      s.scale = mul_rn(s.scale, r.growth);
      s.good_steps = 0;
    }
  }
  s.inv_scale = div_rn(1.0f, s.scale);
  s.found_inf = 0;
  ++s.iteration;
}

// One step's mean loss: summed when finite; the first non-finite one names its iteration.
SDNN_HOST_DEVICE inline void track_loss(step_state& s, double loss) {
  if (finite(loss)) {
    s.loss_sum += loss;
    ++s.loss_count;
  } else if (s.first_bad_step < 0) {
    s.first_bad_step = s.iteration;
  }
}

}  // namespace sdnn::train
