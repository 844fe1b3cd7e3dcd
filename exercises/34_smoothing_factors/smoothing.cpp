// Exercise 34_smoothing_factors (lesson 15): SmoothQuant's smoothing factors.
//
// Read first: lesson 15's README (lessons/15-compression/README.md), the part on W8A8. The
// library's version is gpt/compress.h (smooth_quant).
//
// Per-token int8 quantisation gives each row of X one scale, its largest |x| / 127. A few
// input channels of a trained transformer carry values 10-100x the others (outliers, always in
// the same channels): they set the scale of every row, and the other channels are rounded to a
// handful of levels. Weights have no such outliers. SmoothQuant divides each input channel by a
// factor s[j] and multiplies the weight's column j by the same factor: the product is
// unchanged, the outliers shrink, the weights grow a little, and both quantise well.
//
// Check your work: `nnlab check` (or `nnlab check --only 34_smoothing_factors`).
#include "exercises/34_smoothing_factors/smoothing.h"

namespace ex {

void smoothing_factors(float* s, const float* x_max, const float* w_max, int K, float alpha) {
  // TODO: s[j] = x_max[j]^alpha / w_max[j]^(1 - alpha), or 1 where either max is 0.
  (void)s;
  (void)x_max;
  (void)w_max;
  (void)K;
  (void)alpha;
}

void apply_smoothing(float* x, int T, float* w, int N, const float* s, int K) {
  // TODO: divide x's column j by s[j] (T rows), multiply w's column j by s[j] (N rows).
  (void)x;
  (void)T;
  (void)w;
  (void)N;
  (void)s;
  (void)K;
}

}  // namespace ex
