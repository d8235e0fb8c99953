// Replays every kept fuzz input (tests/fuzz/regressions/<target>/: each input that ever
// crashed a target, plus the malformed inputs of test_malformed_inputs.cpp) and the seed
// corpora (tests/fuzz/corpus/<target>/) through the same target bodies as the libFuzzer
// programs (tests/fuzz/fuzz_targets.hpp), with this compiler and no libFuzzer. Each input must
// be read or refused with an sdnn::error (the targets catch those); anything else escaping, an
// oracle failure included, fails here.
// The fuzz targets themselves (clang, ASan, UBSan) run under the CTest label `fuzz`.
#include "sdnn_catch.hpp"
#include "sdnn_test_util.hpp"

#include "../fuzz/fuzz_targets.hpp"

#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {
fs::path fuzz_dir() { return fs::path(sdnn_test::data_dir()).parent_path() / "fuzz"; }

std::vector<fs::path> files_under(fs::path const& dir) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (auto const& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string replay(sdnn_fuzz::target const& t, fs::path const& file) {
  std::ifstream in(file, std::ios::binary);
  std::vector<char> const bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    t.run(reinterpret_cast<std::uint8_t const*>(bytes.data()), bytes.size());
  } catch (std::exception const& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("every kept fuzz input and every seed is read or refused with an sdnn::error", "[io][fuzz]") {
  std::size_t regressions = 0;
  for (auto const& t : sdnn_fuzz::targets) {
    for (char const* kind : {"regressions", "corpus"}) {
      for (auto const& file : files_under(fuzz_dir() / kind / t.name)) {
        auto const t0 = std::chrono::steady_clock::now();
        std::string const failure = replay(t, file);
        double const seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        INFO(t.name << ": " << file.string() << " (" << seconds << " s)");
        CHECK(failure == "");
        CHECK(seconds < 10);  // libFuzzer's -timeout in run_fuzz.sh
        regressions += kind[0] == 'r';
      }
    }
    // Every target has a seed corpus and a dictionary.
    INFO(t.name);
    CHECK(!files_under(fuzz_dir() / "corpus" / t.name).empty());
    CHECK(fs::is_regular_file(fuzz_dir() / (std::string(t.name) + ".dict")));
    CHECK(fs::is_regular_file(fuzz_dir() / (std::string("fuzz_") + t.name + ".cpp")));
  }
  CHECK(regressions >= 20);
}
