// Exercise 12_causal_attention_forward (lesson 07): causal multi-head self-attention, forward.
// You write the body in causal_attention_forward.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

namespace ex {

// The layout of llm.c and nn::attention_forward. Sizes: B sequences of T positions, C
// channels, NH heads of hs = C / NH channels each (C % NH == 0).
//   qkv (B, T, 3C): row (b, t) is [ q | k | v ], each C long; head h owns channels
//                   [h*hs, (h+1)*hs) of each of the three.
// For every b, h and query position t, with q_t, k_t2, v_t2 head h's slices:
//     s[t2]   = q_t . k_t2 / sqrt(hs)                     for t2 <= t  (causal)
//     att[t2] = exp(s[t2] - max) / sum_{j<=t} exp(s[j] - max)   for t2 <= t,  0 for t2 > t
//     out_t   = sum_{t2 <= t} att[t2] v_t2                 head h's slice of out
// Outputs, all assigned (=):
//   out (B, T, C)       the heads' outputs side by side
//   att (B, NH, T, T)   att[((b * NH + h) * T + t) * T + t2], 0 above the diagonal
void causal_attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH);

}  // namespace ex
