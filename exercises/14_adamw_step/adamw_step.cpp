// Exercise 14_adamw_step (lesson 08): one step of AdamW over a buffer.
//
// Read first: lesson 08's README (lessons/08-*/README.md), the part on the optimizer;
// nn::adam_step in nn/optim.cpp is Adam as lessons 02-06 use it.
//
// Adam keeps two running means per parameter: m of the gradients (which way to go) and v of
// their squares (how large and noisy they are). Dividing m by sqrt(v) gives every parameter
// a step of about lr, whatever the scale of its gradient. Both start at 0, so early on they
// are too small: dividing by 1 - beta^t (the "bias correction") undoes that.
//
// AdamW (Loshchilov & Hutter, 2019) changes one thing: the weight decay. Adam with L2 adds
// weight_decay * param to the gradient, where the division by sqrt(v) then shrinks it for
// parameters with large gradients. AdamW instead shrinks the parameter directly, before and
// apart from the Adam step ("decoupled"), so every parameter decays at the same rate:
//     param -= lr * weight_decay * param
//     m      = beta1 * m + (1 - beta1) * g
//     v      = beta2 * v + (1 - beta2) * g^2
//     param -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// This is PyTorch's torch.optim.AdamW formula, in that order (the decay uses the parameter
// before this step's update). t is the step number, starting at 1. eps keeps the division
// finite where v is 0.
//
// Shapes: param (n), grad (n), m (n), v (n). param, m and v are updated in place and carried
// to the next step; grad is read only.
//
// Check your work: `nnlab check` (or `nnlab check --only 14_adamw_step`).
#include "exercises/14_adamw_step/adamw_step.h"

namespace ex {

void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                float beta1, float beta2, float eps, float weight_decay, int64_t t) {
  // TODO: 1. bias1 = 1 - beta1^t and bias2 = 1 - beta2^t (std::pow, include <cmath>), once
  //       2. for each i in [0, n): decay param[i], update m[i] and v[i], then take the step
  (void)param;
  (void)grad;
  (void)m;
  (void)v;
  (void)n;
  (void)lr;
  (void)beta1;
  (void)beta2;
  (void)eps;
  (void)weight_decay;
  (void)t;
}

}  // namespace ex
