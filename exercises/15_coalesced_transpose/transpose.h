// Exercise 15_coalesced_transpose (lesson 09): a transpose whose reads AND writes are coalesced.
// You write the kernel in transpose.cu; `nnlab check` runs the tests in test.cpp on the CUDA
// emulator (or build ex_15_coalesced_transpose_gpu to run them on a GPU: lesson 09's README).
#pragma once

namespace ex {

// out (cols, rows) = in^T, where in is (rows, cols), both row-major:
//     out[c][r] = in[r][c]        out[c * rows + r] = in[r * cols + c]
// All pointers are HOST pointers: each function copies in and out to the device, launches
// its kernel, waits, and copies out back. out's contents are uploaded too, so an element the
// kernel never writes comes back as it was (NaN, in the tests). rows or cols of 0: nothing
// to do; rows * cols must stay below 2^31 (the kernels index with int). A kernel that
// misbehaves throws kernels::cuda::Error (kernels/cuda/device.h): on the emulator its message
// names the kernel, the block and the thread.

// Given: one thread per element. The reads of `in` are coalesced, the writes of `out` are not.
void transpose_naive(float* out, const float* in, int rows, int cols);

// Yours: 32 x 32 tiles staged through shared memory, so that both are coalesced.
void transpose_tiled(float* out, const float* in, int rows, int cols);

// The row pitch of your shared-memory tile, in floats (kTilePitch in transpose.cu): the tests
// check which shared-memory banks a warp touches when it reads one column of the tile.
int transpose_tile_pitch();

}  // namespace ex
