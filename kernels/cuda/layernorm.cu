// kernels/cuda/layernorm.cu: layer normalisation over the last axis, forward and backward,
// and the transformer block's residual add fused with the layernorm that follows it.
//
//   inp (N,C), weight (C), bias (C) -> out (N,C), mean (N), rstd (N)
//   mean = sum_c x_c / C,  var = sum_c (x_c - mean)^2 / C (biased, as PyTorch),
//   rstd = 1 / sqrt(var + eps),  eps = 1e-5,  out_c = (x_c - mean) * rstd * weight_c + bias_c
// (the CPU formulas: nn/transformer.h, kernels/layernorm.h). N = B * T rows of a GPT's
// activations, C channels: 768 for GPT-2 small, so a row is only 3 KB and a warp can own it.
//
// Every version is memory-bound: ~8 FLOPs per element against 8 or more bytes. What the
// ladders attack is how the bytes move: coalescing, the number of passes over a row, and
// round trips through memory that fusion removes. Figures: not yet measured on a GPU.
//
// forward
//   v1 thread per row   one thread walks its row three times (mean, variance, write). Neighbour
//                       threads read addresses C floats apart: every load instruction of a
//                       warp touches 32 different cache lines (uncoalesced), and N / 256
//                       blocks leave most of the GPU idle when N is a few thousand.
//   v2 warp per row     32 lanes stride through the row together (lane l reads l, l+32, ...:
//                       each warp load is 128 consecutive bytes), statistics in ONE pass
//                       (shifted sums, below) reduced with 2 x 5 shuffles, then a second
//                       pass to write: reads x twice (the second read usually from L1/L2).
//   v3 row in registers v2 with float4 loads (a quarter of the load instructions), and the
//                       row kept in registers between the statistics and the write: x is read
//                       from memory once, and the statistics become the exact two-pass ones
//                       for free (both passes read registers). C % 4 == 0, 16-byte aligned
//                       pointers and C <= 4096 (32 float4 = 128 registers per lane at most);
//                       otherwise it runs v2.
// bias may be nullptr in every version (no bias: nanoGPT's bias=False), and then dbias too:
// the forward adds nothing, the backward skips dbias.
//
// backward (dinp, dweight, dbias all ACCUMULATE +=, as llm.c)
//   v1 thread per row   two passes per row; dweight and dbias take an atomicAdd per element
//                       into global memory: N * C * 2 atomics, with all 32 lanes of a warp
//                       hitting the same column at once. Correct and slow.
//   v2 warp per row     both row reductions (mean of g = dout*w and of g*xhat) in one pass,
//                       coalesced; dweight and dbias summed per block in shared memory (shared
//                       atomics) and added with one global atomicAdd per block per column.
//                       C <= 6144 (2C floats of shared memory within the default 48 KB);
//                       otherwise it runs v1.
//   v1 and v2 are not deterministic: float atomics land in whatever order the blocks run,
//   so dweight and dbias differ in their last bits from run to run.
//   v3 deterministic    no atomics: a warp-per-row kernel writes dinp (as v2), then a second
//                       kernel sums dweight and dbias per column in a fixed order: a block per
//                       32 columns, its 32 x 32 threads each summing every 32nd row, then a
//                       fixed-order sum of the 32 partials. Reads dout and x once more (8 B per
//                       element), and its grid is small (C / 32 blocks: 12 at C = 384); what it
//                       buys is the same bits on every run and every GPU (what the GPT uses).
// residual + layernorm (residual = a + b, then the layernorm of residual)
//   v1 unfused          a residual-add kernel writes residual, then forward v2 reads it back
//                       twice: 24 B per element (read a, b; write residual; read it twice; write out).
//   v2 fused            one warp per row adds, writes residual and normalises from registers
//                       (as forward v3): 16 B per element. Where forward v3 would fall back,
//                       a fused warp-per-row kernel that re-reads the residual it just wrote.
//
// One-pass statistics, and why shifted. var = E[x^2] - E[x]^2 subtracts two numbers of size
// mean^2 to get one of size sigma^2: in float it keeps about 7 - log10(mean^2 / sigma^2) digits
// (kernels/layernorm.h: a row of 1000 + N(0,1) came out with variance 0.23 instead of 1).
// Shifting every x by a value K of the row itself (here its first element, one broadcast load),
//   var = E[(x-K)^2] - E[x-K]^2,  mean = K + E[x-K],
// is the same formula with (mean - K)^2 / sigma^2 in place of mean^2 / sigma^2, and K is a
// sample of the row, typically within a few sigma of the mean: the cancellation is gone for one
// subtraction per element. Welford's running update is stable too, but costs a division per
// element and a three-value (count, mean, M2) merge per shuffle step; the shift keeps v2's
// reduction at two plain sums.
//
// Oldest GPU: compute capability 5.0 for every version (NNLAB_SM_MAXWELL: _sync shuffles,
// float atomicAdd on global and shared memory), compile-checked for 5.0, 5.2 and 5.3
// (scripts/check_old_gpus.py).
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

#include <algorithm>
#include <cstdint>

namespace kernels::cuda::NNLAB_CUDA_NS {

namespace {

constexpr float kEps = 1e-5f;      // PyTorch's default, nn::kLayernormEps
constexpr int kBlock = 256;        // threads per block: 8 warps, so 8 rows per block for v2/v3
constexpr int kWarpsPerBlock = kBlock / 32;
constexpr int kMaxRegisterC = 4096;  // forward v3 / residual v2: 32 float4 per lane at most
constexpr int kMaxSharedC = 6144;    // backward v2: 2C floats of shared memory <= 48 KB

// bias[c], or 0 without a bias (bias == nullptr: the GPT's --bias false, nanoGPT's bias=False).
__device__ __forceinline__ float bias_at(const float* bias, int c) { return bias ? bias[c] : 0.0f; }

// ---- forward v1: one thread per row, three passes -------------------------------------------

__global__ void layernorm_forward_v1_kernel(float* out, float* mean, float* rstd, const float* inp,
                                            const float* weight, const float* bias, int N, int C) {
  const int n = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (n >= N) return;
  const float* x = inp + static_cast<size_t>(n) * static_cast<size_t>(C);  // row n (C)
  float* y = out + static_cast<size_t>(n) * static_cast<size_t>(C);

  // pass 1: mean = sum_c x_c / C
  float sum = 0.0f;
  for (int c = 0; c < C; ++c) sum += x[c];
  const float m = sum / static_cast<float>(C);
  // pass 2: var = sum_c (x_c - mean)^2 / C (the stable two-pass formula)
  float sq = 0.0f;
  for (int c = 0; c < C; ++c) {
    const float d = x[c] - m;
    sq += d * d;
  }
  const float s = rsqrtf(sq / static_cast<float>(C) + kEps);
  // pass 3: out = (x - mean) * rstd * weight + bias (no bias: bias == nullptr)
  for (int c = 0; c < C; ++c) y[c] = (x[c] - m) * s * weight[c] + bias_at(bias, c);
  mean[n] = m;
  rstd[n] = s;
}

// ---- forward v2: one warp per row, shifted one-pass statistics ------------------------------

__global__ void __launch_bounds__(kBlock)
    layernorm_forward_v2_kernel(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                                const float* bias, int N, int C) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int n = static_cast<int>(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32);  // this warp's row
  if (n >= N) return;  // the whole warp leaves together: the shuffles below see all 32 lanes
  const float* x = inp + static_cast<size_t>(n) * static_cast<size_t>(C);
  float* y = out + static_cast<size_t>(n) * static_cast<size_t>(C);

  // One pass: sums of d = x - K and d^2, K = x_0 (see the header: no cancellation).
  const float K = x[0];
  float s1 = 0.0f;
  float s2 = 0.0f;
  for (int c = lane; c < C; c += 32) {  // lane l: columns l, l+32, ... (coalesced)
    const float d = x[c] - K;
    s1 += d;
    s2 += d * d;
  }
  s1 = warp_sum(s1);
  s2 = warp_sum(s2);
  const float mean_d = s1 / static_cast<float>(C);                               // E[x - K]
  const float var = fmaxf(s2 / static_cast<float>(C) - mean_d * mean_d, 0.0f);  // E[d^2] - E[d]^2
  const float m = K + mean_d;
  const float s = rsqrtf(var + kEps);

  for (int c = lane; c < C; c += 32) y[c] = (x[c] - m) * s * weight[c] + bias_at(bias, c);  // second read of x
  if (lane == 0) {
    mean[n] = m;
    rstd[n] = s;
  }
}

// ---- forward v3 (and fused residual v2): the row in registers --------------------------------
// Lane l holds float4 number l, l+32, l+64, ... of the row: V of them, V*128 floats per warp,
// so every load instruction of the warp reads 512 consecutive bytes. The indices into x[] are
// compile-time constants after unrolling, so x[] lives in registers, not local memory.
// kResidual: the row is a + b, written to `residual` on the way (the fused residual add).
template <int V, bool kResidual>
__global__ void __launch_bounds__(kBlock)
    layernorm_rows_in_registers_kernel(float* residual, float* out, float* mean, float* rstd, const float* a,
                                       const float* b, const float* weight, const float* bias, int N, int C) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int n = static_cast<int>(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32);
  if (n >= N) return;
  const int C4 = C / 4;  // float4s per row (the launcher checked C % 4 == 0)
  const size_t row4 = static_cast<size_t>(n) * static_cast<size_t>(C4);
  const float4* w4 = reinterpret_cast<const float4*>(weight);
  const float4* b4 = reinterpret_cast<const float4*>(bias);

  // Load the row once: x = inp (forward), or a + b stored to residual (fused residual add).
  float4 x[V];
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int c4 = lane + 32 * j;  // float4 index in the row: (V, 32 lanes) -> row
    x[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (c4 < C4) {
      if constexpr (kResidual) {
        const float4 p = reinterpret_cast<const float4*>(a)[row4 + c4];
        const float4 q = reinterpret_cast<const float4*>(b)[row4 + c4];
        x[j] = make_float4(p.x + q.x, p.y + q.y, p.z + q.z, p.w + q.w);
        reinterpret_cast<float4*>(residual)[row4 + c4] = x[j];
      } else {
        x[j] = reinterpret_cast<const float4*>(a)[row4 + c4];
      }
      sum += (x[j].x + x[j].y) + (x[j].z + x[j].w);
    }
  }
  // The two-pass statistics, both passes over registers: mean, then squared deviations.
  const float m = warp_sum(sum) / static_cast<float>(C);
  float sq = 0.0f;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    if (lane + 32 * j < C4) {
      const float dx = x[j].x - m, dy = x[j].y - m, dz = x[j].z - m, dw = x[j].w - m;
      sq += (dx * dx + dy * dy) + (dz * dz + dw * dw);
    }
  }
  const float s = rsqrtf(warp_sum(sq) / static_cast<float>(C) + kEps);

  // out = (x - mean) * rstd * weight + bias, straight from the registers.
  float4* y4 = reinterpret_cast<float4*>(out) + row4;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int c4 = lane + 32 * j;
    if (c4 < C4) {
      const float4 w = w4[c4];
      const float4 bb = b4 ? b4[c4] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      y4[c4] = make_float4((x[j].x - m) * s * w.x + bb.x, (x[j].y - m) * s * w.y + bb.y,
                           (x[j].z - m) * s * w.z + bb.z, (x[j].w - m) * s * w.w + bb.w);
    }
  }
  if (lane == 0) {
    mean[n] = m;
    rstd[n] = s;
  }
}

// Picks V = the smallest power of two with V * 32 float4 >= C / 4 (C <= kMaxRegisterC).
template <bool kResidual>
void launch_rows_in_registers(const char* name, float* residual, float* out, float* mean, float* rstd,
                              const float* a, const float* b, const float* weight, const float* bias, int N,
                              int C) {
  const dim3 grid(static_cast<unsigned>(ceil_div(N, kWarpsPerBlock)));
  const int per_lane = ceil_div(C / 4, 32);  // float4s each lane must hold
  auto go = [&](auto kernel) {
    launch(name, kernel, grid, dim3(kBlock), 0, residual, out, mean, rstd, a, b, weight, bias, N, C);
  };
  if (per_lane <= 1) {
    go(layernorm_rows_in_registers_kernel<1, kResidual>);
  } else if (per_lane <= 2) {
    go(layernorm_rows_in_registers_kernel<2, kResidual>);
  } else if (per_lane <= 4) {
    go(layernorm_rows_in_registers_kernel<4, kResidual>);
  } else if (per_lane <= 8) {
    go(layernorm_rows_in_registers_kernel<8, kResidual>);
  } else if (per_lane <= 16) {
    go(layernorm_rows_in_registers_kernel<16, kResidual>);
  } else {
    go(layernorm_rows_in_registers_kernel<32, kResidual>);
  }
}

bool rows_fit_registers(int C, const void* p1, const void* p2, const void* p3, const void* p4,
                        const void* p5 = nullptr, const void* p6 = nullptr) {
  return C % 4 == 0 && C <= kMaxRegisterC && aligned16(p1) && aligned16(p2) && aligned16(p3) &&
         aligned16(p4) && aligned16(p5) && aligned16(p6);
}

// ---- backward v1: one thread per row, global atomics ----------------------------------------
// With xhat = (x - mean) * rstd and g = dout * weight (= dL/dxhat):
//   dinp += rstd * (g - mean(g) - xhat * mean(g * xhat))   (direct path, minus what flows back
//                                                           through the mean and the variance)
//   dweight += dout * xhat,  dbias += dout                  (summed over the rows)

__global__ void layernorm_backward_v1_kernel(float* dinp, float* dweight, float* dbias, const float* dout,
                                             const float* inp, const float* weight, const float* mean,
                                             const float* rstd, int N, int C) {
  const int n = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (n >= N) return;
  const size_t row = static_cast<size_t>(n) * static_cast<size_t>(C);
  const float* dy = dout + row;
  const float* x = inp + row;
  float* dx = dinp + row;
  const float m = mean[n];
  const float s = rstd[n];

  // pass 1: the two row reductions, mean(g) and mean(g * xhat)
  float g_sum = 0.0f;
  float gxhat_sum = 0.0f;
  for (int c = 0; c < C; ++c) {
    const float xhat = (x[c] - m) * s;
    const float g = dy[c] * weight[c];
    g_sum += g;
    gxhat_sum += g * xhat;
  }
  const float g_mean = g_sum / static_cast<float>(C);
  const float gxhat_mean = gxhat_sum / static_cast<float>(C);

  // pass 2: dinp, and the parameter gradients one global atomic at a time
  for (int c = 0; c < C; ++c) {
    const float xhat = (x[c] - m) * s;
    const float g = dy[c] * weight[c];
    dx[c] += s * (g - g_mean - xhat * gxhat_mean);
    atomicAdd(&dweight[c], dy[c] * xhat);
    if (dbias) atomicAdd(&dbias[c], dy[c]);
  }
}

// The two row means the backward of one row needs, g = dout * weight:
//   g_mean = mean_c g_c,   gxhat_mean = mean_c g_c xhat_c
// both in one pass (lane l: columns l, l+32, ...), then 2 x 5 shuffles; every lane gets them.
// (Backward v2 and v3 share it.)
__device__ __forceinline__ void row_gradient_means(const float* dy, const float* x, const float* weight, float m,
                                                   float s, int C, int lane, float& g_mean, float& gxhat_mean) {
  float g_sum = 0.0f;
  float gxhat_sum = 0.0f;
  for (int c = lane; c < C; c += 32) {
    const float xhat = (x[c] - m) * s;
    const float g = dy[c] * weight[c];
    g_sum += g;
    gxhat_sum += g * xhat;
  }
  g_mean = warp_sum(g_sum) / static_cast<float>(C);
  gxhat_mean = warp_sum(gxhat_sum) / static_cast<float>(C);
}

// ---- backward v2: one warp per row, per-block shared-memory sums ----------------------------
// A grid of about one full wave of blocks; each warp takes rows n = its global warp index,
// + (all warps of the grid), ...: a block sees many rows, so its C-column partial sums are
// added to dweight / dbias once per block instead of once per row.
__global__ void __launch_bounds__(kBlock)
    layernorm_backward_v2_kernel(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                 const float* weight, const float* mean, const float* rstd, int N, int C) {
  float* dweight_block = dynamic_shared<float>();  // (C): sum over this block's rows of dout * xhat
  float* dbias_block = dweight_block + C;          // (C): sum over this block's rows of dout
  for (int c = static_cast<int>(threadIdx.x); c < 2 * C; c += static_cast<int>(blockDim.x)) {
    dweight_block[c] = 0.0f;
  }
  __syncthreads();

  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warps = static_cast<int>(blockDim.x / 32);
  const int first = static_cast<int>(blockIdx.x) * warps + static_cast<int>(threadIdx.x / 32);
  const int stride = static_cast<int>(gridDim.x) * warps;
  for (int n = first; n < N; n += stride) {  // the same n for all 32 lanes: full-warp shuffles
    const size_t row = static_cast<size_t>(n) * static_cast<size_t>(C);
    const float* dy = dout + row;
    const float* x = inp + row;
    float* dx = dinp + row;
    const float m = mean[n];
    const float s = rstd[n];

    float g_mean = 0.0f, gxhat_mean = 0.0f;
    row_gradient_means(dy, x, weight, m, s, C, lane, g_mean, gxhat_mean);

    for (int c = lane; c < C; c += 32) {
      const float xhat = (x[c] - m) * s;
      const float g = dy[c] * weight[c];
      dx[c] += s * (g - g_mean - xhat * gxhat_mean);
      // The 32 lanes hit 32 different columns; only the block's other warps can collide.
      atomicAdd(&dweight_block[c], dy[c] * xhat);
      if (dbias) atomicAdd(&dbias_block[c], dy[c]);
    }
  }
  __syncthreads();
  // One global atomic per block per column.
  for (int c = static_cast<int>(threadIdx.x); c < C; c += static_cast<int>(blockDim.x)) {
    atomicAdd(&dweight[c], dweight_block[c]);
    if (dbias) atomicAdd(&dbias[c], dbias_block[c]);
  }
}

// ---- backward v3: deterministic, no atomics ------------------------------------------------------

// dinp += rstd (g - mean(g) - xhat mean(g xhat)): one warp per row, as v2, nothing else.
__global__ void __launch_bounds__(kBlock)
    layernorm_backward_dinp_kernel(float* dinp, const float* dout, const float* inp, const float* weight,
                                   const float* mean, const float* rstd, int N, int C) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int n = static_cast<int>(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32);  // this warp's row
  if (n >= N) return;
  const size_t row = static_cast<size_t>(n) * static_cast<size_t>(C);
  const float* dy = dout + row;
  const float* x = inp + row;
  float* dx = dinp + row;
  const float m = mean[n];
  const float s = rstd[n];
  float g_mean = 0.0f, gxhat_mean = 0.0f;
  row_gradient_means(dy, x, weight, m, s, C, lane, g_mean, gxhat_mean);
  for (int c = lane; c < C; c += 32) {
    const float xhat = (x[c] - m) * s;
    dx[c] += s * (dy[c] * weight[c] - g_mean - xhat * gxhat_mean);
  }
}

constexpr int kColumns = 32;    // v3's parameter kernel: columns per block (threadIdx.x)
constexpr int kRowSlices = 32;  // and row slices (threadIdx.y): thread (x, y) sums rows y, y+32, ...

// dweight[c] += sum_n dout[n,c] xhat[n,c], dbias[c] += sum_n dout[n,c] (skipped if null), in a
// fixed order: thread (x, y) sums rows y, y + 32, ... of column c (a warp reads 32 consecutive
// floats of a row), then thread (x, 0) adds the 32 slices' sums in slice order.
__global__ void __launch_bounds__(kColumns * kRowSlices)
    layernorm_backward_params_kernel(float* dweight, float* dbias, const float* dout, const float* inp,
                                     const float* mean, const float* rstd, int N, int C) {
  __shared__ float dweight_slice[kRowSlices][kColumns + 1];  // (slices, columns); +1: no bank conflicts
  __shared__ float dbias_slice[kRowSlices][kColumns + 1];
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int c = static_cast<int>(blockIdx.x) * kColumns + tx;
  float dw = 0.0f;
  float db = 0.0f;
  if (c < C) {
    for (int n = ty; n < N; n += kRowSlices) {
      const size_t i = static_cast<size_t>(n) * static_cast<size_t>(C) + static_cast<size_t>(c);
      const float xhat = (inp[i] - mean[n]) * rstd[n];
      dw += dout[i] * xhat;
      db += dout[i];
    }
  }
  dweight_slice[ty][tx] = dw;
  dbias_slice[ty][tx] = db;
  __syncthreads();
  if (ty == 0 && c < C) {
    float dw_total = 0.0f;
    float db_total = 0.0f;
    for (int k = 0; k < kRowSlices; ++k) {
      dw_total += dweight_slice[k][tx];
      db_total += dbias_slice[k][tx];
    }
    dweight[c] += dw_total;
    if (dbias) dbias[c] += db_total;
  }
}

// ---- residual + layernorm ----------------------------------------------------------------------

// residual = a + b, n floats: one thread per element (the unfused v1's first kernel).
__global__ void residual_add_kernel(float* residual, const float* a, const float* b, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) residual[i] = a[i] + b[i];
}

// The fused fallback (C % 4 != 0, misaligned, or C > kMaxRegisterC): forward v2 with the add
// in its first pass; the second pass reads back the residual this lane just wrote.
__global__ void __launch_bounds__(kBlock)
    residual_layernorm_warp_kernel(float* residual, float* out, float* mean, float* rstd, const float* a,
                                   const float* b, const float* weight, const float* bias, int N, int C) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int n = static_cast<int>(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32);
  if (n >= N) return;
  const size_t row = static_cast<size_t>(n) * static_cast<size_t>(C);
  const float K = a[row] + b[row];  // the shift: the row's first element
  float s1 = 0.0f;
  float s2 = 0.0f;
  for (int c = lane; c < C; c += 32) {
    const float r = a[row + c] + b[row + c];
    residual[row + c] = r;
    const float d = r - K;
    s1 += d;
    s2 += d * d;
  }
  s1 = warp_sum(s1);
  s2 = warp_sum(s2);
  const float mean_d = s1 / static_cast<float>(C);
  const float var = fmaxf(s2 / static_cast<float>(C) - mean_d * mean_d, 0.0f);
  const float m = K + mean_d;
  const float s = rsqrtf(var + kEps);
  for (int c = lane; c < C; c += 32) out[row + c] = (residual[row + c] - m) * s * weight[c] + bias_at(bias, c);
  if (lane == 0) {
    mean[n] = m;
    rstd[n] = s;
  }
}

}  // namespace

// ---- the launchers -----------------------------------------------------------------------------

void layernorm_forward_v1(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                          const float* bias, int N, int C) {
  launch("layernorm_forward_v1_kernel", layernorm_forward_v1_kernel, dim3(static_cast<unsigned>(ceil_div(N, kBlock))),
         dim3(kBlock), 0, out, mean, rstd, inp, weight, bias, N, C);
}

void layernorm_forward_v2(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                          const float* bias, int N, int C) {
  launch("layernorm_forward_v2_kernel", layernorm_forward_v2_kernel,
         dim3(static_cast<unsigned>(ceil_div(N, kWarpsPerBlock))), dim3(kBlock), 0, out, mean, rstd, inp, weight,
         bias, N, C);
}

void layernorm_forward_v3(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                          const float* bias, int N, int C) {
  if (!rows_fit_registers(C, out, inp, weight, bias)) {
    layernorm_forward_v2(out, mean, rstd, inp, weight, bias, N, C);
    return;
  }
  launch_rows_in_registers<false>("layernorm_forward_v3_kernel", nullptr, out, mean, rstd, inp, nullptr, weight,
                                  bias, N, C);
}

void layernorm_backward_v1(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                           const float* weight, const float* mean, const float* rstd, int N, int C) {
  launch("layernorm_backward_v1_kernel", layernorm_backward_v1_kernel,
         dim3(static_cast<unsigned>(ceil_div(N, kBlock))), dim3(kBlock), 0, dinp, dweight, dbias, dout, inp, weight,
         mean, rstd, N, C);
}

void layernorm_backward_v2(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                           const float* weight, const float* mean, const float* rstd, int N, int C) {
  if (C > kMaxSharedC) {
    layernorm_backward_v1(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    return;
  }
  // About one wave: 2048 resident threads per SM / 256 = 8 blocks per SM (fewer fit when C is
  // large and the shared sums take more than 228 KB / 8), never more blocks than row groups.
  const int blocks = std::min(ceil_div(N, kWarpsPerBlock), multiprocessors() * (2048 / kBlock));
  const size_t smem = 2 * static_cast<size_t>(C) * sizeof(float);
  launch("layernorm_backward_v2_kernel", layernorm_backward_v2_kernel, dim3(static_cast<unsigned>(blocks)),
         dim3(kBlock), smem, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

void layernorm_backward_v3(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                           const float* weight, const float* mean, const float* rstd, int N, int C) {
  if (N <= 0 || C <= 0) return;
  launch("layernorm_backward_dinp_kernel", layernorm_backward_dinp_kernel,
         dim3(static_cast<unsigned>(ceil_div(N, kWarpsPerBlock))), dim3(kBlock), 0, dinp, dout, inp, weight, mean,
         rstd, N, C);
  launch("layernorm_backward_params_kernel", layernorm_backward_params_kernel,
         dim3(static_cast<unsigned>(ceil_div(C, kColumns))), dim3(kColumns, kRowSlices), 0, dweight, dbias, dout, inp,
         mean, rstd, N, C);
}

void residual_layernorm_v1(float* residual, float* out, float* mean, float* rstd, const float* a, const float* b,
                           const float* weight, const float* bias, int N, int C) {
  const size_t n = static_cast<size_t>(N) * static_cast<size_t>(C);
  launch("residual_add_kernel", residual_add_kernel, dim3(static_cast<unsigned>((n + kBlock - 1) / kBlock)),
         dim3(kBlock), 0, residual, a, b, n);
  layernorm_forward_v2(out, mean, rstd, residual, weight, bias, N, C);
}

void residual_layernorm_v2(float* residual, float* out, float* mean, float* rstd, const float* a, const float* b,
                           const float* weight, const float* bias, int N, int C) {
  if (!rows_fit_registers(C, residual, out, a, b, weight, bias)) {
    launch("residual_layernorm_warp_kernel", residual_layernorm_warp_kernel,
           dim3(static_cast<unsigned>(ceil_div(N, kWarpsPerBlock))), dim3(kBlock), 0, residual, out, mean, rstd,
           a, b, weight, bias, N, C);
    return;
  }
  launch_rows_in_registers<true>("residual_layernorm_v2_kernel", residual, out, mean, rstd, a, b, weight, bias, N,
                                 C);
}

void add_layernorm(Kernels& k) {
  k.layernorm_forward = {
      {1, "thread per row", "three passes per row, one thread each: uncoalesced, few threads", layernorm_forward_v1, {NNLAB_SM_MAXWELL}},
      {2, "warp per row", "coalesced lanes, shifted one-pass statistics with shuffles; x read twice",
        layernorm_forward_v2, {NNLAB_SM_MAXWELL}},
      {3, "row in registers", "float4 loads, row kept in registers: x read once, exact two-pass statistics",
        layernorm_forward_v3, {NNLAB_SM_MAXWELL}},
  };
  k.layernorm_backward = {
      {1, "thread per row", "two passes per row, a global atomicAdd per element for dweight/dbias",
        layernorm_backward_v1, {NNLAB_SM_MAXWELL}},
      {2, "warp per row", "both reductions in one coalesced pass; dweight/dbias summed per block in shared memory",
        layernorm_backward_v2, {NNLAB_SM_MAXWELL}},
      {3, "deterministic", "dinp warp per row; dweight/dbias per column in a fixed order, no atomics: same bits "
                               "every run",
        layernorm_backward_v3, {NNLAB_SM_MAXWELL}},
  };
  k.residual_layernorm = {
      {1, "unfused", "residual-add kernel, then layernorm v2 reads the residual back: 24 B/element",
        residual_layernorm_v1, {NNLAB_SM_MAXWELL}},
      {2, "fused", "one warp per row adds, writes residual, normalises from registers: 16 B/element",
        residual_layernorm_v2, {NNLAB_SM_MAXWELL}},
  };
}

}  // namespace kernels::cuda::NNLAB_CUDA_NS
