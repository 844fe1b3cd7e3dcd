// lessons/13-control/plant_model.h: the learned plant model of lesson 13, a NARX network.
//
// NARX (Nonlinear AutoRegressive with eXogenous input) is ARX (lessons/common/plant.h) with the
// linear map replaced by an MLP (nn::Mlp): the next level from the last na levels and the last
// nb pump commands. It predicts the CHANGE of level, normalised, so that "nothing happens" is
// an output near zero whatever the level:
//
//   x(t) = [ (y(t) - level_mean) / level_std, ..., (y(t-na+1) - level_mean) / level_std,
//            (u(t) - pump_mean) / pump_std,   ..., (u(t-nb+1) - pump_mean) / pump_std ]
//   y(t+1) = y(t) + dlevel_mean + dlevel_std * mlp(x(t))          (+ bias, see rollout)
//
// (u(t) counts: at time t the controller's command is known, as in arx_predict.) The dead
// time d is learned from the data: the pump's history must reach back to u(t - d), so nb must
// be at least d + 1 (default nb = 40: dead times up to 39).
//
// For the MPC (mpc.h) the model runs forward H steps on its own predictions, the future pump
// moves as inputs (a rollout), and gives the gradient of a cost of the predicted levels with
// respect to those moves: backpropagation through the H copies of the MLP (through time, as
// lesson 05 did for the RNN), with the input gradient of nn::Mlp::backward.
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
  int nb = 40;                  // pump lags: >= dead time + 1
  std::vector<int> hidden = {32, 32};
  // tanh: smooth, so the MPC's cost is smooth in the moves (ReLU would make it piecewise
  // linear, with gradients that jump as units switch).
  nn::Activation activation = nn::Activation::Tanh;
  int epochs = 12;
  int batch = 64;
  float lr = 3e-3f;             // Adam, cosine-decayed to 5% over the run
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
  int lag() const { return cfg.na > cfg.nb ? cfg.na : cfg.nb; }  // history needed

  // The features x(t) from histories in time order (the newest LAST: levels.back() = y(t),
  // pumps.back() = u(t)); each at least na / nb long. x: inputs() floats.
  void features(std::span<const float> levels, std::span<const float> pumps, float* x) const;
  // y(t+1) (without bias).
  float predict_next(std::span<const float> levels, std::span<const float> pumps) const;
  // One-step-ahead predictions over a series with "level" and "pump" channels: row t
  // predicts level(t+1) from data up to t; rows t < lag() - 1 hold level(t) (persistence),
  // as arx_predict does. The last row is a forecast past the end.
  std::vector<float> one_step_predictions(const lessons::Series& s) const;

  // The rollout: from the measured history (levels: at least na, the newest y(t); past_pumps:
  // at least nb - 1, the newest u(t-1)) and H future moves u(t..t+H-1), the predicted levels
  // y_pred[k] = y(t+k+1), k = 0..H-1. bias is added to every predicted change (the MPC's
  // disturbance estimate: an unmeasured drain is a constant change per step).
  void rollout(std::span<const float> levels, std::span<const float> past_pumps, std::span<const double> moves,
               double bias, std::span<double> y_pred) const;
  // The gradient of a cost J(y_pred) w.r.t. the moves, given dJ/dy_pred (H): backprop through
  // the rollout (its forward is recomputed). dmoves (H) is assigned. Accumulates into the
  // MLP's weight gradients as a side effect (harmless: training zeroes them).
  void rollout_backward(std::span<const float> levels, std::span<const float> past_pumps,
                        std::span<const double> moves, double bias, std::span<const double> dy_pred,
                        std::span<double> dmoves) const;
};

struct TrainReport {
  int samples = 0;
  double train_mse_norm = 0;  // final epoch's mean loss on normalised changes
  double seconds = 0;
};

// Trains on every window of a series with "level" and "pump" channels (the normalisation
// from the same series). Deterministic for a seed.
PlantModel train_plant_model(const lessons::Series& train, const PlantModelConfig& cfg, uint64_t seed,
                             TrainReport* report = nullptr);

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

// safetensors: the MLP's tensors (fc1.weight, ...), the config and normalisation in the
// metadata ("lesson13.na", ...). load checks the file's shapes against its metadata.
void save_plant_model(const PlantModel& m, const std::string& path);
PlantModel load_plant_model(const std::string& path);

}  // namespace lesson13
