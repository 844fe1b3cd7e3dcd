// Reference solution of exercise 04_sgd_momentum_step (lesson 02). Try it yourself first:
// exercises/04_sgd_momentum_step/sgd_momentum_step.cpp.
#include "exercises/04_sgd_momentum_step/sgd_momentum_step.h"

namespace ex {

void sgd_momentum_step(float* param, const float* grad, float* velocity, int64_t n, float lr,
                       float momentum, float weight_decay) {
  // param (n), grad (n), velocity (n): param and velocity updated in place
  for (int64_t i = 0; i < n; ++i) {
    // Weight decay is the gradient of (weight_decay / 2) * param^2, added to the loss's.
    // It uses the parameter before this step's update.
    const float g = grad[i] + weight_decay * param[i];
    velocity[i] = momentum * velocity[i] + g;  // v = mu v + g: a decaying sum of past g
    param[i] -= lr * velocity[i];
  }
}

}  // namespace ex
