// libFuzzer entry of the 'idx_labels' target; the body is sdnn_fuzz::idx_labels in fuzz_targets.hpp.
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  sdnn_fuzz::idx_labels(data, size);
  return 0;
}
