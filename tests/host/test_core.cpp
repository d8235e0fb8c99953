// Core: errors, host buffers, CSR construction and validation (hand-computed cases).
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include <sdnn/sdnn.hpp>

#include <string>

using namespace sdnn;

TEST_CASE("host_buffer is value-initialised, movable, clonable", "[core]") {
  host_buffer<int> a(5);
  for (int v : a) REQUIRE(v == 0);
  a[2] = 7;
  auto b = a.clone();
  host_buffer<int> c = std::move(a);
  REQUIRE(a.size() == 0);
  REQUIRE(a.data() == nullptr);
  REQUIRE(c.size() == 5);
  REQUIRE(c[2] == 7);
  REQUIRE(b[2] == 7);
  b[2] = 1;
  REQUIRE(c[2] == 7);
}

TEST_CASE("fast_divmod agrees with / and % for every divisor shape the kernels use", "[core]") {
  std::uint64_t state = 12345;
  auto next = [&] {  // xorshift: deterministic, covers the full 31-bit range
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return static_cast<int>(state & 0x7fffffff);
  };
  std::vector<std::int64_t> divisors{1, 2, 3, 5, 7, 9, 14, 28, 56, 112, 224, 3 * 224, 1000003, (1LL << 30) + 3,
                                     (1LL << 31) - 1};
  for (std::int64_t d = 1; d <= 300; ++d) divisors.push_back(d);
  for (std::int64_t d : divisors) {
    sdnn::fast_divmod f(d);
    int q = 0, r = 0;
    for (int n : {0, 1, int(d) - 1, int(d), int(d) + 1, 0x7fffffff, 0x7ffffffe}) {
      if (n < 0) continue;
      f.divmod(n, q, r);
      REQUIRE(q == n / int(d));
      REQUIRE(r == n % int(d));
    }
    for (int i = 0; i < 2000; ++i) {
      int const n = next();
      f.divmod(n, q, r);
      REQUIRE(q == n / int(d));
      REQUIRE(r == n % int(d));
    }
  }
  CHECK(sdnn_test::has(sdnn_test::error_text([] { sdnn::fast_divmod f(0); }), "divisor"));
  CHECK(sdnn_test::has(sdnn_test::error_text([] { sdnn::fast_divmod f(std::int64_t(1) << 31); }), "divisor"));
}

TEST_CASE("sdnn::error carries the message and the location", "[core]") {
  try {
    SDNN_EXPECTS(1 + 1 == 3, "arith: expected ", 3, ", got ", 2);
    FAIL("no throw");
  } catch (error const& e) {
    std::string w = e.what();
    REQUIRE(w.find("arith: expected 3, got 2") != std::string::npos);
    REQUIRE(w.find("test_core.cpp") != std::string::npos);
  }
}

TEMPLATE_TEST_CASE("make_csr accepts a valid matrix", "[csr]", std::int32_t, std::int64_t) {
  using I = TestType;
  // [1 0 2]
  // [0 0 0]
  // [0 3 0]
  auto a = make_csr<double, I>(3, 3, {0, 2, 2, 3}, {0, 2, 1}, {1, 2, 3});
  REQUIRE(a.rows() == 3);
  REQUIRE(a.cols() == 3);
  REQUIRE(a.nnz() == 3);
  auto v = a.view();
  REQUIRE(v.row_ptr[3] == 3);
  REQUIRE(v.col_idx[2] == 1);
  REQUIRE(v.values[1] == 2.0);
}

TEST_CASE("make_csr accepts empty shapes", "[csr]") {
  REQUIRE(make_csr<float, int>(0, 0, {0}, {}, {}).nnz() == 0);
  REQUIRE(make_csr<float, int>(4, 1, {0, 0, 0, 0, 0}, {}, {}).rows() == 4);
}

namespace {
std::string reject(int rows, int cols, std::vector<int> rp, std::vector<int> ci, std::vector<float> v) {
  try {
    make_csr<float, int>(rows, cols, rp, ci, v);
  } catch (error const& e) {
    return e.what();
  }
  return "accepted";
}
bool has(std::string const& s, char const* part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("make_csr rejects every kind of invalid input, naming the first bad entry", "[csr]") {
  CHECK(has(reject(2, 3, {0, 1}, {0}, {1}), "row_ptr must have rows + 1 = 3 entries, got 2"));
  CHECK(has(reject(1, 3, {0, 1}, {0}, {}), "col_idx has 1 entries but values has 0"));
  CHECK(has(reject(1, 3, {1, 1}, {0}, {1}), "row_ptr[0] must be 0, got 1"));
  CHECK(has(reject(2, 3, {0, 1, 2}, {0}, {1}), "row_ptr[2] must equal nnz = 1, got 2"));
  CHECK(has(reject(2, 3, {0, 2, 1}, {0}, {1}), "row_ptr[1] = 2 exceeds nnz = 1"));
  CHECK(has(reject(2, 3, {0, 2, 2}, {0, 1}, {1, 1}), "accepted"));
  CHECK(has(reject(3, 3, {0, 2, 1, 2}, {0, 1}, {1, 1}), "row_ptr must be non-decreasing, but row_ptr[1] = 2 > row_ptr[2] = 1"));
  CHECK(has(reject(2, 3, {0, 1, 2}, {0, 3}, {1, 1}), "row 1: col_idx[1] = 3 is out of range for 3 columns"));
  CHECK(has(reject(1, 3, {0, 1}, {-1}, {1}), "col_idx[0] = -1 is out of range"));
  CHECK(has(reject(1, 3, {0, 2}, {2, 1}, {1, 1}), "col_idx[1] = 1 must be greater than col_idx[0] = 2"));
  CHECK(has(reject(1, 3, {0, 2}, {1, 1}, {1, 1}), "sorted and unique"));
  CHECK(has(reject(-1, 3, {0}, {}, {}), "must be >= 0"));
}

TEST_CASE("sizes that overflow are refused, not wrapped (memory-safety cases)", "[core][formats]") {
  using sdnn_test::error_text;
  using sdnn_test::has;
  // rows x width wrapped to 0, then validate read out of bounds
  REQUIRE(has(error_text([] { sdnn::ell_matrix<float, std::int64_t>(std::int64_t{1} << 62, 4, 4, 0); }), "overflow"));
  // 2^32 x 2^32 wrapped to size() == 0, then a write crashed
  REQUIRE(has(error_text([] { sdnn::dense_matrix<float>(std::int64_t{1} << 32, std::int64_t{1} << 32); }),
              "overflow"));
  // width 0 with 2^62 rows: validate returns at once (it looped 2^62 times)
  sdnn::ell_view<float, std::int64_t> v{};
  v.rows = std::int64_t{1} << 62;
  v.cols = 4;
  v.width = 0;
  v.nnz = 0;
  REQUIRE_NOTHROW(sdnn::validate(v, 0, 0));
  v.width = 4;
  REQUIRE(has(error_text([&] { sdnn::validate(v, 0, 0); }), "overflow"));
  REQUIRE(sdnn::detail::checked_extent(3, 5, "x") == 15);
  REQUIRE(sdnn::detail::checked_extent(0, std::int64_t{1} << 62, "x") == 0);
}
