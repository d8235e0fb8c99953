// The exception family of core/error.hpp: every member is an sdnn::error, and a library
// failure's message names the library, the call and the status as text.
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/core/error.hpp>

#include <stdexcept>
#include <string>
#include <type_traits>

using namespace sdnn;
using sdnn_test::has;

static_assert(std::is_base_of_v<std::runtime_error, error>);
static_assert(std::is_base_of_v<error, dimension_mismatch>);
static_assert(std::is_base_of_v<error, not_compiled>);
static_assert(std::is_base_of_v<error, library_error>);
static_assert(std::is_base_of_v<library_error, cuda_error>);
static_assert(std::is_base_of_v<library_error, cusparse_error>);
static_assert(std::is_base_of_v<library_error, cublas_error>);
static_assert(std::is_base_of_v<library_error, cudnn_error>);

namespace {
// What a *_CHECK macro builds for a failed call (the status text as the library spells it).
template <class E>
void check_library_error(char const* library, char const* status_text) {
  try {
    throw E("someLibraryCall(handle, 3)", 7, status_text, "file.cu", 42);
  } catch (error const& e) {  // caught as the root of the family
    auto const* le = dynamic_cast<library_error const*>(&e);
    REQUIRE(le != nullptr);
    REQUIRE(dynamic_cast<E const*>(&e) != nullptr);
    std::string const w = e.what();
    INFO(w);
    CHECK(has(w, library));
    CHECK(has(w, "someLibraryCall(handle, 3)"));
    CHECK(has(w, status_text));
    CHECK(has(w, "file.cu:42"));
    CHECK(le->library() == library);
    CHECK(le->call() == "someLibraryCall(handle, 3)");
    CHECK(le->status() == 7);
    CHECK(le->status_text() == status_text);
  }
}
}  // namespace

TEST_CASE("library errors name the library, the call and the status text", "[core][error]") {
  check_library_error<cuda_error>("CUDA", "cudaErrorInvalidValue (invalid argument)");
  check_library_error<cusparse_error>("cuSPARSE", "CUSPARSE_STATUS_INVALID_VALUE (invalid value)");
  check_library_error<cublas_error>("cuBLAS", "CUBLAS_STATUS_NOT_INITIALIZED (the library was not initialized)");
  check_library_error<cudnn_error>("cuDNN", "CUDNN_STATUS_BAD_PARAM");
  // cuda_error keeps its older accessor.
  REQUIRE(cuda_error("cudaMalloc", 2, "cudaErrorMemoryAllocation", "f", 1).code() == 2);
}

TEST_CASE("dimension_mismatch and not_compiled are sdnn::errors with the usual message", "[core][error]") {
  try {
    SDNN_EXPECTS_DIMS(2 + 2 == 5, "spmm: A is ", 4, " x ", 5, " but B has ", 6, " rows");
    FAIL("no throw");
  } catch (dimension_mismatch const& e) {
    std::string const w = e.what();
    CHECK(has(w, "spmm: A is 4 x 5 but B has 6 rows"));
    CHECK(has(w, "test_errors.cpp"));
  }
  CHECK(has(sdnn_test::error_text([] { SDNN_EXPECTS_DIMS(false, "shapes"); }), "shapes"));

  try {
    SDNN_NOT_COMPILED("sparse_linear::forward(cuda_exec)", "configure with CUDA (SDNN_ENABLE_CUDA=ON)");
    FAIL("no throw");
  } catch (error const& e) {  // caught as the root of the family
    auto const* nc = dynamic_cast<not_compiled const*>(&e);
    REQUIRE(nc != nullptr);
    CHECK(nc->function() == "sparse_linear::forward(cuda_exec)");
    std::string const w = e.what();
    CHECK(has(w, "sparse_linear::forward(cuda_exec) is not compiled in this build"));
    CHECK(has(w, "SDNN_ENABLE_CUDA=ON"));
  }
}
