// Exercise 27_lora_merge (lesson 12): fold a trained LoRA adapter into its base weight, and
// take it out again. You write the bodies in lora_merge.cpp; `nnlab check` runs the tests in
// test.cpp.
#pragma once

namespace ex {

// W (OUT, IN), A (r, IN), B (OUT, r), row-major; s = alpha / r.
// lora_merge:    W += s * B A          W[o][i] += s * sum_j B[o][j] A[j][i]
// lora_unmerge:  W -= s * B A          (back to the base weight, up to float rounding)
// Both change W in place and nothing else.
void lora_merge(float* W, const float* A, const float* B, int IN, int OUT, int r, float alpha);
void lora_unmerge(float* W, const float* A, const float* B, int IN, int OUT, int r, float alpha);

}  // namespace ex
