// Exercise 14_adamw_step (lesson 08): one step of AdamW, the optimizer a GPT trains with.
// You write the body in adamw_step.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

#include <cstdint>

namespace ex {

// For each of the n parameters, in place, at the 1-based step t (PyTorch's torch.optim.AdamW):
//   param -= lr * weight_decay * param                      decoupled weight decay
//   m      = beta1 * m + (1 - beta1) * grad                 first moment
//   v      = beta2 * v + (1 - beta2) * grad^2               second moment
//   param -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// param (n), m (n), v (n) are updated (m and v start at 0 before step 1); grad (n) is read only.
void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                float beta1, float beta2, float eps, float weight_decay, int64_t t);

}  // namespace ex
