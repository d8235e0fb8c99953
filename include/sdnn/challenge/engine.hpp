// sdnn/challenge/engine.hpp - the depth-first Graph Challenge engine, host side: its options,
// result, streaming schedule and can_implement (the plan, ops::challenge_engine_plan, is in
// challenge/engine.cuh; the kernel in challenge/kernel/engine.cuh). A team of threads carries one
// input row through the layers and takes the next row the moment its row dies, retires or ends.
// The plan proves on the actual weights which shortcuts are exact (challenge/structure.hpp), and
// every output is summed in the reference's order with the reference's arithmetic, so final
// activations are bitwise those of reference::challenge_infer, for any weights.
// Design, memory and out-of-core streaming: docs/challenge.md#the-depth-first-engine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/core/plan.hpp"
#include "sdnn/core/weight_placement.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/challenge/structure.hpp"

namespace sdnn::ops {

// Where a team's state and input row live: automatic (shared memory when it leaves half the
// SM's threads running), or forced (tests; `shared` fails when it does not fit).
enum class challenge_engine_scratch_place { automatic, shared, global };

struct challenge_engine_options {
  challenge::structure_options structure;  // retirement / folding / sparse_first_layer switches
  float cap = 32.f;
  int threads_per_row = 0;  // 32, 128 or 512; 0: a warp up to 256 classes per layer, 128 threads
                            // up to 1024, else 512
  bool compact_terms = true;  // 4-byte terms (16-bit input, 16-bit index into the layer's distinct
                              // weights) when N <= 65536 and every layer has < 65535 distinct
                              // weights; else 8-byte terms (input, weight)
  bool fast_path = true;      // layers with one finite weight and equal-length classes skip the
                              // weight lookup and the zero test (exact: see challenge/kernel/engine.cuh)
  challenge_engine_scratch_place scratch = challenge_engine_scratch_place::automatic;
  // Where the layers' terms live during run() (core/weight_placement.hpp): device = resident for
  // the whole run (the default); host = in pinned host memory, streamed to the device one window
  // of consecutive layers at a time (docs/challenge.md#out-of-core-streaming: only the terms move;
  // descriptors, slices, weight tables and team scratch stay resident); automatic = host when the
  // resident plan exceeds device_memory_budget (host and automatic without a budget: 60% of the
  // free device memory).
  weight_placement weights = weight_placement::device;
  // Device bytes the plan may hold (0: no limit). Resident: its layer layout and team scratch,
  // checked before anything is allocated (an sdnn::error naming both sizes when over). Streamed:
  // the resident part (descriptors, slices, weight tables, team scratch), two window slots and
  // the park together stay within it (an sdnn::error when it cannot hold
  // two slots of the largest layer and one parked row). The folded layout is small: 65536 x 1920
  // (32 GB as CSR) is about 0.5 GB of 16-bit terms; unfolded it is 8 GB.
  std::uint64_t device_memory_budget = 0;
  // Streamed only (0: chosen from the budget): the bytes of each of the two window slots (raised
  // to the largest layer's terms, so 1 gives windows of one layer when layers are equal) and the
  // rows the park holds (tests use small ones to force many windows and groups).
  std::uint64_t stream_slot_bytes = 0;
  std::int64_t stream_park_rows = 0;
};

// What one run did, beside the categories.
struct challenge_engine_result {
  std::vector<std::int32_t> categories;  // 1-based ids of the rows with a nonzero final row, ascending
  std::vector<float> final;              // rows x N when keep_final, else empty
  std::int64_t row_layers = 0;           // sum over rows of the layers computed for them
  std::int64_t layers_skipped = 0;       // sum over rows of the layers not computed (dead or retired)
  std::int64_t retired = 0;              // rows that left as all-cap categories
  std::int64_t rows = 0;                 // rows taken from the device queue
  // Streamed weights only (else 0): host -> device bytes and window uploads of this run, passes
  // (launches), groups of rows, and windows skipped because no row of their group was alive.
  std::uint64_t bytes_streamed = 0;
  std::int64_t uploads = 0, passes = 0, groups = 0, windows_skipped = 0;
  double copy_seconds = 0;  // the uploads' durations on the copy stream (overlapped with launches)
};

// The streamed engine's schedule: windows of consecutive layers whose terms fit one slot, and
// how many rows the park holds between windows (challenge/engine_layout_build.hpp builds it).
struct challenge_engine_window {
  std::int32_t first = 0, end = 0;            // layers [first, end)
  std::int64_t term_begin = 0, term_end = 0;  // their terms, as indices into the layout's term array
};
struct challenge_engine_stream_schedule {
  std::vector<challenge_engine_window> windows;
  std::uint64_t slot_bytes = 0;          // each of the two device slots
  std::uint64_t park_bytes_per_row = 0;  // two buffers of max_distinct floats of state and a 4-byte id
  std::int64_t park_rows = 0;            // rows the park holds (the budget's share)
  std::uint64_t device_bytes(std::int64_t rows) const noexcept {  // slots + park for min(rows, park_rows)
    return 2 * slot_bytes + park_bytes_per_row * static_cast<std::uint64_t>(rows < park_rows ? rows : park_rows);
  }
};

// The engine's limit on shared memory per block: 227 KB on sm_90 (H100/H200); the plan asks
// the GPU (cudaDevAttrMaxSharedMemoryPerBlockOptin) and uses this only when there is none.
inline constexpr std::size_t challenge_engine_default_smem = 227 * 1024;

// Limits: int32 row and column indices; N < 2^30.
inline plan_status challenge_engine_can_implement(std::int64_t n, std::int64_t layers, std::int64_t max_distinct) {
  if (n <= 0 || layers < 0 || max_distinct < 0 || max_distinct > n)
    return plan_status::failure(::sdnn::detail::concat("challenge engine: ", layers, " layers of ", n, " neurons, ",
                                                       max_distinct, " classes"));
  if (n >= (std::int64_t{1} << 30))
    return plan_status::failure(::sdnn::detail::concat("challenge engine: N = ", n, " exceeds the int32 indexing"));
  return {};
}

class challenge_engine_plan;  // challenge/engine.cuh

}  // namespace sdnn::ops
