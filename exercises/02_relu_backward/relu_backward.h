// Exercise 02_relu_backward (lesson 02): the backward pass of ReLU.
// You write the body in relu_backward.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

#include <cstdint>

namespace ex {

// relu(x) = max(0, x), element-wise over N elements.
// dout (N): dL/d out, the gradient arriving from above; inp (N): the forward's input.
// Writes dinp (N) = dL/d inp: dout[i] where inp[i] > 0, else 0. Assigned, not accumulated.
void relu_backward(float* dinp, const float* dout, const float* inp, int64_t N);

}  // namespace ex
