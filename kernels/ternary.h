// kernels/ternary.h: matrix-vector products with ternary weights (BitNet b1.58, lesson 15):
// every weight is -1, 0 or +1, one float scale gamma for the whole matrix, 2 bits a weight.
//
//   y (n, rows) = gamma * x (n, cols) Q^T     Q (rows, cols) in {-1, 0, +1}
//
// Storage: row r's weights in cols / 4 bytes starting at byte r * cols / 4; weight c in bits
// 2(c % 4) .. 2(c % 4) + 1 of byte c / 4, coded 0 -> 0, 1 -> +1, 2 -> -1 (the packer never
// writes 3; exercise 36 packs the same bytes). 16x fewer bytes than fp32, 4x fewer than int8:
// at batch 1 a decoder reads every weight once per token, so time ~ bytes (lesson 10's
// bandwidth law), and the arithmetic needs no multiplier at all: each weight adds x, subtracts
// it or skips it; gamma is applied once per output.
//
// Versions (code in kernels/ternary.cpp):
//   v1  naive: per output, decode each 2-bit code and add or subtract; the reference.
//   v2  simd: 16 columns a step (AVX-512: the codes' low and high bits gathered into two
//       16-bit masks with BMI2 pext, then two masked adds of x's 16 floats, one into a "plus"
//       sum and one into a "minus" sum; AVX2: 8 columns, the masks made by comparing the
//       broadcast code word with per-lane bits, x AND-ed with them), four blocks at once into
//       eight independent sums (one chain would wait on the add's latency), plus - minus at the
//       end; elsewhere v1's loop. One thread.
//   v3  simd-threads: v2's rows split across OpenMP threads (each row's sums in v2's order:
//       bit for bit v2).
// Sums are in float in a different order than v1's (16 or 8 partial sums): within a few ulps.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/versions.h"

namespace kernels {

// w (rows * cols): gamma = mean |w| (absmean, summed in double), q = clamp(round(w / (gamma +
// 1e-5)), -1, 1); packed (rows * cols / 4) assigned; returns gamma. cols % 4 == 0
// (std::invalid_argument otherwise).
float ternary_pack(const float* w, int rows, int cols, uint8_t* packed);
// The floats Q stands for: gamma * q (rows * cols).
void ternary_unpack(const uint8_t* packed, float gamma, int rows, int cols, float* out);

using TernaryMatvecFn = void (*)(float* y, const float* x, const uint8_t* packed, float gamma, int rows, int cols,
                                 int n);
using TernaryMatvecVersion = OpVersion<TernaryMatvecFn>;
const std::vector<TernaryMatvecVersion>& ternary_matvec_versions();
void ternary_matvec_v1(float* y, const float* x, const uint8_t* packed, float gamma, int rows, int cols, int n);
void ternary_matvec_v2(float* y, const float* x, const uint8_t* packed, float gamma, int rows, int cols, int n);
void ternary_matvec_v3(float* y, const float* x, const uint8_t* packed, float gamma, int rows, int cols, int n);
// The fastest version (the table's last).
void ternary_matvec(float* y, const float* x, const uint8_t* packed, float gamma, int rows, int cols, int n);

}  // namespace kernels
