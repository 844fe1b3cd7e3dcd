// Exercise 36_ternary_quantize (lesson 15): the reference solution.
#include <algorithm>
#include <cmath>

#include "exercises/36_ternary_quantize/ternary.h"

namespace ex {

float ternary_quantize(int8_t* q, const float* w, int n) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += std::fabs(w[i]);
  const float gamma = n > 0 ? static_cast<float>(sum / n) : 0.0f;
  for (int i = 0; i < n; ++i)
    q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(w[i] / (gamma + 1e-5f)), -1.0f, 1.0f));
  return gamma;
}

void ternary_pack(uint8_t* packed, const int8_t* q, int n) {
  for (int b = 0; b < n / 4; ++b) packed[b] = 0;
  for (int i = 0; i < n; ++i) {
    const unsigned code = q[i] == 1 ? 1u : q[i] == -1 ? 2u : 0u;
    packed[i / 4] = static_cast<uint8_t>(packed[i / 4] | (code << (2 * (i % 4))));
  }
}

void ternary_matvec(float* y, const uint8_t* packed, float gamma, const float* x, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const uint8_t* p = packed + static_cast<size_t>(r) * (cols / 4);
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) {
      const unsigned code = (p[c / 4] >> (2 * (c % 4))) & 3u;
      if (code == 1u) s += x[c];
      else if (code == 2u) s -= x[c];
    }
    y[r] = gamma * s;
  }
}

}  // namespace ex
