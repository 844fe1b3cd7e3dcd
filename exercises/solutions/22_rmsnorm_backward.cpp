// Reference solution of exercise 22_rmsnorm_backward (lesson 11). Try it yourself first:
// exercises/22_rmsnorm_backward/rmsnorm_backward.cpp.
#include <cstddef>

#include "exercises/22_rmsnorm_backward/rmsnorm_backward.h"

namespace ex {

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int N, int C) {
  for (int n = 0; n < N; ++n) {
    const std::ptrdiff_t row = static_cast<std::ptrdiff_t>(n) * C;
    const float* x = inp + row;
    const float* dy = dout + row;
    float* dx = dinp + row;
    const float r = rstd[n];
    // pass 1: mean(g * xhat) over the row
    float gx = 0.0f;
    for (int c = 0; c < C; ++c) gx += dy[c] * weight[c] * (x[c] * r);
    gx /= static_cast<float>(C);
    // pass 2: the gradients, accumulated
    for (int c = 0; c < C; ++c) {
      const float xhat = x[c] * r;
      const float g = dy[c] * weight[c];
      dweight[c] += dy[c] * xhat;
      dx[c] += r * (g - xhat * gx);
    }
  }
}

}  // namespace ex
