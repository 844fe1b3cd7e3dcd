// Exercise 31_ring_allreduce_step (lesson 14): one step of the ring's reduce-scatter.
//
// Read first: lesson 14's README (lessons/14-distributed/README.md), the part on the ring
// all-reduce; the library's version is kernels/comm.cpp (reduce_scatter_ring).
//
// N ranks each hold a gradient buffer of n floats, and each needs the SUM of all N. Sending
// every buffer to every rank would move (N - 1) n floats per rank. The ring cuts each buffer
// into N chunks and passes chunks round a ring of ranks: at every step each rank sends one
// chunk to its right neighbour and adds the chunk arriving from its left into its own. The
// chunks are staggered (rank r starts with chunk r) so that after N - 1 steps each chunk has
// visited every rank once and rank r holds the finished sum of chunk (r + 1) mod N. Each rank
// has then sent (N - 1) / N of the buffer, whatever N: that is why NCCL uses it.
//
// Check your work: `nnlab check` (or `nnlab check --only 31_ring_allreduce_step`).
#include "exercises/31_ring_allreduce_step/ring_allreduce_step.h"

namespace ex {

int send_chunk(int r, int s, int N) {
  // TODO: (r - s) mod N, in 0 .. N-1 (C++'s % keeps the sign of a negative left side)
  (void)r;
  (void)s;
  (void)N;
  return 0;
}

int recv_chunk(int r, int s, int N) {
  // TODO: (r - s - 1) mod N, in 0 .. N-1
  (void)r;
  (void)s;
  (void)N;
  return 0;
}

void reduce_scatter_step(std::vector<std::vector<float>>& data, int64_t n, int s) {
  // TODO: N = data.size(); for every rank r: left = (r - 1 + N) % N, c = recv_chunk(r, s, N),
  //       add data[left] into data[r] over chunk_of(n, N, c)
  (void)data;
  (void)n;
  (void)s;
}

}  // namespace ex
