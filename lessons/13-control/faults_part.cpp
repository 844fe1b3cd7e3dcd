// Lesson 13, part faults (faults_part.h): thresholds on fault-free runs, then false alarms,
// detection delays and misses on other runs, for the network, the ARX model and a range check.
#include "lessons/13-control/faults_part.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "kernels/harness.h"
#include "lessons/13-control/control_lesson.h"
#include "lessons/13-control/faults.h"
#include "lessons/13-control/plant_model.h"
#include "lessons/13-control/scenario.h"
#include "nn/check.h"
#include "nn/rng.h"

namespace lesson13 {

namespace {

using kernels::harness::json_string;

struct FaultStats {
  int onsets = 0, detected = 0, missed = 0;
  std::vector<double> delays;  // periods, of the detected ones
};

struct DetectorResult {
  std::string name, model;
  int k = 0;
  double threshold = 0.0;
  int calib_alarms = 0, false_alarms = 0;
  double fault_free_hours = 0.0;
  FaultStats stuck, drift;
};

// A detector: the statistic of a run (0 before `from`).
using Statistic = std::function<std::vector<double>(const lessons::Series&, int from)>;

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A closed-loop run of the tank under its PI with the setpoints and drain openings drawn as
// simulate_tank draws them (TankConfig's holds, range and drain rate), from `seed`.
Scenario random_scenario(const lessons::TankConfig& tc, int steps, uint64_t seed) {
  Scenario sc;
  sc.name = "random-setpoints";
  sc.steps = steps;
  sc.plant = tc;
  sc.plant.seed = seed;  // the sensor noise
  nn::Rng rng(seed * 7919 + 17);
  sc.level0 = rng.uniform(static_cast<float>(tc.setpoint_lo), static_cast<float>(tc.setpoint_hi));
  sc.setpoint.initial = sc.level0;
  for (int t = 0;;) {
    t += tc.setpoint_hold_min + static_cast<int>(rng.below(static_cast<uint32_t>(tc.setpoint_hold_max - tc.setpoint_hold_min + 1)));
    if (t >= steps) break;
    sc.setpoint.changes.emplace_back(t, rng.uniform(static_cast<float>(tc.setpoint_lo), static_cast<float>(tc.setpoint_hi)));
  }
  bool open = false;
  for (int t = 1; t < steps; ++t) {
    if (rng.uniform() < tc.drain_rate) {
      open = !open;
      sc.drain.changes.emplace_back(t, open ? rng.uniform(0.0f, static_cast<float>(tc.drain_max)) : 0.0);
    }
  }
  sc.dead_time.initial = tc.dead_time;
  return sc;
}

// The run as a series the models read: the level the controller SAW (the transmitter, faulty or
// not) and the commands it sent.
lessons::Series loop_series(const Scenario& sc, const lessons::TankConfig& tc, const SensorHook& hook) {
  PiLoopController pi(tc.kp, tc.ki);
  const ClosedLoopRun run = run_closed_loop(sc, pi, hook);
  lessons::Series s;
  s.steps = sc.steps;
  s.names = {"level", "pump"};
  for (int t = 0; t < sc.steps; ++t) {
    s.data.push_back(static_cast<float>(run.level_seen[static_cast<size_t>(t)]));
    s.data.push_back(static_cast<float>(std::clamp(run.u[static_cast<size_t>(t)], 0.0, 1.0)));
  }
  return s;
}

std::string fault_json(const FaultStats& f, double dt) {
  std::ostringstream os;
  double mean = NAN, mx = NAN;
  if (!f.delays.empty()) {
    mean = 0.0;
    mx = 0.0;
    for (double d : f.delays) {
      mean += d;
      mx = std::max(mx, d);
    }
    mean /= static_cast<double>(f.delays.size());
  }
  os << "{\"onsets\": " << f.onsets << ", \"detected\": " << f.detected << ", \"missed\": " << f.missed
     << ", \"delay_steps_median\": " << jnum(median(f.delays)) << ", \"delay_steps_mean\": " << jnum(mean)
     << ", \"delay_steps_max\": " << jnum(mx) << ", \"delay_s_median\": " << jnum(median(f.delays) * dt) << "}";
  return os.str();
}

}  // namespace

void add_faults_options(CLI::App& app, FaultsOptions& o) {
  app.add_option("--faults-k", o.k, "Part faults: prediction horizon of the net-k and arx-k residuals, periods")
      ->check(CLI::Range(1, 200))->capture_default_str();
  app.add_option("--faults-window", o.window, "Part faults: moving mean of the residual, periods")
      ->check(CLI::Range(1, 10000))->capture_default_str();
  app.add_option("--faults-persistence", o.persistence, "Part faults: periods above the threshold before an alarm")
      ->check(CLI::Range(1, 10000))->capture_default_str();
  app.add_option("--faults-target-per-hour", o.target_per_hour, "Part faults: false alarms per hour allowed in calibration")
      ->check(CLI::Range(0.0, 3600.0))->capture_default_str();
  app.add_option("--faults-drift", o.drift, "Part faults: drift of the faulty transmitter, m per period")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--faults-steps", o.steps, "Part faults: periods per run (--quick: 2500)")
      ->check(CLI::Range(1000, 10000000))->capture_default_str();
  app.add_option("--faults-calib-runs", o.calib_runs, "Part faults: fault-free runs the thresholds are chosen on (--quick: 1)")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--faults-eval-runs", o.eval_runs, "Part faults: runs of other seeds everything is measured on (--quick: 1)")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--faults-onsets", o.onsets, "Part faults: onsets per fault kind per evaluation run (--quick: 3)")
      ->check(CLI::Range(1, 10000))->capture_default_str();
  app.add_option("--faults-within", o.within, "Part faults: an alarm later than this after the onset is a miss, periods")
      ->check(CLI::Range(1, 1000000))->capture_default_str();
}

int run_faults_part(const Options& opts) {
  const FaultsOptions& o = opts.faults;
  const int steps = opts.quick ? std::min(o.steps, 2500) : o.steps;
  const int calib_runs = opts.quick ? 1 : o.calib_runs;
  const int eval_runs = opts.quick ? 1 : o.eval_runs;
  const int onsets = opts.quick ? std::min(o.onsets, 3) : o.onsets;
  std::cout << "== part faults: a stuck and a drifting level transmitter, found from prediction residuals ==\n";

  // -- the models, from one training run
  lessons::TankConfig tc;
  tc.steps = opts.quick ? 4000 : 20000;
  tc.seed = opts.seed;
  const lessons::Series train = identification_series(tc);
  PlantModelConfig pc;
  if (opts.quick) {
    pc.hidden = {12, 8};
    pc.epochs = 2;
  }
  const PlantModel model = train_plant_model(train, pc, opts.seed + 1);
  const ExportSpec net = spec_from_plant_model(model);  // k-step rollouts run through the spec (SpecRunner)
  const std::vector<float> ty = train.channel("level"), tu = train.channel("pump");
  const lessons::ArxModel arx = lessons::fit_arx(ty, tu, train.steps, 1, 1, pc.na, pc.nb);
  const double dt = tc.dt;
  const int H = std::max(net.history, arx.lag());
  const int valid = H + o.k;            // the first period every model's prediction is defined at
  const int from = valid + o.window;    // ... and every statistic (alarms are counted from here)
  NN_CHECK(steps > from + o.within + 10, "--faults-steps " << steps << " is too short for the history, --faults-k, "
                                                            "--faults-window and --faults-within");
  std::cout << "models identified on " << tc.steps << " periods (seed " << tc.seed << "): the lesson's PlantModel (NARX " << net.inputs() << " -> ... -> 1 ("
            << net.params() << " parameters), ARX na " << arx.na << " nb " << arx.nb << "\n"
            << "detector: |mean residual over " << o.window << " periods| above the threshold for " << o.persistence
            << " periods; thresholds for " << o.target_per_hour << " false alarms/hour on " << calib_runs
            << " fault-free runs of " << steps << " periods\n";

  const auto residual_stat = [&](auto&& predict, int k) -> Statistic {
    return [predict, k, o](const lessons::Series& s, int first) {
      const std::vector<float> pred = predict(s, k);
      return residual_statistic(s.channel("level"), pred, o.window, first);
    };
  };
  const auto net_pred = [&net](const lessons::Series& s, int k) { return k_step_predictions(net, s, k); };
  const auto arx_pred = [&arx](const lessons::Series& s, int k) { return k_step_predictions(arx, s, k); };
  std::vector<std::pair<DetectorResult, Statistic>> detectors;
  {
    DetectorResult d;
    d.name = "net-" + std::to_string(o.k);
    d.model = "plant-model";
    d.k = o.k;
    detectors.emplace_back(d, residual_stat(net_pred, o.k));
    d.name = "net-1";
    d.k = 1;
    detectors.emplace_back(d, residual_stat(net_pred, 1));
    d.name = "arx-" + std::to_string(o.k);
    d.model = "arx";
    d.k = o.k;
    detectors.emplace_back(d, residual_stat(arx_pred, o.k));
    d.name = "range";
    d.model = "none";
    d.k = 0;
    const double hi = tc.max_level;
    const int persistence = o.persistence;
    detectors.emplace_back(d, [hi, persistence](const lessons::Series& s, int first) {
      std::vector<double> st = range_flatline_statistic(s.channel("level"), 0.0, hi, persistence);
      std::fill(st.begin(), st.begin() + std::min<ptrdiff_t>(first, static_cast<ptrdiff_t>(st.size())), 0.0);
      return st;
    });
  }

  const auto run_of = [&](uint64_t seed) { return loop_series(random_scenario(tc, steps, seed), tc, {}); };
  std::vector<lessons::Series> calib, eval;
  for (int i = 0; i < calib_runs; ++i) calib.push_back(run_of(opts.seed + 100 + static_cast<uint64_t>(i)));
  for (int i = 0; i < eval_runs; ++i) eval.push_back(run_of(opts.seed + 200 + static_cast<uint64_t>(i)));
  // The faulty runs, the same for every detector: per evaluation seed, kind and onset, a closed
  // loop of its own (the schedule from seed+400+..., the noise too) whose transmitter fails at
  // `onset` through the sensor hook: the PI sees the faulty level and acts on it.
  struct Faulty {
    FaultKind kind;
    int onset;
    lessons::Series s;
  };
  std::vector<Faulty> faulty;
  {
    nn::Rng rng(opts.seed + 300);
    uint64_t run_seed = opts.seed + 400;
    for (int r = 0; r < eval_runs; ++r) {
      for (FaultKind kind : {FaultKind::stuck, FaultKind::drift}) {
        for (int i = 0; i < onsets; ++i) {
          const int onset = 2 * from + static_cast<int>(rng.below(600));  // after a few setpoint holds, at random
          SensorFault f;
          f.kind = kind;
          f.onset = onset;
          f.drift_rate = o.drift;
          auto held = std::make_shared<double>(0.0);
          const SensorHook hook = [f, held](int t, const lessons::TankMeasurement&, Sensed& seen) {
            if (t == f.onset) *held = seen.level;  // what the frozen transmitter keeps showing
            seen.level = f.apply(t, seen.level, *held);
          };
          faulty.push_back({kind, onset, loop_series(random_scenario(tc, onset + o.within, run_seed++), tc, hook)});
        }
      }
    }
  }

  for (auto& [d, stat] : detectors) {
    // -- the threshold, from fault-free runs only
    std::vector<std::vector<double>> cs;
    for (const lessons::Series& s : calib) cs.push_back(stat(s, valid));
    if (d.model == "none") {
      d.threshold = 0.5;  // its statistic is 0 or 1: nothing to choose
    } else {
      d.threshold = choose_threshold(cs, o.target_per_hour, o.persistence, from, dt);
    }
    for (const std::vector<double>& s : cs) d.calib_alarms += count_alarms(s, d.threshold, o.persistence, from);
    // -- false alarms on other fault-free runs
    for (const lessons::Series& s : eval) {
      d.false_alarms += count_alarms(stat(s, valid), d.threshold, o.persistence, from);
      d.fault_free_hours += static_cast<double>(steps - from) * dt / 3600.0;
    }
    // -- the faulty runs: the first alarm at or after the onset (alarms before it are the
    // false alarms counted above, on the fault-free runs)
    for (const Faulty& fr : faulty) {
      const std::vector<double> st = stat(fr.s, valid);
      const int alarm = first_alarm(st, d.threshold, o.persistence, fr.onset);
      FaultStats& fs = fr.kind == FaultKind::stuck ? d.stuck : d.drift;
      ++fs.onsets;
      if (alarm >= 0) {
        ++fs.detected;
        fs.delays.push_back(alarm - fr.onset);
      } else {
        ++fs.missed;
      }
    }
  }

  // -- the table
  const std::streamsize old_precision = std::cout.precision();
  std::cout << "\n" << std::left << std::setw(9) << "detector" << std::right << std::setw(12) << "threshold"
            << std::setw(12) << "FA/hour" << std::setw(10) << "stuck" << std::setw(13) << "delay med" << std::setw(10)
            << "drift" << std::setw(13) << "delay med" << "\n";
  for (const auto& [d, stat] : detectors) {
    (void)stat;
    const auto cell = [](const FaultStats& f) { return std::to_string(f.detected) + "/" + std::to_string(f.onsets); };
    std::ostringstream thr;
    thr << std::setprecision(3) << d.threshold;
    std::cout << std::left << std::setw(9) << d.name << std::right << std::setw(12) << thr.str() << std::setw(12)
              << std::setprecision(3) << d.false_alarms / d.fault_free_hours << std::setw(10) << cell(d.stuck)
              << std::setw(11) << median(d.stuck.delays) * dt << " s" << std::setw(10) << cell(d.drift) << std::setw(11)
              << median(d.drift.delays) * dt << " s\n";
  }
  std::cout << "(FA/hour on " << eval_runs << " fault-free runs of other seeds, "
            << detectors.front().first.fault_free_hours << " h; stuck/drift: detected within " << o.within
            << " periods / onsets; drift " << o.drift << " m per period; faults injected between the plant and the PI: closed loop)\n";

  std::cout.precision(old_precision);

  // -- the record
  std::ostringstream js;
  js << "{\"dt\": " << jnum(dt) << ", \"steps_per_run\": " << steps << ", \"calib_runs\": " << calib_runs
     << ", \"eval_runs\": " << eval_runs << ", \"train_steps\": " << tc.steps << ", \"k\": " << o.k
     << ", \"window\": " << o.window << ", \"persistence\": " << o.persistence
     << ", \"target_per_hour\": " << jnum(o.target_per_hour) << ", \"within\": " << o.within
     << ", \"drift_per_period\": " << jnum(o.drift) << ", \"onsets_per_kind\": " << onsets * eval_runs
     << ", \"detectors\": [";
  for (size_t i = 0; i < detectors.size(); ++i) {
    const DetectorResult& d = detectors[i].first;
    js << (i ? ", " : "") << "{\"name\": " << json_string(d.name) << ", \"model\": " << json_string(d.model)
       << ", \"k\": " << d.k << ", \"threshold\": " << jnum(d.threshold) << ", \"calib_alarms\": " << d.calib_alarms
       << ", \"false_alarm_events\": " << d.false_alarms << ", \"fault_free_hours\": " << jnum(d.fault_free_hours)
       << ", \"false_alarms_per_hour\": " << jnum(d.false_alarms / d.fault_free_hours)
       << ", \"faults\": {\"stuck\": " << fault_json(d.stuck, dt) << ", \"drift\": " << fault_json(d.drift, dt) << "}}";
  }
  js << "]}";
  record_part("faults", js.str());
  return 0;
}

}  // namespace lesson13
