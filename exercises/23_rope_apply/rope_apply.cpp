// Exercise 23_rope_apply (lesson 11): rotary position embedding.
//
// Read first: lesson 11's README (lessons/11-modern/README.md), the part on RoPE; the
// library's loops are kernels::rope_forward_v1 (kernels/rope.cpp), which reads precomputed
// cos/sin tables instead of computing the angles.
//
// GPT-2 adds a learned vector wpe[p] to the embedding of the token at position p. Llama adds
// nothing: it turns q and k, two numbers at a time, by angles proportional to p. A pair turned
// by p a and another by p' a have a dot product that depends on (p - p') a only, so the
// attention scores q_p . k_p' see the tokens' distance, not where they are.
//
// The pairs are (i, i + hs/2), i < hs/2, NOT (2i, 2i + 1) as in the RoFormer paper: Hugging
// Face's Llama pairs the first half of the head with the second ("rotate_half"); a checkpoint
// converted for one pairing gives garbage with the other. Pair i turns fastest for i = 0
// (frequency 1) and slowest for i = hs/2 - 1 (frequency ~ 1 / theta).
//
// Positions: the first row is the token at position pos0 (0 when the whole sequence is in x;
// the number of cached tokens when a KV-cache decoder rotates one new token).
//
// Compute the angle in double (p * pow(theta, -2.0 * i / hs)), its cos and sin in double, and
// round them to float once; rotate in float.
//
// Check your work: `nnlab check` (or `nnlab check --only 23_rope_apply`).
#include "exercises/23_rope_apply/rope_apply.h"

#include <cmath>

namespace ex {

void rope_apply(float* x, int T, int NH, int hs, int pos0, double theta) {
  // TODO: for every token t (position pos0 + t), head h and pair i < hs/2: read both elements
  //       of the pair BEFORE writing either (in place), then write the two rotated values.
  (void)x;
  (void)T;
  (void)NH;
  (void)hs;
  (void)pos0;
  (void)theta;
}

}  // namespace ex
