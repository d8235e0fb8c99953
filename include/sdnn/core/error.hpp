// sdnn/core/error.hpp - exceptions thrown at the host boundary.
//
// Device code never throws. Host entry points check their arguments and throw
// sdnn::error (or sdnn::cuda_error for a failed CUDA call) whose message says what was
// expected, what came, and where (file:line).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace sdnn {

class error : public std::runtime_error {
 public:
  explicit error(std::string const& what) : std::runtime_error(what) {}
  error(std::string const& what, char const* file, int line)
      : std::runtime_error(what + " [" + file + ":" + std::to_string(line) + "]") {}
};

// A failed CUDA runtime / library call. Holds the numeric status so callers can react
// (e.g. cudaErrorMemoryAllocation) without depending on CUDA headers here.
class cuda_error : public error {
 public:
  cuda_error(int code, std::string const& what, char const* file, int line)
      : error(what, file, line), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

namespace detail {
template <class... Args>
std::string concat(Args const&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail
}  // namespace sdnn

// SDNN_FAIL("csr: col_idx[", k, "] = ", c, " is out of range for ", cols, " columns")
#define SDNN_FAIL(...) throw ::sdnn::error(::sdnn::detail::concat(__VA_ARGS__), __FILE__, __LINE__)

// SDNN_EXPECTS(rows >= 0, "csr: rows must be >= 0, got ", rows)
#define SDNN_EXPECTS(cond, ...)   \
  do {                            \
    if (!(cond)) SDNN_FAIL(__VA_ARGS__); \
  } while (0)
