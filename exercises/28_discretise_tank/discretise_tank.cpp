// Exercise 28_discretise_tank (lesson 13): discretise the tank, and linearise it.
//
// Read first: lesson 13's README (lessons/13-control/README.md), the part on the plant as a
// controller sees it; the simulator is lessons/common/plant.cpp (simulate_tank, step 6).
//
// A controller runs at a fixed sample period, so it sees the plant as a difference equation:
// the level now gives the level one sample later. Explicit Euler turns A dh/dt = g u - k sqrt(h)
// - d into exactly that. The square root makes the step nonlinear: a linear controller (a PI, a
// linear MPC) is tuned for the straight line that touches it at one operating point, and that
// line is the Taylor expansion of the step to first order: the derivatives below.
//
// Check your work: `nnlab check` (or `nnlab check --only 28_discretise_tank`).
#include "exercises/28_discretise_tank/discretise_tank.h"

namespace ex {

double tank_euler_step(const TankParams& p, double level, double u, double drain) {
  // TODO: q_out = k sqrt(level) + drain; level + dt / A * (g u - q_out), clamped to
  //       [0, max_level].
  (void)p;
  (void)level;
  (void)u;
  (void)drain;
  return 0.0;
}

LinearTank tank_linearise(const TankParams& p, double h0, double u0, double drain0) {
  // TODO: a = 1 - dt k / (2 A sqrt(h0)), b = dt g / A, c = f(h0, u0) - a h0 - b u0, where f
  //       is the Euler step WITHOUT the clamp.
  (void)p;
  (void)h0;
  (void)u0;
  (void)drain0;
  return LinearTank{};
}

}  // namespace ex
