// Lesson 13: faults of the level transmitter and their detection from a model's prediction
// residuals (part faults, faults_part.h).
//
// The faults, applied to the measured level y(t) from the onset t0 on:
//   stuck   y(t) = y(t0)                       the transmitter of lesson 01 that froze
//   drift   y(t) = y_true_meas(t) + rate (t - t0)   a slowly drifting zero
//
// The detector, the same for every model:
//   residual   r(t) = y(t) - yhat_k(t)           yhat_k(t): the model's prediction of y(t) made
//                                                k periods earlier (k = 1: one step ahead; k > 1:
//                                                the model rolled out on its own predictions
//                                                with the recorded pump commands, so a sensor
//                                                that drifts by `rate` per period shows k rate)
//   statistic  s(t) = | mean of r over the last `window` periods |   (averaging takes the noise
//                                                down by ~sqrt(window); a bias stays)
//   alarm      s above `threshold` for `persistence` periods in a row; the alarm then re-arms
//              once s has fallen below the threshold again (an alarm EVENT, as an operator sees it)
//   threshold  chosen on fault-free runs only (choose_threshold): the smallest value whose alarm
//              events on those runs do not exceed the target false-alarm rate, i.e. the
//              empirical quantile of s that the persistence and the target allow; evaluated on
//              runs of other seeds.
// The baseline without a model: a range and flatline check (range_flatline_alarm).
#pragma once

#include <cstdint>
#include <vector>

#include "lessons/13-control/export_c.h"
#include "lessons/common/plant.h"

namespace lesson13 {

// ---- the faults ----------------------------------------------------------------------------
enum class FaultKind { none, stuck, drift };
const char* fault_name(FaultKind k);
struct SensorFault {
  FaultKind kind = FaultKind::none;
  int onset = 0;             // the first faulty period
  double drift_rate = 0.0;   // m per period (drift)
  // The faulty measurement at t, given the healthy one, and (stuck) the one held at the onset.
  double apply(int t, double healthy, double held) const;
};
// The series with its "level" channel faulted (recorded faults: the controller of the recorded
// run saw the healthy sensor; the closed-loop injection is the sensor hook of run_closed_loop).
lessons::Series inject(const lessons::Series& s, const SensorFault& f);

// ---- predictions k periods ahead -----------------------------------------------------------
// pred[t] predicts level(t) from the levels up to t - k and the pump commands up to t - 1 (for
// t < history + k: the level itself, no prediction). k >= 1.
std::vector<float> k_step_predictions(const ExportSpec& spec, const lessons::Series& s, int k);
std::vector<float> k_step_predictions(const lessons::ArxModel& arx, const lessons::Series& s, int k);

// ---- the detector --------------------------------------------------------------------------
// s(t) = |mean of r(t - window + 1 .. t)| (for t < from + window - 1: 0), r = y - pred, from
// the first period `from` on.
std::vector<double> residual_statistic(const std::vector<float>& y, const std::vector<float>& pred, int window, int from);
// The first t >= from at which s has been > threshold for `persistence` periods (t included);
// -1 if none.
int first_alarm(const std::vector<double>& s, double threshold, int persistence, int from);
// Alarm events in s[from..): an event starts as first_alarm does and ends when s <= threshold.
int count_alarms(const std::vector<double>& s, double threshold, int persistence, int from);
// The smallest threshold (over the values the statistics take) with at most
// floor(target_per_hour * hours) alarm events on the fault-free statistics (each from `from`).
double choose_threshold(const std::vector<std::vector<double>>& fault_free, double target_per_hour, int persistence,
                        int from, double dt);

// The check a transmitter's own diagnostics do, with no model: an alarm when the level is
// outside [lo, hi] or has not changed at all (|y(t) - y(t-1)| <= 0) for `persistence`
// periods. Returns the statistic as 0/1 per period (for first_alarm with threshold 0.5).
std::vector<double> range_flatline_statistic(const std::vector<float>& y, double lo, double hi, int persistence);

}  // namespace lesson13
