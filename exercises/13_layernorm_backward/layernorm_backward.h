// Exercise 13_layernorm_backward (lesson 08): the backward of layer normalisation, the
// normaliser in front of every attention and MLP of a GPT. You write the body in
// layernorm_backward.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

namespace ex {

// The forward was, for every row n of inp (N, C), with weight, bias (C):
//     mean[n] = sum_c x[c] / C,   var = sum_c (x[c] - mean)^2 / C,   rstd[n] = 1 / sqrt(var + eps)
//     xhat[c] = (x[c] - mean[n]) * rstd[n]
//     out[c]  = xhat[c] * weight[c] + bias[c]
// Given dout (N, C) and the saved mean (N), rstd (N), with g[c] = dout[c] * weight[c]:
//     dinp[n][c]  += rstd[n] * (g[c] - mean_c(g) - xhat[c] * mean_c(g * xhat))   (N, C)  accumulated
//     dweight[c]  += sum_n dout[n][c] * xhat[n][c]                               (C)     accumulated
//     dbias[c]    += sum_n dout[n][c]                                            (C)     accumulated
// where mean_c(.) is the average over the C channels of row n.
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C);

}  // namespace ex
