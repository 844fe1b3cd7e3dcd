// nn/rng.h: a seeded, deterministic random number generator.
//
// Same seed, same numbers, on every platform and compiler. That is why this is not
// std::mt19937 + std::normal_distribution: the distributions of the standard library
// are allowed to differ between implementations, so a run on macOS would not repeat a
// run on Linux.
//
// The generator is PCG32 (O'Neill, "PCG: A Family of Simple Fast Space-Efficient
// Statistically Good Algorithms for Random Number Generation", 2014): a 64-bit linear
// congruential state, and an output permutation (xorshift, then a random rotation)
// that hides the LCG's weak low bits.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <span>
#include <utility>

#include "kernels/splitmix.h"

namespace nn {

// SplitMix64 as a counter-based hash: output number i of the generator started at `seed`
// (kernels/splitmix.h, the one definition).
using kernels::splitmix64;

class Rng {
 public:
  explicit Rng(uint64_t seed = 1337) { reseed(seed); }

  void reseed(uint64_t seed) {
    state_ = 0;
    next_u32();
    state_ += seed;
    next_u32();
  }

  // 32 uniformly distributed bits.
  uint32_t next_u32() {
    const uint64_t old = state_;
    state_ = old * 6364136223846793005ULL + kIncrement;
    const auto xorshifted = static_cast<uint32_t>(((old >> 18u) ^ old) >> 27u);
    const auto rot = static_cast<uint32_t>(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((32u - rot) & 31u));
  }

  // Uniform in [0, 1): the top 24 bits fill a float's mantissa exactly.
  float uniform() { return static_cast<float>(next_u32() >> 8) * (1.0f / 16777216.0f); }
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }

  // Normal(mean, std) by Box-Muller: two uniforms -> one normal (the second is dropped,
  // which keeps the generator stateless beyond state_ and easy to reason about).
  float normal(float mean = 0.0f, float std = 1.0f) {
    const double u1 = (static_cast<double>(next_u32()) + 1.0) / 4294967297.0;  // (0, 1]
    const double u2 = static_cast<double>(next_u32()) / 4294967296.0;          // [0, 1)
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    return mean + std * static_cast<float>(z);
  }

  // Uniform integer in [0, n), without modulo bias (Lemire's rejection method).
  uint32_t below(uint32_t n) {
    uint64_t m = static_cast<uint64_t>(next_u32()) * n;
    auto low = static_cast<uint32_t>(m);
    if (low < n) {
      const uint32_t threshold = (0u - n) % n;
      while (low < threshold) {
        m = static_cast<uint64_t>(next_u32()) * n;
        low = static_cast<uint32_t>(m);
      }
    }
    return static_cast<uint32_t>(m >> 32);
  }

  // Fisher-Yates shuffle.
  template <typename T>
  void shuffle(std::span<T> items) {
    for (size_t i = items.size(); i > 1; --i) {
      const size_t j = below(static_cast<uint32_t>(i));
      std::swap(items[i - 1], items[j]);
    }
  }

 private:
  static constexpr uint64_t kIncrement = 1442695040888963407ULL;  // any odd constant
  uint64_t state_ = 0;
};

}  // namespace nn
