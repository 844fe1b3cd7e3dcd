// Exercise 17_warp_reduce_sum (lesson 09): the sum of an array, warp by warp, block by block.
// You write the kernel in warp_reduce.cu; `nnlab check` runs the tests in test.cpp on the
// CUDA emulator (or build ex_17_warp_reduce_sum_gpu to run them on a GPU: lesson 09's README).
#pragma once

namespace ex {

// The pointers are HOST pointers: each function copies its input to the device, launches,
// waits, and copies the result back. A kernel that misbehaves throws kernels::cuda::Error
// (kernels/cuda/device.h): on the emulator its message names the kernel, block and thread.

// x[0] + x[1] + ... + x[n-1], computed on the device by blocks of `threads` threads (a
// multiple of 32, from 32 to 1024; anything else throws std::invalid_argument). n = 0
// gives 0. The order of the additions is not the loop's, so the float result may differ
// from a plain loop in the last bits (exactly equal when every partial sum is exact, as for
// small integers).
float device_sum(const float* x, int n, int threads = 256);

// Your warp_sum on its own: x holds 32 * warps values, one per lane of `warps` warps;
// out[w] = what lane 0 of warp w gets back from warp_sum(x[32 w + lane]).
void warp_sums(float* out, const float* x, int warps);

// A given kernel with the classic mistake: in one warp of 32 threads, lanes >= active
// return early, and the others call warp_sum, whose shuffles name all 32 lanes in their
// mask. On a GPU that is undefined behaviour (a hang, or garbage); on the emulator it throws
// kernels::cuda::Error naming a lane that has already returned. On a GPU build this
// function refuses to run and throws std::logic_error instead.
void warp_sum_after_early_return(float* out, const float* x, int active);

// True when the kernels run on the emulator (the host compiler's build), false on a GPU.
bool runs_on_emulator();

}  // namespace ex
