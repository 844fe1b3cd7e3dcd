// Exercise 29_receding_horizon_step (lesson 13): one step of a model-predictive controller's
// optimisation, by hand. You write the bodies in receding_horizon_step.cpp; `nnlab check` runs
// the tests in test.cpp.
#pragma once

namespace ex {

// The model (the tank linearised at its operating point, in deviation variables, or the
// network of lesson 13 in the same place):
//   y(k+1) = a y(k) + b u(k - d)          d: the dead time, in steps
// Now is time t. The controller knows y(t) and the commands already sent, and chooses the
// next H moves m[j] = u(t + j), j = 0 .. H-1 (the horizon).
struct Horizon {
  float a = 0.0f, b = 0.0f;  // the model
  int d = 0;                 // dead time, steps (>= 0)
  int H = 1;                 // horizon, steps (>= 1)
  float lambda = 0.0f;       // weight of the move penalty
  float y0 = 0.0f;           // y(t), the level now
  const float* past = nullptr;  // d values: u(t-d) .. u(t-1), oldest first (in the pipe)
  float u_prev = 0.0f;          // u(t-1), the command now applied (past[d-1] when d > 0)
  const float* ref = nullptr;   // H values: r(t+1) .. r(t+H), the setpoint ahead
};

// The rollout: y[k] = y(t+k+1), k = 0 .. H-1, from y(t) and the inputs u(t-d) .. (past,
// then the moves m). u(t+j) for j >= 0 is m[j]; for j < 0 it is past[d + j].
void rollout(const Horizon& h, const float* m, float* y);

// The cost of the moves and its gradient, grad[j] = dJ / dm[j]:
//   J = sum_{k=1..H} (r(t+k) - y(t+k))^2 + lambda sum_{j=0..H-1} (m[j] - m[j-1])^2,
//   m[-1] = u_prev.
// Computed backwards (the chain rule through the rollout), not by finite differences.
// Returns J; writes grad (H values).
float cost_gradient(const Horizon& h, const float* m, float* grad);

// One projected gradient step, in place: m[j] = clamp(m[j] - step * grad[j], u_min, u_max).
void projected_step(float* m, const float* grad, int H, float step, float u_min, float u_max);

}  // namespace ex
