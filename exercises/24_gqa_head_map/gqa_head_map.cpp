// Exercise 24_gqa_head_map (lesson 11): grouped-query attention.
//
// Read first: lesson 11's README (lessons/11-modern/README.md), the part on grouped-query
// attention; the library's loops are kernels::flash_attention_forward_v1
// (kernels/flash_attention.cpp), which computes this for every position at once.
//
// A KV cache holds, per token and layer, every KV head's key and value: 2 * NKV * hs floats.
// With NKV = NH (GPT-2) that is the whole model width twice; grouped-query attention lets
// NH / NKV query heads share one key/value head, so the cache (and the bytes a decode step
// reads) shrinks by that factor while every query head still has its own query.
//
// Which KV head? Heads are grouped in consecutive blocks: with NH = 8, NKV = 2 query heads
// 0-3 read KV head 0 and 4-7 read KV head 1 (Hugging Face's repeat_kv repeats each KV head
// NH / NKV times in a row, which is the same map). Not h % NKV: that interleaves the groups.
//
// Check your work: `nnlab check` (or `nnlab check --only 24_gqa_head_map`).
#include "exercises/24_gqa_head_map/gqa_head_map.h"

#include <cmath>
#include <vector>

namespace ex {

int kv_head_of(int h, int NH, int NKV) {
  // TODO: the group size is NH / NKV; which group is h in?
  (void)h;
  (void)NH;
  (void)NKV;
  return 0;
}

void gqa_attend(float* out, const float* q, const float* kcache, const float* vcache, int pos, int NH, int NKV,
                int hs) {
  // TODO: for each query head: its KV head (kv_head_of), the scores against cache rows
  //       0..pos (row t of the cache starts at t * NKV * hs), a softmax with the max
  //       subtracted, then the weighted sum of the value rows into out.
  (void)out;
  (void)q;
  (void)kcache;
  (void)vcache;
  (void)pos;
  (void)NH;
  (void)NKV;
  (void)hs;
}

}  // namespace ex
