// Exercise 03_softmax_ce_backward (lesson 02): the gradient of softmax + cross-entropy.
// You write the body in softmax_ce_backward.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

#include <cstdint>

namespace ex {

// The mean cross-entropy loss of B rows of logits, L = (1/B) sum_b -log softmax(logits_b)[t_b],
// differentiated with respect to the logits:
//   dlogits[b][v] = (softmax(logits_b)[v] - (v == targets[b] ? 1 : 0)) / B
// logits (B, V), targets (B) with values in [0, V) -> dlogits (B, V), assigned.
void softmax_ce_backward(float* dlogits, const float* logits, const int32_t* targets, int B, int V);

}  // namespace ex
