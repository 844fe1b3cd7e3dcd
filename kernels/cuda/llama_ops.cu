// kernels/cuda/llama_ops.cu: the modern (Llama) block's ops on the GPU (kernels/cuda/device.h,
// "the modern block"; the CPU meanings and ladders are kernels/rmsnorm.h, rope.h, swiglu.h).
//
// rmsnorm forward: out = inp * rstd * weight, rstd = 1 / sqrt(mean(inp^2) + eps)
//   v1 thread per row    two passes over the row (sum of squares, scale) by one thread: the
//                        plain loop on the GPU. Neighbouring threads read addresses C floats
//                        apart: every load of a warp touches 32 cache lines (uncoalesced).
//   v2 warp per row      lane l takes columns l, l+32, ...: each load of the warp reads 128
//                        consecutive bytes; the sum of squares is a warp_sum butterfly.
//                        (Layernorm's v2 with one statistic instead of two.)
// rmsnorm backward: dinp += rstd (g - xhat mean(g xhat)), dweight += sum_rows dout xhat
//   v1 thread per row    dinp: one thread per row (the reduction and the update), then
//                        dweight: one thread per column adding the rows in order.
//   v2 warp per row      dinp: one warp per row (coalesced, a warp_sum for mean(g xhat));
//                        dweight: the same column kernel as v1 (threads of a warp read 32
//                        neighbouring columns of a row: coalesced already, and summing rows
//                        in order keeps it deterministic, without atomics).
// rope forward and backward: one thread per pair (b, t, h, i < hs/2), reading x_i and
//   x_{i+hs/2} and the tables' row pos0 + t; the backward negates the angle. Single version:
//   a pair is 4 loads, 2 stores and 6 FLOPs; neighbouring threads take neighbouring i, so the
//   loads coalesce within a head (16 B per pair per direction, no reuse to organise).
// swiglu forward and backward: one thread per element of (rows, H). Single version (an
//   element-wise op; what gelu backward's v2 adds, float4 loads, would need ld and H to be
//   multiples of 4). The backward takes 1 - s as sigmoid(-g) = 1 / (1 + exp(g)) (a second
//   expf) instead of e s: no cancellation as s -> 1 and no inf * 0 where exp(-g) overflows.
// Figures: not yet measured on a GPU.
//
// Oldest GPU: compute capability 5.0 for every version (NNLAB_SM_MAXWELL: fp32 arithmetic and
// the _sync shuffles of warp_sum), compile-checked for 5.0, 5.2 and 5.3 by
// scripts/check_old_gpus.py.
#include <climits>
#include <cstdint>
#include <string>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace kernels::cuda::NNLAB_CUDA_NS {

namespace {

constexpr int kBlock = 256;                  // threads per block
constexpr int kWarpsPerBlock = kBlock / 32;  // rows per block of the warp-per-row kernels

// Blocks of kBlock threads for one thread per item; throws past the grid's x limit.
dim3 grid_for(const char* op, size_t items) {
  const size_t blocks = (items + kBlock - 1) / kBlock;
  if (blocks > static_cast<size_t>(INT_MAX)) {
    throw Error(std::string(op) + ": " + std::to_string(items) + " threads need more than 2^31 - 1 blocks");
  }
  return dim3(static_cast<unsigned>(blocks));
}

// ---- rmsnorm forward ----------------------------------------------------------------------------

// v1: thread n owns row n: inp (N,C) -> out (N,C), rstd (N)
__global__ void rmsnorm_forward_v1_kernel(float* out, float* rstd, const float* inp, const float* weight, int N, int C,
                                          float eps) {
  const int n = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (n >= N) return;
  const float* x = inp + static_cast<size_t>(n) * static_cast<size_t>(C);  // row n (C)
  float* y = out + static_cast<size_t>(n) * static_cast<size_t>(C);
  float ss = 0.0f;
  for (int c = 0; c < C; ++c) ss += x[c] * x[c];  // sum x^2
  const float s = 1.0f / sqrtf(ss / static_cast<float>(C) + eps);
  for (int c = 0; c < C; ++c) y[c] = (x[c] * s) * weight[c];
  rstd[n] = s;
}

// v2: one warp per row, lanes strided by 32 (coalesced)
__global__ void __launch_bounds__(kBlock)
    rmsnorm_forward_v2_kernel(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int n = static_cast<int>(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32);  // this warp's row
  if (n >= N) return;  // the whole warp leaves together: the shuffles below see all 32 lanes
  const float* x = inp + static_cast<size_t>(n) * static_cast<size_t>(C);
  float* y = out + static_cast<size_t>(n) * static_cast<size_t>(C);
  float ss = 0.0f;
  for (int c = lane; c < C; c += 32) ss += x[c] * x[c];  // lane l: columns l, l+32, ...
  ss = warp_sum(ss);
  const float s = 1.0f / sqrtf(ss / static_cast<float>(C) + eps);
  for (int c = lane; c < C; c += 32) y[c] = (x[c] * s) * weight[c];  // second read of x (from L1/L2)
  if (lane == 0) rstd[n] = s;
}

// ---- rmsnorm backward ----------------------------------------------------------------------------

// v1 dinp: thread n owns row n. dinp += s (g - xhat mean(g xhat)), g = dout w, xhat = x s
__global__ void rmsnorm_backward_dinp_v1_kernel(float* dinp, const float* dout, const float* inp, const float* weight,
                                                const float* rstd, int N, int C) {
  const int n = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (n >= N) return;
  const size_t off = static_cast<size_t>(n) * static_cast<size_t>(C);
  const float s = rstd[n];
  float gx = 0.0f;
  for (int c = 0; c < C; ++c) gx += dout[off + c] * weight[c] * (inp[off + c] * s);
  const float gx_mean = gx / static_cast<float>(C);
  for (int c = 0; c < C; ++c) {
    const float xhat = inp[off + c] * s;
    dinp[off + c] += s * (dout[off + c] * weight[c] - xhat * gx_mean);
  }
}

// v2 dinp: one warp per row
__global__ void __launch_bounds__(kBlock)
    rmsnorm_backward_dinp_v2_kernel(float* dinp, const float* dout, const float* inp, const float* weight,
                                    const float* rstd, int N, int C) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int n = static_cast<int>(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32);
  if (n >= N) return;  // whole warps only
  const size_t off = static_cast<size_t>(n) * static_cast<size_t>(C);
  const float s = rstd[n];
  float gx = 0.0f;
  for (int c = lane; c < C; c += 32) gx += dout[off + c] * weight[c] * (inp[off + c] * s);
  const float gx_mean = warp_sum(gx) / static_cast<float>(C);
  for (int c = lane; c < C; c += 32) {
    const float xhat = inp[off + c] * s;
    dinp[off + c] += s * (dout[off + c] * weight[c] - xhat * gx_mean);
  }
}

// dweight (C) += sum_n dout[n,c] xhat[n,c]: thread c adds the rows in order onto the old value
// (no atomics: the same bits every run, on every GPU)
__global__ void rmsnorm_backward_dweight_kernel(float* dweight, const float* dout, const float* inp, const float* rstd,
                                                int N, int C) {
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= C) return;
  float acc = dweight[c];
  for (int n = 0; n < N; ++n) {
    const size_t i = static_cast<size_t>(n) * static_cast<size_t>(C) + static_cast<size_t>(c);
    acc += dout[i] * (inp[i] * rstd[n]);
  }
  dweight[c] = acc;
}

// v3 dweight: the same sums in a fixed order, spread over the GPU. v1's kernel gives each of the C
// columns one thread that walks all N rows: C = 384 threads for N = 16K rows is a few warps on a
// 132-SM GPU, each load a dependent step of a long chain (1.9 ms per call on an H100, 13 calls a
// llama step: a third of the step). Here a block owns 32 columns and 32 row slices: thread (x, y)
// sums rows y, y + 32, ... of column x (a warp reads 32 consecutive floats of a row: coalesced),
// then thread (x, 0) adds the 32 slices in slice order onto the old value. Deterministic (no
// atomics), with a different summation order from v1, so its bits differ from v1's by rounding.
constexpr int kColumns = 32;
constexpr int kRowSlices = 32;
__global__ void __launch_bounds__(kColumns * kRowSlices)
    rmsnorm_backward_dweight_v3_kernel(float* dweight, const float* dout, const float* inp, const float* rstd, int N,
                                       int C) {
  __shared__ float slice[kRowSlices][kColumns + 1];  // +1: no bank conflicts reading a column
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int c = static_cast<int>(blockIdx.x) * kColumns + tx;
  float acc = 0.0f;
  if (c < C) {
    for (int n = ty; n < N; n += kRowSlices) {
      const size_t i = static_cast<size_t>(n) * static_cast<size_t>(C) + static_cast<size_t>(c);
      acc += dout[i] * (inp[i] * rstd[n]);
    }
  }
  slice[ty][tx] = acc;
  __syncthreads();
  if (ty == 0 && c < C) {
    float total = 0.0f;
    for (int k = 0; k < kRowSlices; ++k) total += slice[k][tx];
    dweight[c] += total;
  }
}

// ---- rope ------------------------------------------------------------------------------------------

// One thread per pair: index = ((b*T + t) * NH + h) * half + i. sign = +1 forward, -1 backward.
__global__ void rope_kernel(float* out, const float* inp, const float* cos, const float* sin, int B, int T, int NH,
                            int hs, int stride, int pos0, float sign) {
  const int half = hs / 2;
  const size_t pairs = static_cast<size_t>(B) * static_cast<size_t>(T) * static_cast<size_t>(NH) *
                       static_cast<size_t>(half);
  const size_t k = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= pairs) return;
  const int i = static_cast<int>(k % static_cast<size_t>(half));
  const size_t bth = k / static_cast<size_t>(half);  // (b*T + t) * NH + h
  const int h = static_cast<int>(bth % static_cast<size_t>(NH));
  const size_t bt = bth / static_cast<size_t>(NH);
  const int t = static_cast<int>(bt % static_cast<size_t>(T));
  const size_t head = bt * static_cast<size_t>(stride) + static_cast<size_t>(h) * static_cast<size_t>(hs);
  const size_t angle = static_cast<size_t>(pos0 + t) * static_cast<size_t>(half) + static_cast<size_t>(i);
  const float c = cos[angle];
  const float s = sign * sin[angle];
  const float x1 = inp[head + i];  // read both before writing: out may be inp
  const float x2 = inp[head + i + half];
  out[head + i] = x1 * c - x2 * s;
  out[head + i + half] = x2 * c + x1 * s;
}

// ---- swiglu ----------------------------------------------------------------------------------------

// One thread per element of (rows, H): out = silu(g) u, silu(g) = g / (1 + exp(-g))
__global__ void swiglu_forward_kernel(float* out, const float* gate, const float* up, int rows, int H, int ld) {
  const size_t k = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= static_cast<size_t>(rows) * static_cast<size_t>(H)) return;
  const size_t n = k / static_cast<size_t>(H);
  const size_t j = k % static_cast<size_t>(H);
  const size_t at = n * static_cast<size_t>(ld) + j;
  const float g = gate[at];
  out[k] = g / (1.0f + expf(-g)) * up[at];
}

// du = dout silu(g), dg = dout u s (1 + g (1 - s)), s = sigmoid(g), 1 - s = sigmoid(-g)
__global__ void swiglu_backward_kernel(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                       int rows, int H, int ld) {
  const size_t k = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= static_cast<size_t>(rows) * static_cast<size_t>(H)) return;
  const size_t n = k / static_cast<size_t>(H);
  const size_t j = k % static_cast<size_t>(H);
  const size_t at = n * static_cast<size_t>(ld) + j;
  const float g = gate[at];
  const float s = 1.0f / (1.0f + expf(-g));
  const float one_minus_s = 1.0f / (1.0f + expf(g));
  dup[at] = dout[k] * g * s;
  dgate[at] = dout[k] * up[at] * (s * (1.0f + g * one_minus_s));
}

}  // namespace

// ---- the launchers -------------------------------------------------------------------------------

void rmsnorm_forward_v1(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps) {
  if (N == 0) return;
  launch("rmsnorm_forward_v1_kernel", rmsnorm_forward_v1_kernel, dim3(static_cast<unsigned>(ceil_div(N, kBlock))),
         dim3(kBlock), 0, out, rstd, inp, weight, N, C, eps);
}

void rmsnorm_forward_v2(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps) {
  if (N == 0) return;
  launch("rmsnorm_forward_v2_kernel", rmsnorm_forward_v2_kernel,
         dim3(static_cast<unsigned>(ceil_div(N, kWarpsPerBlock))), dim3(kBlock), 0, out, rstd, inp, weight, N, C, eps);
}

namespace {
void rmsnorm_backward_dweight(float* dweight, const float* dout, const float* inp, const float* rstd, int N, int C) {
  launch("rmsnorm_backward_dweight_kernel", rmsnorm_backward_dweight_kernel,
         dim3(static_cast<unsigned>(ceil_div(C, kBlock))), dim3(kBlock), 0, dweight, dout, inp, rstd, N, C);
}
}  // namespace

void rmsnorm_backward_v1(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                         const float* rstd, int N, int C) {
  if (N == 0 || C == 0) return;
  launch("rmsnorm_backward_dinp_v1_kernel", rmsnorm_backward_dinp_v1_kernel,
         dim3(static_cast<unsigned>(ceil_div(N, kBlock))), dim3(kBlock), 0, dinp, dout, inp, weight, rstd, N, C);
  rmsnorm_backward_dweight(dweight, dout, inp, rstd, N, C);
}

void rmsnorm_backward_v2(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                         const float* rstd, int N, int C) {
  if (N == 0 || C == 0) return;
  launch("rmsnorm_backward_dinp_v2_kernel", rmsnorm_backward_dinp_v2_kernel,
         dim3(static_cast<unsigned>(ceil_div(N, kWarpsPerBlock))), dim3(kBlock), 0, dinp, dout, inp, weight, rstd, N,
         C);
  rmsnorm_backward_dweight(dweight, dout, inp, rstd, N, C);
}

void rmsnorm_backward_v3(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                         const float* rstd, int N, int C) {
  if (N == 0 || C == 0) return;
  launch("rmsnorm_backward_dinp_v2_kernel", rmsnorm_backward_dinp_v2_kernel,
         dim3(static_cast<unsigned>(ceil_div(N, kWarpsPerBlock))), dim3(kBlock), 0, dinp, dout, inp, weight, rstd, N,
         C);
  launch("rmsnorm_backward_dweight_v3_kernel", rmsnorm_backward_dweight_v3_kernel,
         dim3(static_cast<unsigned>(ceil_div(C, kColumns))), dim3(kColumns, kRowSlices), 0, dweight, dout, inp, rstd, N,
         C);
}

namespace {
void rope(const char* name, float* out, const float* inp, const float* cos, const float* sin, int B, int T, int NH,
          int hs, int stride, int pos0, float sign) {
  const size_t pairs = static_cast<size_t>(B) * static_cast<size_t>(T) * static_cast<size_t>(NH) *
                       static_cast<size_t>(hs / 2);
  if (pairs == 0) return;
  launch("rope_kernel", rope_kernel, grid_for(name, pairs), dim3(kBlock), 0, out, inp, cos, sin, B, T, NH, hs, stride,
         pos0, sign);
}
}  // namespace

void rope_forward_v1(float* out, const float* inp, const float* cos, const float* sin, int B, int T, int NH, int hs,
                     int stride, int pos0) {
  rope("rope_forward v1", out, inp, cos, sin, B, T, NH, hs, stride, pos0, 1.0f);
}

void rope_backward_v1(float* dinp, const float* dout, const float* cos, const float* sin, int B, int T, int NH, int hs,
                      int stride, int pos0) {
  rope("rope_backward v1", dinp, dout, cos, sin, B, T, NH, hs, stride, pos0, -1.0f);
}

void swiglu_forward_v1(float* out, const float* gate, const float* up, int rows, int H, int ld) {
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(H);
  if (n == 0) return;
  launch("swiglu_forward_kernel", swiglu_forward_kernel, grid_for("swiglu_forward v1", n), dim3(kBlock), 0, out, gate,
         up, rows, H, ld);
}

void swiglu_backward_v1(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int rows,
                        int H, int ld) {
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(H);
  if (n == 0) return;
  launch("swiglu_backward_kernel", swiglu_backward_kernel, grid_for("swiglu_backward v1", n), dim3(kBlock), 0, dgate,
         dup, dout, gate, up, rows, H, ld);
}

void add_llama_ops(Kernels& k) {
  k.rmsnorm_forward = {
      {1, "thread per row", "sum of squares and scale by one thread per row (uncoalesced): the plain loop",
       rmsnorm_forward_v1, {NNLAB_SM_MAXWELL}},
      {2, "warp per row", "lanes strided by 32 (coalesced), the sum of squares a warp_sum butterfly",
       rmsnorm_forward_v2, {NNLAB_SM_MAXWELL}},
  };
  k.rmsnorm_backward = {
      {1, "thread per row", "dinp by one thread per row, dweight by one thread per column (rows in order)",
       rmsnorm_backward_v1, {NNLAB_SM_MAXWELL}},
      {2, "warp per row", "dinp by one warp per row (coalesced, warp_sum), dweight as v1",
       rmsnorm_backward_v2, {NNLAB_SM_MAXWELL}},
      {3, "column strips", "dinp as v2; dweight by a block per 32 columns x 32 row slices, slices added in a "
       "fixed order: coalesced, deterministic, the whole GPU busy", rmsnorm_backward_v3, {NNLAB_SM_MAXWELL}},
  };
  k.rope_forward = {
      {1, "thread per pair", "one thread per (token, head, pair i / i + hs/2): the rotation (single version)",
       rope_forward_v1, {NNLAB_SM_MAXWELL}},
  };
  k.rope_backward = {
      {1, "thread per pair", "one thread per pair, the angle negated (single version)", rope_backward_v1,
       {NNLAB_SM_MAXWELL}},
  };
  k.swiglu_forward = {
      {1, "thread per element", "out = silu(g) u, one thread per element, rows ld apart (single version)",
       swiglu_forward_v1, {NNLAB_SM_MAXWELL}},
  };
  k.swiglu_backward = {
      {1, "thread per element", "dg, du per element; 1 - s as sigmoid(-g): no cancellation (single version)",
       swiglu_backward_v1, {NNLAB_SM_MAXWELL}},
  };
}

}  // namespace kernels::cuda::NNLAB_CUDA_NS
