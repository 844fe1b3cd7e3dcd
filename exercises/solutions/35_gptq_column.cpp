// Exercise 35_gptq_column (lesson 15): the reference solution.
#include <algorithm>
#include <cmath>

#include "exercises/35_gptq_column/gptq_column.h"

namespace ex {

void gptq_column(float* W, int rows, int cols, int j, const float* U, const float* scales, int qmax) {
  const float d = U[j * cols + j];
  for (int r = 0; r < rows; ++r) {
    float* w = W + r * cols;
    const float s = scales[r];
    const float level = s > 0.0f ? std::clamp(std::nearbyint(w[j] / s), static_cast<float>(-qmax),
                                              static_cast<float>(qmax))
                                 : 0.0f;
    const float q = s * level;
    const float err = (w[j] - q) / d;
    for (int k = j + 1; k < cols; ++k) w[k] -= err * U[j * cols + k];
    w[j] = q;
  }
}

}  // namespace ex
