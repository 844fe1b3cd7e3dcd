// Reference solution of exercise 13_layernorm_backward (lesson 08). Try it yourself first:
// exercises/13_layernorm_backward/layernorm_backward.cpp.
#include "exercises/13_layernorm_backward/layernorm_backward.h"

#include <cstddef>

namespace ex {

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C) {
  // dout, inp (N,C), weight (C), mean, rstd (N) -> dinp (N,C) +=, dweight (C) +=, dbias (C) +=
  using std::ptrdiff_t;
  for (int n = 0; n < N; ++n) {
    const float* dy = dout + static_cast<ptrdiff_t>(n) * C;  // row n
    const float* x = inp + static_cast<ptrdiff_t>(n) * C;
    float* dx = dinp + static_cast<ptrdiff_t>(n) * C;

    // the two row means: mean(g) and mean(g * xhat), g = dout * weight = dL/dxhat
    float g_mean = 0.0f;
    float gxhat_mean = 0.0f;
    for (int c = 0; c < C; ++c) {
      const float xhat = (x[c] - mean[n]) * rstd[n];
      const float g = dy[c] * weight[c];
      g_mean += g;
      gxhat_mean += g * xhat;
    }
    g_mean /= static_cast<float>(C);
    gxhat_mean /= static_cast<float>(C);

    for (int c = 0; c < C; ++c) {
      const float xhat = (x[c] - mean[n]) * rstd[n];
      const float g = dy[c] * weight[c];
      dbias[c] += dy[c];           // out = xhat * weight + bias
      dweight[c] += dy[c] * xhat;  // the parameters see dout directly
      // through xhat, then through the row's mean and variance; += : the residual stream
      dx[c] += rstd[n] * (g - g_mean - xhat * gxhat_mean);
    }
  }
}

}  // namespace ex
