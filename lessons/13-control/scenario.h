// lessons/13-control/scenario.h: the closed-loop test bench every controller of lesson 13 runs on.
//
// A Scenario is what happens to the tank over a run: the setpoint the operator asks for, the
// drain that opens and closes (the unmeasured disturbance) and the pipe's dead time, each a
// piecewise-constant schedule, plus the process constraints (pump range, rate limit). A
// Controller is anything that turns (setpoint, measurement) into a pump command: the PI of
// lessons 05-06, the MPC of mpc.h, the exported C controller of export_part. run_closed_loop
// drives lessons::TankPlant with one, through an optional sensor hook (a stuck or drifting
// transmitter goes between the plant and the controller), and measures the loop with
// loop_metrics: the numbers a control engineer compares controllers by.
//
// One control period t of run_closed_loop:
//   plant.set_dead_time(d(t)); plant.set_drain(drain(t)); m = plant.measure();
//   seen = {m.level_meas, m.outflow_meas}; hook(t, m, seen);      // the transmitter
//   u = controller.step(t, r(t), seen);   (timed: the compute time per control step)
//   plant.step(u);
// The plant clamps u to [0, 1]; the metrics count what the controller ASKED for.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "lessons/common/plant.h"

namespace lesson13 {

// A value that changes at given steps: initial, then changes[i].second from step
// changes[i].first on (changes sorted by step).
template <class T>
struct Piecewise {
  T initial{};
  std::vector<std::pair<int, T>> changes;
  T at(int t) const {
    T v = initial;
    for (const auto& c : changes) {
      if (c.first > t) break;
      v = c.second;
    }
    return v;
  }
};

// What the process allows the controller to do. The PI is tuned without a rate limit; the
// metrics count its rate violations all the same (they are what a real actuator would
// refuse or wear out on).
struct LoopConstraints {
  double u_min = 0.0;    // pump command range
  double u_max = 1.0;
  double du_max = 0.05;  // the pump's ramp limit: |u(t) - u(t-1)| per control period
};

struct Scenario {
  std::string name;         // "setpoint-steps", "disturbance", "dead-time", "nonlinear-range"
  std::string description;  // one line for the printed table
  int steps = 0;
  lessons::TankConfig plant;  // the physics, the noise and its seed (schedule fields unused)
  double level0 = 0.5;        // starts at rest here (setpoint(0) is usually the same)
  Piecewise<double> setpoint;
  Piecewise<double> drain;    // m^3/s
  Piecewise<int> dead_time;   // steps
  LoopConstraints constraints;
  int max_dead_time() const;  // the largest dead time the schedule reaches
};

// The four standard scenarios of the mpc part (H2's choice of levels and times, documented in
// scenario.cpp): setpoint steps at mid level, drain steps at a constant setpoint, setpoint
// steps while the dead time grows from 20 to 32 steps (the PI and the learned model were both
// made for 20), and the nonlinear range (low levels, where d q_out / d level is largest, and
// a large step that saturates the pump). quick: shorter holds. seed: the sensor noise.
std::vector<Scenario> standard_scenarios(bool quick, uint64_t seed = 13);

// ---- metrics -------------------------------------------------------------------------------
// Definitions (r the setpoint, y the TRUE level: the metrics judge the plant, not the noisy
// transmitter; u the commands the controller asked for; dt the control period):
//   iae = sum |r - y| dt,  ise = sum (r - y)^2 dt,  max_abs_error = max |r - y|
//   setpoint steps: each t where r changes, with delta = r(t) - r(t-1), over the segment up to
//     the next change (or the end):
//     overshoot = 100 * max(0, max_seg (y - r) * sign(delta)) / |delta|             (%)
//     settling time = dt * (first s such that |y(t+j) - r| <= band |delta| for every j >= s
//                     in the segment); a segment whose last sample is outside the band is
//                     unsettled (counted, left out of the times)
//     reported: the largest overshoot, the largest settling time over settled steps (NaN
//     when there is no setpoint step or none settled), the count of steps and of unsettled.
//   constraint violations, counted per step (tolerance 1e-9):
//     u outside [u_min, u_max];  |u(t) - u(t-1)| > du_max (u(-1) = u_prev0, the command at
//     rest);  y <= 0 (tank empty) or y >= level_max (overflow)
//   control effort: sum |u(t) - u(t-1)| (the actuator's travel) and sum u dt (pumping: energy)
struct MetricsOptions {
  double dt = 1.0;
  double settling_band = 0.05;  // of each step's size
  LoopConstraints constraints;
  double u_prev0 = 0.0;         // the command before t = 0
  double level_max = 1.5;       // the tank's overflow
};

struct LoopMetrics {
  double iae = 0, ise = 0, max_abs_error = 0;
  int setpoint_steps = 0, unsettled = 0;
  double overshoot_pct = 0;     // NaN without a setpoint step
  double settling_time = 0;     // NaN without a settled setpoint step
  int u_bound_violations = 0, rate_violations = 0, level_violations = 0;
  int constraint_violations = 0;  // their sum
  double effort_du = 0;         // sum |du|
  double effort_u = 0;          // sum u dt
  double compute_ms_median = 0, compute_ms_max = 0;  // set by run_closed_loop
};

LoopMetrics loop_metrics(const std::vector<double>& r, const std::vector<double>& y,
                         const std::vector<double>& u, const MetricsOptions& opts);

// ---- controllers and the loop ----------------------------------------------------------------
// What the controller sees of the plant (after the sensor hook).
struct Sensed {
  double level = 0;    // m, the level transmitter
  double outflow = 0;  // m^3/s, the outflow transmitter
};

// How the loop starts: at rest at level0, with the pipe full of u_rest.
struct LoopStart {
  double level0 = 0;
  double u_rest = 0;
  double dt = 1.0;
  int dead_time = 0;  // the pipe's at t = 0 (a controller may or may not be told it changes)
  LoopConstraints constraints;
};

class Controller {
 public:
  virtual ~Controller() = default;
  virtual std::string name() const = 0;
  virtual void reset(const LoopStart& start) = 0;  // before t = 0
  // The pump command for step t (the plant clamps it to [0, 1]).
  virtual double step(int t, double setpoint, const Sensed& seen) = 0;
};

// The tuned PI of lessons 05-06 (TankConfig's kp, ki), started at rest (integral = u_rest).
class PiLoopController : public Controller {
 public:
  PiLoopController(double kp, double ki) : kp_(kp), ki_(ki), pi_(kp, ki, 1.0) {}
  std::string name() const override { return "pi"; }
  void reset(const LoopStart& start) override;
  double step(int t, double setpoint, const Sensed& seen) override;

 private:
  double kp_, ki_;
  lessons::PiController pi_;
};

// Between the plant and the controller: may overwrite `seen` (a stuck or drifting
// transmitter). `truth` is what the plant really did at step t.
using SensorHook = std::function<void(int t, const lessons::TankMeasurement& truth, Sensed& seen)>;

struct ClosedLoopRun {
  std::string scenario, controller;
  double dt = 1.0;
  std::vector<double> setpoint, level_true, level_seen, u, drain, compute_ms;  // per step
  std::vector<int> dead_time;
  int clamped = 0;  // steps the plant had to clamp the command
  LoopMetrics metrics;
};

ClosedLoopRun run_closed_loop(const Scenario& sc, Controller& ctrl, const SensorHook& hook = {});

}  // namespace lesson13
