// Exercise 32_zero_shard_bounds (lesson 14): the bounds of a ZeRO-1 shard.
//
// Read first: lesson 14's README (lessons/14-distributed/README.md), the part on ZeRO; the
// library's version is kernels::comm::ring_chunk (kernels/comm.cpp) and gpt_shard_optimizer
// (gpt/train.h).
//
// With ZeRO stage 1, each of N ranks keeps AdamW's m and v for one shard of the flat parameter
// buffer only, and updates only those parameters: N times less optimizer memory. The shards are
// the ring all-reduce's chunks, so the reduce-scatter leaves each rank exactly the summed
// gradients it needs. A parameter tensor (a weight matrix at [offset, offset + numel)) may lie
// in one shard, or be cut by a shard boundary: each rank must then update just its part.
//
// Check your work: `nnlab check` (or `nnlab check --only 32_zero_shard_bounds`).
#include "exercises/32_zero_shard_bounds/zero_shard_bounds.h"

namespace ex {

Range shard_bounds(int64_t n, int N, int c) {
  // TODO: base = n / N, extra = n % N; shard c begins after c shards of base floats plus one
  //       extra float for each earlier shard that has one (min(c, extra) of them); it holds
  //       base + 1 floats if c < extra, else base.
  (void)n;
  (void)N;
  (void)c;
  return {0, 0};
}

Range shard_intersect(Range shard, int64_t offset, int64_t numel) {
  // TODO: the larger of the two begins and the smaller of the two ends; {0, 0} when empty.
  (void)shard;
  (void)offset;
  (void)numel;
  return {0, 0};
}

}  // namespace ex
