// fuzz/fuzz_util.h: what every fuzzer here shares.
//
// A libFuzzer target is one function, LLVMFuzzerTestOneInput(data, size), called millions
// of times with mutated inputs. The loaders under test take a PATH (they read files), so a
// harness writes the input to a file in a private temporary directory first. The rule each
// harness checks: a loader ends in a value or in nn::Error. Anything else is a finding:
//   - a crash, an out-of-bounds read or write, undefined behaviour (ASan, UBSan),
//   - any other exception (std::invalid_argument from std::stoi, std::out_of_range, ...):
//     it escapes, libFuzzer reports "deadly signal" (std::terminate), and the input is saved,
//   - an allocation over -malloc_limit_mb (scripts/fuzz.sh sets it): a small file that
//     makes the loader allocate gigabytes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include <unistd.h>

namespace fuzz {

// A directory of this process, made once (mkdtemp under $TMPDIR, else /tmp). scripts/fuzz.sh
// points TMPDIR at a folder of its own and removes it afterwards.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && base[0] != '\0' ? base : "/tmp") + "/nnlab-fuzz-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::perror("fuzz: mkdtemp");
      std::abort();
    }
    return tmpl;
  }();
  return dir;
}

// Writes `bytes` to <scratch>/<name> (replacing it) and returns the path.
inline std::string write_scratch(const std::string& name, std::string_view bytes) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace fuzz
