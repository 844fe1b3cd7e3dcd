// Exercise 22_rmsnorm_backward (lesson 11): the backward of RMSNorm, the normaliser of Llama
// (and of every model after it). You write the body in rmsnorm_backward.cpp; `nnlab check`
// runs the tests in test.cpp.
#pragma once

namespace ex {

// The forward was, for every row n of inp (N, C), with weight (C):
//     rstd[n] = 1 / sqrt(sum_c x[c]^2 / C + eps)
//     xhat[c] = x[c] * rstd[n]
//     out[c]  = xhat[c] * weight[c]
// Given dout (N, C) and the saved rstd (N), with g[c] = dout[c] * weight[c]:
//     dinp[n][c] += rstd[n] * (g[c] - xhat[c] * mean_c(g * xhat))   (N, C)  accumulated
//     dweight[c] += sum_n dout[n][c] * xhat[n][c]                   (C)     accumulated
// where mean_c(.) is the average over the C channels of row n.
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int N, int C);

}  // namespace ex
