// kernels/matmul.h: single-precision matrix multiply, C = alpha * op(A) * op(B) + beta * C.
//
// The signature is BLAS's sgemm (row-major), so every version can be checked against
// the same reference and timed against OpenBLAS with the same arguments:
//   op(A) is (M, K): A itself (lda >= K) or, with Trans::Yes, A^T where A is (K, M).
//   op(B) is (K, N): B itself (ldb >= N) or, with Trans::Yes, B^T where B is (N, K).
//   C is (M, N), ldc >= N. beta = 0 overwrites C (even if it held NaN); beta = 1 adds.
//
// The three forms a linear layer needs, y = x W^T + b:
//   forward   y  (B,OC) = x (B,C)  * W^T            -> sgemm(No,  Yes, B, OC, C, ...)
//   backward  dx (B,C)  = dy (B,OC) * W (OC,C)      -> sgemm(No,  No,  B, C, OC, ...)
//   backward  dW (OC,C) += dy^T (OC,B) * x (B,C)    -> sgemm(Yes, No,  OC, C, B, ..., beta=1)
//
// Versions (code and reasoning in kernels/matmul.cpp). Figures: GFLOP/s at 1024^3, median
// of 7, 1 thread unless noted, % of the measured peak and ratio to OpenBLAS in the same
// run; 2-core AMD EPYC (Zen 3), AVX2+FMA, GCC 12; docs/benchmarks/lesson03-matmul.md:
//   v1  naive i-j-k: one dot product per output; B read down a column, so every step of
//       k touches a new cache line. The reference.             0.4 GFLOP/s    0.4%   0.01x
//   v2  loop order i-k-j: the inner loop streams rows of B and C (unit stride) and
//       vectorises without reordering a sum. Bottleneck now: all of B passes
//       through the cache once per row of C.                   12.6 GFLOP/s   13%   0.17x
//   v3  cache blocking: a KB x NB block of B stays in L2 while every row of C uses it.
//       Bottleneck now: one load + one store of C per FMA.      15.6 GFLOP/s   16%   0.21x
//       (only 1.2x over v2 here: the 32 MB L3 feeds v2 well; at 2048^3, 1.8x)
//   v4  packed panels + a 6x16 register tile (the micro-kernel), in portable C++ the
//       compiler vectorises (`omp simd`): C stays in registers over all of k.
//                                                               53.2 GFLOP/s   53%   0.72x
//       (without the `omp simd` hint GCC 12 scalarises the tile: 2.4 GFLOP/s)
//   v5  the same micro-kernel in this CPU's intrinsics (AVX-512 / AVX2+FMA / NEON,
//       chosen at compile time, kernels/simd.h): every FMA unit busy.
//                                                               75.3 GFLOP/s   75%   1.02x
//   v6  v5 with the rows of C split across OpenMP threads.      146.3 GFLOP/s on 2 threads
//                                                                              81%   1.04x
//       At 2048^3: v5 82.7 GFLOP/s (1.05x OpenBLAS), v6 167.5 on 2 threads (1.14x).
//       At a linear layer's shapes (batch 128, docs/benchmarks/lesson03-layers.md) v6 is
//       only 0.5-0.95x OpenBLAS: packing and thread start-up weigh more on small products.
//   v7  v6 without packing A: the micro-kernel broadcasts op(A) straight from the caller's
//       matrix (packing A cost ~1 ns a float, and at N = 128 each float feeds only 128
//       FMAs); with A^T a 12 x 32 tile on AVX-512 (24 of the 32 zmm registers), with A
//       as is 6 x 32 (12 row streams lda apart overflow an L1 set at lda = 1024); B packed
//       with whole-vector copies. Bit-identical to v6 when alpha = 1.
//       GPT-step shapes (768-row activations, docs/benchmarks/gemm-gpt-step-shapes.md),
//       2-core AMD EPYC (Zen 4), AVX-512F, GCC 12, 1 thread, timed by CPU time on a loaded
//       VM: the backward's nn/tn products 85-96 GFLOP/s, 63-82% of peak, 1.08-1.34x v6 and
//       1.03-1.18x OpenBLAS; the forward's nt 1.05-1.20x v6, 1.07-1.11x OpenBLAS. 1024^3:
//       100.5 GFLOP/s (86%), 1.02x v6, 1.06x OpenBLAS. Regressions: at N = 784 (lesson 02's
//       128x256x784nt, 256x784x128tn) A is reused 784 times, packing it was cheap, and v7
//       is 0.96-0.98x v6 (0.87-0.92x OpenBLAS).
// sgemm() below is v7: the fastest validated version, what nn/ calls.
#pragma once

#include <string>
#include <vector>

#include "kernels/versions.h"

namespace kernels {

enum class Trans { No, Yes };

using SgemmFn = void (*)(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A,
                         int lda, const float* B, int ldb, float beta, float* C, int ldc);

void sgemm_v1(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc);
void sgemm_v2(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc);
void sgemm_v3(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc);
void sgemm_v4(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc);
void sgemm_v5(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc);
void sgemm_v6(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc);
void sgemm_v7(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc);

// The fastest validated version: what nn/ calls, and what the benchmark names "default".
void sgemm(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc);
// The same rung on the calling thread only (no OpenMP region): for callers that already
// run products side by side, one per thread (kernels/linear.cpp's backward). Bit-identical
// to sgemm(): the rows of C are split, never k, so a thread count changes nothing.
void sgemm_serial(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
                  const float* B, int ldb, float beta, float* C, int ldc);

// C (M, N) = alpha * op(A) op(B) + bias (N,) on every row: sgemm() (v7, threaded as it is)
// with the bias added in the micro-kernel's write-back, bit-identical to filling C with the
// bias and calling sgemm with beta = 1, without that fill's pass over C and the read it makes
// the product do (kernels/linear.cpp's forward). bias must not be null.
void sgemm_bias(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
                const float* B, int ldb, const float* bias, float* C, int ldc);

using SgemmVersion = OpVersion<SgemmFn>;  // number, name, summary, fn (kernels/versions.h)
// Every version, in order. The dispatcher below and the tests iterate over this.
const std::vector<SgemmVersion>& sgemm_versions();
// Look a version up by number ("2") or name ("v2", "loop-order"); throws std::invalid_argument.
const SgemmVersion& sgemm_version(const std::string& number_or_name);

}  // namespace kernels
