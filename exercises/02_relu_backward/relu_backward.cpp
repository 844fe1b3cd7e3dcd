// Exercise 02_relu_backward (lesson 02): the backward pass of ReLU.
//
// Read first: lessons/02-backprop/README.md, section 3 "ReLU backward"; the forward pass is
// relu_forward in nn/ops.cpp.
//
// The forward pass was out[i] = relu(inp[i]) = max(0, inp[i]). Its slope is
//     d relu(x) / dx = 1 if x > 0, 0 if x < 0     (and at x = 0 we pick 0, like nn/)
// so by the chain rule dL/d inp[i] = dL/d out[i] * relu'(inp[i]):
//     dinp[i] = dout[i]  where inp[i] > 0
//     dinp[i] = 0        elsewhere
// Shapes: dinp (N), dout (N), inp (N). dinp is ASSIGNED (=), not accumulated (+=): this is
// an activation gradient (the gradient rule at the top of nn/ops.h).
//
// Check your work: `nnlab check` (or `nnlab check --only 02_relu_backward`).
#include "exercises/02_relu_backward/relu_backward.h"

namespace ex {

void relu_backward(float* dinp, const float* dout, const float* inp, int64_t N) {
  // TODO: for every element, the chain rule above: the upstream gradient times relu's slope
  //       at the forward's input (which input decides, and what happens exactly at 0?).
  (void)dinp;
  (void)dout;
  (void)inp;
  (void)N;
}

}  // namespace ex
