// Exercise 05_linear_backward (lesson 02): the backward pass of a linear layer.
// You write the body in linear_backward.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

namespace ex {

// The forward pass was out = inp W^T + b:  out[b][o] = bias[o] + sum_c inp[b][c] weight[o][c].
// Given dout (B, OC) = dL/d out, and the forward's inp (B, C) and weight (OC, C):
//   dinp[b][c]     = sum_o dout[b][o] * weight[o][c]    (B, C)   assigned;   skipped if nullptr
//   dweight[o][c] += sum_b dout[b][o] * inp[b][c]       (OC, C)  accumulated
//   dbias[o]      += sum_b dout[b][o]                   (OC)     accumulated; skipped if nullptr
void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int B, int C, int OC);

}  // namespace ex
