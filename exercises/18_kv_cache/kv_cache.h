// Exercise 18_kv_cache (lesson 10): generating with a KV cache, one position at a time.
// You write the bodies in kv_cache.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

namespace ex {

// The cache of ONE sequence: kcache and vcache are (maxT, C) row-major; row t holds
// position t's key (value), all NH heads side by side (head h owns channels
// [h*hs, (h+1)*hs), hs = C / NH), the layout of the qkv projection's k and v thirds.

// Writes k (C) into row pos of kcache and v (C) into row pos of vcache; nothing else
// changes. Assigned (=), bit for bit.
void kv_cache_append(float* kcache, float* vcache, const float* k, const float* v, int pos, int C);

// The query q (C) of position pos attends over the cached positions 0..pos (its own k and v
// are already in the cache). For every head h, with q_h, k_t2,h, v_t2,h head h's slices:
//     s[t2]   = q_h . k_t2,h / sqrt(hs)                                 t2 = 0..pos
//     a[t2]   = exp(s[t2] - max) / sum_{j <= pos} exp(s[j] - max)
//     out_h   = sum_{t2 <= pos} a[t2] v_t2,h            (head h's slice of out (C), =)
// Rows after pos are not read: they do not exist yet. C % NH == 0.
void kv_cache_attend(float* out, const float* q, const float* kcache, const float* vcache, int pos, int C,
                     int NH);

}  // namespace ex
