// sdnn/core/weight_placement.hpp - where a network's weights live during a run, and the byte
// sizes of device-memory budgets: the one vocabulary of every plan that may stream its weights
// from host memory (e.g. the layer-wise pipeline's weight store, pipeline/weight_store.hpp).
#pragma once

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <string>

namespace sdnn {

// Where a network's weights live during run(): device (resident), host (streamed), or
// automatic (host when the resident weights exceed the budget).
enum class weight_placement { device, host, automatic };

inline char const* to_string(weight_placement p) noexcept {
  return p == weight_placement::device ? "device" : p == weight_placement::host ? "host" : "auto";
}

// "device", "host" or "auto"; false on anything else.
inline bool parse_weight_placement(std::string const& s, weight_placement& out) noexcept {
  if (s == "device") out = weight_placement::device;
  else if (s == "host") out = weight_placement::host;
  else if (s == "auto") out = weight_placement::automatic;
  else return false;
  return true;
}

// A byte size: plain bytes ("1048576") or a number with a unit: B, KiB, MiB, GiB, TiB (powers of
// 1024), KB, MB, GB, TB (powers of 1000), also K, M, G, T (= KiB ...); case-insensitive, no
// space needed ("4GiB", "512 MiB", "1.5GiB"). The result must be a positive integral number of
// bytes below 2^63. False on anything else (empty, negative, "4 GiBs", "0x10", "nan", 0).
inline bool parse_byte_size(std::string const& s, std::uint64_t& out) noexcept {
  std::size_t i = 0;
  std::size_t const e = s.size();
  double whole = 0, frac = 0, scale = 1;
  bool digits = false, dot = false;
  for (; i < e; ++i) {
    char const c = s[i];
    if (c >= '0' && c <= '9') {
      digits = true;
      if (dot) {
        scale /= 10;
        frac += (c - '0') * scale;
      } else {
        whole = whole * 10 + (c - '0');
        if (whole > 1e19) return false;
      }
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (!digits) return false;
  while (i < e && s[i] == ' ') ++i;
  std::string unit;
  for (; i < e; ++i) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(s[i])));
  double mult = 0;
  struct u {
    char const* name;
    double mult;
  };
  static constexpr u units[] = {{"", 1},
                                {"b", 1},
                                {"k", 1024.0},
                                {"kib", 1024.0},
                                {"kb", 1e3},
                                {"m", 1048576.0},
                                {"mib", 1048576.0},
                                {"mb", 1e6},
                                {"g", 1073741824.0},
                                {"gib", 1073741824.0},
                                {"gb", 1e9},
                                {"t", 1099511627776.0},
                                {"tib", 1099511627776.0},
                                {"tb", 1e12}};
  for (auto const& x : units)
    if (unit == x.name) mult = x.mult;
  if (mult == 0) return false;
  double const v = (whole + frac) * mult;
  if (!(v >= 1) || v >= 9.2e18) return false;
  auto const b = static_cast<std::uint64_t>(v);
  if (static_cast<double>(b) != v) return false;  // "1.3B": not a whole number of bytes
  out = b;
  return true;
}

// "4.00 GiB (4294967296 bytes)" style text for messages.
inline std::string format_bytes(std::uint64_t b) {
  char buf[96];
  double const v = static_cast<double>(b);
  if (v >= 1073741824.0)
    std::snprintf(buf, sizeof buf, "%.2f GiB (%llu bytes)", v / 1073741824.0, static_cast<unsigned long long>(b));
  else if (v >= 1048576.0)
    std::snprintf(buf, sizeof buf, "%.2f MiB (%llu bytes)", v / 1048576.0, static_cast<unsigned long long>(b));
  else
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(b));
  return buf;
}

}  // namespace sdnn
