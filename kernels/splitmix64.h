// kernels/splitmix64.h: SplitMix64, the one definition every layer uses.
//
// SplitMix64 (Steele, Lea, Flood 2014; Vigna's splitmix64.c): output number i (0-based) of
// the generator whose state starts at `seed`. The state after i + 1 steps is
// seed + (i + 1) * kSplitMix64Gamma (mod 2^64), so any output can be drawn without the
// others: a counter-based hash (dropout masks, per-step batch seeds), and the seeded test
// data of the harness. All arithmetic wraps mod 2^64, so the GPU (it is __device__ too) and
// every CPU give the same bits.
//
// It lives in kernels/, the lowest layer that needs it (the harness's data, the CUDA dropout
// mask); nn/rng.h names it nn::splitmix64 for nn/ and above.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define NNLAB_SPLITMIX64_QUALIFIERS __host__ __device__ inline
#else
#define NNLAB_SPLITMIX64_QUALIFIERS inline
#endif

namespace kernels {

// The step of the state: 2^64 / golden ratio, odd.
inline constexpr uint64_t kSplitMix64Gamma = 0x9E3779B97F4A7C15ull;

NNLAB_SPLITMIX64_QUALIFIERS uint64_t splitmix64(uint64_t seed, uint64_t i = 0) {
  uint64_t z = seed + (i + 1) * kSplitMix64Gamma;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace kernels

#undef NNLAB_SPLITMIX64_QUALIFIERS
