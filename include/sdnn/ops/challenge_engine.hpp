// sdnn/ops/challenge_engine.hpp - the depth-first Graph Challenge engine (issue 10): host side.
//
//   ops::challenge_engine_plan plan(layers, bias, exec, options);    (ops/challenge_engine.cuh)
//   auto r = plan.run(exec, inputs_device_csr, keep_final);           categories + what it did
//
// The plan proves, on the actual weights (ops/challenge_structure.hpp), which shortcuts are
// exact: retirement of rows that reach the all-cap vector (per layer suffix), folding of
// identical output neurons (per layer), and uploads the layers once (W^T of each class
// representative, inputs ascending: the reference's summation order). A layer or suffix whose
// proof fails runs without that shortcut; nothing is assumed from N or from file names.
//
// Exactness: every output is summed in the reference's order (k ascending) with the
// reference's arithmetic (one float rounding per product and per add), so final activations
// are bitwise those of reference::challenge_infer, for any weights.
//
// Limits (can_implement): N * (R + classes) floats of shared memory per block for R >= 1 rows,
// i.e. N <= 16384 on an H100/H200 with folding (N = 65536 needs a tiling of the activation row
// across blocks, not built; pipeline::challenge_network serves it); int32 row and column indices.
//
// Design for N = 65536 (not built; written down so that the next step is measurable). One row is
// 256 KB of float activations, more than a block's shared memory (227 KB). Two ways, with the
// bytes each moves per row-layer (rows x layers actually computed, ~5 M at L = 1920 before
// retirement, ~0.25 M after it, measured counts of the smaller sizes scaled by N):
//  (a) A cluster of 4 blocks (thread-block cluster, distributed shared memory, sm_90) holds one
//      row split in 4 slices of 16384 neurons (64 KB each). A class's inputs are RadiX-Net
//      strided (32 inputs spread over the row), so a block reads its inputs from the 4 slices
//      through DSMEM: 32 inputs x 4 B per class, 4096 classes (fold 16) -> 512 KB of DSMEM reads
//      per row-layer, 0 bytes of HBM for activations; weights 4096 classes x 32 x 8 B = 1 MB per
//      layer from L2 (shared by the cluster's rows). Cluster barriers replace __syncthreads.
//  (b) Without clusters: the row in global memory (L2-resident for a few hundred rows: 256 KB
//      each, 50-60 MB of L2), a block per 16384-neuron slice, a grid-wide step per layer: per
//      row-layer 256 KB written + 32 x 4 B x 4096 gathered sectors (~4 MB of 32-byte sectors)
//      read; 8x the traffic of (a). (a) is the plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/core/plan.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/ops/challenge_structure.hpp"

namespace sdnn::ops {

struct challenge_engine_options {
  challenge::structure_options structure;  // retirement / folding / sparse_first_layer switches
  float cap = 32.f;
  int rows_per_block = 0;  // 1, 2, 4, 8 or 16; 0: the largest of 8, 4, 2 whose block uses at most a
                           // third of the shared memory (three blocks per SM), else 2 or 1 row(s)
};

// What one run did, beside the categories.
struct challenge_engine_result {
  std::vector<std::int32_t> categories;  // 1-based ids of the rows with a nonzero final row, ascending
  std::vector<float> final;              // rows x N when keep_final, else empty
  std::int64_t row_layers = 0;           // sum over computed layers of the live rows in them
  std::int64_t layers_skipped = 0;       // over all block batches: layers skipped, no live row left
  std::int64_t retired = 0;              // rows that left as all-cap categories
  std::int64_t batches = 0;              // block batches of rows_per_block rows
};

// Shared memory the engine needs per block for R rows of N neurons and at most D classes.
inline std::size_t challenge_engine_smem_bytes(int rows_per_block, std::int64_t n, std::int64_t max_distinct) {
  return static_cast<std::size_t>(rows_per_block) * static_cast<std::size_t>(n + max_distinct) * sizeof(float);
}

// The engine's limit on shared memory per block: 227 KB on sm_90 (H100/H200); the plan asks
// the GPU (cudaDevAttrMaxSharedMemoryPerBlockOptin) and uses this only when there is none.
inline constexpr std::size_t challenge_engine_default_smem = 227 * 1024;

inline plan_status challenge_engine_can_implement(std::int64_t n, std::int64_t layers, std::int64_t max_distinct,
                                                  std::size_t smem_limit = challenge_engine_default_smem) {
  if (n <= 0 || layers < 0)
    return plan_status::failure(::sdnn::detail::concat("challenge engine: ", layers, " layers of ", n, " neurons"));
  if (n > (std::int64_t{1} << 30))
    return plan_status::failure(::sdnn::detail::concat("challenge engine: N = ", n, " exceeds the int32 indexing"));
  if (challenge_engine_smem_bytes(1, n, max_distinct) > smem_limit)
    return plan_status::failure(::sdnn::detail::concat("challenge engine: one row of N = ", n, " neurons and ", max_distinct,
                                               " distinct neurons needs ",
                                               challenge_engine_smem_bytes(1, n, max_distinct),
                                               " bytes of shared memory, the GPU gives ", smem_limit,
                                               " (N = 65536 needs a tiling not built; use pipeline::challenge_network)"));
  return {};
}

class challenge_engine_plan;  // ops/challenge_engine.cuh

}  // namespace sdnn::ops
