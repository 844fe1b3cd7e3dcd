// Exercise 35_gptq_column (lesson 15): one column of GPTQ: quantise it, then push its rounding
// error onto the columns not yet quantised, weighted by the inverse Hessian. You write the body
// in gptq_column.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

namespace ex {

// W (rows, cols) row-major: a Linear layer's weight (out, in), columns quantised left to right;
// columns < j are already done (and hold their quantised values), columns > j are not.
// U (cols, cols) row-major: the upper Cholesky factor of the inverse Hessian, H^-1 = U^T U,
//   with H = X^T X (+ damping) over the layer's calibration inputs X (tokens, cols).
// scales (rows): each row's quantisation step; levels are the integers in [-qmax, qmax].
// For column j:
//   q[r]   = scales[r] * clamp(nearbyint(W[r][j] / scales[r]), -qmax, qmax)   (scale 0: q = 0)
//   err[r] = (W[r][j] - q[r]) / U[j][j]
//   W[r][k] -= err[r] * U[j][k]      for every k > j (the columns still to quantise)
//   W[r][j]  = q[r]
// Columns < j are not touched.
void gptq_column(float* W, int rows, int cols, int j, const float* U, const float* scales, int qmax);

}  // namespace ex
