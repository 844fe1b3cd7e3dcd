// Reference solution of exercise 24_gqa_head_map (lesson 11). Try it yourself first:
// exercises/24_gqa_head_map/gqa_head_map.cpp.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "exercises/24_gqa_head_map/gqa_head_map.h"

namespace ex {

int kv_head_of(int h, int NH, int NKV) { return h / (NH / NKV); }

void gqa_attend(float* out, const float* q, const float* kcache, const float* vcache, int pos, int NH, int NKV,
                int hs) {
  const std::ptrdiff_t row = static_cast<std::ptrdiff_t>(NKV) * hs;  // one cache row
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  std::vector<float> p(static_cast<size_t>(pos) + 1);
  for (int h = 0; h < NH; ++h) {
    const int g = kv_head_of(h, NH, NKV);
    const float* qh = q + static_cast<std::ptrdiff_t>(h) * hs;
    float mx = -INFINITY;
    for (int t = 0; t <= pos; ++t) {
      const float* k = kcache + t * row + static_cast<std::ptrdiff_t>(g) * hs;
      float s = 0.0f;
      for (int i = 0; i < hs; ++i) s += qh[i] * k[i];
      p[static_cast<size_t>(t)] = s * scale;
      mx = std::max(mx, p[static_cast<size_t>(t)]);
    }
    float sum = 0.0f;
    for (float& v : p) sum += (v = std::exp(v - mx));
    float* oh = out + static_cast<std::ptrdiff_t>(h) * hs;
    for (int i = 0; i < hs; ++i) oh[i] = 0.0f;
    for (int t = 0; t <= pos; ++t) {
      const float* v = vcache + t * row + static_cast<std::ptrdiff_t>(g) * hs;
      const float w = p[static_cast<size_t>(t)] / sum;
      for (int i = 0; i < hs; ++i) oh[i] += w * v[i];
    }
  }
}

}  // namespace ex
