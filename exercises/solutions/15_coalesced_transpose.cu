// Reference solution of exercise 15_coalesced_transpose (lesson 09). Try it yourself first:
// exercises/15_coalesced_transpose/transpose.cu.
//
// Oldest GPU: compute capability 5.0, as the exercise (scripts/check_old_gpus.py).
#include "exercises/15_coalesced_transpose/transpose.h"

#include <cstddef>

#include "exercises/cuda_exercise.h"

namespace ex {

using kernels::cuda::ceil_div;
using kernels::cuda::launch;

constexpr int kTile = 32;       // the tile is kTile x kTile elements of the matrix
constexpr int kBlockRows = 8;   // a block is (32, 8) threads: each thread moves 4 elements
constexpr int kTilePitch = 33;  // one float of padding per tile row: see below

// ---- given: the naive kernel ---------------------------------------------------------------

__global__ void transpose_naive_kernel(float* out, const float* in, int rows, int cols) {
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);  // lanes: consecutive c
  const int r = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  if (r < rows && c < cols) {
    out[c * rows + r] = in[r * cols + c];
  }
}

// ---- the tiled kernel ------------------------------------------------------------------------

// Block (bx, by) moves the tile in[r0 : r0+32, c0 : c0+32] (r0 = 32 by, c0 = 32 bx) to
// out[c0 : c0+32, r0 : r0+32]. Thread (tx, ty) handles tile rows ty, ty+8, ty+16, ty+24.
__global__ void transpose_tiled_kernel(float* out, const float* in, int rows, int cols) {
  // tile[i][j] = in[r0 + i][c0 + j]. Row pitch 33, not 32: a warp reads a COLUMN of the tile
  // below (lane tx reads tile[tx][j], word tx * pitch + j), and shared memory is 32 banks of
  // 4 bytes, word w in bank w % 32. Pitch 32: every lane in bank j, a 32-way conflict served
  // one lane at a time. Pitch 33: lane tx in bank (tx + j) % 32, all 32 different.
  __shared__ float tile[kTile][kTilePitch];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int r0 = static_cast<int>(blockIdx.y) * kTile;
  const int c0 = static_cast<int>(blockIdx.x) * kTile;

  // Load: the warp of row i = ty + j reads in[r0 + i][c0 : c0+32], 128 contiguous bytes.
  for (int j = 0; j < kTile; j += kBlockRows) {
    const int r = r0 + ty + j, c = c0 + tx;
    if (r < rows && c < cols) tile[ty + j][tx] = in[r * cols + c];
  }
  // Every element of the tile is written before any thread reads it back. No thread may
  // return before this line: the guard above is an `if` around the load, never a `return`.
  __syncthreads();
  // Store: the warp of out row c0 + i writes out[c0 + i][r0 : r0+32], 128 contiguous bytes,
  // taking tile COLUMN i (lane tx reads tile[tx][i] = in[r0 + tx][c0 + i]).
  for (int j = 0; j < kTile; j += kBlockRows) {
    const int oc = c0 + ty + j;  // the row of out: a column of in
    const int orow = r0 + tx;    // the column of out: a row of in
    if (oc < cols && orow < rows) out[oc * rows + orow] = tile[tx][ty + j];
  }
}

// ---- given: the host side --------------------------------------------------------------------

namespace {

using TransposeKernel = void (*)(float*, const float*, int, int);

void run(const char* name, TransposeKernel kernel, dim3 grid, float* out, const float* in, int rows,
         int cols) {
  if (rows <= 0 || cols <= 0) return;
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  ex_cuda::DeviceArray<float> d_in(n, in), d_out(n, out);
  launch(name, kernel, grid, dim3(kTile, kBlockRows), 0, d_out.data(), d_in.data(), rows, cols);
  d_out.download(out);
}

}  // namespace

void transpose_naive(float* out, const float* in, int rows, int cols) {
  // One thread per element: blocks of (32, 8) threads cover (8 rows, 32 columns) of in.
  const dim3 grid(static_cast<unsigned>(ceil_div(cols, kTile)),
                  static_cast<unsigned>(ceil_div(rows, kBlockRows)));
  run("transpose_naive_kernel", transpose_naive_kernel, grid, out, in, rows, cols);
}

void transpose_tiled(float* out, const float* in, int rows, int cols) {
  // One block per 32 x 32 tile of in: blockIdx.x walks its columns, blockIdx.y its rows.
  const dim3 grid(static_cast<unsigned>(ceil_div(cols, kTile)),
                  static_cast<unsigned>(ceil_div(rows, kTile)));
  run("transpose_tiled_kernel", transpose_tiled_kernel, grid, out, in, rows, cols);
}

int transpose_tile_pitch() { return kTilePitch; }

}  // namespace ex
