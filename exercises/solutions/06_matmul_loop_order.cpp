// Reference solution of exercise 06_matmul_loop_order (lesson 03). Try it yourself first:
// exercises/06_matmul_loop_order/matmul_loop_order.cpp.
#include "exercises/06_matmul_loop_order/matmul_loop_order.h"

#include <cstddef>

namespace ex {

void matmul_ikj(float* C, const float* A, const float* B, int M, int K, int N) {
  // A (M,K), B (K,N) -> C (M,N), assigned
  using std::ptrdiff_t;
  for (int i = 0; i < M; ++i) {
    float* c = C + static_cast<ptrdiff_t>(i) * N;        // (N,) : row i of C
    const float* a = A + static_cast<ptrdiff_t>(i) * K;  // (K,) : row i of A
    // Assigned, not accumulated: start the row from 0 so whatever C held (NaN) is gone.
    for (int j = 0; j < N; ++j) {
      c[j] = 0.0f;
    }
    // C[i][:] = sum_k A[i][k] * B[k][:]: one scaled row of B at a time.
    for (int k = 0; k < K; ++k) {
      const float aik = a[k];                              // (1,) : held in a register
      const float* b = B + static_cast<ptrdiff_t>(k) * N;  // (N,) : row k of B
      for (int j = 0; j < N; ++j) {  // unit stride in b and c: vectorises, no sum reordered
        c[j] += aik * b[j];
      }
    }
  }
}

}  // namespace ex
