// sdnn/core/error.hpp - the exceptions thrown at the host boundary, and the macros that throw them.
//
// Device code never throws. Host entry points check their arguments and throw a member of one
// family rooted at sdnn::error (a std::runtime_error); a message says what was expected, what
// came, and where (file:line). The family: docs/foundation.md#errors. This header needs no CUDA
// headers (statuses are held as int); the *_CHECK macros that build the library errors live
// beside each library (core/cuda.cuh, linear/vendor/*.cuh, conv/vendor/*.cuh). Destructors
// never throw: a failed release is reported on stderr (detail::report_release).
#pragma once

#include <cstddef>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace sdnn {

// A bad argument or input: the message says what was expected, what came, and where.
class error : public std::runtime_error {
 public:
  explicit error(std::string const& what) : std::runtime_error(what) {}
  error(std::string const& what, char const* file, int line)
      : std::runtime_error(what + " [" + file + ":" + std::to_string(line) + "]") {}
};

// Operands whose shapes do not fit together (A is m x k but B has k' != k rows, ...).
class dimension_mismatch : public error {
 public:
  using error::error;
};

// A backend this build does not contain (e.g. a device member called in a build without CUDA).
// function() names the member or op that was called.
class not_compiled : public error {
 public:
  not_compiled(std::string function, std::string const& remedy, char const* file, int line)
      : error(function + " is not compiled in this build: " + remedy, file, line), function_(std::move(function)) {}
  std::string const& function() const noexcept { return function_; }

 private:
  std::string function_;
};

// A failed call into CUDA or a vendor library; carries the library, the call and the status
// (number and text). Messages read "<library>: `<call>` failed: <STATUS_NAME> (<description>)
// [file:line]".
class library_error : public error {
 public:
  library_error(std::string library, std::string call, int status, std::string status_text, char const* file,
                int line)
      : error(library + ": `" + call + "` failed: " + status_text, file, line),
        library_(std::move(library)),
        call_(std::move(call)),
        status_(status),
        status_text_(std::move(status_text)) {}
  std::string const& library() const noexcept { return library_; }
  std::string const& call() const noexcept { return call_; }
  int status() const noexcept { return status_; }
  std::string const& status_text() const noexcept { return status_text_; }

 private:
  std::string library_, call_;
  int status_;
  std::string status_text_;
};

// status() is a cudaError_t; code() returns the same value.
class cuda_error : public library_error {
 public:
  cuda_error(std::string call, int status, std::string status_text, char const* file, int line)
      : library_error("CUDA", std::move(call), status, std::move(status_text), file, line) {}
  int code() const noexcept { return status(); }
};
class cusparse_error : public library_error {  // status(): cusparseStatus_t
 public:
  cusparse_error(std::string call, int status, std::string status_text, char const* file, int line)
      : library_error("cuSPARSE", std::move(call), status, std::move(status_text), file, line) {}
};
class cublas_error : public library_error {  // status(): cublasStatus_t
 public:
  cublas_error(std::string call, int status, std::string status_text, char const* file, int line)
      : library_error("cuBLAS", std::move(call), status, std::move(status_text), file, line) {}
};
class cudnn_error : public library_error {  // status(): cudnnStatus_t
 public:
  cudnn_error(std::string call, int status, std::string status_text, char const* file, int line)
      : library_error("cuDNN", std::move(call), status, std::move(status_text), file, line) {}
};

namespace detail {
template <class... Args>
std::string concat(Args const&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// a * b as a count of elements (both >= 0), or an sdnn::error naming `what` when the product
// does not fit (an element count must also fit a byte count of 8-byte elements, so it is
// bounded by 2^60). Every container size that multiplies two extents goes through this.
inline std::size_t checked_extent(long long a, long long b, char const* what) {
  constexpr unsigned long long limit = 1ULL << 60;
  if (a < 0 || b < 0) throw ::sdnn::error(concat(what, ": extents must be >= 0, got ", a, " and ", b));
  unsigned long long const ua = static_cast<unsigned long long>(a), ub = static_cast<unsigned long long>(b);
  if (ua != 0 && ub > limit / ua)
    throw ::sdnn::error(concat(what, ": ", a, " x ", b, " elements overflow the addressable size (at most 2^60)"));
  return static_cast<std::size_t>(ua * ub);
}

// For destructors, which cannot throw: a failed release is reported on stderr, never lost
// silently and never thrown.
inline void report_release(char const* library, char const* what, char const* status_text) noexcept {
  std::fprintf(stderr, "sdnn: %s: %s failed in a destructor: %s\n", library, what, status_text);
}
}  // namespace detail
}  // namespace sdnn

// SDNN_FAIL("csr: col_idx[", k, "] = ", c, " is out of range for ", cols, " columns")
#define SDNN_FAIL(...) throw ::sdnn::error(::sdnn::detail::concat(__VA_ARGS__), __FILE__, __LINE__)

// SDNN_EXPECTS(rows >= 0, "csr: rows must be >= 0, got ", rows)
#define SDNN_EXPECTS(cond, ...)          \
  do {                                   \
    if (!(cond)) SDNN_FAIL(__VA_ARGS__); \
  } while (0)

// SDNN_EXPECTS_DIMS(b.rows == k, "spmm: A is ", m, " x ", k, " but B has ", b.rows, " rows")
#define SDNN_EXPECTS_DIMS(cond, ...)                                                                          \
  do {                                                                                                        \
    if (!(cond)) throw ::sdnn::dimension_mismatch(::sdnn::detail::concat(__VA_ARGS__), __FILE__, __LINE__); \
  } while (0)

// SDNN_NOT_COMPILED("sparse_linear::forward(cuda_exec)", "configure with CUDA (SDNN_ENABLE_CUDA=ON)")
#define SDNN_NOT_COMPILED(function, remedy) throw ::sdnn::not_compiled((function), (remedy), __FILE__, __LINE__)
