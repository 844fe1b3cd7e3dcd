// Exercise 17_warp_reduce_sum (lesson 09): the sum of an array, warp by warp, block by block.
//
// Read first: lesson 09's README (lessons/09-cuda/README.md), the sections on the CUDA model
// (warps) and on the emulator; kernels/cuda/softmax.cu uses the same warp reductions.
//
// A sum is a reduction: n values in, one out. On a GPU it is done in three levels:
//
//   1. the warp. The 32 lanes of a warp can read each other's registers, with no memory
//      at all: __shfl_down_sync(mask, v, offset) returns the v of lane (this lane + offset).
//      Five steps, offsets 16, 8, 4, 2, 1, each halving the number of lanes that hold a
//      partial sum, leave the warp's sum in lane 0: at each step every lane adds the partial
//      sum of the lane `offset` above it (lanes 0..15 add 16..31, then 0..7 add 8..15, ...).
//      (__shfl_xor_sync(mask, v, offset) instead leaves the sum in EVERY lane: a butterfly.)
//   2. the block. Warps cannot shuffle with each other, so lane 0 of each warp writes its
//      warp's sum to shared memory, __syncthreads(), and warp 0 sums those (up to 32) values
//      with the same warp_sum.
//   3. the grid. Blocks cannot synchronise with each other inside a kernel, so lane 0 of
//      warp 0 adds its block's sum to the result with atomicAdd(total, v): one atomic per
//      block instead of one per element.
//
// The mask. Every lane named in `mask` must call the same shuffle: kFullMask names all 32.
// So no lane may leave early: a thread with nothing to add (past the end of x) adds 0 and
// takes part anyway. A lane that returned and is still named in the mask is undefined
// behaviour on a GPU (a hang, or garbage); the emulator stops with an error naming the
// kernel, block, thread and the lane that returned. The test "the emulator catches a lane
// that returned early" runs a given kernel with exactly that bug against your warp_sum.
//
// The order of the additions is a tree, not a left-to-right loop, so the float result can
// differ from a plain loop in the last bits; the tests use small integers where they want
// an exact answer (every partial sum is then exact in float).
//
// Check your work: `nnlab check` (or `nnlab check --only 17_warp_reduce_sum`).
//
// Oldest GPU: compute capability 5.0 (_sync shuffles, float atomicAdd); the check of that,
// scripts/check_old_gpus.py, compiles this file and its solution.
#include "exercises/17_warp_reduce_sum/warp_reduce.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "exercises/cuda_exercise.h"

namespace ex {

using kernels::cuda::ceil_div;
using kernels::cuda::launch;

constexpr unsigned kFullMask = 0xffffffffu;  // all 32 lanes of the warp take part
// At most 32 blocks (the emulator runs every thread: it keeps the tests quick); more elements
// than threads: each thread sums several, the grid-stride loop below.
constexpr int kMaxBlocks = 32;

// ---- the warp: five shuffles --------------------------------------------------------------

// The sum of v over the 32 lanes of the calling warp, in lane 0 (the other lanes may end
// with partial sums: nobody reads them).
__device__ float warp_sum(float v) {
  // TODO 1: level 1 above: the warp's sum, gathered into lane 0 in five shuffle steps. Which
  //         lanes must take part in each step (the mask paragraph)?
  (void)kFullMask;
  return v;
}

// ---- the block: warp sums through shared memory, then one atomic ----------------------------

__global__ void sum_kernel(float* total, const float* x, int n) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int warps = static_cast<int>(blockDim.x) / 32;

  // Given: each thread sums its grid-stride slice x[i], x[i + stride], ... (coalesced:
  // consecutive threads read consecutive elements). A thread past the end keeps v = 0 and
  // goes on: every lane must reach the shuffles below.
  float v = 0.0f;
  const int stride = static_cast<int>(gridDim.x * blockDim.x);
  const int first = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  for (int i = first; i < n; i += stride) v += x[i];

  // TODO 2: level 2 above, first half: each warp's sum, and one slot of shared memory per
  //         warp to hold it (how many warps can a block have at most?), written by one lane.
  // TODO 3: the barrier of level 2: which threads must reach it?
  // TODO 4: level 2's second half and level 3: one warp sums the warps' slots (what does a
  //         lane with no slot add?), and one lane of it adds the block's sum to the total.
  (void)total;
  (void)lane;
  (void)warp;
  (void)warps;
}

// ---- given: the other kernels and the host side ---------------------------------------------

__global__ void warp_sums_kernel(float* out, const float* x) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const float s = warp_sum(x[i]);
  if (threadIdx.x % 32 == 0) out[i / 32] = s;
}

__global__ void early_return_kernel(float* out, const float* x, int active) {
  const int lane = static_cast<int>(threadIdx.x);
  if (lane >= active) return;  // THE BUG: warp_sum's full mask still names these lanes
  const float s = warp_sum(x[lane]);
  if (lane == 0) *out = s;
}

float device_sum(const float* x, int n, int threads) {
  if (threads < 32 || threads > 1024 || threads % 32 != 0) {
    throw std::invalid_argument("device_sum: threads must be a multiple of 32 from 32 to 1024, "
                                "got " + std::to_string(threads));
  }
  if (n <= 0) return 0.0f;
  const float zero = 0.0f;
  ex_cuda::DeviceArray<float> d_x(static_cast<size_t>(n), x), d_total(1, &zero);
  const int blocks = std::min(ceil_div(n, threads), kMaxBlocks);
  launch("sum_kernel", sum_kernel, dim3(static_cast<unsigned>(blocks)),
         dim3(static_cast<unsigned>(threads)), 0, d_total.data(), d_x.data(), n);
  float total = 0.0f;
  d_total.download(&total);
  return total;
}

void warp_sums(float* out, const float* x, int warps) {
  if (warps <= 0) return;
  const auto w = static_cast<size_t>(warps);
  ex_cuda::DeviceArray<float> d_x(32 * w, x), d_out(w, out);
  launch("warp_sums_kernel", warp_sums_kernel, dim3(static_cast<unsigned>(warps)), dim3(32), 0,
         d_out.data(), d_x.data());
  d_out.download(out);
}

void warp_sum_after_early_return(float* out, const float* x, int active) {
  if (!ex_cuda::kEmulated) {
    throw std::logic_error(
        "warp_sum_after_early_return: undefined behaviour on a GPU, emulator only");
  }
  ex_cuda::DeviceArray<float> d_x(32, x), d_out(1, out);
  launch("early_return_kernel", early_return_kernel, dim3(1), dim3(32), 0, d_out.data(), d_x.data(),
         active);
  d_out.download(out);
}

bool runs_on_emulator() { return ex_cuda::kEmulated; }

}  // namespace ex
