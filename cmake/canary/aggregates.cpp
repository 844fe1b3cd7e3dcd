// Canary: constants that reach memory by other roads (a struct, a std::array, memcpy from
// a table, a loop over a table): not hit by the GCC 12.2 defect, kept so that a
// workaround that only moves the bug to another form of the same code is caught too.
#include <array>
#include <cstring>

#include "common.h"

struct Four {
  double v[4];
};
static const double table[4] = {4, 4, 0, 0};

CANARY_NOINLINE void fill(Four* f) { *f = Four{{6, 6, 0, 0}}; }
CANARY_NOINLINE std::array<double, 4> arr() { return {1, 1, 0, 0}; }
CANARY_NOINLINE std::vector<double> copied() {
  std::vector<double> v(4);
  std::memcpy(v.data(), table, sizeof table);
  return v;
}
CANARY_NOINLINE void looped(double* out, int n) {
  static const double w[8] = {2, 2, 2, 2};
  for (int i = 0; i < n; ++i) out[i] = w[i & 7] * 0.5;
}

int main() {
  int bad = 0;
  Four f;
  fill(&f);
  bad |= canary_expect("struct{double[4]}{6,6,0,0}", std::vector<double>(f.v, f.v + 4), "6 6 0 0");
  const auto a = arr();
  bad |= canary_expect("array<double,4>{1,1,0,0}", std::vector<double>(a.begin(), a.end()), "1 1 0 0");
  bad |= canary_expect("memcpy of {4,4,0,0}", copied(), "4 4 0 0");
  double out[16];
  looped(out, 16);
  bad |= canary_expect("loop over {2,2,2,2,0,0,0,0}", std::vector<double>(out, out + 16), "1 1 1 1 0 0 0 0 1 1 1 1 0 0 0 0");
  return bad;
}
