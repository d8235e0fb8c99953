// sdnn/dist/signature.hpp - what every rank must agree on before a distributed run (host only;
// no MPI). A signature is an ordered list of named 64-bit fields: counts, float parameters (their
// bit patterns) and hashes of whole arrays; dist::mpi::check_agreement compares it across ranks.
// network_signature describes a sparse network run; any other program builds its own with
// add(...). The hash detects accidental disagreement (a different file, layer count, seed or
// edit); it is not cryptographic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sdnn/core/error.hpp"
#include "sdnn/formats/csr.hpp"

namespace sdnn::dist {

// 64-bit, xxHash-style rounds over 8-byte words and a final avalanche. It reads every byte once:
// about 1 GB/s or more per core, so a 32 GB network costs seconds; a program may hash fewer
// fields for such sizes.
class hasher {
 public:
  void bytes(void const* data, std::size_t n) {
    auto const* p = static_cast<unsigned char const*>(data);
    length_ += n;
    // Complete a partial word from an earlier call first.
    while (n > 0 && fill_ != 0 && fill_ < 8) {  // fill_ < 8 always; said for GCC's -Wstringop-overflow
      pending_[fill_++] = *p++;
      --n;
      if (fill_ == 8) flush_pending();
    }
    for (; n >= 8; n -= 8, p += 8) {
      std::uint64_t w;
      std::memcpy(&w, p, 8);
      round(w);
    }
    for (; n > 0 && fill_ < 8; --n) pending_[fill_++] = *p++;  // n < 8 here
  }
  template <class T>
  void value(T const& v) {
    static_assert(std::is_trivially_copyable_v<T>, "dist::hasher::value: T must be trivially copyable");
    bytes(&v, sizeof(T));
  }
  template <class T>
  void values(T const* p, std::size_t n) {
    static_assert(std::is_trivially_copyable_v<T>, "dist::hasher::values: T must be trivially copyable");
    if (n != 0) bytes(p, n * sizeof(T));
  }
  // The hash of everything fed so far (the hasher can keep going afterwards).
  std::uint64_t digest() const {
    std::uint64_t h = state_;
    if (fill_ != 0) {
      std::uint64_t w = 0;
      std::memcpy(&w, pending_, fill_);
      h = mix(h, w ^ (std::uint64_t(fill_) << 56));
    }
    h ^= length_ * k5;
    h ^= h >> 33;
    h *= k2;
    h ^= h >> 29;
    h *= k3;
    h ^= h >> 32;
    return h;
  }

 private:
  static constexpr std::uint64_t k1 = 0x9E3779B185EBCA87ull, k2 = 0xC2B2AE3D27D4EB4Full,
                                 k3 = 0x165667B19E3779F9ull, k5 = 0x27D4EB2F165667C5ull;
  static std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  static std::uint64_t mix(std::uint64_t h, std::uint64_t w) { return rotl(h ^ (w * k2), 31) * k1 + k3; }
  void round(std::uint64_t w) { state_ = mix(state_, w); }
  void flush_pending() {
    std::uint64_t w;
    std::memcpy(&w, pending_, 8);
    round(w);
    fill_ = 0;
  }
  std::uint64_t state_ = 0x5DDA7A5EEDull;  // any fixed seed
  std::uint64_t length_ = 0;
  unsigned char pending_[8] = {};
  std::size_t fill_ = 0;
};

// Hashes the sizes (as int64) and the bytes of row_ptr, col_idx and values: equal matrices of
// the same types hash equal on ranks of the same byte order; values are compared bit for bit
// (0.0 and -0.0 differ).
template <class T, class Index>
void hash_csr(hasher& h, csr_view<T, Index> m) {
  h.value(static_cast<std::int64_t>(m.rows));
  h.value(static_cast<std::int64_t>(m.cols));
  h.value(static_cast<std::int64_t>(m.nnz));
  h.values(m.row_ptr, static_cast<std::size_t>(m.rows) + 1);
  h.values(m.col_idx, static_cast<std::size_t>(m.nnz));
  h.values(m.values, static_cast<std::size_t>(m.nnz));
}

template <class T, class Index>
std::uint64_t hash_csr(csr_view<T, Index> m) {
  hasher h;
  hash_csr(h, m);
  return h.digest();
}

// How a field's value is shown in a disagreement message.
enum class field_kind { count, hash, float_bits };

struct signature_field {
  std::string name;
  std::uint64_t value = 0;
  field_kind kind = field_kind::count;
};

class signature {
 public:
  signature& add(std::string name, std::uint64_t value, field_kind kind = field_kind::count) {
    fields_.push_back({std::move(name), value, kind});
    return *this;
  }
  signature& add_count(std::string name, std::int64_t n) {
    return add(std::move(name), static_cast<std::uint64_t>(n), field_kind::count);
  }
  signature& add_hash(std::string name, std::uint64_t h) { return add(std::move(name), h, field_kind::hash); }
  signature& add_float(std::string name, float v) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return add(std::move(name), bits, field_kind::float_bits);
  }
  std::vector<signature_field> const& fields() const noexcept { return fields_; }
  // A hash of the field names and kinds in order: ranks that built different signatures
  // (not just different values) are told so.
  std::uint64_t layout_hash() const {
    hasher h;
    for (auto const& f : fields_) {
      h.bytes(f.name.data(), f.name.size());
      h.value(static_cast<std::uint8_t>(0));
      h.value(static_cast<std::uint8_t>(f.kind));
    }
    return h.digest();
  }

 private:
  std::vector<signature_field> fields_;
};

// A field's value as text: counts in decimal (as int64), hashes in hex, floats as the float.
inline std::string format_field(field_kind kind, std::uint64_t v) {
  char buf[48];
  switch (kind) {
    case field_kind::hash: std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v)); break;
    case field_kind::float_bits: {
      std::uint32_t const bits = static_cast<std::uint32_t>(v);
      float f;
      std::memcpy(&f, &bits, sizeof f);
      std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(f));
      break;
    }
    default: std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v)); break;
  }
  return buf;
}

// A sparse network run: the number of layers, the neurons (rows of layer 0), the total weight
// nonzeros, one hash over every layer's sizes, row_ptr, col_idx and values, bias and cap, and the
// number of inputs. Add "inputs hash" (hash_csr of Y) when every rank holds all the inputs.
template <class T, class Index>
signature network_signature(std::vector<csr_matrix<T, Index>> const& layers, float bias, float cap,
                              std::int64_t inputs) {
  hasher h;
  std::int64_t nnz = 0;
  for (auto const& w : layers) {
    hash_csr(h, w.view());
    nnz += static_cast<std::int64_t>(w.nnz());
  }
  signature s;
  s.add_count("layers", static_cast<std::int64_t>(layers.size()))
      .add_count("neurons", layers.empty() ? 0 : static_cast<std::int64_t>(layers.front().rows()))
      .add_count("weight nonzeros", nnz)
      .add_hash("weights hash", h.digest())
      .add_float("bias", bias)
      .add_float("cap", cap)
      .add_count("inputs", inputs);
  return s;
}

}  // namespace sdnn::dist
