// Reference solution of exercise 01_neuron_forward (lesson 01). Try it yourself first:
// exercises/01_neuron_forward/neuron_forward.cpp.
#include <cmath>
#include <cstddef>

#include "exercises/01_neuron_forward/neuron_forward.h"

namespace ex {

float neuron_forward(const float* x, const float* w, float b, int n) {
  // x (n), w (n) -> y
  float z = b;  // z = b + sum_i w_i x_i: start from the bias
  for (int i = 0; i < n; ++i) {
    z += w[i] * x[i];
  }
  // sigmoid squashes z into (0, 1). For very negative z, exp(-z) overflows to inf and
  // 1 / (1 + inf) = 0: the right limit, so this form needs no special case.
  return 1.0f / (1.0f + std::exp(-z));
}

void layer_forward(float* out, const float* inp, const float* weight, const float* bias, int B,
                   int C, int OC) {
  // inp (B,C), weight (OC,C), bias (OC), out (B,OC)
  for (int b = 0; b < B; ++b) {
    const float* x = inp + static_cast<std::ptrdiff_t>(b) * C;  // row b of the input
    for (int o = 0; o < OC; ++o) {
      const float* w = weight + static_cast<std::ptrdiff_t>(o) * C;  // neuron o's weights
      out[static_cast<std::ptrdiff_t>(b) * OC + o] = neuron_forward(x, w, bias[o], C);
    }
  }
}

}  // namespace ex
