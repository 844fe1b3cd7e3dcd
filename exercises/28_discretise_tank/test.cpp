// Tests of exercise 28_discretise_tank. The Euler step against the simulator itself
// (lessons::simulate_tank, noise off, the pump held open-loop: each logged level is the step of
// the one before), limits included; the linearisation against its formulas and against a
// finite-difference derivative of the step, with the usual mistakes named.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/28_discretise_tank/discretise_tank.h"
#include "exercises/test_util.h"
#include "lessons/common/plant.h"

namespace {

ex::TankParams params_of(const lessons::TankConfig& c) {
  ex::TankParams p;
  p.area = c.area;
  p.pump_gain = c.pump_gain;
  p.outflow_coeff = c.outflow_coeff;
  p.dt = c.dt;
  p.max_level = c.max_level;
  return p;
}

// The step written out here, without the clamp (the tests' reference).
double raw_step(const ex::TankParams& p, double h, double u, double d) {
  return h + p.dt / p.area * (p.pump_gain * u - p.outflow_coeff * std::sqrt(h) - d);
}

// Runs the simulator and checks that every logged level is the student's step of the one before.
// dt and area are not 1, so a missing dt / A shows.
void check_against_simulator(lessons::TankConfig c, const std::string& what) {
  c.level_noise = 0;
  c.flow_noise = 0;
  c.dead_time = 0;  // the command reaches the tank in the same step
  const lessons::Series s = lessons::simulate_tank(c);
  const ex::TankParams p = params_of(c);
  const int L = s.index_of("level"), U = s.index_of("pump"), D = s.index_of("drain");
  int wrong = 0, at_limit = 0;
  std::ostringstream first;
  std::string cause;
  for (int t = 0; t + 1 < s.steps; ++t) {
    const double h = s.at(t, L), u = s.at(t, U), d = s.at(t, D);
    const double want = s.at(t + 1, L);
    const double got = ex::tank_euler_step(p, h, u, d);
    const double raw = raw_step(p, h, u, d);
    if (raw <= 0.0 || raw >= p.max_level) ++at_limit;
    // the log holds floats: the input and the output are rounded to ~1e-7 relative
    if (ex_test::close(got, want, 2e-6, 1e-6)) continue;
    if (++wrong > 1) continue;
    first << "step t = " << t << ": level " << h << " m, pump " << u << ", drain " << d << " m^3/s -> got " << got
          << ", the simulator's next level is " << want << "\n";
    if (ex_test::close(got, raw, 2e-6, 1e-6)) {
      cause = raw < 0 ? "the level went below 0: clamp it to [0, max_level] (the tank cannot hold less than nothing)"
                      : "the level went over the brim: clamp it to [0, max_level] (the tank overflows)";
    } else if (ex_test::close(got, h + (p.pump_gain * u - p.outflow_coeff * std::sqrt(h) - d), 2e-6, 1e-6)) {
      std::ostringstream os;
      os << "the change was not scaled by dt / A (here dt = " << p.dt << " s, A = " << p.area << " m^2)";
      cause = os.str();
    } else if (ex_test::close(got, std::clamp(raw + p.dt / p.area * d, 0.0, p.max_level), 2e-6, 1e-6)) {
      cause = "the drain was left out of the outflow: q_out = k sqrt(h) + drain";
    } else if (ex_test::close(got, std::clamp(h + p.dt / p.area * (p.pump_gain * u - p.outflow_coeff * h - d), 0.0,
                                              p.max_level),
                              2e-6, 1e-6)) {
      cause = "the outlet passes k sqrt(h) (Torricelli), not k h";
    }
  }
  INFO(what << ": " << wrong << " of " << s.steps - 1 << " steps differ from the simulator\n"
            << first.str() << (cause.empty() ? "" : "Likely cause: " + cause));
  CHECK(wrong == 0);
  CHECK(at_limit > 0);  // the run did reach a limit: the clamp was tested
}

struct Point {
  double h0, u0, d0;
};

void check_linearise(const ex::TankParams& p, const Point& op) {
  const ex::LinearTank m = ex::tank_linearise(p, op.h0, op.u0, op.d0);
  // finite differences of the step (central, in double) and the line through the point
  const double e = 1e-6;
  const double a_fd = (raw_step(p, op.h0 + e, op.u0, op.d0) - raw_step(p, op.h0 - e, op.u0, op.d0)) / (2 * e);
  const double b_fd = (raw_step(p, op.h0, op.u0 + e, op.d0) - raw_step(p, op.h0, op.u0 - e, op.d0)) / (2 * e);
  const double a = 1.0 - p.dt * p.outflow_coeff / (2.0 * p.area * std::sqrt(op.h0));
  const double b = p.dt * p.pump_gain / p.area;
  const double c = raw_step(p, op.h0, op.u0, op.d0) - a * op.h0 - b * op.u0;
  std::ostringstream where;
  where << "operating point h0 = " << op.h0 << " m, u0 = " << op.u0 << ", drain0 = " << op.d0 << " m^3/s (dt = " << p.dt
        << " s, A = " << p.area << " m^2, k = " << p.outflow_coeff << ", g = " << p.pump_gain << ")\n"
        << "got a = " << m.a << ", b = " << m.b << ", c = " << m.c << "; want a = " << a << " (finite difference "
        << a_fd << "), b = " << b << " (finite difference " << b_fd << "), c = " << c << "\n";
  std::string cause;
  if (ex_test::close(m.a, 1.0 - p.dt * p.outflow_coeff / (p.area * std::sqrt(op.h0)), 1e-9, 1e-9)) {
    cause = "a is missing the 1/2: d sqrt(h) / dh = 1 / (2 sqrt(h))";
  } else if (ex_test::close(m.a, -p.dt * p.outflow_coeff / (2.0 * p.area * std::sqrt(op.h0)), 1e-9, 1e-9)) {
    cause = "a is missing the 1: h(t+1) = h(t) + ..., so d h(t+1) / d h(t) starts at 1";
  } else if (ex_test::close(m.b, p.pump_gain, 1e-9, 1e-9) && !ex_test::close(b, p.pump_gain, 1e-9, 1e-9)) {
    cause = "b is the pump gain alone: one step adds dt / A times the inflow to the level";
  } else if (m.c == 0.0 && m.a != 0.0) {
    cause = "c was left at 0: the line must pass through the operating point, c = f(h0, u0) - a h0 - b u0";
  }
  INFO(where.str() << (cause.empty() ? "" : "Likely cause: " + cause));
  CHECK(ex_test::close(m.a, a, 1e-12, 1e-12));
  CHECK(ex_test::close(m.a, a_fd, 1e-8, 1e-8));
  CHECK(ex_test::close(m.b, b, 1e-12, 1e-12));
  CHECK(ex_test::close(m.b, b_fd, 1e-8, 1e-8));
  CHECK(ex_test::close(m.c, c, 1e-12, 1e-12));
  // What the line is for: near the point it predicts the step to second order in the distance.
  for (double dh : {-1e-3, 1e-3}) {
    const double h = op.h0 + dh, u = op.u0 + 0.5 * dh;
    const double err = std::abs(m.a * h + m.b * u + m.c - raw_step(p, h, u, op.d0));
    INFO("the line at h0 " << (dh > 0 ? "+" : "-") << " 1 mm misses the step by " << err << " m");
    CHECK(err < 1e-6);
  }
}

}  // namespace

TEST_CASE("tank_euler_step: each level the simulator logs is one Euler step of the one before",
          "[28_discretise_tank]") {
  lessons::TankConfig c;
  c.steps = 1500;
  c.dt = 0.5;
  c.area = 2.0;
  c.seed = 2801;
  c.open_loop_pump = 0.1;  // too little against the open drain: the tank runs dry (the clamp at 0)
  c.drain_rate = 0.01;
  c.drain_max = 0.04;
  check_against_simulator(c, "pump held at 0.1, the drain opening and closing, dt = 0.5 s, A = 2 m^2");
  lessons::TankConfig f;
  f.steps = 400;
  f.dt = 2.0;
  f.area = 0.5;
  f.seed = 2802;
  f.max_level = 0.9;
  f.setpoint_lo = 0.6;
  f.setpoint_hi = 0.8;
  f.pump_gain = 0.1;
  f.open_loop_pump = 1.0;  // full pump into a small tank: it overflows (the clamp at the brim)
  f.drain_rate = 0.0;
  check_against_simulator(f, "pump at full, a small tank, dt = 2 s, A = 0.5 m^2");
}

TEST_CASE("tank_linearise: a, b, c as derived, equal to a finite difference of the step", "[28_discretise_tank]") {
  const ex::TankParams p = params_of(lessons::TankConfig{});
  ex::TankParams q = p;
  q.dt = 0.5;
  q.area = 2.0;
  for (const ex::TankParams& pp : {p, q}) {
    // equilibria (f(h0, u0) = h0: u0 = (k sqrt(h0) + d0) / g) and points off them
    for (const double h0 : {0.3, 0.55, 0.8}) {
      const double u0 = (pp.outflow_coeff * std::sqrt(h0) + 0.004) / pp.pump_gain;
      check_linearise(pp, {h0, u0, 0.004});
      const ex::LinearTank m = ex::tank_linearise(pp, h0, u0, 0.004);
      INFO("at an equilibrium the line passes through it: a h0 + b u0 + c = h0");
      CHECK(ex_test::close(m.a * h0 + m.b * u0 + m.c, h0, 1e-12, 1e-12));
    }
    check_linearise(pp, {0.12, 0.2, 0.0});
    check_linearise(pp, {0.9, 0.35, 0.01});
  }
}
