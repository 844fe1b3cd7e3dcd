// lessons/common/plant.h: a simulated process plant to learn from, and the linear baseline a control
// engineer would try first.
//
// The plant: a water tank whose level a PI controller holds at a setpoint by driving a
// pump. The pump feeds the tank through a long pipe, so a change of the pump command
// reaches the level only `dead_time` steps later (a delayed response: what needs memory).
// Water leaves through an outlet (flow ~ sqrt(level), Torricelli: nonlinear) and through a
// drain valve that opens and closes at random times (an unmeasured disturbance). Both
// sensors are noisy.
//
//   q_in(t)   = pump_gain * u(t - dead_time)                          inflow, m^3/s
//   q_out(t)  = outflow_coeff * sqrt(level(t)) + drain(t)             outflow, m^3/s
//   level(t+1) = clamp(level(t) + dt / area * (q_in(t) - q_out(t)), 0, max_level)
//   y(t)      = level(t) + N(0, level_noise^2),   q(t) = q_out(t) + N(0, flow_noise^2)
//   u(t)      = clamp(kp * e(t) + ki * dt * sum_{k<=t} e(k), 0, 1),  e = setpoint - y
//               (the integral stops growing while u is saturated: anti-windup)
//
// Everything random (setpoint steps, drain openings, noise) comes from the seed, so a
// series is reproducible; two seeds give a training and a validation plant run.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nn/rng.h"

namespace lessons {

// The defaults were tuned with the noise-free, drain-free plant and then checked with both
// (seeds 1-3, 20000 steps; measured values in docs/ARCHITECTURE.md, "lessons/common/plant"):
//   - kp, ki: the loop has a 20-step dead time and a tank time constant of ~50 s at mid
//     level (area / (d q_out / d level)), so the gain stays well below the ultimate gain.
//     kp = 1, ki = 0.012 overshoots setpoint steps by 7% (median; 20% at most) and settles
//     into a 5% band in ~150 steps (220 at most), with no sustained oscillation. (kp = 2,
//     ki = 0.01 overshoots by ~50% and most steps do not settle before the next setpoint.)
//   - pump_gain 0.0375: the pump can just hold the highest setpoint against the largest
//     drain (0.03 sqrt(0.8) + 0.01 = 0.037 m^3/s), so it saturates now and then (a few
//     times per 10k steps, under 1% of the time): a nonlinearity a linear model cannot see.
//   - sensor noise 0.002 m and 0.0002 m^3/s: small next to a step's change of level, so a
//     one-step predictor that understands the dead time visibly beats one that does not.
struct TankConfig {
  int steps = 20000;
  double dt = 1.0;               // seconds per step
  double area = 1.0;             // m^2
  double max_level = 1.5;        // m: the tank overflows above this
  double pump_gain = 0.0375;     // m^3/s at full command (u = 1)
  double outflow_coeff = 0.03;   // m^2.5/s: q_out = outflow_coeff * sqrt(level)
  int dead_time = 20;            // steps from the pump command to the inflow at the tank
  double kp = 1.0;               // PI controller gains (tuned so that the loop is stable
  double ki = 0.012;             //   with the dead time, with some overshoot: see above)
  double setpoint_lo = 0.3;      // m: setpoints are drawn uniformly from [lo, hi]
  double setpoint_hi = 0.8;
  int setpoint_hold_min = 150;   // steps a setpoint holds, drawn from [min, max]
  int setpoint_hold_max = 400;
  double drain_rate = 1.0 / 600; // chance per step that the drain valve toggles
  double drain_max = 0.01;       // m^3/s: the drain's flow when open, drawn from [0, max]
  double level_noise = 0.002;    // m, sensor noise std
  double flow_noise = 0.0002;    // m^3/s, sensor noise std
  uint64_t seed = 1;
  // Negative: the PI controller drives the pump (the plant as described above). In [0, 1]:
  // the pump command is held at this value instead (open loop; the controller is off). The
  // run still starts at rest at the first setpoint, so the command steps at t = 0: the
  // tests use it to see the dead time and the mass balance without a controller in the way.
  double open_loop_pump = -1;
};

// A multichannel time series: steps rows of channels values, row-major.
struct Series {
  int steps = 0;
  std::vector<std::string> names;  // one per channel
  std::vector<float> data;         // (steps, channels)

  int channels() const { return static_cast<int>(names.size()); }
  float at(int t, int ch) const { return data[static_cast<size_t>(t) * names.size() + ch]; }
  int index_of(const std::string& name) const;           // nn::Error if there is no such channel
  std::vector<float> channel(const std::string& name) const;
  // The named channels, in that order, as a (steps, names.size()) row-major block.
  std::vector<float> columns(const std::vector<std::string>& names_) const;
};

// Channels: "setpoint", "pump" (u, the command), "level" (y, measured), "outflow" (q,
// measured), "drain" (the true disturbance: unmeasured, for plots only).
// nn::Error on a config that makes no sense (steps < 2, dead_time < 0, hold_min > hold_max, ...).
Series simulate_tank(const TankConfig& cfg);

// ---- ARX: the linear baseline --------------------------------------------------------
// AutoRegressive with eXogenous input, fitted by least squares. Each output at t+1 is a
// linear function of the last na values of every output and the last nb values of every
// input, plus a constant:
//   y_k(t+1) = c_k + sum_{i<na} sum_j a_kij y_j(t-i) + sum_{i<nb} sum_j b_kij u_j(t-i)
// (so u(t) counts: at time t the controller's command is already known). To see a dead
// time d, nb must be at least d + 1.
struct ArxModel {
  int ny = 0, nu = 0, na = 0, nb = 0;
  // One row per output: [a (na * ny, lag-major: lag 0 first) | b (nb * nu) | c]
  std::vector<double> theta;  // (ny, na * ny + nb * nu + 1)
  int regressors() const { return na * ny + nb * nu + 1; }
  int lag() const { return na > nb ? na : nb; }  // history needed before the first prediction
};

// y (steps, ny), u (steps, nu), row-major. Solves the normal equations in double
// (Cholesky, with a ridge of 1e-9 * trace for stability). nn::Error if there are fewer
// rows than regressors, na < 1, nb < 0, or sizes disagree.
ArxModel fit_arx(std::span<const float> y, std::span<const float> u, int steps, int ny, int nu,
                 int na, int nb);

// One-step-ahead predictions: pred (steps, ny), where row t predicts y(t+1) from data up
// to t. Rows t < lag() - 1 have too little history and hold y(t) (persistence). The last
// row is a forecast past the end of the data.
std::vector<float> arx_predict(const ArxModel& model, std::span<const float> y,
                               std::span<const float> u, int steps);

// ---- the tank, one step at a time ------------------------------------------------------
// simulate_tank runs the whole loop inside; lesson 13 puts other controllers in the loop, so
// the same physics is also available driven from outside. TankSchedule (the operator's
// setpoints and the drain), PiController and TankPlant, run as
//   for t: s = schedule.next(); plant.set_drain(s.drain); m = plant.measure();
//          u = pi.step(s.setpoint, m.level_meas); plant.step(u);
// reproduce simulate_tank's series bit for bit for the same config (tests/test_plant.cpp):
// the same generators, seeds, draws and arithmetic in the same order.

// What the plant's transmitters show at time t, and the truth behind them (for metrics).
struct TankMeasurement {
  double level_meas = 0;    // m, with sensor noise (what a controller sees)
  double outflow_meas = 0;  // m^3/s, with sensor noise
  double level_true = 0;    // m
  double outflow_true = 0;  // m^3/s (outlet + drain)
  double drain = 0;         // m^3/s, the unmeasured disturbance
};

// The operator's setpoint schedule and the drain valve of simulate_tank, drawn from
// cfg.seed with simulate_tank's generators: next() is step t's setpoint and drain flow.
class TankSchedule {
 public:
  explicit TankSchedule(const TankConfig& cfg);
  struct Step {
    double setpoint = 0;
    double drain = 0;
  };
  Step next();
  double first_setpoint() const { return first_setpoint_; }  // step 0's (where the plant starts)

 private:
  TankConfig cfg_;
  nn::Rng schedule_rng_, drain_rng_;
  double setpoint_ = 0, drain_flow_ = 0, first_setpoint_ = 0;
  int hold_left_ = 0;
  bool drain_open_ = false, first_ = true;
};

// The discrete PI of simulate_tank with its anti-windup (see the header's top):
//   e = setpoint - y;  I' = I + ki dt e;  I = I' unless the output is saturated and e
//   pushes further;  u = clamp(kp e + I, u_min, u_max).
class PiController {
 public:
  PiController(double kp, double ki, double dt, double u_min = 0.0, double u_max = 1.0);
  double step(double setpoint, double y);
  void reset(double integral = 0.0) { integral_ = integral; }  // I, e.g. the command at rest
  double integral() const { return integral_; }
  double kp() const { return kp_; }
  double ki() const { return ki_; }

 private:
  double kp_, ki_, dt_, u_min_, u_max_;
  double integral_ = 0.0;
};

// The tank driven from outside. Starts at rest at `level0` (default: the schedule's first
// setpoint): the pump command that holds that level fills the pipe. One control period:
//   set_drain(q) (optional), measure() (the transmitters at time t; noise drawn once per
//   step, so calling it twice returns the same values), step(u) (the command enters the
//   pipe, u(t - dead_time) reaches the tank, the level moves to t + 1).
// u is clamped to [0, 1] (a pump cannot do more); clamped() counts the steps it had to.
// set_dead_time changes the pipe's length from the next step on (the pipe keeps
// max_dead_time commands; longer is an error): a longer pipe delivers older commands.
class TankPlant {
 public:
  explicit TankPlant(const TankConfig& cfg, double level0 = -1.0, int max_dead_time = 256);
  void set_drain(double q);
  void set_dead_time(int d);
  const TankMeasurement& measure();
  double step(double u);  // returns the command applied (after the clamp)

  double level() const { return level_; }
  double drain() const { return drain_; }
  int dead_time() const { return dead_time_; }
  int time() const { return t_; }
  int clamped() const { return clamped_; }
  double u_rest() const { return u_rest_; }  // the command that held level0
  const TankConfig& config() const { return cfg_; }
  // The command that holds `level` against `drain` (clamped to [0, 1]): q_in = q_out.
  double holding_command(double level, double drain = 0.0) const;

 private:
  TankConfig cfg_;
  nn::Rng noise_rng_;
  double level_ = 0, drain_ = 0, u_rest_ = 0;
  int dead_time_ = 0, max_dead_time_ = 0, t_ = 0, clamped_ = 0;
  std::vector<double> pipe_;  // ring: the last max_dead_time commands, newest at head_ - 1
  size_t head_ = 0;
  bool measured_ = false;
  TankMeasurement m_;
};

}  // namespace lessons
