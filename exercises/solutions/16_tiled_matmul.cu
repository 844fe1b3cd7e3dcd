// Reference solution of exercise 16_tiled_matmul (lesson 09). Try it yourself first:
// exercises/16_tiled_matmul/tiled_matmul.cu. Oldest GPU: compute capability 5.0, as the exercise.
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
  float* As = dynamic_shared<float>();  // (16, 16): As[i * 16 + k] = A[row0 + i][k0 + k]
  float* Bs = As + kTile * kTile;       // (16, 16): Bs[k * 16 + j] = B[k0 + k][col0 + j]
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int row = static_cast<int>(blockIdx.y) * kTile + ty;  // the row of C, and of A
  const int col = static_cast<int>(blockIdx.x) * kTile + tx;  // the column of C, and of B
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    // Each thread loads one element of each tile: 16 lanes in a row read 16 consecutive floats
    // of A (row `row`) and of B (row k0 + ty). 0 where the tile hangs over the edge of A or B:
    // a 0 adds nothing to the sum below.
    As[ty * kTile + tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty * kTile + tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();  // 1: both tiles complete before anyone reads them
    // C[row][col] += sum over k of A[row][k0 + k] * B[k0 + k][col]: 16 multiply-adds from
    // shared memory for the 2 floats this thread loaded from global memory.
    for (int k = 0; k < kTile; ++k) acc += As[ty * kTile + k] * Bs[k * kTile + tx];
    __syncthreads();  // 2: everyone done with these tiles before the next loads overwrite them
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
