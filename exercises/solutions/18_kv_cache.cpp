// Reference solution of exercise 18_kv_cache (lesson 10). Try it yourself first:
// exercises/18_kv_cache/kv_cache.cpp.
#include "exercises/18_kv_cache/kv_cache.h"

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace ex {

void kv_cache_append(float* kcache, float* vcache, const float* k, const float* v, int pos, int C) {
  // k, v (C) -> row pos of kcache, vcache (maxT, C)
  float* krow = kcache + static_cast<std::ptrdiff_t>(pos) * C;
  float* vrow = vcache + static_cast<std::ptrdiff_t>(pos) * C;
  for (int c = 0; c < C; ++c) {
    krow[c] = k[c];
    vrow[c] = v[c];
  }
}

void kv_cache_attend(float* out, const float* q, const float* kcache, const float* vcache, int pos, int C,
                     int NH) {
  // q (C), kcache, vcache (maxT, C) with rows 0..pos filled -> out (C)
  using std::ptrdiff_t;
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  std::vector<float> a(static_cast<size_t>(pos) + 1);  // one head's scores, then probabilities
  for (int h = 0; h < NH; ++h) {
    const float* qh = q + h * hs;

    // 1. s[t2] = q_h . k_t2,h / sqrt(hs) over the cached positions, and their max
    float maxval = -std::numeric_limits<float>::infinity();
    for (int t2 = 0; t2 <= pos; ++t2) {
      const float* kh = kcache + static_cast<ptrdiff_t>(t2) * C + h * hs;
      float dot = 0.0f;
      for (int i = 0; i < hs; ++i) dot += qh[i] * kh[i];
      dot *= scale;
      a[static_cast<size_t>(t2)] = dot;
      if (dot > maxval) maxval = dot;
    }

    // 2. softmax, max subtracted: the largest exp is exp(0) = 1, so nothing overflows
    float sum = 0.0f;
    for (int t2 = 0; t2 <= pos; ++t2) {
      a[static_cast<size_t>(t2)] = std::exp(a[static_cast<size_t>(t2)] - maxval);
      sum += a[static_cast<size_t>(t2)];
    }
    for (int t2 = 0; t2 <= pos; ++t2) a[static_cast<size_t>(t2)] /= sum;

    // 3. out_h = sum_t2 a[t2] v_t2,h
    float* oh = out + h * hs;
    for (int i = 0; i < hs; ++i) oh[i] = 0.0f;
    for (int t2 = 0; t2 <= pos; ++t2) {
      const float* vh = vcache + static_cast<ptrdiff_t>(t2) * C + h * hs;
      for (int i = 0; i < hs; ++i) oh[i] += a[static_cast<size_t>(t2)] * vh[i];
    }
  }
}

}  // namespace ex
