// Exercise 04_sgd_momentum_step (lesson 02): one step of SGD with momentum and weight decay.
//
// Read first: lessons/02-backprop/README.md, section 3 "Gradient descent, momentum and
// Adam"; nn::sgd_step in nn/optim.cpp is the version training uses.
//
// Plain gradient descent moves each parameter a little against its gradient:
//     param -= lr * grad
// Momentum keeps a running "velocity" per parameter, so steps that agree add up and steps
// that flip sign cancel (a ball rolling downhill rather than a walker who forgets):
//     g           = grad[i] + weight_decay * param[i]     L2 weight decay: pulls toward 0
//     velocity[i] = momentum * velocity[i] + g            momentum in [0, 1), e.g. 0.9
//     param[i]   -= lr * velocity[i]
// Shapes: param (n), grad (n), velocity (n). param and velocity are updated in place and
// carried to the next step (velocity starts at 0 before the first step); grad is read only.
//
// Check your work: `nnlab check` (or `nnlab check --only 04_sgd_momentum_step`).
#include "exercises/04_sgd_momentum_step/sgd_momentum_step.h"

namespace ex {

void sgd_momentum_step(float* param, const float* grad, float* velocity, int64_t n, float lr,
                       float momentum, float weight_decay) {
  // TODO: for each i in [0, n): compute g, update velocity[i], then update param[i].
  (void)param;
  (void)grad;
  (void)velocity;
  (void)n;
  (void)lr;
  (void)momentum;
  (void)weight_decay;
}

}  // namespace ex
