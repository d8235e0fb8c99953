// Formats on the device: every device conversion, copy and statistic equals the host
// version exactly (same integers, same values) on seeded random matrices of every edge
// shape, for float / double / __half values and int32 / int64 indices.
#include "sdnn_gpu_test.cuh"
#include "sdnn_test_util.hpp"

#include <cuda_fp16.h>

#include <sdnn/sdnn.hpp>
#include <sdnn/formats/convert.cuh>
#include <sdnn/formats/copy.cuh>
#include <sdnn/formats/stats.cuh>

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace sdnn;
using sdnn_test::error_text;
using sdnn_test::has;

namespace {
template <class B>
auto ivec(B const& b) {
  return std::vector<typename B::value_type>(b.begin(), b.end());
}
// Values as float (exact: every test value is a small integer, representable in __half).
template <class B>
std::vector<float> fvec(B const& b) {
  std::vector<float> r;
  for (auto const& x : b) r.push_back(value_cast<float>(x));
  return r;
}

template <class T, class I>
csr_matrix<T, I> random_csr(I rows, I cols, double density, unsigned seed, double empty_frac) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::uniform_int_distribution<int> val(1, 8);
  std::vector<I> rp{0}, ci;
  std::vector<T> v;
  for (I i = 0; i < rows; ++i) {
    bool const empty = u(gen) < empty_frac;
    for (I j = 0; j < cols && !empty; ++j)
      if (u(gen) < density) {
        ci.push_back(j);
        v.push_back(value_cast<T>(static_cast<float>(u(gen) < 0.5 ? -val(gen) : val(gen))));
      }
    rp.push_back(static_cast<I>(ci.size()));
  }
  return make_csr<T, I>(rows, cols, rp, ci, v);
}

template <class T, class I>
void require_equal(csr_matrix<T, I> const& a, csr_matrix<T, I> const& b) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  REQUIRE(a.nnz() == b.nnz());
  REQUIRE(ivec(a.row_ptr()) == ivec(b.row_ptr()));
  REQUIRE(ivec(a.col_idx()) == ivec(b.col_idx()));
  REQUIRE(fvec(a.values()) == fvec(b.values()));
}
template <class T, class I>
void require_equal(coo_matrix<T, I> const& a, coo_matrix<T, I> const& b) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  REQUIRE(ivec(a.row_idx()) == ivec(b.row_idx()));
  REQUIRE(ivec(a.col_idx()) == ivec(b.col_idx()));
  REQUIRE(fvec(a.values()) == fvec(b.values()));
}
template <class T, class I>
void require_equal(ell_matrix<T, I> const& a, ell_matrix<T, I> const& b) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  REQUIRE(a.width() == b.width());
  REQUIRE(a.nnz() == b.nnz());
  REQUIRE(ivec(a.col_idx()) == ivec(b.col_idx()));
  REQUIRE(fvec(a.values()) == fvec(b.values()));
}
template <class T>
void require_equal(dense_matrix<T> const& a, dense_matrix<T> const& b) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  REQUIRE(fvec(a.values()) == fvec(b.values()));
}
template <class T>
void require_equal(tiled_dense_matrix<T> const& a, tiled_dense_matrix<T> const& b) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  REQUIRE(a.tile_rows() == b.tile_rows());
  REQUIRE(a.tile_cols() == b.tile_cols());
  REQUIRE(fvec(a.values()) == fvec(b.values()));
  REQUIRE(ivec(a.occupied()) == ivec(b.occupied()));
  REQUIRE(ivec(a.tile_row_ptr()) == ivec(b.tile_row_ptr()));
  REQUIRE(ivec(a.tile_col()) == ivec(b.tile_col()));
}
void require_equal(matrix_stats const& a, matrix_stats const& b) {
  REQUIRE(a.rows == b.rows);
  REQUIRE(a.cols == b.cols);
  REQUIRE(a.nnz == b.nnz);
  REQUIRE(a.min_row_nnz == b.min_row_nnz);
  REQUIRE(a.max_row_nnz == b.max_row_nnz);
  REQUIRE(a.mean_row_nnz == b.mean_row_nnz);
  REQUIRE(a.row_nnz_stddev == b.row_nnz_stddev);
  REQUIRE(a.empty_rows == b.empty_rows);
  REQUIRE(a.tile_rows == b.tile_rows);
  REQUIRE(a.tile_cols == b.tile_cols);
  REQUIRE(a.tiles == b.tiles);
  REQUIRE(a.occupied_tiles == b.occupied_tiles);
  REQUIRE(a.tile_occupancy == b.tile_occupancy);
}

struct shape {
  std::int64_t rows, cols;
  double density;
};
// 0 rows, 0 cols, one column, one row, nnz 0, sizes not multiple of the tile sizes,
// fully dense, and one larger matrix spanning many blocks.
std::vector<shape> const shapes{{0, 0, 0.5},   {0, 7, 0.5},    {6, 0, 0.5},    {1, 1, 1.0},
                                {9, 1, 0.6},   {1, 40, 0.3},   {20, 20, 0.0},  {33, 65, 0.1},
                                {64, 64, 0.05}, {100, 37, 0.3}, {31, 70, 1.0}, {1000, 517, 0.02}};

using sdnn_test::stream_guard;
}  // namespace

TEMPLATE_TEST_CASE("device conversions, copies and stats equal the host ones on random matrices", "[cuda][formats]",
                   (std::pair<float, std::int32_t>), (std::pair<double, std::int64_t>),
                   (std::pair<__half, std::int32_t>), (std::pair<__half, std::int64_t>)) {
  SDNN_REQUIRE_DEVICE();
  using T = typename TestType::first_type;
  using I = typename TestType::second_type;
  stream_guard g;
  cuda_exec exec{g.s};
  unsigned seed = 7;
  for (auto const& s : shapes) {
    for (double empty_frac : {0.0, 0.3}) {
      INFO("shape " << s.rows << " x " << s.cols << ", density " << s.density << ", empty rows " << empty_frac);
      auto h = random_csr<T, I>(static_cast<I>(s.rows), static_cast<I>(s.cols), s.density, seed++, empty_frac);
      auto d = to_device(h, exec);
      validate(d, exec);
      require_equal(to_host(d, exec), h);

      auto h_coo = to_coo(h);
      auto d_coo = to_coo(d, exec);
      validate(d_coo, exec);
      require_equal(to_host(d_coo, exec), h_coo);
      require_equal(to_host(to_csr(d_coo, exec), exec), h);
      require_equal(to_host(to_csr(to_device(h_coo, exec), exec), exec), h);

      auto h_ell = to_ell(h);
      auto d_ell = to_ell(d, exec);
      validate(d_ell, exec);
      require_equal(to_host(d_ell, exec), h_ell);
      require_equal(to_host(to_ell(d, h_ell.width() + 2, exec), exec), to_ell(h, h_ell.width() + 2));
      require_equal(to_host(to_csr(d_ell, exec), exec), h);
      require_equal(to_host(to_csr(to_device(h_ell, exec), exec), exec), h);

      auto h_dense = to_dense(h);
      auto d_dense = to_dense(d, exec);
      require_equal(to_host(d_dense, exec), h_dense);
      require_equal(to_host(to_csr<I>(d_dense, exec), exec), h);
      require_equal(to_host(to_dense(d_coo, exec), exec), h_dense);
      require_equal(to_host(to_coo<I>(d_dense, exec), exec), h_coo);
      require_equal(to_host(to_dense(d_ell, exec), exec), h_dense);

      for (auto [tr, tc] : {std::pair<std::int64_t, std::int64_t>{32, 32}, {3, 5}, {1, 1}}) {
        INFO("tile " << tr << " x " << tc);
        auto h_t = to_tiled_dense(h, tr, tc);
        auto d_t = to_tiled_dense(d, tr, tc, exec);
        validate(d_t, exec);
        require_equal(to_host(d_t, exec), h_t);
        require_equal(to_host(to_tiled_dense(d_dense, tr, tc, exec), exec), h_t);
        require_equal(to_host(to_csr<I>(d_t, exec), exec), h);
        require_equal(to_host(to_csr<I>(to_device(h_t, exec), exec), exec), h);
        require_equal(to_host(to_dense(d_t, exec), exec), h_dense);
        require_equal(compute_stats(d, tr, tc, exec), compute_stats(h, tr, tc));
      }
      require_equal(compute_stats(d, exec), compute_stats(h));

      auto d_tr = transpose(d, exec);
      validate(d_tr, exec);
      require_equal(to_host(d_tr, exec), transpose(h));
      require_equal(to_host(transpose(d_tr, exec), exec), h);
    }
  }
}

TEST_CASE("device conversions: hand-computed example, stored zeros, strided views, errors", "[cuda][formats]") {
  SDNN_REQUIRE_DEVICE();
  stream_guard g;
  cuda_exec exec{g.s};
  // [1 0 2 0]
  // [0 0 0 0]
  // [0 3 0 4]
  auto h = make_csr<float, int>(3, 4, {0, 2, 2, 4}, {0, 2, 1, 3}, {1, 2, 3, 4});
  auto d = to_device(h, exec);
  auto ell = to_host(to_ell(d, exec), exec);
  REQUIRE(ivec(ell.col_idx()) == std::vector<int>{0, -1, 1, 2, -1, 3});
  REQUIRE(fvec(ell.values()) == std::vector<float>{1, 0, 3, 2, 0, 4});
  auto t = to_host(to_tiled_dense(d, 2, 3, exec), exec);
  REQUIRE(ivec(t.occupied()) == std::vector<std::uint8_t>{1, 0, 1, 1});
  REQUIRE(ivec(t.tile_row_ptr()) == std::vector<std::int64_t>{0, 1, 3});
  REQUIRE(ivec(t.tile_col()) == std::vector<std::int64_t>{0, 0, 1});
  auto tr = to_host(transpose(d, exec), exec);
  REQUIRE(ivec(tr.row_ptr()) == std::vector<int>{0, 1, 2, 3, 4});
  REQUIRE(ivec(tr.col_idx()) == std::vector<int>{0, 2, 0, 2});
  REQUIRE(fvec(tr.values()) == std::vector<float>{1, 3, 2, 4});
  REQUIRE(has(error_text([&] { to_ell(d, 1, exec); }), "to_ell: requested width 1 is smaller than the longest row (2 entries)"));

  // Stored zeros stay stored in sparse formats, vanish in (tiled-)dense ones.
  auto z = to_device(make_csr<double, std::int64_t>(2, 2, {0, 1, 2}, {1, 0}, {0.0, 5.0}), exec);
  REQUIRE(to_host(to_csr(to_ell(z, exec), exec), exec).nnz() == 2);
  REQUIRE(to_host(to_csr(to_coo(z, exec), exec), exec).nnz() == 2);
  auto zt = to_host(to_tiled_dense(z, 1, 1, exec), exec);
  REQUIRE(ivec(zt.occupied()) == std::vector<std::uint8_t>{0, 0, 1, 0});
  REQUIRE(to_host(to_csr<std::int64_t>(to_dense(z, exec), exec), exec).nnz() == 1);

  // A strided device dense view (ld 4 for a 2 x 2 matrix).
  host_buffer<float> storage(8);
  float init[8] = {1, 0, 9, 9, 0, 2, 9, 9};
  std::copy(init, init + 8, storage.begin());
  auto dstorage = copy_to<device_space>(storage, exec);
  auto sv = to_host(to_csr(dense_view<float const>{2, 2, 4, dstorage.data()}, exec), exec);
  REQUIRE(ivec(sv.row_ptr()) == std::vector<int>{0, 1, 2});
  REQUIRE(ivec(sv.col_idx()) == std::vector<int>{0, 1});
  REQUIRE(fvec(sv.values()) == std::vector<float>{1, 2});

  // Device validate() reports what the host validate() reports.
  coo_matrix<float, int> bad(3, 8, 2);
  bad.row_idx()[0] = 1;  // (1, 0) then (0, 0): unsorted
  auto dbad = to_device(bad, exec);
  REQUIRE(has(error_text([&] { validate(dbad, exec); }), "coo: entry 1 (row 0, col 0): comes after entry 0 (row 1, col 0)"));
  auto dcsr_bad = to_device(h, exec);
  int const too_big = 9;
  SDNN_CUDA_CHECK(cudaMemcpyAsync(dcsr_bad.col_idx().data() + 1, &too_big, sizeof(int), cudaMemcpyHostToDevice, g.s));
  REQUIRE(has(error_text([&] { validate(dcsr_bad, exec); }), "csr: row 0: col_idx[1] = 9 is out of range for 4 columns"));
  ell_matrix<float, int> ebad(3, 4, 2, 1);  // all padding but nnz says 1
  REQUIRE(has(error_text([&] { validate(to_device(ebad, exec), exec); }), "ell: nnz = 1 but 0 slots hold entries"));
  auto dt = to_tiled_dense(d, 2, 3, exec);
  std::uint8_t const one = 1;
  SDNN_CUDA_CHECK(cudaMemcpyAsync(dt.occupied().data() + 1, &one, 1, cudaMemcpyHostToDevice, g.s));
  REQUIRE(has(error_text([&] { validate(dt, exec); }), "tiled_dense: tile (0, 1): occupied = 1 but the tile is all zero"));
}
