// Reference solution of exercise 14_adamw_step (lesson 08). Try it yourself first:
// exercises/14_adamw_step/adamw_step.cpp.
#include "exercises/14_adamw_step/adamw_step.h"

#include <cmath>

namespace ex {

void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                float beta1, float beta2, float eps, float weight_decay, int64_t t) {
  // param, grad, m, v (n): param, m and v updated in place
  // m and v start at 0, so after t steps they hold only (1 - beta^t) of their weight:
  // dividing by that undoes the pull toward 0 of the first steps.
  const float bias1 = 1.0f - std::pow(beta1, static_cast<float>(t));
  const float bias2 = 1.0f - std::pow(beta2, static_cast<float>(t));
  const float step_size = lr / bias1;
  const float sqrt_bias2 = std::sqrt(bias2);
  for (int64_t i = 0; i < n; ++i) {
    // decoupled weight decay: shrink the parameter itself, not its gradient
    param[i] -= lr * weight_decay * param[i];
    const float g = grad[i];
    m[i] = beta1 * m[i] + (1.0f - beta1) * g;      // running mean of gradients
    v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;  // running mean of their squares
    const float denom = std::sqrt(v[i]) / sqrt_bias2 + eps;
    param[i] -= step_size * m[i] / denom;
  }
}

}  // namespace ex
