// Lesson 13, part soft-sensor: the unmeasured drain flow estimated from pump, level and outflow
// by a network and by a linear estimator, trained and evaluated on CSV plant logs
// (soft_sensor_part.h says what and why).
//
// Data flows: the shipped logs (write_tank_logs made them from simulate_tank) -> read_csv_log
// with tank_log_spec's unit mapping -> resample_csv_log to the control period -> windows of
// (pump, level, outflow), standardised -> the linear estimator (least squares) and the MLP
// (Adam) -> RMSE / MAE per regime on the test log -> the table, the verdict, the record.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <limits>
#include <sstream>

#include "io/repo_paths.h"
#include "kernels/harness.h"
#include "lessons/13-control/control_lesson.h"
#include "lessons/common/plant.h"
#include "nn/check.h"
#include "nn/layers.h"
#include "nn/ops.h"
#include "nn/optim.h"
#include "nn/rng.h"

namespace lesson13 {

// ---- the shipped logs ------------------------------------------------------------------------

const std::vector<TankLogFile>& tank_log_files() {
  static const std::vector<TankLogFile> files = {
      {"tank_log_train.csv", 1301, 5000, false},
      {"tank_log_test.csv", 1302, 3000, false},
      {"tank_log_uneven.csv", 1303, 2000, true},
  };
  return files;
}

nn::CsvLogSpec tank_log_spec() {
  nn::CsvLogSpec spec;
  spec.time_column = "time";
  spec.max_gap_s = 10.0;
  // Measurements are interpolated; the setpoint and the pump command are what an operator and a
  // controller SET, held until changed; the drain valve too steps between openings.
  //            signal      column         unit     quantity    min     max     rule
  spec.signals = {
      {"setpoint", "setpoint_cm", "cm", "length", 0.0, 1.5, nn::Resample::Hold},
      {"pump", "pump_pct", "%", "fraction", 0.0, 1.0, nn::Resample::Hold},
      // the level transmitter's noise (2 mm) can read a little below 0 or above the brim
      {"level", "level_cm", "cm", "length", -0.05, 1.6, nn::Resample::Linear},
      {"outflow", "outflow_lpm", "l/min", "flow", -0.01, 0.1, nn::Resample::Linear},
      {"drain", "drain_lpm", "l/min", "flow", 0.0, 0.1, nn::Resample::Hold},
  };
  return spec;
}

namespace {

// The drain valve is operated more often than in lessons 05-06 (there: 1 / 600 per step): a
// soft sensor can only learn the drain flows its training log shows, and at 1 / 600 a 5000 s
// log holds about four openings.
const double kDrainRate = 1.0 / 200;
const double kIsoStart = 1767600000.0;  // 2026-01-05T08:00:00Z: the uneven log's first row

lessons::TankConfig log_config(const TankLogFile& f) {
  lessons::TankConfig cfg;
  cfg.steps = f.steps;
  cfg.seed = f.seed;
  cfg.drain_rate = kDrainRate;
  return cfg;
}

}  // namespace

std::vector<std::string> write_tank_logs(const std::string& dir) {
  std::vector<std::string> paths;
  const nn::CsvLogSpec spec = tank_log_spec();
  for (const TankLogFile& f : tank_log_files()) {
    const lessons::TankConfig cfg = log_config(f);
    const lessons::Series s = lessons::simulate_tank(cfg);
    nn::CsvLogOut out;
    out.comments = {"nnlab lesson 13: a simulated tank run (lessons/common/plant.h, simulate_tank, default TankConfig, "
                    "seed " + std::to_string(f.seed) + ", " + std::to_string(f.steps) + " steps of " +
                        std::to_string(static_cast<int>(cfg.dt)) + " s)",
                    "made by: nnlab lesson13 --part soft-sensor --soft-sensor-write-logs DIR",
                    "units: setpoint_cm cm, pump_pct % of full command, level_cm cm (measured), outflow_lpm l/min "
                    "(measured), drain_lpm l/min (the TRUE drain: a real plant does not log it)"};
    out.time_column = "time";
    out.iso_time = f.uneven;
    std::vector<int> rows;  // which simulated steps the log keeps
    nn::Rng keep_rng(f.seed + 77);
    nn::Rng gap_rng(f.seed + 78);
    int dropped_in_a_row = 0;
    for (int t = 0; t < s.steps; ++t) {
      // uneven: a report-by-exception logger skips ~40 % of the seconds, never more than 4 in a row
      // (the first and last rows always stay, so the log spans the whole run)
      const bool drop = f.uneven && t > 0 && t + 1 < s.steps && dropped_in_a_row < 4 && keep_rng.uniform() < 0.4f;
      if (drop) {
        ++dropped_in_a_row;
        continue;
      }
      dropped_in_a_row = 0;
      rows.push_back(t);
    }
    for (const int t : rows) out.time.push_back((f.uneven ? kIsoStart : 0.0) + t * cfg.dt);
    const std::vector<std::pair<std::string, std::string>> channels = {
        {"setpoint", "setpoint_cm"}, {"pump", "pump_pct"}, {"level", "level_cm"}, {"outflow", "outflow_lpm"},
        {"drain", "drain_lpm"}};
    for (const auto& [channel, column] : channels) {
      nn::CsvColumnOut c;
      c.column = column;
      for (const nn::CsvSignal& sig : spec.signals) {
        if (sig.column == column) c.unit = sig.unit;
      }
      c.digits = 7;  // the simulator's values are floats: 7 digits keep what matters
      const int ch = s.index_of(channel);
      for (const int t : rows) {
        double v = s.at(t, ch);
        // uneven: ~3 % of the measured values missing (a transmitter's dropouts), never the truth
        const bool measured = channel == "level" || channel == "outflow";
        if (f.uneven && measured && t > 0 && gap_rng.uniform() < 0.03f) v = std::nan("");
        c.values.push_back(v);
      }
      out.columns.push_back(c);
    }
    const std::string path = (std::filesystem::path(dir) / f.name).string();
    nn::write_csv_log(path, out);
    paths.push_back(path);
  }
  return paths;
}

namespace {

// ---- windows: the estimators' input ------------------------------------------------------------
// Row t (t >= W - 1): x = [pump, level, outflow] at t - W + 1 .. t (oldest first), standardised
// per channel with the training log's mean and deviation; y = the true drain at t.
struct Windows {
  int rows = 0, features = 0;
  std::vector<float> x;       // (rows, features)
  std::vector<double> drain;  // (rows) m^3/s, the truth
  std::vector<double> level;  // (rows) m, measured at t: the regimes
  std::vector<double> outflow;
};

struct Scaling {
  double mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};
  double drain_mean = 0, drain_std = 1;
};

const char* kInputs[3] = {"pump", "level", "outflow"};

Scaling fit_scaling(const nn::CsvLog& log) {
  Scaling s;
  auto stats = [](const std::vector<double>& v, double& mean, double& sd) {
    mean = 0.0;
    for (double x : v) mean += x;
    mean /= static_cast<double>(v.size());
    double var = 0.0;
    for (double x : v) var += (x - mean) * (x - mean);
    sd = std::sqrt(var / static_cast<double>(v.size()));
    if (sd < 1e-12) sd = 1.0;  // a constant channel: leave it unscaled
  };
  for (int c = 0; c < 3; ++c) stats(log.signal(kInputs[c]), s.mean[c], s.std[c]);
  stats(log.signal("drain"), s.drain_mean, s.drain_std);
  return s;
}

Windows make_windows(const nn::CsvLog& log, const Scaling& sc, int W) {
  Windows w;
  const int n = log.rows();
  NN_CHECK(n >= W, log.source << ": " << n << " rows, fewer than the window of " << W);
  w.rows = n - W + 1;
  w.features = 3 * W;
  w.x.resize(static_cast<size_t>(w.rows) * w.features);
  const std::vector<double>* ch[3] = {&log.signal("pump"), &log.signal("level"), &log.signal("outflow")};
  for (int r = 0; r < w.rows; ++r) {
    const int t = r + W - 1;
    for (int k = 0; k < W; ++k) {
      for (int c = 0; c < 3; ++c) {
        const double v = (*ch[c])[static_cast<size_t>(t - W + 1 + k)];
        w.x[static_cast<size_t>(r) * w.features + static_cast<size_t>(k) * 3 + c] =
            static_cast<float>((v - sc.mean[c]) / sc.std[c]);
      }
    }
    w.drain.push_back(log.signal("drain")[static_cast<size_t>(t)]);
    w.level.push_back((*ch[1])[static_cast<size_t>(t)]);
    w.outflow.push_back((*ch[2])[static_cast<size_t>(t)]);
  }
  return w;
}

// ---- the linear estimator: least squares on the window ----------------------------------------
// Minimise sum_t (d_t - w . x_t - c)^2: the normal equations (A^T A + ridge I) theta = A^T d with
// A = [x | 1], solved by Cholesky in double. The ridge (1e-9 of the trace, fit_arx's) only keeps
// the solve stable when window columns are nearly collinear (consecutive samples are).
std::vector<double> fit_linear(const Windows& w) {
  const int F = w.features + 1;
  std::vector<double> ata(static_cast<size_t>(F) * F, 0.0), atd(static_cast<size_t>(F), 0.0), a(static_cast<size_t>(F));
  for (int r = 0; r < w.rows; ++r) {
    for (int i = 0; i < w.features; ++i) a[static_cast<size_t>(i)] = w.x[static_cast<size_t>(r) * w.features + i];
    a[static_cast<size_t>(F - 1)] = 1.0;
    for (int i = 0; i < F; ++i) {
      atd[static_cast<size_t>(i)] += a[static_cast<size_t>(i)] * w.drain[static_cast<size_t>(r)];
      for (int j = 0; j <= i; ++j) ata[static_cast<size_t>(i) * F + j] += a[static_cast<size_t>(i)] * a[static_cast<size_t>(j)];
    }
  }
  double trace = 0.0;
  for (int i = 0; i < F; ++i) trace += ata[static_cast<size_t>(i) * F + i];
  for (int i = 0; i < F; ++i) ata[static_cast<size_t>(i) * F + i] += 1e-9 * trace;
  // Cholesky: ata = L L^T, L in the lower triangle
  std::vector<double> L(static_cast<size_t>(F) * F, 0.0);
  for (int i = 0; i < F; ++i) {
    for (int j = 0; j <= i; ++j) {
      double s = ata[static_cast<size_t>(i) * F + j];
      for (int k = 0; k < j; ++k) s -= L[static_cast<size_t>(i) * F + k] * L[static_cast<size_t>(j) * F + k];
      if (i == j) {
        NN_CHECK(s > 0, "soft-sensor: the linear estimator's normal equations are singular (a constant log?)");
        L[static_cast<size_t>(i) * F + i] = std::sqrt(s);
      } else {
        L[static_cast<size_t>(i) * F + j] = s / L[static_cast<size_t>(j) * F + j];
      }
    }
  }
  std::vector<double> z(static_cast<size_t>(F)), theta(static_cast<size_t>(F));
  for (int i = 0; i < F; ++i) {  // L z = atd
    double s = atd[static_cast<size_t>(i)];
    for (int k = 0; k < i; ++k) s -= L[static_cast<size_t>(i) * F + k] * z[static_cast<size_t>(k)];
    z[static_cast<size_t>(i)] = s / L[static_cast<size_t>(i) * F + i];
  }
  for (int i = F - 1; i >= 0; --i) {  // L^T theta = z
    double s = z[static_cast<size_t>(i)];
    for (int k = i + 1; k < F; ++k) s -= L[static_cast<size_t>(k) * F + i] * theta[static_cast<size_t>(k)];
    theta[static_cast<size_t>(i)] = s / L[static_cast<size_t>(i) * F + i];
  }
  return theta;
}

std::vector<double> predict_linear(const std::vector<double>& theta, const Windows& w) {
  std::vector<double> p(static_cast<size_t>(w.rows));
  for (int r = 0; r < w.rows; ++r) {
    double s = theta.back();
    for (int i = 0; i < w.features; ++i) s += theta[static_cast<size_t>(i)] * w.x[static_cast<size_t>(r) * w.features + i];
    p[static_cast<size_t>(r)] = s;
  }
  return p;
}

// ---- the network: an MLP on the window ----------------------------------------------------------
std::vector<double> predict_network(nn::Mlp& mlp, const Windows& w, const Scaling& sc) {
  const float* out = mlp.forward(w.x.data(), w.rows);
  std::vector<double> p(static_cast<size_t>(w.rows));
  for (int r = 0; r < w.rows; ++r) p[static_cast<size_t>(r)] = sc.drain_mean + sc.drain_std * out[r];
  return p;
}

// ---- scores --------------------------------------------------------------------------------------
struct Score {
  int rows = 0;
  double rmse = 0.0, mae = 0.0;
};
const int kNumRegimes = 6;
const char* kRegimes[kNumRegimes] = {"all",       "drain_open", "drain_closed",
                                     "level_low", "level_high", "drain_beyond_train"};
const double kLowLevel = 0.55;  // m: the middle of the setpoint range [0.3, 0.8]

// drain_beyond_train: the true drain is larger than any the training log holds (an estimator
// must extrapolate there); train_max_drain is that largest value.
bool in_regime(int regime, const Windows& w, int r, double train_max_drain) {
  const double d = w.drain[static_cast<size_t>(r)], y = w.level[static_cast<size_t>(r)];
  switch (regime) {
    case 1: return d > 0.0;
    case 2: return d == 0.0;
    case 3: return y < kLowLevel;
    case 4: return y >= kLowLevel;
    case 5: return d > train_max_drain;
    default: return true;
  }
}

std::vector<Score> score(const std::vector<double>& pred, const Windows& w, double train_max_drain) {
  std::vector<Score> out(kNumRegimes);
  for (int g = 0; g < kNumRegimes; ++g) {
    double se = 0.0, ae = 0.0;
    int n = 0;
    for (int r = 0; r < w.rows; ++r) {
      if (!in_regime(g, w, r, train_max_drain)) continue;
      const double e = pred[static_cast<size_t>(r)] - w.drain[static_cast<size_t>(r)];
      se += e * e;
      ae += std::abs(e);
      ++n;
    }
    out[static_cast<size_t>(g)].rows = n;
    out[static_cast<size_t>(g)].rmse = n > 0 ? std::sqrt(se / n) : std::nan("");
    out[static_cast<size_t>(g)].mae = n > 0 ? ae / n : std::nan("");
  }
  return out;
}

std::string json_scores(const std::vector<Score>& s) {
  std::ostringstream js;
  js << "{";
  for (int g = 0; g < kNumRegimes; ++g) {
    js << (g ? ", " : "") << "\"" << kRegimes[g] << "\": {\"rows\": " << s[static_cast<size_t>(g)].rows
       << ", \"rmse\": " << jnum(s[static_cast<size_t>(g)].rmse) << ", \"mae\": " << jnum(s[static_cast<size_t>(g)].mae)
       << "}";
  }
  js << "}";
  return js.str();
}

std::string logs_dir(const SoftSensorOptions& o) {
  if (!o.logs.empty()) return o.logs;
  const std::string found = nn::find_in_repo("lessons/13-control/data");
  NN_CHECK(!found.empty(), "soft-sensor: lessons/13-control/data (the plant logs) not found near this program; "
                           "give --soft-sensor-logs DIR, or write them with --soft-sensor-write-logs DIR");
  return found;
}

}  // namespace

int run_soft_sensor_part(const Options& opts) {
  namespace fs = std::filesystem;
  SoftSensorOptions o = opts.soft_sensor;
  if (!o.write_logs.empty()) {
    for (const std::string& p : write_tank_logs(o.write_logs)) std::cout << "wrote " << p << "\n";
    return 0;
  }
  if (opts.quick) o.iters = std::min(o.iters, 300);
  std::cout << "== Soft sensor: the unmeasured drain flow from pump, level and outflow ==\n";

  // ---- the logs, through the CSV reader ----
  const std::string dir = logs_dir(o);
  const nn::CsvLogSpec spec = tank_log_spec();
  const double period = lessons::TankConfig{}.dt;
  const nn::CsvLog train = nn::resample_csv_log(nn::read_csv_log((fs::path(dir) / "tank_log_train.csv").string(), spec),
                                                spec, period);
  const nn::CsvLog test = nn::resample_csv_log(nn::read_csv_log((fs::path(dir) / "tank_log_test.csv").string(), spec),
                                               spec, period);
  std::cout << "logs      " << dir << ": tank_log_train.csv " << train.rows() << " rows, tank_log_test.csv "
            << test.rows() << " rows (units cm, %, l/min -> SI; resampled every " << period << " s)\n";

  // The uneven log: read, fill, resample, and compare with the simulation that wrote it.
  const TankLogFile& uf = tank_log_files()[2];
  const nn::CsvLog uneven_raw = nn::read_csv_log((fs::path(dir) / uf.name).string(), spec);
  const nn::CsvLog uneven = nn::resample_csv_log(uneven_raw, spec, period);
  const lessons::Series truth = lessons::simulate_tank(log_config(uf));
  double level_se = 0.0;
  int pump_exact = 0;
  const int ucount = std::min(uneven.rows(), truth.steps);
  for (int t = 0; t < ucount; ++t) {
    const double e = uneven.signal("level")[static_cast<size_t>(t)] - truth.at(t, truth.index_of("level"));
    level_se += e * e;
    // the log stores % with 7 digits: equal to the float command within that rounding
    const double du = uneven.signal("pump")[static_cast<size_t>(t)] - truth.at(t, truth.index_of("pump"));
    if (std::abs(du) < 1e-6) ++pump_exact;
  }
  const double level_rmse = std::sqrt(level_se / std::max(ucount, 1));
  const double pump_frac = static_cast<double>(pump_exact) / std::max(ucount, 1);
  std::cout << "resample  " << uf.name << ": " << uneven_raw.rows() << " uneven rows (ISO 8601), " << uneven_raw.filled
            << " missing values filled -> " << uneven.rows() << " rows every " << period << " s; level against the "
            << "simulation: RMSE " << std::setprecision(3) << 1000.0 * level_rmse << " mm (sensor noise 2 mm); held "
            << "pump equal to the command in " << std::setprecision(4) << 100.0 * pump_frac << " % of the seconds\n"
            << std::defaultfloat;

  // ---- windows ----
  const Scaling sc = fit_scaling(train);
  const Windows wtr = make_windows(train, sc, o.window);
  const Windows wte = make_windows(test, sc, o.window);

  // ---- the linear estimator ----
  const std::vector<double> theta = fit_linear(wtr);
  const std::vector<double> p_lin = predict_linear(theta, wte);

  // ---- the network ----
  nn::Rng rng(opts.seed);
  nn::MlpConfig mc;
  mc.sizes = {wtr.features, o.hidden, o.hidden, 1};
  mc.activation = nn::Activation::Tanh;
  nn::Mlp mlp(mc, rng);
  nn::AdamConfig ac;
  ac.lr = o.lr;
  nn::Adam adam(mlp.params(), ac);
  std::vector<float> xb(static_cast<size_t>(o.batch) * wtr.features), yb(static_cast<size_t>(o.batch)),
      dpred(static_cast<size_t>(o.batch));
  const double t0 = omp_get_wtime();
  double loss_sum = 0.0;
  int loss_n = 0;
  // Early stopping: the last 20 % of the training log (in time: other drain openings than the
  // first 80 % saw) is held out; every eval_every steps its RMSE is measured and the weights
  // with the lowest are kept. Without it the network learns the few drain flows the training
  // log holds by heart and is worse on new ones (the longer it trains, the worse).
  const int fit_rows = wtr.rows * 4 / 5;
  Windows wval;
  wval.rows = wtr.rows - fit_rows;
  wval.features = wtr.features;
  wval.x.assign(wtr.x.begin() + static_cast<std::ptrdiff_t>(fit_rows) * wtr.features, wtr.x.end());
  wval.drain.assign(wtr.drain.begin() + fit_rows, wtr.drain.end());
  wval.level.assign(wtr.level.begin() + fit_rows, wtr.level.end());
  wval.outflow.assign(wtr.outflow.begin() + fit_rows, wtr.outflow.end());
  std::vector<nn::Param> params = mlp.params();
  std::vector<std::vector<float>> best(params.size());
  double best_val = std::numeric_limits<double>::infinity();
  int best_it = 0;
  const int eval_every = std::max(1, std::min(100, o.iters / 10));
  auto keep_if_best = [&](int it) {
    const double v = score(predict_network(mlp, wval, sc), wval, 0.0)[0].rmse;
    if (v < best_val) {
      best_val = v;
      best_it = it;
      for (size_t i = 0; i < params.size(); ++i) best[i].assign(params[i].data, params[i].data + params[i].numel());
    }
  };
  for (int it = 0; it < o.iters; ++it) {
    for (int b = 0; b < o.batch; ++b) {
      const int r = static_cast<int>(rng.below(static_cast<uint32_t>(fit_rows)));
      std::copy_n(wtr.x.begin() + static_cast<std::ptrdiff_t>(r) * wtr.features, wtr.features,
                  xb.begin() + static_cast<std::ptrdiff_t>(b) * wtr.features);
      yb[static_cast<size_t>(b)] = static_cast<float>((wtr.drain[static_cast<size_t>(r)] - sc.drain_mean) / sc.drain_std);
    }
    adam.config().lr = nn::cosine_lr(o.lr, 0.05f, static_cast<double>(it) / o.iters);
    adam.zero_grad();
    const float* pred = mlp.forward(xb.data(), o.batch);
    const float loss = nn::mse_forward(pred, yb.data(), o.batch);
    nn::mse_backward(dpred.data(), pred, yb.data(), o.batch);
    mlp.backward(dpred.data(), o.batch);
    adam.step();
    NN_CHECK(std::isfinite(loss), "soft-sensor: the network's loss became " << loss << " at step " << it
                                                                            << ": try a smaller --soft-sensor-lr");
    if (it >= o.iters - std::max(1, o.iters / 10)) {
      loss_sum += loss;
      ++loss_n;
    }
    if ((it + 1) % eval_every == 0 || it + 1 == o.iters) keep_if_best(it + 1);
  }
  for (size_t i = 0; i < params.size(); ++i) std::copy(best[i].begin(), best[i].end(), params[i].data);
  const double train_seconds = omp_get_wtime() - t0;
  const std::vector<double> p_net = predict_network(mlp, wte, sc);
  std::cout << "network   MLP " << wtr.features << " -> " << o.hidden << " -> " << o.hidden << " -> 1 (tanh), "
            << mlp.num_params() << " parameters, " << o.iters << " Adam steps of " << o.batch << " windows in "
            << std::setprecision(3) << train_seconds << " s; last 10 % mean loss " << loss_sum / std::max(loss_n, 1)
            << " (standardised); kept the weights of step " << best_it << " (lowest RMSE on the held-out last 20 % "
            << "of the training log, " << 60000.0 * best_val << " l/min)\n"
            << "linear    least squares on the same window, " << theta.size() << " coefficients\n"
            << std::defaultfloat;

  // ---- the white-box reference: the outlet law with the simulator's own k ----
  const double k = lessons::TankConfig{}.outflow_coeff;
  std::vector<double> p_phys(static_cast<size_t>(wte.rows));
  for (int r = 0; r < wte.rows; ++r) {
    p_phys[static_cast<size_t>(r)] =
        wte.outflow[static_cast<size_t>(r)] - k * std::sqrt(std::max(wte.level[static_cast<size_t>(r)], 0.0));
  }

  // ---- scores on the test log, against the true drain ----
  struct Est {
    const char* name;
    int64_t params;
    std::vector<Score> s;
  };
  const double train_max_drain = *std::max_element(wtr.drain.begin(), wtr.drain.end());
  const std::vector<Est> est = {{"network", mlp.num_params(), score(p_net, wte, train_max_drain)},
                                {"linear", static_cast<int64_t>(theta.size()), score(p_lin, wte, train_max_drain)},
                                {"physics", 1, score(p_phys, wte, train_max_drain)}};
  std::cout << "\nRMSE / MAE of the drain estimate on tank_log_test.csv (l/min; the drain is 0 to 600 l/min when open)\n"
            << "  regime               rows     network            linear             physics (known k)\n";
  const double lpm = 60000.0;  // m^3/s -> l/min
  std::ostringstream verdict;
  std::ostringstream winner_json;
  for (int g = 0; g < kNumRegimes; ++g) {
    std::cout << "  " << std::left << std::setw(19) << kRegimes[g] << std::right << std::setw(6)
              << est[0].s[static_cast<size_t>(g)].rows;
    for (const Est& e : est) {
      std::ostringstream cell;
      cell << std::fixed << std::setprecision(2) << lpm * e.s[static_cast<size_t>(g)].rmse << " / "
           << lpm * e.s[static_cast<size_t>(g)].mae;
      std::cout << "     " << std::left << std::setw(14) << cell.str() << std::right;
    }
    std::cout << "\n";
    // the verdict, computed: the lower RMSE wins, within 2 % it is a tie
    const double rn = est[0].s[static_cast<size_t>(g)].rmse, rl = est[1].s[static_cast<size_t>(g)].rmse;
    std::string w = "tie";
    if (est[0].s[static_cast<size_t>(g)].rows == 0) {
      w = "none";
    } else if (rn < 0.98 * rl) {
      w = "network";
    } else if (rl < 0.98 * rn) {
      w = "linear";
    }
    winner_json << (g ? ", " : "") << "\"" << kRegimes[g] << "\": \"" << w << "\"";
    verdict << "  " << std::left << std::setw(19) << kRegimes[g] << std::right;
    if (w == "tie") {
      verdict << "a tie (RMSEs within 2 %)\n";
    } else if (w == "none") {
      verdict << "no rows in this regime\n";
    } else {
      const double ratio = w == "network" ? rl / rn : rn / rl;
      verdict << w << " wins, its RMSE " << std::setprecision(3) << ratio << "x smaller" << std::defaultfloat << "\n";
    }
  }
  std::cout << "\nwhich estimator wins where (lower RMSE; measured on this run, not assumed):\n" << verdict.str();
  const Score& pl = est[1].s[3];
  const Score& ph = est[1].s[4];
  const Score& bn = est[0].s[5];
  const Score& bl = est[1].s[5];
  if (bn.rows > 0) {
    std::cout << bn.rows << " test rows have a drain above the training log's largest (" << std::setprecision(4)
              << lpm * train_max_drain << " l/min): there the network's RMSE is " << lpm * bn.rmse
              << " l/min, the linear estimator's " << lpm * bl.rmse
              << (bn.rmse > 1.05 * bl.rmse ? " (the network interpolates between what it saw; outside that, the straight "
                                             "line extrapolates better)"
                                           : "")
              << "\n"
              << std::defaultfloat;
  }
  std::cout << "the linear estimator's RMSE at low level is " << std::setprecision(3) << pl.rmse / ph.rmse
            << "x its RMSE at high level"
            << (pl.rmse > 1.05 * ph.rmse ? " (the outlet's sqrt bends most at low level, where a straight line fits it worst)"
                                         : " (the sqrt's curvature does not show as a larger error at low level here)")
            << "\n"
            << std::defaultfloat;

  // ---- a file for the notebook: the test log with every estimate ----
  {
    nn::CsvLogOut out;
    out.comments = {"nnlab lesson 13, part soft-sensor: the drain estimates on tank_log_test.csv (row t: the window "
                    "ending at t)"};
    out.time_column = "time";
    for (int r = 0; r < wte.rows; ++r) out.time.push_back(test.time[static_cast<size_t>(r + o.window - 1)]);
    auto col = [&](const std::string& name, const std::string& unit, const std::vector<double>& v) {
      nn::CsvColumnOut c;
      c.column = name;
      c.unit = unit;
      c.values = v;
      c.digits = 7;
      out.columns.push_back(c);
    };
    col("level_m", "m", wte.level);
    col("outflow_lpm", "l/min", wte.outflow);
    col("drain_true_lpm", "l/min", wte.drain);
    col("drain_network_lpm", "l/min", p_net);
    col("drain_linear_lpm", "l/min", p_lin);
    col("drain_physics_lpm", "l/min", p_phys);
    const std::string path = (fs::path(opts.out_dir) / "soft_sensor_test.csv").string();
    nn::write_csv_log(path, out);
    std::cout << "wrote     " << path << "\n";
  }

  // ---- the record ----
  std::ostringstream js;
  js << "{\"target\": \"drain\", \"units\": \"m^3/s\", \"logs\": {\"train\": \"tank_log_train.csv\", \"test\": "
     << "\"tank_log_test.csv\", \"train_rows\": " << train.rows() << ", \"test_rows\": " << test.rows()
     << ", \"period_s\": " << jnum(period) << "}, \"resampling\": {\"log\": " << kernels::harness::json_string(uf.name)
     << ", \"rows_in\": " << uneven_raw.rows() << ", \"rows_out\": " << uneven.rows() << ", \"filled\": "
     << uneven_raw.filled << ", \"level_rmse_m\": " << jnum(level_rmse) << ", \"pump_hold_exact\": " << jnum(pump_frac)
     << "}, \"level_split_m\": " << jnum(kLowLevel) << ", \"train_max_drain\": " << jnum(train_max_drain) << ", \"window\": " << o.window << ", \"settings\": {\"hidden\": " << o.hidden << ", \"iters\": " << o.iters
     << ", \"batch\": " << o.batch << ", \"lr\": " << jnum(o.lr) << ", \"seed\": " << opts.seed
     << "}, \"train_seconds\": " << jnum(train_seconds) << ", \"estimators\": [";
  for (size_t i = 0; i < est.size(); ++i) {
    js << (i ? ", " : "") << "{\"name\": \"" << est[i].name << "\", \"params\": " << est[i].params
       << ", \"regimes\": " << json_scores(est[i].s) << "}";
  }
  js << "], \"winner\": {" << winner_json.str() << "}}";
  record_part("soft-sensor", js.str());
  return 0;
}

}  // namespace lesson13
