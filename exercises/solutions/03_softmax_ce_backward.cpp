// Reference solution of exercise 03_softmax_ce_backward (lesson 02). Try it yourself first:
// exercises/03_softmax_ce_backward/softmax_ce_backward.cpp.
#include "exercises/03_softmax_ce_backward/softmax_ce_backward.h"

#include <cmath>
#include <cstddef>
#include <limits>

namespace ex {

void softmax_ce_backward(float* dlogits, const float* logits, const int32_t* targets, int B,
                         int V) {
  // logits (B,V), targets (B) -> dlogits (B,V), assigned
  const float inv_B = 1.0f / static_cast<float>(B);  // the loss is a mean over the batch
  for (int b = 0; b < B; ++b) {
    const float* x = logits + static_cast<std::ptrdiff_t>(b) * V;
    float* dx = dlogits + static_cast<std::ptrdiff_t>(b) * V;

    // m = max_v x_v, so that every exp() argument below is <= 0 and cannot overflow.
    // Starting at -infinity (not some "very negative" constant) is right for any input.
    float m = -std::numeric_limits<float>::infinity();
    for (int v = 0; v < V; ++v) {
      m = x[v] > m ? x[v] : m;
    }
    // sum = sum_v exp(x_v - m); the largest term is exp(0) = 1, so sum >= 1: no 0 / 0.
    float sum = 0.0f;
    for (int v = 0; v < V; ++v) {
      sum += std::exp(x[v] - m);
    }
    // dL/dx_v = (p_v - [v == t]) / B, with p_v = exp(x_v - m) / sum.
    for (int v = 0; v < V; ++v) {
      const float p = std::exp(x[v] - m) / sum;
      const float indicator = v == targets[b] ? 1.0f : 0.0f;
      dx[v] = (p - indicator) * inv_B;
    }
  }
}

}  // namespace ex
