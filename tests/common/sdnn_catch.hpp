// Hides the difference between Catch2 2.13 (Debian 12) and Catch2 3.x.
#pragma once

#if SDNN_CATCH2_MAJOR >= 3
#include <catch2/catch_all.hpp>
#else
#include <catch2/catch.hpp>
#endif

namespace sdnn_test {
#if SDNN_CATCH2_MAJOR >= 3
using Catch::Approx;
#else
using ::Approx;
#endif

// Where the project's small test data lives (tests/data).
inline char const* data_dir() { return SDNN_TEST_DATA_DIR; }
}  // namespace sdnn_test
