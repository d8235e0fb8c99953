// sdnn/linear/op/tc_stream_schedule.hpp - the work split of the small-batch streaming kernel
// (linear/kernel/tc_stream.cuh), built once per plan on the host. The stored units of W (64 x 64
// tile_offsets records or BSR blocks, in storage order: panel by panel, k ascending) are cut into
// ctas x warps contiguous runs of equal cost (the unit's bytes plus a fixed per-unit cost), so
// every warp of one wave streams about the same number of bytes. A panel (BR rows of W) may span
// several warps and blocks: its partial sums are added in warp order inside a block and in block
// order across blocks (deterministic for a given plan).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sdnn/core/error.hpp"

namespace sdnn::ops::detail {

// int32 arrays in one buffer; the fields are their offsets (the kernel's tc_stream_params repeat them).
struct tc_stream_schedule {
  std::int32_t ctas = 0, warps = 0, panels = 0;
  std::int32_t warp_begin = 0;  // [ctas * warps + 1] first unit of each warp's run
  std::int32_t warp_panel = 0;  // [ctas * warps] panel of the run's first unit (-1: empty run)
  std::int32_t warp_off = 0;    // [ctas * warps + 1] byte offset / 16 of warp_begin's unit (uint32 bits)
  std::int32_t cta_panel = 0;   // [ctas] panel of the block's first unit (-1: no units)
  std::int32_t panel_cta = 0;   // [2 * panels] first block holding units of the panel, blocks holding some
  std::int32_t empty = 0;       // [n_empty] panels without units (their rows get epi(0))
  std::int32_t n_empty = 0;
  std::vector<std::int32_t> data;

  std::int32_t at(std::int32_t base, std::int64_t i) const { return data[std::size_t(base + i)]; }
};

// ptr[0 .. panels]: units per panel (tile_ptr / row_ptr); unit_bytes(u) and off16(u) (u in [0, units],
// the latter also at u = units) as stored. max_ctas: resident blocks of one wave.
template <class Bytes, class Off16>
tc_stream_schedule build_tc_stream_schedule(std::int32_t panels, std::int32_t const* ptr, Bytes&& unit_bytes,
                                            Off16&& off16, int max_ctas, int warps, std::int64_t unit_cost) {
  SDNN_EXPECTS(panels >= 0 && warps >= 1 && max_ctas >= 1, "tc_stream schedule: ", panels, " panels, ", warps,
               " warps, ", max_ctas, " blocks");
  std::int64_t const units = ptr[panels];
  tc_stream_schedule s;
  s.warps = warps;
  s.panels = panels;
  s.ctas = int(std::max<std::int64_t>(1, std::min<std::int64_t>(max_ctas, (units + warps - 1) / warps)));
  std::int64_t const gw = std::int64_t(s.ctas) * warps;

  std::vector<std::int64_t> cost(static_cast<std::size_t>(units) + 1, 0);
  for (std::int64_t u = 0; u < units; ++u) cost[std::size_t(u + 1)] = cost[std::size_t(u)] + unit_bytes(u) + unit_cost;
  std::vector<std::int32_t> wb(static_cast<std::size_t>(gw) + 1);
  for (std::int64_t k = 0; k <= gw; ++k) {
    std::int64_t const target = cost[std::size_t(units)] / gw * k + cost[std::size_t(units)] % gw * k / gw;
    wb[std::size_t(k)] = std::int32_t(std::lower_bound(cost.begin(), cost.end(), target) - cost.begin());
  }
  wb[0] = 0;
  wb[std::size_t(gw)] = std::int32_t(units);
  for (std::int64_t k = 1; k <= gw; ++k) wb[std::size_t(k)] = std::max(wb[std::size_t(k)], wb[std::size_t(k - 1)]);

  std::vector<std::int32_t> panel_of(static_cast<std::size_t>(units));
  for (std::int32_t p = 0; p < panels; ++p)
    for (std::int32_t u = ptr[p]; u < ptr[p + 1]; ++u) panel_of[std::size_t(u)] = p;
  std::vector<std::int32_t> cta_of(static_cast<std::size_t>(units));
  auto cta_begin = [&](std::int64_t c) { return wb[std::size_t(c * warps)]; };
  for (std::int64_t c = 0; c < s.ctas; ++c)
    for (std::int32_t u = cta_begin(c); u < cta_begin(c + 1); ++u) cta_of[std::size_t(u)] = std::int32_t(c);

  auto& d = s.data;
  s.warp_begin = std::int32_t(d.size());
  d.insert(d.end(), wb.begin(), wb.end());
  s.warp_panel = std::int32_t(d.size());
  for (std::int64_t k = 0; k < gw; ++k)
    d.push_back(wb[std::size_t(k)] < wb[std::size_t(k + 1)] ? panel_of[std::size_t(wb[std::size_t(k)])] : -1);
  s.warp_off = std::int32_t(d.size());
  for (std::int64_t k = 0; k <= gw; ++k) d.push_back(std::int32_t(std::uint32_t(off16(wb[std::size_t(k)]))));
  s.cta_panel = std::int32_t(d.size());
  for (std::int64_t c = 0; c < s.ctas; ++c)
    d.push_back(cta_begin(c) < cta_begin(c + 1) ? panel_of[std::size_t(cta_begin(c))] : -1);
  s.panel_cta = std::int32_t(d.size());
  for (std::int32_t p = 0; p < panels; ++p) {
    if (ptr[p] == ptr[p + 1]) {
      d.push_back(-1);
      d.push_back(0);
      continue;
    }
    std::int32_t const first = cta_of[std::size_t(ptr[p])], last = cta_of[std::size_t(ptr[p + 1] - 1)];
    std::int32_t n = 0;
    for (std::int32_t c = first; c <= last; ++c) n += cta_begin(c) < cta_begin(c + 1);
    d.push_back(first);
    d.push_back(n);
  }
  s.empty = std::int32_t(d.size());
  for (std::int32_t p = 0; p < panels; ++p)
    if (ptr[p] == ptr[p + 1]) d.push_back(p);
  s.n_empty = std::int32_t(d.size()) - s.empty;
  if (d.empty()) d.push_back(0);
  SDNN_EXPECTS(d.size() < std::size_t(1) << 31, "tc_stream schedule: ", d.size(), " entries exceed int32 offsets");
  return s;
}

}  // namespace sdnn::ops::detail
