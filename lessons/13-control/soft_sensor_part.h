// Lesson 13, part soft-sensor: estimate a variable the plant does not measure from the signals
// it does, with a network, against a linear estimator, on plant logs read from CSV.
//
// The job. The tank's drain valve (lessons/common/plant.h) is the disturbance the PI loop has
// to fight, and nothing measures it: the operator sees the level y, the outflow q (which the
// drain is part of) and the pump command u. Knowing the drain flow d(t) tells the operator the
// valve is open and by how much (a leak, a consumer drawing water), and feeds a controller's
// disturbance feedforward. We choose it (rather than the level behind a failed transmitter)
// because its truth is in the simulator's log and because its relation to what is measured is
// NONLINEAR: the outlet passes k sqrt(level), so
//     q(t) = k sqrt(level(t)) + d(t) + noise   ->   d(t) = q(t) - k sqrt(level(t)) - noise
// and an estimator that is linear in (y, q, u) has to replace sqrt by a straight line: right at
// one level, wrong away from it. That is the question the comparison answers: where does the
// network's learned curvature pay, and where does the linear estimator hold its own?
//
// The estimators, all on the same input: a window of the last W samples of (pump, level,
// outflow), standardised with the training log's means and deviations.
//   linear   least squares d = w . x + c on the window (the normal equations in double,
//            Cholesky with a tiny ridge, as fit_arx in lessons/common/plant.h solves ARX). It is
//            the static ARX-type regression a control engineer fits first; we use it rather
//            than a Kalman observer of the linearised tank because it sees exactly the network's
//            input, so the difference between the two is the nonlinearity alone, not the
//            information each was given.
//   network  an MLP (nn::Mlp, lesson 02's layers: window -> hidden -> hidden -> 1, tanh) trained
//            with Adam on mean squared error of the standardised drain.
//   physics  q - k sqrt(y) with the simulator's true outlet coefficient k: what a white-box model
//            gives when the physics is known exactly (a reference line, not a contender: a real
//            plant's k is known only roughly).
// Training uses the shipped log tank_log_train.csv, evaluation tank_log_test.csv (another
// seeded run), both read through io/csv_log.h with a unit mapping (cm, %, l/min) and resampled
// to the control period: the CSV path is the one a real plant's log would take. Errors are
// against the TRUE simulated drain (the log's drain column: a real plant would not have it).
// Regimes (rows of the test log): drain open (true d > 0) / closed (d = 0); level low (measured
// y < 0.55 m, the middle of the setpoint range) / high; and the rows whose true drain is larger
// than any in the training log (drain_beyond_train: extrapolation).
// The third shipped log, tank_log_uneven.csv (ISO 8601 times, rows missing, values missing), is
// read and resampled too, and compared with the simulation that made it: the resampler's error.
//
// --soft-sensor-write-logs DIR (nnlab lesson13 --part soft-sensor --soft-sensor-write-logs DIR)
// writes the three logs (write_tank_logs) and stops: the command that made the shipped files
// (tests/test_lesson13_csv.cpp checks that they are still what it writes).
//
// JSON (--json, parts.soft-sensor):
//   "target": "drain", "units": "m^3/s" (every rmse / mae below)
//   "logs": {"train", "test": file names, "train_rows", "test_rows", "period_s"}
//   "resampling": {"log": file name, "rows_in", "rows_out", "filled" (missing values filled),
//                  "level_rmse_m" (resampled level against the simulation's, every second),
//                  "pump_hold_exact" (fraction of seconds where the held pump equals the
//                  simulation's command exactly)}
//   "level_split_m": the level (m) below which a row is "level_low"; "train_max_drain": the
//   largest drain (m^3/s) in the training log (rows above it are "drain_beyond_train")
//   "window", "settings": {"hidden", "iters", "batch", "lr", "seed"}, "train_seconds"
//   "estimators": [{"name": "network" | "linear" | "physics", "params",
//                   "regimes": {"all" | "drain_open" | "drain_closed" | "level_low" | "level_high" |
//                               "drain_beyond_train":
//                               {"rows", "rmse", "mae"}}}, ...]
//   "winner": {"<regime>": "network" | "linear" | "tie" | "none"}: the lower RMSE (tie within 2 %;
//             none: no test row in that regime)
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "io/csv_log.h"

namespace lesson13 {

struct SoftSensorOptions {
  std::string write_logs;  // write the shipped logs to this folder and stop
  std::string logs;        // where the logs are read from (default: lessons/13-control/data)
  int window = 4;          // W: samples of (pump, level, outflow) the estimators see
  int hidden = 32;         // the MLP's hidden width (two hidden layers)
  int iters = 3000;        // Adam steps (--quick: 300)
  int batch = 64;
  float lr = 3e-3f;
};

inline void add_soft_sensor_options(CLI::App& app, SoftSensorOptions& o) {
  const std::string g = "Part soft-sensor";
  app.add_option("--soft-sensor-write-logs", o.write_logs, "Write the lesson's plant logs (CSV) to this folder and stop")->group(g);
  app.add_option("--soft-sensor-logs", o.logs, "Folder of the plant logs to read (default: lessons/13-control/data)")->group(g);
  app.add_option("--soft-sensor-window", o.window, "Samples of (pump, level, outflow) the estimators see")->check(CLI::Range(1, 256))->capture_default_str()->group(g);
  app.add_option("--soft-sensor-hidden", o.hidden, "The network's hidden width")->check(CLI::Range(1, 4096))->capture_default_str()->group(g);
  app.add_option("--soft-sensor-iters", o.iters, "Adam steps")->check(CLI::Range(1, 10000000))->capture_default_str()->group(g);
  app.add_option("--soft-sensor-batch", o.batch, "Windows per step")->check(CLI::Range(1, 65536))->capture_default_str()->group(g);
  app.add_option("--soft-sensor-lr", o.lr, "Adam's peak learning rate")->check(CLI::Range(1e-7, 1.0))->capture_default_str()->group(g);
}

// ---- the shipped logs (lessons/13-control/data) ----------------------------------------------
// tank_log_train.csv (seed 1301, 5000 s), tank_log_test.csv (seed 1302, 3000 s): every second,
// seconds as time. tank_log_uneven.csv (seed 1303, 2000 s): ISO 8601 times from
// 2026-01-05T08:00:00Z, ~40 % of the rows dropped (at most 4 in a row: uneven sampling) and
// ~3 % of the values missing. Columns: setpoint_cm, pump_pct, level_cm, outflow_lpm and
// drain_lpm (the truth, which a real plant would not log). The simulator is simulate_tank with
// the default TankConfig, and the seeds and lengths here.
struct TankLogFile {
  std::string name;  // "tank_log_train.csv"
  uint64_t seed = 0;
  int steps = 0;
  bool uneven = false;
};
const std::vector<TankLogFile>& tank_log_files();
// Writes the three files into `dir`; returns their paths.
std::vector<std::string> write_tank_logs(const std::string& dir);
// The mapping that reads them: signals setpoint, pump (hold), level, outflow (linear), drain
// (hold), in SI units, with their physical ranges.
nn::CsvLogSpec tank_log_spec();

}  // namespace lesson13
