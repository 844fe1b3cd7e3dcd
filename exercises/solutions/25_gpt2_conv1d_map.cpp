// Reference solution of exercise 25_gpt2_conv1d_map (lesson 12). Try it yourself first:
// exercises/25_gpt2_conv1d_map/gpt2_conv1d_map.cpp.
#include <cstddef>

#include "exercises/25_gpt2_conv1d_map/gpt2_conv1d_map.h"

namespace ex {

void conv1d_to_linear(float* dst, const float* src, int in, int out) {
  for (int o = 0; o < out; ++o) {
    for (int i = 0; i < in; ++i) {
      dst[static_cast<size_t>(o) * in + i] = src[static_cast<size_t>(i) * out + o];
    }
  }
}

void split_c_attn(float* q, float* k, float* v, float* q_bias, float* k_bias, float* v_bias, const float* src,
                  const float* bias, int C) {
  float* parts[3] = {q, k, v};
  float* biases[3] = {q_bias, k_bias, v_bias};
  const size_t W = 3 * static_cast<size_t>(C);  // a row of src: one input's 3C output weights
  for (int p = 0; p < 3; ++p) {
    const size_t col0 = static_cast<size_t>(p) * C;  // q's columns first, then k's, then v's
    for (int o = 0; o < C; ++o) {
      for (int i = 0; i < C; ++i) parts[p][static_cast<size_t>(o) * C + i] = src[static_cast<size_t>(i) * W + col0 + o];
      biases[p][o] = bias[col0 + o];
    }
  }
}

}  // namespace ex
