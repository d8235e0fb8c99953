// sdnn/core/fast_divmod.hpp - division by a divisor fixed at plan time, through a multiply-high
// and a shift (Granlund and Montgomery's round-up method): the kernels decode pixel and filter
// indices with it instead of the ~20-instruction integer division. Exact for 0 <= n < 2^31 and
// 1 <= d < 2^31; the same arithmetic on the host, so host tests check it.
#pragma once

#include <cstdint>

#include "sdnn/core/config.hpp"
#include "sdnn/core/error.hpp"

namespace sdnn {

struct fast_divmod {
  std::uint32_t d = 1, mul = 0, shift = 0;

  fast_divmod() = default;
  explicit fast_divmod(std::int64_t divisor) {
    SDNN_EXPECTS(divisor >= 1 && divisor < (std::int64_t(1) << 31), "fast_divmod: divisor ", divisor,
                 " outside [1, 2^31)");
    d = std::uint32_t(divisor);
    while ((std::uint64_t(1) << shift) < d) ++shift;  // shift = ceil(log2 d)
    // mul = floor(2^32 (2^shift - d) / d) + 1 fits 32 bits for shift <= 31
    mul = std::uint32_t(((std::uint64_t(1) << 32) * ((std::uint64_t(1) << shift) - d)) / d + 1);
  }

  SDNN_HOST_DEVICE std::uint32_t div(std::uint32_t n) const {
#if defined(__CUDA_ARCH__)
    std::uint32_t const hi = __umulhi(n, mul);
#else
    std::uint32_t const hi = std::uint32_t((std::uint64_t(n) * mul) >> 32);
#endif
    return (hi + n) >> shift;  // hi + n < 2^32 for n < 2^31
  }
  // q = n / d, r = n % d for 0 <= n < 2^31.
  SDNN_HOST_DEVICE void divmod(int n, int& q, int& r) const {
    q = int(div(std::uint32_t(n)));
    r = n - q * int(d);
  }
};

}  // namespace sdnn
