// The machine description (GPU, clocks, CUDA version, date) and the JSON-lines output every sdnn
// benchmark writes, the Google Benchmark programs (through bench_util.cuh) and the plain ones alike.
// Needs the CUDA runtime, not Google Benchmark.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>

#include <sdnn/core/cuda.cuh>

namespace sdnn_bench {

struct machine_info {
  std::string gpu, cuda_runtime, cuda_driver, date;
  int sm_count = 0, sm_clock_mhz = 0, mem_clock_mhz = 0;
};

inline machine_info const& machine() {
  static machine_info m = [] {
    machine_info r;
    cudaDeviceProp p{};
    int dev = 0;
    SDNN_CUDA_CHECK(cudaGetDevice(&dev));
    SDNN_CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
    r.gpu = p.name;
    r.sm_count = p.multiProcessorCount;
    int clk = 0, mclk = 0;
    cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, dev);
    cudaDeviceGetAttribute(&mclk, cudaDevAttrMemoryClockRate, dev);
    r.sm_clock_mhz = clk / 1000;
    r.mem_clock_mhz = mclk / 1000;
    int rv = 0, dv = 0;
    cudaRuntimeGetVersion(&rv);
    cudaDriverGetVersion(&dv);
    r.cuda_runtime = std::to_string(rv / 1000) + "." + std::to_string((rv % 1000) / 10);
    r.cuda_driver = std::to_string(dv / 1000) + "." + std::to_string((dv % 1000) / 10);
    char buf[32];
    std::time_t t = std::time(nullptr);
    std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
    r.date = buf;
    return r;
  }();
  return m;
}

// Wall-clock time of day (UTC, HH:MM:SS) for the JSON lines.
inline std::string utc_time() {
  char buf[16];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%H:%M:%S", std::gmtime(&t));
  return buf;
}

// s as the inside of a JSON string.
inline std::string json_escape(std::string const& s) {
  std::string o;
  o.reserve(s.size() + 8);
  for (unsigned char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      case '\r': o += "\\r"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += char(c);
        }
    }
  }
  return o;
}

// One JSON object per line, appended to $SDNN_BENCH_JSON (default: stdout). Every line carries
// the machine description so results files are self-describing. Strings are escaped; a
// non-finite number is written as null.
class json_line {
 public:
  explicit json_line(std::string const& family) {
    auto const& m = machine();
    str("family", family);
    str("gpu", m.gpu);
    str("cuda_runtime", m.cuda_runtime);
    str("cuda_driver", m.cuda_driver);
    str("date", m.date);
    num("sm_clock_mhz", m.sm_clock_mhz);
  }
  json_line& str(std::string const& k, std::string const& v) {
    sep();
    os_ << '"' << json_escape(k) << "\":\"" << json_escape(v) << '"';
    return *this;
  }
  json_line& num(std::string const& k, double v) {
    sep();
    os_ << '"' << json_escape(k) << "\":";
    if (std::isfinite(v)) os_ << v;
    else os_ << "null";
    return *this;
  }
  void emit() {
    static std::mutex mu;
    std::lock_guard<std::mutex> g(mu);
    std::string const line = os_.str() + "}";
    if (char const* path = std::getenv("SDNN_BENCH_JSON"); path && *path) {
      std::ofstream f(path, std::ios::app);
      if (f) {
        f << line << '\n';
        return;
      }
      std::fprintf(stderr, "sdnn bench: cannot open %s; writing to stdout\n", path);
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }

 private:
  void sep() {
    os_ << (first_ ? "{" : ",");
    first_ = false;
  }
  std::ostringstream os_;
  bool first_ = true;
};

}  // namespace sdnn_bench
