// Exercise 01_neuron_forward (lesson 01): a neuron's forward pass, then a layer of them.
//
// Read first: lessons/01-neuron/README.md, sections 1 "One neuron" (and "The sigmoid: a
// smooth step") and 3 "From a list of neurons to a layer". `nnlab lesson01 --trace` prints
// every number of one forward pass.
//
// 1. neuron_forward: one neuron with n inputs
//        z = b + sum_i w[i] * x[i]        the weighted sum ("pre-activation")
//        y = sigmoid(z) = 1 / (1 + exp(-z))
//    x (n), w (n), b a scalar -> returns y.
//
// 2. layer_forward: OC neurons side by side, applied to B input rows
//        out[b][o] = sigmoid(bias[o] + sum_c weight[o][c] * inp[b][c])
//    inp (B, C), weight (OC, C), bias (OC), out (B, OC), all row-major:
//    element [r][c] of a (rows, cols) matrix is at index r * cols + c.
//    Neuron o's weights are the row weight + o * C.
//
// Check your work: `nnlab check` (or `nnlab check --only 01_neuron_forward`).
#include "exercises/01_neuron_forward/neuron_forward.h"

#include <cmath>

namespace ex {

float neuron_forward(const float* x, const float* w, float b, int n) {
  // TODO: the neuron of point 1 above: its weighted sum (where does the sum start?), then
  //       squashed into (0, 1).
  (void)x;
  (void)w;
  (void)b;
  (void)n;
  return 0.0f;
}

void layer_forward(float* out, const float* inp, const float* weight, const float* bias, int B,
                   int C, int OC) {
  // TODO: point 2 above: one output per (input row, neuron) pair. Each is one neuron's
  //       forward on one row: which weights, which inputs and which bias does it read?
  (void)out;
  (void)inp;
  (void)weight;
  (void)bias;
  (void)B;
  (void)C;
  (void)OC;
}

}  // namespace ex
