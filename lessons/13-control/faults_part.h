// Lesson 13, part faults: a stuck and a drifting level transmitter, detected from prediction
// residuals with thresholds chosen on fault-free data (the detector: faults.h).
//
// One plant run (--seed) trains the NARX network (export_c.h: train_narx) and fits the ARX
// baseline with the same windows (4 levels, 24 pump commands: longer than the 20-period dead
// time). Then, per detector:
//   net-k     the network's prediction of y(t) made --faults-k periods earlier (rolled out on
//             its own predictions with the recorded pump commands)
//   net-1     the network one step ahead (what a drift of a fraction of the noise per period
//             looks like to a one-step residual: almost nothing)
//   arx-k     the ARX model, --faults-k ahead, the same detector
//   range     no model: out of [0, max level] or a flatline of --faults-persistence periods
// the statistic |mean residual over --faults-window| is computed on --faults-calib-runs
// fault-free runs (seeds seed+100...), the threshold chosen there for --faults-target-per-hour
// false alarms (faults.h: choose_threshold), and everything is measured on OTHER runs (seeds
// seed+200...): false alarms per hour on them fault-free, and on each of them
// --faults-onsets onsets per fault kind (at random times; one fault at a time):
//   stuck     the transmitter freezes at its value at the onset
//   drift     it drifts by --faults-drift m per period from the onset
// detection delay (periods and seconds from the onset to the alarm; only alarms within
// --faults-within periods count) and missed faults (no alarm within that).
// The faults are injected into the RECORDED measurement: the PI of the recorded run saw the
// healthy sensor, so the pump does not react to the fault (with the lesson's closed-loop
// runner the hook would put the faulty sensor in the loop; then a stuck transmitter also winds
// the PI up, which makes it easier to see).
//
// JSON (record_part "faults"):
//   {"dt", "steps_per_run", "calib_runs", "eval_runs", "train_steps", "k", "window", "persistence",
//    "target_per_hour", "within", "drift_per_period", "onsets_per_kind",
//    "detectors": [{"name", "model", "k", "threshold", "calib_alarms", "false_alarm_events",
//                   "fault_free_hours", "false_alarms_per_hour",
//                   "faults": {"stuck": F, "drift": F}}]}
//   F = {"onsets", "detected", "missed", "delay_steps_median", "delay_steps_mean",
//        "delay_steps_max", "delay_s_median"}  (delays over the detected ones; null when none)
//   threshold in metres of mean residual (range: 0.5 on its 0/1 statistic).
#pragma once

#include <CLI/CLI.hpp>

namespace lesson13 {

struct FaultsOptions {
  int k = 20;                   // prediction horizon of the net-k / arx-k residuals, periods
  int window = 10;              // the residual's moving mean, periods
  int persistence = 5;          // periods above the threshold before an alarm
  double target_per_hour = 1.0; // false alarms per hour allowed on the calibration runs
  double drift = 2e-4;          // m per period of the drifting transmitter
  int steps = 8000;             // periods per run (--quick: 2500)
  int calib_runs = 4;           // fault-free runs the thresholds are chosen on (--quick: 1)
  int eval_runs = 4;            // runs everything is measured on (--quick: 1)
  int onsets = 8;               // fault onsets per kind per evaluation run (--quick: 3)
  int within = 900;             // an alarm later than this after the onset is a miss
};
void add_faults_options(CLI::App& app, FaultsOptions& opts);

}  // namespace lesson13
