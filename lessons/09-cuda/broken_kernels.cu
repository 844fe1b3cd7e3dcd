// lessons/09-cuda/broken_kernels.cu: three kernels, each with one of the bugs CUDA
// programmers write most, for part `emulator` of lesson 09. On a GPU each one hangs, returns
// garbage now and then, or fails much later with an error far from its cause; the emulator
// (kernels/cuda/emu/emu.h) stops each at once and names the kernel, the block and the thread.
//
// Compiled for the emulator only (lessons/09-cuda/CMakeLists.txt wraps it in a .cpp for the
// host compiler, as kernels/cuda/CMakeLists.txt does for the real kernels); nvcc would
// compile it too, but nobody should run it on a GPU.
//
// Oldest GPU: compute capability 5.0 (shared memory and __syncthreads): compile-checked for
// 5.0, 5.2 and 5.3 like the real kernels (scripts/check_old_gpus.py), though no one should run
// them on one.
#include "kernels/cuda/cuda.h"
#include "lessons/09-cuda/broken_kernels.h"

#include <vector>

namespace lesson09 {

namespace {

using kernels::Array;
using kernels::cuda::ceil_div;
using kernels::cuda::launch;

// out[b] = sum of block b's slice of in (n floats), through shared memory.
// The bug: threads past the end of the data return before the barrier that the others wait
// at. A GPU may hang, or may let the rest of the block through with garbage in tile.
__global__ void block_sum_early_return(float* out, const float* in, int n) {
  __shared__ float tile[256];
  const int t = static_cast<int>(threadIdx.x);
  const int i = static_cast<int>(blockIdx.x * blockDim.x) + t;
  if (i >= n) return;  // BUG: these threads never reach the __syncthreads below
  tile[t] = in[i];
  __syncthreads();
  if (t == 0) {
    float s = 0.0f;
    for (int k = 0; k < static_cast<int>(blockDim.x) && i + k < n; ++k) s += tile[k];
    out[blockIdx.x] = s;
  }
}

// out = 2 in, n floats. The bug: `<=` instead of `<`, one element past the end of both
// buffers. A GPU usually reads and writes whatever lies there, silently.
__global__ void scale_off_by_one(float* out, const float* in, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i <= n) out[i] = 2.0f * in[i];  // BUG: should be i < n
}

// out[i] = in[i] + in[i + 1] within each block, through dynamic shared memory. The bug: the
// last thread of the block reads s[blockDim.x], a slot nobody wrote (and the halo element
// was never loaded). A GPU returns whatever was left there by the previous kernel.
__global__ void neighbour_sum_uninitialised(float* out, const float* in, int n) {
  float* s = kernels::cuda::dynamic_shared<float>();  // blockDim.x + 1 floats
  const int t = static_cast<int>(threadIdx.x);
  const int i = static_cast<int>(blockIdx.x * blockDim.x) + t;
  s[t] = i < n ? in[i] : 0.0f;
  __syncthreads();
  if (i < n) out[i] = s[t] + s[t + 1];  // BUG: s[blockDim.x] is never written
}

// The error a launch (and the wait after it) ended with, or "" if it ran cleanly.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
    kernels::cuda::emulator().synchronize();
  } catch (const kernels::cuda::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

std::vector<BrokenKernel> run_broken_kernels() {
  kernels::cuda::Device& dev = kernels::cuda::emulator();
  const int n = 1000;  // 4000 bytes: the buffer ends exactly at the emulator's guard page
  std::vector<float> host(n, 1.0f);
  Array<float> in(dev, host, kernels::uninitialized), out(dev, n, kernels::uninitialized);
  const int block = 256;
  const unsigned blocks = static_cast<unsigned>(ceil_div(n, block));

  std::vector<BrokenKernel> found;
  found.push_back({"block_sum_early_return", "threads past the end return before __syncthreads",
                   "undefined behaviour: a hang, or garbage in the shared tile", ""});
  found.back().error = error_of([&] {
    launch("block_sum_early_return", block_sum_early_return, dim3(blocks), dim3(block), 0, out.data(), in.data(), n);
  });

  found.push_back({"scale_off_by_one", "`i <= n` instead of `i < n`: one element past both buffers",
                   "usually nothing visible: it reads and writes a neighbour's memory", ""});
  found.back().error = error_of([&] {
    launch("scale_off_by_one", scale_off_by_one, dim3(blocks), dim3(block), 0, out.data(), in.data(), n);
  });

  found.push_back({"neighbour_sum_uninitialised", "reads a shared-memory slot nobody wrote (the halo)",
                   "whatever the previous kernel left in shared memory: wrong now and then", ""});
  found.back().error = error_of([&] {
    launch("neighbour_sum_uninitialised", neighbour_sum_uninitialised, dim3(blocks), dim3(block),
           (block + 1) * sizeof(float), out.data(), in.data(), n);
  });
  return found;
}

}  // namespace lesson09
