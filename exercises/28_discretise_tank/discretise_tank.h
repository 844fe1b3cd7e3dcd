// Exercise 28_discretise_tank (lesson 13): the tank of lessons 05-06 as a controller sees it, one
// sample at a time: one explicit-Euler step of its differential equation, and the straight-line
// (linear) model of that step at an operating point. You write the bodies in discretise_tank.cpp;
// `nnlab check` runs the tests in test.cpp.
#pragma once

namespace ex {

// The tank's constants (lessons/common/plant.h, TankConfig): area A (m^2), pump gain g (m^3/s at
// full command), outlet coefficient k (m^2.5/s: the outlet passes k sqrt(h)), sample period dt (s),
// the brim max_level (m).
struct TankParams {
  double area = 1.0;
  double pump_gain = 0.0375;
  double outflow_coeff = 0.03;
  double dt = 1.0;
  double max_level = 1.5;
};

// The tank's differential equation (mass balance, Torricelli's outlet):
//   A dh/dt = g u - k sqrt(h) - d          u: the pump command reaching the tank, d: the drain
// One explicit-Euler step of length dt, then the physical limits (the tank cannot hold less
// than nothing nor more than its brim):
//   h(t+1) = clamp(h + dt / A (g u - k sqrt(h) - d), 0, max_level)
double tank_euler_step(const TankParams& p, double level, double u, double drain);

// The linear model of that step around an operating point (h0, u0, drain d0), h0 > 0:
//   h(t+1) ~ a h(t) + b u(t) + c
//   a = d h(t+1) / d h = 1 - dt k / (2 A sqrt(h0))      (the slope of sqrt is 1 / (2 sqrt))
//   b = d h(t+1) / d u = dt g / A
//   c = f(h0, u0) - a h0 - b u0                          (so the line passes through the point)
// with f the step above without the clamp. At an equilibrium (f(h0, u0) = h0) this is the model
// a PI tuning rule or an MPC's predictor uses: y(t+1) = a y(t) + b u(t - dead_time) + c.
struct LinearTank {
  double a = 0.0, b = 0.0, c = 0.0;
};
LinearTank tank_linearise(const TankParams& p, double h0, double u0, double drain0);

}  // namespace ex
