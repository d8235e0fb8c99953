// sdnn/dist/timing.hpp - per-rank times and the load imbalance (host only; no MPI).
//
// Each rank times its own work (stopwatch: wall-clock seconds, std::chrono::steady_clock);
// dist::mpi::gather_times collects one number per rank on the root; summarize_times and
// timing_report describe them:
//   imbalance = max / mean of the per-rank seconds (1 = perfectly balanced). A distributed
//   run takes as long as its slowest rank, so 1 - mean / max is the fraction of the ranks'
//   time spent waiting for it, and mean / max is the efficiency against a perfect balance.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "sdnn/core/error.hpp"

namespace sdnn::dist {

class stopwatch {
 public:
  stopwatch() : start_(std::chrono::steady_clock::now()) {}
  void restart() { start_ = std::chrono::steady_clock::now(); }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

struct timing_summary {
  int ranks = 0;
  double min = 0, max = 0, mean = 0;
  int fastest = -1, slowest = -1;  // lowest rank on a tie
  // max / mean; 1 when every rank took the same time (or all took 0).
  double imbalance() const { return mean > 0 ? max / mean : 1.0; }
  // 1 - mean / max: the fraction of the ranks' time spent waiting for the slowest.
  double idle_fraction() const { return max > 0 ? 1.0 - mean / max : 0.0; }
};

inline timing_summary summarize_times(std::vector<double> const& seconds) {
  SDNN_EXPECTS(!seconds.empty(), "dist::summarize_times: no times given");
  timing_summary s;
  s.ranks = static_cast<int>(seconds.size());
  s.min = s.max = seconds[0];
  s.fastest = s.slowest = 0;
  double sum = 0;
  for (std::size_t r = 0; r < seconds.size(); ++r) {
    double const t = seconds[r];
    SDNN_EXPECTS(t >= 0, "dist::summarize_times: rank ", r, " reports a negative or NaN time ", t);
    sum += t;
    if (t < s.min) s.min = t, s.fastest = static_cast<int>(r);
    if (t > s.max) s.max = t, s.slowest = static_cast<int>(r);
  }
  s.mean = sum / static_cast<double>(seconds.size());
  return s;
}

// One line per rank ("rank 2: 301 inputs, 0.412 s (1.07 x mean)"; the inputs column only when
// inputs has one count per rank), then the summary line.
inline std::string timing_report(std::vector<double> const& seconds, std::vector<std::int64_t> const& inputs = {}) {
  timing_summary const s = summarize_times(seconds);
  SDNN_EXPECTS(inputs.empty() || inputs.size() == seconds.size(), "dist::timing_report: ", inputs.size(),
               " input counts for ", seconds.size(), " ranks");
  std::string out;
  char buf[160];
  for (std::size_t r = 0; r < seconds.size(); ++r) {
    double const rel = s.mean > 0 ? seconds[r] / s.mean : 1.0;
    if (inputs.empty())
      std::snprintf(buf, sizeof buf, "rank %zu: %.6f s (%.2f x mean)\n", r, seconds[r], rel);
    else
      std::snprintf(buf, sizeof buf, "rank %zu: %lld inputs, %.6f s (%.2f x mean)\n", r,
                    static_cast<long long>(inputs[r]), seconds[r], rel);
    out += buf;
  }
  std::snprintf(buf, sizeof buf,
                "%d ranks: max %.6f s (rank %d), mean %.6f s, min %.6f s (rank %d); imbalance max/mean %.3f, "
                "%.1f %% of rank time idle\n",
                s.ranks, s.max, s.slowest, s.mean, s.min, s.fastest, s.imbalance(), 100.0 * s.idle_fraction());
  out += buf;
  return out;
}

}  // namespace sdnn::dist
