// Exercise 01_neuron_forward (lesson 01): a neuron's forward pass, then a layer of them.
// You write the bodies in neuron_forward.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

namespace ex {

// One neuron with n inputs: y = sigmoid(b + sum_i w[i] * x[i]).
// x (n), w (n), b a scalar; returns y, a number in (0, 1).
float neuron_forward(const float* x, const float* w, float b, int n);

// A layer of OC neurons applied to each of B input rows:
//   out[b][o] = sigmoid(bias[o] + sum_c weight[o][c] * inp[b][c])
// inp (B, C), weight (OC, C), bias (OC), out (B, OC); all row-major.
void layer_forward(float* out, const float* inp, const float* weight, const float* bias, int B,
                   int C, int OC);

}  // namespace ex
