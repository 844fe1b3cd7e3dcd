// nn/attention.h: causal multi-head self-attention as an op pair, the first building block
// of a GPT. The layout follows karpathy/llm.c `attention_forward` / `attention_backward`
// (train_gpt2.c): q, k, v arrive side by side in one buffer, the output has the heads
// concatenated, and the pre-softmax scores and the softmax are saved for the backward.
//
// Sizes: B batch, Tn sequence length (positions), C channels, NH heads, hs = C / NH.
// For each batch row b, head h and query position t:
//     preatt[t2] = q_t . k_t2 / sqrt(hs)            for t2 <= t  (causal: no peeking ahead)
//     att[t2]    = softmax(preatt[0..t])[t2]        for t2 <= t, 0 for t2 > t
//     out_t      = sum_{t2 <= t} att[t2] v_t2       (the head's slice of out)
//
// The gradient rule (nn/ops.h): attention has no parameters; dqkv is an activation
// gradient and is ASSIGNED (every element written, old contents never read). dpreatt and
// datt are scratch the backward overwrites.
//
// Templated on the scalar type F (float for training, double for the gradient checks);
// the template parameter is not called T because T is the sequence length in llm.c.
// The loops are kernels/attention.cpp's v1 (these check the sizes, then call it).
#pragma once

namespace nn {

// nn::Error unless every size is >= 1 and C % NH == 0 (what every attention version needs).
void check_attention_sizes(int B, int Tn, int C, int NH);

// qkv (B, Tn, 3C): [q | k | v] along the last axis, each (C) = NH heads of hs channels.
// -> out (B, Tn, C), preatt (B, NH, Tn, Tn), att (B, NH, Tn, Tn).
// Entries above the diagonal (t2 > t) are written as 0 in both preatt and att.
// Throws nn::Error if a size is < 1 or C % NH != 0.
template <typename F>
void attention_forward(F* out, F* preatt, F* att, const F* qkv, int B, int Tn, int C, int NH);

// dout (B, Tn, C), qkv (B, Tn, 3C), att (B, NH, Tn, Tn) from the forward
// -> dqkv (B, Tn, 3C) ASSIGNED; dpreatt, datt (B, NH, Tn, Tn) are scratch (overwritten).
template <typename F>
void attention_backward(F* dqkv, F* dpreatt, F* datt, const F* dout, const F* qkv, const F* att,
                        int B, int Tn, int C, int NH);

}  // namespace nn
