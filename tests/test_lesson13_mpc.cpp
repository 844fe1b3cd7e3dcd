// Lesson 13's MPC (lessons/13-control/mpc.h): the solver against the closed-form optimum of a
// tiny unconstrained QP, the projection onto the constraints (the variational inequality that
// defines it), the controller holding its constraints exactly in the loop, and beating the PI
// where it should.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "lessons/13-control/mpc.h"
#include "lessons/13-control/plant_model.h"
#include "lessons/13-control/scenario.h"
#include "nn/rng.h"

namespace {

// Solves A x = b (n x n, row-major) by Gaussian elimination with partial pivoting.
std::vector<double> solve_dense(std::vector<double> A, std::vector<double> b) {
  const size_t n = b.size();
  for (size_t c = 0; c < n; ++c) {
    size_t piv = c;
    for (size_t r = c + 1; r < n; ++r) {
      if (std::abs(A[r * n + c]) > std::abs(A[piv * n + c])) piv = r;
    }
    for (size_t k = 0; k < n; ++k) std::swap(A[c * n + k], A[piv * n + k]);
    std::swap(b[c], b[piv]);
    for (size_t r = c + 1; r < n; ++r) {
      const double f = A[r * n + c] / A[c * n + c];
      for (size_t k = c; k < n; ++k) A[r * n + k] -= f * A[c * n + k];
      b[r] -= f * b[c];
    }
  }
  std::vector<double> x(n);
  for (size_t i = n; i-- > 0;) {
    double s = b[i];
    for (size_t k = i + 1; k < n; ++k) s -= A[i * n + k] * x[k];
    x[i] = s / A[i * n + i];
  }
  return x;
}

// The tank of lessons 05-06 linearised at 0.5 m (as mpc_part's --linear-check does).
struct Lin {
  double a, b, c;
  int d;
};
Lin tank_linearised(double y_op) {
  const lessons::TankConfig t;
  const double u_op = t.outflow_coeff * std::sqrt(y_op) / t.pump_gain;
  const double a = 1.0 - t.dt / t.area * t.outflow_coeff / (2.0 * std::sqrt(y_op));
  const double b = t.dt / t.area * t.pump_gain;
  return {a, b, y_op - a * y_op - b * u_op, t.dead_time};
}

// An MPC whose model is the linearised tank (exactly the plant near the operating point),
// with the same disturbance estimate as MpcController: what the learned model approximates.
class LinearMpc : public lesson13::Controller {
 public:
  LinearMpc(Lin lin, int horizon, double r_du) : lin_(lin), H_(horizon), r_du_(r_du) {}
  std::string name() const override { return "linear-mpc"; }
  void reset(const lesson13::LoopStart& s) override {
    start_ = s;
    pipe_.assign(static_cast<size_t>(lin_.d), s.u_rest);
    u_prev_ = s.u_rest;
    warm_.assign(static_cast<size_t>(H_), s.u_rest);
  }
  double step(int, double r, const lesson13::Sensed& seen) override {
    lesson13::LinearRollout model(lin_.a, lin_.b, lin_.c, lin_.d, seen.level, pipe_);
    lesson13::MpcProblem p;
    p.horizon = H_;
    p.r_du = r_du_;
    p.u_min = start_.constraints.u_min;
    p.u_max = start_.constraints.u_max;
    p.du_max = start_.constraints.du_max;
    p.u_prev = u_prev_;
    p.ref.assign(static_cast<size_t>(H_), r);
    std::vector<double> start(warm_.begin() + 1, warm_.end());
    start.push_back(warm_.back());
    lesson13::SolverOptions so;
    so.max_iters = 300;
    so.tol = 1e-7;
    const lesson13::MpcSolution sol = lesson13::solve_mpc(model, p, start, so);
    warm_ = sol.moves;
    const double u = std::clamp(sol.moves[0], std::max(p.u_min, u_prev_ - p.du_max), std::min(p.u_max, u_prev_ + p.du_max));
    pipe_.erase(pipe_.begin());
    pipe_.push_back(u);
    u_prev_ = u;
    return u;
  }

 private:
  Lin lin_;
  int H_;
  double r_du_;
  lesson13::LoopStart start_;
  std::vector<double> pipe_, warm_;
  double u_prev_ = 0;
};

}  // namespace

TEST_CASE("lesson13 mpc: the solver on a linear model reaches the closed-form optimum of a tiny QP",
          "[lesson13][mpc]") {
  // Horizon 3, dead time 1, bounds and rate limit far away: the QP is unconstrained and its
  // optimum solves the normal equations (q G^T G + r D^T D) m = q G^T (ref - y_free) + r D^T e,
  // y = y_free + G m the rollout (affine), D m - e the moves' differences (e = (u_prev, 0, 0)).
  const double a = 0.9, b = 0.5, c = 0.02, y0 = 0.3;
  const int d = 1;
  lesson13::LinearRollout model(a, b, c, d, y0, {0.4});
  lesson13::MpcProblem p;
  p.horizon = 3;
  p.q = 2.0;
  p.r_du = 0.3;
  p.u_min = -100;
  p.u_max = 100;
  p.du_max = 100;
  p.u_prev = 0.4;
  p.ref = {0.5, 0.8, 0.7};
  const size_t H = 3;
  std::vector<double> zero(H, 0.0), y_free(H), G(H * H);
  model.predict(zero, y_free);
  for (size_t j = 0; j < H; ++j) {
    std::vector<double> e(H, 0.0), y(H);
    e[j] = 1.0;
    model.predict(e, y);
    for (size_t k = 0; k < H; ++k) G[k * H + j] = y[k] - y_free[k];
  }
  // D: du_0 = m0 - u_prev, du_1 = m1 - m0, du_2 = m2 - m1.
  const std::vector<double> D = {1, 0, 0, -1, 1, 0, 0, -1, 1};
  const std::vector<double> e = {p.u_prev, 0, 0};
  std::vector<double> A(H * H, 0.0), rhs(H, 0.0);
  for (size_t i = 0; i < H; ++i) {
    for (size_t j = 0; j < H; ++j) {
      for (size_t k = 0; k < H; ++k) A[i * H + j] += p.q * G[k * H + i] * G[k * H + j] + p.r_du * D[k * H + i] * D[k * H + j];
    }
    for (size_t k = 0; k < H; ++k) rhs[i] += p.q * G[k * H + i] * (p.ref[k] - y_free[k]) + p.r_du * D[k * H + i] * e[k];
  }
  const std::vector<double> m_star = solve_dense(A, rhs);
  lesson13::SolverOptions so;
  so.max_iters = 100000;
  so.tol = 1e-12;
  const lesson13::MpcSolution sol = lesson13::solve_mpc(model, p, {}, so);
  CAPTURE(sol.iterations, sol.last_step, m_star[0], m_star[1], m_star[2], sol.moves[0], sol.moves[1], sol.moves[2]);
  REQUIRE(sol.converged);
  for (size_t j = 0; j < H; ++j) REQUIRE(sol.moves[j] == Approx(m_star[j]).margin(1e-8));
  // The optimum is unconstrained indeed (else the comparison would mean nothing).
  for (size_t j = 0; j < H; ++j) REQUIRE(std::abs(m_star[j]) < 10);
  // And the gradient there is zero (mpc_cost's gradient, the thing the solver follows).
  std::vector<double> g(H);
  lesson13::mpc_cost(model, p, m_star, g);
  for (double v : g) REQUIRE(std::abs(v) < 1e-9);
}

TEST_CASE("lesson13 mpc: project_moves is the Euclidean projection onto the bounds and the rate limit",
          "[lesson13][mpc]") {
  lesson13::MpcProblem p;
  p.u_min = 0.0;
  p.u_max = 1.0;
  p.du_max = 0.05;
  p.u_prev = 0.5;
  nn::Rng rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    const size_t H = 2 + static_cast<size_t>(rng.below(30));
    std::vector<double> x0(H), x(H);
    for (double& v : x0) v = rng.uniform(-0.5f, 1.5f);
    x = x0;
    lesson13::project_moves(p, x, 20000, 1e-15);
    // Feasible...
    for (size_t j = 0; j < H; ++j) {
      REQUIRE(x[j] >= p.u_min - 1e-9);
      REQUIRE(x[j] <= p.u_max + 1e-9);
      REQUIRE(std::abs(x[j] - (j == 0 ? p.u_prev : x[j - 1])) <= p.du_max + 1e-9);
    }
    // ... and the nearest feasible point: (x0 - x) . (z - x) <= 0 for every feasible z (the
    // variational inequality of a projection onto a convex set). z: random feasible paths.
    for (int k = 0; k < 50; ++k) {
      std::vector<double> z(H);
      double prev = p.u_prev;
      for (size_t j = 0; j < H; ++j) {
        const double lo = std::max(p.u_min, prev - p.du_max), hi = std::min(p.u_max, prev + p.du_max);
        z[j] = lo + (hi - lo) * rng.uniform();
        prev = z[j];
      }
      double dot = 0;
      for (size_t j = 0; j < H; ++j) dot += (x0[j] - x[j]) * (z[j] - x[j]);
      REQUIRE(dot <= 1e-7);
    }
  }
  // A feasible point is its own projection, bit for bit.
  std::vector<double> f = {0.52, 0.55, 0.58, 0.6};
  const std::vector<double> f0 = f;
  lesson13::project_moves(p, f);
  REQUIRE(f == f0);
}

TEST_CASE("lesson13 mpc: the MPC holds its constraints exactly in the loop and beats the PI where it should",
          "[lesson13][mpc]") {
  // A quick model (as lesson13 --part mpc --quick trains it).
  lessons::TankConfig cfg;
  cfg.steps = 6000;
  cfg.seed = 13;
  lesson13::PlantModelConfig pmc;
  pmc.hidden = {16, 16};
  pmc.epochs = 4;
  pmc.nk = 10;  // as the mpc part: no pump lags newer than 10 steps (plant_model.h says why)
  const lesson13::PlantModel model = lesson13::train_plant_model(lesson13::identification_series(cfg), pmc, 13);
  lesson13::MpcConfig mc;
  mc.horizon = 40;
  mc.solver.max_iters = 12;
  std::vector<lesson13::Scenario> scs = lesson13::standard_scenarios(true);
  const lessons::TankConfig tank;

  // Constraints: a tight rate limit (0.01 per step) makes the rate constraint bind on every
  // setpoint step: the MPC's commands stay inside it and the range exactly (no tolerance
  // beyond the metrics' 1e-9), while the PI, tuned without it, violates it.
  lesson13::Scenario sc = scs[0];
  sc.constraints.du_max = 0.01;
  lesson13::MpcController mpc(model, mc);
  const lesson13::ClosedLoopRun rm = lesson13::run_closed_loop(sc, mpc);
  lesson13::PiLoopController pi(tank.kp, tank.ki);
  const lesson13::ClosedLoopRun rp = lesson13::run_closed_loop(sc, pi);
  int at_limit = 0;
  for (size_t t = 1; t < rm.u.size(); ++t) {
    REQUIRE(rm.u[t] >= 0.0);
    REQUIRE(rm.u[t] <= 1.0);
    const double du = std::abs(rm.u[t] - rm.u[t - 1]);
    REQUIRE(du <= sc.constraints.du_max + 1e-15);  // the applied move is clamped to the limit
    if (du > sc.constraints.du_max - 1e-12) ++at_limit;
  }
  CAPTURE(at_limit, rm.metrics.rate_violations, rp.metrics.rate_violations);
  REQUIRE(at_limit > 10);  // the constraint was active, so holding it meant something
  REQUIRE(rm.metrics.constraint_violations == 0);
  REQUIRE(rp.metrics.rate_violations > 0);

  // Where it should win: the drain steps at a constant setpoint. Why: the drain is an
  // unmeasured constant outflow, which the MPC's disturbance estimate turns into a bias on
  // every predicted change, so it re-plans the whole horizon (through the model's 20-step
  // dead time) as soon as the level starts to fall; the PI, detuned to stay stable with that
  // dead time (kp = 1, ki = 0.012), integrates the error slowly. The MPC's IAE must be lower.
  lesson13::MpcController mpc2(model, mc);
  const lesson13::ClosedLoopRun dm = lesson13::run_closed_loop(scs[1], mpc2);
  const lesson13::ClosedLoopRun dp = lesson13::run_closed_loop(scs[1], pi);
  CAPTURE(dm.metrics.iae, dp.metrics.iae);
  REQUIRE(dm.metrics.iae < dp.metrics.iae);
  REQUIRE(dm.metrics.constraint_violations == 0);

  // With the model exact (the linearised tank, small steps around its operating point, no
  // sensor noise), the MPC beats the PI on setpoint steps too: it plans through the dead time
  // instead of waiting for the error to show. IAE and overshoot both lower.
  lesson13::Scenario small;
  small.name = "small-steps";
  small.steps = 600;
  small.plant = tank;
  small.plant.level_noise = 0;
  small.plant.flow_noise = 0;
  small.level0 = 0.5;
  small.setpoint = {0.5, {{20, 0.53}, {300, 0.5}}};
  small.drain = {0.0, {}};
  small.dead_time = {tank.dead_time, {}};
  LinearMpc lmpc(tank_linearised(0.5), 60, 0.05);
  const lesson13::ClosedLoopRun lm = lesson13::run_closed_loop(small, lmpc);
  const lesson13::ClosedLoopRun lp = lesson13::run_closed_loop(small, pi);
  CAPTURE(lm.metrics.iae, lp.metrics.iae, lm.metrics.overshoot_pct, lp.metrics.overshoot_pct);
  REQUIRE(lm.metrics.iae < lp.metrics.iae);
  REQUIRE(lm.metrics.overshoot_pct < lp.metrics.overshoot_pct);
  REQUIRE(lm.metrics.constraint_violations == 0);
}

TEST_CASE("lesson13 mpc: a horizon not longer than the dead time is refused", "[lesson13][mpc]") {
  lesson13::PlantModelConfig pmc;
  const lesson13::PlantModel model(pmc, 1);
  lesson13::MpcConfig mc;
  mc.horizon = 20;
  lesson13::MpcController mpc(model, mc);
  const std::vector<lesson13::Scenario> scs = lesson13::standard_scenarios(true);
  REQUIRE_THROWS_WITH(lesson13::run_closed_loop(scs[0], mpc), Catch::Contains("must exceed the dead time"));
}
