// kernels/cuda/softmax.cu: row-wise softmax, out (rows, cols) = softmax of each row of in,
//
//   softmax(x)_j = exp(x_j - max) / sum_k exp(x_k - max)
//
// (subtracting the row's max keeps exp from overflowing; it cancels in the ratio). About
// one exp per element against 12-16 bytes moved: memory-bound, so the ladder is about how
// many times each row crosses the memory bus, and whether the 32 threads of a warp load
// neighbouring addresses (one 128-byte transaction) or 32 scattered ones.
//
// Versions (bytes per element as kernels/cuda/bench/softmax.cpp counts them: every pass over
// a row is a trip to memory; figures: not yet measured on a GPU):
//   v1 three-pass      one thread per row: max, then sum of exp, then write exp / sum: reads
//                      the row 3 times (16 B/element); a warp's 32 threads read 32 rows
//                      cols*4 bytes apart, so every load is its own transaction, and only
//                      `rows` threads exist (4096 rows: 128 warps for an H100's 132 SMs).
//   v2 online          one thread per row, max and sum in one pass (the running sum rescaled
//                      by exp(old max - new max) whenever the max grows), then the write
//                      pass: 2 reads (12 B/element). Attacks v1's extra read; the loads are
//                      still uncoalesced.
//   v3 warp-per-row    32 lanes share a row, lane l taking elements l, l+32, ...: each warp
//                      load is one coalesced 128-byte transaction, and 32x the threads of
//                      v2. Each lane's (max, sum) pair is merged with the others' through
//                      warp shuffles. Attacks the scattered loads.
//   v4 block-per-row   256 threads (8 warps) per row, for long rows (the GPT's 50304-wide
//                      logits: 1572 elements per lane in v3): float4 loads (16 bytes per
//                      instruction) when cols % 4 == 0 and both pointers are 16-byte
//                      aligned, else scalar loads; the block's pairs merged by warp
//                      shuffles, then across warps through shared memory. Attacks the
//                      per-row latency of v3 on long rows.
//
// Oldest GPU: compute capability 5.0 for every version (NNLAB_SM_MAXWELL: _sync shuffles and
// shared memory), compile-checked for 5.0, 5.2 and 5.3 (scripts/check_old_gpus.py).
#include <cfloat>
#include <cstdint>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace kernels::cuda::NNLAB_CUDA_NS {

namespace {

// The online (max, sum) pair and its merges: kernels/cuda/common.cuh.

// ---- v1: three passes, one thread per row -------------------------------------------------

__global__ void softmax_three_pass_kernel(float* out, const float* in, int rows, int cols) {
  const int row = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (row >= rows) return;
  const float* x = in + static_cast<size_t>(row) * static_cast<size_t>(cols);  // row (cols)
  float* y = out + static_cast<size_t>(row) * static_cast<size_t>(cols);
  // max = max_j x_j
  float m = -FLT_MAX;
  for (int j = 0; j < cols; ++j) m = fmaxf(m, x[j]);
  // sum = sum_j exp(x_j - max)
  float s = 0.0f;
  for (int j = 0; j < cols; ++j) s += expf(x[j] - m);
  // y_j = exp(x_j - max) / sum
  const float inv = 1.0f / s;
  for (int j = 0; j < cols; ++j) y[j] = expf(x[j] - m) * inv;
}

// ---- v2: online max and sum, one thread per row -------------------------------------------

__global__ void softmax_online_kernel(float* out, const float* in, int rows, int cols) {
  const int row = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (row >= rows) return;
  const float* x = in + static_cast<size_t>(row) * static_cast<size_t>(cols);
  float* y = out + static_cast<size_t>(row) * static_cast<size_t>(cols);
  float m = -FLT_MAX;
  float s = 0.0f;
  for (int j = 0; j < cols; ++j) online_add(m, s, x[j]);  // one read for max and sum
  const float inv = 1.0f / s;
  for (int j = 0; j < cols; ++j) y[j] = expf(x[j] - m) * inv;
}

// ---- v3: one warp per row -----------------------------------------------------------------

__global__ void softmax_warp_kernel(float* out, const float* in, int rows, int cols) {
  const int warps_per_block = static_cast<int>(blockDim.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int row = static_cast<int>(blockIdx.x) * warps_per_block + static_cast<int>(threadIdx.x) / 32;
  // The whole warp leaves together (row is per warp), so the full-mask shuffles below
  // only ever see warps whose 32 lanes are all present.
  if (row >= rows) return;
  const float* x = in + static_cast<size_t>(row) * static_cast<size_t>(cols);
  float* y = out + static_cast<size_t>(row) * static_cast<size_t>(cols);
  float m = -FLT_MAX;
  float s = 0.0f;
  for (int j = lane; j < cols; j += 32) online_add(m, s, x[j]);  // x[j0 .. j0+31]: one transaction
  warp_merge(m, s);
  const float inv = 1.0f / s;
  for (int j = lane; j < cols; j += 32) y[j] = expf(x[j] - m) * inv;
}

// ---- v4: one block per row, float4 loads --------------------------------------------------

// kVec4: cols % 4 == 0 and in, out 16-byte aligned, so every row starts 16-byte aligned and
// float4 i of a row is elements 4i .. 4i+3.
template <bool kVec4>
__global__ void softmax_block_kernel(float* out, const float* in, int rows, int cols) {
  const int row = static_cast<int>(blockIdx.x);  // grid = rows
  if (row >= rows) return;                        // (the whole block: no barrier is left waiting)
  const int tid = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  const float* x = in + static_cast<size_t>(row) * static_cast<size_t>(cols);
  float* y = out + static_cast<size_t>(row) * static_cast<size_t>(cols);
  float m = -FLT_MAX;
  float s = 0.0f;
  if constexpr (kVec4) {
    const float4* x4 = reinterpret_cast<const float4*>(x);  // (cols/4) float4
    for (int i = tid; i < cols / 4; i += threads) {
      const float4 v = x4[i];
      online_add(m, s, v.x);
      online_add(m, s, v.y);
      online_add(m, s, v.z);
      online_add(m, s, v.w);
    }
  } else {
    for (int j = tid; j < cols; j += threads) online_add(m, s, x[j]);
  }
  block_merge(m, s);
  const float inv = 1.0f / s;
  if constexpr (kVec4) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (int i = tid; i < cols / 4; i += threads) {
      const float4 v = x4[i];
      y4[i] = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv, expf(v.z - m) * inv, expf(v.w - m) * inv);
    }
  } else {
    for (int j = tid; j < cols; j += threads) y[j] = expf(x[j] - m) * inv;
  }
}

}  // namespace

// ---- launchers ----------------------------------------------------------------------------

void softmax_v1(float* out, const float* in, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  const int block = 128;  // threads = rows: the grid is as small as the batch
  launch("softmax_three_pass_kernel", softmax_three_pass_kernel, dim3(ceil_div(rows, block)), dim3(block), 0, out,
         in, rows, cols);
}

void softmax_v2(float* out, const float* in, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  const int block = 128;
  launch("softmax_online_kernel", softmax_online_kernel, dim3(ceil_div(rows, block)), dim3(block), 0, out, in, rows,
         cols);
}

void softmax_v3(float* out, const float* in, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  const int warps_per_block = 8;  // 256 threads: 8 rows per block
  launch("softmax_warp_kernel", softmax_warp_kernel, dim3(ceil_div(rows, warps_per_block)),
         dim3(32 * warps_per_block), 0, out, in, rows, cols);
}

void softmax_v4(float* out, const float* in, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  const int block = 256;  // a multiple of 32 (block_merge), 8 warps
  if (cols % 4 == 0 && aligned16(in) && aligned16(out)) {
    launch("softmax_block_kernel<float4>", softmax_block_kernel<true>, dim3(rows), dim3(block), 0, out, in, rows,
           cols);
  } else {
    launch("softmax_block_kernel<scalar>", softmax_block_kernel<false>, dim3(rows), dim3(block), 0, out, in, rows,
           cols);
  }
}

void add_softmax(Kernels& k) {
  k.softmax = {
      {1, "three-pass", "one thread per row: max, sum, write: 3 uncoalesced reads of the row",
        softmax_v1, {NNLAB_SM_MAXWELL}},
      {2, "online", "one thread per row, running max and rescaled sum in one pass: 2 reads",
        softmax_v2, {NNLAB_SM_MAXWELL}},
      {3, "warp-per-row", "32 lanes per row: coalesced loads, (max, sum) merged by shuffles",
        softmax_v3, {NNLAB_SM_MAXWELL}},
      {4, "block-per-row", "256 threads per row for long rows, float4 loads, shuffle + shared-memory merge",
        softmax_v4, {NNLAB_SM_MAXWELL}},
  };
}

}  // namespace kernels::cuda::NNLAB_CUDA_NS
