// Exercise 12_causal_attention_forward (lesson 07): causal multi-head self-attention, forward.
//
// Read first: lesson 07's README (lessons/07-attention/README.md), parts 1 to 4;
// attention_loops in lessons/07-attention/attention_lesson.cpp is the same computation on
// separate q, k, v arrays, and nn::attention_forward (nn/attention.cpp) the library's op.
//
// For every sequence b, head h and query position t (hs = C / NH, C3 = 3 * C):
//     q_t   = qkv + (b * T + t)  * C3 + 0 * C + h * hs      (hs floats)
//     k_t2  = qkv + (b * T + t2) * C3 + 1 * C + h * hs
//     v_t2  = qkv + (b * T + t2) * C3 + 2 * C + h * hs
//   1. scores:  s[t2] = (q_t . k_t2) / sqrt(hs) for t2 = 0..t only: the causal mask, a
//      position never looks at a later one
//   2. softmax over those t + 1 scores, the max subtracted first (scores of a few hundred
//      are possible, and exp(89) is already inf in float):
//          att[t2] = exp(s[t2] - max) / sum_{j <= t} exp(s[j] - max)
//      and att[t2] = 0 for t2 > t (write it: the buffer starts as NaN)
//   3. out_t (head h's slice: out + (b * T + t) * C + h * hs) = sum_{t2 <= t} att[t2] v_t2
// Row t of head h of sequence b in att starts at ((b * NH + h) * T + t) * T.
// Everything is assigned (=).
//
// Check your work: `nnlab check` (or `nnlab check --only 12_causal_attention_forward`).
#include "exercises/12_causal_attention_forward/causal_attention_forward.h"

namespace ex {

void causal_attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  // TODO: for every sequence, head and query position, the three steps above: the scaled
  //       scores against the positions it may see, their stable softmax (what goes in the
  //       rest of the row?), and the weighted sum of the values into that head's slice of out.
  (void)out;
  (void)att;
  (void)qkv;
  (void)B;
  (void)T;
  (void)C;
  (void)NH;
}

}  // namespace ex
