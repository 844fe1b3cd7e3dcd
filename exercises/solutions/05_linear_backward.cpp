// Reference solution of exercise 05_linear_backward (lesson 02). Try it yourself first:
// exercises/05_linear_backward/linear_backward.cpp.
#include "exercises/05_linear_backward/linear_backward.h"

#include <cstddef>

namespace ex {

void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int B, int C, int OC) {
  // dout (B,OC), inp (B,C), weight (OC,C) -> dinp (B,C) =, dweight (OC,C) +=, dbias (OC) +=
  using std::ptrdiff_t;
  for (int b = 0; b < B; ++b) {
    const float* dy = dout + static_cast<ptrdiff_t>(b) * OC;  // row b of dout
    const float* x = inp + static_cast<ptrdiff_t>(b) * C;     // row b of inp
    if (dinp != nullptr) {
      float* dx = dinp + static_cast<ptrdiff_t>(b) * C;
      for (int c = 0; c < C; ++c) {  // dL/dx_c = sum_o dL/dy_o * w_oc
        float sum = 0.0f;
        for (int o = 0; o < OC; ++o) {
          sum += dy[o] * weight[static_cast<ptrdiff_t>(o) * C + c];
        }
        dx[c] = sum;  // assigned: an activation gradient
      }
    }
    for (int o = 0; o < OC; ++o) {  // dL/dw_oc += dL/dy_o * x_c, summed over the rows b
      float* dw = dweight + static_cast<ptrdiff_t>(o) * C;
      for (int c = 0; c < C; ++c) {
        dw[c] += dy[o] * x[c];
      }
      if (dbias != nullptr) {  // dL/db_o += dL/dy_o: the bias touched every row with slope 1
        dbias[o] += dy[o];
      }
    }
  }
}

}  // namespace ex
