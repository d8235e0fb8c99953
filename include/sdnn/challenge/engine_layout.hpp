// sdnn/challenge/engine_layout.hpp - the depth-first Graph Challenge engine's layer layout: plain
// structs shared by the host plan that builds it (challenge/engine_layout_build.hpp), the device
// kernel that reads it (challenge/kernel/engine.cuh) and the host tests that check it without a
// GPU.
#pragma once

#include <cstdint>

namespace sdnn {

// A slice of 32 classes: where its terms start (from the layer's term_base) and its longest
// class's term count (the slice's rows of 32 terms).
struct alignas(8) challenge_engine_slice {
  std::int32_t offset;
  std::int32_t length;
};

// One layer's place in the engine's arrays (two 16-byte loads per layer).
struct alignas(16) challenge_engine_layer_desc {
  std::int64_t term_base;    // into terms
  std::int32_t slice_base;   // into slices (ceil(D_l / 32) entries)
  std::int32_t distinct;     // D_l; bit 30 (challenge_engine_suffix_bit): layers l..L-1 map all-cap to all-cap
  std::int32_t value_base;   // into values (compact terms only)
  std::int32_t length;       // uniform terms: every class has this many terms (a multiple of 4)
  float weight;              // uniform terms: the layer's one weight
  std::int32_t pad;
};
inline constexpr std::int32_t challenge_engine_suffix_bit = std::int32_t(1) << 30;

// Terms are stored sliced by 32 classes (a warp's classes), term p of class u of slice s at
// term_base + slices[s].offset + 32 p + u % 32, each slice padded to its longest class with empty
// terms: a warp reads 32 consecutive terms per step (coalesced). Two encodings:
//  - wide: {k, weight bits}, empty: k = -1;
//  - compact (N <= 65536 and fewer than 65535 distinct weights per layer): 16-bit k and a 16-bit
//    index into the layer's table of distinct weights, empty: index 0xffff.
struct alignas(8) challenge_engine_term {
  std::int32_t k;
  float w;
};
using challenge_engine_compact_term = std::uint32_t;
inline constexpr std::uint32_t challenge_engine_compact_empty = 0xffffu;
//  - uniform (the fast path, when every layer qualifies): each layer has one finite weight and
//    all its classes the same number of terms len, a multiple of 4; a term is its 16-bit input
//    k (N <= 65536), and zero inputs need no test (challenge/kernel/engine.cuh). The terms of a
//    slice are grouped by 4: term p of class u at challenge_engine_uniform_at(term_base, len, u,
//    p), so a lane reads its class's next 4 terms with one 8-byte load and a warp 256
//    consecutive bytes (half the bytes and a quarter of the loads of compact terms).
struct challenge_engine_uniform_term {
  std::uint16_t k;
};
constexpr std::int64_t challenge_engine_uniform_at(std::int64_t term_base, std::int32_t len, std::int32_t u,
                                                   std::int32_t p) {
  return term_base + static_cast<std::int64_t>(u >> 5) * 32 * len + 128 * (p >> 2) + 4 * (u & 31) + (p & 3);
}

}  // namespace sdnn
