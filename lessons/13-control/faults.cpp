// Lesson 13: sensor faults and residual-based detection (faults.h). Reads top-down: the faults,
// the k-step predictions (network, ARX), the detector, the model-free baseline.
#include "lessons/13-control/faults.h"

#include <algorithm>
#include <cmath>

#include "nn/check.h"

namespace lesson13 {

// ---- the faults ----------------------------------------------------------------------------
const char* fault_name(FaultKind k) {
  switch (k) {
    case FaultKind::none: return "none";
    case FaultKind::stuck: return "stuck";
    case FaultKind::drift: return "drift";
  }
  return "?";
}

double SensorFault::apply(int t, double healthy, double held) const {
  if (kind == FaultKind::none || t < onset) return healthy;
  if (kind == FaultKind::stuck) return held;
  return healthy + drift_rate * static_cast<double>(t - onset);  // drift
}

lessons::Series inject(const lessons::Series& s, const SensorFault& f) {
  NN_CHECK(f.onset >= 0 && f.onset < s.steps, "fault onset " << f.onset << " is outside the run of " << s.steps << " steps");
  lessons::Series out = s;
  const size_t C = static_cast<size_t>(s.channels());
  const size_t li = static_cast<size_t>(s.index_of("level"));
  const double held = s.at(f.onset, static_cast<int>(li));  // what the frozen transmitter keeps showing
  for (int t = f.onset; t < s.steps; ++t) {
    float& y = out.data[static_cast<size_t>(t) * C + li];
    y = static_cast<float>(f.apply(t, y, held));
  }
  return out;
}

// ---- predictions k periods ahead -----------------------------------------------------------
std::vector<float> k_step_predictions(const ExportSpec& spec, const lessons::Series& s, int k) {
  NN_CHECK(k >= 1, "k-step predictions need k >= 1, got " << k);
  NN_CHECK(spec.signals.size() == 2, "k_step_predictions: the spec must read {level, pump}");
  const std::vector<float> y = s.channel("level"), u = s.channel("pump");
  const int H = spec.history;
  std::vector<float> pred(y.begin(), y.end());  // too little history: the level itself
  SpecRunner run(spec, kernels::WeightFormat::f32);
  for (int t = H + k - 1; t < s.steps; ++t) {
    // the history the model had at t - k, measured ...
    run.reset();
    float out = 0.0f;
    for (int tau = t - k - H + 1; tau <= t - k; ++tau) {
      const float in[2] = {y[static_cast<size_t>(tau)], u[static_cast<size_t>(tau)]};
      out = run.step(in);  // predicts y(tau + 1)
    }
    // ... then its own predictions in place of the level, the recorded commands for the pump
    for (int tau = t - k + 1; tau <= t - 1; ++tau) {
      const float in[2] = {out, u[static_cast<size_t>(tau)]};
      out = run.step(in);
    }
    pred[static_cast<size_t>(t)] = out;
  }
  return pred;
}

std::vector<float> k_step_predictions(const lessons::ArxModel& arx, const lessons::Series& s, int k) {
  NN_CHECK(k >= 1, "k-step predictions need k >= 1, got " << k);
  NN_CHECK(arx.ny == 1 && arx.nu == 1, "k_step_predictions: the ARX model must map the pump to the level");
  NN_CHECK(arx.theta.size() == static_cast<size_t>(arx.regressors()), "k_step_predictions: the ARX model is not fitted");
  const std::vector<float> y = s.channel("level"), u = s.channel("pump");
  const int L = arx.lag();
  std::vector<float> pred(y.begin(), y.end());
  std::vector<double> yy(static_cast<size_t>(arx.na + k));  // the levels the rollout sees, newest last
  for (int t = L + k - 1; t < s.steps; ++t) {
    // yy holds y(t-k-na+1 .. t-k) measured, then the predictions of y(t-k+1 ..)
    for (int i = 0; i < arx.na; ++i) yy[static_cast<size_t>(i)] = y[static_cast<size_t>(t - k - arx.na + 1 + i)];
    for (int j = 0; j < k; ++j) {
      const int tau = t - k + j;  // predicts y(tau + 1) = c + sum_i a_i y(tau - i) + sum_i b_i u(tau - i)
      double acc = arx.theta[static_cast<size_t>(arx.na + arx.nb)];
      for (int i = 0; i < arx.na; ++i) acc += arx.theta[static_cast<size_t>(i)] * yy[static_cast<size_t>(arx.na - 1 + j - i)];
      for (int i = 0; i < arx.nb; ++i) acc += arx.theta[static_cast<size_t>(arx.na + i)] * u[static_cast<size_t>(tau - i)];
      yy[static_cast<size_t>(arx.na + j)] = acc;
    }
    pred[static_cast<size_t>(t)] = static_cast<float>(yy[static_cast<size_t>(arx.na + k - 1)]);
  }
  return pred;
}

// ---- the detector --------------------------------------------------------------------------
std::vector<double> residual_statistic(const std::vector<float>& y, const std::vector<float>& pred, int window, int from) {
  NN_CHECK(y.size() == pred.size(), "residual_statistic: " << y.size() << " levels and " << pred.size() << " predictions");
  NN_CHECK(window >= 1 && from >= 0, "residual_statistic: window >= 1 and from >= 0");
  std::vector<double> s(y.size(), 0.0);
  double sum = 0.0;  // of r over the window, kept as a running sum
  for (size_t t = static_cast<size_t>(from); t < y.size(); ++t) {
    sum += static_cast<double>(y[t]) - pred[t];
    const size_t w = static_cast<size_t>(window);
    if (t >= static_cast<size_t>(from) + w) sum -= static_cast<double>(y[t - w]) - pred[t - w];
    if (t + 1 >= static_cast<size_t>(from) + w) s[t] = std::fabs(sum) / static_cast<double>(window);
  }
  return s;
}

int first_alarm(const std::vector<double>& s, double threshold, int persistence, int from) {
  int run = 0;
  for (int t = std::max(from, 0); t < static_cast<int>(s.size()); ++t) {
    run = s[static_cast<size_t>(t)] > threshold ? run + 1 : 0;
    if (run >= persistence) return t;
  }
  return -1;
}

int count_alarms(const std::vector<double>& s, double threshold, int persistence, int from) {
  int events = 0, run = 0;
  bool raised = false;
  for (int t = std::max(from, 0); t < static_cast<int>(s.size()); ++t) {
    const bool above = s[static_cast<size_t>(t)] > threshold;
    if (!above) {
      run = 0;
      raised = false;  // re-armed
      continue;
    }
    if (!raised && ++run >= persistence) {
      ++events;
      raised = true;
    }
  }
  return events;
}

double choose_threshold(const std::vector<std::vector<double>>& fault_free, double target_per_hour, int persistence,
                        int from, double dt) {
  NN_CHECK(!fault_free.empty() && target_per_hour >= 0.0 && persistence >= 1 && dt > 0.0,
           "choose_threshold: needs fault-free statistics, a target >= 0, persistence >= 1 and dt > 0");
  double periods = 0.0;
  std::vector<double> values;
  for (const std::vector<double>& s : fault_free) {
    periods += static_cast<double>(s.size()) - from;
    values.insert(values.end(), s.begin() + std::min<ptrdiff_t>(from, static_cast<ptrdiff_t>(s.size())), s.end());
  }
  const double hours = periods * dt / 3600.0;
  const int allowed = static_cast<int>(std::floor(target_per_hour * hours));
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  const auto events = [&](double thr) {
    int n = 0;
    for (const std::vector<double>& s : fault_free) n += count_alarms(s, thr, persistence, from);
    return n;
  };
  // the alarm count only falls as the threshold rises: bisect over the values s takes (the
  // largest one always gives none, since an alarm needs s > threshold)
  size_t lo = 0, hi = values.size() - 1;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (events(values[mid]) <= allowed) hi = mid;
    else lo = mid + 1;
  }
  return values[lo];
}

std::vector<double> range_flatline_statistic(const std::vector<float>& y, double lo, double hi, int persistence) {
  std::vector<double> s(y.size(), 0.0);
  int flat = 0;
  for (size_t t = 0; t < y.size(); ++t) {
    flat = (t > 0 && y[t] == y[t - 1]) ? flat + 1 : 0;  // a live transmitter's noise never repeats a float exactly
    const bool out_of_range = y[t] < lo || y[t] > hi;
    s[t] = (out_of_range || flat >= persistence) ? 1.0 : 0.0;
  }
  return s;
}

}  // namespace lesson13
