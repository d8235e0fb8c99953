// The sparse model file (io/sparse_model.hpp): bit-exact round trips of every structure and value
// type, conv2d layers and the description; every refusal of the writer; and a reader that throws
// an sdnn::error, never crashes and never allocates what the file cannot hold, on truncated,
// flipped and hand-crafted files (built here byte by byte from the documented layout).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <sdnn/core/numeric.hpp>
#include <sdnn/formats/dense.hpp>
#include <sdnn/io/sparse_model.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

using namespace sdnn;
using io::model_activation;
using io::model_layer;
using io::model_layer_kind;
using io::model_structure;
using io::model_value;
using io::sparse_model;
using sdnn_test::error_text;
using sdnn_test::has;

namespace {

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float rounded(float x, model_value v) {
  if (v == model_value::bf16) return round_to<bf16>(x);
  if (v == model_value::fp16) return round_to<fp16>(x);
  return x;
}

// A random out x in layer whose weights fit `s` and `v` exactly: blocks are 75 % empty, 2:4 groups
// keep 0, 1 or 2 nonzeros, CSR is about 80 % zeros; int8 weights are q * scale[row].
model_layer random_layer(model_structure s, model_value v, std::int64_t out, std::int64_t in, unsigned seed,
                         std::int32_t br = 32, std::int32_t bc = 32) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  model_layer L;
  L.structure = s;
  L.value = v;
  L.activation = seed % 2 ? model_activation::relu : model_activation::none;
  if (s == model_structure::blocks) {
    L.block_rows = br;
    L.block_cols = bc;
  }
  if (v == model_value::int8)
    for (std::int64_t r = 0; r < out; ++r) L.scales.push_back(0.001f + 0.1f * uni(rng));
  auto draw = [&](std::int64_t r) {
    if (v == model_value::int8) {
      int q = static_cast<int>(uni(rng) * 254.0f) - 127;
      if (q == 0) q = 127;
      return float(q) * L.scales[r];
    }
    float x = normal(rng);
    if (uni(rng) < 0.05f) x *= 1e-6f;  // tiny values: fp16 subnormals
    x = rounded(x, v);
    return x == 0.0f ? rounded(0.5f, v) : x;
  };
  L.w = dense_matrix<float>(out, in);
  std::vector<char> keep_block;
  std::int64_t const cb = (in + bc - 1) / bc;
  for (std::int64_t i = 0; i < (out + br - 1) / br * cb; ++i) keep_block.push_back(uni(rng) < 0.25f);
  for (std::int64_t r = 0; r < out; ++r) {
    for (std::int64_t g = 0; g * 4 < in; ++g) {
      int const kept = static_cast<int>(uni(rng) * 3);  // 2:4: 0, 1 or 2 nonzeros
      int const p0 = static_cast<int>(uni(rng) * 4), p1 = (p0 + 1 + static_cast<int>(uni(rng) * 3)) % 4;
      for (int i = 0; i < 4 && g * 4 + i < in; ++i) {
        std::int64_t const c = g * 4 + i;
        bool nz = true;
        if (s == model_structure::unstructured) nz = uni(rng) < 0.2f;
        if (s == model_structure::blocks) nz = keep_block[r / br * cb + c / bc] && uni(rng) < 0.5f;
        if (s == model_structure::sparse24) nz = (kept >= 1 && i == p0) || (kept == 2 && i == p1);
        L.w(r, c) = nz ? draw(r) : 0.0f;
      }
    }
  }
  if (seed % 3 != 0)
    for (std::int64_t r = 0; r < out; ++r) L.bias.push_back(normal(rng));
  return L;
}

std::string encode(sparse_model const& m) {
  std::ostringstream os;
  io::write_sparse_model(os, m);
  return os.str();
}
sparse_model decode(std::string const& bytes, io::read_options const& opt = {}) {
  std::istringstream is(bytes);
  return io::read_sparse_model(is, opt);
}

void check_same(model_layer const& a, model_layer const& b) {
  CHECK(a.kind == b.kind);
  CHECK(a.structure == b.structure);
  CHECK(a.value == b.value);
  CHECK(a.activation == b.activation);
  CHECK(a.block_rows == b.block_rows);
  CHECK(a.block_cols == b.block_cols);
  CHECK(a.conv.in_channels == b.conv.in_channels);
  CHECK(a.conv.kernel_h == b.conv.kernel_h);
  CHECK(a.conv.kernel_w == b.conv.kernel_w);
  CHECK(a.conv.stride == b.conv.stride);
  CHECK(a.conv.pad == b.conv.pad);
  REQUIRE(a.w.rows() == b.w.rows());
  REQUIRE(a.w.cols() == b.w.cols());
  std::size_t diff = 0;
  for (std::size_t i = 0; i < a.w.size(); ++i) diff += bits(a.w.values()[i]) != bits(b.w.values()[i]);
  CHECK(diff == 0);
  REQUIRE(a.bias.size() == b.bias.size());
  for (std::size_t i = 0; i < a.bias.size(); ++i) CHECK(bits(a.bias[i]) == bits(b.bias[i]));
  REQUIRE(a.scales.size() == b.scales.size());
  for (std::size_t i = 0; i < a.scales.size(); ++i) CHECK(bits(a.scales[i]) == bits(b.scales[i]));
}

model_structure const all_structures[] = {model_structure::dense, model_structure::unstructured,
                                          model_structure::blocks, model_structure::sparse24};
model_value const all_values[] = {model_value::f32, model_value::bf16, model_value::fp16, model_value::int8};

// A small model with every structure, value type, a conv2d layer and a layer after it.
sparse_model mixed_model() {
  sparse_model m;
  m.description = "mixed test model";
  m.layers.push_back(random_layer(model_structure::dense, model_value::f32, 12, 10, 1));
  m.layers.push_back(random_layer(model_structure::unstructured, model_value::bf16, 16, 12, 2));
  m.layers.push_back(random_layer(model_structure::blocks, model_value::fp16, 20, 16, 3, 8, 4));
  m.layers.push_back(random_layer(model_structure::sparse24, model_value::int8, 10, 20, 4));
  m.layers.push_back(random_layer(model_structure::sparse24, model_value::f32, 8, 27, 5));
  m.layers.back().kind = model_layer_kind::conv2d;
  m.layers.back().conv = {3, 3, 3, 2, 1};
  m.layers.back().activation = model_activation::relu_maxpool2x2;
  m.layers.push_back(random_layer(model_structure::blocks, model_value::int8, 5, 9, 7, 4, 4));
  return m;
}

// The documented layout, by hand: little-endian fields, then the FNV-1a 64 checksum.
struct file_builder {
  std::string s;
  file_builder& put(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
    return *this;
  }
  file_builder& f32(float f) { return put(bits(f), 4); }
  // magic, version, layer count, description
  file_builder& start(std::uint32_t layers, std::string const& desc = "", std::uint32_t version = 1) {
    s += "SDNNMODL";
    put(version, 4).put(layers, 4).put(desc.size(), 4);
    s += desc;
    return *this;
  }
  // The 52-byte layer header; conv = {in_channels, kernel_h, kernel_w, stride, pad}.
  file_builder& layer(model_structure st, model_value v, std::int32_t out, std::int32_t in, std::uint64_t nnz,
                      std::uint32_t nbias = 0, std::int32_t br = 0, std::int32_t bc = 0,
                      model_layer_kind kind = model_layer_kind::linear,
                      std::vector<std::int32_t> conv = {0, 0, 0, 1, 0}, model_activation act = model_activation::none) {
    put(std::uint8_t(kind), 1).put(std::uint8_t(st), 1).put(std::uint8_t(v), 1).put(std::uint8_t(act), 1);
    put(std::uint32_t(br), 4).put(std::uint32_t(bc), 4).put(std::uint32_t(out), 4).put(std::uint32_t(in), 4);
    for (std::int32_t c : conv) put(std::uint32_t(c), 4);
    return put(nnz, 8).put(nbias, 4);
  }
  std::string finish() const {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    file_builder b{s};
    return b.put(h, 8).s;
  }
};

// A valid 2 x 3 CSR f32 layer: row 0 holds 1.5 at column 1, row 1 holds -2 at 0 and 4 at 2.
std::string small_csr(std::vector<std::uint64_t> row_ptr = {0, 1, 3}, std::vector<std::int32_t> cols = {1, 0, 2}) {
  file_builder b;
  b.start(1).layer(model_structure::unstructured, model_value::f32, 2, 3, cols.size());
  for (auto p : row_ptr) b.put(p, 8);
  for (auto c : cols) b.put(std::uint32_t(c), 4);
  float const values[] = {1.5f, -2.0f, 4.0f};
  for (std::size_t i = 0; i < cols.size(); ++i) b.f32(values[i % 3]);
  return b.finish();
}

}  // namespace

TEST_CASE("sparse model: every structure x value type round trips bit for bit", "[io][model]") {
  unsigned seed = 10;
  for (auto s : all_structures)
    for (auto v : all_values) {
      CAPTURE(io::to_string(s), io::to_string(v));
      sparse_model m;
      m.layers.push_back(random_layer(s, v, 70, 102, seed++));  // edge blocks and a padded 2:4 group
      if (s == model_structure::blocks) m.layers.push_back(random_layer(s, v, 33, 70, seed++, 16, 8));
      std::string const bytes = encode(m);
      sparse_model const back = decode(bytes);
      REQUIRE(back.layers.size() == m.layers.size());
      for (std::size_t i = 0; i < m.layers.size(); ++i) check_same(m.layers[i], back.layers[i]);
      CHECK(encode(back) == bytes);  // the encoding is canonical
    }
}

TEST_CASE("sparse model: conv2d layers, description, files on disk, -0", "[io][model]") {
  sparse_model m = mixed_model();
  m.description = std::string("binary \0\xff text", 14) + std::string(1000, 'x');
  std::string const bytes = encode(m);
  sparse_model const back = decode(bytes);
  CHECK(back.description == m.description);
  REQUIRE(back.layers.size() == m.layers.size());
  for (std::size_t i = 0; i < m.layers.size(); ++i) check_same(m.layers[i], back.layers[i]);
  CHECK(back.layers[4].kind == model_layer_kind::conv2d);
  CHECK(back.layers[4].conv.stride == 2);
  CHECK(back.layers[4].activation == model_activation::relu_maxpool2x2);
  {  // the pool is a convolution's only
    sparse_model lin;
    lin.layers.push_back(random_layer(model_structure::dense, model_value::f32, 3, 4, 1));
    lin.layers[0].activation = model_activation::relu_maxpool2x2;
    CHECK(has(error_text([&] { encode(lin); }), "relu_maxpool2x2 is for conv2d layers only"));
  }

  sdnn_test::temp_dir dir;
  io::write_sparse_model(dir.file("m.sdnn"), m);
  sparse_model const disk = io::read_sparse_model(dir.file("m.sdnn"));
  for (std::size_t i = 0; i < m.layers.size(); ++i) check_same(m.layers[i], disk.layers[i]);
  CHECK(has(error_text([&] { io::read_sparse_model(dir.file("missing.sdnn")); }), "cannot open"));

  // A 64 KiB description is the largest.
  sparse_model big;
  big.description.assign(65536, 'd');
  CHECK(decode(encode(big)).description == big.description);
  big.description.push_back('d');
  CHECK(has(error_text([&] { encode(big); }), "at most 65536"));

  // -0: read back bit for bit where stored (dense, not int8); as +0 where a sparse structure does
  // not keep it (its CSR entry, 2 x 2 block and 2:4 position hold no nonzero) and for int8 (q = 0).
  for (auto s : all_structures)
    for (auto v : {model_value::f32, model_value::bf16, model_value::int8}) {
      CAPTURE(io::to_string(s), io::to_string(v));
      sparse_model z;
      z.layers.push_back(random_layer(s, v, 4, 8, 3, 2, 2));
      model_layer& L = z.layers[0];
      L.w(0, 0) = -0.0f;
      L.w(0, 1) = L.w(1, 0) = L.w(1, 1) = 0.0f;
      L.w(0, 2) = L.w(0, 3) = v == model_value::int8 ? 3.0f * L.scales[0] : 1.0f;
      float const w00 = decode(encode(z)).layers[0].w(0, 0);
      CHECK(w00 == 0.0f);
      CHECK(std::signbit(w00) == (s == model_structure::dense && v != model_value::int8));
    }
}

TEST_CASE("sparse model: the writer's bytes follow the documented layout", "[io][model]") {
  sparse_model m;
  model_layer L;
  L.structure = model_structure::unstructured;
  L.w = dense_matrix<float>(2, 3);
  L.w(0, 1) = 1.5f;
  L.w(1, 0) = -2.0f;
  L.w(1, 2) = 4.0f;
  m.layers.push_back(std::move(L));
  CHECK(encode(m) == small_csr());
  sparse_model const back = decode(small_csr());
  CHECK(back.layers[0].w(1, 2) == 4.0f);

  // 2:4 with 1 x 6 (a padded group): positions (1, 3) -> 0x0D and (0, 1) -> 0x04 for a zero group.
  sparse_model s;
  model_layer T;
  T.structure = model_structure::sparse24;
  T.value = model_value::bf16;
  T.w = dense_matrix<float>(1, 6);
  T.w(0, 1) = 1.0f;
  T.w(0, 3) = -1.0f;
  s.layers.push_back(std::move(T));
  file_builder b;
  b.start(1).layer(model_structure::sparse24, model_value::bf16, 1, 6, 4).put(0x0D, 1).put(0x04, 1);
  b.put(0x3f80, 2).put(0xbf80, 2).put(0, 2).put(0, 2);
  CHECK(encode(s) == b.finish());
}

TEST_CASE("sparse model: the writer refuses invalid models and writes nothing", "[io][model]") {
  auto refuse = [](sparse_model const& m) { return error_text([&] { encode(m); }); };
  auto one = [](model_layer L) {
    sparse_model m;
    m.layers.push_back(std::move(L));
    return m;
  };
  {  // 3 nonzeros in a 2:4 group: names layer, row and group
    auto L = random_layer(model_structure::sparse24, model_value::f32, 8, 16, 1);
    L.w(5, 8) = L.w(5, 9) = L.w(5, 10) = 1.0f;
    auto const e = refuse(one(std::move(L)));
    CHECK(has(e, "layer 0"));
    CHECK(has(e, "row 5, group 2"));
  }
  {  // values not exactly representable
    auto L = random_layer(model_structure::dense, model_value::bf16, 3, 4, 1);
    L.w(2, 1) = 0.1f;
    CHECK(has(refuse(one(std::move(L))), "w(2, 1) = 0.1 is not exactly a bf16"));
    auto F = random_layer(model_structure::unstructured, model_value::fp16, 3, 4, 1);
    F.w(1, 3) = 1e-9f;
    CHECK(has(refuse(one(std::move(F))), "w(1, 3) = 1e-09 is not exactly a fp16"));
    auto N = random_layer(model_structure::dense, model_value::bf16, 3, 4, 1);
    N.w(0, 0) = std::numeric_limits<float>::quiet_NaN();
    N.w(0, 0) = sdnn::detail::bits_float(sdnn::detail::float_bits(N.w(0, 0)) | 1u);  // payload below bf16
    CHECK(has(refuse(one(std::move(N))), "not exactly a bf16"));
  }
  {  // int8: scales and values
    auto L = random_layer(model_structure::dense, model_value::int8, 3, 4, 1);
    model_layer A = random_layer(model_structure::dense, model_value::int8, 3, 4, 1);
    A.scales.pop_back();
    CHECK(has(refuse(one(std::move(A))), "int8 needs 3 scales (one per row), got 2"));
    model_layer B = random_layer(model_structure::dense, model_value::int8, 3, 4, 1);
    B.scales[1] = 0.0f;
    CHECK(has(refuse(one(std::move(B))), "scales[1] = 0 must be finite and > 0"));
    model_layer C = random_layer(model_structure::dense, model_value::int8, 3, 4, 1);
    C.scales[2] = std::numeric_limits<float>::infinity();
    CHECK(has(refuse(one(std::move(C))), "scales[2] = inf"));
    model_layer D = random_layer(model_structure::blocks, model_value::int8, 3, 4, 1, 2, 2);
    D.w(1, 2) = 128.0f * D.scales[1];
    CHECK(has(refuse(one(std::move(D))), "w(1, 2)"));
    model_layer E = random_layer(model_structure::dense, model_value::int8, 3, 4, 1);
    E.w(0, 0) = 0.5f * E.scales[0];
    CHECK(has(refuse(one(std::move(E))), "for an integer q in [-127, 127]"));
    model_layer F = random_layer(model_structure::dense, model_value::f32, 3, 4, 1);
    F.scales = {1, 1, 1};
    CHECK(has(refuse(one(std::move(F))), "scales are for int8 only"));
    CHECK(refuse(one(std::move(L))) == "no throw");  // the unmodified layer is fine
  }
  {  // shapes
    auto B = random_layer(model_structure::blocks, model_value::f32, 3, 4, 1, 2, 2);
    B.block_cols = 0;
    CHECK(has(refuse(one(std::move(B))), "block shape 2 x 0 must be positive"));
    model_layer E;
    CHECK(has(refuse(one(std::move(E))), "w is 0 x 0"));
    auto Bi = random_layer(model_structure::dense, model_value::f32, 3, 4, 1);
    Bi.bias = {1, 2};
    CHECK(has(refuse(one(std::move(Bi))), "2 bias values for 3 outputs"));
    auto C = random_layer(model_structure::dense, model_value::f32, 8, 27, 1);
    C.kind = model_layer_kind::conv2d;
    C.conv = {3, 3, 2, 1, 0};
    CHECK(has(refuse(one(std::move(C))), "conv2d w has 27 columns, but kernel_h * kernel_w * in_channels = 3 * 2 * 3"));
    auto S = random_layer(model_structure::dense, model_value::f32, 8, 27, 1);
    S.kind = model_layer_kind::conv2d;
    S.conv = {3, 3, 3, 0, 0};
    CHECK(has(refuse(one(std::move(S))), "stride 0"));
    auto U = random_layer(model_structure::dense, model_value::f32, 3, 4, 1);
    U.structure = static_cast<model_structure>(9);
    CHECK(has(refuse(one(std::move(U))), "structure(9)"));
  }
  {  // linear layers must chain; across a conv2d layer nothing is checked
    sparse_model m;
    m.layers.push_back(random_layer(model_structure::dense, model_value::f32, 12, 10, 1));
    m.layers.push_back(random_layer(model_structure::dense, model_value::f32, 5, 11, 2));
    auto const e = refuse(m);
    CHECK(has(e, "layer 1: takes 11 inputs, but layer 0 has 12 outputs"));
    CHECK(refuse(mixed_model()) == "no throw");
    // Nothing was written: a refused model leaves no file.
    sdnn_test::temp_dir dir;
    CHECK_THROWS_AS(io::write_sparse_model(dir.file("bad.sdnn"), m), sdnn::error);
    CHECK(!std::filesystem::exists(dir.file("bad.sdnn")));
  }
}

TEST_CASE("sparse model: truncated, flipped and extended files are refused, never crash", "[io][model]") {
  std::string const good = encode(mixed_model());
  REQUIRE(good.size() > 500);
  REQUIRE(decode(good).layers.size() == 6);

  // Every prefix: the first 200 bytes one by one, then every 7th, and the last 20.
  std::size_t truncated = 0;
  for (std::size_t n = 0; n < good.size(); ++n) {
    if (n >= 200 && n % 7 != 0 && n + 20 < good.size()) continue;
    CAPTURE(n);
    std::string const e = error_text([&] { decode(good.substr(0, n)); });
    CHECK(e != "no throw");
    truncated += has(e, "is truncated or corrupt");
  }
  CHECK(truncated > 200);
  CHECK(has(error_text([&] { decode(good.substr(0, 100)); }), "layer 0 values needs 120 x 4 bytes at offset 88"));
  CHECK(has(error_text([&] { decode(good.substr(0, 30)); }), "description needs 16 bytes at offset 20"));
  CHECK(has(error_text([&] { decode(good.substr(0, good.size() - 3)); }), "checksum needs 8 bytes"));

  // Every single-byte change is refused with an sdnn::error.
  for (std::size_t i = 0; i < good.size(); ++i) {
    CAPTURE(i);
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    CHECK_THROWS_AS(decode(bad), sdnn::error);
  }
  {  // a payload byte (the last bias value) -> checksum
    std::string bad = good;
    bad[good.size() - 9] ^= 1;
    CHECK(has(error_text([&] { decode(bad); }), "checksum mismatch"));
  }
  {  // magic, version, trailing bytes
    std::string bad = good;
    bad[0] = 'X';
    CHECK(has(error_text([&] { decode(bad); }), "is not an sdnn model file"));
    bad = good;
    bad[8] = 2;
    CHECK(has(error_text([&] { decode(bad); }), "version 2, this reader knows 1"));
    CHECK(has(error_text([&] { decode(good + "x"); }), "1 bytes follow the checksum"));
    CHECK(has(error_text([&] { decode(good + good); }), "bytes follow the checksum"));
  }
}

TEST_CASE("sparse model: crafted files with valid checksums are refused with a clear message", "[io][model]") {
  auto reject = [](std::string const& file, io::read_options const& opt = {}) {
    return error_text([&] { decode(file, opt); });
  };
  REQUIRE(reject(small_csr()) == "no throw");

  // Huge counts: refused against the bytes left, before any allocation.
  {
    file_builder b;
    b.start(1).layer(model_structure::unstructured, model_value::f32, 1000, 1000, 900000);
    for (int i = 0; i <= 1000; ++i) b.put(0, 8);
    CHECK(has(reject(b.finish()), "layer 0 col_idx needs 900000 x 4 bytes"));
    file_builder d;
    d.start(1).layer(model_structure::dense, model_value::f32, 20000, 20000, 400000000ull);
    CHECK(has(reject(d.finish()), "layer 0 values needs 400000000 x 4 bytes"));
    file_builder h;  // 60000 x 60000 floats: beyond the decode budget
    h.start(1).layer(model_structure::unstructured, model_value::f32, 60000, 60000, 0);
    CHECK(has(reject(h.finish()), "read_options::max_claimed_bytes"));
    io::read_options big;
    big.max_claimed_bytes = std::uint64_t(1) << 62;
    CHECK(has(reject(h.finish(), big), "layer 0 row_ptr needs 60001 x 8 bytes"));
    file_builder n;  // nnz beyond the matrix
    n.start(1).layer(model_structure::unstructured, model_value::f32, 2, 3, std::uint64_t(1) << 62);
    CHECK(has(reject(n.finish()), "exceeds the 6 entries"));
    file_builder l;  // 4 billion layers, one header's worth of bytes
    l.start(0xffffffffu);
    CHECK(has(reject(l.finish()), "layer 0 header needs"));
    file_builder t;
    t.start(0, "abc");
    t.s[16] = 0x70;  // description length 70000 + 3
    t.s[17] = 0x11;
    t.s[18] = 0x01;
    CHECK(has(reject(t.finish()), "a description of 70000 bytes"));
  }
  // CSR consistency.
  CHECK(has(reject(small_csr({0, 2, 1}, {0, 1, 2})), "row_ptr[2] = 1 is not in [2, nnz = 3]"));
  CHECK(has(reject(small_csr({0, 1, 2}, {1, 0, 2})), "row_ptr[2] = 2, but nnz = 3"));
  CHECK(has(reject(small_csr({1, 1, 3}, {1, 0, 2})), "row_ptr[0] = 1, must be 0"));
  CHECK(has(reject(small_csr({0, 1, 3}, {1, 0, 3})), "col_idx[2] = 3 in row 1 is out of range [0, 3)"));
  CHECK(has(reject(small_csr({0, 1, 3}, {1, 2, 0})), "col_idx[2] = 0 in row 1"));
  CHECK(has(reject(small_csr({0, 1, 3}, {1, 0, -1})), "col_idx[2] = -1"));
  {  // blocks: 3 x 4 in 2 x 2 blocks: a block column out of range, non-zero edge padding
    auto blocks = [](std::int32_t col, float pad) {
      file_builder b;
      b.start(1).layer(model_structure::blocks, model_value::f32, 3, 4, 1, 0, 2, 2);
      b.put(0, 4).put(0, 4).put(1, 4).put(std::uint32_t(col), 4);
      b.f32(1).f32(2).f32(pad).f32(0);  // block (1, col): rows 2..3, row 3 is padding
      return b.finish();
    };
    CHECK(reject(blocks(1, 0)) == "no throw");
    CHECK(decode(blocks(1, 0)).layers[0].w(2, 3) == 2.0f);
    CHECK(has(reject(blocks(2, 0)), "block col_idx[0] = 2 in block row 1 is out of range [0, 2)"));
    CHECK(has(reject(blocks(1, 5)), "block 0 holds 5 at (3, 2), outside the 3 x 4 matrix"));
    file_builder z;
    z.start(1).layer(model_structure::blocks, model_value::f32, 3, 4, 0, 0, 0, 2);
    CHECK(has(reject(z.finish()), "block shape 0 x 2 must be positive"));
  }
  {  // 2:4 positions, padding and count
    auto s24 = [](std::uint8_t p0, std::uint8_t p1, float v3) {
      file_builder b;
      b.start(1).layer(model_structure::sparse24, model_value::f32, 1, 6, 4).put(p0, 1).put(p1, 1);
      b.f32(1).f32(2).f32(3).f32(v3);
      return b.finish();
    };
    CHECK(reject(s24(0x0D, 0x04, 0)) == "no throw");
    CHECK(has(reject(s24(0x0D, 0x06, 0)), "row 0, group 1: position byte 0x6 is not two increasing positions"));
    CHECK(has(reject(s24(0x05, 0x04, 0)), "group 0: position byte 0x5"));
    CHECK(has(reject(s24(0x1D, 0x04, 0)), "position byte 0x1d"));
    CHECK(has(reject(s24(0x0D, 0x0C, 9)), "keeps 9 at column 7, past the 6 columns"));
    file_builder c;
    c.start(1).layer(model_structure::sparse24, model_value::f32, 1, 6, 6);
    CHECK(has(reject(c.finish()), "nnz = 6, but 2:4 of 1 x 6 keeps 4"));
  }
  {  // int8: q = -128, scales
    auto i8 = [](float scale, std::uint8_t q) {
      file_builder b;
      b.start(1).layer(model_structure::dense, model_value::int8, 1, 2, 2).f32(scale).put(5, 1).put(q, 1);
      return b.finish();
    };
    CHECK(reject(i8(0.5f, 0x81)) == "no throw");
    CHECK(decode(i8(0.5f, 0x81)).layers[0].w(0, 1) == -63.5f);
    CHECK(has(reject(i8(0.5f, 0x80)), "stored value 1 is q = -128"));
    CHECK(has(reject(i8(0.0f, 1)), "scales[0] = 0 must be finite and > 0"));
    CHECK(has(reject(i8(-1.0f, 1)), "scales[0] = -1"));
    CHECK(has(reject(i8(std::numeric_limits<float>::quiet_NaN(), 1)), "must be finite and > 0"));
  }
  {  // header fields
    auto dense = [](auto&& edit) {
      file_builder b;
      edit(b);
      return b.finish();
    };
    CHECK(has(reject(dense([](file_builder& b) {
                b.start(1).layer(model_structure::dense, model_value::f32, 1, 2, 3).f32(1).f32(2).f32(3);
              })),
              "nnz = 3, but a dense 1 x 2 matrix has 2"));
    CHECK(has(reject(dense([](file_builder& b) {
                b.start(1).layer(model_structure::dense, model_value::f32, 1, 2, 2, 5).f32(1).f32(2);
              })),
              "5 bias values for 1 outputs"));
    CHECK(has(reject(dense([](file_builder& b) {
                b.start(1).layer(model_structure::dense, model_value::f32, 1, 4, 4, 0, 0, 0, model_layer_kind::conv2d,
                                 {2, 1, 1, 1, 0});
              })),
              "conv2d w has 4 columns, but kernel_h * kernel_w * in_channels = 1 * 1 * 2"));
    CHECK(has(reject(dense([](file_builder& b) {
                b.start(1).layer(model_structure::dense, model_value::f32, 1, 4, 4, 0, 0, 0, model_layer_kind::linear,
                                 {0, 0, 0, 2, 0});
              })),
              "a linear layer must hold the conv fields 0, 0, 0, 1, 0"));
    CHECK(has(reject(dense([](file_builder& b) {
                b.start(1).layer(static_cast<model_structure>(7), model_value::f32, 1, 2, 2);
              })),
              "unknown codes kind 0, structure 7"));
    CHECK(has(reject(dense([](file_builder& b) {
                b.start(1).layer(model_structure::dense, model_value::f32, 1, 4, 4, 0, 0, 0, model_layer_kind::linear,
                                 {0, 0, 0, 1, 0}, model_activation::relu_maxpool2x2);
              })),
              "relu_maxpool2x2) on a linear layer"));
    CHECK(has(reject(dense([](file_builder& b) {
                b.start(1).layer(model_structure::dense, model_value::f32, 1, 4, 4, 0, 0, 0, model_layer_kind::linear,
                                 {0, 0, 0, 1, 0}, static_cast<model_activation>(3));
              })),
              "activation 3 (this reader knows"));
    CHECK(
        has(reject(dense([](file_builder& b) { b.start(1).layer(model_structure::dense, model_value::f32, 0, 2, 0); })),
            "w is 0 x 2"));
    CHECK(has(reject(dense([](file_builder& b) {
                b.start(2).layer(model_structure::dense, model_value::f32, 1, 2, 2).f32(1).f32(2);
                b.layer(model_structure::dense, model_value::f32, 1, 3, 3).f32(1).f32(2).f32(3);
              })),
              "layer 1 takes 3 inputs, but layer 0 has 1 outputs (linear layers must chain)"));
  }
}
