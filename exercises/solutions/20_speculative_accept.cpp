// Reference solution of exercise 20_speculative_accept (lesson 10). Try it yourself first:
// exercises/20_speculative_accept/speculative_accept.cpp.
#include "exercises/20_speculative_accept/speculative_accept.h"

#include <algorithm>

namespace ex {

int32_t speculative_accept(const float* p, const float* q, int V, int32_t x, float u_accept, float u_resample,
                           bool* accepted) {
  // p, q (V), x drawn from q -> the emitted token, distributed as p
  // 1. accept with probability min(1, p[x] / q[x])
  if (u_accept < p[x] / q[x]) {
    *accepted = true;
    return x;
  }

  // 2. reject: the residual max(0, p - q), the mass the draft under-proposes, and its total Z
  double Z = 0.0;
  for (int y = 0; y < V; ++y) Z += std::max(0.0f, p[y] - q[y]);
  if (!(Z > 0.0)) {  // only rounding gets here (p and q agree): nothing to resample from
    *accepted = true;
    return x;
  }
  *accepted = false;

  // 3. inverse CDF: the first id whose running residual sum passes u * Z
  const double target = static_cast<double>(u_resample) * Z;
  double sum = 0.0;
  int32_t last = x;  // the last id with a positive residual, for a walk that rounding runs off the end
  for (int y = 0; y < V; ++y) {
    const float r = std::max(0.0f, p[y] - q[y]);
    if (r > 0.0f) {
      sum += r;
      last = y;
      if (target < sum) return y;
    }
  }
  return last;
}

}  // namespace ex
