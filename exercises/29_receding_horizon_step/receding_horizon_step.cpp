// Exercise 29_receding_horizon_step (lesson 13): one receding-horizon step of an MPC.
//
// Read first: lesson 13's README (lessons/13-control/README.md), the part on the MPC; the
// lesson's controller does the same through the learned model's rollout (mpc part).
//
// A model-predictive controller looks H steps ahead: it predicts the level for a candidate
// sequence of pump commands (the rollout), scores the prediction against the setpoint with a
// penalty on moving the pump (the cost), and improves the sequence. It then applies only the
// first command, and at the next sample does it all again from the new measurement (the
// receding horizon). The improvement here is the one the course taught for networks:
// gradient descent, the gradient by the chain rule backwards through the rollout (as
// backprop through time through an RNN), and a projection back onto what the pump can do.
//
// Check your work: `nnlab check` (or `nnlab check --only 29_receding_horizon_step`).
#include "exercises/29_receding_horizon_step/receding_horizon_step.h"

namespace ex {

void rollout(const Horizon& h, const float* m, float* y) {
  // TODO: y_prev = y0; for k = 0 .. H-1: the input reaching the tank now is u(t + k - d):
  //       still in the pipe while k < d (past[d + (k - d)], that is past[k]), else the move
  //       m[k - d]; y[k] = a * y_prev + b * that input; y_prev = y[k].
  (void)h;
  (void)m;
  (void)y;
}

float cost_gradient(const Horizon& h, const float* m, float* grad) {
  // TODO: roll out, J = sum (ref[k] - y[k])^2 + lambda * sum (m[j] - m[j-1])^2 (m[-1] = u_prev).
  //       Backwards: g = dJ/dy(t+k+1) summed over everything after it (start from k = H-1:
  //       g = -2 (ref[k] - y[k]) + a * g_next); the move m[k - d] fed y[k], so it gets b * g.
  //       Then the move penalty's part: 2 lambda (m[j] - m[j-1]) - 2 lambda (m[j+1] - m[j]).
  (void)h;
  (void)m;
  (void)grad;
  return 0.0f;
}

void projected_step(float* m, const float* grad, int H, float step, float u_min, float u_max) {
  // TODO: m[j] -= step * grad[j], then clamp into [u_min, u_max].
  (void)m;
  (void)grad;
  (void)H;
  (void)step;
  (void)u_min;
  (void)u_max;
}

}  // namespace ex
