// Reference solution of exercise 17_warp_reduce_sum (lesson 09). Try it yourself first:
// exercises/17_warp_reduce_sum/warp_reduce.cu.
//
// Oldest GPU: compute capability 5.0, as the exercise (scripts/check_old_gpus.py).
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

// The sum of v over the 32 lanes of the calling warp, in lane 0 (the other lanes end with
// partial sums). Step by step, lane l adds the value of lane l + offset:
//   offset 16: lanes 0..15 hold v[l] + v[l+16]             (pairs)
//   offset 8:  lanes 0..7 hold the sums of 4 values
//   offset 4, 2, 1: lane 0 holds all 32.
// A lane whose l + offset is past 31 gets its own value back; its result is never used.
__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(kFullMask, v, offset);
  return v;
}

// ---- the block: warp sums through shared memory, then one atomic ----------------------------

__global__ void sum_kernel(float* total, const float* x, int n) {
  __shared__ float warp_totals[32];  // one per warp: at most 1024 / 32 warps in a block
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

  v = warp_sum(v);                       // lane 0 of each warp: the warp's sum
  if (lane == 0) warp_totals[warp] = v;  // one slot per warp
  __syncthreads();                       // every warp's total written before warp 0 reads them
  if (warp == 0) {                       // the whole of warp 0 (all 32 lanes) takes part
    v = lane < warps ? warp_totals[lane] : 0.0f;
    v = warp_sum(v);
    if (lane == 0) atomicAdd(total, v);  // one atomic per block, not one per element
  }
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
