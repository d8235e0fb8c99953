// libFuzzer entry of the 'matrix_market_int' target; the body is sdnn_fuzz::matrix_market_int in fuzz_targets.hpp.
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  sdnn_fuzz::matrix_market_int(data, size);
  return 0;
}
