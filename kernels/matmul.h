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
// Versions (see kernels/matmul.cpp for what each one changes and what it reached):
//   v1  naive triple loop, i-j-k, one dot product per output: the reference.
//   v2  loop order i-k-j, so the innermost loop streams rows of B and C (unit stride,
//       vectorisable without reordering a sum); rows of C split across OpenMP threads.
// Lesson 03 (issue 3) extends the ladder: cache blocking, a packed SIMD micro-kernel,
// and threads over blocks.
#pragma once

#include <string>
#include <vector>

namespace kernels {

enum class Trans { No, Yes };

using SgemmFn = void (*)(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A,
                         int lda, const float* B, int ldb, float beta, float* C, int ldc);

void sgemm_v1(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc);
void sgemm_v2(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc);

// The fastest validated version: what nn/ calls, and what the benchmark names "default".
void sgemm(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc);

struct SgemmVersion {
  int number;
  const char* name;
  const char* summary;
  SgemmFn fn;
};
// Every version, in order. The dispatcher below and the tests iterate over this.
const std::vector<SgemmVersion>& sgemm_versions();
// Look a version up by number ("2") or name ("v2", "loop-order"); throws std::invalid_argument.
const SgemmVersion& sgemm_version(const std::string& number_or_name);

}  // namespace kernels
