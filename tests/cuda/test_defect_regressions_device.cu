// Device halves of the host defect regressions (tests/host/test_defect_regressions.cpp,
// test_automatic_limits.cpp): the nnz-balanced cut at nnz = INT32_MAX, and
// csr_spmm_plan<automatic> on the shapes whose first choice its plan could not run or hold
// (a 65536^2 block-diagonal matrix of dense 32 x 32 blocks, 10M x 50 with 2 nonzeros per row,
// 3M x 32 dense): the plan takes another path, says why in reason(), and matches the host
// reference on small-integer data (float, exact).
#include "sdnn_gpu_test.cuh"
#include "sdnn_spmm_fixtures.hpp"

#include <sdnn/sdnn.hpp>
#include <sdnn/linear/op/spmm.cuh>

#include <cstdint>
#include <string>
#include <vector>

namespace sdnn_defect_regressions_device_test {
using namespace sdnn;
using namespace sdnn_test;

namespace {
// rows x cols CSR, row i holding the columns cols_of(i) (increasing), values 1 + (i + j) % 3.
template <class F>
csr_matrix<float, int> pattern(std::int64_t rows, std::int64_t cols, F&& cols_of) {
  std::vector<int> rp{0}, ci;
  std::vector<float> v;
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j : cols_of(i)) {
      ci.push_back(static_cast<int>(j));
      v.push_back(static_cast<float>(1 + (i + j) % 3));
    }
    rp.push_back(static_cast<int>(ci.size()));
  }
  return make_csr<float, int>(static_cast<int>(rows), static_cast<int>(cols), rp, ci, v);
}

// The automatic plan on a, B = n columns of small integers: the choice, its reason, the product.
void check_automatic(csr_matrix<float, int> const& a, std::int64_t n, policy::spmm_choice not_this,
                     std::string const& reason_part, cuda_exec e) {
  dense_matrix<float> b(a.cols(), n);
  for (std::int64_t i = 0; i < a.cols(); ++i)
    for (std::int64_t j = 0; j < n; ++j) b(i, j) = static_cast<float>((i * 7 + j) % 5) - 2.f;
  device_csr<float> da(a, e);
  device_dense<float> db(b, n, e), dc(dense_matrix<float>(a.rows(), n), n, e);
  ops::csr_spmm_plan<policy::automatic, float, int> plan(da.view(), db.cview(), dc.view(), e);
  INFO(plan.reason());
  CHECK(plan.choice() != not_this);
  CHECK(plan.reason().find(reason_part) != std::string::npos);
  plan.run(e, db.cview(), dc.view(), basic_epilogue<float>{});
  dense_matrix<float> ref(a.rows(), n);
  ops::spmm(host_exec{}, policy::csr_row_split<>{}, a.view(), b.view(), ref.view());
  check_against(ref, dc, e, policy::choice_name(plan.choice()));
}
}  // namespace

TEST_CASE("csr_nnz_bounds: the end sentinel lands on rows at nnz = INT32_MAX", "[cuda][ops][spmm][nnz_split]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  auto const e = sg.exec();
  // Only row_ptr is read: 3 rows, nnz = INT32_MAX, shares of 2^29 entries (4 of them).
  auto const rp = upload(std::vector<int>{0, 1000, 1 << 30, INT32_MAX}, e);
  csr_view<float, int> const a{3, 1, INT32_MAX, rp.data(), nullptr, nullptr};
  buffer<int, device_space> bounds(5, e);
  kernels::csr_nnz_bounds(a, std::int64_t(1) << 29, 4, bounds.data(), e);
  // lower_bound of {0, 2^29, 2^30, 3 * 2^29} in row_ptr[0, 3), then rows (was 0: nnz + 1 wrapped).
  REQUIRE(download(bounds.data(), 5, e) == std::vector<int>{0, 2, 2, 3, 3});
}

TEST_CASE("automatic: a block-diagonal 65536^2 is not copied into 17 GB of tiles", "[cuda][ops][spmm][automatic]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  auto const a = pattern(65536, 65536, [](std::int64_t i) {
    std::vector<std::int64_t> c;
    for (std::int64_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) c.push_back(j);
    return c;
  });
  check_automatic(a, 64, policy::spmm_choice::tiled_dense, "tiled_dense_spmm rejected: its tiled copy needs 17.2 GB",
                  sg.exec());
}

TEST_CASE("automatic: 10M x 50 with 2 nonzeros per row does not get csr_panels", "[cuda][ops][spmm][automatic]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  auto const a = pattern(10000000, 50, [](std::int64_t i) {
    std::int64_t const j = i % 49;
    return std::vector<std::int64_t>{j, j + 1};
  });
  check_automatic(a, 32, policy::spmm_choice::csr_panels,
                  "csr_panels<16,64,1> rejected: spmm(csr_panels): 10000000 rows need 78125 row blocks", sg.exec());
}

TEST_CASE("automatic: 3M x 32 dense does not get tiled_dense", "[cuda][ops][spmm][automatic]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard sg;
  auto const a = pattern(3000000, 32, [](std::int64_t) {
    std::vector<std::int64_t> c(32);
    for (std::int64_t j = 0; j < 32; ++j) c[static_cast<std::size_t>(j)] = j;
    return c;
  });
  check_automatic(a, 16, policy::spmm_choice::tiled_dense,
                  "tiled_dense_spmm rejected: spmm(tiled_dense): 93750 tile rows exceed the grid limit 65535",
                  sg.exec());
}

}  // namespace sdnn_defect_regressions_device_test
