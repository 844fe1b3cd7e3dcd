// Exercise 05_linear_backward (lesson 02): the backward pass of a linear layer.
//
// Read first: lessons/02-backprop/README.md, section 3 "Linear backward: four formulas"
// and "The gradient rule of nn/"; linear_forward in nn/ops.cpp is the forward pass.
//
// The forward pass, for every row b and output o:
//     out[b][o] = bias[o] + sum_c inp[b][c] * weight[o][c]          out = inp W^T + b
// Each weight[o][c] touched out[b][o] once per row, with slope inp[b][c]; each inp[b][c]
// touched every out[b][o], with slope weight[o][c]. The chain rule sums over those paths:
//     dinp[b][c]    = sum_o dout[b][o] * weight[o][c]                dinp    = dout W
//     dweight[o][c] = sum_b dout[b][o] * inp[b][c]                   dweight = dout^T inp
//     dbias[o]      = sum_b dout[b][o]
// Shapes: dout (B, OC), inp (B, C), weight (OC, C) -> dinp (B, C), dweight (OC, C),
// dbias (OC). Row-major: element [r][c] of a (rows, cols) matrix is at index r * cols + c.
//
// The gradient rule of nn/ (top of nn/ops.h):
//   - dinp is an activation gradient: ASSIGN it (=). The first layer passes nullptr: skip it.
//   - dweight and dbias are parameter gradients: ACCUMULATE them (+=), so gradients from
//     several batches add up. A layer without bias passes dbias = nullptr: skip it.
//
// Check your work: `nnlab check` (or `nnlab check --only 05_linear_backward`).
#include "exercises/05_linear_backward/linear_backward.h"

namespace ex {

void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int B, int C, int OC) {
  // TODO: the three gradients above, each a sum over the paths it names: the input's over
  //       the outputs, the weights' and the bias's over the batch rows. Which are assigned,
  //       which accumulated, and which may be absent (the gradient rule above)?
  (void)dinp;
  (void)dweight;
  (void)dbias;
  (void)dout;
  (void)inp;
  (void)weight;
  (void)B;
  (void)C;
  (void)OC;
}

}  // namespace ex
