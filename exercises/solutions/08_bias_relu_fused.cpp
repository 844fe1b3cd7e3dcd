// Reference solution of exercise 08_bias_relu_fused (lesson 03). Try it yourself first:
// exercises/08_bias_relu_fused/bias_relu_fused.cpp.
#include "exercises/08_bias_relu_fused/bias_relu_fused.h"

#include <cstddef>

namespace ex {

void bias_relu(float* out, const float* inp, const float* bias, int B, int OC) {
  // inp (B,OC), bias (OC) -> out (B,OC), assigned; out may alias inp
  using std::ptrdiff_t;
  for (int b = 0; b < B; ++b) {
    const float* x = inp + static_cast<ptrdiff_t>(b) * OC;  // (OC,) : row b of inp
    float* y = out + static_cast<ptrdiff_t>(b) * OC;        // (OC,) : row b of out
    for (int o = 0; o < OC; ++o) {
      // Load once, add and clamp in a register, store once: 2 floats of traffic, not 4.
      // In place (y == x) is safe: x[o] is read before y[o] is written, and nothing else
      // reads x[o] later.
      const float v = x[o] + bias[o];
      y[o] = v > 0.0f ? v : 0.0f;
    }
  }
}

}  // namespace ex
