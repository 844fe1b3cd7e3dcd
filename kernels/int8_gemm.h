// kernels/int8_gemm.h: integer matrix products for W8A8 inference (lesson 15): int8 x int8
// multiplied exactly, summed in int32, scaled back to float once per output.
//
//   C (M, N) int32 = A (M, K) int8 . B (N, K) int8 ^T      both row-major, K contiguous
//
// A holds activations (one row per token), B a Linear layer's weight (out, in) as stored
// for x W^T: the same "NT" shape as every product of the GPT's forward. Integers are exact:
// every version must give v1's int32s bit for bit (no tolerance), for any K up to 2^16
// (|sum| <= K * 127 * 128 < 2^31). Ranges: A in [-128, 127] (every version takes -128 in A),
// B in [-127, 127] (the AVX2 rung flips b's sign, and -(-128) does not fit an int8; the
// quantiser below never makes -128).
//
// Symmetric per-row quantisation (SmoothQuant's per-token activations, lesson 10's
// per-output-channel weights): q = round(x / s) clamped to [-127, 127], s = max |x| / 127
// (0 for an all-zero row, whose q are 0). Then
//   y[m][n] = sa[m] * sw[n] * C[m][n] + bias[n]
// is x W^T computed on the quantised values.
//
// Versions (code and figures in kernels/int8_gemm.cpp; the table lists those this build has,
// in ladder order):
//   v1 naive         plain loops, int32 sums: the reference.
//   v2 blocked       plain C++ 4 x 4 register tile, threads: every machine.
//   v3 avx2-maddubs  vpmaddubsw + vpmaddwd with the sign trick (__AVX2__), or
//   v3 neon-sdot     vdotq_s32 (__ARM_FEATURE_DOTPROD; not run on x86 machines).
//   v4 avx512-vnni   vpdpbusd on packed panels, 8 x 32 micro-kernel, threads
//                    (__AVX512VNNI__ && __AVX512BW__). Keeps its packed copies of A and B in
//                    thread_local buffers that only grow (the largest product each thread ran).
// `int8_gemm` is the table's last: the fastest the build has.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/versions.h"

namespace kernels {

// C (M, N) = A (M, K) . B (N, K)^T; C assigned; no aliasing.
using Int8GemmFn = void (*)(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K);
using Int8GemmVersion = OpVersion<Int8GemmFn>;
const std::vector<Int8GemmVersion>& int8_gemm_versions();
void int8_gemm_v1(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K);
void int8_gemm_v2(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K);
#if defined(__AVX2__)
void int8_gemm_v3(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K);
#elif defined(__ARM_FEATURE_DOTPROD)
void int8_gemm_neon(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K);
#endif
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
void int8_gemm_v4(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K);
#endif
// The fastest version this machine runs.
void int8_gemm(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K);

// Per-row symmetric quantisation of x (rows, cols): q (rows, cols), scales (rows).
void quantize_rows_int8(const float* x, int rows, int cols, int8_t* q, float* scales);

// y (M, N) = (quantise_rows(x) . Wq^T) scaled by sx[m] * w_scales[n], + bias (may be nullptr).
// x (M, K) float; Wq (N, K) int8 with w_scales (N): quantize_rows_int8 of W. scratch: at least
// w8a8_scratch_bytes(M, N, K) bytes (the quantised x, its scales and the int32 product).
size_t w8a8_scratch_bytes(int M, int N, int K);
void w8a8_linear(float* y, const float* x, const int8_t* Wq, const float* w_scales, const float* bias, int M,
                 int N, int K, void* scratch);

}  // namespace kernels
