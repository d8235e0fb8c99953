// sdnn/pipeline/weight_store.hpp - out-of-core weights for a layer-wise pipeline: the
// host-testable part (per-layer byte sizes, the ring depth, the placement decision under a
// device-memory budget). The device part, pipeline::weight_store<Policy, T>, is in
// pipeline/weight_store.cuh. Weights are resident (every layer's device plan in device memory
// for the whole run, the default) or streamed (every layer packed once into pinned host memory
// and uploaded per batch through a ring of K >= 2 device slots, overlapped with the products).
// What moves, what overlaps and what bounds a streamed run: docs/foundation.md#the-weight-store.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/core/types.hpp"
#include "sdnn/core/weight_placement.hpp"

namespace sdnn::pipeline {

// The placement vocabulary (weight_placement, parse_weight_placement, parse_byte_size,
// format_bytes) is core's (core/weight_placement.hpp): every plan that streams weights takes the
// same modes and budget.
using ::sdnn::format_bytes;
using ::sdnn::parse_byte_size;
using ::sdnn::parse_weight_placement;
using ::sdnn::weight_placement;

// Device bytes of one layer kept as W^T in CSR (rows + 1 offsets, nnz indices and values) plus
// its bias: the estimate the automatic placement uses before any layer is packed.
inline std::uint64_t csr_layer_bytes(std::int64_t rows, std::int64_t nnz, std::size_t value_bytes = 4,
                                     std::size_t bias_bytes = 4, std::int64_t bias_n = 0) {
  return static_cast<std::uint64_t>(rows + 1) * 4 + static_cast<std::uint64_t>(nnz) * (4 + value_bytes) +
         static_cast<std::uint64_t>(bias_n) * bias_bytes;
}

// The same estimate for value type T: sizeof(T) bytes per value (2 for sdnn::bf16 and
// sdnn::fp16, half of float's) and a bias of accumulator_t<T> values (float for the 16-bit types).
template <class T>
std::uint64_t csr_layer_bytes_of(std::int64_t rows, std::int64_t nnz, std::int64_t bias_n = 0) {
  return csr_layer_bytes(rows, nnz, sizeof(T), sizeof(accumulator_t<T>), bias_n);
}

// What weight_store<Policy, T> packs for one layer streamed as W^T in CSR (csc_gather, or
// csc_tiled whose tiles were refused): the bias (n accumulator values, when there is one), the
// n + 1 offsets, the nnz indices and the nnz values, each part starting at a multiple of 256
// bytes; at least 256 bytes.
template <class T>
std::uint64_t streamed_csr_layer_bytes(std::int64_t n, std::int64_t nnz, bool has_bias) {
  auto const align = [](std::uint64_t x) { return (x + 255) & ~std::uint64_t{255}; };
  std::uint64_t at = has_bias ? align(static_cast<std::uint64_t>(n) * sizeof(accumulator_t<T>)) : 0;
  at = align(at + static_cast<std::uint64_t>(n + 1) * sizeof(std::int32_t));
  at = align(at + static_cast<std::uint64_t>(nnz) * sizeof(std::int32_t));
  at = align(at + static_cast<std::uint64_t>(nnz) * sizeof(T));
  return std::max<std::uint64_t>(at, 256);
}

// The depth of the ring when the caller does not ask for one: 3 (one upload in flight beside
// the one being waited on absorbs a slow layer), or fewer when the budget or the depth of the
// network does not allow it (never fewer than 2).
inline constexpr int default_weight_slots = 3;

struct weight_store_decision {
  bool streamed = false;
  int slots = 0;                  // K (streamed), 0 when resident
  std::uint64_t slot_bytes = 0;   // the largest layer (streamed)
  std::uint64_t total_bytes = 0;  // sum of the layer bytes
  std::uint64_t device_bytes = 0; // weights on the device: total (resident) or slots x slot_bytes
};

// The placement of a network with these per-layer byte sizes under `budget` device bytes for
// the weights (0 = no budget). The budget bounds the weights only (resident: all layers;
// streamed: K slots); activations, row lists and workspaces are sized separately, from the free
// device memory. slots: the ring depth asked for (0 = default_weight_slots, fewer
// if the budget needs it). Throws sdnn::error, naming the numbers, when:
//   * mode = device and the layers exceed a nonzero budget;
//   * the network is streamed and the budget holds fewer than two slots of the largest layer;
//   * slots was asked (> 0) and is below 2, or the budget cannot hold that many.
inline weight_store_decision choose_weight_store(std::vector<std::uint64_t> const& layer_bytes, std::uint64_t budget,
                                                 weight_placement mode, int slots = 0) {
  SDNN_EXPECTS(!layer_bytes.empty(), "weight store: a network needs at least one layer");
  SDNN_EXPECTS(slots == 0 || slots >= 2, "weight store: a streamed ring needs at least 2 slots (double buffer), ",
               "asked for ", slots);
  weight_store_decision d;
  for (auto b : layer_bytes) {
    d.total_bytes += b;
    d.slot_bytes = std::max(d.slot_bytes, b);
  }
  bool const over = budget > 0 && d.total_bytes > budget;
  if (mode == weight_placement::device) {
    SDNN_EXPECTS(!over, "weight store: the ", layer_bytes.size(), " layers take ", format_bytes(d.total_bytes),
                 " of device memory, more than the budget of ", format_bytes(budget),
                 "; stream them from host memory (weights host or auto) or raise the budget");
  }
  d.streamed = mode == weight_placement::host || (mode == weight_placement::automatic && over);
  if (!d.streamed) {
    d.device_bytes = d.total_bytes;
    d.slot_bytes = 0;
    return d;
  }
  std::uint64_t const fit = budget > 0 ? budget / std::max<std::uint64_t>(d.slot_bytes, 1) : ~std::uint64_t{0};
  if (fit < 2)
    SDNN_FAIL("weight store: a device-memory budget of ", format_bytes(budget), " holds ", fit,
              " slot(s) of the largest layer (", format_bytes(d.slot_bytes), "); streaming needs at least 2 (",
              format_bytes(2 * d.slot_bytes), ")");
  if (slots > 0) {
    SDNN_EXPECTS(static_cast<std::uint64_t>(slots) <= fit, "weight store: ", slots, " slots of ",
                 format_bytes(d.slot_bytes), " exceed the device-memory budget of ", format_bytes(budget), " (it holds ",
                 fit, ")");
    d.slots = slots;
  } else {
    d.slots = static_cast<int>(std::min<std::uint64_t>(fit, default_weight_slots));
  }
  d.device_bytes = static_cast<std::uint64_t>(d.slots) * d.slot_bytes;
  return d;
}

// What a streamed run moved (a pipeline's weight_stats() after run()).
struct weight_store_stats {
  bool streamed = false;
  int slots = 0;
  std::uint64_t slot_bytes = 0;
  std::uint64_t pinned_bytes = 0;   // host memory pinned for the packed layers
  std::uint64_t bytes = 0;          // host -> device bytes of the last run (all batches)
  std::int64_t uploads = 0;         // layer uploads of the last run
  double copy_seconds = 0;          // sum of the uploads' durations (copy stream busy), last run
};

}  // namespace sdnn::pipeline
