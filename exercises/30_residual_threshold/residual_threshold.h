// Exercise 30_residual_threshold (lesson 13): choose a fault detector's threshold from
// fault-free residuals, and raise the first alarm with a persistence count. You write the
// bodies in residual_threshold.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

namespace ex {

// r[0..n): prediction residuals of a fault-free run (measured - predicted), n >= 1;
// rate in [0, 1): the fraction of samples allowed to exceed the threshold.
// Returns the SMALLEST value among the |r[i]| such that at most floor(rate * n) of the |r[i]|
// are strictly greater than it. (rate = 0: the largest |r|.) r is not changed.
double threshold_for_rate(const float* r, int n, double rate);

// The first alarm: the smallest t such that |r[t - persistence + 1]|, ..., |r[t]| are all
// strictly greater than `threshold` (persistence >= 1 samples in a row, t the LAST of them);
// -1 when that never happens.
int first_alarm(const float* r, int n, double threshold, int persistence);

}  // namespace ex
