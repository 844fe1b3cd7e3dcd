// Exercise 31_ring_allreduce_step (lesson 14): one step of the ring all-reduce's first half,
// the reduce-scatter, on N ranks simulated in arrays. You write the bodies in
// ring_allreduce_step.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

#include <cstdint>
#include <vector>

namespace ex {

// Given (not part of the exercise): chunk c of n floats cut into N chunks, [begin, end); the
// first n % N chunks hold one float more. The library's kernels::comm::ring_chunk.
struct Chunk {
  int64_t begin = 0, end = 0;
};
inline Chunk chunk_of(int64_t n, int N, int c) {
  const int64_t base = n / N, extra = n % N;
  const int64_t begin = c * base + (c < extra ? c : extra);
  return {begin, begin + base + (c < extra ? 1 : 0)};
}

// The ring: rank r sends to rank (r + 1) mod N and receives from rank (r - 1 + N) mod N.
// At reduce-scatter step s (0 <= s < N - 1), rank r SENDS its chunk (r - s) mod N and
// RECEIVES chunk (r - s - 1) mod N, which it ADDS into its own copy of that chunk. (Mod as a
// mathematician means it: the result is in 0 .. N-1 even when r - s - 1 is negative.)
int send_chunk(int r, int s, int N);
int recv_chunk(int r, int s, int N);

// Step s of the reduce-scatter on all N = data.size() ranks at once: data[r] is rank r's
// buffer of n floats. Every rank r adds the chunk recv_chunk(r, s, N) of its left neighbour's
// buffer into its own buffer's same chunk; nothing else changes. (All ranks exchange at the
// same moment: a rank sends the values it had BEFORE the step.) After steps 0 .. N-2, rank r
// holds the sum over all ranks of chunk (r + 1) mod N.
void reduce_scatter_step(std::vector<std::vector<float>>& data, int64_t n, int s);

}  // namespace ex
