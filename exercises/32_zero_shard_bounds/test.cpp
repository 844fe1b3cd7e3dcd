// Tests of exercise 32_zero_shard_bounds. Shard bounds by hand (n = 10 on 4 ranks, n < N), then
// for many (n, N): consecutive, covering [0, n) once, sizes n / N + 1 for the first n % N; the
// intersection against an element-by-element count, for tensors inside, across and outside a
// shard, with the usual mistakes named.
#include <catch2/catch.hpp>

#include <cstdint>
#include <sstream>
#include <string>

#include "exercises/32_zero_shard_bounds/zero_shard_bounds.h"

namespace {

std::string str(ex::Range r) {
  std::ostringstream os;  // (not string +: GCC 12 warns falsely about its inlined memcpy)
  os << "[" << r.begin << ", " << r.end << ")";
  return os.str();
}

}  // namespace

TEST_CASE("shard_bounds: by hand, n = 10 on 4 ranks and n = 2 on 4", "[ex32]") {
  // 10 = 3 + 3 + 2 + 2: the first 10 % 4 = 2 shards one longer
  const ex::Range want[4] = {{0, 3}, {3, 6}, {6, 8}, {8, 10}};
  for (int c = 0; c < 4; ++c) {
    const ex::Range got = ex::shard_bounds(10, 4, c);
    INFO("shard " << c << " of 10 floats on 4 ranks: got " << str(got) << ", want " << str(want[c]));
    if (c == 3 && got.begin == 9 && got.end == 12) FAIL("Likely cause: the LAST shards got the extra floats; the first n % N do");
    CHECK(got.begin == want[c].begin);
    CHECK(got.end == want[c].end);
  }
  // 2 floats on 4 ranks: two shards of one, two empty ones at the end
  const ex::Range small[4] = {{0, 1}, {1, 2}, {2, 2}, {2, 2}};
  for (int c = 0; c < 4; ++c) {
    const ex::Range got = ex::shard_bounds(2, 4, c);
    INFO("shard " << c << " of 2 floats on 4 ranks: got " << str(got) << ", want " << str(small[c]));
    CHECK(got.begin == small[c].begin);
    CHECK(got.end == small[c].end);
  }
}

TEST_CASE("shard_bounds: consecutive, covering every float once, sizes differing by at most one", "[ex32]") {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{97}, int64_t{124439808}}) {
    for (int N : {1, 2, 3, 8, 13}) {
      int64_t next = 0;
      for (int c = 0; c < N; ++c) {
        const ex::Range r = ex::shard_bounds(n, N, c);
        const int64_t want_size = n / N + (c < n % N ? 1 : 0);
        INFO("n = " << n << ", N = " << N << ", shard " << c << ": got " << str(r) << ", it should start at " << next
                    << " and hold " << want_size);
        CHECK(r.begin == next);
        CHECK(r.end - r.begin == want_size);
        next = r.end;
      }
      INFO("n = " << n << ", N = " << N << ": the shards end at " << next);
      CHECK(next == n);
    }
  }
}

TEST_CASE("shard_intersect: the part of a tensor in a shard, element by element", "[ex32]") {
  const ex::Range shard{100, 200};
  // (offset, numel): inside, across the start, across the end, covering it, touching, outside
  const int64_t tensors[][2] = {{120, 30}, {90, 20}, {180, 50}, {50, 300}, {200, 10}, {90, 10},
                                {0, 5},    {250, 3}, {100, 100}, {199, 1}, {99, 1}};
  for (const auto& t : tensors) {
    const int64_t offset = t[0], numel = t[1];
    int64_t count = 0, first = -1, last = -1;
    for (int64_t i = offset; i < offset + numel; ++i) {
      if (i >= shard.begin && i < shard.end) {
        if (first < 0) first = i;
        last = i;
        ++count;
      }
    }
    const ex::Range want = count > 0 ? ex::Range{first, last + 1} : ex::Range{0, 0};
    const ex::Range got = ex::shard_intersect(shard, offset, numel);
    INFO("shard " << str(shard) << ", tensor [" << offset << ", " << offset + numel << "): got " << str(got) << ", want "
                  << str(want));
    if (count > 0 && got.end > got.begin && got.begin == first - offset && got.end == last + 1 - offset) FAIL("Likely cause: returned offsets into the tensor; the range is of the FLAT buffer");
    if (count == 0 && got.end < got.begin) FAIL("Likely cause: no overlap gave end < begin; return {0, 0}");
    CHECK(got.begin == want.begin);
    CHECK(got.end == want.end);
  }
}
