// tests/test_util.h: small helpers the tests share.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <optional>
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

// Sets (or with nullopt, unsets) an environment variable, and restores it at scope end.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    set(value);
  }
  ~ScopedEnv() { set(old_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void set(const std::optional<std::string>& value) {
#ifdef _WIN32
    _putenv_s(name_.c_str(), value ? value->c_str() : "");
#else
    if (value) {
      setenv(name_.c_str(), value->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
#endif
  }
  std::string name_;
  std::optional<std::string> old_;
};

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

// The version numbers a kernel header lists, in the order listed: lines of the form
// "//   v3  what it changes ..." (house style: one line per version). The tests compare
// them with the versions table, so the comment cannot drift from the code.
inline std::vector<int> listed_versions(const std::string& header) {
  std::vector<int> out;
  std::istringstream lines(header);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("//", 0) != 0) continue;
    const size_t v = line.find_first_not_of(' ', 2);
    if (v == std::string::npos || v == 2 || line[v] != 'v') continue;
    size_t end = v + 1;
    while (end < line.size() && line[end] >= '0' && line[end] <= '9') ++end;
    if (end == v + 1 || end + 1 >= line.size() || line[end] != ' ' || line[end + 1] != ' ') continue;
    out.push_back(std::stoi(line.substr(v + 1, end - v - 1)));
  }
  return out;
}

}  // namespace testing
