// Canary: std::vector<double> initialised from constants with equal leading values and
// trailing zeros. GCC 12.2 at -O2 with AVX-512 enabled stores {1, 1, 0, 0} as a broadcast of
// the first value: {1, 1, 1, 1} (lesson 07's token C, found on an AMD Zen 5).
#include "common.h"

CANARY_NOINLINE std::vector<double> four() { const std::vector<double> v = {1, 1, 0, 0}; return v; }
CANARY_NOINLINE std::vector<double> three_of_four() { return {2, 2, 2, 0}; }
CANARY_NOINLINE std::vector<double> eight() { return {1, 1, 0, 0, 0, 0, 0, 0}; }

// The shape of the code that was hit: several constant vectors side by side, copied on.
CANARY_NOINLINE std::vector<double> tokens() {
  const std::vector<double> a = {1, 0, 1, 0}, b = {0, 1, 0, 1}, c = {1, 1, 0, 0};
  std::vector<double> x;
  for (const auto* t : {&a, &b, &c}) x.insert(x.end(), t->begin(), t->end());
  return x;
}

int main() {
  int bad = 0;
  bad |= canary_expect("vector<double>{1,1,0,0}", four(), "1 1 0 0");
  bad |= canary_expect("vector<double>{2,2,2,0}", three_of_four(), "2 2 2 0");
  bad |= canary_expect("vector<double>{1,1,0,0,0,0,0,0}", eight(), "1 1 0 0 0 0 0 0");
  bad |= canary_expect("three token vectors", tokens(), "1 0 1 0 0 1 0 1 1 1 0 0");
  return bad;
}
