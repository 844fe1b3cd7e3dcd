// kernels/parallel.h: the thresholds and scratch the OpenMP rungs of the GPT training ops
// share (kernels/attention.cpp, layernorm.cpp, gelu.cpp, ...).
//
// Determinism: every output element of every rung is computed by ONE thread in an order
// that does not depend on the thread count: row-wise ops split rows (or heads), sums over
// rows into a parameter gradient are split into FIXED chunks whose partials are added in
// chunk order, or split by columns with each column summed in row order. No `reduction`
// clause and no atomics anywhere: those make the order depend on the team.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kernels {

// Below this many elements an element-wise op runs on one thread: waking the team costs a
// few microseconds, about what 16K floats cost to stream on one core.
inline constexpr int64_t kMinParallelElems = 16384;
// Rows per partial sum of a parameter gradient (layernorm dweight/dbias): fixed, so the
// partials, and the order they are added in, are the same for every thread count.
inline constexpr int kRowChunk = 32;
// Elements per double partial of sum_squares (same reason).
inline constexpr int64_t kSumChunk = 16384;

// Grow-only scratch of the calling thread: slot k is one buffer (a rung that needs two
// asks for two slots). Kept between calls, so a training step allocates nothing.
template <class T, int Slot>
T* thread_scratch(size_t n) {
  static thread_local std::vector<T> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

}  // namespace kernels
