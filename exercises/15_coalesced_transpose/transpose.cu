// Exercise 15_coalesced_transpose (lesson 09): a transpose whose reads AND writes are coalesced.
//
// Read first: lesson 09's README (lessons/09-cuda/README.md), the sections on coalescing and
// on shared memory and bank conflicts. Exercise 07 did the same thing for a CPU's cache lines.
//
// out (cols, rows) = in^T, in (rows, cols), row-major. The naive kernel below gives each
// thread one element. The 32 threads of a warp have consecutive threadIdx.x, so consecutive
// columns c:
//   - they READ in[r][c0 .. c0+31]: 128 contiguous bytes, one memory transaction. Coalesced.
//   - they WRITE out[c0][r], out[c0+1][r], ...: 32 addresses `rows` floats apart, 32 separate
//     32-byte sectors that each carry 4 useful bytes. 8x the traffic on the write side.
//
// The fix: a block stages one 32 x 32 tile of `in` in shared memory (fast, on-chip, shared
// by the block's threads), then writes it out along the rows of `out`:
//
//     tile[i][j] = in[r0 + i][c0 + j]          load:  a warp reads a ROW of the tile's part of in
//     __syncthreads()                          every element loaded before any is read back
//     out[c0 + i][r0 + j] = tile[j][i]         store: a warp writes a ROW of out, reading a
//                                                     COLUMN of the tile
//
// with r0 = 32 * blockIdx.y and c0 = 32 * blockIdx.x. A block is (32, 8) threads, so thread
// (tx, ty) handles tile rows i = ty, ty + 8, ty + 16, ty + 24 (a loop, j += kBlockRows), and
// j = tx in both phases. Guard every element: the edge tiles hang over the matrix when 32
// does not divide rows or cols. Guard with an `if` around the load or store, never with an
// early `return`: every thread of the block must reach the __syncthreads (the emulator stops
// with an error naming the thread that returned).
//
// Bank conflicts. Shared memory is 32 banks, 4 bytes wide: float word w is in bank w % 32, and
// a warp's 32 reads are served in one go only when they hit 32 different banks (or the same
// word). With tile[32][32], the column read tile[tx][i] (lane tx) is word 32 tx + i: bank i for
// every lane, a 32-way conflict, served one lane at a time. One float of padding per row,
// tile[32][33], makes it word 33 tx + i, bank (tx + i) % 32: all different. The emulator
// cannot see banks (it gives the same answer either way); the tests check kTilePitch with a
// model of the banks instead.
//
// Check your work: `nnlab check` (or `nnlab check --only 15_coalesced_transpose`).
//
// Oldest GPU: compute capability 5.0 (shared memory, __syncthreads); the check of that,
// scripts/check_old_gpus.py, compiles this file and its solution.
#include "exercises/15_coalesced_transpose/transpose.h"

#include <cstddef>

#include "exercises/cuda_exercise.h"

namespace ex {

using kernels::cuda::ceil_div;
using kernels::cuda::launch;

constexpr int kTile = 32;      // the tile is kTile x kTile elements of the matrix
constexpr int kBlockRows = 8;  // a block is (32, 8) threads: each thread moves 4 elements
// TODO 3: the row pitch of your shared tile, in floats: pad it (see above).
constexpr int kTilePitch = 32;

// ---- given: the naive kernel ---------------------------------------------------------------

__global__ void transpose_naive_kernel(float* out, const float* in, int rows, int cols) {
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);  // lanes: consecutive c
  const int r = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];  // read coalesced, write not
}

// ---- yours: the tiled kernel -----------------------------------------------------------------

// Block (bx, by) moves the tile in[r0 : r0+32, c0 : c0+32] (r0 = 32 by, c0 = 32 bx) to
// out[c0 : c0+32, r0 : r0+32]. Thread (tx, ty) handles tile rows ty, ty+8, ty+16, ty+24.
__global__ void transpose_tiled_kernel(float* out, const float* in, int rows, int cols) {
  // TODO 1: the block's tile in shared memory (its rows kTilePitch floats apart), and this
  //         thread's and block's coordinates (threadIdx and blockIdx are unsigned).
  // TODO 2: the three phases of the fix above. Load: this thread's four elements of in's
  //         tile, the warp along a row of in. The barrier. Store: this thread's four
  //         elements of out's tile, the warp along a row of out: which element of the tile
  //         holds each? Guard both phases at the matrix edges, without returning early.
  (void)out;
  (void)in;
  (void)rows;
  (void)cols;
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
