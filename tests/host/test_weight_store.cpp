// Out-of-core weights, host part (pipeline/weight_store.hpp): placement names, byte sizes, the
// budget decision (resident or streamed, ring depth) and its errors. No GPU needed.
#include "sdnn_catch.hpp"

#include <sdnn/pipeline/weight_store.hpp>

#include <cstdint>
#include <string>
#include <vector>

using namespace sdnn;
using namespace sdnn::pipeline;

TEST_CASE("weight_store: byte sizes", "[weight_store]") {
  std::uint64_t b = 0;
  REQUIRE(parse_byte_size("4GiB", b));
  REQUIRE(b == 4ull << 30);
  REQUIRE(parse_byte_size("512MiB", b));
  REQUIRE(b == 512ull << 20);
  REQUIRE(parse_byte_size("512 mib", b));
  REQUIRE(b == 512ull << 20);
  REQUIRE(parse_byte_size("1048576", b));
  REQUIRE(b == 1048576);
  REQUIRE(parse_byte_size("1.5GiB", b));
  REQUIRE(b == 3ull << 29);
  REQUIRE(parse_byte_size("2GB", b));
  REQUIRE(b == 2000000000ull);
  REQUIRE(parse_byte_size("64K", b));
  REQUIRE(b == 65536);
  REQUIRE(parse_byte_size("1TiB", b));
  REQUIRE(b == 1ull << 40);
  REQUIRE(parse_byte_size("7B", b));
  REQUIRE(b == 7);
  for (char const* bad : {"", "GiB", "-1", "0", "0GiB", "4 GiBs", "4GiB ", "0x10", "nan", "inf", "1e9", "4..2G",
                          "1.3B", "99999999999TiB", "4 G iB", " 4GiB"}) {
    INFO("'" << bad << "'");
    std::uint64_t v = 12345;
    REQUIRE_FALSE(parse_byte_size(bad, v));
    REQUIRE(v == 12345);
  }
  REQUIRE(format_bytes(4ull << 30) == "4.00 GiB (4294967296 bytes)");
  REQUIRE(format_bytes(100) == "100 bytes");
}

TEST_CASE("weight_store: placement names", "[weight_store]") {
  weight_placement p = weight_placement::device;
  REQUIRE(parse_weight_placement("host", p));
  REQUIRE(p == weight_placement::host);
  REQUIRE(parse_weight_placement("auto", p));
  REQUIRE(p == weight_placement::automatic);
  REQUIRE(parse_weight_placement("device", p));
  REQUIRE(p == weight_placement::device);
  REQUIRE_FALSE(parse_weight_placement("Host", p));
  REQUIRE(std::string(to_string(weight_placement::automatic)) == "auto");
}

TEST_CASE("weight_store: resident or streamed, and the ring depth", "[weight_store]") {
  std::vector<std::uint64_t> const layers(10, 1000);  // 10 layers of 1000 bytes, 10000 in all
  // device: resident; no budget or a budget that holds them
  auto d = choose_weight_store(layers, 0, weight_placement::device);
  REQUIRE_FALSE(d.streamed);
  REQUIRE(d.device_bytes == 10000);
  d = choose_weight_store(layers, 10000, weight_placement::device);
  REQUIRE_FALSE(d.streamed);
  // automatic: resident while the network fits, streamed over the budget
  d = choose_weight_store(layers, 10000, weight_placement::automatic);
  REQUIRE_FALSE(d.streamed);
  REQUIRE(d.slots == 0);
  d = choose_weight_store(layers, 9999, weight_placement::automatic);
  REQUIRE(d.streamed);
  REQUIRE(d.slots == default_weight_slots);
  REQUIRE(d.slot_bytes == 1000);
  REQUIRE(d.device_bytes == 3000);
  REQUIRE(d.total_bytes == 10000);
  // the budget limits the depth: 2500 bytes hold two slots
  d = choose_weight_store(layers, 2500, weight_placement::automatic);
  REQUIRE(d.streamed);
  REQUIRE(d.slots == 2);
  // host: streamed even when it would fit; no budget = the default depth
  d = choose_weight_store(layers, 0, weight_placement::host);
  REQUIRE(d.streamed);
  REQUIRE(d.slots == default_weight_slots);
  // an asked depth
  d = choose_weight_store(layers, 0, weight_placement::host, 5);
  REQUIRE(d.slots == 5);
  d = choose_weight_store(layers, 4000, weight_placement::host, 4);
  REQUIRE(d.slots == 4);
  REQUIRE(d.device_bytes == 4000);
  // slot size = the largest layer
  d = choose_weight_store({100, 700, 300}, 0, weight_placement::host, 2);
  REQUIRE(d.slot_bytes == 700);
  REQUIRE(d.device_bytes == 1400);
}

TEST_CASE("weight_store: budgets too small, and bad depths, are sdnn::errors naming the numbers", "[weight_store]") {
  std::vector<std::uint64_t> const layers(10, 1000);
  auto message = [](auto&& f) {
    try {
      f();
    } catch (sdnn::error const& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // one slot's worth: streaming needs two
  std::string m = message([&] { choose_weight_store(layers, 1999, weight_placement::host); });
  INFO(m);
  REQUIRE(m.find("1999 bytes") != std::string::npos);
  REQUIRE(m.find("1000 bytes") != std::string::npos);
  REQUIRE(m.find("at least 2") != std::string::npos);
  m = message([&] { choose_weight_store(layers, 500, weight_placement::automatic); });
  REQUIRE(m.find("holds 0 slot") != std::string::npos);
  // resident asked, over the budget
  m = message([&] { choose_weight_store(layers, 9999, weight_placement::device); });
  REQUIRE(m.find("10000 bytes") != std::string::npos);
  REQUIRE(m.find("weights host or auto") != std::string::npos);
  // depths: below 2, or more than the budget holds
  REQUIRE_THROWS_AS(choose_weight_store(layers, 0, weight_placement::host, 1), sdnn::error);
  m = message([&] { choose_weight_store(layers, 3500, weight_placement::host, 4); });
  REQUIRE(m.find("4 slots") != std::string::npos);
  REQUIRE_THROWS_AS(choose_weight_store({}, 0, weight_placement::host), sdnn::error);
}

TEST_CASE("weight_store: the CSR estimate", "[weight_store]") {
  // 65536 neurons, 32 connections each, float values and bias: about 16.8 MB per layer, so
  // 1920 layers are about 32 GB
  std::uint64_t const one = csr_layer_bytes(65536, 65536 * 32, 4, 4, 65536);
  REQUIRE(one == 65537ull * 4 + 65536ull * 32 * 8 + 65536ull * 4);
  REQUIRE(one * 1920 > 32ull * 1000 * 1000 * 1000);
  REQUIRE(one * 1920 < 34ull * 1000 * 1000 * 1000);
}
