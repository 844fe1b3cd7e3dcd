// lessons/13-control/scenario.cpp: the standard scenarios, the metrics and the closed loop (see scenario.h).
#include "lessons/13-control/scenario.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "nn/check.h"

namespace lesson13 {

int Scenario::max_dead_time() const {
  int d = dead_time.initial;
  for (const auto& c : dead_time.changes) d = std::max(d, c.second);
  return d;
}

std::vector<Scenario> standard_scenarios(bool quick, uint64_t seed) {
  // Every change holds L steps: long enough for the tuned PI to settle (~150-220 steps after a
  // mid-level step, plant.h), so each step's settling time is measured, not cut off.
  const int L = quick ? 250 : 450;
  const int t0 = 30;  // at rest first: the loop's noise floor before anything happens
  std::vector<Scenario> out;
  lessons::TankConfig base;  // the tank of lessons 05-06: dead time 20, noise 0.002 m
  const int d0 = base.dead_time;

  {
    Scenario s;
    s.name = "setpoint-steps";
    s.description = "setpoint steps at mid level (0.5 -> 0.65 -> 0.45 -> 0.6 m), no drain";
    s.steps = t0 + 3 * L;
    s.level0 = 0.5;
    s.setpoint = {0.5, {{t0, 0.65}, {t0 + L, 0.45}, {t0 + 2 * L, 0.6}}};
    s.drain = {0.0, {}};
    s.dead_time = {d0, {}};
    out.push_back(s);
  }
  {
    Scenario s;
    s.name = "disturbance";
    s.description = "setpoint 0.5 m held; the drain opens at 0.008, closes, opens at 0.004 m^3/s";
    s.steps = t0 + 3 * L;
    s.level0 = 0.5;
    s.setpoint = {0.5, {}};
    s.drain = {0.0, {{t0, 0.008}, {t0 + L, 0.0}, {t0 + 2 * L, 0.004}}};
    s.dead_time = {d0, {}};
    out.push_back(s);
  }
  {
    Scenario s;
    s.name = "dead-time";
    s.description = "the setpoint steps of setpoint-steps while the dead time grows 20 -> 26 -> 32 steps";
    s.steps = t0 + 3 * L;
    s.level0 = 0.5;
    s.setpoint = {0.5, {{t0, 0.65}, {t0 + L, 0.45}, {t0 + 2 * L, 0.6}}};
    s.drain = {0.0, {}};
    // Each growth lands 40 steps before a setpoint step: the step is answered by the longer pipe.
    s.dead_time = {d0, {{t0 + L - 40, d0 + 6}, {t0 + 2 * L - 40, d0 + 12}}};
    out.push_back(s);
  }
  {
    Scenario s;
    s.name = "nonlinear-range";
    s.description = "low levels (0.15 -> 0.08 m), a large step to 1.0 m (the pump saturates), down to 0.2 m";
    s.steps = t0 + 3 * L;
    s.level0 = 0.15;
    s.setpoint = {0.15, {{t0, 0.08}, {t0 + L, 1.0}, {t0 + 2 * L, 0.2}}};
    s.drain = {0.0, {}};
    s.dead_time = {d0, {}};
    out.push_back(s);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].plant = base;
    out[i].plant.steps = out[i].steps;
    out[i].plant.seed = seed + i;
  }
  return out;
}

// ---- metrics -------------------------------------------------------------------------------

LoopMetrics loop_metrics(const std::vector<double>& r, const std::vector<double>& y, const std::vector<double>& u,
                         const MetricsOptions& o) {
  NN_CHECK(r.size() == y.size() && r.size() == u.size() && !r.empty(),
           "loop_metrics: r, y, u must have the same non-zero length, got " << r.size() << ", " << y.size() << ", "
                                                                            << u.size());
  NN_CHECK(o.dt > 0 && o.settling_band > 0, "loop_metrics: dt and settling_band must be positive");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double tol = 1e-9;
  const size_t n = r.size();
  LoopMetrics m;
  for (size_t t = 0; t < n; ++t) {
    const double e = r[t] - y[t];
    m.iae += std::abs(e) * o.dt;
    m.ise += e * e * o.dt;
    m.max_abs_error = std::max(m.max_abs_error, std::abs(e));
    const double du = u[t] - (t == 0 ? o.u_prev0 : u[t - 1]);
    m.effort_du += std::abs(du);
    m.effort_u += u[t] * o.dt;
    if (u[t] < o.constraints.u_min - tol || u[t] > o.constraints.u_max + tol) ++m.u_bound_violations;
    if (std::abs(du) > o.constraints.du_max + tol) ++m.rate_violations;
    if (y[t] <= 0.0 || y[t] >= o.level_max) ++m.level_violations;
  }
  m.constraint_violations = m.u_bound_violations + m.rate_violations + m.level_violations;

  // Setpoint steps and their segments.
  std::vector<size_t> starts;
  for (size_t t = 1; t < n; ++t) {
    if (r[t] != r[t - 1]) starts.push_back(t);
  }
  m.setpoint_steps = static_cast<int>(starts.size());
  m.overshoot_pct = starts.empty() ? nan : 0.0;
  double settle_max = -1.0;
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t a = starts[i];
    const size_t b = i + 1 < starts.size() ? starts[i + 1] : n;  // [a, b)
    const double delta = r[a] - r[a - 1];
    const double sign = delta > 0 ? 1.0 : -1.0;
    const double mag = std::abs(delta);
    double over = 0.0;
    for (size_t t = a; t < b; ++t) over = std::max(over, (y[t] - r[a]) * sign);
    m.overshoot_pct = std::max(m.overshoot_pct, 100.0 * over / mag);
    // Settled from the sample after the last one outside the band.
    const double band = o.settling_band * mag;
    size_t last_out = a;  // a step "settles" no earlier than the step itself
    bool any_out = false;
    for (size_t t = a; t < b; ++t) {
      if (std::abs(y[t] - r[a]) > band) {
        last_out = t;
        any_out = true;
      }
    }
    if (any_out && last_out == b - 1) {
      ++m.unsettled;
      continue;
    }
    const double ts = any_out ? static_cast<double>(last_out + 1 - a) * o.dt : 0.0;
    settle_max = std::max(settle_max, ts);
  }
  m.settling_time = settle_max >= 0 ? settle_max : nan;
  return m;
}

// ---- the loop --------------------------------------------------------------------------------

void PiLoopController::reset(const LoopStart& start) {
  pi_ = lessons::PiController(kp_, ki_, start.dt, start.constraints.u_min, start.constraints.u_max);
  pi_.reset(start.u_rest);  // at rest: the integral term holds the command that holds the level
}

double PiLoopController::step(int, double setpoint, const Sensed& seen) { return pi_.step(setpoint, seen.level); }

ClosedLoopRun run_closed_loop(const Scenario& sc, Controller& ctrl, const SensorHook& hook) {
  NN_CHECK(sc.steps >= 2, "run_closed_loop: scenario '" << sc.name << "' has " << sc.steps << " steps");
  lessons::TankConfig cfg = sc.plant;
  cfg.steps = sc.steps;
  cfg.dead_time = sc.dead_time.at(0);
  lessons::TankPlant plant(cfg, sc.level0, std::max(sc.max_dead_time(), 1));
  LoopStart start;
  start.level0 = sc.level0;
  start.u_rest = plant.u_rest();
  start.dt = cfg.dt;
  start.dead_time = cfg.dead_time;
  start.constraints = sc.constraints;
  ctrl.reset(start);

  ClosedLoopRun run;
  run.scenario = sc.name;
  run.controller = ctrl.name();
  run.dt = cfg.dt;
  for (int t = 0; t < sc.steps; ++t) {
    plant.set_dead_time(sc.dead_time.at(t));
    plant.set_drain(sc.drain.at(t));
    const lessons::TankMeasurement& m = plant.measure();
    Sensed seen{m.level_meas, m.outflow_meas};
    if (hook) hook(t, m, seen);
    const double r = sc.setpoint.at(t);
    const auto c0 = std::chrono::steady_clock::now();
    const double u = ctrl.step(t, r, seen);
    const auto c1 = std::chrono::steady_clock::now();
    run.setpoint.push_back(r);
    run.level_true.push_back(m.level_true);
    run.level_seen.push_back(seen.level);
    run.u.push_back(u);
    run.drain.push_back(m.drain);
    run.dead_time.push_back(plant.dead_time());
    run.compute_ms.push_back(std::chrono::duration<double, std::milli>(c1 - c0).count());
    plant.step(u);
  }
  run.clamped = plant.clamped();
  MetricsOptions mo;
  mo.dt = cfg.dt;
  mo.constraints = sc.constraints;
  mo.u_prev0 = start.u_rest;
  mo.level_max = cfg.max_level;
  run.metrics = loop_metrics(run.setpoint, run.level_true, run.u, mo);
  std::vector<double> c = run.compute_ms;
  std::sort(c.begin(), c.end());
  run.metrics.compute_ms_median = c.size() % 2 ? c[c.size() / 2] : 0.5 * (c[c.size() / 2 - 1] + c[c.size() / 2]);
  run.metrics.compute_ms_max = c.back();
  return run;
}

}  // namespace lesson13
