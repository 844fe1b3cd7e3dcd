// Exercise 04_sgd_momentum_step (lesson 02): one step of SGD with momentum and weight decay.
// You write the body in sgd_momentum_step.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

#include <cstdint>

namespace ex {

// For each of the n parameters, in place:
//   g        = grad[i] + weight_decay * param[i]
//   velocity = momentum * velocity[i] + g
//   param   -= lr * velocity
// param (n) and velocity (n) are updated; grad (n) is read only.
void sgd_momentum_step(float* param, const float* grad, float* velocity, int64_t n, float lr,
                       float momentum, float weight_decay);

}  // namespace ex
