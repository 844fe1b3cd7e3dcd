// kernels/cuda/gpt_ops.cu: the GPT's small ops, the ones around the matmuls, attention and
// layernorms (kernels/cuda/device.h, "the GPT's ops"; the CPU meanings are nn/transformer.h
// and nn/ops.h). Most are element-wise and memory-bound: one version each is enough to
// teach them, and where a second version teaches something it is there.
//
// encoder forward: out (B,T,C) = wte[inp[b,t]] + wpe[t]
//   v1 thread per element   one thread per output float; the id is read by all C threads of
//                           its row (one cached load per warp). Single version: there is no
//                           arithmetic to save and every byte is read and written once.
// encoder backward: dwte (V,C) += sum over positions holding each id; dwpe (T,C) += sum over b
//   v1 thread per (v,c)     each thread walks all N = B*T positions in order and adds dout
//                           where the id is v: V*C threads each reading N ids (the vocabulary
//                           is 65 characters: N*65 id tests per channel, almost all misses).
//   v2 block per token      one block per (token v, strip of 128 channels) reads the ids in
//                           chunks of 1024, compacts the positions holding v into shared
//                           memory IN ORDER (warp ballots + a prefix over the per-warp counts),
//                           then its 128 threads add just those rows of dout (coalesced):
//                           each id is read ceil(C/128) times per token instead of C times.
//                           Load is uneven: a block's work is its token's frequency (a space
//                           is ~15% of Shakespeare's characters).
//   Both add in position order onto the existing gradient, so v1 and v2 are bit for bit the
//   same, and the same as nn::encoder_backward<float>'s loop (no atomics, deterministic).
//   dwpe: both versions use one thread per (t,c) summing over b in order (already coalesced
//   and B-long: nothing for v2 to improve).
// gelu backward: dinp = dout * gelu'(inp)
//   v1 thread per element   4-byte loads and stores
//   v2 float4 grid-stride   16-byte loads and stores, a grid that fills the GPU once, a
//                           scalar tail for n % 4, and v1 when a pointer is not 16-byte aligned
// dropout forward: mask_i = u_i < p ? 0 : 1/(1-p), out = inp * mask
//   v1 thread per element   a counter-based hash (SplitMix64 output i of state seed), so the
//                           mask is a pure function of (seed, i): bit for bit nn's mask, with
//                           no RNG state to share between threads or with the CPU. Single
//                           version (one hash, one multiply per element).
// multiply, add, scale: one thread per element, v1 only (nothing to teach beyond gelu's v2).
// cross-entropy loss: losses[n] = -log probs[n, targets[n]]: one thread per row, v1 only.
// cross-entropy backward: dlogits = (probs - onehot) * scale: one thread per element, v1 only.
// sum: *out = sum x_i (or x_i^2), accumulated in double, deterministic on any GPU
//   v1 one block            1024 threads stride through x, then a fixed-order block reduction:
//                           one SM does all the work.
//   v2 two-pass             P = min(1024, ceil(n / 8192)) blocks (P depends only on n, never
//                           on the GPU's SM count, so the summation order is the same on every
//                           GPU) write per-block double partials to the workspace; one block
//                           adds the P partials in a fixed order.
// Figures: not yet measured on a GPU.
//
// Oldest GPU: compute capability 5.0 for every version (NNLAB_SM_MAXWELL: _sync ballots and
// shuffles, shared memory, double arithmetic: correct everywhere, if slow where fp64 runs at
// 1/32 of fp32, as on GeForce and Jetson cards), compile-checked for 5.0, 5.2 and 5.3
// (scripts/check_old_gpus.py).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/splitmix64.h"

namespace kernels::cuda::NNLAB_CUDA_NS {

namespace {

constexpr int kBlock = 256;  // threads per block of the element-wise kernels

// Blocks of kBlock threads for one thread per element; throws past the grid's x limit.
dim3 elementwise_grid(const char* op, size_t n) {
  const size_t blocks = (n + kBlock - 1) / kBlock;
  if (blocks > static_cast<size_t>(INT_MAX)) {
    throw Error(std::string(op) + ": " + std::to_string(n) + " elements need more than 2^31 - 1 blocks");
  }
  return dim3(static_cast<unsigned>(blocks));
}

// ---- encoder forward ----------------------------------------------------------------------

// inp (B,T) ids, wte (V,C), wpe (>=T,C) -> out (B,T,C); one thread per output element.
__global__ void encoder_forward_kernel(float* out, const int* inp, const float* wte, const float* wpe, int B, int T,
                                       int C) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t total = static_cast<size_t>(B) * static_cast<size_t>(T) * static_cast<size_t>(C);
  if (i >= total) return;
  const size_t bt = i / static_cast<size_t>(C);  // the position b * T + t
  const size_t c = i % static_cast<size_t>(C);
  const size_t t = bt % static_cast<size_t>(T);
  const size_t id = static_cast<size_t>(inp[bt]);
  // wte[id,c] + wpe[t,c]; no wpe (RoPE models): the token's row alone
  out[i] = wte[id * static_cast<size_t>(C) + c] + (wpe != nullptr ? wpe[t * static_cast<size_t>(C) + c] : 0.0f);
}

// ---- encoder backward -----------------------------------------------------------------------

// dwpe (T,C) += sum_b dout[b,t,:]: one thread per (t,c), b in order onto the old value.
__global__ void encoder_backward_wpe_kernel(float* dwpe, const float* dout, int B, int T, int C) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // t * C + c
  const size_t TC = static_cast<size_t>(T) * static_cast<size_t>(C);
  if (i >= TC) return;
  float acc = dwpe[i];
  for (int b = 0; b < B; ++b) acc += dout[static_cast<size_t>(b) * TC + i];
  dwpe[i] = acc;
}

// v1: dwte (V,C) += sum over positions n with inp[n] == v of dout[n,:]; one thread per (v,c)
// testing all N ids in order.
__global__ void encoder_backward_wte_v1_kernel(float* dwte, const float* dout, const int* inp, int N, int C, int V) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // v * C + c
  if (i >= static_cast<size_t>(V) * static_cast<size_t>(C)) return;
  const int v = static_cast<int>(i / static_cast<size_t>(C));
  const size_t c = i % static_cast<size_t>(C);
  float acc = dwte[i];
  for (int n = 0; n < N; ++n) {
    if (inp[n] == v) acc += dout[static_cast<size_t>(n) * static_cast<size_t>(C) + c];
  }
  dwte[i] = acc;
}

constexpr int kTokenBlock = 128;                       // v2: threads per block = channels per strip
constexpr int kTokenWarps = kTokenBlock / 32;
constexpr int kTokenRounds = 8;                        // ids each thread tests per chunk
constexpr int kTokenChunk = kTokenBlock * kTokenRounds;  // 1024 ids per chunk

// v2: block (v, strip) owns dwte[v, strip*128 .. +128). Per chunk of 1024 positions:
//   1. test: round r, thread x tests position start + r*128 + x; each warp's ballot says which
//      of its 32 positions hold v, lane 0 stores the count per (round, warp);
//   2. compact: positions are ordered by (round, warp, lane), so a hit's slot is the count of
//      hits in the (round, warp) pairs before its own plus the hits of the lower lanes;
//   3. add: each thread adds dout[pos, c] for the chunk's positions, in order.
// The plain loop it replaces: for n in chunk: if inp[n] == v: acc += dout[n, c].
__global__ void __launch_bounds__(kTokenBlock)
    encoder_backward_wte_v2_kernel(float* dwte, const float* dout, const int* inp, int N, int C) {
  __shared__ int positions[kTokenChunk];                // (hits) this chunk's positions holding v
  __shared__ int counts[kTokenRounds * kTokenWarps];    // (rounds, warps) hits per ballot
  const int v = static_cast<int>(blockIdx.x);
  const int c = static_cast<int>(blockIdx.y) * kTokenBlock + static_cast<int>(threadIdx.x);  // this thread's channel
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warp = static_cast<int>(threadIdx.x / 32);
  const unsigned lanes_below = (1u << lane) - 1u;
  const size_t row = static_cast<size_t>(C);
  // Threads past C still test ids and reach every barrier; they only skip the adds.
  float acc = c < C ? dwte[static_cast<size_t>(v) * row + static_cast<size_t>(c)] : 0.0f;

  for (int start = 0; start < N; start += kTokenChunk) {
    unsigned hits[kTokenRounds];  // (rounds) this warp's ballot per round
#pragma unroll
    for (int r = 0; r < kTokenRounds; ++r) {
      const int n = start + r * kTokenBlock + static_cast<int>(threadIdx.x);
      hits[r] = __ballot_sync(0xffffffffu, n < N && inp[n] == v);
      if (lane == 0) counts[r * kTokenWarps + warp] = __popc(hits[r]);
    }
    __syncthreads();

    int before = 0;  // hits in the (round, warp) pairs before pair j
#pragma unroll
    for (int j = 0; j < kTokenRounds * kTokenWarps; ++j) {
      const int r = j / kTokenWarps;
      if (j % kTokenWarps == warp && ((hits[r] >> lane) & 1u) != 0u) {
        positions[before + __popc(hits[r] & lanes_below)] = start + r * kTokenBlock + static_cast<int>(threadIdx.x);
      }
      before += counts[j];
    }
    __syncthreads();

    if (c < C) {
      for (int k = 0; k < before; ++k) acc += dout[static_cast<size_t>(positions[k]) * row + static_cast<size_t>(c)];
    }
    __syncthreads();  // every thread is done with positions[] before the next chunk writes it
  }
  if (c < C) dwte[static_cast<size_t>(v) * row + static_cast<size_t>(c)] = acc;
}

// ---- gelu backward ----------------------------------------------------------------------------

// gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3); the product rule:
//   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) du/dx,  du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// (nn::gelu_backward's formula, in float). tanhf is CUDA's accurate one, not a fast-math one.
__device__ __forceinline__ float gelu_grad(float x) {
  const float s = 0.7978845608f;  // sqrt(2/pi)
  const float k = 0.044715f;
  const float th = tanhf(s * (x + k * x * x * x));
  const float du = s * (1.0f + 3.0f * k * x * x);
  return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
}

__global__ void gelu_backward_kernel(float* dinp, const float* dout, const float* inp, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dinp[i] = dout[i] * gelu_grad(inp[i]);
}

// Every pointer 16-byte aligned. float4 i is elements 4i .. 4i+3; the last n % 4 elements
// are the tail, one each for the first threads of the grid.
__global__ void gelu_backward_float4_kernel(float* dinp, const float* dout, const float* inp, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t n4 = n / 4;
  const float4* dout4 = reinterpret_cast<const float4*>(dout);  // (n/4) float4
  const float4* inp4 = reinterpret_cast<const float4*>(inp);
  float4* dinp4 = reinterpret_cast<float4*>(dinp);
  for (size_t i = first; i < n4; i += stride) {
    const float4 g = dout4[i];
    const float4 x = inp4[i];
    dinp4[i] = make_float4(g.x * gelu_grad(x.x), g.y * gelu_grad(x.y), g.z * gelu_grad(x.z), g.w * gelu_grad(x.w));
  }
  if (first < n - 4 * n4) dinp[4 * n4 + first] = dout[4 * n4 + first] * gelu_grad(inp[4 * n4 + first]);
}

// ---- dropout ------------------------------------------------------------------------------------

// nn::dropout_uniform (nn/transformer.h), bit for bit: output number i of SplitMix64 started
// at state `seed` (kernels/splitmix64.h, the one definition, __device__ too), then the top 24
// bits as an integer times 2^-24 (exact in float, always < 1). The bench compares every mask
// with nn's.
__host__ __device__ inline float dropout_uniform(uint64_t seed, uint64_t i) {
  const uint64_t z = splitmix64(seed, i);
  return static_cast<float>(static_cast<uint32_t>(z >> 40)) * 0x1.0p-24f;
}

// mask_i = u_i < p ? 0 : keep_scale, out_i = inp_i * mask_i. inp_i is read before out_i is
// written by the same thread: out may alias inp.
__global__ void dropout_forward_kernel(float* out, float* mask, const float* inp, size_t n, float p,
                                       float keep_scale, uint64_t seed) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float u = dropout_uniform(seed, static_cast<uint64_t>(i));
  const float m = u < p ? 0.0f : keep_scale;  // never 0 for p = 0: u >= 0
  const float x = inp[i];
  mask[i] = m;
  out[i] = x * m;
}

// ---- multiply, add, scale -------------------------------------------------------------------------

__global__ void multiply_kernel(float* out, const float* a, const float* b, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] * b[i];
}

// out may alias a or b: each thread reads its two inputs before writing.
__global__ void add_kernel(float* out, const float* a, const float* b, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

__global__ void scale_kernel(float* x, float s, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= s;
}

// ---- cross-entropy from probabilities ----------------------------------------------------------

// losses[n] = -log probs[n, targets[n]]: one thread per row, one load each.
__global__ void crossentropy_loss_kernel(float* losses, const float* probs, const int* targets, int N, int V) {
  const int n = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (n >= N) return;
  losses[n] = -logf(probs[static_cast<size_t>(n) * static_cast<size_t>(V) + static_cast<size_t>(targets[n])]);
}

// dlogits[n,v] = (probs[n,v] - [v == targets[n]]) * scale: one thread per element
// (nn::softmax_cross_entropy_backward's expression, in float).
__global__ void crossentropy_backward_kernel(float* dlogits, const float* probs, const int* targets, int N, int V,
                                             float scale) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(N) * static_cast<size_t>(V)) return;
  const size_t n = i / static_cast<size_t>(V);
  const int v = static_cast<int>(i % static_cast<size_t>(V));
  const float indicator = v == targets[n] ? 1.0f : 0.0f;
  dlogits[i] = (probs[i] - indicator) * scale;
}

// ---- sum ------------------------------------------------------------------------------------------

constexpr int kSumBlock = 1024;         // v1's one block, and v2's final block
constexpr int kPartialBlock = 256;      // v2's partial blocks
constexpr size_t kPerPartial = 8192;    // v2: at least this many elements per partial block (32 per thread)

// The sum of every thread's v, in thread 0 (blockDim.x a multiple of 32, at most 1024). The
// order is fixed: a shuffle tree inside each warp, then thread 0 adds the warp totals in warp
// order. Call once per kernel.
__device__ __forceinline__ double block_sum(double v) {
  __shared__ double warp_total[32];
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warp = static_cast<int>(threadIdx.x / 32);
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (lane == 0) warp_total[warp] = v;
  __syncthreads();
  double total = 0.0;
  if (threadIdx.x == 0) {
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += warp_total[w];
  }
  return total;
}

// Thread g of `threads` adds x[g], x[g + threads], ... (squared when asked) in double.
__device__ __forceinline__ double strided_sum(const float* x, size_t n, size_t g, size_t threads, bool squares) {
  double acc = 0.0;
  for (size_t i = g; i < n; i += threads) {
    const double v = x[i];
    acc += squares ? v * v : v;
  }
  return acc;
}

// v1: one block does it all.
__global__ void __launch_bounds__(kSumBlock) sum_one_block_kernel(double* out, const float* x, size_t n, bool squares) {
  const double total = block_sum(strided_sum(x, n, threadIdx.x, blockDim.x, squares));
  if (threadIdx.x == 0) *out = total;
}

// v2, pass 1: block b's partial sum (threads strided over the whole grid) into partial[b].
__global__ void __launch_bounds__(kPartialBlock)
    sum_partials_kernel(double* partial, const float* x, size_t n, bool squares) {
  const size_t g = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t threads = static_cast<size_t>(gridDim.x) * blockDim.x;
  const double total = block_sum(strided_sum(x, n, g, threads, squares));
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// v2, pass 2: one block adds the P <= 1024 partials (thread t holds partial t).
__global__ void __launch_bounds__(kSumBlock) sum_final_kernel(double* out, const double* partial, int P) {
  const int t = static_cast<int>(threadIdx.x);
  const double total = block_sum(t < P ? partial[t] : 0.0);
  if (t == 0) *out = total;
}

}  // namespace

// ---- the launchers -----------------------------------------------------------------------------------

void encoder_forward_v1(float* out, const int* inp, const float* wte, const float* wpe, int B, int T, int C) {
  const size_t n = static_cast<size_t>(B) * static_cast<size_t>(T) * static_cast<size_t>(C);
  if (n == 0) return;
  launch("encoder_forward_kernel", encoder_forward_kernel, elementwise_grid("encoder_forward v1", n), dim3(kBlock), 0,
         out, inp, wte, wpe, B, T, C);
}

namespace {

void encoder_backward_wpe(float* dwpe, const float* dout, int B, int T, int C) {
  if (dwpe == nullptr) return;  // no position table (RoPE models)
  const size_t TC = static_cast<size_t>(T) * static_cast<size_t>(C);
  launch("encoder_backward_wpe_kernel", encoder_backward_wpe_kernel, elementwise_grid("encoder_backward", TC),
         dim3(kBlock), 0, dwpe, dout, B, T, C);
}

}  // namespace

void encoder_backward_v1(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T, int C, int V) {
  if (B <= 0 || T <= 0 || C <= 0 || V <= 0) return;
  const size_t VC = static_cast<size_t>(V) * static_cast<size_t>(C);
  launch("encoder_backward_wte_v1_kernel", encoder_backward_wte_v1_kernel, elementwise_grid("encoder_backward v1", VC),
         dim3(kBlock), 0, dwte, dout, inp, B * T, C, V);
  encoder_backward_wpe(dwpe, dout, B, T, C);
}

void encoder_backward_v2(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T, int C, int V) {
  if (B <= 0 || T <= 0 || C <= 0 || V <= 0) return;
  const dim3 grid(static_cast<unsigned>(V), static_cast<unsigned>(ceil_div(C, kTokenBlock)));  // (tokens, strips)
  launch("encoder_backward_wte_v2_kernel", encoder_backward_wte_v2_kernel, grid, dim3(kTokenBlock), 0, dwte, dout,
         inp, B * T, C);
  encoder_backward_wpe(dwpe, dout, B, T, C);
}

void gelu_backward_v1(float* dinp, const float* dout, const float* inp, size_t n) {
  if (n == 0) return;
  launch("gelu_backward_kernel", gelu_backward_kernel, elementwise_grid("gelu_backward v1", n), dim3(kBlock), 0, dinp,
         dout, inp, n);
}

void gelu_backward_v2(float* dinp, const float* dout, const float* inp, size_t n) {
  if (n == 0) return;
  if (!aligned16(dinp) || !aligned16(dout) || !aligned16(inp)) {
    gelu_backward_v1(dinp, dout, inp, n);
    return;
  }
  // One thread per float4 at most (plus the tail, which the first threads also cover).
  const int items = static_cast<int>(std::min<size_t>(std::max<size_t>(n / 4, 1), INT_MAX));
  launch("gelu_backward_float4_kernel", gelu_backward_float4_kernel, dim3(grid_stride_blocks(items, kBlock)),
         dim3(kBlock), 0, dinp, dout, inp, n);
}

void dropout_forward_v1(float* out, float* mask, const float* inp, size_t n, float p, uint64_t seed) {
  if (!(p >= 0.0f && p < 1.0f)) {
    throw Error("dropout_forward: p = " + std::to_string(p) + " is outside [0, 1): it is the probability of dropping");
  }
  if (n == 0) return;
  const float keep_scale = 1.0f / (1.0f - p);  // nn's F(1) / (F(1) - F(p)) with F = float: exactly 1 for p = 0
  launch("dropout_forward_kernel", dropout_forward_kernel, elementwise_grid("dropout_forward v1", n), dim3(kBlock), 0,
         out, mask, inp, n, p, keep_scale, seed);
}

void multiply_v1(float* out, const float* a, const float* b, size_t n) {
  if (n == 0) return;
  launch("multiply_kernel", multiply_kernel, elementwise_grid("multiply v1", n), dim3(kBlock), 0, out, a, b, n);
}

void add_v1(float* out, const float* a, const float* b, size_t n) {
  if (n == 0) return;
  launch("add_kernel", add_kernel, elementwise_grid("add v1", n), dim3(kBlock), 0, out, a, b, n);
}

void scale_v1(float* x, float s, size_t n) {
  if (n == 0) return;
  launch("scale_kernel", scale_kernel, elementwise_grid("scale v1", n), dim3(kBlock), 0, x, s, n);
}

void crossentropy_loss_v1(float* losses, const float* probs, const int* targets, int N, int V) {
  if (N <= 0 || V <= 0) return;
  launch("crossentropy_loss_kernel", crossentropy_loss_kernel, dim3(static_cast<unsigned>(ceil_div(N, kBlock))),
         dim3(kBlock), 0, losses, probs, targets, N, V);
}

void crossentropy_backward_v1(float* dlogits, const float* probs, const int* targets, int N, int V, float scale) {
  if (N <= 0 || V <= 0) return;
  const size_t n = static_cast<size_t>(N) * static_cast<size_t>(V);
  launch("crossentropy_backward_kernel", crossentropy_backward_kernel, elementwise_grid("crossentropy_backward v1", n),
         dim3(kBlock), 0, dlogits, probs, targets, N, V, scale);
}

void sum_v1(double* out, double* workspace, const float* x, size_t n, bool squares) {
  (void)workspace;  // one block needs no partials
  launch("sum_one_block_kernel", sum_one_block_kernel, dim3(1), dim3(kSumBlock), 0, out, x, n, squares);
}

void sum_v2(double* out, double* workspace, const float* x, size_t n, bool squares) {
  // P depends on n alone: the same partials, added in the same order, on every GPU.
  const size_t wanted = (n + kPerPartial - 1) / kPerPartial;
  const int P = static_cast<int>(std::max<size_t>(1, std::min<size_t>(kSumWorkspaceDoubles, wanted)));
  launch("sum_partials_kernel", sum_partials_kernel, dim3(static_cast<unsigned>(P)), dim3(kPartialBlock), 0, workspace,
         x, n, squares);
  launch("sum_final_kernel", sum_final_kernel, dim3(1), dim3(kSumBlock), 0, out, static_cast<const double*>(workspace),
         P);
}

void add_gpt_ops(Kernels& k) {
  k.encoder_forward = {
      {1, "thread per element", "out = wte[id] + wpe[t], one thread per output float (single version)",
        encoder_forward_v1, {NNLAB_SM_MAXWELL}},
  };
  k.encoder_backward = {
      {1, "thread per (v,c)", "each thread scans all N ids in order, adding dout where the id is its token",
        encoder_backward_v1, {NNLAB_SM_MAXWELL}},
      {2, "block per token", "a block per (token, 128 channels) compacts its token's positions in shared memory, "
                                 "then adds only those rows; same order as v1, bit-identical",
        encoder_backward_v2, {NNLAB_SM_MAXWELL}},
  };
  k.gelu_backward = {
      {1, "thread per element", "one element per thread, 4-byte loads and stores",
        gelu_backward_v1, {NNLAB_SM_MAXWELL}},
      {2, "float4 grid-stride", "16-byte loads and stores, one resident grid, scalar tail; v1 if misaligned",
        gelu_backward_v2, {NNLAB_SM_MAXWELL}},
  };
  k.dropout_forward = {
      {1, "thread per element", "counter-based SplitMix64 hash per element: nn's mask bit for bit (single version)",
        dropout_forward_v1, {NNLAB_SM_MAXWELL}},
  };
  k.multiply = {
      {1, "thread per element", "out = a * b, one thread per element (single version)",
        multiply_v1, {NNLAB_SM_MAXWELL}},
  };
  k.add = {
      {1, "thread per element", "out = a + b, one thread per element; out may alias (single version)",
        add_v1, {NNLAB_SM_MAXWELL}},
  };
  k.crossentropy_loss = {
      {1, "thread per row", "loss = -log probs[target], one thread per row (single version)", crossentropy_loss_v1, {NNLAB_SM_MAXWELL}},
  };
  k.crossentropy_backward = {
      {1, "thread per element", "dlogits = (probs - onehot) * scale, one thread per element (single version)",
        crossentropy_backward_v1, {NNLAB_SM_MAXWELL}},
  };
  k.sum = {
      {1, "one block", "1024 threads, double accumulators, fixed-order block reduction: one SM does it all",
        sum_v1, {NNLAB_SM_MAXWELL}},
      {2, "two-pass partials", "min(1024, n/8192) blocks write double partials, one block adds them in order; "
                                   "independent of the SM count",
        sum_v2, {NNLAB_SM_MAXWELL}},
  };
  k.scale = {
      {1, "thread per element", "x *= s, one thread per element (single version)", scale_v1, {NNLAB_SM_MAXWELL}},
  };
}

}  // namespace kernels::cuda::NNLAB_CUDA_NS
