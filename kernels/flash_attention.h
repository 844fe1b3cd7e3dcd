// kernels/flash_attention.h: causal self-attention with grouped-query heads, forward and
// backward, as flash attention computes it: no (T, T) matrix is kept, only one log-sum-exp
// per query row (issue 21, lesson 11).
//
// Sizes: B batch, Tn positions, NH query heads, NKV key/value heads (NKV divides NH), hs the
// head size, C = NH * hs the channels of q and of out. Query head h reads KV head
// g = h / (NH / NKV): NKV == NH is multi-head attention (kernels/attention.h), NKV == 1 is
// multi-query attention, anything between is grouped-query attention.
//
// Layout: kernels/attention.h's fused buffer, generalised. Each position holds its query
// heads, then its key heads, then its value heads side by side:
//     qkv (B, Tn, C + 2 * NKV * hs) = [ q (NH * hs) | k (NKV * hs) | v (NKV * hs) ]
//     out (B, Tn, C), heads concatenated                 lse (B, NH, Tn)
// With NKV == NH the row is [q | k | v] of C each: exactly attention.h's qkv (B, Tn, 3C), so
// the GPT can switch between the two kernels without moving data. A model with fewer KV
// heads projects to C + 2 * NKV * hs channels instead of 3C.
//
// The maths, per batch row b, query head h (KV head g) and query t, scale = 1 / sqrt(hs):
//     s[t2]  = q_t . k_t2 * scale                     t2 <= t (causal)
//     lse_t  = log sum_{t2 <= t} exp(s[t2])           (saved: O(Tn) floats per head)
//     p[t2]  = exp(s[t2] - lse_t)                     the softmax, recomputable from q, k, lse
//     out_t  = sum_{t2 <= t} p[t2] v_t2
// Backward, with D_t = dout_t . out_t (= sum_t2 p[t2] dp[t2]):
//     dp[t2] = dout_t . v_t2      ds[t2] = p[t2] (dp[t2] - D_t)
//     dq_t  = scale sum_{t2 <= t} ds[t2] k_t2
//     dk_t2 = scale sum_{h in group g} sum_{t >= t2} ds[t2] q_t      (summed over the query
//     dv_t2 =       sum_{h in group g} sum_{t >= t2} p[t2] dout_t     heads sharing KV head g)
// dqkv has qkv's layout and is ASSIGNED (every element written). Sizes must be >= 1, C % NH
// == 0 and NH % NKV == 0 (check_flash_attention_sizes throws std::invalid_argument).
//
// Versions (code in kernels/flash_attention.cpp):
//   v1  plain loops per (b, h): the head's (Tn, Tn) probabilities materialised (O(Tn^2)
//       scratch), the backward through the (Tn, Tn) dp and ds matrices. The reference.
//   v2  the flash algorithm in plain loops: tiles of queries x keys, the online softmax
//       (running max and sum, rescaled per key tile), only lse saved; the backward walks the
//       key tiles, recomputing p from q, k and lse, dq/dk/dv accumulated tile by tile. No
//       (Tn, Tn) matrix anywhere; extra memory O(tile^2).
//   v3  v2's algorithm over SIMD registers (kernels/simd.h) and OpenMP threads
//       (kernels/parallel.h). Forward: an item per (b, h, query tile). Backward in two
//       passes so that every output element has one owner (no atomics, the same bits for
//       any thread count): dq by (b, h, query tile), then dk and dv by (b, g, key tile),
//       the latter taking queries in blocks of 32 (p, ds of the block first, then each key's
//       dk, dv row summed in registers over the block),
//       each recomputing p (the price of owning outputs: p and dp are computed twice).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/versions.h"

namespace kernels {

using FlashAttentionFn = void (*)(float* out, float* lse, const float* qkv, int B, int Tn, int C, int NH, int NKV);
using FlashAttentionBackwardFn = void (*)(float* dqkv, const float* dout, const float* qkv, const float* out,
                                          const float* lse, int B, int Tn, int C, int NH, int NKV);

// Throws std::invalid_argument naming the sizes unless they are a valid problem.
void check_flash_attention_sizes(int B, int Tn, int C, int NH, int NKV);
// The channels of one position of qkv: C + 2 * NKV * (C / NH).
inline int flash_qkv_channels(int C, int NH, int NKV) { return C + 2 * NKV * (C / NH); }

// F = float or double (the gradient checks run v1 and v2 in double).
template <typename F>
void flash_attention_forward_v1(F* out, F* lse, const F* qkv, int B, int Tn, int C, int NH, int NKV);
template <typename F>
void flash_attention_backward_v1(F* dqkv, const F* dout, const F* qkv, const F* out, const F* lse, int B, int Tn,
                                 int C, int NH, int NKV);
template <typename F>
void flash_attention_forward_v2(F* out, F* lse, const F* qkv, int B, int Tn, int C, int NH, int NKV);
template <typename F>
void flash_attention_backward_v2(F* dqkv, const F* dout, const F* qkv, const F* out, const F* lse, int B, int Tn,
                                 int C, int NH, int NKV);
void flash_attention_forward_v3(float* out, float* lse, const float* qkv, int B, int Tn, int C, int NH, int NKV);
void flash_attention_backward_v3(float* dqkv, const float* dout, const float* qkv, const float* out,
                                 const float* lse, int B, int Tn, int C, int NH, int NKV);

// The bytes a version allocates beyond its inputs and outputs (out, lse, dqkv), for one call
// with `threads` OpenMP threads: v1 its (Tn, Tn) matrices, v2 its tiles, v3 its per-thread
// tiles plus the backward's D (B, NH, Tn). The same formulas size the allocations in
// flash_attention.cpp, so the bench's memory table is what the code really asks for.
size_t flash_attention_scratch_bytes(int version, bool backward, int B, int Tn, int C, int NH, int NKV, int threads);

const std::vector<OpVersion<FlashAttentionFn>>& flash_attention_versions();
const OpVersion<FlashAttentionFn>& flash_attention_version(const std::string& number_or_name);
const std::vector<OpVersion<FlashAttentionBackwardFn>>& flash_attention_backward_versions();
const OpVersion<FlashAttentionBackwardFn>& flash_attention_backward_version(const std::string& number_or_name);

}  // namespace kernels
