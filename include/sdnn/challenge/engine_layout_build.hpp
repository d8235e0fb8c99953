// sdnn/challenge/engine_layout_build.hpp - the host side of the depth-first Graph Challenge engine:
// the plan's layer layout (challenge/engine_layout.hpp), built from the layers and their
// structure proofs, one layer at a time. Host code only, so the layout (and a host emulation of
// the kernel on it, tests/host/test_challenge_engine_layout.cpp) is tested without a GPU;
// challenge/engine.cuh uploads it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <future>
#include <limits>
#include <memory_resource>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/core/weight_placement.hpp"
#include "sdnn/challenge/engine_layout.hpp"
#include "sdnn/formats/convert.hpp"
#include "sdnn/formats/csr.hpp"
#include "sdnn/challenge/engine.hpp"
#include "sdnn/challenge/structure.hpp"

namespace sdnn::ops {

// The engine's layers as host arrays (uploaded as they are). The term arrays (one of wide,
// compact_terms, uniform_terms is used) live in the memory resource the build is given: the plan
// passes page-locked memory when it streams them, so the copy stream reads them where they were
// built.
struct challenge_engine_layout {
  explicit challenge_engine_layout(std::pmr::memory_resource* terms = std::pmr::get_default_resource())
      : wide(terms), compact_terms(terms), uniform_terms(terms) {}
  std::int64_t n = 0, connections = 0;
  std::int32_t max_distinct = 0;
  bool compact = false;  // terms: compact (4 bytes) or wide (8 bytes)
  bool uniform = false;  // every layer on the fast path: uniform_terms replace compact_terms
  std::vector<challenge_engine_layer_desc> desc;  // [L]
  std::vector<challenge_engine_slice> slices;
  std::pmr::vector<challenge_engine_term> wide;
  std::pmr::vector<challenge_engine_compact_term> compact_terms;  // empty when uniform
  std::pmr::vector<std::uint16_t> uniform_terms;  // the fast path's 16-bit terms (same term_base and count)
  std::vector<float> values;            // compact: each layer's distinct weights
  std::vector<std::int32_t> last_class;  // [N]: class of output neuron j in the last layer
  std::vector<double> folds;            // [L]: N / classes
  challenge::structure_report report;
  std::int32_t layers() const noexcept { return static_cast<std::int32_t>(desc.size()); }
};

// One layer as the build consumes it: W^T (row j = the inputs of output j, k ascending), the
// layer's proofs, and its weights' distinct bit patterns (up to the compact limit).
struct challenge_engine_prepared {
  csr_matrix<float, std::int32_t> wt;
  challenge::layer_proofs proofs;
  std::int64_t rows = 0, cols = 0, nnz = 0;
  bool compact_ok = true;
};

inline challenge_engine_prepared prepare_engine_layer(csr_matrix<float, std::int32_t> const& w, std::int32_t l, float bias,
                                                     challenge_engine_options const& opt) {
  challenge_engine_prepared p;
  p.rows = w.rows();
  p.cols = w.cols();
  p.nnz = w.nnz();
  p.proofs = challenge::prove_layer(w, l, bias, opt.cap, opt.structure);
  std::unordered_set<std::uint32_t> seen;
  for (float v : w.values()) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    if (seen.insert(bits).second && seen.size() >= challenge_engine_compact_empty) {
      p.compact_ok = false;
      break;
    }
  }
  p.wt = transpose(w);
  return p;
}

// Compact terms of layers 0 .. layers-1 as wide ones (same slices and offsets; padding k = -1),
// in the compact terms' memory resource.
inline std::pmr::vector<challenge_engine_term> widen_engine_terms(
    std::pmr::vector<challenge_engine_compact_term> const& compact,
    std::vector<challenge_engine_layer_desc> const& desc, std::vector<float> const& values,
    std::int32_t layers) {
  std::pmr::vector<challenge_engine_term> wide(compact.size(), challenge_engine_term{-1, 0.f},
                                               compact.get_allocator().resource());
  for (std::int32_t l = 0; l < layers; ++l) {
    auto const& ds = desc[static_cast<std::size_t>(l)];
    std::size_t const end =
        l + 1 < layers ? static_cast<std::size_t>(desc[static_cast<std::size_t>(l) + 1].term_base) : compact.size();
    for (std::size_t e = static_cast<std::size_t>(ds.term_base); e < end; ++e) {
      std::uint32_t const v = compact[e];
      if ((v >> 16) == challenge_engine_compact_empty) continue;
      wide[e] = {static_cast<std::int32_t>(v & 0xffffu), values[static_cast<std::size_t>(ds.value_base) + (v >> 16)]};
    }
  }
  return wide;
}

// The fast path's terms of layers 0 .. layers-1 (each of them uniform) as compact ones: the same
// slices, weight index 0, the last slice's missing classes empty. In `room` terms' space.
inline std::pmr::vector<challenge_engine_compact_term> compact_of_uniform_terms(
    std::pmr::vector<std::uint16_t> const& uniform, std::vector<challenge_engine_layer_desc> const& desc,
    std::int32_t layers, std::size_t room) {
  std::pmr::vector<challenge_engine_compact_term> compact(uniform.get_allocator().resource());
  compact.reserve(std::max(room, uniform.size()));
  compact.assign(uniform.size(), challenge_engine_compact_empty << 16);
  for (std::int32_t l = 0; l < layers; ++l) {
    auto const& ds = desc[static_cast<std::size_t>(l)];
    std::int32_t const d = ds.distinct & ~challenge_engine_suffix_bit;
    for (std::int32_t u = 0; u < d; ++u)
      for (std::int32_t p = 0; p < ds.length; ++p)
        compact[static_cast<std::size_t>(ds.term_base + static_cast<std::int64_t>(u >> 5) * 32 * ds.length + 32 * p +
                                         (u & 31))] =
            uniform[static_cast<std::size_t>(challenge_engine_uniform_at(ds.term_base, ds.length, u, p))];
  }
  return compact;
}

namespace detail {
// Appends `add` terms of layer l (of L) set to `fill`. When the array is short it reserves room
// for the remaining layers at this layer's count (exact when the layers' term counts are equal,
// as in the Graph Challenge networks unfolded), at least 1.5 times what it had: an array is
// allocated once, not per layer (an allocation of pinned memory page-locks every page of it).
template <class V>
void engine_append_layer_terms(V& v, std::size_t add, std::int32_t l, std::int32_t L, typename V::value_type fill) {
  std::size_t const need = v.size() + add;
  if (v.capacity() < need)
    v.reserve(std::max(v.size() + add * static_cast<std::size_t>(L - l), v.capacity() + v.capacity() / 2));
  v.resize(need, fill);
}
// Frees v's array (keeping its memory resource).
template <class V>
void engine_release_terms(V& v) {
  V(v.get_allocator()).swap(v);
}
// v in an array of exactly its size (one copy, only when it holds more).
template <class V>
void engine_fit_terms(V& v) {
  if (v.capacity() == v.size()) return;
  V t(v.get_allocator());
  t.reserve(v.size());
  t.insert(t.end(), v.begin(), v.end());
  v.swap(t);
}
}  // namespace detail

// The layout of layers 0 .. L-1, from prepare_layer(l) (a challenge_engine_prepared), called
// for `threads` layers at a time on as many threads, the results consumed in layer order. The
// term arrays are allocated from terms_memory; when that is not the default resource (the
// streamed plan's pinned memory) the final array holds exactly its terms.
template <class Prepare>
challenge_engine_layout build_challenge_engine_layout(std::int32_t L, Prepare&& prepare_layer,
                                                      challenge_engine_options const& opt, int threads = 1,
                                                      std::pmr::memory_resource* terms_memory =
                                                          std::pmr::get_default_resource()) {
  SDNN_EXPECTS(L > 0, "challenge engine: needs at least one layer, got ", L);
  SDNN_EXPECTS(threads >= 1, "challenge engine: threads must be at least 1, got ", threads);
  SDNN_EXPECTS(terms_memory != nullptr, "challenge engine: no memory resource for the terms");
  challenge_engine_layout out(terms_memory);
  auto& desc = out.desc;
  auto& slices = out.slices;
  auto& wide = out.wide;
  auto& compact = out.compact_terms;
  auto& uniform = out.uniform_terms;
  auto& values = out.values;
  // Host arrays of the device layout (challenge_engine_layers): per layer its classes
  // (representatives of identical output neurons, or every neuron when the layer does not
  // fold), each class's terms from W^T (inputs ascending: the reference's order), for layers
  // after the first the inputs rewritten as classes of the layer before, sliced by 32 classes.
  // While every layer so far takes the fast path the terms are written as 16-bit ones directly
  // (uniform_terms: no 4-byte copy to convert at the end); the first layer that does not turns
  // them compact, a layer of 65535 or more distinct weights turns them wide.
  desc.assign(static_cast<std::size_t>(L), challenge_engine_layer_desc{});
  std::vector<std::int32_t> prev_class, cur_class;
  challenge::structure_builder proofs(opt.structure);
  out.compact = opt.compact_terms;
  out.folds.assign(L, 1.0);
  bool uni = false;  // every layer so far on the fast path: the terms are in `uniform`
  std::vector<challenge_engine_prepared> batch;
  for (std::int32_t l = 0; l < L; ++l) {
    std::size_t const at_batch = static_cast<std::size_t>(l % threads);
    if (at_batch == 0) {
      std::int32_t const count = std::min(threads, L - l);
      batch.clear();
      batch.resize(static_cast<std::size_t>(count));
      if (count == 1) {
        batch[0] = prepare_layer(l);
      } else {
        std::vector<std::future<challenge_engine_prepared>> work;
        for (std::int32_t i = 0; i < count; ++i)
          work.push_back(std::async(std::launch::async, [&prepare_layer, i, l] { return prepare_layer(l + i); }));
        for (std::int32_t i = 0; i < count; ++i) batch[static_cast<std::size_t>(i)] = work[static_cast<std::size_t>(i)].get();
      }
    }
    challenge_engine_prepared pl = std::move(batch[at_batch]);
    if (l == 0) {
      out.n = pl.rows;
      SDNN_EXPECTS(out.n > 0, "challenge engine: layer 0 has no neurons");
      cur_class.assign(static_cast<std::size_t>(out.n), 0);
      out.compact = out.compact && out.n <= 65536;
      uni = out.compact && opt.fast_path;
    }
    SDNN_EXPECTS_DIMS(pl.rows == out.n && pl.cols == out.n, "challenge engine: layer ", l, " is ", pl.rows, " x ", pl.cols,
                      ", expected ", out.n, " x ", out.n);
    out.connections += pl.nnz;
    if (out.compact && !pl.compact_ok) {
      // 65535 or more distinct weights in this layer: every layer so far back to wide terms.
      if (uni) {
        compact = compact_of_uniform_terms(uniform, desc, l, uniform.size());
        detail::engine_release_terms(uniform);
        uni = false;
      }
      wide = widen_engine_terms(compact, desc, values, l);
      for (std::int32_t i = 0; i < l; ++i) desc[static_cast<std::size_t>(i)].length = 0;  // no fast path
      detail::engine_release_terms(compact);
      values.clear();
      out.compact = false;
    }
    auto const& wt = pl.wt;
    auto const& fl = pl.proofs.folding;
    bool const fold = opt.structure.folding && fl.distinct > 0 && fl.distinct < out.n;
    std::vector<std::int32_t> reps;
    if (fold) {
      std::vector<std::int32_t> index_of(static_cast<std::size_t>(out.n), -1);
      for (std::int32_t j = 0; j < out.n; ++j)
        if (fl.representative[j] == j) {
          index_of[j] = static_cast<std::int32_t>(reps.size());
          reps.push_back(j);
        }
      for (std::int32_t j = 0; j < out.n; ++j) cur_class[j] = index_of[fl.representative[j]];
      out.folds[l] = static_cast<double>(out.n) / static_cast<double>(reps.size());
    } else {
      reps.resize(static_cast<std::size_t>(out.n));
      for (std::int32_t j = 0; j < out.n; ++j) reps[j] = cur_class[j] = j;
    }
    proofs.add(std::move(pl.proofs), /*keep_representatives=*/false);
    std::int32_t const d = static_cast<std::int32_t>(reps.size());
    out.max_distinct = std::max(out.max_distinct, d);
    auto const terms_of = [&](std::int32_t u) { return wt.row_ptr()[reps[u] + 1] - wt.row_ptr()[reps[u]]; };
    auto& ds = desc[static_cast<std::size_t>(l)];
    SDNN_EXPECTS(slices.size() + static_cast<std::size_t>(d) / 32 + 1 <
                         static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()) &&
                     values.size() < static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()) - 65536,
                 "challenge engine: the layers exceed the int32 layout");
    ds.slice_base = static_cast<std::int32_t>(slices.size());
    ds.value_base = static_cast<std::int32_t>(values.size());
    ds.distinct = d;  // the suffix bit once every layer's proof is in (below)
    // The layer's slices: 32 classes each, padded to its longest class.
    std::int64_t off = 0;
    std::int32_t common_len = -1;  // every class's term count when they are all equal, else -2
    for (std::int32_t s0 = 0; s0 < d; s0 += 32) {
      std::int32_t len = 0;
      for (std::int32_t u = s0; u < std::min(d, s0 + 32); ++u) {
        std::int32_t const c = terms_of(u);
        len = std::max(len, c);
        common_len = common_len == -1 ? c : common_len == c ? c : -2;
      }
      SDNN_EXPECTS(off + std::int64_t{32} * len < std::numeric_limits<std::int32_t>::max(),
                   "challenge engine: layer ", l, " has more terms than the int32 layout holds");
      slices.push_back(challenge_engine_slice{static_cast<std::int32_t>(off), len});
      off += std::int64_t{32} * len;
    }
    std::size_t const layer_terms = static_cast<std::size_t>(off);
    // The fast path needs every layer to have one finite weight (a compact term is then its
    // input index: the weight index is 0) and classes of one length, a multiple of 4.
    bool const even = out.compact && common_len > 0 && common_len % 4 == 0;
    float one = 0.f;  // the layer's weight, when it has one (bits compared: -0 and +0, NaN payloads apart)
    bool single = false;
    if (uni && even) {
      one = wt.values()[wt.row_ptr()[reps[0]]];
      std::uint32_t first;
      std::memcpy(&first, &one, 4);
      single = std::isfinite(one);
      for (std::int32_t u = 0; u < d && single; ++u)
        for (std::int32_t p = wt.row_ptr()[reps[u]]; p < wt.row_ptr()[reps[u] + 1] && single; ++p) {
          std::uint32_t bits;
          std::memcpy(&bits, &wt.values()[p], 4);
          single = bits == first;
        }
    }
    if (uni && !(even && single)) {
      // The first layer off the fast path: the layers so far as compact terms.
      compact = compact_of_uniform_terms(uniform, desc, l,
                                         uniform.size() + layer_terms * static_cast<std::size_t>(L - l));
      detail::engine_release_terms(uniform);
      uni = false;
    }
    ds.term_base = static_cast<std::int64_t>(uni ? uniform.size() : out.compact ? compact.size() : wide.size());
    std::size_t const base = static_cast<std::size_t>(ds.term_base);
    // The compact and wide layouts: term p of class u's row at slice offset + 32 p + u % 32, from
    // the input (layer 0) or the previous layer's class k and the weight, in row order.
    auto place_terms = [&](auto& terms, auto term_of) {
      for (std::int32_t u = 0; u < d; ++u) {
        std::int32_t const j = reps[u];
        std::size_t const at =
            base + static_cast<std::size_t>(slices[static_cast<std::size_t>(ds.slice_base + u / 32)].offset) +
            static_cast<std::size_t>(u % 32);
        for (std::int32_t p = wt.row_ptr()[j]; p < wt.row_ptr()[j + 1]; ++p) {
          std::int32_t const k = l == 0 ? wt.col_idx()[p] : prev_class[wt.col_idx()[p]];
          terms[at + 32 * static_cast<std::size_t>(p - wt.row_ptr()[j])] = term_of(k, wt.values()[p]);
        }
      }
    };
    if (uni) {
      // 16-bit inputs in groups of 4 (challenge_engine_uniform_at); the layer's slices are full
      // (common_len terms of 32 classes, the last slice's missing classes padded with input 0),
      // and every layer starts 8-byte aligned (32 x len, len a multiple of 4).
      detail::engine_append_layer_terms(uniform, layer_terms, l, L, std::uint16_t{0});
      for (std::int32_t u = 0; u < d; ++u) {
        std::int32_t const p0 = wt.row_ptr()[reps[u]];
        for (std::int32_t p = 0; p < common_len; ++p) {
          std::int32_t const k = l == 0 ? wt.col_idx()[p0 + p] : prev_class[wt.col_idx()[p0 + p]];
          uniform[static_cast<std::size_t>(challenge_engine_uniform_at(ds.term_base, common_len, u, p))] =
              static_cast<std::uint16_t>(k);
        }
      }
      values.push_back(one);
      ds.length = common_len;
      ds.weight = one;
    } else if (out.compact) {
      // This layer's distinct weights (by bits: -0 and +0, NaN payloads kept apart).
      std::vector<std::uint32_t> table;
      std::unordered_map<std::uint32_t, std::uint32_t> index_of_bits;
      auto weight_index = [&](float w) -> std::uint32_t {
        std::uint32_t bits;
        std::memcpy(&bits, &w, 4);
        auto it = index_of_bits.find(bits);
        if (it != index_of_bits.end()) return it->second;
        auto const i = static_cast<std::uint32_t>(table.size());
        index_of_bits.emplace(bits, i);
        table.push_back(bits);
        return i;
      };
      detail::engine_append_layer_terms(compact, layer_terms, l, L, challenge_engine_compact_empty << 16);
      place_terms(compact, [&](std::int32_t k, float w) { return static_cast<std::uint32_t>(k) | weight_index(w) << 16; });
      for (std::uint32_t bits : table) {
        float w;
        std::memcpy(&w, &bits, 4);
        values.push_back(w);
      }
      if (table.size() == 1 && std::isfinite(values.back()) && common_len > 0 && common_len % 4 == 0) {
        ds.length = common_len;  // the layer qualifies (the layout is uniform only when every layer does)
        ds.weight = values.back();
      }
    } else {
      detail::engine_append_layer_terms(wide, layer_terms, l, L, challenge_engine_term{-1, 0.f});
      place_terms(wide, [](std::int32_t k, float w) { return challenge_engine_term{k, w}; });
    }
    prev_class = cur_class;
  }
  out.report = proofs.finish();
  for (std::int32_t l = 0; l < L; ++l)
    if (out.report.may_retire_on_entry(l)) desc[static_cast<std::size_t>(l)].distinct |= challenge_engine_suffix_bit;
  out.uniform = uni;
  if (terms_memory != std::pmr::get_default_resource()) {  // pinned: no page-locked room beyond the terms
    if (uni)
      detail::engine_fit_terms(uniform);
    else if (out.compact)
      detail::engine_fit_terms(compact);
    else
      detail::engine_fit_terms(wide);
  }
  out.last_class = std::move(prev_class);
  return out;
}

// Bytes of one term in the layout's encoding, and the terms it holds.
inline std::size_t challenge_engine_term_bytes(challenge_engine_layout const& lay) noexcept {
  return lay.uniform   ? sizeof(std::uint16_t)
         : lay.compact ? sizeof(challenge_engine_compact_term)
                       : sizeof(challenge_engine_term);
}
inline std::int64_t challenge_engine_term_count(challenge_engine_layout const& lay) noexcept {
  return static_cast<std::int64_t>(lay.uniform   ? lay.uniform_terms.size()
                                   : lay.compact ? lay.compact_terms.size()
                                                 : lay.wide.size());
}

// The streamed engine's schedule (weights = host) for `available` device bytes: what the budget
// leaves after the plan's resident part (descriptors, slices, weight tables, team scratch).
//  - Two slots, each at least the largest layer's terms: slot_bytes when given (raised to the
//    largest layer's terms: 1 asks for windows of the fewest layers), else an eighth of
//    `available` (at least the largest layer, at most all the terms), rounded up to 256 bytes:
//    the park, which bounds how many rows a pass carries, gets the larger share.
//  - Windows: consecutive layers, as many as fit one slot (greedy, in the engine's order).
//  - The park: the rest holds park_rows rows between windows (per row, two buffers of
//    max_distinct floats of state and of a 4-byte id: a pass reads one and appends to the
//    other); park_rows when given.
// Throws sdnn::error naming the numbers when `available` cannot hold two slots of the largest
// layer and one parked row, or the park asked for.
inline challenge_engine_stream_schedule schedule_engine_stream(std::vector<challenge_engine_layer_desc> const& desc,
                                                               std::int64_t total_terms, std::size_t term_bytes,
                                                               std::int32_t max_distinct, std::uint64_t available,
                                                               std::uint64_t slot_bytes = 0, std::int64_t park_rows = 0) {
  SDNN_EXPECTS(!desc.empty(), "challenge engine: streaming needs at least one layer");
  SDNN_EXPECTS(park_rows >= 0, "challenge engine: stream_park_rows must be >= 0, got ", park_rows);
  std::int32_t const L = static_cast<std::int32_t>(desc.size());
  auto begin_of = [&](std::int32_t l) { return l < L ? desc[static_cast<std::size_t>(l)].term_base : total_terms; };
  std::uint64_t largest = 0, total = static_cast<std::uint64_t>(total_terms) * term_bytes;
  for (std::int32_t l = 0; l < L; ++l) {
    SDNN_EXPECTS(begin_of(l + 1) >= begin_of(l), "challenge engine: layer terms out of order at layer ", l);
    largest = std::max<std::uint64_t>(largest, static_cast<std::uint64_t>(begin_of(l + 1) - begin_of(l)) * term_bytes);
  }
  auto const round256 = [](std::uint64_t b) { return (b + 255) / 256 * 256; };
  challenge_engine_stream_schedule sc;
  sc.park_bytes_per_row = 2 * (4 * static_cast<std::uint64_t>(std::max(max_distinct, 1)) + 4);
  std::uint64_t const need = 2 * round256(std::max<std::uint64_t>(largest, 1)) + sc.park_bytes_per_row;
  if (available < need)
    SDNN_FAIL("challenge engine: streaming the layers needs at least ", format_bytes(need),
              " of device memory beside the plan's resident part (two slots of the largest layer's terms, ",
              format_bytes(largest), ", and one parked row, ", sc.park_bytes_per_row, " bytes); the budget leaves ",
              format_bytes(available));
  if (slot_bytes > 0) {
    sc.slot_bytes = round256(std::max(slot_bytes, largest));  // below the largest layer: one layer per window
  } else {
    sc.slot_bytes = round256(std::max<std::uint64_t>(largest, std::min<std::uint64_t>(available / 8 / 256 * 256, total)));
  }
  SDNN_EXPECTS(2 * sc.slot_bytes + sc.park_bytes_per_row <= available, "challenge engine: two slots of ",
               format_bytes(sc.slot_bytes), " and one parked row exceed the ", format_bytes(available),
               " the budget leaves for streaming");
  std::uint64_t const park_fit = (available - 2 * sc.slot_bytes) / sc.park_bytes_per_row;
  if (park_rows > 0) {
    SDNN_EXPECTS(static_cast<std::uint64_t>(park_rows) <= park_fit, "challenge engine: stream_park_rows ",
                 park_rows, " needs ", format_bytes(sc.park_bytes_per_row * static_cast<std::uint64_t>(park_rows)),
                 " of park; the budget leaves room for ", park_fit, " rows");
    sc.park_rows = park_rows;
  } else {
    sc.park_rows = static_cast<std::int64_t>(std::min<std::uint64_t>(park_fit, std::numeric_limits<std::int32_t>::max()));
  }
  for (std::int32_t l = 0; l < L;) {
    challenge_engine_window w;
    w.first = l;
    w.term_begin = begin_of(l);
    while (l < L && static_cast<std::uint64_t>(begin_of(l + 1) - w.term_begin) * term_bytes <= sc.slot_bytes) ++l;
    w.end = l;
    w.term_end = begin_of(l);
    sc.windows.push_back(w);
  }
  return sc;
}

}  // namespace sdnn::ops
