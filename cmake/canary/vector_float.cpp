// Canary: the same pattern in float, at 4, 8 and 16 lanes (SSE, AVX and AVX-512 widths).
#include "common.h"

CANARY_NOINLINE std::vector<float> four() { return {3, 3, 0, 0}; }
CANARY_NOINLINE std::vector<float> eight() { return {1, 1, 1, 1, 0, 0, 0, 0}; }
CANARY_NOINLINE std::vector<float> sixteen() { return {5, 5, 5, 5, 5, 5, 5, 5, 0, 0, 0, 0, 0, 0, 0, 0}; }

int main() {
  int bad = 0;
  bad |= canary_expect("vector<float>{3,3,0,0}", four(), "3 3 0 0");
  bad |= canary_expect("vector<float>{1,1,1,1,0,0,0,0}", eight(), "1 1 1 1 0 0 0 0");
  bad |= canary_expect("vector<float>{5 x8, 0 x8}", sixteen(), "5 5 5 5 5 5 5 5 0 0 0 0 0 0 0 0");
  return bad;
}
