// libFuzzer entry of the 'challenge_images' target; the body is sdnn_fuzz::challenge_images in fuzz_targets.hpp.
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  sdnn_fuzz::challenge_images(data, size);
  return 0;
}
