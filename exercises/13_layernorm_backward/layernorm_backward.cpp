// Exercise 13_layernorm_backward (lesson 08): the backward of layer normalisation.
//
// Read first: lesson 08's README (lessons/08-*/README.md), the part on LayerNorm;
// nn::layernorm_forward / nn::layernorm_backward in nn/transformer.cpp are the versions the
// GPT runs.
//
// LayerNorm makes each row (one position's C channels) mean 0 and variance 1, then scales
// and shifts it with learned weight and bias:
//     xhat = (x - mean) * rstd            rstd = 1 / sqrt(var + eps), saved by the forward
//     out  = xhat * weight + bias
// The backward in three parts, per row, with g = dout * weight (= dL/dxhat):
//     dbias   += dout                     the bias is added to every row
//     dweight += dout * xhat              xhat is recomputed from x, mean and rstd
//     dinp    += rstd * (g - mean(g) - xhat * mean(g * xhat))
// The two means (over the row's C channels) are why this is not just "g * rstd": moving one
// x[c] moves the row's mean and variance, which moves EVERY xhat of the row. mean(g) undoes
// the shift through the mean, xhat * mean(g * xhat) the one through the variance.
//
// Shapes: dout, inp, dinp (N, C); weight, dweight, dbias (C); mean, rstd (N). Row-major:
// element [n][c] is at index n * C + c.
//
// The gradient rule: dweight and dbias are parameter gradients, ACCUMULATE them (+=). dinp
// ACCUMULATES too (+=, unlike other activation gradients): in a GPT block LN reads the
// residual stream x and the stream passes x on unchanged, so dL/dx is the gradient coming
// down the stream (already in dinp) plus the one coming back through the LN.
//
// Check your work: `nnlab check` (or `nnlab check --only 13_layernorm_backward`).
#include "exercises/13_layernorm_backward/layernorm_backward.h"

namespace ex {

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C) {
  // TODO: per row, the three parts above. The input gradient needs the row's two means
  //       before any channel can be finished, so it takes two passes over the row; xhat is
  //       not saved, it is rebuilt from what the forward did save. Everything accumulates.
  (void)dinp;
  (void)dweight;
  (void)dbias;
  (void)dout;
  (void)inp;
  (void)weight;
  (void)mean;
  (void)rstd;
  (void)N;
  (void)C;
}

}  // namespace ex
