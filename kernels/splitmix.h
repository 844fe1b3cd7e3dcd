// kernels/splitmix.h: SplitMix64 as a counter-based hash, the one definition every layer
// uses (nn/rng.h re-exports it; the dropout masks of kernels/dropout.h draw from it).
#pragma once

#include <cstdint>

namespace kernels {

// SplitMix64 (Steele, Lea, Flood 2014; Vigna's splitmix64.c): output number i (0-based) of
// the generator whose state starts at `seed`. The state after i + 1 steps is
// seed + (i + 1) * golden (mod 2^64), so any output can be drawn without the others: a
// counter-based hash (dropout masks, per-step batch seeds). All arithmetic wraps mod 2^64.
inline uint64_t splitmix64(uint64_t seed, uint64_t i = 0) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace kernels
