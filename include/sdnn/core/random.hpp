// sdnn/core/random.hpp - splitmix64 (Steele, Lea, Flood 2014): one 64-bit state and the same
// numbers on every platform and compiler (no <random>), on the host and the device; and the
// Fisher-Yates shuffle it drives. sdnn's seeded choices (the RadiX-Net permutations, the training
// layers' initial weights) and its examples draw from it, so a seed names the same result everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "sdnn/core/config.hpp"

namespace sdnn {

struct splitmix64 {
  std::uint64_t state;
  SDNN_HOST_DEVICE std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1): the top 53 bits of next().
  SDNN_HOST_DEVICE double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
  // next() mod n, n >= 1 (the modulo bias is below n / 2^64).
  SDNN_HOST_DEVICE std::uint64_t below(std::uint64_t n) { return next() % n; }
};

// Fisher-Yates over v's elements: for i = size-1 down to 1, swap v[i] with v[r.below(i + 1)].
template <class V>
void shuffle(V& v, splitmix64& r) {
  using std::swap;
  for (std::size_t i = v.size(); i > 1; --i) swap(v[i - 1], v[static_cast<std::size_t>(r.below(i))]);
}

}  // namespace sdnn
