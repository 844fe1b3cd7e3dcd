// lessons/13-control/plant_model.cpp: the NARX plant model, its training, rollout and the rollout's
// gradient (see plant_model.h).
#include "lessons/13-control/plant_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>

#include "io/safetensors.h"
#include "kernels/linear.h"
#include "nn/ops.h"
#include "nn/check.h"
#include "nn/optim.h"
#include "nn/rng.h"

namespace lesson13 {

namespace {

nn::MlpConfig mlp_config(const PlantModelConfig& c) {
  NN_CHECK(c.na >= 1 && c.nb >= 1 && c.nk >= 0,
           "PlantModelConfig: na and nb must be >= 1 and nk >= 0, got " << c.na << ", " << c.nb << ", " << c.nk);
  nn::MlpConfig m;
  m.sizes = {c.na + c.nb};
  for (int h : c.hidden) {
    NN_CHECK(h >= 1, "PlantModelConfig: hidden sizes must be >= 1, got " << h);
    m.sizes.push_back(h);
  }
  m.sizes.push_back(1);
  m.activation = c.activation;
  return m;
}

std::string fstr(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);  // 9 significant digits: a float round-trips
  return buf;
}

// One window through the MLP at batch 1, with the plain-loop rung of the linear op
// (kernels::linear_forward_v1: one dot product per output). The MPC evaluates the network
// thousands of times per control step one window at a time (a rollout is sequential), and at
// batch 1 the cache-blocked sgemm that Mlp::forward calls for training batches spends more on
// packing and threads than on the 2-3 thousand multiply-adds. Same weights, same layout: the
// result agrees with Mlp::forward to float rounding (tests/test_lesson13_plant_model.cpp).
struct Acts {
  std::vector<std::vector<float>> pre, post;  // per layer, as Mlp keeps them
};

void act_forward(nn::Activation a, float* out, const float* in, int64_t n) {
  switch (a) {
    case nn::Activation::ReLU: nn::relu_forward(out, in, n); break;
    case nn::Activation::Tanh: nn::tanh_forward(out, in, n); break;
    case nn::Activation::Sigmoid: nn::sigmoid_forward(out, in, n); break;
  }
}

void act_backward(nn::Activation a, float* din, const float* dout, const float* pre, const float* post, int64_t n) {
  switch (a) {
    case nn::Activation::ReLU: nn::relu_backward(din, dout, pre, n); break;
    case nn::Activation::Tanh: nn::tanh_backward(din, dout, post, n); break;
    case nn::Activation::Sigmoid: nn::sigmoid_backward(din, dout, post, n); break;
  }
}

float net_forward1(nn::Mlp& mlp, const float* x, Acts& a) {
  std::vector<nn::Linear>& layers = mlp.layers();
  a.pre.resize(layers.size());
  a.post.resize(layers.size());
  const float* h = x;
  for (size_t l = 0; l < layers.size(); ++l) {
    const nn::Linear& L = layers[l];
    a.pre[l].resize(static_cast<size_t>(L.out_features));
    a.post[l].resize(static_cast<size_t>(L.out_features));
    kernels::linear_forward_v1(a.pre[l].data(), h, L.weight.data(), L.bias.data(), 1, L.in_features, L.out_features);
    if (l + 1 == layers.size()) return a.pre[l][0];
    act_forward(mlp.config().activation, a.post[l].data(), a.pre[l].data(), L.out_features);
    h = a.post[l].data();
  }
  return 0.0f;  // unreachable: an Mlp has a layer
}

// d(out)/dx * dout -> dx (inputs()), from the activations of net_forward1 on x. No weight
// gradients: the MPC changes the moves, not the model.
void net_backward1(nn::Mlp& mlp, const float* x, const Acts& a, float dout, float* dx) {
  std::vector<nn::Linear>& layers = mlp.layers();
  std::vector<float> g(1, dout), gin, gpre;
  for (size_t l = layers.size(); l-- > 0;) {
    const nn::Linear& L = layers[l];
    float* dst = dx;
    if (l > 0) {
      gin.assign(static_cast<size_t>(L.in_features), 0.0f);
      dst = gin.data();
    }
    const float* inp = l == 0 ? x : a.post[l - 1].data();
    kernels::linear_backward_v1<float>(dst, nullptr, nullptr, g.data(), inp, L.weight.data(), 1, L.in_features,
                                       L.out_features);
    if (l == 0) break;
    gpre.assign(gin.size(), 0.0f);
    act_backward(mlp.config().activation, gpre.data(), gin.data(), a.pre[l - 1].data(), a.post[l - 1].data(),
                 static_cast<int64_t>(gin.size()));
    g.swap(gpre);
  }
}

}  // namespace

PlantModel::PlantModel(const PlantModelConfig& c, uint64_t seed)
    : cfg(c), mlp([&] {
        nn::Rng rng(seed);
        return nn::Mlp(mlp_config(c), rng);
      }()) {}

void PlantModel::features(std::span<const float> levels, std::span<const float> pumps, float* x) const {
  NN_CHECK(levels.size() >= static_cast<size_t>(cfg.na) && pumps.size() >= static_cast<size_t>(pump_window()),
           "PlantModel: need " << cfg.na << " levels and " << pump_window() << " pump commands of history, got "
                               << levels.size() << " and " << pumps.size());
  const size_t L = levels.size(), P = pumps.size(), nk = static_cast<size_t>(cfg.nk);
  for (int i = 0; i < cfg.na; ++i) x[i] = (levels[L - 1 - static_cast<size_t>(i)] - level_mean) / level_std;
  for (int j = 0; j < cfg.nb; ++j) x[cfg.na + j] = (pumps[P - 1 - nk - static_cast<size_t>(j)] - pump_mean) / pump_std;
}

float PlantModel::predict_next(std::span<const float> levels, std::span<const float> pumps) const {
  std::vector<float> x(static_cast<size_t>(inputs()));
  features(levels, pumps, x.data());
  Acts acts;
  const float out = net_forward1(mlp, x.data(), acts);
  return levels.back() + dlevel_mean + dlevel_std * out;
}

std::vector<float> PlantModel::one_step_predictions(const lessons::Series& s) const {
  const std::vector<float> y = s.channel("level");
  const std::vector<float> u = s.channel("pump");
  std::vector<float> pred(y.begin(), y.end());  // persistence where there is too little history
  const int n = s.steps;
  const int first = lag() - 1;
  if (n <= first) return pred;
  // All windows in one batch: the MLP's forward over (rows, inputs).
  const int rows = n - first;
  std::vector<float> x(static_cast<size_t>(rows) * static_cast<size_t>(inputs()));
  for (int t = first; t < n; ++t) {
    features(std::span<const float>(y.data(), static_cast<size_t>(t) + 1),
             std::span<const float>(u.data(), static_cast<size_t>(t) + 1),
             x.data() + static_cast<size_t>(t - first) * static_cast<size_t>(inputs()));
  }
  const float* out = mlp.forward(x.data(), rows);
  for (int t = first; t < n; ++t) pred[static_cast<size_t>(t)] = y[static_cast<size_t>(t)] + dlevel_mean + dlevel_std * out[t - first];
  return pred;
}

namespace {

// The rollout's working arrays: levels and pumps in time order, the known history first.
struct RolloutTape {
  std::vector<float> lev;  // na measured levels, then the H predictions
  std::vector<float> pu;   // nb - 1 past commands, then the H moves
};

}  // namespace

void PlantModel::rollout(std::span<const float> levels, std::span<const float> past_pumps,
                         std::span<const double> moves, double bias, std::span<double> y_pred) const {
  const size_t H = moves.size();
  NN_CHECK(y_pred.size() == H, "PlantModel::rollout: y_pred holds " << y_pred.size() << ", expected " << H);
  NN_CHECK(levels.size() >= static_cast<size_t>(cfg.na) && past_pumps.size() + 1 >= static_cast<size_t>(pump_window()),
           "PlantModel::rollout: need " << cfg.na << " levels and " << pump_window() - 1 << " past commands, got "
                                        << levels.size() << " and " << past_pumps.size());
  const size_t na = static_cast<size_t>(cfg.na), nb1 = static_cast<size_t>(pump_window() - 1);
  std::vector<float> lev(levels.end() - static_cast<std::ptrdiff_t>(na), levels.end());
  std::vector<float> pu(past_pumps.end() - static_cast<std::ptrdiff_t>(nb1), past_pumps.end());
  lev.reserve(na + H);
  pu.reserve(nb1 + H);
  std::vector<float> x(static_cast<size_t>(inputs()));
  Acts acts;
  double y = lev.back();
  for (size_t k = 0; k < H; ++k) {
    pu.push_back(static_cast<float>(moves[k]));
    features(lev, pu, x.data());
    const float out = net_forward1(mlp, x.data(), acts);
    y = y + dlevel_mean + static_cast<double>(dlevel_std) * out + bias;
    y_pred[k] = y;
    lev.push_back(static_cast<float>(y));
  }
}

void PlantModel::rollout_backward(std::span<const float> levels, std::span<const float> past_pumps,
                                  std::span<const double> moves, double bias, std::span<const double> dy_pred,
                                  std::span<double> dmoves) const {
  const size_t H = moves.size();
  NN_CHECK(dy_pred.size() == H && dmoves.size() == H, "PlantModel::rollout_backward: dy_pred and dmoves must hold "
                                                          << H << " values");
  NN_CHECK(levels.size() >= static_cast<size_t>(cfg.na) && past_pumps.size() + 1 >= static_cast<size_t>(pump_window()),
           "PlantModel::rollout_backward: need " << cfg.na << " levels and " << pump_window() - 1 << " past commands");
  // The forward again (as rollout does), keeping every step's features and activations.
  const size_t na = static_cast<size_t>(cfg.na), nb = static_cast<size_t>(cfg.nb), nin = na + nb;
  const size_t nk = static_cast<size_t>(cfg.nk);
  std::vector<float> lev(levels.end() - static_cast<std::ptrdiff_t>(na), levels.end());
  std::vector<float> pu(past_pumps.end() - static_cast<std::ptrdiff_t>(nk + nb - 1), past_pumps.end());
  std::vector<float> xs(H * nin);
  std::vector<Acts> acts(H);
  double y = lev.back();
  for (size_t k = 0; k < H; ++k) {
    pu.push_back(static_cast<float>(moves[k]));
    features(lev, pu, xs.data() + k * nin);
    const float out = net_forward1(mlp, xs.data() + k * nin, acts[k]);
    y = y + dlevel_mean + static_cast<double>(dlevel_std) * out + bias;
    lev.push_back(static_cast<float>(y));
  }
  // Backward through time. yhat_0 = y(t) is measured (no gradient); yhat_{k+1} = y_pred[k].
  // gl[j]: dJ/d yhat_j from the steps after j, gathered as they are visited (in reverse).
  //   yhat_{k+1} = yhat_k + dlevel_mean + dlevel_std * mlp(x_k) + bias
  //   x_k reads yhat_{k-i} (level lag i) and u_{k-nk-j} (pump lag j; a move when k-nk-j >= 0).
  std::vector<double> gl(H + 1, 0.0);
  std::fill(dmoves.begin(), dmoves.end(), 0.0);
  std::vector<float> dx(nin);
  for (size_t k = H; k-- > 0;) {
    const double G = dy_pred[k] + gl[k + 1];  // dJ/d yhat_{k+1}, complete now
    if (k >= 1) gl[k] += G;                   // the direct path yhat_k -> yhat_{k+1}
    const float dout = static_cast<float>(G * dlevel_std);
    net_backward1(mlp, xs.data() + k * nin, acts[k], dout, dx.data());
    for (size_t i = 0; i < na; ++i) {
      if (k >= i + 1) gl[k - i] += static_cast<double>(dx[i]) / level_std;
    }
    for (size_t j = 0; j < nb && nk + j <= k; ++j) dmoves[k - nk - j] += static_cast<double>(dx[na + j]) / pump_std;
  }
}

// ---- training ----------------------------------------------------------------------------------

double rollout_loss_backward(PlantModel& m, const std::vector<float>& y, const std::vector<float>& u,
                             const std::vector<int>& starts, int K) {
  const int B = static_cast<int>(starts.size());
  NN_CHECK(B >= 1 && K >= 1, "rollout_loss_backward: need windows and K >= 1");
  const size_t na = static_cast<size_t>(m.cfg.na), nb = static_cast<size_t>(m.cfg.nb), nk = static_cast<size_t>(m.cfg.nk);
  const size_t nin = na + nb;
  for (int t0 : starts) {
    NN_CHECK(t0 >= m.lag() - 1 && t0 + K < static_cast<int>(y.size()) && y.size() == u.size(),
             "rollout_loss_backward: window at " << t0 << " of " << K << " steps does not fit the series");
  }
  // Forward: step k of every window in one batch. lev[b]: the na measured levels, then the K
  // predictions.
  std::vector<std::vector<double>> lev(static_cast<size_t>(B));
  std::vector<float> X(static_cast<size_t>(K) * static_cast<size_t>(B) * nin);
  for (int b = 0; b < B; ++b) {
    const int t0 = starts[static_cast<size_t>(b)];
    lev[static_cast<size_t>(b)].assign(y.begin() + t0 + 1 - static_cast<std::ptrdiff_t>(na), y.begin() + t0 + 1);
  }
  for (int k = 0; k < K; ++k) {
    for (int b = 0; b < B; ++b) {
      const int t = starts[static_cast<size_t>(b)] + k;  // predicting y(t+1)
      const std::vector<double>& L = lev[static_cast<size_t>(b)];
      float* x = X.data() + (static_cast<size_t>(k) * static_cast<size_t>(B) + static_cast<size_t>(b)) * nin;
      for (size_t i = 0; i < na; ++i) x[i] = static_cast<float>((L[L.size() - 1 - i] - m.level_mean) / m.level_std);
      for (size_t j = 0; j < nb; ++j) x[na + j] = (u[static_cast<size_t>(t) - nk - j] - m.pump_mean) / m.pump_std;
    }
    const float* out = m.mlp.forward(X.data() + static_cast<size_t>(k) * static_cast<size_t>(B) * nin, B);
    for (int b = 0; b < B; ++b) {
      std::vector<double>& L = lev[static_cast<size_t>(b)];
      L.push_back(L.back() + m.dlevel_mean + static_cast<double>(m.dlevel_std) * out[b]);
    }
  }
  // The loss and dJ/d yhat (in units of the change's spread, so that the gradient's size
  // matches one-step training's: the weights see (dlevel_std * dJ/dyhat) / dlevel_std^2).
  const size_t K1 = static_cast<size_t>(K) + 1;
  std::vector<double> gl(static_cast<size_t>(B) * K1, 0.0);
  double loss = 0;
  const double scale = 1.0 / (static_cast<double>(B) * K);
  const double unit = 1.0 / (static_cast<double>(m.dlevel_std) * m.dlevel_std);
  for (int b = 0; b < B; ++b) {
    const int t0 = starts[static_cast<size_t>(b)];
    for (int k = 0; k < K; ++k) {
      const double err = lev[static_cast<size_t>(b)][na + static_cast<size_t>(k)] - y[static_cast<size_t>(t0 + k + 1)];
      loss += err * err * scale;
      gl[static_cast<size_t>(b) * K1 + static_cast<size_t>(k) + 1] = 2.0 * err * scale * unit;
    }
  }
  // Backward through time: step k's forward again (the Mlp keeps only its last), then its
  // backward with the input gradient; level lag i of step k is yhat_{k-i} (a prediction
  // when k - i >= 1).
  for (const nn::Param& p : m.mlp.params()) std::fill(p.grad, p.grad + p.numel(), 0.0f);
  std::vector<float> dout(static_cast<size_t>(B)), dX(static_cast<size_t>(B) * nin);
  for (int k = K - 1; k >= 0; --k) {
    for (int b = 0; b < B; ++b) {
      double* g = gl.data() + static_cast<size_t>(b) * K1;
      const double G = g[k + 1];  // complete: every later step has added to it
      if (k >= 1) g[k] += G;      // yhat_{k+1} = yhat_k + ...
      dout[static_cast<size_t>(b)] = static_cast<float>(G * m.dlevel_std);
    }
    m.mlp.forward(X.data() + static_cast<size_t>(k) * static_cast<size_t>(B) * nin, B);
    m.mlp.backward(dout.data(), B, dX.data());
    for (int b = 0; b < B; ++b) {
      double* g = gl.data() + static_cast<size_t>(b) * K1;
      for (size_t i = 0; i < na; ++i) {
        if (static_cast<size_t>(k) >= i + 1) {
          g[static_cast<size_t>(k) - i] += static_cast<double>(dX[static_cast<size_t>(b) * nin + i]) / m.level_std;
        }
      }
    }
  }
  return loss * unit;  // the loss whose gradient the weights now hold
}

namespace {

// Fine-tuning on rollouts (PlantModelConfig::rollout_steps): B windows at a time, each K steps
// from a measured history; returns the mean rollout MSE (m^2) of the first and last epoch.
std::pair<double, double> finetune_rollouts(PlantModel& m, const std::vector<float>& y, const std::vector<float>& u,
                                            const PlantModelConfig& cfg, uint64_t seed) {
  const int K = cfg.rollout_steps;
  const int n = static_cast<int>(y.size());
  const int first = m.lag() - 1;  // the first t with a full history
  const int stride = 3;
  std::vector<int> starts;
  for (int t = first; t + K < n; t += stride) starts.push_back(t);
  const int B = 32;
  NN_CHECK(static_cast<int>(starts.size()) >= B, "train_plant_model: too few windows for rollouts of " << K);
  nn::AdamConfig ac;
  ac.lr = cfg.rollout_lr;
  nn::Adam opt(m.mlp.params(), ac);
  nn::Rng rng(seed + 0x2545F4914F6CDD1DULL);
  const int per_epoch = static_cast<int>(starts.size()) / B;
  const int64_t total = static_cast<int64_t>(per_epoch) * cfg.rollout_epochs;
  int64_t step = 0;
  double first_loss = 0, last_loss = 0;
  std::vector<int> batch(static_cast<size_t>(B));
  for (int e = 0; e < cfg.rollout_epochs; ++e) {
    for (size_t i = starts.size() - 1; i > 0; --i) std::swap(starts[i], starts[rng.below(static_cast<uint32_t>(i + 1))]);
    double epoch_loss = 0;
    for (int bi = 0; bi < per_epoch; ++bi) {
      std::copy(starts.begin() + bi * B, starts.begin() + (bi + 1) * B, batch.begin());
      epoch_loss += rollout_loss_backward(m, y, u, batch, K) * static_cast<double>(m.dlevel_std) * m.dlevel_std;
      opt.config().lr = nn::cosine_lr(cfg.rollout_lr, 0.05f, static_cast<double>(step) / static_cast<double>(total));
      opt.step();
      ++step;
    }
    epoch_loss /= per_epoch;
    if (e == 0) first_loss = epoch_loss;
    last_loss = epoch_loss;
  }
  return {first_loss, last_loss};
}

}  // namespace

PlantModel train_plant_model(const lessons::Series& train, const PlantModelConfig& cfg, uint64_t seed,
                             TrainReport* report) {
  const auto t0 = std::chrono::steady_clock::now();
  PlantModel m(cfg, seed);
  const std::vector<float> y = train.channel("level");
  const std::vector<float> u = train.channel("pump");
  const int n = train.steps;
  const int first = m.lag() - 1;
  const int N = n - 1 - first;  // samples t = first .. n-2 (each has a next level)
  NN_CHECK(N >= cfg.batch && cfg.batch >= 1 && cfg.epochs >= 1,
           "train_plant_model: " << N << " windows for batch " << cfg.batch << " (need at least one batch), epochs "
                                 << cfg.epochs);

  // Normalisation from the training series (double sums: 20k floats).
  const auto mean_std = [](const std::vector<double>& v, float& mean, float& sd) {
    double s = 0, ss = 0;
    for (double x : v) s += x;
    const double mu = s / static_cast<double>(v.size());
    for (double x : v) ss += (x - mu) * (x - mu);
    mean = static_cast<float>(mu);
    sd = static_cast<float>(std::max(std::sqrt(ss / static_cast<double>(v.size())), 1e-6));
  };
  mean_std(std::vector<double>(y.begin(), y.end()), m.level_mean, m.level_std);
  mean_std(std::vector<double>(u.begin(), u.end()), m.pump_mean, m.pump_std);
  std::vector<double> dy(static_cast<size_t>(n - 1));
  for (int t = 0; t + 1 < n; ++t) dy[static_cast<size_t>(t)] = static_cast<double>(y[t + 1]) - y[t];
  mean_std(dy, m.dlevel_mean, m.dlevel_std);

  const size_t nin = static_cast<size_t>(m.inputs());
  std::vector<float> X(static_cast<size_t>(N) * nin), Y(static_cast<size_t>(N));
  for (int s = 0; s < N; ++s) {
    const int t = first + s;
    m.features(std::span<const float>(y.data(), static_cast<size_t>(t) + 1),
               std::span<const float>(u.data(), static_cast<size_t>(t) + 1), X.data() + static_cast<size_t>(s) * nin);
    Y[static_cast<size_t>(s)] = static_cast<float>((dy[static_cast<size_t>(t)] - m.dlevel_mean) / m.dlevel_std);
  }

  nn::AdamConfig ac;
  ac.lr = cfg.lr;
  nn::Adam opt(m.mlp.params(), ac);
  nn::Rng rng(seed + 0x51ED270B27AEB3ULL);
  std::vector<int> order(static_cast<size_t>(N));
  for (int i = 0; i < N; ++i) order[static_cast<size_t>(i)] = i;
  const int B = cfg.batch;
  const int per_epoch = N / B;  // the last partial batch is left out (reshuffled next epoch)
  const int64_t total = static_cast<int64_t>(per_epoch) * cfg.epochs;
  std::vector<float> xb(static_cast<size_t>(B) * nin), yb(static_cast<size_t>(B)), dout(static_cast<size_t>(B));
  int64_t step = 0;
  double last_epoch_loss = 0;
  for (int e = 0; e < cfg.epochs; ++e) {
    for (int i = N - 1; i > 0; --i) std::swap(order[static_cast<size_t>(i)], order[rng.below(static_cast<uint32_t>(i + 1))]);
    double epoch_loss = 0;
    for (int b = 0; b < per_epoch; ++b) {
      for (int r = 0; r < B; ++r) {
        const size_t s = static_cast<size_t>(order[static_cast<size_t>(b * B + r)]);
        std::copy(X.begin() + static_cast<std::ptrdiff_t>(s * nin), X.begin() + static_cast<std::ptrdiff_t>((s + 1) * nin),
                  xb.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r) * nin));
        yb[static_cast<size_t>(r)] = Y[s];
      }
      const float* out = m.mlp.forward(xb.data(), B);
      double loss = 0;
      for (int r = 0; r < B; ++r) {
        const float d = out[r] - yb[static_cast<size_t>(r)];
        loss += static_cast<double>(d) * d;
        dout[static_cast<size_t>(r)] = 2.0f * d / static_cast<float>(B);  // d mean((out - y)^2) / d out
      }
      epoch_loss += loss / B;
      opt.zero_grad();
      m.mlp.backward(dout.data(), B);
      opt.config().lr = nn::cosine_lr(cfg.lr, 0.05f, static_cast<double>(step) / static_cast<double>(total));
      opt.step();
      ++step;
    }
    last_epoch_loss = epoch_loss / per_epoch;
  }
  if (cfg.rollout_steps > 0) {
    const auto [first_loss, last_loss] = finetune_rollouts(m, y, u, cfg, seed);
    if (report != nullptr) {
      report->rollout_mse_first = first_loss;
      report->rollout_mse_last = last_loss;
    }
  }
  if (report != nullptr) {
    report->samples = N;
    report->train_mse_norm = last_epoch_loss;
    report->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return m;
}

lessons::Series identification_series(const lessons::TankConfig& cfg_in, const IdentificationOptions& o) {
  lessons::TankConfig cfg = cfg_in;
  cfg.setpoint_lo = o.setpoint_lo;
  cfg.setpoint_hi = o.setpoint_hi;
  NN_CHECK(o.dither >= 0 && o.dither <= 1, "identification_series: dither must be in [0, 1], got " << o.dither);
  lessons::TankSchedule schedule(cfg);
  lessons::TankPlant plant(cfg);
  lessons::PiController pi(cfg.kp, cfg.ki, cfg.dt);
  pi.reset(plant.u_rest());
  nn::Rng dither_rng(cfg.seed + 3 * 0x9E3779B97F4A7C15ULL);
  double dither = 0;
  int dither_left = 0;
  lessons::Series s;
  s.steps = cfg.steps;
  s.names = {"setpoint", "pump", "level", "outflow", "drain"};
  s.data.reserve(static_cast<size_t>(cfg.steps) * s.names.size());
  for (int t = 0; t < cfg.steps; ++t) {
    const lessons::TankSchedule::Step st = schedule.next();
    plant.set_drain(st.drain);
    const lessons::TankMeasurement m = plant.measure();
    if (dither_left == 0) {
      dither = o.dither * (2.0 * static_cast<double>(dither_rng.uniform()) - 1.0);
      dither_left = 5 + static_cast<int>(dither_rng.below(36));
    }
    --dither_left;
    const double u = std::clamp(pi.step(st.setpoint, m.level_meas) + dither, 0.0, 1.0);
    s.data.push_back(static_cast<float>(st.setpoint));
    s.data.push_back(static_cast<float>(u));
    s.data.push_back(static_cast<float>(m.level_meas));
    s.data.push_back(static_cast<float>(m.outflow_meas));
    s.data.push_back(static_cast<float>(m.drain));
    plant.step(u);
  }
  return s;
}

double one_step_rmse(const lessons::Series& s, const std::vector<float>& pred, int from) {
  const std::vector<float> y = s.channel("level");
  NN_CHECK(pred.size() == y.size() && from >= 0 && from + 1 < s.steps, "one_step_rmse: sizes or range");
  double ss = 0;
  int n = 0;
  for (int t = from; t + 1 < s.steps; ++t) {
    const double e = static_cast<double>(pred[static_cast<size_t>(t)]) - y[static_cast<size_t>(t) + 1];
    ss += e * e;
    ++n;
  }
  return std::sqrt(ss / n);
}

double rollout_rmse(const PlantModel& m, const lessons::Series& s, int steps, int stride) {
  NN_CHECK(steps >= 1 && stride >= 1, "rollout_rmse: steps and stride must be >= 1");
  const std::vector<float> y = s.channel("level");
  const std::vector<float> u = s.channel("pump");
  const int n = s.steps;
  const size_t past = static_cast<size_t>(m.pump_window() - 1);
  double ss = 0;
  long count = 0;
  std::vector<double> moves(static_cast<size_t>(steps)), pred(static_cast<size_t>(steps));
  for (int t = m.lag(); t + steps < n; t += stride) {
    for (int k = 0; k < steps; ++k) moves[static_cast<size_t>(k)] = u[static_cast<size_t>(t + k)];
    m.rollout(std::span<const float>(y.data(), static_cast<size_t>(t) + 1),
              std::span<const float>(u.data() + t - static_cast<std::ptrdiff_t>(past), past), moves, 0.0, pred);
    for (int k = 0; k < steps; ++k) {
      const double e = pred[static_cast<size_t>(k)] - y[static_cast<size_t>(t + k + 1)];
      ss += e * e;
      ++count;
    }
  }
  NN_CHECK(count > 0, "rollout_rmse: the series is too short for rollouts of " << steps);
  return std::sqrt(ss / static_cast<double>(count));
}

// ---- save / load -------------------------------------------------------------------------------

void save_plant_model(const PlantModel& m, const std::string& path) {
  std::vector<nn::TensorRef> refs;
  for (const nn::Param& p : m.mlp.params()) refs.push_back({p.name, p.shape, p.data});
  std::string hidden;
  for (size_t i = 0; i < m.cfg.hidden.size(); ++i) {
    if (i > 0) hidden.push_back(',');
    hidden.append(std::to_string(m.cfg.hidden[i]));
  }
  const std::map<std::string, std::string> meta = {
      {"lesson13.model", "narx-mlp"},
      {"lesson13.na", std::to_string(m.cfg.na)},
      {"lesson13.nb", std::to_string(m.cfg.nb)},
      {"lesson13.nk", std::to_string(m.cfg.nk)},
      {"lesson13.hidden", hidden},
      {"lesson13.activation", nn::activation_name(m.cfg.activation)},
      {"lesson13.level_mean", fstr(m.level_mean)},
      {"lesson13.level_std", fstr(m.level_std)},
      {"lesson13.pump_mean", fstr(m.pump_mean)},
      {"lesson13.pump_std", fstr(m.pump_std)},
      {"lesson13.dlevel_mean", fstr(m.dlevel_mean)},
      {"lesson13.dlevel_std", fstr(m.dlevel_std)},
  };
  nn::save_safetensors(path, refs, meta);
}

PlantModel load_plant_model(const std::string& path) {
  const nn::SafetensorsFile f = nn::read_safetensors(path);
  const auto get = [&](const std::string& k) -> const std::string& {
    const auto it = f.metadata.find("lesson13." + k);
    NN_CHECK(it != f.metadata.end(), path << ": not a lesson 13 plant model (no metadata lesson13." << k << ")");
    return it->second;
  };
  NN_CHECK(get("model") == "narx-mlp", path << ": model type '" << get("model") << "', expected narx-mlp");
  PlantModelConfig c;
  try {
    c.na = std::stoi(get("na"));
    c.nb = std::stoi(get("nb"));
    c.nk = std::stoi(get("nk"));
    c.hidden.clear();
    const std::string& h = get("hidden");
    for (size_t a = 0; a < h.size();) {
      const size_t b = std::min(h.find(',', a), h.size());
      c.hidden.push_back(std::stoi(h.substr(a, b - a)));
      a = b + 1;
    }
  } catch (const std::logic_error&) {
    NN_CHECK(false, path << ": malformed lesson13.na / nb / hidden metadata");
  }
  c.activation = nn::parse_activation(get("activation"));
  PlantModel m(c, 0);
  const auto getf = [&](const std::string& k) {
    try {
      return std::stof(get(k));
    } catch (const std::logic_error&) {
      NN_CHECK(false, path << ": lesson13." << k << " is not a number: '" << get(k) << "'");
    }
  };
  m.level_mean = getf("level_mean");
  m.level_std = getf("level_std");
  m.pump_mean = getf("pump_mean");
  m.pump_std = getf("pump_std");
  m.dlevel_mean = getf("dlevel_mean");
  m.dlevel_std = getf("dlevel_std");
  for (const nn::Param& p : m.mlp.params()) {
    const auto it = f.tensors.find(p.name);
    NN_CHECK(it != f.tensors.end(), path << ": no tensor " << p.name);
    NN_CHECK(it->second.shape == p.shape, path << ": tensor " << p.name << " has the wrong shape for its metadata");
    std::copy(it->second.data.begin(), it->second.data.end(), p.data);
  }
  NN_CHECK(f.tensors.size() == m.mlp.params().size(), path << ": " << f.tensors.size() << " tensors, the model has "
                                                           << m.mlp.params().size());
  return m;
}

}  // namespace lesson13
