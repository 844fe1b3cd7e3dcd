// Exercise 32_zero_shard_bounds: the reference solution.
#include "exercises/32_zero_shard_bounds/zero_shard_bounds.h"

#include <algorithm>

namespace ex {

Range shard_bounds(int64_t n, int N, int c) {
  const int64_t base = n / N, extra = n % N;
  const int64_t begin = c * base + std::min<int64_t>(c, extra);  // the earlier shards' extra floats
  return {begin, begin + base + (c < extra ? 1 : 0)};
}

Range shard_intersect(Range shard, int64_t offset, int64_t numel) {
  const int64_t begin = std::max(shard.begin, offset);
  const int64_t end = std::min(shard.end, offset + numel);
  if (begin >= end) return {0, 0};
  return {begin, end};
}

}  // namespace ex
