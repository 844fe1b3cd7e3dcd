// Exercise 36_ternary_quantize (lesson 15): ternary weights with an absmean scale.
//
// Read first: lesson 15's README (lessons/15-compression/README.md), the part on BitNet. The
// library's version is gpt/compress.h (ternary_quantize) and kernels/ternary.h (the matvec).
//
// log2(3) = 1.58 bits a weight. BitNet b1.58 trains such weights from scratch: the forward pass
// uses gamma * q, the backward pass sends the gradient straight through the rounding to fp32
// "latent" weights, which the optimiser updates. At inference a matrix-vector product needs
// no multiplier: each weight adds x, subtracts it, or skips it. Packed in 2 bits, the matrix
// is 16x smaller than in fp32, and decoding, which reads every weight once per token, is
// bound by those bytes (lesson 10's bandwidth law).
//
// Check your work: `nnlab check` (or `nnlab check --only 36_ternary_quantize`).
#include "exercises/36_ternary_quantize/ternary.h"

namespace ex {

float ternary_quantize(int8_t* q, const float* w, int n) {
  // TODO: gamma = mean of |w| (sum in double); q[i] = round(w[i] / (gamma + 1e-5)) clamped
  //       to [-1, 1]; return gamma.
  (void)q;
  (void)w;
  (void)n;
  return 0.0f;
}

void ternary_pack(uint8_t* packed, const int8_t* q, int n) {
  // TODO: byte i / 4 gets code(q[i]) << 2 * (i % 4), code 0 -> 0, +1 -> 1, -1 -> 2.
  (void)packed;
  (void)q;
  (void)n;
}

void ternary_matvec(float* y, const uint8_t* packed, float gamma, const float* x, int rows, int cols) {
  // TODO: per row, add x[c] where the code is 1, subtract it where it is 2; times gamma.
  (void)y;
  (void)packed;
  (void)gamma;
  (void)x;
  (void)rows;
  (void)cols;
}

}  // namespace ex
