// Exercise 24_gqa_head_map (lesson 11): grouped-query attention, the KV-cache saver of Llama 2
// 70B, Llama 3, Mistral, Qwen. You write the bodies in gqa_head_map.cpp; `nnlab check` runs
// the tests in test.cpp.
#pragma once

namespace ex {

// The key/value head that query head h (0 <= h < NH) reads when NH query heads share NKV
// key/value heads (NKV divides NH): consecutive query heads form a group of NH / NKV heads,
// group g reads KV head g. NKV == NH: multi-head attention; NKV == 1: multi-query attention.
int kv_head_of(int h, int NH, int NKV);

// Attention of ONE query (the newest token, at position pos) over a KV cache:
//   q (NH * hs)                         the query's heads side by side
//   kcache, vcache (pos + 1, NKV * hs)  row t = the keys / values of position t, KV heads side by side
//   out (NH * hs)                       ASSIGNED: head h's output at h * hs
// For each query head h, with g = kv_head_of(h, NH, NKV) and scale = 1 / sqrt(hs):
//   s[t] = scale * sum_i q[h*hs + i] * kcache[t][g*hs + i]     t = 0 .. pos
//   p    = softmax(s)                                          (subtract the max first)
//   out[h*hs + i] = sum_t p[t] * vcache[t][g*hs + i]
void gqa_attend(float* out, const float* q, const float* kcache, const float* vcache, int pos, int NH, int NKV,
                int hs);

}  // namespace ex
