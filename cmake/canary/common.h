// cmake/canary/common.h: what every compiler canary shares (see cmake/NnlabCompilerCanary.cmake).
//
// Each canary builds values from constants inside functions the optimiser may not look
// through (noinline), then compares them with the expected values parsed from text at run
// time. A correct compiler prints nothing and
// returns 0; a miscompiling one prints what it produced and returns 1.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <vector>

#define CANARY_NOINLINE __attribute__((noinline))

// `want` is text ("1 1 0 0"), parsed at run time: the expected values never pass through
// the constant folding and vectorising that the canary checks.
template <typename T>
int canary_expect(const char* what, const std::vector<T>& got, const char* want) {
  std::vector<double> expected;
  for (const char* p = want; *p != '\0';) {
    char* end = nullptr;
    expected.push_back(std::strtod(p, &end));
    if (end == p) break;
    p = end;
  }
#ifdef NNLAB_CANARY_SELF_TEST
  // tests/canary_selftest.cmake: play a miscompiling compiler (the last value comes out
  // wrong), to check that the canary machinery notices one.
  std::vector<T> corrupted = got;
  if (!corrupted.empty()) corrupted.back() = static_cast<T>(corrupted.back() + 1);
  const std::vector<T>& seen = corrupted;
#else
  const std::vector<T>& seen = got;
#endif
  int bad = seen.size() != expected.size();
  for (std::size_t i = 0; i < seen.size() && i < expected.size(); ++i)
    if (static_cast<double>(seen[i]) != expected[i]) bad = 1;
  if (bad) {
    std::printf("%s: got {", what);
    for (std::size_t j = 0; j < seen.size(); ++j) std::printf(j ? ", %g" : "%g", static_cast<double>(seen[j]));
    std::printf("}, expected {%s}\n", want);
  }
  return bad;
}
