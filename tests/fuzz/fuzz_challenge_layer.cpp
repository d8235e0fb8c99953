// libFuzzer entry of the 'challenge_layer' target; the body is sdnn_fuzz::challenge_layer in fuzz_targets.hpp.
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  sdnn_fuzz::challenge_layer(data, size);
  return 0;
}
