// sdnn/challenge/distinct_inputs.hpp - `count` DISTINCT Graph-Challenge-like input images derived
// deterministically from a set of source digits (host), and an exact distinctness check.
// challenge_inputs_from_mnist repeats its source cyclically (the 10000 shipped digits six times
// for 60000 inputs), which would flatter any de-duplication of rows; here image n is source digit
// n mod D shifted by a small whole-pixel offset chosen from n / D, the next offset tried whenever
// an image repeats an earlier one. Recipe: docs/challenge.md#inputs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/challenge/inputs.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/io/mnist_idx.hpp"

namespace sdnn::data {

struct image_offset {
  std::int32_t dx = 0, dy = 0;  // source pixels: dx horizontal (columns), dy vertical (rows)
};

// The fixed offset sequence: (0,0), the 8 neighbours in the order above, then the rings of
// Chebyshev radius 2 and 3 (each ring by increasing |dx| + |dy|, then dy, then dx).
inline std::vector<image_offset> distinct_input_offsets() {
  std::vector<image_offset> o = {{0, 0}, {1, 0}, {0, 1}, {-1, 0}, {0, -1}, {1, 1}, {-1, -1}, {1, -1}, {-1, 1}};
  for (std::int32_t r = 2; r <= 3; ++r) {
    std::vector<image_offset> ring;
    for (std::int32_t dy = -r; dy <= r; ++dy)
      for (std::int32_t dx = -r; dx <= r; ++dx)
        if (std::max(std::abs(dx), std::abs(dy)) == r) ring.push_back({dx, dy});
    std::stable_sort(ring.begin(), ring.end(), [](image_offset a, image_offset b) {
      return std::abs(a.dx) + std::abs(a.dy) < std::abs(b.dx) + std::abs(b.dy);
    });
    o.insert(o.end(), ring.begin(), ring.end());
  }
  return o;
}

// How each image was made (optional output of distinct_challenge_inputs).
struct distinct_inputs_info {
  std::vector<std::int32_t> source;        // [count]: source image index (n mod D)
  std::vector<std::int32_t> offset_index;  // [count]: index into distinct_input_offsets()
  std::int32_t moved = 0;                  // images that left their default offset (n / D)
};

namespace detail {

inline std::uint64_t hash_row(std::int32_t const* cols, float const* values, std::int64_t n) {
  std::uint64_t h = 0x243F6A8885A308D3ull ^ static_cast<std::uint64_t>(n);
  for (std::int64_t a = 0; a < n; ++a) {
    std::uint32_t vb = 0;
    if (values) std::memcpy(&vb, values + a, sizeof vb);
    std::uint64_t v = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(cols[a])) << 32) | vb;
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
  }
  return h;
}

}  // namespace detail

// Source image s = n mod D (D = mnist.count) is shifted by a small whole-pixel offset (dx, dy) in
// the source frame (dx > 0 moves the digit right, dy > 0 down; pixels shifted in are 0, pixels
// shifted out are lost), then resized and thresholded exactly as challenge_inputs_from_mnist
// does. The offset of image n is distinct_input_offsets()[n / D], so images 0..D-1 are the
// unshifted images of challenge_inputs_from_mnist, in order. When image n equals an image made
// before it (exact comparison of pixel lists, after a hash), the next offset in the list is tried
// (index + 1, + 2, ...) until the image is new: deterministic (it depends only on the source, N,
// count and threshold). If the offsets run out (an empty digit, or count > D x 49) it throws
// sdnn::error.
inline csr_matrix<float, std::int32_t> distinct_challenge_inputs(io::idx_images const& mnist, std::int32_t neurons,
                                                                 std::int32_t count, float threshold = 0.7f,
                                                                 distinct_inputs_info* info = nullptr) {
  char const* who = "distinct_challenge_inputs";
  std::int32_t const s = detail::challenge_image_side(mnist, neurons, count, who);
  auto const offsets = distinct_input_offsets();
  auto const k = static_cast<std::int64_t>(offsets.size());
  SDNN_EXPECTS(count == 0 || (count - 1) / mnist.count < k, "distinct_challenge_inputs: ", count,
               " images need more than the ", k, " offsets of each of the ", mnist.count, " source images");

  std::int32_t const rows = mnist.rows, cols = mnist.cols;
  std::size_t const frame = std::size_t(rows) * cols;
  std::vector<std::uint8_t> shifted(frame);
  auto make = [&](std::int32_t src, image_offset off) {
    std::uint8_t const* img = mnist.pixels.data() + frame * static_cast<std::size_t>(src);
    for (std::int32_t r = 0; r < rows; ++r)
      for (std::int32_t c = 0; c < cols; ++c) {
        std::int32_t const r0 = r - off.dy, c0 = c - off.dx;
        shifted[std::size_t(r) * cols + c] =
            (r0 >= 0 && r0 < rows && c0 >= 0 && c0 < cols) ? img[std::size_t(r0) * cols + c0] : std::uint8_t(0);
      }
    return detail::challenge_image_pixels(shifted.data(), rows, cols, s, threshold);
  };

  std::vector<std::vector<std::int32_t>> pix;
  pix.reserve(static_cast<std::size_t>(count));
  std::unordered_multimap<std::uint64_t, std::int32_t> seen;
  if (info) {
    info->source.assign(static_cast<std::size_t>(count), 0);
    info->offset_index.assign(static_cast<std::size_t>(count), 0);
    info->moved = 0;
  }
  for (std::int32_t n = 0; n < count; ++n) {
    std::int32_t const src = n % mnist.count;
    std::int64_t o = n / mnist.count;
    for (;; ++o) {
      SDNN_EXPECTS(o < k, "distinct_challenge_inputs: image ", n, " (source ", src, ") equals an earlier image at "
                   "every one of the ", k, " offsets (an empty or duplicated source digit?)");
      auto p = make(src, offsets[static_cast<std::size_t>(o)]);
      std::uint64_t const h = detail::hash_row(p.data(), nullptr, static_cast<std::int64_t>(p.size()));
      bool dup = false;
      for (auto [it, end] = seen.equal_range(h); it != end && !dup; ++it)
        dup = pix[static_cast<std::size_t>(it->second)] == p;
      if (dup) continue;
      seen.emplace(h, n);
      pix.push_back(std::move(p));
      break;
    }
    if (info) {
      info->source[static_cast<std::size_t>(n)] = src;
      info->offset_index[static_cast<std::size_t>(n)] = static_cast<std::int32_t>(o);
      if (o != n / mnist.count) ++info->moved;
    }
  }
  if (count == 0) return csr_matrix<float, std::int32_t>(0, neurons, 0);
  return detail::challenge_rows_from_pixels(pix, count, neurons, who);
}

// Rows of a CSR that repeat an earlier row (same columns and bitwise-same values).
struct row_duplicates {
  std::int64_t duplicate_rows = 0;  // rows equal to some earlier row
  std::int32_t first = -1;          // the earliest pair: row `second` equals the earlier row `first`
  std::int32_t second = -1;         // (second is the smallest row index that repeats an earlier row)
  bool distinct() const { return duplicate_rows == 0; }
};

// Exact: hash each row, sort by (hash, row), compare rows of equal hash entry by entry.
template <class Index>
row_duplicates find_duplicate_rows(csr_matrix<float, Index> const& y) {
  validate(y);
  auto const v = y.view();
  auto const n = static_cast<std::int64_t>(v.rows);
  std::vector<std::uint64_t> hash(static_cast<std::size_t>(n));
  std::vector<std::int32_t> cols;
  for (std::int64_t i = 0; i < n; ++i) {
    cols.assign(v.col_idx + v.row_ptr[i], v.col_idx + v.row_ptr[i + 1]);
    hash[static_cast<std::size_t>(i)] =
        detail::hash_row(cols.data(), v.values + v.row_ptr[i], static_cast<std::int64_t>(cols.size()));
  }
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return hash[a] != hash[b] ? hash[a] < hash[b] : a < b;
  });
  auto same = [&](std::int64_t a, std::int64_t b) {
    auto const la = v.row_ptr[a + 1] - v.row_ptr[a], lb = v.row_ptr[b + 1] - v.row_ptr[b];
    if (la != lb) return false;
    for (Index t = 0; t < la; ++t) {
      if (v.col_idx[v.row_ptr[a] + t] != v.col_idx[v.row_ptr[b] + t]) return false;
      if (std::memcmp(v.values + v.row_ptr[a] + t, v.values + v.row_ptr[b] + t, sizeof(float)) != 0) return false;
    }
    return true;
  };
  row_duplicates r;
  std::vector<std::int64_t> reps;
  for (std::size_t g = 0; g < order.size();) {
    std::size_t h = g;
    while (h < order.size() && hash[order[h]] == hash[order[g]]) ++h;
    reps.clear();
    for (std::size_t t = g; t < h; ++t) {  // ascending rows within a run of equal hashes
      std::int64_t const i = order[t];
      std::int64_t rep = -1;
      for (std::int64_t q : reps)
        if (same(q, i)) {
          rep = q;
          break;
        }
      if (rep < 0) {
        reps.push_back(i);
        continue;
      }
      ++r.duplicate_rows;
      if (r.second < 0 || i < r.second) {
        r.second = static_cast<std::int32_t>(i);
        r.first = static_cast<std::int32_t>(rep);
      }
    }
    g = h;
  }
  return r;
}

}  // namespace sdnn::data
