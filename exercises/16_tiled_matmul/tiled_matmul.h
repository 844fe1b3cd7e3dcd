// Exercise 16_tiled_matmul (lesson 09): a matmul that reads A and B through shared-memory tiles.
// You write the kernel in tiled_matmul.cu; `nnlab check` runs the tests in test.cpp on the
// CUDA emulator (or build ex_16_tiled_matmul_gpu to run them on a GPU: lesson 09's README).
#pragma once

namespace ex {

// C (M, N) = A (M, K) . B (K, N), all row-major: element [r][c] of a (rows, cols) matrix is at
// r * cols + c. C is ASSIGNED; K = 0 gives C = 0 (an empty sum). The pointers are HOST
// pointers: the function copies A, B and C to the device, launches the kernel on blocks of
// 16 x 16 threads (one per element of C), waits, and copies C back. M * K, K * N and M * N
// must stay below 2^31 (the kernel indexes with int). A kernel that misbehaves throws
// kernels::cuda::Error (kernels/cuda/device.h): on the emulator its message names the
// kernel, the block and the thread.
void matmul_tiled(float* C, const float* A, const float* B, int M, int N, int K);

}  // namespace ex
