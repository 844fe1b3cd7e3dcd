// Reference solution of exercise 29_receding_horizon_step (lesson 13). Try it yourself first:
// exercises/29_receding_horizon_step/receding_horizon_step.cpp.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "exercises/29_receding_horizon_step/receding_horizon_step.h"

namespace ex {

namespace {

// u(t + j): the pipe's content for j < 0, the moves from j = 0 on.
float input_at(const Horizon& h, const float* m, int j) { return j < 0 ? h.past[h.d + j] : m[j]; }

}  // namespace

void rollout(const Horizon& h, const float* m, float* y) {
  float y_prev = h.y0;
  for (int k = 0; k < h.H; ++k) {
    y[k] = h.a * y_prev + h.b * input_at(h, m, k - h.d);  // y(t+k+1) from u(t+k-d)
    y_prev = y[k];
  }
}

float cost_gradient(const Horizon& h, const float* m, float* grad) {
  const auto H = static_cast<size_t>(h.H);
  std::vector<float> y(H);
  rollout(h, m, y.data());
  float J = 0.0f;
  for (size_t k = 0; k < H; ++k) {
    const float e = h.ref[k] - y[k];
    J += e * e;
  }
  for (size_t j = 0; j < H; ++j) {
    const float du = m[j] - (j == 0 ? h.u_prev : m[j - 1]);
    J += h.lambda * du * du;
  }
  // Backwards through the rollout. g holds dJ/dy(t+k+1) counting every later output too:
  // y(t+k+2) = a y(t+k+1) + ..., so the later outputs' sensitivity flows back through a.
  std::fill(grad, grad + H, 0.0f);
  float g = 0.0f;
  for (int k = h.H - 1; k >= 0; --k) {
    g = -2.0f * (h.ref[k] - y[static_cast<size_t>(k)]) + h.a * g;
    const int j = k - h.d;  // the move that reached the tank to make y(t+k+1)
    if (j >= 0) grad[j] += h.b * g;
  }
  // The move penalty: m[j] appears in (m[j] - m[j-1])^2 and in (m[j+1] - m[j])^2.
  for (size_t j = 0; j < H; ++j) {
    const float du = m[j] - (j == 0 ? h.u_prev : m[j - 1]);
    grad[j] += 2.0f * h.lambda * du;
    if (j > 0) grad[j - 1] -= 2.0f * h.lambda * du;
  }
  return J;
}

void projected_step(float* m, const float* grad, int H, float step, float u_min, float u_max) {
  for (int j = 0; j < H; ++j) m[j] = std::clamp(m[j] - step * grad[j], u_min, u_max);
}

}  // namespace ex
