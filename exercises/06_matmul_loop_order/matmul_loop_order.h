// Exercise 06_matmul_loop_order (lesson 03): the same matmul, its loops in a better order.
// You write the body in matmul_loop_order.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

namespace ex {

// C (M, N) = A (M, K) * B (K, N), all row-major: element [r][c] of a (rows, cols) matrix
// is at index r * cols + c. C is ASSIGNED (overwritten): whatever it held before, NaN
// included, is gone. K = 0 gives C = 0 (an empty sum).
//
// Why i-k-j and not the textbook i-j-k. Memory moves in cache lines of 64 bytes (16
// floats), so what costs is how many lines a loop touches per useful float.
//   i-j-k:  for i, for j, for k:  C[i][j] += A[i][k] * B[k][j]
//           The inner loop walks DOWN a column of B: B[k][j] and B[k+1][j] are N floats
//           apart, so every step of k lands on a new cache line and uses 4 of its 64
//           bytes. For large N the line is evicted before j + 1 could use the rest. The
//           inner loop is also one long sum, which the compiler may not split across
//           SIMD lanes: that would reorder float additions and change the result.
//   i-k-j:  for i, for k, for j:  C[i][j] += A[i][k] * B[k][j]
//           A[i][k] is one number for the whole inner loop (a register). The inner loop
//           walks ALONG row k of B and row i of C: unit stride, every byte of every line
//           is used, the hardware prefetcher sees the stream coming. And each j is an
//           independent multiply-add (an axpy), so the compiler vectorises it, 8 floats
//           per AVX2 instruction, without reordering any sum.
// Same multiply-adds, same result, different order of memory accesses.
void matmul_ikj(float* C, const float* A, const float* B, int M, int K, int N);

}  // namespace ex
