// Direct sparse convolution with quantized weights (conv/op/direct_sparse_quantized.cuh) on the device:
//   * BITWISE equal (==) to the float direct sparse convolution (conv/op/direct_sparse.cuh) run on the
//     dequantized weights, for every encoding (int8 per layer / per output channel, symmetric /
//     asymmetric; codebook4) and every config tried (candidates plus forced odd block shapes
//     with several channel chunks, both ways sums cross chunks);
//   * against the host reference conv_reference(quantized weights) (double sums): within
//     |y - ref| <= 1e-5 * (sum |w'||x| + |bias|) on real-valued data (float rounding of the
//     device sums), exactly (==) where the data make float sums exact (int8 symmetric per
//     layer with max |w| = 127: scale 1, integer weights; all-zero weights).
// Outputs are poisoned (all bits set = NaN) before each run.
#include "sdnn_gpu_test.cuh"
#include "sdnn_conv_fixtures.hpp"

#include <sdnn/conv/weights.hpp>
#include <sdnn/conv/quantized_weights.hpp>
#include <sdnn/conv/op/direct_sparse.cuh>
#include <sdnn/conv/op/direct_sparse_quantized.cuh>
#include <sdnn/train/op/prune_uniform.hpp>
#include <sdnn/conv/reference/convolution.hpp>
#include <sdnn/conv/reference/quantized.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace sdnn;
using namespace sdnn::conv;

namespace {
using sdnn_test::small_ints;  // tests/common/sdnn_conv_fixtures.hpp
using sdnn_test::reals;
using sdnn_test::upload;  // tests/common/sdnn_gpu_test.cuh

// One run of a plan type (float direct_conv_plan or quantized_direct_conv_plan) for a config.
template <class Plan, class W>
std::vector<float> run_plan(W const& w, int N, std::vector<float> const& in, std::vector<float> const& bias, bool relu,
                            direct_conv_config const& c) {
  cuda_exec ex;
  Plan const plan(w, c, ex);
  auto const din = upload(in, ex);
  auto const db = upload(bias, ex);
  device_buffer<float> dout(static_cast<std::size_t>(N) * w.shape.out_features(), ex);
  if (dout.size()) SDNN_CUDA_CHECK(cudaMemsetAsync(dout.data(), 0xFF, dout.size() * sizeof(float), ex.stream));
  plan.run(ex, N, din.data(), bias.empty() ? nullptr : db.data(), relu, dout.data());
  return sdnn_test::to_vector(dout);
}

struct conv_case {
  conv_shape s;
  int N;
  double sparsity;
};
std::vector<conv_case> edge_cases() {
  return {
      {conv_shape::conv2d(3, 17, 19, 9, 3, 3, 1, 1), 5, 0.9},     // odd sizes, K not a multiple of 8
      {conv_shape::conv2d(8, 33, 35, 16, 3, 3, 2, 1), 3, 0.8},    // stride 2
      {conv_shape::conv2d(5, 21, 18, 4, 3, 3, 1, 2, 2), 1, 0.5},  // dilation 2, batch 1
      {conv_shape::conv2d(7, 9, 11, 1, 3, 3, 1, 1), 9, 0.7},      // one output channel, batch 9
      {conv_shape::conv2d(24, 14, 14, 12, 1, 1), 6, 0.875},       // 1x1
      {conv_shape::conv2d(19, 15, 13, 10, 1, 1, 2, 0), 1, 0.5},   // 1x1 stride 2, batch 1, odd C
      {conv_shape::conv2d(37, 12, 10, 13, 3, 3, 1, 1), 3, 0.9},   // C, K not multiples of tiles
      {conv_shape::conv2d(4, 8, 8, 6, 3, 3, 1, 1), 4, 0.0},       // dense
      {conv_shape::conv1d(9, 300, 17, 3, 1, 1), 3, 0.9},          // 1-D kernel 3, padding
  };
}

// The candidates plus forced odd shapes (partial warps, several channel chunks, both chunk modes).
std::vector<direct_conv_config> configs(conv_shape const& s) {
  auto v = direct_conv_candidates(s, sizeof(float), 8);
  for (int var = 0; var < 4; ++var)
    for (int regs : {1, 0}) {
      direct_conv_config c;
      c.variant = var;
      c.sums_in_registers = regs;
      c.rows_mode = s.OH() > 1 ? 1 : 0;
      c.tw = c.rows_mode ? 5 : 40;
      c.th = c.rows_mode ? 3 : 1;
      c.cc = 2;
      v.push_back(c);
      c.kw = 3;
      c.ksplit = 2;
      c.cc = 3;
      v.push_back(c);
    }
  return v;
}

struct encoding_case {
  std::string name;
  bool codebook;
  int8_options o;
};
std::vector<encoding_case> encodings() {
  std::vector<encoding_case> e;
  for (auto g : {quant_granularity::per_layer, quant_granularity::per_channel})
    for (bool sym : {true, false}) {
      int8_options o;
      o.granularity = g;
      o.symmetric = sym;
      e.push_back({std::string("int8 ") + (g == quant_granularity::per_layer ? "per_layer " : "per_channel ") +
                       (sym ? "symmetric" : "asymmetric"),
                   false, o});
    }
  int8_options mse;
  mse.granularity = quant_granularity::per_channel;
  mse.clip = int8_clip::mse;  // saturating clip range
  e.push_back({"int8 per_channel symmetric mse", false, mse});
  e.push_back({"codebook4", true, {}});
  return e;
}

// Runs one encoding on one case over the configs: == float device on dequantized weights,
// within tol of the host reference (exact when tol == 0).
template <class Encoding>
void check_encoding(quantized_conv_weights<Encoding> const& q, int N, std::vector<float> const& in,
                    std::vector<float> const& bias, double tol) {
  auto const wf = dequantize(q);
  conv_shape const& s = q.shape;
  // |w'| |x| scale of the tolerance
  sparse_conv_weights<float> wa = wf;
  for (auto& x : wa.values) x = std::fabs(x);
  std::vector<float> ain(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) ain[i] = std::fabs(in[i]);
  auto const scale = conv_reference(wa, N, ain.data());
  for (bool relu : {false, true}) {
    auto const ref = conv_reference(q, N, in.data(), bias.data(), relu);
    for (auto const& c : configs(s)) {
      INFO("C=" << s.C << " H=" << s.H << " W=" << s.W << " K=" << s.K << " R=" << s.R << " S=" << s.S << " N=" << N
                << " variant " << c.variant << " tw " << c.tw << " th " << c.th << " cc " << c.cc << " kw " << c.kw
                << " ksplit " << c.ksplit << " sums_in_registers " << c.sums_in_registers << " relu " << relu);
      auto const yq = run_plan<quantized_direct_conv_plan<Encoding>>(q, N, in, bias, relu, c);
      auto const yf = run_plan<direct_conv_plan<float, float>>(wf, N, in, bias, relu, c);
      REQUIRE(yq.size() == ref.size());
      REQUIRE(std::memcmp(yq.data(), yf.data(), yq.size() * sizeof(float)) == 0);
      std::size_t const hw = static_cast<std::size_t>(s.OH()) * s.OW();
      double err = 0;
      for (std::size_t i = 0; i < ref.size(); ++i)
        err = std::max(err, std::fabs(double(yq[i]) - ref[i]) /
                                (scale[i] + std::fabs(double(bias[(i / hw) % static_cast<std::size_t>(s.K)])) + 1e-30));
      INFO("max relative error " << err);
      if (tol == 0) {
        std::size_t bad = 0;
        for (std::size_t i = 0; i < ref.size(); ++i) bad += double(yq[i]) != ref[i];
        REQUIRE(bad == 0);
      } else {
        REQUIRE(err <= tol);
      }
    }
  }
}
}  // namespace

TEST_CASE("quantized direct_sparse_conv == float device path on dequantized weights, ~ host reference",
          "[cuda][conv_quantized]") {
  SDNN_REQUIRE_DEVICE();
  std::uint32_t seed = 11;
  for (auto const& cs : edge_cases()) {
    auto const in = reals(static_cast<std::size_t>(cs.N * cs.s.in_features()), seed++);
    auto const wd = reals(static_cast<std::size_t>(cs.s.weight_count()), seed++);
    std::vector<float> bias(static_cast<std::size_t>(cs.s.K));
    for (int k = 0; k < cs.s.K; ++k) bias[static_cast<std::size_t>(k)] = 0.25f * float(k % 5) - 0.5f;
    auto const w = make_conv_weights<float>(cs.s, prune_uniform(wd.data(), cs.s.K, cs.s.filter_size(), cs.sparsity));
    for (auto const& e : encodings()) {
      INFO(e.name);
      if (e.codebook) check_encoding(quantize_codebook4(w), cs.N, in, bias, 1e-5);
      else check_encoding(quantize_int8(w, e.o), cs.N, in, bias, 1e-5);
    }
  }
}

TEST_CASE("quantized direct_sparse_conv is exact where float sums are (integer int8 weights, all-zero weights)",
          "[cuda][conv_quantized]") {
  SDNN_REQUIRE_DEVICE();
  std::uint32_t seed = 500;
  for (auto const& cs : edge_cases()) {
    auto const in = small_ints(static_cast<std::size_t>(cs.N * cs.s.in_features()), -3, 3, seed++);
    auto wd = small_ints(static_cast<std::size_t>(cs.s.weight_count()), -127, 127, seed++);
    wd[0] = 127.0f;  // kept by pruning (largest magnitude): the symmetric per-layer scale is 127 / 127 = 1
    std::vector<float> bias(static_cast<std::size_t>(cs.s.K));
    for (int k = 0; k < cs.s.K; ++k) bias[static_cast<std::size_t>(k)] = float(k % 3) - 1.0f;
    auto const w = make_conv_weights<float>(cs.s, prune_uniform(wd.data(), cs.s.K, cs.s.filter_size(), cs.sparsity));
    auto const q = quantize_int8(w);  // symmetric, per layer
    REQUIRE(q.enc.scale[0] == 1.0f);
    check_encoding(q, cs.N, in, bias, 0.0);

    std::vector<float> const zeros(static_cast<std::size_t>(cs.s.weight_count()), 0.0f);
    auto const wz = make_conv_weights<float>(cs.s, prune_uniform(zeros.data(), cs.s.K, cs.s.filter_size(), cs.sparsity));
    check_encoding(quantize_int8(wz), cs.N, in, bias, 0.0);
    int8_options asym;
    asym.symmetric = false;
    asym.granularity = quant_granularity::per_channel;
    check_encoding(quantize_int8(wz, asym), cs.N, in, bias, 0.0);
    check_encoding(quantize_codebook4(wz), cs.N, in, bias, 0.0);
  }
}

TEST_CASE("quantized direct_conv plan: protocol, device bytes, bad configs", "[cuda][conv_quantized]") {
  SDNN_REQUIRE_DEVICE();
  cuda_exec ex;
  auto const s = conv_shape::conv2d(16, 12, 12, 8, 3, 3, 1, 1);
  auto const wd = reals(static_cast<std::size_t>(s.weight_count()), 3);
  auto const w = make_conv_weights<float>(s, prune_uniform(wd.data(), s.K, s.filter_size(), 0.75));
  auto const q8 = quantize_int8(w);
  auto const q4 = quantize_codebook4(w);
  auto const c = direct_conv_candidates(s, sizeof(float), 4).front();
  REQUIRE(quantized_direct_conv_plan<int8_encoding>::can_implement(s, c));
  quantized_direct_conv_plan<int8_encoding> const p8(q8, c, ex);
  quantized_direct_conv_plan<codebook4_encoding> const p4(q4, c, ex);
  REQUIRE(p8.workspace_bytes() == 0);
  REQUIRE(p8.bytes().value_bytes == static_cast<std::size_t>(w.nnz()));
  REQUIRE(p4.bytes().value_bytes == static_cast<std::size_t>((w.nnz() + 1) / 2));
  REQUIRE(p8.bytes().index_bytes == p4.bytes().index_bytes);
  direct_conv_config bad = c;
  bad.variant = 9;
  REQUIRE_FALSE(quantized_direct_conv_plan<int8_encoding>::can_implement(s, bad));
  REQUIRE_THROWS_AS((quantized_direct_conv_plan<int8_encoding>(q8, bad, ex)), sdnn::error);
  auto broken = q8;
  broken.enc.scale.clear();  // inconsistent container
  REQUIRE_THROWS_AS((quantized_direct_conv_plan<int8_encoding>(broken, c, ex)), sdnn::error);
  auto broken4 = q4;
  broken4.enc.packed.pop_back();
  REQUIRE_THROWS_AS((quantized_direct_conv_plan<codebook4_encoding>(broken4, c, ex)), sdnn::error);
  // n = 0 enqueues nothing
  p8.run(ex, 0, nullptr, nullptr, false, nullptr);
  SDNN_CUDA_CHECK(cudaStreamSynchronize(ex.stream));
}
