// sdnn/pipeline/weight_store.hpp - out-of-core weights for the layer-wise pipeline (issue 11):
// the host-testable part (placement modes, byte sizes, the budget decision). The device part,
// pipeline::weight_store<Policy, T>, is in pipeline/weight_store.cuh.
//
// Resident (weights = device): every layer's device plan lives in device memory for the whole
// run (pipeline::challenge_network's default).
//
// Streamed (weights = host): every layer is packed once, at plan time, into one pinned host
// block (cudaHostAlloc) holding exactly what its product kernel reads on the device:
//   bias[out] (accumulator type), then
//   csc_tiled policies with tiles:  the footprint tiles of W^T (fp_ptr, fp, col_ptr, cols,
//                                   nnz_ptr: int32; lidx: uint16; vals: T)  ~ 6 B per nonzero
//   otherwise (csc_gather, or tiles refused):  W^T as CSR (row_ptr[n+1], col_idx, values) ~ 8 B per nonzero
// each array aligned to 256 bytes. The device holds a ring of K >= 2 slots, each the size of the
// largest block. Per layer and per batch exactly one block moves host -> device (its packed
// size, layer_bytes below; nothing moves back). The resident tiled plan keeps W^T and the
// tiles, so a streamed block is smaller than the resident layer.
//
// Overlap (all ordering by cudaEvents, no device or host synchronisation per layer): a copy
// stream uploads layer l + K - 1 into slot (l + K - 1) mod K while the compute stream runs
// layer l from slot l mod K. A copy into a slot waits on that slot's "free" event (recorded on
// the compute stream after the last layer that read it); a layer waits on its slot's "loaded"
// event (recorded on the copy stream after its upload). So at most K - 1 uploads run ahead of
// compute; with K = 2 the upload of layer l + 1 overlaps the product of layer l. A batch then
// takes about max(sum of uploads, sum of products) plus the first upload, when uploads and
// products of a layer are balanced; a network whose products are much faster than the link
// (the usual case for the Graph Challenge: ~16 MB of CSR per 65536-neuron layer vs a few
// hundred microseconds of product) is bound by the host-to-device bandwidth. Deeper rings
// (K > 2) absorb jitter between layers, they cannot beat the link.
//
// CUDA Graphs: in streamed mode the pipeline does not capture the batch into a graph (the
// per-layer launch gaps are microseconds against a ~millisecond upload per layer, and a
// capture would need the copy stream forked into it and the slot events re-made per replay).
// Every batch re-streams all L layers: the bytes moved per run are batches x sum(layer_bytes),
// so the pipeline sizes batches as large as device memory allows.
//
// The budget (--device-memory-budget) bounds the device bytes of the weights (resident: all
// layers; streamed: K slots). Activations, row lists and workspaces are sized separately from
// the free device memory, as before.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/core/weight_placement.hpp"

namespace sdnn::pipeline {

// The placement vocabulary (weight_placement, parse_weight_placement, parse_byte_size,
// format_bytes) is core's (core/weight_placement.hpp): the depth-first engine's plan (ops) takes
// the same modes and budget.
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
// the weights (0 = no budget). slots: the ring depth asked for (0 = default_weight_slots, fewer
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

// What a streamed run moved (pipeline::challenge_network::weight_stats() after run()).
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
