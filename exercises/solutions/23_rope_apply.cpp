// Reference solution of exercise 23_rope_apply (lesson 11). Try it yourself first:
// exercises/23_rope_apply/rope_apply.cpp.
#include <cmath>
#include <cstddef>

#include "exercises/23_rope_apply/rope_apply.h"

namespace ex {

void rope_apply(float* x, int T, int NH, int hs, int pos0, double theta) {
  const int half = hs / 2;
  for (int t = 0; t < T; ++t) {
    const double p = pos0 + t;
    for (int i = 0; i < half; ++i) {
      const double a = p * std::pow(theta, -2.0 * i / hs);
      const auto c = static_cast<float>(std::cos(a)), s = static_cast<float>(std::sin(a));
      for (int h = 0; h < NH; ++h) {
        float* head = x + (static_cast<std::ptrdiff_t>(t) * NH + h) * hs;
        const float x0 = head[i], x1 = head[i + half];  // both read before either is written
        head[i] = x0 * c - x1 * s;
        head[i + half] = x1 * c + x0 * s;
      }
    }
  }
}

}  // namespace ex
