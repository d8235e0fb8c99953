// libFuzzer entry of the 'formats' target; the body is sdnn_fuzz::formats in fuzz_targets.hpp.
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  sdnn_fuzz::formats(data, size);
  return 0;
}
