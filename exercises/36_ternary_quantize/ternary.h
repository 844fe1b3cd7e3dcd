// Exercise 36_ternary_quantize (lesson 15): BitNet b1.58's weights: every weight -1, 0 or +1
// times one scale per matrix. You write the bodies in ternary.cpp; `nnlab check` runs the tests
// in test.cpp.
#pragma once

#include <cstdint>

namespace ex {

// W (n weights): gamma = mean |W| (absmean, in double, returned as float), then
//   q[i] = clamp(nearbyint(W[i] / (gamma + eps)), -1, 1)      eps = 1e-5 (BitNet's)
// Returns gamma; q (n) assigned. W stands for gamma * q. An all-zero W gives gamma 0 and q = 0.
float ternary_quantize(int8_t* q, const float* w, int n);

// 2-bit packing for the matvec: 4 weights per byte, weight i in bits 2(i%4)..2(i%4)+1 of byte
// i/4, coded 0 -> 0, +1 -> 1, -1 -> 2 (3 never appears). n % 4 == 0. packed (n / 4) assigned.
void ternary_pack(uint8_t* packed, const int8_t* q, int n);

// y (rows) = gamma * (Q x) with Q (rows, cols) packed row by row by ternary_pack (cols % 4 ==
// 0): no multiplications by weights, only additions and subtractions of x's elements.
void ternary_matvec(float* y, const uint8_t* packed, float gamma, const float* x, int rows, int cols);

}  // namespace ex
