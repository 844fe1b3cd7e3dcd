// Reference solution of exercise 12_causal_attention_forward (lesson 07). Try it yourself
// first: exercises/12_causal_attention_forward/causal_attention_forward.cpp.
#include "exercises/12_causal_attention_forward/causal_attention_forward.h"

#include <cmath>
#include <cstddef>
#include <limits>

namespace ex {

void causal_attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  // qkv (B, T, 3C) -> out (B, T, C), att (B, NH, T, T)
  using std::ptrdiff_t;
  const int C3 = 3 * C;
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      for (int h = 0; h < NH; ++h) {
        const float* q = qkv + (static_cast<ptrdiff_t>(b) * T + t) * C3 + h * hs;
        float* att_row = att + ((static_cast<ptrdiff_t>(b) * NH + h) * T + t) * T;

        // 1. scores q . k_t2 / sqrt(hs) for the positions t may see, and their max
        float maxval = -std::numeric_limits<float>::infinity();
        for (int t2 = 0; t2 <= t; ++t2) {
          const float* k = qkv + (static_cast<ptrdiff_t>(b) * T + t2) * C3 + C + h * hs;
          float dot = 0.0f;
          for (int i = 0; i < hs; ++i) dot += q[i] * k[i];
          dot *= scale;
          att_row[t2] = dot;
          if (dot > maxval) maxval = dot;
        }

        // 2. softmax, max subtracted: the largest exp is exp(0) = 1, so no overflow
        float sum = 0.0f;
        for (int t2 = 0; t2 <= t; ++t2) {
          att_row[t2] = std::exp(att_row[t2] - maxval);
          sum += att_row[t2];
        }
        for (int t2 = 0; t2 < T; ++t2) att_row[t2] = t2 <= t ? att_row[t2] / sum : 0.0f;

        // 3. out_t = sum_t2 att[t2] v_t2, into head h's slice
        float* o = out + (static_cast<ptrdiff_t>(b) * T + t) * C + h * hs;
        for (int i = 0; i < hs; ++i) o[i] = 0.0f;
        for (int t2 = 0; t2 <= t; ++t2) {
          const float* v = qkv + (static_cast<ptrdiff_t>(b) * T + t2) * C3 + 2 * C + h * hs;
          for (int i = 0; i < hs; ++i) o[i] += att_row[t2] * v[i];
        }
      }
    }
  }
}

}  // namespace ex
