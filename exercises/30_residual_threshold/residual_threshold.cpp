// Exercise 30_residual_threshold (lesson 13): the threshold of a residual-based fault detector.
//
// Read first: lesson 13's README (lessons/13-control/README.md), the part on fault detection;
// the library's version is lessons/13-control/faults.h (choose_threshold, first_alarm).
//
// A model predicts the next measurement; the residual r = measured - predicted is noise while
// the sensor is healthy and grows when the transmitter sticks or drifts. Where to put the
// alarm limit is a trade: low, and noise raises false alarms; high, and faults go unseen for
// longer. So the limit is chosen on data known to be fault-free, for a false-alarm rate the
// operators can live with: if a fraction `rate` of the healthy |r| may exceed it, it is the
// (1 - rate) quantile of the healthy |r|. A persistence count (the limit must be exceeded
// several samples in a row) then removes most single noisy spikes for the price of a few
// samples of delay.
//
// Check your work: `nnlab check` (or `nnlab check --only 30_residual_threshold`).
#include "exercises/30_residual_threshold/residual_threshold.h"

namespace ex {

double threshold_for_rate(const float* r, int n, double rate) {
  // TODO: take |r[i]| into a vector, sort it ascending; allowed = floor(rate * n); the
  //       threshold is the value with exactly `allowed` values after it.
  (void)r;
  (void)n;
  (void)rate;
  return 0.0;
}

int first_alarm(const float* r, int n, double threshold, int persistence) {
  // TODO: count how many samples in a row have |r| > threshold (reset the count on any
  //       sample that does not); return t when the count reaches persistence.
  (void)r;
  (void)n;
  (void)threshold;
  (void)persistence;
  return -1;
}

}  // namespace ex
