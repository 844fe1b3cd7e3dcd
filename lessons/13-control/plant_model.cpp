// lessons/13-control/plant_model.cpp: the NARX plant model, its training, rollout and the rollout's
// gradient (see plant_model.h).
#include "lessons/13-control/plant_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>

#include "io/safetensors.h"
#include "nn/check.h"
#include "nn/optim.h"
#include "nn/rng.h"

namespace lesson13 {

namespace {

nn::MlpConfig mlp_config(const PlantModelConfig& c) {
  NN_CHECK(c.na >= 1 && c.nb >= 1, "PlantModelConfig: na and nb must be >= 1, got " << c.na << ", " << c.nb);
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

}  // namespace

PlantModel::PlantModel(const PlantModelConfig& c, uint64_t seed)
    : cfg(c), mlp([&] {
        nn::Rng rng(seed);
        return nn::Mlp(mlp_config(c), rng);
      }()) {}

void PlantModel::features(std::span<const float> levels, std::span<const float> pumps, float* x) const {
  NN_CHECK(levels.size() >= static_cast<size_t>(cfg.na) && pumps.size() >= static_cast<size_t>(cfg.nb),
           "PlantModel: need " << cfg.na << " levels and " << cfg.nb << " pump commands of history, got "
                               << levels.size() << " and " << pumps.size());
  const size_t L = levels.size(), P = pumps.size();
  for (int i = 0; i < cfg.na; ++i) x[i] = (levels[L - 1 - static_cast<size_t>(i)] - level_mean) / level_std;
  for (int j = 0; j < cfg.nb; ++j) x[cfg.na + j] = (pumps[P - 1 - static_cast<size_t>(j)] - pump_mean) / pump_std;
}

float PlantModel::predict_next(std::span<const float> levels, std::span<const float> pumps) const {
  std::vector<float> x(static_cast<size_t>(inputs()));
  features(levels, pumps, x.data());
  const float out = mlp.forward(x.data(), 1)[0];
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
  NN_CHECK(levels.size() >= static_cast<size_t>(cfg.na) && past_pumps.size() + 1 >= static_cast<size_t>(cfg.nb),
           "PlantModel::rollout: need " << cfg.na << " levels and " << cfg.nb - 1 << " past commands, got "
                                        << levels.size() << " and " << past_pumps.size());
  const size_t na = static_cast<size_t>(cfg.na), nb1 = static_cast<size_t>(cfg.nb - 1);
  std::vector<float> lev(levels.end() - static_cast<std::ptrdiff_t>(na), levels.end());
  std::vector<float> pu(past_pumps.end() - static_cast<std::ptrdiff_t>(nb1), past_pumps.end());
  lev.reserve(na + H);
  pu.reserve(nb1 + H);
  std::vector<float> x(static_cast<size_t>(inputs()));
  double y = lev.back();
  for (size_t k = 0; k < H; ++k) {
    pu.push_back(static_cast<float>(moves[k]));
    features(lev, pu, x.data());
    const float out = mlp.forward(x.data(), 1)[0];
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
  // Forward again, keeping every step's features (the MLP keeps only its last forward).
  std::vector<double> y_pred(H);
  rollout(levels, past_pumps, moves, bias, y_pred);
  const size_t na = static_cast<size_t>(cfg.na), nb = static_cast<size_t>(cfg.nb), nin = na + nb;
  std::vector<float> lev(levels.end() - static_cast<std::ptrdiff_t>(na), levels.end());
  std::vector<float> pu(past_pumps.end() - static_cast<std::ptrdiff_t>(nb - 1), past_pumps.end());
  std::vector<float> xs(H * nin);
  for (size_t k = 0; k < H; ++k) {
    pu.push_back(static_cast<float>(moves[k]));
    features(lev, pu, xs.data() + k * nin);
    lev.push_back(static_cast<float>(y_pred[k]));
  }
  // Backward through time. yhat_0 = y(t) is measured (no gradient); yhat_{k+1} = y_pred[k].
  // gl[j]: dJ/d yhat_j from the steps after j, gathered as they are visited (in reverse).
  //   yhat_{k+1} = yhat_k + dlevel_mean + dlevel_std * mlp(x_k) + bias
  //   x_k reads yhat_{k-i} (level lag i) and u_{k-j} (pump lag j; a move when k - j >= 0).
  std::vector<double> gl(H + 1, 0.0);
  std::fill(dmoves.begin(), dmoves.end(), 0.0);
  std::vector<float> dx(nin);
  for (size_t k = H; k-- > 0;) {
    const double G = dy_pred[k] + gl[k + 1];  // dJ/d yhat_{k+1}, complete now
    if (k >= 1) gl[k] += G;                   // the direct path yhat_k -> yhat_{k+1}
    const float dout = static_cast<float>(G * dlevel_std);
    mlp.forward(xs.data() + k * nin, 1);
    mlp.backward(&dout, 1, dx.data());
    for (size_t i = 0; i < na; ++i) {
      if (k >= i + 1) gl[k - i] += static_cast<double>(dx[i]) / level_std;
    }
    for (size_t j = 0; j < nb && j <= k; ++j) dmoves[k - j] += static_cast<double>(dx[na + j]) / pump_std;
  }
}

// ---- training ----------------------------------------------------------------------------------

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
