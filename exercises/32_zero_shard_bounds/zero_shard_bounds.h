// Exercise 32_zero_shard_bounds (lesson 14): which parameters a rank owns under ZeRO-1, and
// which part of one parameter tensor that is. You write the bodies in zero_shard_bounds.cpp;
// `nnlab check` runs the tests in test.cpp.
#pragma once

#include <cstdint>

namespace ex {

// A range of the flat parameter buffer: [begin, end), empty when begin == end.
struct Range {
  int64_t begin = 0, end = 0;
};

// Shard c of n floats cut into N shards (0 <= c < N, N >= 1, n >= 0): consecutive, in order,
// covering [0, n) once; the first n % N shards hold n / N + 1 floats, the others n / N
// (so when n < N the last N - n shards are empty). The library's kernels::comm::ring_chunk.
Range shard_bounds(int64_t n, int N, int c);

// The part of a parameter tensor that lies in `shard`: the tensor is [offset, offset + numel)
// of the flat buffer (numel >= 1). Returns the intersection as a range of the FLAT buffer;
// when they do not overlap, the empty range {0, 0}.
Range shard_intersect(Range shard, int64_t offset, int64_t numel);

}  // namespace ex
