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
//
// v1-v3 spend ~4.5 cycles per 16 weights turning codes into masks: ~16% of the DRAM bandwidth
// law on the Zen 4 VM. v4, v5 change the arithmetic, as bitnet.cpp does (W1.58 A8): x is
// quantised per token to int8 (kernels::quantize_rows_int8: q_x = round(x / s), s = max|x| /
// 127, BitNet b1.58's activation quantiser and the W8A8 path's), every output an exact int32
//   y = gamma * s * sum_c q_w[c] q_x[c]
// so they differ from v1-v3 by the rounding of x (|x - s q_x| <= s / 2 per element) and agree
// with ternary_matvec_int8_ref bit for bit (integers; the same float expression at the end).
//   v4  int8-dot: 256 weights a step: their 64 code bytes in one zmm; for each of the four
//       2-bit fields k, a shift right by 2k and one table look-up (vpermb, AVX-512 VBMI: the
//       low 6 bits index {1, 2, 0, 1} repeated; without VBMI & 3 and vpshufb) give 64 bytes
//       q_w + 1 in {0, 1, 2}, and one vpdpbusd (AVX-512 VNNI, u8 x s8) their 64 products with
//       q_x: 11 vector ops per 256 weights, ~0.7 per 16 (v2: ~4.5 cycles per 16). The + 1 on
//       the unsigned side costs one subtraction of sum q_x per output, computed once per
//       token. Field k holds weight 4j + k in byte j, so q_x is permuted into that order once
//       per token (qp[256b + 64k + j] = q_x[256b + 4j + k], zero-padded to a multiple of 256)
//       rather than the weights once per row: the packed layout stays ternary_pack's. AVX2:
//       the same fields from two ymm halves, vpshufb, vpmaddubsw + vpmaddwd; elsewhere the
//       reference's loop. Codes prefetched 2 KiB ahead (fetching and computing a line cost
//       about the same on one core: the fetches must start early). One thread. A rough run
//       on a busy Zen 4 VM (1 thread): 5.9x v3's speed in cache, 3.5-3.9x from DRAM; in cache (3072 x 768) ~0.75
//       cycles per 16 weights, ~90% of the 1-thread DRAM law; from DRAM (4096^2) ~50-55% of
//       a quiet minute's 1-thread STREAM (21.6 GB/s): computing a line costs about as much
//       as fetching it, and the two only partly overlap.
//   v5  int8-dot-threads: v4's rows across OpenMP threads.
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
void ternary_matvec_v4(float* y, const float* x, const uint8_t* packed, float gamma, int rows, int cols, int n);
void ternary_matvec_v5(float* y, const float* x, const uint8_t* packed, float gamma, int rows, int cols, int n);
// v4's and v5's reference: the same quantisation of x, then plain loops summing q_w q_x in int32.
void ternary_matvec_int8_ref(float* y, const float* x, const uint8_t* packed, float gamma, int rows, int cols,
                             int n);
// The fastest version with float activations (v3): what callers that want v1's numbers (up to
// float rounding) use. v5, the table's last, is faster but rounds x to int8.
void ternary_matvec(float* y, const float* x, const uint8_t* packed, float gamma, int rows, int cols, int n);

}  // namespace kernels
