// io/data_limit.h: how much data one file may bring into memory (IDX datasets, text corpora).
//
// A header is a promise the file makes about its own size: a 1 MB .gz can claim 1 GiB of
// pixels, and each loader turns bytes into something larger (pixels into float32: 4x;
// characters into int32 ids: 4x more). So every loader checks the size a file claims, or
// has, against one cap BEFORE it allocates anything sized from it, and the message says how
// to raise the cap when the data is real:
//
//   NNLAB_MAX_DATA_MB=1024 nnlab lesson02 ...      # accept files of up to 1 GiB of data
//
// The default, 256 MiB, is five times Fashion-MNIST's training images (47 MB) and 230 times
// Tiny Shakespeare (1.1 MB); a loader then holds at most about 5 x 256 MiB = 1.25 GiB.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "nn/numbers.h"

namespace nn {

inline constexpr const char* kMaxDataEnv = "NNLAB_MAX_DATA_MB";
inline constexpr uint64_t kDefaultMaxDataMiB = 256;
// The largest value NNLAB_MAX_DATA_MB takes: 1 TiB (IDX sizes are 32-bit per dimension; a
// cap beyond any machine's memory would make the check mean nothing).
inline constexpr uint64_t kLargestMaxDataMiB = uint64_t{1} << 20;

// The cap in bytes: $NNLAB_MAX_DATA_MB MiB when set (a whole number in [1, 1048576]; any
// other value is an nn::Error naming the variable), else 256 MiB.
inline uint64_t max_data_bytes() {
  const char* env = std::getenv(kMaxDataEnv);
  if (env == nullptr || env[0] == '\0') return kDefaultMaxDataMiB << 20;
  const long long mib = parse_int(env, std::string("environment variable ") + kMaxDataEnv + " (MiB of data a loader accepts)",
                                  1, static_cast<long long>(kLargestMaxDataMiB));
  return static_cast<uint64_t>(mib) << 20;
}

// "256 MiB" / "1.5 MiB": a byte count for a message.
inline std::string mib_text(double bytes) {
  std::ostringstream os;
  const double m = bytes / (1024.0 * 1024.0);
  os.precision(m < 10 ? 3 : 4);
  os << m << " MiB";
  return os.str();
}

// The end of every "too large" message: the cap, and how to raise it to fit `need_bytes`.
inline std::string max_data_hint(double need_bytes) {
  const double need_mib = need_bytes / (1024.0 * 1024.0);
  std::ostringstream os;
  os << "this build's loaders accept at most " << mib_text(static_cast<double>(max_data_bytes()))
     << " per file (" << kMaxDataEnv << "). If the file is right and this machine has the memory (about 5x the data), "
     << "raise the cap, e.g. " << kMaxDataEnv << "=";
  if (need_mib + 1 <= static_cast<double>(kLargestMaxDataMiB)) {
    os << static_cast<uint64_t>(need_mib) + 1;
  } else {
    os << kLargestMaxDataMiB << " (the most it takes)";
  }
  return os.str();
}

}  // namespace nn
