// lessons/13-control/mpc.h: model-predictive control with a learned (or any) model, optimised by
// backpropagation through the model's rollout.
//
// At every control step the MPC looks H steps ahead. Its decision is the sequence of pump
// moves m[0..H-1] = u(t), ..., u(t+H-1); the model predicts the levels they lead to,
// y[k] = y(t+k+1), and the controller minimises
//
//   J(m) = q sum_{k<H} (ref[k] - y[k])^2  +  r_du sum_{j<H} (m[j] - m[j-1])^2,   m[-1] = u(t-1)
//   subject to  u_min <= m[j] <= u_max  and  |m[j] - m[j-1]| <= du_max,
//
// then applies m[0] only and solves again at t+1 with the new measurement (the receding
// horizon). With a dead time d, m[j] first shows in y[j+d]: the horizon must exceed the dead
// time (H > d) or no move is seen by the cost at all, and the model must know the last d
// commands (they are still in the pipe): the NARX model's pump history does.
//
// The solver (solve_mpc) is generic over the model: a RolloutModel gives the predictions
// and the gradient of the cost through them (for the NARX network: backprop through the H
// copies of the MLP, plant_model.h; for the linearised plant: the same recursion by hand).
// It is accelerated projected gradient (FISTA, Beck & Teboulle 2009) with a backtracking
// step size and an adaptive restart (O'Donoghue & Candes 2015):
//   x+ = P(v - grad J(v) / L),  L doubled until J(x+) <= J(v) + g.(x+ - v) + L/2 |x+ - v|^2
//   momentum v = x+ + (t_k - 1) / t_{k+1} (x+ - x), reset when J goes up (non-convex models)
// P is the Euclidean projection onto the constraint set (box AND rate limit), computed by
// Dykstra's alternating projections over three sets whose projections are closed-form: the
// box, the rate limits of the pairs (m[-1], m[0]), (m[1], m[2]), ... and those of the pairs
// (m[0], m[1]), (m[2], m[3]), ... (each pair projects onto |a - b| <= du_max alone).
// Stopping rule: the gradient mapping L |x+ - v|_inf <= tol (dJ/du units; it is |grad J|_inf
// where no constraint is active, and zero exactly at a KKT point of the constrained problem;
// scale-free in L, so a large step-size estimate cannot fake convergence), or max_iters.
// The network's cost is computed through float arithmetic: the backtracking test allows
// cost_noise (absolute + relative to J) so that rounding does not read as a failed step and
// drive L up without end.
// Warm start: the previous step's solution shifted by one (m[1..H-1], m[H-1]), projected.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "lessons/13-control/plant_model.h"
#include "lessons/13-control/scenario.h"

namespace lesson13 {

// What the solver needs from a model: the predictions for given moves, and the gradient of a
// scalar of them with respect to the moves (a vector-Jacobian product).
class RolloutModel {
 public:
  virtual ~RolloutModel() = default;
  virtual void predict(std::span<const double> moves, std::span<double> y) = 0;
  virtual void vjp(std::span<const double> moves, std::span<const double> dy, std::span<double> dmoves) = 0;
};

// The linearised plant y(t+1) = a y(t) + b u(t-d) + c, from y(t) = y0 and the commands in the
// pipe (pipe[i] = u(t-d+i), i < d).
class LinearRollout : public RolloutModel {
 public:
  LinearRollout(double a, double b, double c, int dead_time, double y0, std::vector<double> pipe);
  void predict(std::span<const double> moves, std::span<double> y) override;
  void vjp(std::span<const double> moves, std::span<const double> dy, std::span<double> dmoves) override;

 private:
  double a_, b_, c_, y0_;
  int d_;
  std::vector<double> pipe_;
};

// The NARX network from a measured history (see PlantModel::rollout).
class NarxRollout : public RolloutModel {
 public:
  NarxRollout(const PlantModel& model, std::span<const float> levels, std::span<const float> past_pumps, double bias)
      : m_(model), levels_(levels), pumps_(past_pumps), bias_(bias) {}
  void predict(std::span<const double> moves, std::span<double> y) override {
    m_.rollout(levels_, pumps_, moves, bias_, y);
  }
  void vjp(std::span<const double> moves, std::span<const double> dy, std::span<double> dmoves) override {
    m_.rollout_backward(levels_, pumps_, moves, bias_, dy, dmoves);
  }

 private:
  const PlantModel& m_;
  std::span<const float> levels_, pumps_;
  double bias_;
};

struct MpcProblem {
  int horizon = 60;
  double q = 1.0;
  double r_du = 0.05;
  double u_min = 0.0, u_max = 1.0, du_max = 0.05;
  double u_prev = 0.0;      // u(t-1), applied
  std::vector<double> ref;  // horizon values: ref[k] for y(t+k+1)
};

struct SolverOptions {
  int max_iters = 200;
  double tol = 1e-6;      // on the gradient mapping L |x+ - v|_inf (units of dJ/du)
  double L0 = 1.0;        // initial Lipschitz estimate (the solver adapts it)
  double cost_noise = 0;  // slack of the backtracking test: cost_noise * (1 + |J|)
  int projection_sweeps = 500;
  double projection_tol = 1e-13;
};

struct MpcSolution {
  std::vector<double> moves;
  double cost = 0;
  int iterations = 0;
  int restarts = 0;
  bool converged = false;  // the stopping rule's test held (else max_iters)
  double last_step = 0;    // the gradient mapping L |x+ - v|_inf at the end
  double L = 1.0;          // the step-size estimate reached (reused as the next L0)
};

// J(moves) and, when grad is not empty, its gradient.
double mpc_cost(RolloutModel& model, const MpcProblem& p, std::span<const double> moves, std::span<double> grad = {});
// The Euclidean projection onto {u_min <= m <= u_max, |m[j] - m[j-1]| <= du_max} (Dykstra).
void project_moves(const MpcProblem& p, std::span<double> m, int sweeps = 500, double tol = 1e-13);
// Solves from `start` (projected first; empty: all u_prev).
MpcSolution solve_mpc(RolloutModel& model, const MpcProblem& p, std::span<const double> start,
                      const SolverOptions& opts = {});

// ---- the MPC in the loop ----------------------------------------------------------------------
struct MpcConfig {
  int horizon = 60;        // > the dead time (20) by the tank's time constant's worth
  double q = 1.0;
  double r_du = 1.0;
  SolverOptions solver = {30, 1e-4, 1.0, 1e-7, 200, 1e-12};
  // The observer. An unmeasured inflow or drain shifts every step's change of level by a
  // constant, so the MPC estimates a bias added to each predicted change; without it a model
  // error or a drain leaves a steady offset (the bias is the MPC's "integral action"). The
  // model runs alongside the plant on the observer's levels, corrected by each measurement:
  //   e = y(t) - yhat(t);  yhat(t) += level_gain * e;  bias += bias_gain * e
  //   yhat(t+1) = model(yhat history, u history) + bias
  // and the rollout starts from the corrected history. level_gain = 1 (the default) feeds the
  // model the measured levels (e is then the one-step prediction error); below 1 the
  // observer also filters the sensor noise out of the model's inputs, at the price of lag
  // (measured in the quick scenarios, bias_gain 0.01: level_gain 0.4 overshot the setpoint
  // steps by 29% against 25% with 1). bias_gain: a small gain, because every transient model
  // error also feeds the bias, which then overshoots like a wound-up integral (with
  // level_gain 0.4: bias_gain 0.04 overshot the setpoint steps by 36%, 0.01 by 29%; the
  // price is a slower answer to a drain). Measured before the rollout fine-tuning, r_du 1.
  double level_gain = 1.0;
  double bias_gain = 0.01;
};

// The learned model as the MPC's predictor: the constraints come from LoopStart (the
// scenario's), the reference is the current setpoint held over the horizon (no preview:
// the PI does not see the future either).
class MpcController : public Controller {
 public:
  MpcController(const PlantModel& model, const MpcConfig& cfg);
  std::string name() const override { return "mpc"; }
  void reset(const LoopStart& start) override;
  double step(int t, double setpoint, const Sensed& seen) override;
  const MpcSolution& last_solution() const { return last_; }
  double bias() const { return bias_; }
  long total_iterations() const { return total_iters_; }
  int solves() const { return solves_; }
  int unconverged() const { return unconverged_; }

 private:
  const PlantModel& model_;
  MpcConfig cfg_;
  LoopStart start_;
  std::vector<float> levels_, pumps_;  // the observer's levels, applied commands (time order)
  std::vector<double> warm_;
  double bias_ = 0, u_prev_ = 0, L_ = 1.0;
  MpcSolution last_;
  long total_iters_ = 0;
  int solves_ = 0, unconverged_ = 0;
};

}  // namespace lesson13
