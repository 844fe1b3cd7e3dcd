// Exercise 31_ring_allreduce_step: the reference solution.
#include "exercises/31_ring_allreduce_step/ring_allreduce_step.h"

#include <cstddef>

namespace ex {

namespace {
int mod(int a, int N) { return ((a % N) + N) % N; }  // in 0 .. N-1 for any sign of a
}  // namespace

int send_chunk(int r, int s, int N) { return mod(r - s, N); }

int recv_chunk(int r, int s, int N) { return mod(r - s - 1, N); }

void reduce_scatter_step(std::vector<std::vector<float>>& data, int64_t n, int s) {
  const int N = static_cast<int>(data.size());
  // Rank r changes chunk (r - s - 1), and its right neighbour reads rank r's chunk (r - s): no
  // rank reads a chunk another rank changes in the same step, so the order of r does not matter.
  for (int r = 0; r < N; ++r) {
    const int left = mod(r - 1, N);
    const Chunk c = chunk_of(n, N, recv_chunk(r, s, N));
    for (int64_t i = c.begin; i < c.end; ++i) {
      data[static_cast<size_t>(r)][static_cast<size_t>(i)] += data[static_cast<size_t>(left)][static_cast<size_t>(i)];
    }
  }
}

}  // namespace ex
