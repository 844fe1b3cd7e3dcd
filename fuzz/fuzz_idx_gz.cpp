// fuzz/fuzz_idx_gz.cpp: nn::read_idx on a file named *.gz with arbitrary bytes.
//
// The path a downloaded dataset takes: gzip members (one or several, as `cat a.gz b.gz`
// makes), zlib's errors, truncation, trailing bytes, the cap on the decompressed size, and
// then the IDX header. Needs a build with zlib (the default on Debian).
#include <cstdint>

#include "fuzz/fuzz_util.h"
#include "nn/check.h"
#include "io/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("input-idx3-ubyte.gz", fuzz::as_text(data, size));
  try {
    nn::read_idx(path);
  } catch (const nn::Error&) {
  }
  return 0;
}
