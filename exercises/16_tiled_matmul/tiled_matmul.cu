// Exercise 16_tiled_matmul (lesson 09): a matmul that reads A and B through shared-memory tiles.
//
// Read first: lesson 09's README (lessons/09-cuda/README.md), the matmul ladder's v1 -> v3
// (kernels/cuda/matmul.cu) and the section on shared memory.
//
// C (M, N) = A (M, K) . B (K, N), row-major, one thread per element of C. The naive kernel:
//
//     float acc = 0;
//     for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
//     C[row * N + col] = acc;
//
// loads 2 floats from global memory for every multiply-add: 8 bytes per 2 FLOPs. A block of
// 16 x 16 threads computes a 16 x 16 tile of C, and its threads need the same 16 rows of A and
// the same 16 columns of B, each element 16 times. Tiled, the block walks k in steps of 16:
//
//     for k0 = 0, 16, 32, ... < K:
//       each thread loads ONE element of each tile into shared memory:
//         As[ty][tx] = A[row][k0 + tx]        Bs[ty][tx] = B[k0 + ty][col]   (0 outside A, B)
//       __syncthreads()                      // 1: wait until both tiles are complete
//       acc += As[ty][k] * Bs[k][tx]  for k = 0 .. 15
//       __syncthreads()                      // 2: wait until everyone is done with the tiles
//
// Every float loaded from global memory is now used 16 times from shared memory: 16x less
// global traffic for the same FLOPs.
//
// Why both barriers. Without 1, a thread reads tile elements its neighbours have not loaded
// yet. Without 2, a fast thread starts the next k0 and overwrites As and Bs while slower ones
// are still multiplying the old tiles. On a GPU either bug gives wrong answers only now and
// then (it depends on which warps happen to run first). The emulator runs a block's threads
// one after another, each until it reaches a barrier, so both bugs go wrong EVERY time:
// without barrier 2, thread 0 finishes its 16 multiply-adds, loads its element of the NEXT
// tiles and waits at barrier 1, and only then does thread 1 multiply, with As[0][0] and
// Bs[0][0] already overwritten. The test "K of several tiles" fails for that (checked: the
// solution with barrier 2 removed gets 416 of 420 elements wrong at M = 20, N = 21, K = 70;
// the 4 right ones belong to thread (0,0) of each block). Without barrier 1, the emulator
// traps: the tiles live in dynamic shared memory (kernels/cuda/cuda.h: dynamic_shared), which
// it fills with signalling NaNs before every block, so arithmetic on an element nobody loaded
// yet stops with "arithmetic on uninitialised dynamic shared memory".
//
// The tiles are flat arrays: As[i][j] is As[i * kTile + j].
//
// Check your work: `nnlab check` (or `nnlab check --only 16_tiled_matmul`).
//
// Oldest GPU: compute capability 5.0 (shared memory, __syncthreads); the check of that,
// scripts/check_old_gpus.py, compiles this file and its solution.
#include "exercises/16_tiled_matmul/tiled_matmul.h"

#include <cstddef>

#include "exercises/cuda_exercise.h"

namespace ex {

using kernels::cuda::ceil_div;
using kernels::cuda::dynamic_shared;
using kernels::cuda::launch;

constexpr int kTile = 16;  // tiles of 16 x 16 floats; a block is 16 x 16 threads

// Block (bx, by) computes the tile C[row0 : row0+16, col0 : col0+16] (row0 = 16 by,
// col0 = 16 bx); thread (tx, ty) computes C[row0 + ty][col0 + tx].
__global__ void matmul_tiled_kernel(float* C, const float* A, const float* B, int M, int N, int K) {
  // The two tiles, side by side in the launch's dynamic shared memory (2 * 16 * 16 floats):
  //   As (16, 16): As[i * 16 + k] = A[row0 + i][k0 + k]
  //   Bs (16, 16): Bs[k * 16 + j] = B[k0 + k][col0 + j]
  // ([[maybe_unused]] only keeps nvcc quiet about the unfinished stub.)
  [[maybe_unused]] float* As = dynamic_shared<float>();
  [[maybe_unused]] float* Bs = As + kTile * kTile;
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int row = static_cast<int>(blockIdx.y) * kTile + ty;  // the row of C, and of A
  const int col = static_cast<int>(blockIdx.x) * kTile + tx;  // the column of C, and of B
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    // TODO 1: this thread's share of the loads: one element of the A tile and one of the B
    //         tile (which ones? the picture above), and 0 where it falls outside A or B.
    //         The tiles are flat arrays, row-major, kTile floats per row.
    // TODO 2: barrier 1 (why: see above).
    // TODO 3: this tile's part of the inner product, read from the two tiles only.
    // TODO 4: barrier 2.
    (void)A;
    (void)B;
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

// ---- given: the host side --------------------------------------------------------------------

void matmul_tiled(float* C, const float* A, const float* B, int M, int N, int K) {
  if (M <= 0 || N <= 0) return;
  const auto m = static_cast<size_t>(M), n = static_cast<size_t>(N);
  const auto k = static_cast<size_t>(K < 0 ? 0 : K);
  ex_cuda::DeviceArray<float> d_a(m * k, A), d_b(k * n, B), d_c(m * n, C);
  // One thread per element of C; blockIdx.x walks the columns of C, blockIdx.y its rows.
  const dim3 grid(static_cast<unsigned>(ceil_div(N, kTile)),
                  static_cast<unsigned>(ceil_div(M, kTile)));
  const dim3 block(kTile, kTile);
  const size_t smem = 2 * kTile * kTile * sizeof(float);  // As and Bs: 2 KiB
  launch("matmul_tiled_kernel", matmul_tiled_kernel, grid, block, smem, d_c.data(), d_a.data(),
         d_b.data(), M, N, K);
  d_c.download(C);
}

}  // namespace ex
