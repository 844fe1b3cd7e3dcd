// Exercise 34_smoothing_factors (lesson 15): the reference solution.
#include <cmath>

#include "exercises/34_smoothing_factors/smoothing.h"

namespace ex {

void smoothing_factors(float* s, const float* x_max, const float* w_max, int K, float alpha) {
  for (int j = 0; j < K; ++j) {
    if (!(x_max[j] > 0.0f) || !(w_max[j] > 0.0f)) {
      s[j] = 1.0f;
      continue;
    }
    s[j] = std::pow(x_max[j], alpha) / std::pow(w_max[j], 1.0f - alpha);
  }
}

void apply_smoothing(float* x, int T, float* w, int N, const float* s, int K) {
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < K; ++j) x[t * K + j] /= s[j];
  for (int n = 0; n < N; ++n)
    for (int j = 0; j < K; ++j) w[n * K + j] *= s[j];
}

}  // namespace ex
