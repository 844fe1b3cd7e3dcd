// fuzz/fuzz_idx.cpp: nn::parse_idx on arbitrary bytes (an uncompressed IDX file in memory).
//
// The header (magic, element type, number of dimensions, big-endian sizes) and the promise
// it makes about the data: the fuzzer tries truncations, trailing bytes, zero and huge sizes,
// products that overflow. A success must hold exactly prod(dims) bytes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "nn/check.h"
#include "io/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> bytes(data, data + size);
  try {
    const nn::IdxArray arr = nn::parse_idx(bytes, "<fuzz input>");
    uint64_t count = 1;
    for (int64_t d : arr.dims) count *= static_cast<uint64_t>(d);
    if (arr.dims.empty() || count != arr.data.size()) {
      std::fprintf(stderr, "fuzz_idx: parse_idx returned %zu bytes for dimensions whose product is %llu\n",
                   arr.data.size(), static_cast<unsigned long long>(count));
      std::abort();
    }
  } catch (const nn::Error&) {
  }
  return 0;
}
