// tests/test_util.h: small helpers the tests share.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "nn/check.h"

namespace testing {

// A fresh directory under the system temp dir, removed with everything in it at scope end.
// The name is unique per run, so tests running in parallel never share files.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
    std::random_device rd;
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    path = std::filesystem::temp_directory_path() /
           ("nnlab-tests-" + tag + "-" + std::to_string(rd()) + "-" + std::to_string(now));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path / name).string(); }
};

// The message of the nn::Error that f throws, or a marker no expected phrase matches.
// (Unlike REQUIRE_THROWS_WITH, this also fails when f throws some other exception type.)
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const nn::Error& e) {
    return e.what();
  }
  return "<no nn::Error was thrown>";
}

// The whole file as text; the file must exist.
inline std::string read_text(const std::string& path) {
  std::ifstream file(path);
  INFO("cannot read " << path);
  REQUIRE(file.is_open());
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// Redirects std::cout into a string for as long as it lives, even if a test throws.
class CaptureCout {
 public:
  CaptureCout() : saved_(std::cout.rdbuf(buffer_.rdbuf())) {}
  ~CaptureCout() { std::cout.rdbuf(saved_); }
  CaptureCout(const CaptureCout&) = delete;
  CaptureCout& operator=(const CaptureCout&) = delete;
  std::string text() const { return buffer_.str(); }

 private:
  std::ostringstream buffer_;  // declared first: constructed before saved_ points cout at it
  std::streambuf* saved_;
};

}  // namespace testing
