// Exercise 18_kv_cache (lesson 10): generating with a KV cache, one position at a time.
//
// Read first: lesson 10's README (lessons/10-inference/README.md), the part on the KV cache;
// exercise 12 (causal attention over a whole sequence) is the computation this one splits
// up; kernels::attention_decode_v1 (kernels/decode.cpp) is the library's version, for B
// sequences and n new positions at once.
//
// A GPT generates one token per step. Without a cache, step t runs the whole sequence
// 0..t through the model again: O(t^2) attention work for one new row of output. But the
// keys and values of positions 0..t-1 never change once computed (causal attention: a
// position never looks at later ones), so we keep them, one row per position:
//     kcache, vcache (maxT, C)      row t = position t's k (v), every head side by side
// and each step only
//   1. appends the new position's k and v:   kcache[pos] = k,  vcache[pos] = v
//   2. lets its query attend over rows 0..pos (per head h, hs = C / NH):
//          s[t2]  = q_h . k_t2,h / sqrt(hs)                       t2 = 0..pos
//          a[t2]  = exp(s[t2] - max) / sum_{j <= pos} exp(s[j] - max)
//          out_h  = sum_{t2 <= pos} a[t2] v_t2,h
//      (max subtracted first: scores of a few hundred are possible, exp(89) is inf in float)
// The output is exactly row pos of full causal attention over positions 0..pos: the cache
// changes how much is recomputed, never the result. Per token that is O(pos * C) work and
// reading the cache once, instead of the O(pos^2 * C) of recomputing everything.
//
// Row t of the cache starts at kcache + t * C; head h's slice of it at + h * hs.
//
// Check your work: `nnlab check` (or `nnlab check --only 18_kv_cache`).
#include "exercises/18_kv_cache/kv_cache.h"

namespace ex {

void kv_cache_append(float* kcache, float* vcache, const float* k, const float* v, int pos, int C) {
  // TODO: step 1 above: the new position's key and value become the cache's row pos.
  (void)kcache;
  (void)vcache;
  (void)k;
  (void)v;
  (void)pos;
  (void)C;
}

void kv_cache_attend(float* out, const float* q, const float* kcache, const float* vcache, int pos, int C,
                     int NH) {
  // TODO: step 2 above, head by head: the scaled scores of the query against every cached
  //       key up to pos (you need somewhere to keep them), their stable softmax, and the
  //       weighted sum of the cached values into that head's slice of out.
  (void)out;
  (void)q;
  (void)kcache;
  (void)vcache;
  (void)pos;
  (void)C;
  (void)NH;
}

}  // namespace ex
