// Exercise 19_int8_quantize (lesson 10): weight-only int8 quantisation, one scale per row.
//
// Read first: lesson 10's README (lessons/10-inference/README.md), the parts on the
// bandwidth law and on quantisation; kernels/weight_format.h describes the int8 format and
// kernels::pack_weights (kernels/decode.cpp) is the library's version of quantize_int8_rows.
//
// Generating one token reads every weight once and does 2 FLOPs with it: time is bytes of
// weights / memory bandwidth. Storing a weight in 1 byte instead of 4 reads 4x fewer bytes.
// An int8 holds -128..127, so each row gets a float scale and stores W / scale rounded:
//     scale_r  = max_c |W[r,c]| / 127        the row's largest weight maps to +-127
//     q[r,c]   = nearbyint(W[r,c] / scale_r) in [-127, 127]   (127 not 128: symmetric)
//     W'[r,c]  = scale_r * q[r,c]            what the matrix now stands for
// Rounding to the nearest step moves a weight by at most half a step:
//     |W[r,c] - W'[r,c]| <= scale_r / 2
// One scale PER ROW (per output channel): a row of small weights gets a small step, so it
// is not flattened to 0 by the step of a row of large ones.
//   - Divide (W / scale), do not multiply by 1 / scale: the two can differ in the last bit
//     and land on the other side of a .5.
//   - Round halfway cases to even, with std::nearbyint (the library does; std::round would
//     send 0.5 to 1 and 2.5 to 3). Cast to int8_t only after clamping.
//   - A zero row: max |W| = 0 gives scale 0, and 0 / 0 is NaN: store q = 0 instead.
// The matvec multiplies the integers first and scales once per row:
//     y[r] = scale_r * sum_c q[r,c] x[c]   (= sum_c W'[r,c] x[c], one multiply fewer per weight)
//
// Check your work: `nnlab check` (or `nnlab check --only 19_int8_quantize`).
#include "exercises/19_int8_quantize/int8_quantize.h"

namespace ex {

void quantize_int8_rows(int8_t* q, float* scales, const float* w, int rows, int cols) {
  // TODO: for each row: its scale, chosen so that the row's largest magnitude lands on the
  //       last int8 step (stored in scales), then each weight of the row as the number of
  //       whole steps nearest to it, kept inside the symmetric range. The three traps of
  //       the list above (how to divide, how to round a tie, a row of zeros) all apply.
  (void)q;
  (void)scales;
  (void)w;
  (void)rows;
  (void)cols;
}

void dequantize_int8_rows(float* w, const int8_t* q, const float* scales, int rows, int cols) {
  // TODO: the weights the quantised matrix stands for (W' above), row by row.
  (void)w;
  (void)q;
  (void)scales;
  (void)rows;
  (void)cols;
}

void int8_matvec(float* y, const float* x, const int8_t* q, const float* scales, int rows, int cols) {
  // TODO: y = W' x without building W': per row, the integer weights against x first, and
  //       the row's scale applied once at the end (the last formula above).
  (void)y;
  (void)x;
  (void)q;
  (void)scales;
  (void)rows;
  (void)cols;
}

}  // namespace ex
