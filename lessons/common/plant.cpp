// lessons/common/plant.cpp: the simulated tank under PI control, and the ARX baseline (see lessons/common/plant.h).
//
// Data flows: TankConfig -> simulate_tank (one step: schedule, disturbance, sensors,
// controller, pipe, tank) -> Series -> fit_arx (normal equations, Cholesky) -> ArxModel
// -> arx_predict (one step ahead).
#include "lessons/common/plant.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "nn/check.h"
#include "nn/rng.h"

namespace lessons {

// ---- Series ------------------------------------------------------------------------------

int Series::index_of(const std::string& name) const {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) {
      return static_cast<int>(i);
    }
  }
  std::ostringstream msg;
  msg << "no channel '" << name << "' in this series (it has: ";
  for (size_t i = 0; i < names.size(); ++i) {
    msg << (i ? ", " : "") << names[i];
  }
  msg << ")";
  nn::fail(__FILE__, __LINE__, msg.str());
}

std::vector<float> Series::channel(const std::string& name) const {
  const int ch = index_of(name);
  std::vector<float> out(static_cast<size_t>(steps));
  for (int t = 0; t < steps; ++t) {
    out[static_cast<size_t>(t)] = at(t, ch);
  }
  return out;
}

std::vector<float> Series::columns(const std::vector<std::string>& names_) const {
  std::vector<int> idx;
  for (const std::string& n : names_) {
    idx.push_back(index_of(n));
  }
  const size_t k = idx.size();
  std::vector<float> out(static_cast<size_t>(steps) * k);
  for (int t = 0; t < steps; ++t) {
    for (size_t j = 0; j < k; ++j) {
      out[static_cast<size_t>(t) * k + j] = at(t, idx[j]);
    }
  }
  return out;
}

// ---- the tank ----------------------------------------------------------------------------

namespace {

void check_config(const TankConfig& c) {
  NN_CHECK(c.steps >= 2, "TankConfig: steps must be at least 2, got " << c.steps);
  NN_CHECK(c.dt > 0 && c.area > 0 && c.max_level > 0 && c.pump_gain > 0,
           "TankConfig: dt, area, max_level and pump_gain must be positive, got dt = "
               << c.dt << ", area = " << c.area << ", max_level = " << c.max_level << ", pump_gain = " << c.pump_gain);
  NN_CHECK(c.outflow_coeff >= 0, "TankConfig: outflow_coeff must be >= 0, got " << c.outflow_coeff);
  NN_CHECK(c.dead_time >= 0, "TankConfig: dead_time must be >= 0 steps, got " << c.dead_time);
  NN_CHECK(c.kp >= 0 && c.ki >= 0, "TankConfig: the PI gains must be >= 0, got kp = " << c.kp << ", ki = " << c.ki);
  NN_CHECK(c.setpoint_lo >= 0 && c.setpoint_lo <= c.setpoint_hi && c.setpoint_hi <= c.max_level,
           "TankConfig: need 0 <= setpoint_lo <= setpoint_hi <= max_level, got "
               << c.setpoint_lo << ", " << c.setpoint_hi << ", " << c.max_level);
  NN_CHECK(c.setpoint_hold_min >= 1 && c.setpoint_hold_min <= c.setpoint_hold_max,
           "TankConfig: need 1 <= setpoint_hold_min <= setpoint_hold_max, got " << c.setpoint_hold_min << " and "
                                                                                  << c.setpoint_hold_max);
  NN_CHECK(c.drain_rate >= 0 && c.drain_rate <= 1, "TankConfig: drain_rate is a probability per step, in [0, 1], got "
                                                       << c.drain_rate);
  NN_CHECK(c.drain_max >= 0, "TankConfig: drain_max must be >= 0, got " << c.drain_max);
  NN_CHECK(c.level_noise >= 0 && c.flow_noise >= 0,
           "TankConfig: noise levels must be >= 0, got " << c.level_noise << " and " << c.flow_noise);
  NN_CHECK(c.open_loop_pump <= 1, "TankConfig: open_loop_pump must be in [0, 1] (or negative for PI control), got "
                                      << c.open_loop_pump);
}

}  // namespace

Series simulate_tank(const TankConfig& cfg) {
  check_config(cfg);
  Series s;
  s.steps = cfg.steps;
  s.names = {"setpoint", "pump", "level", "outflow", "drain"};
  const size_t C = s.names.size();
  s.data.resize(static_cast<size_t>(cfg.steps) * C);

  // Three generators, so that changing one source of randomness (say, the noise) leaves
  // the others' draws as they were: same setpoints and drain events with or without noise.
  nn::Rng schedule_rng(cfg.seed);
  nn::Rng drain_rng(cfg.seed + 0x9E3779B97F4A7C15ULL);
  nn::Rng noise_rng(cfg.seed + 2 * 0x9E3779B97F4A7C15ULL);

  const auto draw_setpoint = [&] {
    return cfg.setpoint_lo + (cfg.setpoint_hi - cfg.setpoint_lo) * static_cast<double>(schedule_rng.uniform());
  };
  const auto draw_hold = [&] {
    const auto span = static_cast<uint32_t>(cfg.setpoint_hold_max - cfg.setpoint_hold_min + 1);
    return cfg.setpoint_hold_min + static_cast<int>(schedule_rng.below(span));
  };

  // Start at rest at the first setpoint: the level there, the pump at the command that
  // holds it (q_in = q_out), the pipe full of that command, the integral term at it too.
  double setpoint = draw_setpoint();
  int hold_left = draw_hold();
  double level = setpoint;
  const double u_rest = std::clamp(cfg.outflow_coeff * std::sqrt(level) / cfg.pump_gain, 0.0, 1.0);
  double integral = u_rest;  // ki * dt * sum of past errors: the I term of the PI output
  // The pipe, a ring buffer of the last d commands: slot t % d holds u(t - d) when step t
  // begins; the step reads it (it reaches the tank now) and puts u(t) in its place.
  std::vector<double> pipe(static_cast<size_t>(std::max(cfg.dead_time, 1)), u_rest);
  bool drain_open = false;
  double drain_flow = 0.0;

  for (int t = 0; t < cfg.steps; ++t) {
    // 1. The operator's schedule: a new setpoint when the old one has held long enough.
    if (hold_left == 0) {
      setpoint = draw_setpoint();
      hold_left = draw_hold();
    }
    --hold_left;

    // 2. The disturbance: the drain valve toggles now and then, at a random flow.
    if (cfg.drain_rate > 0 && static_cast<double>(drain_rng.uniform()) < cfg.drain_rate) {
      drain_open = !drain_open;
      drain_flow = drain_open ? cfg.drain_max * static_cast<double>(drain_rng.uniform()) : 0.0;
    }

    // 3. The sensors. Torricelli: water leaves the outlet at ~ sqrt(level).
    const double q_out = cfg.outflow_coeff * std::sqrt(level) + drain_flow;
    const double y = level + cfg.level_noise * static_cast<double>(noise_rng.normal());
    const double q = q_out + cfg.flow_noise * static_cast<double>(noise_rng.normal());

    // 4. The controller sees only the measured level:
    //    u = clamp(kp * e + ki * dt * sum e, 0, 1), e = setpoint - y.
    double u = 0.0;
    if (cfg.open_loop_pump >= 0) {
      u = cfg.open_loop_pump;
    } else {
      const double e = setpoint - y;
      const double integral_next = integral + cfg.ki * cfg.dt * e;
      const double u_raw = cfg.kp * e + integral_next;
      // Anti-windup: while the pump is saturated and the error pushes further the same
      // way, the integral stops growing (else it would need as long to unwind).
      const bool pushing_past_top = u_raw > 1.0 && e > 0;
      const bool pushing_past_bottom = u_raw < 0.0 && e < 0;
      if (!pushing_past_top && !pushing_past_bottom) {
        integral = integral_next;
      }
      u = std::clamp(cfg.kp * e + integral, 0.0, 1.0);
    }

    // 5. The pipe: what enters the tank now is the command of dead_time steps ago.
    double u_arriving = u;  // dead_time 0: no pipe
    if (cfg.dead_time > 0) {
      const size_t slot = static_cast<size_t>(t) % pipe.size();
      u_arriving = pipe[slot];  // u(t - dead_time)
      pipe[slot] = u;
    }
    const double q_in = cfg.pump_gain * u_arriving;

    // Row t: what the plant's log would show at time t.
    float* row = s.data.data() + static_cast<size_t>(t) * C;
    row[0] = static_cast<float>(setpoint);
    row[1] = static_cast<float>(u);
    row[2] = static_cast<float>(y);
    row[3] = static_cast<float>(q);
    row[4] = static_cast<float>(drain_flow);

    // 6. The tank: mass balance, level(t+1) = level(t) + dt / area * (q_in - q_out).
    //    Empty is empty (the drain cannot take water that is not there), full overflows.
    level = std::clamp(level + cfg.dt / cfg.area * (q_in - q_out), 0.0, cfg.max_level);
  }
  return s;
}

// ---- the tank, one step at a time ----------------------------------------------------------
// The same draws and the same arithmetic as simulate_tank, in the same order: the test in
// tests/test_plant.cpp holds them to its series bit for bit. (simulate_tank keeps its own
// loop, so that lessons 05-06 read the whole plant in one function.)

TankSchedule::TankSchedule(const TankConfig& cfg)
    : cfg_(cfg), schedule_rng_(cfg.seed), drain_rng_(cfg.seed + 0x9E3779B97F4A7C15ULL) {
  check_config(cfg_);
  setpoint_ = cfg_.setpoint_lo + (cfg_.setpoint_hi - cfg_.setpoint_lo) * static_cast<double>(schedule_rng_.uniform());
  const auto span = static_cast<uint32_t>(cfg_.setpoint_hold_max - cfg_.setpoint_hold_min + 1);
  hold_left_ = cfg_.setpoint_hold_min + static_cast<int>(schedule_rng_.below(span));
  first_setpoint_ = setpoint_;
}

TankSchedule::Step TankSchedule::next() {
  if (hold_left_ == 0) {
    setpoint_ = cfg_.setpoint_lo + (cfg_.setpoint_hi - cfg_.setpoint_lo) * static_cast<double>(schedule_rng_.uniform());
    const auto span = static_cast<uint32_t>(cfg_.setpoint_hold_max - cfg_.setpoint_hold_min + 1);
    hold_left_ = cfg_.setpoint_hold_min + static_cast<int>(schedule_rng_.below(span));
  }
  --hold_left_;
  if (cfg_.drain_rate > 0 && static_cast<double>(drain_rng_.uniform()) < cfg_.drain_rate) {
    drain_open_ = !drain_open_;
    drain_flow_ = drain_open_ ? cfg_.drain_max * static_cast<double>(drain_rng_.uniform()) : 0.0;
  }
  return {setpoint_, drain_flow_};
}

PiController::PiController(double kp, double ki, double dt, double u_min, double u_max)
    : kp_(kp), ki_(ki), dt_(dt), u_min_(u_min), u_max_(u_max) {
  NN_CHECK(kp >= 0 && ki >= 0 && dt > 0 && u_min < u_max,
           "PiController: need kp, ki >= 0, dt > 0, u_min < u_max, got kp = " << kp << ", ki = " << ki << ", dt = "
                                                                             << dt << ", u in [" << u_min << ", "
                                                                             << u_max << "]");
}

double PiController::step(double setpoint, double y) {
  const double e = setpoint - y;
  const double integral_next = integral_ + ki_ * dt_ * e;
  const double u_raw = kp_ * e + integral_next;
  // Anti-windup: while the output is saturated and the error pushes further the same way,
  // the integral stops growing.
  const bool pushing_past_top = u_raw > u_max_ && e > 0;
  const bool pushing_past_bottom = u_raw < u_min_ && e < 0;
  if (!pushing_past_top && !pushing_past_bottom) {
    integral_ = integral_next;
  }
  return std::clamp(kp_ * e + integral_, u_min_, u_max_);
}

TankPlant::TankPlant(const TankConfig& cfg, double level0, int max_dead_time)
    : cfg_(cfg), noise_rng_(cfg.seed + 2 * 0x9E3779B97F4A7C15ULL) {
  check_config(cfg_);
  NN_CHECK(max_dead_time >= cfg_.dead_time && max_dead_time >= 1,
           "TankPlant: max_dead_time (" << max_dead_time << ") must be >= 1 and >= the dead time " << cfg_.dead_time);
  level_ = level0 >= 0 ? level0 : TankSchedule(cfg_).first_setpoint();
  NN_CHECK(level_ <= cfg_.max_level, "TankPlant: level0 " << level_ << " is above max_level " << cfg_.max_level);
  u_rest_ = std::clamp(cfg_.outflow_coeff * std::sqrt(level_) / cfg_.pump_gain, 0.0, 1.0);
  dead_time_ = cfg_.dead_time;
  max_dead_time_ = max_dead_time;
  pipe_.assign(static_cast<size_t>(max_dead_time_), u_rest_);
}

double TankPlant::holding_command(double level, double drain) const {
  return std::clamp((cfg_.outflow_coeff * std::sqrt(std::max(level, 0.0)) + drain) / cfg_.pump_gain, 0.0, 1.0);
}

void TankPlant::set_drain(double q) {
  NN_CHECK(q >= 0 && std::isfinite(q), "TankPlant: the drain flow must be >= 0, got " << q);
  NN_CHECK(!measured_, "TankPlant: set_drain after measure() in the same step (the sensors already saw the old drain)");
  drain_ = q;
}

void TankPlant::set_dead_time(int d) {
  NN_CHECK(d >= 0 && d <= max_dead_time_,
           "TankPlant: dead time " << d << " is outside [0, max_dead_time = " << max_dead_time_ << "]");
  dead_time_ = d;
}

const TankMeasurement& TankPlant::measure() {
  if (!measured_) {
    const double q_out = cfg_.outflow_coeff * std::sqrt(level_) + drain_;
    m_.level_true = level_;
    m_.outflow_true = q_out;
    m_.drain = drain_;
    m_.level_meas = level_ + cfg_.level_noise * static_cast<double>(noise_rng_.normal());
    m_.outflow_meas = q_out + cfg_.flow_noise * static_cast<double>(noise_rng_.normal());
    measured_ = true;
  }
  return m_;
}

double TankPlant::step(double u_cmd) {
  NN_CHECK(std::isfinite(u_cmd), "TankPlant: the pump command is not finite (" << u_cmd << ")");
  const TankMeasurement& m = measure();
  const double u = std::clamp(u_cmd, 0.0, 1.0);
  if (u != u_cmd) ++clamped_;
  // The pipe: the command of dead_time steps ago arrives now (dead time 0: this one).
  double u_arriving = u;
  const size_t cap = pipe_.size();
  if (dead_time_ > 0) {
    u_arriving = pipe_[(head_ + cap - static_cast<size_t>(dead_time_)) % cap];
  }
  pipe_[head_] = u;
  head_ = (head_ + 1) % cap;
  const double q_in = cfg_.pump_gain * u_arriving;
  const double q_out = m.outflow_true;
  level_ = std::clamp(level_ + cfg_.dt / cfg_.area * (q_in - q_out), 0.0, cfg_.max_level);
  measured_ = false;
  ++t_;
  return u;
}

// ---- ARX: the linear baseline ------------------------------------------------------------

namespace {

void check_arx_sizes(std::span<const float> y, std::span<const float> u, int steps, int ny, int nu, int na,
                     int nb) {
  NN_CHECK(ny >= 1 && nu >= 0, "ARX: need at least one output and no negative input count, got ny = "
                                   << ny << ", nu = " << nu);
  NN_CHECK(na >= 1, "ARX: na (output lags) must be at least 1, got " << na);
  NN_CHECK(nb >= 0, "ARX: nb (input lags) must be >= 0, got " << nb);
  NN_CHECK(steps >= 1, "ARX: steps must be positive, got " << steps);
  NN_CHECK(y.size() == static_cast<size_t>(steps) * static_cast<size_t>(ny),
           "ARX: y holds " << y.size() << " values, expected steps x ny = " << steps << " x " << ny);
  NN_CHECK(u.size() == static_cast<size_t>(steps) * static_cast<size_t>(nu),
           "ARX: u holds " << u.size() << " values, expected steps x nu = " << steps << " x " << nu);
  for (size_t i = 0; i < y.size(); ++i) {
    NN_CHECK(std::isfinite(y[i]), "ARX: y(" << i / static_cast<size_t>(ny) << ", " << i % static_cast<size_t>(ny)
                                            << ") is " << y[i] << ": clean the data first");
  }
  for (size_t i = 0; i < u.size(); ++i) {
    NN_CHECK(std::isfinite(u[i]), "ARX: u(" << i / static_cast<size_t>(nu) << ", " << i % static_cast<size_t>(nu)
                                            << ") is " << u[i] << ": clean the data first");
  }
}

// phi(t) = [y(t) .. y(t-na+1) | u(t) .. u(t-nb+1) | 1]: the regressors that predict y(t+1).
void regressors_at(std::span<const float> y, std::span<const float> u, int t, int ny, int nu, int na, int nb,
                   double* phi) {
  int k = 0;
  for (int i = 0; i < na; ++i) {
    for (int j = 0; j < ny; ++j) {
      phi[k++] = y[static_cast<size_t>(t - i) * static_cast<size_t>(ny) + static_cast<size_t>(j)];
    }
  }
  for (int i = 0; i < nb; ++i) {
    for (int j = 0; j < nu; ++j) {
      phi[k++] = u[static_cast<size_t>(t - i) * static_cast<size_t>(nu) + static_cast<size_t>(j)];
    }
  }
  phi[k] = 1.0;
}

}  // namespace

ArxModel fit_arx(std::span<const float> y, std::span<const float> u, int steps, int ny, int nu, int na, int nb) {
  check_arx_sizes(y, u, steps, ny, nu, na, nb);
  ArxModel m;
  m.ny = ny;
  m.nu = nu;
  m.na = na;
  m.nb = nb;
  const int p = m.regressors();
  // Rows: t = lag-1 .. steps-2 (phi(t) needs lag values of history, and y(t+1) must exist).
  const int rows = steps - m.lag();
  NN_CHECK(rows >= p, "ARX: " << steps << " steps give " << std::max(rows, 0) << " equations for " << p
                              << " unknowns per output (na = " << na << ", nb = " << nb
                              << "): use a longer series or fewer lags");

  // Least squares, min_theta sum_t |y(t+1) - theta phi(t)|^2, through the normal equations
  //   (Phi^T Phi) theta_k = Phi^T y_k   for each output k,
  // accumulated in double: A (p, p) symmetric, b (ny, p).
  const auto P = static_cast<size_t>(p);
  std::vector<double> A(P * P, 0.0);
  std::vector<double> b(static_cast<size_t>(ny) * P, 0.0);
  std::vector<double> phi(P);
  for (int t = m.lag() - 1; t <= steps - 2; ++t) {
    regressors_at(y, u, t, ny, nu, na, nb, phi.data());
    for (size_t i = 0; i < P; ++i) {
      for (size_t j = 0; j <= i; ++j) {
        A[i * P + j] += phi[i] * phi[j];  // lower triangle only; mirrored below
      }
    }
    for (int k = 0; k < ny; ++k) {
      const double target = y[static_cast<size_t>(t + 1) * static_cast<size_t>(ny) + static_cast<size_t>(k)];
      for (size_t i = 0; i < P; ++i) {
        b[static_cast<size_t>(k) * P + i] += phi[i] * target;
      }
    }
  }
  // A tiny ridge, 1e-9 x trace(A) on the diagonal, keeps Cholesky away from zero pivots
  // when two regressors are nearly collinear; far too small to bias a fit that is not.
  double trace = 0.0;
  for (size_t i = 0; i < P; ++i) {
    trace += A[i * P + i];
  }
  const double ridge = 1e-9 * trace;
  for (size_t i = 0; i < P; ++i) {
    A[i * P + i] += ridge;
  }

  // Cholesky: A = L L^T, L lower triangular, overwriting A's lower triangle.
  for (size_t j = 0; j < P; ++j) {
    double d = A[j * P + j];
    for (size_t k = 0; k < j; ++k) {
      d -= A[j * P + k] * A[j * P + k];
    }
    NN_CHECK(d > 0.0, "ARX: the normal equations are singular (pivot " << j << " of " << p
                                                                        << "): some regressors are (nearly) "
                                                                           "constant or copies of others; is an "
                                                                           "input constant over the whole series?");
    const double ljj = std::sqrt(d);
    A[j * P + j] = ljj;
    for (size_t i = j + 1; i < P; ++i) {
      double s = A[i * P + j];
      for (size_t k = 0; k < j; ++k) {
        s -= A[i * P + k] * A[j * P + k];
      }
      A[i * P + j] = s / ljj;
    }
  }
  // Solve L z = b_k (forward), then L^T theta_k = z (backward), for each output.
  m.theta.assign(static_cast<size_t>(ny) * P, 0.0);
  std::vector<double> z(P);
  for (int k = 0; k < ny; ++k) {
    const double* bk = b.data() + static_cast<size_t>(k) * P;
    for (size_t i = 0; i < P; ++i) {
      double s = bk[i];
      for (size_t j = 0; j < i; ++j) {
        s -= A[i * P + j] * z[j];
      }
      z[i] = s / A[i * P + i];
    }
    double* th = m.theta.data() + static_cast<size_t>(k) * P;
    for (size_t ii = P; ii-- > 0;) {
      double s = z[ii];
      for (size_t j = ii + 1; j < P; ++j) {
        s -= A[j * P + ii] * th[j];
      }
      th[ii] = s / A[ii * P + ii];
    }
  }
  return m;
}

std::vector<float> arx_predict(const ArxModel& model, std::span<const float> y, std::span<const float> u,
                               int steps) {
  check_arx_sizes(y, u, steps, model.ny, model.nu, model.na, model.nb);
  const auto P = static_cast<size_t>(model.regressors());
  NN_CHECK(model.theta.size() == static_cast<size_t>(model.ny) * P,
           "ARX: the model holds " << model.theta.size() << " coefficients, expected ny x regressors = "
                                   << model.ny << " x " << P << ": was it fitted?");
  const auto ny = static_cast<size_t>(model.ny);
  std::vector<float> pred(static_cast<size_t>(steps) * ny);
  std::vector<double> phi(P);
  for (int t = 0; t < steps; ++t) {
    float* out = pred.data() + static_cast<size_t>(t) * ny;
    if (t < model.lag() - 1) {
      // Too little history: persistence, y(t+1) ~ y(t).
      std::copy_n(y.data() + static_cast<size_t>(t) * ny, ny, out);
      continue;
    }
    regressors_at(y, u, t, model.ny, model.nu, model.na, model.nb, phi.data());
    // y_k(t+1) = theta_k . phi(t)
    for (size_t k = 0; k < ny; ++k) {
      const double* th = model.theta.data() + k * P;
      double acc = 0.0;
      for (size_t i = 0; i < P; ++i) {
        acc += th[i] * phi[i];
      }
      out[k] = static_cast<float>(acc);
    }
  }
  return pred;
}

}  // namespace lessons
