// lessons/common/plant: the simulated tank (reproducible, dead time, mass balance, the tuned loop's
// behaviour) and the ARX baseline (exact on a linear system, better with the dead time in
// its input lags, clear errors).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "nn/check.h"
#include "lessons/common/plant.h"
#include "nn/rng.h"

using namespace testing;  // error_of (tests/test_util.h)
using Catch::Contains;

namespace {

// A plant with no sensor noise: what the series shows is exactly what happened.
lessons::TankConfig noiseless(int steps) {
  lessons::TankConfig c;
  c.steps = steps;
  c.level_noise = 0;
  c.flow_noise = 0;
  return c;
}

// Root-mean-square error of one-step predictions of output k: pred row t against y(t+1),
// for t in [from, steps - 2].
double rmse(const std::vector<float>& pred, const std::vector<float>& y, int ny, int k, int from, int steps) {
  double sum = 0.0;
  int n = 0;
  for (int t = from; t + 1 < steps; ++t) {
    const double d = pred[static_cast<size_t>(t * ny + k)] - y[static_cast<size_t>((t + 1) * ny + k)];
    sum += d * d;
    ++n;
  }
  return std::sqrt(sum / n);
}

}  // namespace

// ---- the tank ----------------------------------------------------------------------------

TEST_CASE("plant: the same seed gives the same series, another seed another", "[plant]") {
  lessons::TankConfig c;
  c.steps = 3000;
  const lessons::Series a = lessons::simulate_tank(c);
  const lessons::Series b = lessons::simulate_tank(c);
  REQUIRE(a.steps == 3000);
  REQUIRE(a.names == std::vector<std::string>{"setpoint", "pump", "level", "outflow", "drain"});
  REQUIRE(a.data.size() == 3000u * 5u);
  REQUIRE(a.data == b.data);
  c.seed = 2;
  const lessons::Series other = lessons::simulate_tank(c);
  REQUIRE(other.data != a.data);
  REQUIRE(other.channel("setpoint") != a.channel("setpoint"));
  REQUIRE(other.channel("level") != a.channel("level"));

  // The three sources of randomness are separate: removing the noise leaves the operator's
  // setpoints and the drain events as they were.
  lessons::TankConfig quiet = noiseless(3000);
  const lessons::Series q = lessons::simulate_tank(quiet);
  REQUIRE(q.channel("setpoint") == a.channel("setpoint"));
  REQUIRE(q.channel("drain") == a.channel("drain"));
  REQUIRE(q.channel("level") != a.channel("level"));
}

TEST_CASE("plant: a step of the pump command reaches the level exactly dead_time steps later", "[plant]") {
  for (int d : {0, 1, 7, 20, 33}) {
    // Open loop: the tank starts at rest, the command steps from the resting value to 0.9
    // at t = 0 and stays there.
    lessons::TankConfig c = noiseless(d + 10);
    c.drain_rate = 0;
    c.dead_time = d;
    c.open_loop_pump = 0.9;
    const lessons::Series s = lessons::simulate_tank(c);
    const std::vector<float> level = s.channel("level");
    INFO("dead_time " << d);
    for (int t = 0; t < s.steps; ++t) REQUIRE(s.at(t, s.index_of("pump")) == 0.9f);
    for (int t = 1; t <= d; ++t) REQUIRE(level[static_cast<size_t>(t)] == level[0]);  // the pipe still delivers the old command
    REQUIRE(level[static_cast<size_t>(d + 1)] > level[0] + 1e-4f);                     // u(0) arrives at t = d
  }

  // Closed loop: the first setpoint change moves the pump at once, the level d + 1 rows later.
  lessons::TankConfig c = noiseless(1000);
  c.drain_rate = 0;
  const lessons::Series s = lessons::simulate_tank(c);
  const std::vector<float> sp = s.channel("setpoint"), pump = s.channel("pump"), level = s.channel("level");
  size_t t0 = 1;
  while (t0 < sp.size() && sp[t0] == sp[0]) ++t0;
  REQUIRE(t0 >= static_cast<size_t>(c.setpoint_hold_min));
  REQUIRE(t0 + static_cast<size_t>(c.dead_time) + 1 < sp.size());
  REQUIRE(std::fabs(pump[t0] - pump[t0 - 1]) > 0.01f);
  for (size_t t = 1; t <= t0 + static_cast<size_t>(c.dead_time); ++t) REQUIRE(level[t] == level[0]);
  REQUIRE(level[t0 + static_cast<size_t>(c.dead_time) + 1] != level[0]);
}

TEST_CASE("plant: without noise the series obeys the mass balance and Torricelli", "[plant]") {
  const lessons::TankConfig c = noiseless(5000);
  const lessons::Series s = lessons::simulate_tank(c);
  const std::vector<float> u = s.channel("pump"), level = s.channel("level"), q = s.channel("outflow"),
                           drain = s.channel("drain");
  int drain_rows = 0;
  for (int t = 0; t + 1 < s.steps; ++t) {
    const auto i = static_cast<size_t>(t);
    INFO("t " << t);
    // q_out = outflow_coeff * sqrt(level) + drain
    REQUIRE(std::fabs(q[i] - (c.outflow_coeff * std::sqrt(static_cast<double>(level[i])) + drain[i])) < 1e-6);
    drain_rows += drain[i] > 0 ? 1 : 0;
    if (t < c.dead_time) continue;  // the pipe still holds the resting command
    // level(t+1) - level(t) = dt / area * (pump_gain * u(t - d) - q_out(t))
    const double expect = c.dt / c.area * (c.pump_gain * u[i - static_cast<size_t>(c.dead_time)] - q[i]);
    REQUIRE(std::fabs((level[i + 1] - level[i]) - expect) < 1e-6);
  }
  REQUIRE(drain_rows > 0);  // the disturbance was there to balance
}

TEST_CASE("plant: the default loop is stable, overshoots a little, stays in range", "[plant]") {
  // Noise-free, drain-free: the controller alone. Every setpoint step held long enough
  // settles (no sustained oscillation), with a modest overshoot.
  lessons::TankConfig quiet = noiseless(20000);
  quiet.drain_rate = 0;
  const lessons::Series q = lessons::simulate_tank(quiet);
  const std::vector<float> sp = q.channel("setpoint"), y = q.channel("level");
  int checked = 0;
  double max_overshoot = 0.0;
  for (size_t a = 1; a < sp.size(); ++a) {
    if (sp[a] == sp[a - 1]) continue;
    size_t b = a + 1;
    while (b < sp.size() && sp[b] == sp[a]) ++b;
    const double step = sp[a] - sp[a - 1];
    if (std::fabs(step) < 0.1 || b - a < 300 || b == sp.size()) continue;
    double overshoot = 0.0;
    for (size_t t = a; t < b; ++t) overshoot = std::max(overshoot, (y[t] - sp[a]) / step);
    max_overshoot = std::max(max_overshoot, overshoot);
    INFO("setpoint step at t " << a << " by " << step << ", held " << b - a << " steps");
    REQUIRE(overshoot < 0.4);
    REQUIRE(std::fabs(y[b - 1] - sp[a]) < 0.05 * std::fabs(step));  // settled by the end of the hold
    ++checked;
  }
  REQUIRE(checked >= 10);
  REQUIRE(max_overshoot > 0.05);  // "some overshoot": a PI loop tuned this way is not sluggish

  // With noise and the drain: the level stays well inside (0, max_level), the pump
  // saturates only now and then, the drain opens several times per run.
  int saturated_total = 0;
  for (uint64_t seed : {1, 2, 3}) {
    lessons::TankConfig c;
    c.seed = seed;
    const lessons::Series s = lessons::simulate_tank(c);
    const std::vector<float> level = s.channel("level"), pump = s.channel("pump"), drain = s.channel("drain");
    const auto [lo, hi] = std::minmax_element(level.begin(), level.end());
    int saturated = 0, openings = 0;
    for (size_t t = 0; t < pump.size(); ++t) {
      saturated += (pump[t] >= 1.0f || pump[t] <= 0.0f) ? 1 : 0;
      openings += (t > 0 && drain[t] > 0 && drain[t - 1] == 0) ? 1 : 0;
    }
    INFO("seed " << seed << ": level in [" << *lo << ", " << *hi << "], pump saturated " << saturated
                 << " steps, drain opened " << openings << " times");
    REQUIRE(*lo > 0.1f);
    REQUIRE(*hi < 1.2f);
    REQUIRE(saturated < s.steps / 50);  // under 2% of the time
    REQUIRE(openings >= 5);
    saturated_total += saturated;
  }
  REQUIRE(saturated_total > 0);
}

TEST_CASE("plant: nonsense configurations and unknown channels are errors", "[plant]") {
  lessons::TankConfig c;
  c.steps = 1;
  REQUIRE_THAT(error_of([&] { lessons::simulate_tank(c); }), Contains("steps must be at least 2"));
  c = {};
  c.dead_time = -1;
  REQUIRE_THAT(error_of([&] { lessons::simulate_tank(c); }), Contains("dead_time"));
  c = {};
  c.setpoint_hold_min = 500;
  REQUIRE_THAT(error_of([&] { lessons::simulate_tank(c); }), Contains("setpoint_hold_min <= setpoint_hold_max"));
  c = {};
  c.setpoint_hi = 2.0;
  REQUIRE_THAT(error_of([&] { lessons::simulate_tank(c); }), Contains("setpoint_hi <= max_level"));
  c = {};
  c.open_loop_pump = 1.5;
  REQUIRE_THAT(error_of([&] { lessons::simulate_tank(c); }), Contains("open_loop_pump"));
  c = {};
  c.area = 0;
  REQUIRE_THAT(error_of([&] { lessons::simulate_tank(c); }), Contains("area = 0"));

  c = {};
  c.steps = 10;
  const lessons::Series s = lessons::simulate_tank(c);
  REQUIRE_THAT(error_of([&] { s.index_of("temperature"); }),
               Contains("no channel 'temperature'") && Contains("setpoint, pump, level, outflow, drain"));
  const std::vector<float> cols = s.columns({"level", "pump"});
  REQUIRE(cols.size() == 20);
  for (int t = 0; t < 10; ++t) {
    REQUIRE(cols[static_cast<size_t>(2 * t)] == s.at(t, 2));
    REQUIRE(cols[static_cast<size_t>(2 * t + 1)] == s.at(t, 1));
  }
}

// ---- ARX ---------------------------------------------------------------------------------

TEST_CASE("plant: ARX recovers a linear system exactly and predicts it", "[plant]") {
  // y(t+1) = c + sum_i A_i y(t-i) + sum_i B_i u(t-i), two outputs, two inputs; A small
  // enough to be stable. Each output row of theta: [A_0 row | A_1 row | ... | B_0 row | ... | c].
  struct Case {
    int na, nb;
  };
  // (nb >= 1: with no input the system settles to its fixed point and nothing can be identified.)
  for (const Case& cs : {Case{2, 3}, Case{3, 1}, Case{1, 1}}) {
    const int ny = 2, nu = 2, steps = 2000;
    lessons::ArxModel truth;
    truth.ny = ny;
    truth.nu = nu;
    truth.na = cs.na;
    truth.nb = cs.nb;
    nn::Rng rng(11);
    truth.theta.resize(static_cast<size_t>(ny * truth.regressors()));
    for (double& th : truth.theta) th = rng.uniform(-0.5f, 0.5f) / static_cast<float>(cs.na);  // sum of |A| < 1: stable
    const int p = truth.regressors();

    std::vector<float> y(static_cast<size_t>(steps * ny)), u(static_cast<size_t>(steps * nu));
    for (float& v : u) v = rng.uniform(-1.0f, 1.0f);
    for (int t = 0; t < truth.lag(); ++t) {
      for (int k = 0; k < ny; ++k) y[static_cast<size_t>(t * ny + k)] = rng.uniform(-1.0f, 1.0f);
    }
    // The truth's own prediction is the next value: generate with arx_predict row by row.
    for (int t = truth.lag() - 1; t + 1 < steps; ++t) {
      const std::vector<float> row = lessons::arx_predict(truth, std::span<const float>(y).first(static_cast<size_t>((t + 1) * ny)),
                                                     std::span<const float>(u).first(static_cast<size_t>((t + 1) * nu)), t + 1);
      for (int k = 0; k < ny; ++k) y[static_cast<size_t>((t + 1) * ny + k)] = row[static_cast<size_t>(t * ny + k)];
    }

    const lessons::ArxModel m = lessons::fit_arx(y, u, steps, ny, nu, cs.na, cs.nb);
    INFO("na " << cs.na << " nb " << cs.nb);
    REQUIRE(m.theta.size() == static_cast<size_t>(ny * p));
    for (size_t i = 0; i < m.theta.size(); ++i) {
      INFO("theta[" << i << "] fitted " << m.theta[i] << " true " << truth.theta[i]);
      REQUIRE(std::fabs(m.theta[i] - truth.theta[i]) < 1e-5);
    }
    const std::vector<float> pred = lessons::arx_predict(m, y, u, steps);
    REQUIRE(pred.size() == y.size());
    for (int t = 0; t + 1 < steps; ++t) {
      for (int k = 0; k < ny; ++k) {
        const auto i = static_cast<size_t>(t * ny + k);
        // Too little history: persistence; then the next value itself.
        const float want = t < m.lag() - 1 ? y[i] : y[i + static_cast<size_t>(ny)];
        INFO("t " << t << " output " << k);
        REQUIRE(std::fabs(pred[i] - want) < 1e-5f);
      }
    }
  }
}

TEST_CASE("plant: on the tank, ARX with the dead time in its input lags beats one without", "[plant]") {
  // Train on seed 1, validate on seed 2 (the default 20000 steps each). Outputs: level and
  // outflow; input: the pump command.
  lessons::TankConfig c;
  const lessons::Series train = lessons::simulate_tank(c);
  c.seed = 2;
  const lessons::Series val = lessons::simulate_tank(c);
  const std::vector<float> ytr = train.columns({"level", "outflow"}), utr = train.columns({"pump"});
  const std::vector<float> yv = val.columns({"level", "outflow"}), uv = val.columns({"pump"});
  const int from = c.dead_time + 5;  // every model has its full history from here on

  const double persistence = rmse(yv, yv, 2, 0, from, c.steps);  // y(t+1) ~ y(t)
  const lessons::ArxModel short_lags = lessons::fit_arx(ytr, utr, c.steps, 2, 1, 2, 2);
  const lessons::ArxModel long_lags = lessons::fit_arx(ytr, utr, c.steps, 2, 1, 2, c.dead_time + 1);
  const double e_short = rmse(lessons::arx_predict(short_lags, yv, uv, c.steps), yv, 2, 0, from, c.steps);
  const double e_long = rmse(lessons::arx_predict(long_lags, yv, uv, c.steps), yv, 2, 0, from, c.steps);
  INFO("level one-step RMSE: persistence " << persistence << ", ARX nb=2 " << e_short << ", ARX nb=" << c.dead_time + 1
                                           << " " << e_long);
  REQUIRE(e_short <= persistence);
  REQUIRE(e_long < 0.85 * e_short);  // u(t - dead_time) is what moves the level next
  REQUIRE(e_long > c.level_noise);   // cannot beat the sensor noise on y(t+1)
}

TEST_CASE("plant: ARX rejects bad sizes and data", "[plant]") {
  std::vector<float> y(40), u(20);
  for (size_t i = 0; i < y.size(); ++i) y[i] = std::sin(static_cast<float>(i));
  for (size_t i = 0; i < u.size(); ++i) u[i] = std::cos(static_cast<float>(i) * 0.7f);
  REQUIRE_THAT(error_of([&] { lessons::fit_arx(y, u, 20, 2, 1, 0, 1); }), Contains("na (output lags) must be at least 1"));
  REQUIRE_THAT(error_of([&] { lessons::fit_arx(y, u, 20, 2, 1, 1, -1); }), Contains("nb"));
  REQUIRE_THAT(error_of([&] { lessons::fit_arx(y, u, 21, 2, 1, 1, 1); }), Contains("y holds 40 values") && Contains("21 x 2"));
  REQUIRE_THAT(error_of([&] { lessons::fit_arx(y, u, 20, 2, 2, 1, 1); }), Contains("u holds 20 values"));
  // 20 steps, na = 4, nb = 4: 16 equations for 4*2 + 4 + 1 = 13 unknowns is fine; nb = 8 is not.
  REQUIRE_NOTHROW(lessons::fit_arx(y, u, 20, 2, 1, 4, 4));
  // nb = 0 (no input, pure AR) is allowed: 2 * 2 + 1 regressors per output.
  REQUIRE(lessons::fit_arx(y, u, 20, 2, 1, 2, 0).theta.size() == 2u * 5u);
  REQUIRE_THAT(error_of([&] { lessons::fit_arx(y, u, 20, 2, 1, 4, 8); }), Contains("12 equations for 17 unknowns"));
  y[7] = std::nanf("");
  REQUIRE_THAT(error_of([&] { lessons::fit_arx(y, u, 20, 2, 1, 1, 1); }), Contains("y(3, 1) is nan"));
  y[7] = 0.5f;

  lessons::ArxModel unfitted;
  unfitted.ny = 2;
  unfitted.nu = 1;
  unfitted.na = 1;
  unfitted.nb = 1;
  REQUIRE_THAT(error_of([&] { lessons::arx_predict(unfitted, y, u, 20); }), Contains("was it fitted"));
}

// ---- the tank one step at a time (lesson 13's closed loops) ----------------------------------

namespace {

// simulate_tank's loop rebuilt from TankSchedule + TankPlant + PiController (or the held
// open-loop command): the series it would log.
lessons::Series stepped_series(const lessons::TankConfig& cfg) {
  lessons::TankSchedule schedule(cfg);
  lessons::TankPlant plant(cfg);
  lessons::PiController pi(cfg.kp, cfg.ki, cfg.dt);
  pi.reset(plant.u_rest());  // simulate_tank starts the integral at the command at rest
  lessons::Series s;
  s.steps = cfg.steps;
  s.names = {"setpoint", "pump", "level", "outflow", "drain"};
  for (int t = 0; t < cfg.steps; ++t) {
    const lessons::TankSchedule::Step st = schedule.next();
    plant.set_drain(st.drain);
    const lessons::TankMeasurement m = plant.measure();
    const double u = cfg.open_loop_pump >= 0 ? cfg.open_loop_pump : pi.step(st.setpoint, m.level_meas);
    s.data.push_back(static_cast<float>(st.setpoint));
    s.data.push_back(static_cast<float>(u));
    s.data.push_back(static_cast<float>(m.level_meas));
    s.data.push_back(static_cast<float>(m.outflow_meas));
    s.data.push_back(static_cast<float>(m.drain));
    plant.step(u);
  }
  return s;
}

}  // namespace

TEST_CASE("plant: TankPlant + PiController + TankSchedule reproduce simulate_tank bit for bit", "[plant]") {
  // Several configs: the defaults, another seed with a shorter dead time, no dead time,
  // saturating gains, open loop. Every float of every channel must be identical.
  std::vector<lessons::TankConfig> cfgs(5);
  for (auto& c : cfgs) c.steps = 3000;
  cfgs[1].seed = 7;
  cfgs[1].dead_time = 5;
  cfgs[2].dead_time = 0;
  cfgs[2].seed = 3;
  cfgs[3].kp = 4;
  cfgs[3].ki = 0.05;
  cfgs[3].drain_rate = 0.01;
  cfgs[4].open_loop_pump = 0.4;
  for (const auto& cfg : cfgs) {
    const lessons::Series a = lessons::simulate_tank(cfg);
    const lessons::Series b = stepped_series(cfg);
    REQUIRE(a.steps == b.steps);
    REQUIRE(a.names == b.names);
    REQUIRE(a.data.size() == b.data.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < a.data.size(); ++i) {
      uint32_t x = 0, y = 0;
      std::memcpy(&x, &a.data[i], 4);
      std::memcpy(&y, &b.data[i], 4);
      mismatches += x != y;
    }
    CAPTURE(cfg.seed, cfg.dead_time, cfg.kp);
    REQUIRE(mismatches == 0);
  }
}

TEST_CASE("plant: TankPlant clamps and counts, changes its dead time, refuses nonsense", "[plant]") {
  lessons::TankConfig cfg = noiseless(100);
  cfg.dead_time = 3;
  lessons::TankPlant plant(cfg, 0.5, 16);
  const double u0 = plant.u_rest();
  REQUIRE(plant.holding_command(0.5) == Approx(u0));
  REQUIRE(plant.step(1.5) == 1.0);
  REQUIRE(plant.step(-0.2) == 0.0);
  REQUIRE(plant.clamped() == 2);
  // A pulse of full pump arrives after exactly the dead time: the level holds (at rest) for
  // 3 steps after the pulse's command, then rises. Lengthen the pipe to 6 and the next
  // pulse takes 6.
  lessons::TankPlant p2(cfg, 0.5, 16);
  std::vector<double> lv;
  for (int t = 0; t < 6; ++t) {
    lv.push_back(p2.level());
    p2.step(t == 0 ? 1.0 : p2.u_rest());
  }
  // The command at t = 0 reaches the tank at t = 3, so level(4) is the first to move.
  for (int t = 1; t <= 3; ++t) REQUIRE(lv[t] == Approx(0.5).margin(1e-12));
  REQUIRE(p2.level() > 0.5 + 0.01);
  p2.set_dead_time(6);
  REQUIRE(p2.dead_time() == 6);
  REQUIRE_THROWS_WITH(p2.set_dead_time(17), Contains("max_dead_time"));
  REQUIRE_THROWS_WITH(lessons::TankPlant(cfg, 0.5, 2), Contains("max_dead_time"));
  p2.measure();
  REQUIRE_THROWS_WITH(p2.set_drain(0.01), Contains("after measure"));
  REQUIRE_THROWS_WITH(lessons::PiController(1, 0.1, 0), Contains("dt > 0"));
}
