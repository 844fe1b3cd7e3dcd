// kernels/attention.h: causal multi-head self-attention, forward and backward. The layout
// follows karpathy/llm.c `attention_forward` / `attention_backward` (train_gpt2.c): q, k, v
// arrive side by side in one buffer, the output has the heads concatenated, and the
// pre-softmax scores and the softmax are saved for the backward.
//
// Sizes: B batch, Tn sequence length (positions), C channels, NH heads, hs = C / NH (the
// template parameter is not called T because T is the sequence length in llm.c). For each
// batch row b, head h and query position t:
//     preatt[t2] = q_t . k_t2 / sqrt(hs)            for t2 <= t  (causal: no peeking ahead)
//     att[t2]    = softmax(preatt[0..t])[t2]        for t2 <= t, 0 for t2 > t
//     out_t      = sum_{t2 <= t} att[t2] v_t2       (the head's slice of out)
// qkv (B, Tn, 3C) = [q | k | v] along the last axis -> out (B, Tn, C), preatt, att
// (B, NH, Tn, Tn); entries above the diagonal are written as 0 in both.
// Backward: dout (B, Tn, C) -> dqkv (B, Tn, 3C) ASSIGNED (every element written); dpreatt,
// datt (B, NH, Tn, Tn) are scratch the backward overwrites.
// No rung's backward reads preatt: v4's forward takes preatt == nullptr and then does not
// write it, and v5's backward takes dpreatt and/or datt == nullptr (it keeps what it needs in
// its own scratch), writing the same out, att and dqkv bits either way. The cpu backend
// passes nullptr to both (a map per head, layer and direction of memory traffic it saves).
// The other rungs need every buffer.
// Sizes must be >= 1 and C % NH == 0: the callers check (nn::check_attention_sizes).
//
// Versions (code in kernels/attention.cpp):
//   v1  plain loops per (b, t, h), three passes over the earlier positions: scores q.k,
//       softmax (std::exp), weighted sum of v; the backward walks them in reverse. The
//       reference (nn::attention_forward / attention_backward, the naive GPT backend).
//   v2  one OpenMP thread per (b, h); the head's keys (values, for the backward) are
//       transposed once into scratch so a row of scores is one broadcast and a few FMAs per
//       channel (no horizontal sums); softmax with poly_exp over whole registers (the
//       masked lanes give exp(-inf) = 0); the weighted sums of rows in 4 FMA chains. The
//       backward computes dq per query row, then dk and dv per key column: each dqkv
//       element written once, by the thread that owns the head.
//   v3  v2 with each weighted sum over rows (out = att v; dq, dk, dv) advancing all of a head's
//       registers in one pass: v2 took them in groups of 4, then one at a time, so a 32-float
//       head on AVX-512 (2 registers) ran as two passes of ONE dependent FMA chain each. Every
//       element sums the same terms in the same order: bit-identical to v2.
//   v4  v3 with 4 rows per register tile: the scores and weighted sums of 4 query rows (and
//       dk, dv for 4 key columns, read along dpreatt's and att's rows, no column gathered) share
//       each load of a key, value or query register, so 4 FMA chains run where v3 ran one
//       (a row of 16 scores is one register: one chain of hs dependent FMAs). Same terms in the
//       same order: bit-identical to v3. Its softmax rows mask the last register in a register
//       and copy whole registers into preatt and att (v3 stored the mask one float at a time
//       and then loaded it as a register, which stalls). The cpu backend's forward.
//   v5  (backward only) v4 with each softmax-backward row in whole registers and one pass that
//       also writes the row's dq coefficients (dpreatt * scale); the head's (T, T) coefficients
//       kept, so dk reads them without multiplying each by the scale again. v4's row was
//       scalar (a dot product, then datt and dpreatt, then the coefficients). The row's sum
//       runs lanes first: within float rounding of v4, not bit-identical. The cpu backend's
//       backward. (The forward's softmax rows are already whole registers: no forward v5.)
#pragma once

#include <string>
#include <vector>

#include "kernels/versions.h"

namespace kernels {

using AttentionFn = void (*)(float* out, float* preatt, float* att, const float* qkv, int B, int Tn, int C,
                             int NH);
using AttentionBackwardFn = void (*)(float* dqkv, float* dpreatt, float* datt, const float* dout,
                                     const float* qkv, const float* att, int B, int Tn, int C, int NH);

// F = float (the naive backend) or double (gradient checks).
template <typename F>
void attention_forward_v1(F* out, F* preatt, F* att, const F* qkv, int B, int Tn, int C, int NH);
void attention_forward_v2(float* out, float* preatt, float* att, const float* qkv, int B, int Tn, int C, int NH);
template <typename F>
void attention_backward_v1(F* dqkv, F* dpreatt, F* datt, const F* dout, const F* qkv, const F* att, int B, int Tn,
                           int C, int NH);
void attention_backward_v2(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                           const float* att, int B, int Tn, int C, int NH);
void attention_forward_v3(float* out, float* preatt, float* att, const float* qkv, int B, int Tn, int C, int NH);
void attention_backward_v3(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                           const float* att, int B, int Tn, int C, int NH);
void attention_forward_v4(float* out, float* preatt, float* att, const float* qkv, int B, int Tn, int C, int NH);
void attention_backward_v4(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                           const float* att, int B, int Tn, int C, int NH);
void attention_backward_v5(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                           const float* att, int B, int Tn, int C, int NH);

const std::vector<OpVersion<AttentionFn>>& attention_versions();
const OpVersion<AttentionFn>& attention_version(const std::string& number_or_name);
const std::vector<OpVersion<AttentionBackwardFn>>& attention_backward_versions();
const OpVersion<AttentionBackwardFn>& attention_backward_version(const std::string& number_or_name);

}  // namespace kernels
