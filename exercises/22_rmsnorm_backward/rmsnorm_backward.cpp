// Exercise 22_rmsnorm_backward (lesson 11): the backward of RMSNorm.
//
// Read first: lesson 11's README (lessons/11-modern/README.md), the part on RMSNorm; the
// library's loops are kernels::rmsnorm_backward_v1 (kernels/rmsnorm.cpp). Exercise 13 (the
// LayerNorm backward) is the same derivation with one more term.
//
// RMSNorm is LayerNorm without the mean: each row is divided by its root mean square and
// scaled by a learned weight (no bias):
//     xhat = x * rstd          rstd = 1 / sqrt(mean(x^2) + eps), saved by the forward
//     out  = xhat * weight
// The backward, per row, with g = dout * weight (= dL/dxhat):
//     dweight += dout * xhat
//     dinp    += rstd * (g - xhat * mean(g * xhat))
// The second term is there because moving one x[c] changes the row's rms, which rescales
// EVERY xhat of the row. LayerNorm's "- mean(g)" is absent: RMSNorm subtracts no mean.
//
// Shapes: dout, inp, dinp (N, C); weight, dweight (C); rstd (N). Row-major: element [n][c] is
// at index n * C + c.
//
// The gradient rule: dweight is a parameter gradient, ACCUMULATE it (+=). dinp ACCUMULATES too
// (+=): the norm reads the residual stream, which passes x on unchanged, so dL/dx is the
// stream's gradient (already in dinp) plus the one coming back through the norm.
//
// Check your work: `nnlab check` (or `nnlab check --only 22_rmsnorm_backward`).
#include "exercises/22_rmsnorm_backward/rmsnorm_backward.h"

namespace ex {

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int N, int C) {
  // TODO: per row, rebuild xhat from x and rstd, compute the row's mean(g * xhat) first (a
  //       pass over the row), then the input gradient in a second pass. Everything accumulates.
  (void)dinp;
  (void)dweight;
  (void)dout;
  (void)inp;
  (void)weight;
  (void)rstd;
  (void)N;
  (void)C;
}

}  // namespace ex
