// Exercise 27_lora_merge (lesson 12): merge a LoRA adapter into its base weight.
//
// Read first: lesson 12's README (lessons/12-real-models/README.md), the part on merging an
// adapter; the library's version is gpt/lora.h (`nnlab gpt merge`).
//
// A layer with an adapter computes y = x W^T + b + s (x A^T) B^T. Matrix products associate,
// so that is x (W + s B A)^T + b: once training is over, the adapter can be added into W
// and the layer is an ordinary Linear again, with no extra cost at inference and nothing new
// for the inference code (or the int8 / int4 packing of lesson 10) to know about. Keeping W
// and the adapter apart instead lets one base model serve many small adapters, swapped in
// and out: unmerge subtracts the same product.
//
// Check your work: `nnlab check` (or `nnlab check --only 27_lora_merge`).
#include "exercises/27_lora_merge/lora_merge.h"

namespace ex {

void lora_merge(float* W, const float* A, const float* B, int IN, int OUT, int r, float alpha) {
  // TODO: s = alpha / r; for every (o, i): W[o * IN + i] += s * sum over j < r of
  //       B[o * r + j] * A[j * IN + i].
  (void)W;
  (void)A;
  (void)B;
  (void)IN;
  (void)OUT;
  (void)r;
  (void)alpha;
}

void lora_unmerge(float* W, const float* A, const float* B, int IN, int OUT, int r, float alpha) {
  // TODO: the same product, subtracted.
  (void)W;
  (void)A;
  (void)B;
  (void)IN;
  (void)OUT;
  (void)r;
  (void)alpha;
}

}  // namespace ex
