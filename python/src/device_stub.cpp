// python/src/device_stub.cpp - the device layers of a module built without CUDA: every factory
// raises sdnn::not_compiled (NotImplementedError in Python), naming how to get them.
#include "device.hpp"

#include "sdnn/core/error.hpp"

namespace sdnn_py {

namespace {
[[noreturn]] void missing(char const* what) {
  throw sdnn::not_compiled(what, "the sdnn Python module was built without CUDA (configure with a CUDA compiler and "
                           "-DSDNN_ENABLE_CUDA=ON)", __FILE__, __LINE__);
}
}  // namespace

bool device_compiled() noexcept { return false; }

std::unique_ptr<linear_handle> make_linear(dtype, void const*, std::int64_t, std::int64_t, std::vector<float>, bool,
                                           std::int64_t) {
  missing("sdnn.Linear");
}
std::unique_ptr<conv_handle> make_conv(dtype, conv_geometry, void const*, std::vector<float>, bool, bool) {
  missing("sdnn.Conv2d");
}

challenge_run challenge_infer_device(std::vector<sdnn::csr_matrix<float, std::int32_t>> const&,
                                     sdnn::csr_matrix<float, std::int32_t> const&, float, float, std::uintptr_t) {
  missing("sdnn.challenge.infer(device=\"cuda\")");
}

}  // namespace sdnn_py
