// sdnn/challenge/structure.hpp - plan-time structure proofs for the depth-first Graph Challenge
// engine, computed exactly on the ACTUAL weights (plain host C++17): retirement of rows that
// reach the all-cap vector (prove_saturation), folding of identical output neurons
// (find_duplicate_columns), and a first layer summed in any order (check_binary_inputs +
// prove_sparse_first_layer). Each is separately switchable (structure_options); a failed proof
// names the layer and column in its plan_status and only means the engine must not use that
// shortcut there. A proof never claims more than its arithmetic establishes; the arguments in
// full: docs/challenge.md#structure-proofs.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "sdnn/core/epilogue.hpp"
#include "sdnn/core/error.hpp"
#include "sdnn/core/plan.hpp"
#include "sdnn/formats/csr.hpp"

// Namespace sdnn::challenge: these proofs are about the challenge computation (its layout and its
// epilogue), not about a general SpMM. Conventions (those of challenge/reference.hpp): a layer is
// a host CSR W (float, int32), row = input neuron k, column = output neuron j; one layer maps a
// row y to Z_j = sum_k y_k W(k, j) (float, k ascending, one rounding per product and per add,
// accumulator starting at +0), y'_j = epi(Z_j), epi = epilogue_capped_relu(bias, cap).
namespace sdnn::challenge {

using layer_matrix = csr_matrix<float, std::int32_t>;

// Which proofs a plan attempts (each one is a separately switchable policy).
struct structure_options {
  bool retirement = true;          // prove_saturation: retire rows that reach the all-cap vector
  bool folding = true;             // find_duplicate_columns: compute identical neurons once
  bool sparse_first_layer = true;  // prove_sparse_first_layer: layer 1 from the input CSR, any order
};

namespace detail {

inline std::string float_text(float v) {
  std::ostringstream s;
  s << std::setprecision(9) << v;
  return s.str();
}

inline std::uint32_t float_bits(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

inline std::uint64_t mix64(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  return h;
}

// The columns of a CSR as lists, entries in ascending input k (the reference's order).
struct csc_lists {
  std::vector<std::int64_t> start;  // [cols + 1]
  std::vector<std::int32_t> row;    // [nnz]
  std::vector<float> value;         // [nnz]
};

inline csc_lists to_columns(layer_matrix const& w) {
  auto const v = w.view();
  csc_lists c;
  c.start.assign(static_cast<std::size_t>(v.cols) + 1, 0);
  for (std::int32_t a = 0; a < v.nnz; ++a) ++c.start[static_cast<std::size_t>(v.col_idx[a]) + 1];
  for (std::int32_t j = 0; j < v.cols; ++j) c.start[j + 1] += c.start[j];
  c.row.resize(static_cast<std::size_t>(v.nnz));
  c.value.resize(static_cast<std::size_t>(v.nnz));
  std::vector<std::int64_t> at(c.start.begin(), c.start.end() - 1);
  for (std::int32_t k = 0; k < v.rows; ++k)
    for (std::int32_t a = v.row_ptr[k]; a < v.row_ptr[k + 1]; ++a) {
      auto const p = static_cast<std::size_t>(at[static_cast<std::size_t>(v.col_idx[a])]++);
      c.row[p] = k;
      c.value[p] = v.values[a];
    }
  return c;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// 1. Saturation fixed point and retirement. Layer l "maps all-cap to all-cap" when, for the input
// row (cap, ..., cap), epi(Z_j) == cap for every column j, Z_j recomputed exactly as the
// reference computes it (ascending k), once with the product rounded and then added and once as
// fma(cap, w, Z), the one contraction a compiler may apply; the column holds only when both give
// the cap. A column with no entries or a non-finite weight fails; a non-finite or non-positive
// cap, or a non-finite bias, fails every layer. A row exactly all-cap on entry to layer l with
// suffix_fixed[l] stays all-cap through the last layer (induction), so it may retire as a category.

struct layer_saturation {
  bool fixed = false;                   // the layer maps the all-cap vector to itself
  std::int32_t failing_columns = 0;     // columns whose output is not exactly the cap
  std::int32_t first_failing_column = -1;
  std::string why;                      // empty when fixed; else names the layer and a column
};

struct saturation_proof {
  std::vector<layer_saturation> layers;    // [L]
  std::vector<std::uint8_t> layer_fixed;   // [L]: layers[l].fixed
  std::vector<std::uint8_t> suffix_fixed;  // [L + 1]: layers l..L-1 all fixed; suffix_fixed[L] = 1
  plan_status status;                      // ok when every layer is fixed; else why names the last
                                           // layer that is not (the suffix proof holds after it)

  // The smallest l with suffix_fixed[l]: rows all-cap on entry to a layer >= this retire.
  // L when no non-empty suffix is proven; -1 when the proof was not run (suffix_fixed empty).
  std::int32_t retire_from() const {
    if (suffix_fixed.empty()) return -1;
    std::int32_t l = static_cast<std::int32_t>(suffix_fixed.size()) - 1;
    while (l > 0 && suffix_fixed[static_cast<std::size_t>(l) - 1]) --l;
    return l;
  }
};

// Does W map the all-cap row to the all-cap row under epilogue_capped_relu(bias, cap)?
// `layer` only names the layer in why().
inline layer_saturation prove_layer_saturation(layer_matrix const& w, float bias, float cap = 32.f,
                                               std::int32_t layer = 0) {
  validate(w);
  layer_saturation r;
  std::string const name = sdnn::detail::concat("layer ", layer, " (0-based)");
  if (!(std::isfinite(cap) && cap > 0.f) || !std::isfinite(bias)) {
    r.failing_columns = w.cols();
    r.first_failing_column = w.cols() > 0 ? 0 : -1;
    r.why = sdnn::detail::concat(name, ": the saturation proof needs a finite cap > 0 and a finite bias, got cap ",
                           detail::float_text(cap), ", bias ", detail::float_text(bias));
    return r;
  }
  auto const ep = epilogue_capped_relu<float>(bias, cap);
  auto const c = detail::to_columns(w);
  for (std::int32_t j = 0; j < w.cols(); ++j) {
    std::string fail;
    auto const b = c.start[static_cast<std::size_t>(j)], e = c.start[static_cast<std::size_t>(j) + 1];
    if (b == e) {
      fail = "has no nonzeros (Z = 0 -> output 0)";
    } else {
      float z_sep = 0.f, z_fma = 0.f;  // the reference's accumulator starts at +0
      for (auto a = b; a < e && fail.empty(); ++a) {
        float const wv = c.value[static_cast<std::size_t>(a)];
        if (!std::isfinite(wv)) {
          fail = sdnn::detail::concat("has the non-finite weight ", detail::float_text(wv), " at input ",
                                c.row[static_cast<std::size_t>(a)]);
          break;
        }
        float const p = static_cast<float>(static_cast<double>(cap) * static_cast<double>(wv));
        z_sep = static_cast<float>(static_cast<double>(z_sep) + static_cast<double>(p));
        z_fma = std::fma(cap, wv, z_fma);
      }
      if (fail.empty()) {
        float const o_sep = ep(z_sep, j), o_fma = ep(z_fma, j);
        if (!(o_sep == cap && o_fma == cap))
          fail = sdnn::detail::concat("sums its ", e - b, " terms cap x w (ascending input) to Z = ",
                                detail::float_text(z_sep), " (with FMA: ", detail::float_text(z_fma),
                                "); the epilogue gives ", detail::float_text(o_sep), " (", detail::float_text(o_fma),
                                "), not the cap ", detail::float_text(cap));
      }
    }
    if (!fail.empty()) {
      if (r.failing_columns++ == 0) {
        r.first_failing_column = j;
        r.why = sdnn::detail::concat(name, " does not map the all-cap vector to itself: column ", j, " ", fail);
      }
    }
  }
  r.fixed = r.failing_columns == 0;
  if (!r.fixed) r.why += sdnn::detail::concat(" (", r.failing_columns, " of ", w.cols(), " columns fail)");
  return r;
}

// Every layer of the network, and the suffix array that the retirement rule uses.
// suffix_fixed and status from layer_fixed (every layer proven, in order).
inline void finish_saturation(saturation_proof& p) {
  auto const n = static_cast<std::int32_t>(p.layers.size());
  p.suffix_fixed.assign(p.layers.size() + 1, 0);
  p.suffix_fixed[p.layers.size()] = 1;
  std::int32_t last_failing = -1;
  for (std::int32_t l = n - 1; l >= 0; --l) {
    p.suffix_fixed[l] = p.layer_fixed[l] && p.suffix_fixed[l + 1];
    if (!p.layer_fixed[l] && last_failing < 0) last_failing = l;
  }
  p.status = {};
  if (last_failing >= 0) {
    std::int32_t failing = 0;
    for (auto f : p.layer_fixed) failing += f ? 0 : 1;
    p.status = plan_status::failure(sdnn::detail::concat(
        "retirement: ", failing, " of ", n, " layers do not map the all-cap vector to itself, so rows retire only on "
        "entry to layer ", last_failing + 1, " or later; the last such layer: ", p.layers[last_failing].why));
  }
}

inline saturation_proof prove_saturation(std::vector<layer_matrix> const& layers, float bias, float cap = 32.f) {
  auto const n = static_cast<std::int32_t>(layers.size());
  for (std::int32_t l = 1; l < n; ++l)
    SDNN_EXPECTS(layers[l].rows() == layers[l - 1].cols(), "prove_saturation: layer ", l, " has ", layers[l].rows(),
                 " rows but layer ", l - 1, " has ", layers[l - 1].cols(), " columns");
  saturation_proof p;
  p.layers.reserve(layers.size());
  p.layer_fixed.assign(layers.size(), 0);
  for (std::int32_t l = 0; l < n; ++l) {
    p.layers.push_back(prove_layer_saturation(layers[l], bias, cap, l));
    p.layer_fixed[l] = p.layers.back().fixed ? 1 : 0;
  }
  finish_saturation(p);
  return p;
}

// ---------------------------------------------------------------------------------------------
// 2. Duplicate neurons (folding). Columns j, j' fold when their weight columns are identical as
// lists of (input k, value) with values compared BITWISE (explicit zeros included) and their bias
// is identical: Z_j and Z_j' are then the same float operations on the same operands, so the
// representative (the smallest column of the class) computed in the reference order can be
// broadcast. Exact: hash each column, sort by hash, compare candidates entry by entry. Nothing is
// assumed from N (RadiX-Net layers fold 16-fold, the last layer of each block 32-fold).

struct layer_folding {
  std::int32_t columns = 0;
  std::int32_t distinct = 0;                 // number of classes of identical columns
  std::vector<std::int32_t> representative;  // [columns]: the smallest column identical to j
  std::int32_t period = 0;                   // P > 0 when representative[j] == j mod P for every j
  plan_status status;                        // failure (why) when no two columns are identical

  double fold_factor() const { return distinct > 0 ? double(columns) / double(distinct) : 1.0; }
};

// Classes of output columns with identical weight columns (bitwise) and identical bias.
// column_bias: nullptr (a scalar bias, the challenge) or [w.cols()] per-column biases.
inline layer_folding find_duplicate_columns(layer_matrix const& w, std::int32_t layer = 0,
                                            float const* column_bias = nullptr) {
  validate(w);
  auto const c = detail::to_columns(w);
  std::int32_t const n = w.cols();
  layer_folding f;
  f.columns = n;
  f.representative.assign(static_cast<std::size_t>(n), -1);
  std::vector<std::uint64_t> hash(static_cast<std::size_t>(n));
  auto bias_bits = [&](std::int32_t j) -> std::uint32_t { return column_bias ? detail::float_bits(column_bias[j]) : 0u; };
  for (std::int32_t j = 0; j < n; ++j) {
    auto const b = c.start[j], e = c.start[j + 1];
    std::uint64_t h = detail::mix64(0x51ED27A1u, static_cast<std::uint64_t>(e - b));
    h = detail::mix64(h, bias_bits(j));
    for (auto a = b; a < e; ++a)
      h = detail::mix64(h, (static_cast<std::uint64_t>(static_cast<std::uint32_t>(c.row[a])) << 32) |
                               detail::float_bits(c.value[a]));
    hash[j] = h;
  }
  auto same = [&](std::int32_t x, std::int32_t y) {
    auto const bx = c.start[x], ex = c.start[x + 1], by = c.start[y], ey = c.start[y + 1];
    if (ex - bx != ey - by || bias_bits(x) != bias_bits(y)) return false;
    for (std::int64_t t = 0; t < ex - bx; ++t)
      if (c.row[bx + t] != c.row[by + t] || detail::float_bits(c.value[bx + t]) != detail::float_bits(c.value[by + t]))
        return false;
    return true;
  };
  std::vector<std::int32_t> order(static_cast<std::size_t>(n));
  for (std::int32_t j = 0; j < n; ++j) order[j] = j;
  std::sort(order.begin(), order.end(), [&](std::int32_t x, std::int32_t y) {
    return hash[x] != hash[y] ? hash[x] < hash[y] : x < y;
  });
  std::vector<std::int32_t> reps;  // representatives within one run of equal hashes
  for (std::size_t g = 0; g < order.size();) {
    std::size_t h = g;
    while (h < order.size() && hash[order[h]] == hash[order[g]]) ++h;
    reps.clear();
    for (std::size_t t = g; t < h; ++t) {  // ascending j within the run: first of a class is smallest
      std::int32_t const j = order[t];
      std::int32_t r = -1;
      for (std::int32_t q : reps)
        if (same(q, j)) {
          r = q;
          break;
        }
      if (r < 0) {
        reps.push_back(j);
        ++f.distinct;
        r = j;
      }
      f.representative[j] = r;
    }
    g = h;
  }
  if (f.distinct > 0) {
    f.period = f.distinct;
    for (std::int32_t j = 0; j < n && f.period; ++j)
      if (f.representative[j] != j % f.distinct) f.period = 0;
  }
  if (n > 0 && f.distinct == n)
    f.status = plan_status::failure(sdnn::detail::concat("folding: layer ", layer, " (0-based): all ", n,
                                                   " columns differ (weights or bias), nothing to fold"));
  return f;
}

// Every layer (scalar bias: only the weight columns decide).
inline std::vector<layer_folding> find_duplicate_columns(std::vector<layer_matrix> const& layers) {
  std::vector<layer_folding> r;
  r.reserve(layers.size());
  for (std::size_t l = 0; l < layers.size(); ++l) r.push_back(find_duplicate_columns(layers[l], static_cast<std::int32_t>(l)));
  return r;
}

// ---------------------------------------------------------------------------------------------
// 3. Sparse first layer: layer 1 from the input CSR may sum a row's terms in any order when every
// partial sum is exact. (i) every stored input is exactly 1.0f, so each product is exactly w;
// (ii) per column j, all weights finite multiples of 2^g_j with U_j = sum |w| / 2^g_j <= 2^24 and
// U_j 2^g_j <= FLT_MAX: then every partial sum is n 2^g_j with |n| <= 2^24, representable, so
// every add is exact (a zero sum is +0 in every order). From layer 2 on the bias makes values
// arbitrary floats, so no such proof is attempted.

// ok when every stored value of the input CSR is exactly 1.0f (explicit zeros fail too).
inline plan_status check_binary_inputs(layer_matrix const& y) {
  validate(y);
  auto const v = y.view();
  for (std::int32_t i = 0; i < v.rows; ++i)
    for (std::int32_t a = v.row_ptr[i]; a < v.row_ptr[i + 1]; ++a)
      if (!(v.values[a] == 1.0f))
        return plan_status::failure(sdnn::detail::concat("sparse first layer: input row ", i, " (0-based), column ",
                                                   v.col_idx[a], " holds ", detail::float_text(v.values[a]),
                                                   "; the order-free first layer needs every stored value exactly 1"));
  return {};
}

struct first_layer_proof {
  plan_status status;          // ok: with 0/1 inputs, layer 1 is exact in every summation order
  double max_units = 0;        // max over columns of U_j = sum |w| / 2^g_j (<= 2^24 required)
  std::int32_t min_exponent = 0;  // min over columns of g_j (weights are multiples of 2^g_j)
};

inline first_layer_proof prove_sparse_first_layer(layer_matrix const& w, std::int32_t layer = 0) {
  validate(w);
  auto const c = detail::to_columns(w);
  first_layer_proof p;
  p.min_exponent = std::numeric_limits<std::int32_t>::max();
  double const limit = 16777216.0;  // 2^24
  for (std::int32_t j = 0; j < w.cols(); ++j) {
    auto const b = c.start[j], e = c.start[j + 1];
    // g_j: the lowest set bit of any weight: w = M 2^(ex - 24), M an integer < 2^24.
    std::int32_t g = std::numeric_limits<std::int32_t>::max();
    for (auto a = b; a < e; ++a) {
      float const x = c.value[a];
      if (!std::isfinite(x)) {
        p.status = plan_status::failure(sdnn::detail::concat("sparse first layer: layer ", layer, " (0-based), column ", j,
                                                       ": the weight at input ", c.row[a], " is ", detail::float_text(x),
                                                       " (not finite)"));
        return p;
      }
      if (x == 0.f) continue;
      int ex = 0;
      double const frac = std::frexp(static_cast<double>(x), &ex);
      auto m = static_cast<std::uint32_t>(std::fabs(std::ldexp(frac, 24)));  // exact: < 2^24
      std::int32_t t = 0;
      while (!(m & 1u)) m >>= 1, ++t;
      g = std::min<std::int32_t>(g, ex - 24 + t);
    }
    if (g == std::numeric_limits<std::int32_t>::max()) continue;  // all zero: every partial sum is 0
    p.min_exponent = std::min(p.min_exponent, g);
    double units = 0;  // integers; exact in double while below 2^53, and we stop above 2^24
    for (auto a = b; a < e && units <= limit; ++a) units += std::ldexp(std::fabs(static_cast<double>(c.value[a])), -g);
    p.max_units = std::max(p.max_units, units);
    if (units > limit || std::ldexp(units, g) > static_cast<double>(FLT_MAX)) {
      p.status = plan_status::failure(sdnn::detail::concat(
          "sparse first layer: layer ", layer, " (0-based), column ", j, ": its weights are multiples of 2^", g,
          " but sum to ", units > limit ? "more than 2^24" : "above FLT_MAX", " such units (",
          detail::float_text(static_cast<float>(units)),
          "), so a partial sum may round and another summation order could change bits"));
      return p;
    }
  }
  if (p.min_exponent == std::numeric_limits<std::int32_t>::max()) p.min_exponent = 0;
  return p;
}

// ---------------------------------------------------------------------------------------------
// All three, as a plan runs them (disabled proofs report "disabled" and are not attempted).

struct structure_report {
  structure_options options;
  saturation_proof saturation;         // layers empty when options.retirement is off
  std::vector<layer_folding> folding;  // empty when options.folding is off
  first_layer_proof first_layer;       // status "disabled" when options.sparse_first_layer is off

  // Whether a row that is exactly all-cap on entry to layer l may retire.
  bool may_retire_on_entry(std::int32_t l) const {
    return options.retirement && l >= 0 && static_cast<std::size_t>(l) < saturation.suffix_fixed.size() &&
           saturation.suffix_fixed[l];
  }
  std::string summary() const {
    std::ostringstream s;
    if (!options.retirement)
      s << "retirement: off";
    else if (saturation.status.ok())
      s << "retirement: every layer maps all-cap to all-cap";
    else
      s << "retirement: from layer " << saturation.retire_from();
    s << "; folding: ";
    if (!options.folding) {
      s << "off";
    } else {
      double lo = 0, hi = 0;
      for (std::size_t l = 0; l < folding.size(); ++l) {
        double const x = folding[l].fold_factor();
        lo = l ? std::min(lo, x) : x;
        hi = l ? std::max(hi, x) : x;
      }
      s << "fold factor " << lo;
      if (hi != lo) s << " .. " << hi;
    }
    s << "; sparse first layer: "
      << (!options.sparse_first_layer ? "off" : first_layer.status.ok() ? "order-free" : "not proven");
    return s.str();
  }
};

// The report of analyze_structure built one layer at a time, for networks too large to hold
// every layer at once (ops::challenge_engine_plan's streaming constructor): each layer's proofs
// are computed by layer_proofs (independent per layer: any thread, any order), then added in
// layer order.
struct layer_proofs {
  layer_saturation saturation;  // when options.retirement
  layer_folding folding;        // when options.folding
  first_layer_proof first;      // layer 0, when options.sparse_first_layer
};

inline layer_proofs prove_layer(layer_matrix const& w, std::int32_t layer, float bias, float cap,
                                structure_options const& options) {
  layer_proofs p;
  if (options.retirement) p.saturation = prove_layer_saturation(w, bias, cap, layer);
  if (options.folding) p.folding = find_duplicate_columns(w, layer);
  if (options.sparse_first_layer && layer == 0) p.first = prove_sparse_first_layer(w, 0);
  return p;
}

class structure_builder {
 public:
  explicit structure_builder(structure_options options = {}) { r_.options = options; }

  // Layer number layers() (0-based), with its proofs from prove_layer. `keep_representatives`
  // false drops the folding's per-column representative table (N ints) once the caller has used it.
  void add(layer_proofs p, bool keep_representatives = true) {
    auto const l = static_cast<std::int32_t>(count_++);
    if (r_.options.retirement) {
      r_.saturation.layers.push_back(std::move(p.saturation));
      r_.saturation.layer_fixed.push_back(r_.saturation.layers.back().fixed ? 1 : 0);
    }
    if (r_.options.folding) {
      if (!keep_representatives) std::vector<std::int32_t>().swap(p.folding.representative);
      r_.folding.push_back(std::move(p.folding));
    }
    if (l == 0 && r_.options.sparse_first_layer) r_.first_layer = std::move(p.first);
  }
  std::size_t layers() const noexcept { return count_; }

  structure_report finish() {
    if (r_.options.retirement)
      finish_saturation(r_.saturation);
    else
      r_.saturation.status = plan_status::failure("retirement: disabled by structure_options");
    if (!r_.options.sparse_first_layer)
      r_.first_layer.status = plan_status::failure("sparse first layer: disabled by structure_options");
    else if (count_ == 0)
      r_.first_layer.status = plan_status::failure("sparse first layer: no layers");
    return std::move(r_);
  }

 private:
  structure_report r_;
  std::size_t count_ = 0;
};

inline structure_report analyze_structure(std::vector<layer_matrix> const& layers, float bias, float cap = 32.f,
                                          structure_options options = {}) {
  for (std::size_t l = 1; l < layers.size(); ++l)
    SDNN_EXPECTS(layers[l].rows() == layers[l - 1].cols(), "analyze_structure: layer ", l, " has ", layers[l].rows(),
                 " rows but layer ", l - 1, " has ", layers[l - 1].cols(), " columns");
  structure_builder b(options);
  for (std::size_t l = 0; l < layers.size(); ++l)
    b.add(prove_layer(layers[l], static_cast<std::int32_t>(l), bias, cap, options));
  return b.finish();
}

}  // namespace sdnn::challenge
