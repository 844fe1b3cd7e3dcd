// kernels/matmul.cpp: the sgemm ladder.
//
//   v1 naive i-j-k   : one dot product per C element; B is read down a column (stride
//                      N floats), so every step of k touches a new cache line.
//                      Reference only. (~1 GFLOP/s class on one core.)
//   v2 loop order    : i-k-j: C[i,:] += A[i,k] * B[k,:]. The inner loop is a unit-stride
//                      axpy the compiler vectorises without reassociating a sum (strict
//                      fp is kept); transposed B is first copied to (K, N) so every form
//                      streams. Threads split rows of C. Figures: docs/benchmarks/.
//
// The plain loop every version computes (no transposes, for reading):
//   for i < M: for j < N: C[i][j] = alpha * sum_k A[i][k] * B[k][j] + beta * C[i][j]
#include "kernels/matmul.h"

#include <omp.h>

#include <cstddef>
#include <stdexcept>
#include <vector>

namespace kernels {

namespace {

// op(A)[i][k] and op(B)[k][j] read through the transposes, for the reference loop.
inline float a_at(Trans ta, const float* A, int lda, int i, int k) {
  return ta == Trans::No ? A[static_cast<ptrdiff_t>(i) * lda + k]
                         : A[static_cast<ptrdiff_t>(k) * lda + i];
}
inline float b_at(Trans tb, const float* B, int ldb, int k, int j) {
  return tb == Trans::No ? B[static_cast<ptrdiff_t>(k) * ldb + j]
                         : B[static_cast<ptrdiff_t>(j) * ldb + k];
}

// C = beta * C, with beta = 0 meaning "overwrite" (BLAS semantics: NaN in C is not kept).
void scale_c(int M, int N, float beta, float* C, int ldc) {
  for (int i = 0; i < M; ++i) {
    float* c = C + static_cast<ptrdiff_t>(i) * ldc;
    for (int j = 0; j < N; ++j) {
      c[j] = beta == 0.0f ? 0.0f : beta * c[j];
    }
  }
}

}  // namespace

// ---- v1: naive i-j-k ----------------------------------------------------------
void sgemm_v1(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc) {
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      float sum = 0.0f;
      for (int k = 0; k < K; ++k) {
        sum += a_at(ta, A, lda, i, k) * b_at(tb, B, ldb, k, j);
      }
      float& c = C[static_cast<ptrdiff_t>(i) * ldc + j];
      c = alpha * sum + (beta == 0.0f ? 0.0f : beta * c);
    }
  }
}

// ---- v2: i-k-j loop order, rows of C across threads ---------------------------
void sgemm_v2(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc) {
  // Bring B into (K, N) row-major so the inner loop is unit-stride: O(K*N) copies buy
  // O(M*N*K) streaming multiply-adds.
  std::vector<float> b_copy;
  const float* Bkn = B;
  int ldbkn = ldb;
  if (tb == Trans::Yes) {
    b_copy.resize(static_cast<size_t>(K) * static_cast<size_t>(N));
    for (int j = 0; j < N; ++j) {
      for (int k = 0; k < K; ++k) {
        b_copy[static_cast<size_t>(k) * N + j] = B[static_cast<ptrdiff_t>(j) * ldb + k];
      }
    }
    Bkn = b_copy.data();
    ldbkn = N;
  }
  // Small products are not worth waking threads for.
  const bool parallel = static_cast<double>(M) * N * K > 64.0 * 64.0 * 64.0;
#pragma omp parallel for schedule(static) if (parallel)
  for (int i = 0; i < M; ++i) {
    float* c = C + static_cast<ptrdiff_t>(i) * ldc;
    for (int j = 0; j < N; ++j) {
      c[j] = beta == 0.0f ? 0.0f : beta * c[j];
    }
    for (int k = 0; k < K; ++k) {
      const float a = alpha * a_at(ta, A, lda, i, k);  // (1,) : op(A)[i][k]
      const float* b = Bkn + static_cast<ptrdiff_t>(k) * ldbkn;  // (N,) : row k of op(B)
#pragma omp simd
      for (int j = 0; j < N; ++j) {
        c[j] += a * b[j];
      }
    }
  }
}

// ---- dispatch -----------------------------------------------------------------
void sgemm(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc) {
  if (M == 0 || N == 0) {
    return;
  }
  if (K == 0) {
    scale_c(M, N, beta, C, ldc);
    return;
  }
  sgemm_v2(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

const std::vector<SgemmVersion>& sgemm_versions() {
  static const std::vector<SgemmVersion> versions = {
      {1, "naive", "i-j-k triple loop, one dot product per output", &sgemm_v1},
      {2, "loop-order", "i-k-j: unit-stride inner loop, rows of C across OpenMP threads", &sgemm_v2},
  };
  return versions;
}

const SgemmVersion& sgemm_version(const std::string& number_or_name) {
  for (const SgemmVersion& v : sgemm_versions()) {
    const std::string number = std::to_string(v.number);
    const bool with_v = number_or_name.size() > 1 && number_or_name[0] == 'v' &&
                        number_or_name.compare(1, std::string::npos, number) == 0;
    if (number_or_name == number || with_v || number_or_name == v.name) {
      return v;
    }
  }
  throw std::invalid_argument("unknown sgemm version '" + number_or_name +
                              "': use a number 1.." + std::to_string(sgemm_versions().size()) +
                              " or a name such as 'naive'");
}

}  // namespace kernels
