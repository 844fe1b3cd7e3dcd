// Exercise 06_matmul_loop_order (lesson 03): the same matmul, its loops in a better order.
//
// Read first: lesson 03's README, the section on loop order, and sgemm_v1 / sgemm_v2 in
// kernels/matmul.cpp (the naive loop and the reordered one, with transposes and threads
// on top). matmul_loop_order.h explains why the order matters.
//
// C (M, N) = A (M, K) * B (K, N), row-major. The plain i-j-k loop, the thing to reorder:
//
//     for (int i = 0; i < M; ++i) {
//       for (int j = 0; j < N; ++j) {
//         float sum = 0.0f;
//         for (int k = 0; k < K; ++k) {
//           sum += A[i * K + k] * B[k * N + j];   // B read down a column: stride N
//         }
//         C[i * N + j] = sum;
//       }
//     }
//
// It gives the right answer; it is slow because of the stride-N read of B. Reordered to
// i-k-j, row i of C is built up as a sum of rows of B, each scaled by one A[i][k]:
//     C[i][:] = sum_k A[i][k] * B[k][:]
// C is ASSIGNED: the tests hand you a C full of NaN, so `+=` into it without first
// setting the row to 0 leaves NaN.
//
// Check your work: `nnlab check` (or `nnlab check --only 06_matmul_loop_order`).
#include "exercises/06_matmul_loop_order/matmul_loop_order.h"

namespace ex {

void matmul_ikj(float* C, const float* A, const float* B, int M, int K, int N) {
  // TODO: the same sums as the plain loop, built row by row as above: row i of C as a sum
  //       of rows of B, each scaled by one element of A. Which loop must be innermost so
  //       that both B and C are walked with unit stride, and what must C's row hold first?
  (void)C;
  (void)A;
  (void)B;
  (void)M;
  (void)K;
  (void)N;
}

}  // namespace ex
