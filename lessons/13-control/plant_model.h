// lessons/13-control/plant_model.h: the learned plant model of lesson 13, a NARX network.
//
// NARX (Nonlinear AutoRegressive with eXogenous input) is ARX (lessons/common/plant.h) with the
// linear map replaced by an MLP (nn::Mlp): the next level from the last na levels and the last
// nb pump commands. It predicts the CHANGE of level, normalised, so that "nothing happens" is
// an output near zero whatever the level:
//
//   x(t) = [ (y(t) - level_mean) / level_std, ..., (y(t-na+1) - level_mean) / level_std,
//            (u(t-nk) - pump_mean) / pump_std, ..., (u(t-nk-nb+1) - pump_mean) / pump_std ]
//   y(t+1) = y(t) + dlevel_mean + dlevel_std * mlp(x(t))          (+ bias, see rollout)
//
// (u(t) counts: at time t the controller's command is known, as in arx_predict.) The dead
// time d is learned from the data: the pump's history must reach back to u(t - d), so nb must
// be at least d + 1 (default nb = 40: dead times up to 39).
//
// For the MPC (mpc.h) the model runs forward H steps on its own predictions, the future pump
// moves as inputs (a rollout), and gives the gradient of a cost of the predicted levels with
// respect to those moves: backpropagation through the H copies of the MLP (through time, as
// lesson 05 did for the RNN), the input gradient of each copy as nn::Mlp::backward(..., dx)
// computes it. A rollout goes one window at a time, so predict_next, rollout and
// rollout_backward run the MLP's layers at batch 1 with the linear op's plain-loop rung
// (kernels::linear_forward_v1 / linear_backward_v1), not through Mlp::forward's sgemm (made
// for training batches: at batch 1 its packing and threads cost more than the arithmetic).
// The two agree to float rounding (tested).
//
// Everything is public: H3 exports the feature layout, the normalisation constants and the
// MLP's weights to C; H3's fault detector uses one_step_predictions' residuals.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lessons/common/plant.h"
#include "nn/layers.h"

namespace lesson13 {

struct PlantModelConfig {
  int na = 4;                   // level lags
  int nb = 40;                  // pump lags: nk + nb >= dead time + 1
  // The input delay (ARX's nk): the pump lags start at u(t - nk). 0 lets the data decide;
  // the mpc part sets it below the known dead time, because in closed-loop data the newest
  // commands correlate with the level through the CONTROLLER (the PI raises u when the level
  // falls), and a model free to use them learns "a high pump now means a falling level",
  // which an MPC then exploits (measured: see mpc_part.h).
  int nk = 0;
  std::vector<int> hidden = {32, 32};
  // tanh: smooth, so the MPC's cost is smooth in the moves (ReLU would make it piecewise
  // linear, with gradients that jump as units switch).
  nn::Activation activation = nn::Activation::Tanh;
  int epochs = 12;
  int batch = 64;
  float lr = 3e-3f;             // Adam, cosine-decayed to 5% over the run
  // Then, optionally, fine-tuning on the MPC's own use of the model: rollouts of this many
  // steps from measured histories (the data's pump commands as inputs, the model's own
  // levels fed back), the loss the mean squared error of every predicted level,
  // backpropagated through time (nn::Mlp::backward's input gradient carries it from each
  // step's level lags back to the step that predicted them). One-step training alone lets
  // small errors that compound over a horizon go unpunished. 0: off.
  int rollout_steps = 0;
  int rollout_epochs = 4;
  float rollout_lr = 1e-3f;
};

struct PlantModel {
  PlantModelConfig cfg;
  float level_mean = 0, level_std = 1;    // input normalisation of levels
  float pump_mean = 0, pump_std = 1;      // and of pump commands
  float dlevel_mean = 0, dlevel_std = 1;  // the output: the change of level per step
  // mutable: forward/backward keep their activations in the Mlp (not thread-safe: one model
  // per thread).
  mutable nn::Mlp mlp;

  PlantModel(const PlantModelConfig& c, uint64_t seed);
  int inputs() const { return cfg.na + cfg.nb; }
  int pump_window() const { return cfg.nk + cfg.nb; }  // pump history the features read
  int lag() const { return cfg.na > pump_window() ? cfg.na : pump_window(); }  // history needed

  // The features x(t) from histories in time order (the newest LAST: levels.back() = y(t),
  // pumps.back() = u(t)); at least na / nk + nb long. x: inputs() floats.
  void features(std::span<const float> levels, std::span<const float> pumps, float* x) const;
  // y(t+1) (without bias).
  float predict_next(std::span<const float> levels, std::span<const float> pumps) const;
  // One-step-ahead predictions over a series with "level" and "pump" channels: row t
  // predicts level(t+1) from data up to t; rows t < lag() - 1 hold level(t) (persistence),
  // as arx_predict does. The last row is a forecast past the end.
  std::vector<float> one_step_predictions(const lessons::Series& s) const;

  // The rollout: from the measured history (levels: at least na, the newest y(t); past_pumps:
  // at least nk + nb - 1, the newest u(t-1)) and H future moves u(t..t+H-1), the predicted levels
  // y_pred[k] = y(t+k+1), k = 0..H-1. bias is added to every predicted change (the MPC's
  // disturbance estimate: an unmeasured drain is a constant change per step).
  void rollout(std::span<const float> levels, std::span<const float> past_pumps, std::span<const double> moves,
               double bias, std::span<double> y_pred) const;
  // The gradient of a cost J(y_pred) w.r.t. the moves, given dJ/dy_pred (H): backprop through
  // the rollout (its forward is recomputed, keeping each step's activations). dmoves (H) is
  // assigned; the weights' gradients are left alone.
  void rollout_backward(std::span<const float> levels, std::span<const float> past_pumps,
                        std::span<const double> moves, double bias, std::span<const double> dy_pred,
                        std::span<double> dmoves) const;
};

struct TrainReport {
  int samples = 0;
  double train_mse_norm = 0;  // final epoch's mean loss on normalised changes
  double rollout_mse_first = 0, rollout_mse_last = 0;  // fine-tuning's rollout loss (m^2), first and last epoch
  double seconds = 0;
};

// Trains on every window of a series with "level" and "pump" channels (the normalisation
// from the same series). Deterministic for a seed.
PlantModel train_plant_model(const lessons::Series& train, const PlantModelConfig& cfg, uint64_t seed,
                             TrainReport* report = nullptr);

// One step of the rollout fine-tuning: rollouts of K steps from each window start t0 (the
// model fed its own levels, the series' pump commands), the loss
//   J = mean over windows and steps of (yhat - y)^2 / dlevel_std^2
// returned, and its gradient w.r.t. the MLP's weights ASSIGNED to their grads (backprop
// through time). The fine-tuning's epochs report J * dlevel_std^2 (m^2).
double rollout_loss_backward(PlantModel& m, const std::vector<float>& y, const std::vector<float>& u,
                             const std::vector<int>& starts, int K);

// Identification data: the tank under its PI, the setpoint schedule widened to the range the
// controller will be asked to work in, with a random dither added to the pump command (a
// level held for 5-40 steps, uniform in +-dither): closed-loop data alone has the pump follow
// the level, and the model could not tell cause from effect. cfg.steps, seed, noise as given.
struct IdentificationOptions {
  double setpoint_lo = 0.06, setpoint_hi = 1.1;
  double dither = 0.15;
};
lessons::Series identification_series(const lessons::TankConfig& cfg, const IdentificationOptions& opts = {});

// Root-mean-square one-step error of predictions (as one_step_predictions gives) against the
// series' next levels, over rows [from, steps - 1).
double one_step_rmse(const lessons::Series& s, const std::vector<float>& pred, int from);

// The model as the MPC uses it: rollouts of `steps` steps from every `stride`-th measured
// history of the series (its pump commands as the moves, no bias), the RMSE of all the
// predicted levels against the measured ones (m).
double rollout_rmse(const PlantModel& m, const lessons::Series& s, int steps, int stride = 25);

// safetensors: the MLP's tensors (fc1.weight, ...), the config and normalisation in the
// metadata ("lesson13.na", ...). load checks the file's shapes against its metadata.
void save_plant_model(const PlantModel& m, const std::string& path);
PlantModel load_plant_model(const std::string& path);

}  // namespace lesson13
