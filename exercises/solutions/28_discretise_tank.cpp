// Reference solution of exercise 28_discretise_tank (lesson 13). Try it yourself first:
// exercises/28_discretise_tank/discretise_tank.cpp.
#include <algorithm>
#include <cmath>

#include "exercises/28_discretise_tank/discretise_tank.h"

namespace ex {

namespace {

// The Euler step without the limits: h + dt / A (g u - k sqrt(h) - d).
double unclamped_step(const TankParams& p, double level, double u, double drain) {
  const double q_out = p.outflow_coeff * std::sqrt(level) + drain;
  return level + p.dt / p.area * (p.pump_gain * u - q_out);
}

}  // namespace

double tank_euler_step(const TankParams& p, double level, double u, double drain) {
  return std::clamp(unclamped_step(p, level, u, drain), 0.0, p.max_level);
}

LinearTank tank_linearise(const TankParams& p, double h0, double u0, double drain0) {
  LinearTank m;
  // d/dh [h - dt/A k sqrt(h)] = 1 - dt k / (2 A sqrt(h))
  m.a = 1.0 - p.dt * p.outflow_coeff / (2.0 * p.area * std::sqrt(h0));
  // d/du [dt/A g u] = dt g / A
  m.b = p.dt * p.pump_gain / p.area;
  // the line through (h0, u0, f(h0, u0))
  m.c = unclamped_step(p, h0, u0, drain0) - m.a * h0 - m.b * u0;
  return m;
}

}  // namespace ex
