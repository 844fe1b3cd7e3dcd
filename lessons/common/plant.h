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

}  // namespace lessons
