// sdnn/linear/reference/tc_linear.hpp - host references of the tensor-core linear layer
// Y[N x M] = epi(X[N x K] W^T), W M x K (the nn.Linear layout), on the 16-bit values as stored
// (the kernels' inputs): products exact in float, summed in float with k ascending, the epilogue
// (bias per output feature m) in float, one rounding to Out. One term per element the kernel
// multiplies, zeros included: every (m, k) of dense W, every element of a stored block, every
// element of a non-empty 16 x 16 sub-tile of tile_offsets W; so Inf and NaN in X spread as in the
// kernel (0 * Inf = NaN inside a stored block, nothing from a block that is not stored).
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/numeric.hpp"
#include "sdnn/formats/block_sparse.hpp"
#include "sdnn/formats/dense.hpp"
#include "sdnn/formats/tile_offsets.hpp"

namespace sdnn::reference {

namespace detail {
template <class Out>
Out store_as(float v) {
  if constexpr (std::is_same_v<Out, float>) return v;
  else return Out(v);
}
template <class T, class Out>
void check_tc_shapes(dense_view<T const> x, std::int64_t m, std::int64_t k, dense_view<Out> y, char const* what) {
  SDNN_EXPECTS_DIMS(x.cols == k, what, ": X is ", x.rows, " x ", x.cols, " but W has ", k, " columns (in features)");
  SDNN_EXPECTS_DIMS(y.rows == x.rows && y.cols == m, what, ": Y must be ", x.rows, " x ", m, ", got ", y.rows, " x ",
                    y.cols);
}
// Y = epi(acc) from per-(n, m) float sums kept as an M x N scratch (acc[m * N + n]).
template <class Out>
void finish(std::vector<float> const& acc, dense_view<Out> y, basic_epilogue<float> const& epi) {
  for (std::int64_t n = 0; n < y.rows; ++n)
    for (std::int64_t m = 0; m < y.cols; ++m) y(n, m) = store_as<Out>(epi(acc[std::size_t(m * y.rows + n)], m));
}
}  // namespace detail

// Dense W (M x K).
template <class T, class Out>
void tc_linear(dense_view<T const> x, dense_view<T const> w, dense_view<Out> y, basic_epilogue<float> const& epi) {
  detail::check_tc_shapes(x, w.rows, w.cols, y, "tc_linear (dense)");
  for (std::int64_t n = 0; n < x.rows; ++n)
    for (std::int64_t m = 0; m < w.rows; ++m) {
      float s = 0.0f;
      for (std::int64_t k = 0; k < w.cols; ++k) s += static_cast<float>(x(n, k)) * static_cast<float>(w(m, k));
      y(n, m) = detail::store_as<Out>(epi(s, m));
    }
}

// Block-sparse W: the stored blocks, each element of a block (zeros included).
template <class T, class Out>
void tc_linear(dense_view<T const> x, block_sparse_view<T> w, dense_view<Out> y, basic_epilogue<float> const& epi) {
  detail::check_tc_shapes(x, w.rows, w.cols, y, "tc_linear (block sparse)");
  std::vector<float> acc(std::size_t(w.rows) * std::size_t(x.rows), 0.0f);
  for (std::int32_t r = 0; r < w.row_blocks(); ++r)
    for (std::int32_t b = w.row_ptr[r]; b < w.row_ptr[r + 1]; ++b)  // k ascending: blocks are sorted
      for (std::int32_t i = 0; i < w.block_rows; ++i) {
        std::int64_t const m = std::int64_t(r) * w.block_rows + i;
        if (m >= w.rows) break;
        T const* wr = w.values + std::int64_t(b) * w.block_size() + std::int64_t(i) * w.block_cols;
        for (std::int64_t n = 0; n < x.rows; ++n) {
          float s = acc[std::size_t(m * x.rows + n)];
          for (std::int32_t j = 0; j < w.block_cols; ++j) {
            std::int64_t const k = std::int64_t(w.col_idx[b]) * w.block_cols + j;
            if (k < w.cols) s += static_cast<float>(x(n, k)) * static_cast<float>(wr[j]);
          }
          acc[std::size_t(m * x.rows + n)] = s;
        }
      }
  detail::finish(acc, y, epi);
}

// tile_offsets W: every element of each non-empty 16 x 16 sub-tile (zeros included).
template <class T, class Out>
void tc_linear(dense_view<T const> x, tile_offsets_view<T> w, dense_view<Out> y, basic_epilogue<float> const& epi) {
  detail::check_tc_shapes(x, w.rows, w.cols, y, "tc_linear (tile offsets)");
  std::vector<float> acc(std::size_t(w.rows) * std::size_t(x.rows), 0.0f);
  std::int32_t const S = w.subtiles(), sub_cols = w.tile_cols / 16;
  std::vector<float> sub(256);
  for (std::int32_t r = 0; r < w.row_tiles(); ++r)
    for (std::int32_t t = w.tile_ptr[r]; t < w.tile_ptr[r + 1]; ++t) {
      std::uint8_t const* rec = w.data + std::size_t(w.tile_offset[t]) * 16;
      std::uint32_t const nnz = ::sdnn::detail::read_u16(rec + 2 * S);
      std::uint8_t const* vals = rec + tile_record::header_bytes(std::uint32_t(S));
      std::uint8_t const* pos = vals + tile_record::value_bytes(nnz, sizeof(T));
      // Sub-tiles in k order within a row of sub-tiles, so that each output's sum runs k ascending.
      for (std::int32_t sr = 0; sr < w.tile_rows / 16; ++sr)
        for (std::int32_t sc = 0; sc < sub_cols; ++sc) {
          std::int32_t const s = sr * sub_cols + sc;
          std::uint32_t const b = ::sdnn::detail::read_u16(rec + 2 * s), e = ::sdnn::detail::read_u16(rec + 2 * (s + 1));
          if (b == e) continue;  // an empty sub-tile is skipped by the kernel too
          std::fill(sub.begin(), sub.end(), 0.0f);
          for (std::uint32_t q = b; q < e; ++q) {
            T v;
            std::memcpy(&v, vals + std::size_t(q) * sizeof(T), sizeof(T));
            sub[pos[q]] = static_cast<float>(v);
          }
          for (std::int32_t i = 0; i < 16; ++i) {
            std::int64_t const m = std::int64_t(r) * w.tile_rows + sr * 16 + i;
            if (m >= w.rows) break;
            for (std::int64_t n = 0; n < x.rows; ++n) {
              float s2 = acc[std::size_t(m * x.rows + n)];
              for (std::int32_t j = 0; j < 16; ++j) {
                std::int64_t const k = std::int64_t(w.tile_col[t]) * w.tile_cols + sc * 16 + j;
                if (k < w.cols) s2 += static_cast<float>(x(n, k)) * sub[std::size_t(i * 16 + j)];
              }
              acc[std::size_t(m * x.rows + n)] = s2;
            }
          }
        }
    }
  detail::finish(acc, y, epi);
}

}  // namespace sdnn::reference
