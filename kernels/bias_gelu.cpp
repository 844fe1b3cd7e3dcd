// kernels/bias_gelu.cpp: out = gelu(inp + bias), two passes and fused. What each version
// changes and the bytes it moves are in kernels/bias_gelu.h; here, the code.
//
// The plain loop every version computes:
//   for b < B: for o < OC: out[b][o] = gelu(inp[b][o] + bias[o])
#include "kernels/bias_gelu.h"

#include <cstddef>
#include <vector>

#include "kernels/simd.h"
#include "kernels/versions.h"

namespace kernels {

namespace {
using V = simd::Native;
constexpr int W = V::lanes;
}  // namespace

// ---- v1: two passes ----------------------------------------------------------------------------
// Pass 1 reads inp and writes out (8 B/element); pass 2 reads out and writes it back (8
// more). Both are SIMD: the only difference from v2 is the trip through memory.
void bias_gelu_forward_v1(float* out, const float* inp, const float* bias, int B, int OC) {
  // inp (B,OC), bias (OC), out (B,OC)
  // Pass 1: out = inp + bias, row by row (bias is broadcast down the rows).
  for (int b = 0; b < B; ++b) {
    const float* x = inp + static_cast<ptrdiff_t>(b) * OC;
    float* y = out + static_cast<ptrdiff_t>(b) * OC;
    int o = 0;
    for (; o + W <= OC; o += W) V::store(y + o, V::add(V::load(x + o), V::load(bias + o)));
    for (; o < OC; ++o) y[o] = x[o] + bias[o];
  }
  // Pass 2: out = gelu(out), the whole (B*OC,) buffer as one flat run.
  const size_t n = static_cast<size_t>(B) * static_cast<size_t>(OC);
  size_t i = 0;
  for (; i + W <= n; i += W) V::store(out + i, gelu_tanh<V>(V::load(out + i)));
  for (; i < n; ++i) out[i] = gelu_tanhf(out[i]);
}

// ---- v2: fused -----------------------------------------------------------------------------------
// One pass; inp + bias lives in a register between the add and the GELU.
void bias_gelu_forward_v2(float* out, const float* inp, const float* bias, int B, int OC) {
  // inp (B,OC), bias (OC), out (B,OC)
  for (int b = 0; b < B; ++b) {
    const float* x = inp + static_cast<ptrdiff_t>(b) * OC;
    float* y = out + static_cast<ptrdiff_t>(b) * OC;
    int o = 0;
    for (; o + W <= OC; o += W) {
      const V::reg pre = V::add(V::load(x + o), V::load(bias + o));  // never stored
      V::store(y + o, gelu_tanh<V>(pre));
    }
    for (; o < OC; ++o) y[o] = gelu_tanhf(x[o] + bias[o]);
  }
}

// ---- dispatch --------------------------------------------------------------------------------------
void bias_gelu_forward(float* out, const float* inp, const float* bias, int B, int OC) {
  bias_gelu_forward_v2(out, inp, bias, B, OC);
}

const std::vector<BiasGeluVersion>& bias_gelu_versions() {
  static const std::vector<BiasGeluVersion> versions = {
      {1, "two-pass", "out = inp + bias, then out = gelu(out): 16 B/element", &bias_gelu_forward_v1},
      {2, "fused", "out = gelu(inp + bias) in one pass: 8 B/element", &bias_gelu_forward_v2},
  };
  return versions;
}

const BiasGeluVersion& bias_gelu_version(const std::string& number_or_name) {
  return find_version(bias_gelu_versions(), number_or_name, "bias_gelu");
}

}  // namespace kernels
