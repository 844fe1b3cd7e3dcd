// Canary: the same pattern in integers (indices, shapes, token ids): int32 and int64.
#include <cstdint>

#include "common.h"

CANARY_NOINLINE std::vector<std::int32_t> ints() { return {7, 7, 7, 7, 0, 0, 0, 0}; }
CANARY_NOINLINE std::vector<std::int64_t> longs() { return {9, 9, 0, 0}; }

int main() {
  int bad = 0;
  bad |= canary_expect("vector<int32>{7 x4, 0 x4}", ints(), "7 7 7 7 0 0 0 0");
  bad |= canary_expect("vector<int64>{9,9,0,0}", longs(), "9 9 0 0");
  return bad;
}
