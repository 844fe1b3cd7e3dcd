// Exercise 30_residual_threshold: the reference solution.
#include "exercises/30_residual_threshold/residual_threshold.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ex {

double threshold_for_rate(const float* r, int n, double rate) {
  std::vector<double> a(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) a[static_cast<size_t>(i)] = std::fabs(static_cast<double>(r[i]));
  std::sort(a.begin(), a.end());
  // at most `allowed` values may lie strictly above the threshold: the one with `allowed`
  // values after it (ties only lower the count above it)
  const int allowed = static_cast<int>(std::floor(rate * n));
  return a[static_cast<size_t>(n - 1 - allowed)];
}

int first_alarm(const float* r, int n, double threshold, int persistence) {
  int run = 0;  // samples in a row above the threshold, ending at t
  for (int t = 0; t < n; ++t) {
    run = std::fabs(static_cast<double>(r[t])) > threshold ? run + 1 : 0;
    if (run >= persistence) return t;
  }
  return -1;
}

}  // namespace ex
