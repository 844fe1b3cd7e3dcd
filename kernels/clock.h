// kernels/clock.h: the one wall clock every measurement in kernels/ (and lesson 03) reads.
// steady_clock: monotonic, so a clock adjustment mid-run cannot make a time negative.
#pragma once

#include <chrono>

namespace kernels {

// Seconds since an arbitrary fixed point; only differences mean anything.
inline double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

}  // namespace kernels
