// libFuzzer entry of the 'categories' target; the body is sdnn_fuzz::categories in fuzz_targets.hpp.
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  sdnn_fuzz::categories(data, size);
  return 0;
}
