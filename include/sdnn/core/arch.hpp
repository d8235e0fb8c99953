// sdnn/core/arch.hpp - a GPU's compute capability as a plain host value (no CUDA headers),
// the key of the tuning tables in linear/policy/tuning.hpp. The device query that fills it for
// the current GPU is detail::current_arch() in core/cuda.cuh.
#pragma once

namespace sdnn {

// Compute capability major.minor (H100 / H200: 9.0, B200: 10.0, RTX 5090: 12.0).
struct arch {
  int major = 0;
  int minor = 0;
  // The sm_XY number: 10 * major + minor (9.0 -> 90, 12.0 -> 120).
  constexpr int sm() const noexcept { return 10 * major + minor; }
  friend constexpr bool operator==(arch a, arch b) noexcept { return a.major == b.major && a.minor == b.minor; }
  friend constexpr bool operator!=(arch a, arch b) noexcept { return !(a == b); }
  friend constexpr bool operator<(arch a, arch b) noexcept {
    return a.major < b.major || (a.major == b.major && a.minor < b.minor);
  }
  friend constexpr bool operator<=(arch a, arch b) noexcept { return !(b < a); }
};

}  // namespace sdnn
