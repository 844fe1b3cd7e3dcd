// Reference solution of exercise 26_lora_forward_backward (lesson 12). Try it yourself first:
// exercises/26_lora_forward_backward/lora_forward_backward.cpp.
#include <cstddef>
#include <vector>

#include "exercises/26_lora_forward_backward/lora_forward_backward.h"

namespace ex {

void lora_forward(float* y, float* h, const float* x, const float* W, const float* b, const float* A, const float* B,
                  int N, int IN, int OUT, int r, float alpha) {
  const float s = alpha / static_cast<float>(r);
  for (int n = 0; n < N; ++n) {
    const float* xn = x + static_cast<size_t>(n) * IN;
    float* hn = h + static_cast<size_t>(n) * r;
    for (int j = 0; j < r; ++j) {  // the narrow product first: h = x A^T
      float acc = 0.0f;
      for (int i = 0; i < IN; ++i) acc += A[static_cast<size_t>(j) * IN + i] * xn[i];
      hn[j] = acc;
    }
    for (int o = 0; o < OUT; ++o) {
      float base = b[o];
      for (int i = 0; i < IN; ++i) base += W[static_cast<size_t>(o) * IN + i] * xn[i];
      float low = 0.0f;
      for (int j = 0; j < r; ++j) low += B[static_cast<size_t>(o) * r + j] * hn[j];
      y[static_cast<size_t>(n) * OUT + o] = base + s * low;
    }
  }
}

void lora_backward(float* dx, float* dA, float* dB, const float* dy, const float* x, const float* h, const float* W,
                   const float* A, const float* B, int N, int IN, int OUT, int r, float alpha) {
  const float s = alpha / static_cast<float>(r);
  std::vector<float> dh(static_cast<size_t>(r));
  for (int n = 0; n < N; ++n) {
    const float* dyn = dy + static_cast<size_t>(n) * OUT;
    const float* xn = x + static_cast<size_t>(n) * IN;
    const float* hn = h + static_cast<size_t>(n) * r;
    float* dxn = dx + static_cast<size_t>(n) * IN;
    for (int j = 0; j < r; ++j) {
      float acc = 0.0f;
      for (int o = 0; o < OUT; ++o) acc += dyn[o] * B[static_cast<size_t>(o) * r + j];
      dh[static_cast<size_t>(j)] = s * acc;
    }
    for (int o = 0; o < OUT; ++o) {
      for (int j = 0; j < r; ++j) dB[static_cast<size_t>(o) * r + j] += s * dyn[o] * hn[j];
    }
    for (int j = 0; j < r; ++j) {
      for (int i = 0; i < IN; ++i) dA[static_cast<size_t>(j) * IN + i] += dh[static_cast<size_t>(j)] * xn[i];
    }
    for (int i = 0; i < IN; ++i) {
      float acc = 0.0f;
      for (int o = 0; o < OUT; ++o) acc += dyn[o] * W[static_cast<size_t>(o) * IN + i];
      for (int j = 0; j < r; ++j) acc += dh[static_cast<size_t>(j)] * A[static_cast<size_t>(j) * IN + i];
      dxn[i] += acc;
    }
  }
}

}  // namespace ex
