// Exercise 08_bias_relu_fused (lesson 03): add the bias and apply ReLU in one pass.
//
// Read first: lesson 03's README, the section on fusion and bytes moved;
// bias_relu_fused.h counts the bytes of the fused and the unfused version.
//
// For every row b and column o of the (B, OC) matrix:
//     out[b][o] = max(0, inp[b][o] + bias[o])
// Row-major: element [b][o] is at index b * OC + o. The bias is indexed by the COLUMN o
// (one bias per output neuron, shared by every row of the batch), not by the row b.
// One loop nest, one load and one store per element: no temporary buffer, no second pass.
// out may be the same buffer as inp (in place); the tests call it both ways.
//
// Check your work: `nnlab check` (or `nnlab check --only 08_bias_relu_fused`).
#include "exercises/08_bias_relu_fused/bias_relu_fused.h"

namespace ex {

void bias_relu(float* out, const float* inp, const float* bias, int B, int OC) {
  // TODO: the formula above for every element, in one pass: each input read once and each
  //       output written once. Which bias does an element get?
  (void)out;
  (void)inp;
  (void)bias;
  (void)B;
  (void)OC;
}

}  // namespace ex
