// Exercise 19_int8_quantize (lesson 10): weight-only int8 quantisation, one scale per row.
// You write the bodies in int8_quantize.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

#include <cstdint>

namespace ex {

// W (rows, cols) row-major, a Linear layer's weight: row r is output channel r.
// Per row r, symmetric (no zero point):
//     scales[r] = max_c |W[r,c]| / 127                       (float division)
//     q[r,c]    = nearbyint(W[r,c] / scales[r]), clamped to [-127, 127]
//                 (round to nearest, halfway cases to EVEN: 0.5 -> 0, 1.5 -> 2, -2.5 -> -2)
// A row of zeros has scales[r] = 0 and q = 0 (never divide by 0).
// q (rows*cols) and scales (rows) are assigned. The same bytes as kernels::pack_weights(W,
// rows, cols, kernels::WeightFormat::int8) (kernels/decode.h).
void quantize_int8_rows(int8_t* q, float* scales, const float* w, int rows, int cols);

// W'[r,c] = scales[r] * q[r,c]: the weights the quantised matrix stands for (rows*cols, =).
void dequantize_int8_rows(float* w, const int8_t* q, const float* scales, int rows, int cols);

// y (rows) = W' x with x (cols), never building W':
//     y[r] = scales[r] * sum_c q[r,c] x[c]           (the scale taken out of the sum)
void int8_matvec(float* y, const float* x, const int8_t* q, const float* scales, int rows, int cols);

}  // namespace ex
