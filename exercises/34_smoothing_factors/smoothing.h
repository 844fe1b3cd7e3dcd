// Exercise 34_smoothing_factors (lesson 15): SmoothQuant's per-channel smoothing factors, and
// applying them so the product is unchanged. You write the bodies in smoothing.cpp;
// `nnlab check` runs the tests in test.cpp.
#pragma once

namespace ex {

// x_max (K): the largest |X[t, j]| of input channel j over a calibration set.
// w_max (K): the largest |W[n, j]| of the weight's column j (W is (N, K): out, in).
// alpha in [0, 1]: how much of the difficulty moves from the activations to the weights.
//   s[j] = x_max[j]^alpha / w_max[j]^(1 - alpha)          (std::pow, in float)
// A channel where x_max or w_max is 0 (dead channel, or a zero column) gets s[j] = 1: there
// is nothing to migrate, and 0 or infinity would destroy the product.
// s (K) is assigned.
void smoothing_factors(float* s, const float* x_max, const float* w_max, int K, float alpha);

// Applies s so that (X diag(1/s)) (W diag(s))^T == X W^T:
//   x (T, K): every row's channel j divided by s[j]      (in place)
//   w (N, K): every row's column j multiplied by s[j]    (in place)
// In a transformer the division is folded into the LayerNorm before the product (its weight
// and bias divided by s), so it costs nothing at run time.
void apply_smoothing(float* x, int T, float* w, int N, const float* s, int K);

}  // namespace ex
