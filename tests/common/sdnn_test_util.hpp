// Small helpers shared by the test files: the message of a thrown sdnn::error, a
// substring check, and a scratch directory removed at scope exit.
#pragma once

#include <sdnn/core/error.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <system_error>

namespace sdnn_test {

// The message of the sdnn::error f throws ("no throw" if it does not throw).
template <class F>
std::string error_text(F&& f) {
  try {
    f();
  } catch (sdnn::error const& e) {
    return e.what();
  }
  return "no throw";
}

inline bool has(std::string const& s, std::string const& part) { return s.find(part) != std::string::npos; }

// A fresh directory under the system temp dir, removed at scope exit.
struct temp_dir {
  std::filesystem::path path;

  explicit temp_dir(std::string const& prefix = "sdnn_test_") {
    namespace fs = std::filesystem;
    static std::atomic<unsigned long long> counter{0};
    std::random_device rd;
    // create_directory returns false when the name is already taken: try another.
    for (;;) {
      path = fs::temp_directory_path() /
             (prefix + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "_" +
              std::to_string(rd()) + "_" + std::to_string(counter++));
      if (fs::create_directory(path)) break;
    }
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  temp_dir(temp_dir const&) = delete;
  temp_dir& operator=(temp_dir const&) = delete;

  // The path of name inside the directory.
  std::string file(std::string const& name) const { return (path / name).string(); }
  // Writes text (bytes, verbatim) to name inside the directory; returns its path.
  std::string write(std::string const& name, std::string const& text) const {
    std::ofstream(file(name), std::ios::binary) << text;
    return file(name);
  }
};

}  // namespace sdnn_test
