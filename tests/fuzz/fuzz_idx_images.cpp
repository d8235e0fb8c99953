// libFuzzer entry of the 'idx_images' target; the body is sdnn_fuzz::idx_images in fuzz_targets.hpp.
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  sdnn_fuzz::idx_images(data, size);
  return 0;
}
