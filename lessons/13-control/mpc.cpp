// lessons/13-control/mpc.cpp: the MPC solver (accelerated projected gradient through a model's
// rollout), the projection onto the constraints, and the MPC controller (see mpc.h).
#include "lessons/13-control/mpc.h"

#include <algorithm>
#include <cmath>

#include <omp.h>

#include "nn/check.h"

namespace lesson13 {

// ---- the linearised plant ----------------------------------------------------------------------

LinearRollout::LinearRollout(double a, double b, double c, int dead_time, double y0, std::vector<double> pipe)
    : a_(a), b_(b), c_(c), y0_(y0), d_(dead_time), pipe_(std::move(pipe)) {
  NN_CHECK(d_ >= 0 && pipe_.size() == static_cast<size_t>(d_),
           "LinearRollout: the pipe must hold the dead time's " << d_ << " commands, got " << pipe_.size());
}

void LinearRollout::predict(std::span<const double> moves, std::span<double> y) {
  double level = y0_;
  for (size_t k = 0; k < moves.size(); ++k) {
    const long j = static_cast<long>(k) - d_;
    const double u = j < 0 ? pipe_[k] : moves[static_cast<size_t>(j)];
    level = a_ * level + b_ * u + c_;
    y[k] = level;
  }
}

void LinearRollout::vjp(std::span<const double> moves, std::span<const double> dy, std::span<double> dmoves) {
  // y[k] = a y[k-1] + b u(t+k-d) + c: dJ/dy[k] gathers dy[k] and a * dJ/dy[k+1].
  std::fill(dmoves.begin(), dmoves.end(), 0.0);
  double g_next = 0.0;
  for (size_t k = moves.size(); k-- > 0;) {
    const double g = dy[k] + a_ * g_next;
    const long j = static_cast<long>(k) - d_;
    if (j >= 0) dmoves[static_cast<size_t>(j)] += b_ * g;
    g_next = g;
  }
}

// ---- cost, projection, solver --------------------------------------------------------------------

double mpc_cost(RolloutModel& model, const MpcProblem& p, std::span<const double> m, std::span<double> grad) {
  const size_t H = m.size();
  NN_CHECK(p.ref.size() == H, "mpc_cost: ref holds " << p.ref.size() << " values, the moves " << H);
  std::vector<double> y(H);
  model.predict(m, y);
  double J = 0.0;
  std::vector<double> dy(H);
  for (size_t k = 0; k < H; ++k) {
    const double e = p.ref[k] - y[k];
    J += p.q * e * e;
    dy[k] = -2.0 * p.q * e;
  }
  for (size_t j = 0; j < H; ++j) {
    const double du = m[j] - (j == 0 ? p.u_prev : m[j - 1]);
    J += p.r_du * du * du;
  }
  if (!grad.empty()) {
    model.vjp(m, dy, grad);
    for (size_t j = 0; j < H; ++j) {
      const double du = m[j] - (j == 0 ? p.u_prev : m[j - 1]);
      grad[j] += 2.0 * p.r_du * du;
      if (j > 0) grad[j - 1] -= 2.0 * p.r_du * du;
    }
  }
  return J;
}

namespace {

// Projection of the pair (a, b) onto |a - b| <= delta: both move toward each other by half
// the excess (the nearest point of the band).
inline void project_pair(double& a, double& b, double delta) {
  const double diff = a - b;
  if (diff > delta) {
    const double ex = 0.5 * (diff - delta);
    a -= ex;
    b += ex;
  } else if (diff < -delta) {
    const double ex = 0.5 * (-delta - diff);
    a += ex;
    b -= ex;
  }
}

// The three sets of Dykstra's algorithm; s selects the set.
void project_set(int s, const MpcProblem& p, std::vector<double>& x) {
  const size_t H = x.size();
  if (s == 0) {
    for (double& v : x) v = std::clamp(v, p.u_min, p.u_max);
  } else if (s == 1) {  // (m[-1], m[0]) with m[-1] fixed, then (m[1], m[2]), (m[3], m[4]), ...
    x[0] = std::clamp(x[0], p.u_prev - p.du_max, p.u_prev + p.du_max);
    for (size_t j = 1; j + 1 < H; j += 2) project_pair(x[j], x[j + 1], p.du_max);
  } else {  // (m[0], m[1]), (m[2], m[3]), ...
    for (size_t j = 0; j + 1 < H; j += 2) project_pair(x[j], x[j + 1], p.du_max);
  }
}

double max_violation(const MpcProblem& p, std::span<const double> x) {
  double v = 0.0;
  for (size_t j = 0; j < x.size(); ++j) {
    v = std::max({v, p.u_min - x[j], x[j] - p.u_max});
    v = std::max(v, std::abs(x[j] - (j == 0 ? p.u_prev : x[j - 1])) - p.du_max);
  }
  return v;
}

}  // namespace

void project_moves(const MpcProblem& p, std::span<double> m, int sweeps, double tol) {
  NN_CHECK(p.u_min <= p.u_max && p.du_max > 0, "project_moves: need u_min <= u_max and du_max > 0");
  NN_CHECK(p.u_prev >= p.u_min - p.du_max && p.u_prev <= p.u_max + p.du_max,
           "project_moves: u_prev " << p.u_prev << " cannot reach [" << p.u_min << ", " << p.u_max
                                    << "] within one rate-limited move: no feasible moves");
  const size_t H = m.size();
  if (H == 0) return;
  std::vector<double> x(m.begin(), m.end());
  if (max_violation(p, x) <= 0.0) return;  // already feasible: the projection is the point
  // Dykstra: x_{s} = P_s(x + inc_s), inc_s = x + inc_s - x_{s}; converges to the projection
  // onto the intersection (plain alternating projections would find only some point of it).
  std::vector<std::vector<double>> inc(3, std::vector<double>(H, 0.0));
  std::vector<double> z(H), before(H);
  for (int it = 0; it < sweeps; ++it) {
    before = x;
    for (int s = 0; s < 3; ++s) {
      for (size_t j = 0; j < H; ++j) z[j] = x[j] + inc[static_cast<size_t>(s)][j];
      std::vector<double> y = z;
      project_set(s, p, y);
      for (size_t j = 0; j < H; ++j) inc[static_cast<size_t>(s)][j] = z[j] - y[j];
      x = y;
    }
    double change = 0.0;
    for (size_t j = 0; j < H; ++j) change = std::max(change, std::abs(x[j] - before[j]));
    // Stalled AND feasible: Dykstra's sweep-end points can stand still for a sweep while the
    // increments still move, so a small change alone is not convergence.
    if (change <= tol && max_violation(p, x) <= 1e-12) break;
  }
  std::copy(x.begin(), x.end(), m.begin());
}

MpcSolution solve_mpc(RolloutModel& model, const MpcProblem& p, std::span<const double> start,
                      const SolverOptions& o) {
  const size_t H = static_cast<size_t>(p.horizon);
  NN_CHECK(p.horizon >= 1 && p.ref.size() == H, "solve_mpc: horizon " << p.horizon << " with " << p.ref.size()
                                                                      << " reference values");
  NN_CHECK(p.q >= 0 && p.r_du >= 0 && o.max_iters >= 1 && o.tol > 0 && o.L0 > 0, "solve_mpc: bad weights or options");
  MpcSolution s;
  std::vector<double> x(H, p.u_prev);
  if (!start.empty()) {
    NN_CHECK(start.size() == H, "solve_mpc: the start holds " << start.size() << " moves, the horizon is " << H);
    x.assign(start.begin(), start.end());
  }
  project_moves(p, x, o.projection_sweeps, o.projection_tol);
  double fx = mpc_cost(model, p, x);
  std::vector<double> v = x, gv(H), xn(H), d(H);
  double t = 1.0, L = o.L0;
  for (int it = 1; it <= o.max_iters; ++it) {
    s.iterations = it;
    const double fv = mpc_cost(model, p, v, gv);
    double fxn = 0.0, step = 0.0;
    for (int tries = 0;; ++tries) {
      for (size_t j = 0; j < H; ++j) xn[j] = v[j] - gv[j] / L;
      project_moves(p, xn, o.projection_sweeps, o.projection_tol);
      fxn = mpc_cost(model, p, xn);
      double gd = 0.0, dd = 0.0;
      step = 0.0;
      for (size_t j = 0; j < H; ++j) {
        d[j] = xn[j] - v[j];
        gd += gv[j] * d[j];
        dd += d[j] * d[j];
        step = std::max(step, std::abs(d[j]));
      }
      // The quadratic upper bound at v holds with this L: a step of 1/L is safe.
      if (fxn <= fv + gd + 0.5 * L * dd + o.cost_noise * (1.0 + std::abs(fv)) || tries >= 60) break;
      L *= 2.0;
    }
    step *= L;  // the gradient mapping
    s.last_step = step;
    if (fxn > fx) {
      // The momentum overshot (J went up): restart from the best point without momentum.
      ++s.restarts;
      t = 1.0;
      v = x;
      if (step <= o.tol) {
        s.converged = true;
        break;
      }
      continue;
    }
    const double tn = 0.5 * (1.0 + std::sqrt(1.0 + 4.0 * t * t));
    for (size_t j = 0; j < H; ++j) v[j] = xn[j] + (t - 1.0) / tn * (xn[j] - x[j]);
    x = xn;
    fx = fxn;
    t = tn;
    if (step <= o.tol) {
      s.converged = true;
      break;
    }
    L = std::max(0.9 * L, 1e-12);  // let the estimate come down again where the cost is flatter
  }
  s.moves = x;
  s.cost = fx;
  s.L = L;
  return s;
}

// ---- the controller ----------------------------------------------------------------------------

MpcController::MpcController(const PlantModel& model, const MpcConfig& cfg) : model_(model), cfg_(cfg) {
  NN_CHECK(cfg.horizon >= 2 && cfg.bias_gain >= 0 && cfg.bias_gain <= 1 && cfg.level_gain >= 0 && cfg.level_gain <= 1,
           "MpcConfig: horizon must be >= 2, level_gain and bias_gain in [0, 1], got "
               << cfg.horizon << ", " << cfg.level_gain << ", " << cfg.bias_gain);
}

void MpcController::reset(const LoopStart& start) {
  NN_CHECK(cfg_.horizon > start.dead_time,
           "MPC: the horizon (" << cfg_.horizon << ") must exceed the dead time (" << start.dead_time
                                << "): a move shows in the level only dead_time steps later");
  NN_CHECK(model_.pump_window() > start.dead_time, "MPC: the model's pump history (nk + nb = "
                                                       << model_.pump_window() << ") does not reach the dead time "
                                                       << start.dead_time);
  start_ = start;
  levels_.assign(static_cast<size_t>(model_.cfg.na), static_cast<float>(start.level0));
  pumps_.assign(static_cast<size_t>(model_.pump_window() - 1), static_cast<float>(start.u_rest));
  warm_.assign(static_cast<size_t>(cfg_.horizon), start.u_rest);
  u_prev_ = start.u_rest;
  bias_ = 0.0;
  L_ = cfg_.solver.L0;
  total_iters_ = 0;
  solves_ = 0;
  unconverged_ = 0;
}

double MpcController::step(int, double setpoint, const Sensed& seen) {
  const size_t na = static_cast<size_t>(model_.cfg.na), nb1 = static_cast<size_t>(model_.pump_window() - 1);
  // The observer's correction: levels_.back() is yhat(t), predicted at t-1 (at t = 0: level0).
  const double e = seen.level - levels_.back();
  levels_.back() = static_cast<float>(levels_.back() + cfg_.level_gain * e);
  bias_ += cfg_.bias_gain * e;

  const std::span<const float> lv(levels_.data() + levels_.size() - na, na);
  const std::span<const float> pv(pumps_.data() + pumps_.size() - nb1, nb1);
  NarxRollout model(model_, lv, pv, bias_);
  MpcProblem p;
  p.horizon = cfg_.horizon;
  p.q = cfg_.q;
  p.r_du = cfg_.r_du;
  p.u_min = start_.constraints.u_min;
  p.u_max = start_.constraints.u_max;
  p.du_max = start_.constraints.du_max;
  p.u_prev = u_prev_;
  p.ref.assign(static_cast<size_t>(p.horizon), setpoint);
  // Warm start: yesterday's plan, one step on (its last move repeated).
  std::vector<double> start(warm_.begin() + 1, warm_.end());
  start.push_back(warm_.back());
  SolverOptions so = cfg_.solver;
  so.L0 = L_;
  // One thread: a controller's step runs on one core (as on a PLC), and the MLP at batch 1
  // is far too small for threads (the backward's two-thread sections would cost more in
  // waking the second thread than the arithmetic). The caller's setting is restored.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  last_ = solve_mpc(model, p, start, so);
  omp_set_num_threads(threads);
  L_ = last_.L;
  total_iters_ += last_.iterations;
  ++solves_;
  if (!last_.converged) ++unconverged_;
  warm_ = last_.moves;
  // The projection meets the constraints to ~1e-12; the applied move meets them exactly.
  const double lo = std::max(p.u_min, u_prev_ - p.du_max), hi = std::min(p.u_max, u_prev_ + p.du_max);
  const double u = std::clamp(last_.moves[0], lo, hi);

  // The observer's prediction yhat(t+1) with this move.
  pumps_.push_back(static_cast<float>(u));
  if (pumps_.size() > 8 * (nb1 + 1)) pumps_.erase(pumps_.begin(), pumps_.end() - static_cast<std::ptrdiff_t>(nb1));
  const double next =
      model_.predict_next(lv, std::span<const float>(pumps_.data() + pumps_.size() - nb1 - 1, nb1 + 1)) + bias_;
  levels_.push_back(static_cast<float>(next));
  if (levels_.size() > 8 * na) levels_.erase(levels_.begin(), levels_.end() - static_cast<std::ptrdiff_t>(na));
  u_prev_ = u;
  return u;
}

}  // namespace lesson13
