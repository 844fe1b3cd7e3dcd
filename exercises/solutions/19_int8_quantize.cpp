// Reference solution of exercise 19_int8_quantize (lesson 10). Try it yourself first:
// exercises/19_int8_quantize/int8_quantize.cpp.
#include "exercises/19_int8_quantize/int8_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace ex {

void quantize_int8_rows(int8_t* q, float* scales, const float* w, int rows, int cols) {
  // w (rows, cols) -> q (rows, cols) int8, scales (rows)
  for (int r = 0; r < rows; ++r) {
    const float* wr = w + static_cast<std::ptrdiff_t>(r) * cols;
    int8_t* qr = q + static_cast<std::ptrdiff_t>(r) * cols;
    // scale_r = max |w| / 127: the row's largest weight lands on +-127
    float amax = 0.0f;
    for (int c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(wr[c]));
    const float scale = amax / 127.0f;
    scales[r] = scale;
    for (int c = 0; c < cols; ++c) {
      // q = round(w / scale), halfway cases to even; a zero row stores 0, not 0 / 0
      const float v = scale > 0.0f ? std::nearbyint(wr[c] / scale) : 0.0f;
      qr[c] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
    }
  }
}

void dequantize_int8_rows(float* w, const int8_t* q, const float* scales, int rows, int cols) {
  // q (rows, cols), scales (rows) -> w (rows, cols): w = scale_r * q
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const std::ptrdiff_t i = static_cast<std::ptrdiff_t>(r) * cols + c;
      w[i] = scales[r] * static_cast<float>(q[i]);
    }
}

void int8_matvec(float* y, const float* x, const int8_t* q, const float* scales, int rows, int cols) {
  // x (cols), q (rows, cols), scales (rows) -> y (rows): y_r = scale_r * sum_c q[r,c] x[c]
  for (int r = 0; r < rows; ++r) {
    const int8_t* qr = q + static_cast<std::ptrdiff_t>(r) * cols;
    float acc = 0.0f;
    for (int c = 0; c < cols; ++c) acc += static_cast<float>(qr[c]) * x[c];
    y[r] = scales[r] * acc;  // the scale is the same for the whole row: once, outside the sum
  }
}

}  // namespace ex
