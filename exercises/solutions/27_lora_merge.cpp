// Reference solution of exercise 27_lora_merge (lesson 12). Try it yourself first:
// exercises/27_lora_merge/lora_merge.cpp.
#include <cstddef>

#include "exercises/27_lora_merge/lora_merge.h"

namespace ex {

namespace {

// W += sign * (alpha / r) * B A, one element at a time (the product summed in float, then
// scaled and added: the same order for merge and unmerge, so they cancel as closely as
// float allows).
void add_product(float* W, const float* A, const float* B, int IN, int OUT, int r, float alpha, float sign) {
  const float s = sign * alpha / static_cast<float>(r);
  for (int o = 0; o < OUT; ++o) {
    for (int i = 0; i < IN; ++i) {
      float acc = 0.0f;
      for (int j = 0; j < r; ++j) acc += B[static_cast<size_t>(o) * r + j] * A[static_cast<size_t>(j) * IN + i];
      W[static_cast<size_t>(o) * IN + i] += s * acc;
    }
  }
}

}  // namespace

void lora_merge(float* W, const float* A, const float* B, int IN, int OUT, int r, float alpha) {
  add_product(W, A, B, IN, OUT, r, alpha, 1.0f);
}

void lora_unmerge(float* W, const float* A, const float* B, int IN, int OUT, int r, float alpha) {
  add_product(W, A, B, IN, OUT, r, alpha, -1.0f);
}

}  // namespace ex
