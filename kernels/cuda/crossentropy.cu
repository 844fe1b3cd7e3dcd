// kernels/cuda/crossentropy.cu: the GPT's loss and its gradient, per row n of logits (N,V):
//
//   losses[n]     = -log softmax(logits[n])[t]  =  log sum_v exp(x_v - max) + max - x_t
//   dlogits[n, v] = (softmax(logits[n])_v - [v == t]) / N     (the gradient of the mean loss)
//
// with x = logits[n], t = targets[n]. Like softmax (kernels/cuda/softmax.cu), about one exp
// per element against 12-20 bytes moved: memory-bound. The ladder is the fusion lesson on a
// row op: the unfused version writes the probabilities out and reads them back twice.
//
// Versions (bytes per element of (N,V) as kernels/cuda/bench/crossentropy.cpp counts them;
// figures: not yet measured on a GPU):
//   v1 unfused  three kernels, as three separate ops would run: a softmax (one block per row,
//               online max and sum: reads logits twice, writes the probabilities into
//               dlogits), a loss kernel (one thread per row: -log of the target's
//               probability), a backward kernel (one thread per element, in place:
//               dlogits = (probs - onehot) / N, reading and writing all of it again):
//               20 B/element. The loss also comes out of a float probability, so a target
//               whose probability underflows to 0 gets an infinite loss.
//   v2 fused    one block per row does all three: online max and sum over the logits, the
//               loss from the target's logit in log-sum-exp form (finite whatever the
//               probabilities), then one pass writing dlogits: reads logits twice, writes
//               once, 12 B/element. Attacks v1's round trip of the probabilities.
// A target outside [0, V) gives a NaN loss and no one-hot term (the kernels cannot throw;
// the NaN shows in the mean loss), never a read out of bounds.
//
// Oldest GPU: compute capability 5.0 for both versions (NNLAB_SM_MAXWELL: shared memory and
// _sync shuffles), compile-checked for 5.0, 5.2 and 5.3 (scripts/check_old_gpus.py).
#include <cfloat>
#include <climits>
#include <string>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace kernels::cuda::NNLAB_CUDA_NS {

namespace {

// The online (max, sum) pair and block_merge: kernels/cuda/common.cuh.

__device__ __forceinline__ float quiet_nan() { return __int_as_float(0x7fc00000); }

// ---- v1: softmax, loss, backward as three kernels -------------------------------------------

// probs[n, :] = softmax(logits[n, :]), one block per row.
__global__ void ce_softmax_kernel(float* probs, const float* logits, int V) {
  const size_t row = blockIdx.x;
  const int tid = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  const float* x = logits + row * static_cast<size_t>(V);  // (V)
  float* p = probs + row * static_cast<size_t>(V);
  float m = -FLT_MAX;
  float s = 0.0f;
  for (int v = tid; v < V; v += threads) online_add(m, s, x[v]);
  block_merge(m, s);
  const float inv = 1.0f / s;
  for (int v = tid; v < V; v += threads) p[v] = expf(x[v] - m) * inv;
}

// losses[n] = -log probs[n, t], one thread per row.
__global__ void ce_loss_kernel(float* losses, const float* probs, const int* targets, int N, int V) {
  const int n = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (n >= N) return;
  const int t = targets[n];
  if (t < 0 || t >= V) {
    losses[n] = quiet_nan();
    return;
  }
  losses[n] = -logf(probs[static_cast<size_t>(n) * static_cast<size_t>(V) + static_cast<size_t>(t)]);
}

// dlogits = (probs - onehot) / N in place, one thread per element of (N,V) (N*V < 2^31:
// the launcher checks).
__global__ void ce_backward_kernel(float* dlogits, const int* targets, int N, int V) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= N * V) return;
  const int n = i / V;  // row
  const int v = i % V;  // column
  const float onehot = v == targets[n] ? 1.0f : 0.0f;
  const float inv_n = 1.0f / static_cast<float>(N);
  dlogits[i] = (dlogits[i] - onehot) * inv_n;
}

// ---- v2: fused, one block per row -----------------------------------------------------------

__global__ void ce_fused_kernel(float* losses, float* dlogits, const float* logits, const int* targets, int N,
                                int V) {
  const int row = static_cast<int>(blockIdx.x);
  const int tid = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  const float* x = logits + static_cast<size_t>(row) * static_cast<size_t>(V);  // (V)
  float* dx = dlogits + static_cast<size_t>(row) * static_cast<size_t>(V);
  const int t = targets[row];  // every thread reads the same word: one broadcast load
  float m = -FLT_MAX;
  float s = 0.0f;
  for (int v = tid; v < V; v += threads) online_add(m, s, x[v]);
  block_merge(m, s);
  // loss = -log(exp(x_t - m) / s) = log s + m - x_t
  if (tid == 0) losses[row] = (t >= 0 && t < V) ? logf(s) + m - x[t] : quiet_nan();
  // dlogits_v = (exp(x_v - m) / s - [v == t]) / N
  const float inv = 1.0f / s;
  const float inv_n = 1.0f / static_cast<float>(N);
  for (int v = tid; v < V; v += threads) {
    const float p = expf(x[v] - m) * inv;
    dx[v] = (p - (v == t ? 1.0f : 0.0f)) * inv_n;
  }
}

}  // namespace

// ---- launchers ------------------------------------------------------------------------------

void crossentropy_v1(float* losses, float* dlogits, const float* logits, const int* targets, int N, int V) {
  if (N <= 0 || V <= 0) return;
  if (static_cast<long long>(N) * V > INT_MAX) {
    throw Error("crossentropy v1: N*V = " + std::to_string(static_cast<long long>(N) * V) +
                " elements; its backward kernel indexes them with an int (at most 2^31 - 1)");
  }
  const int row_block = 256;  // 8 warps per row
  launch("ce_softmax_kernel", ce_softmax_kernel, dim3(N), dim3(row_block), 0, dlogits, logits, V);
  const int block = 256;
  launch("ce_loss_kernel", ce_loss_kernel, dim3(ceil_div(N, block)), dim3(block), 0, losses, dlogits, targets, N, V);
  launch("ce_backward_kernel", ce_backward_kernel, dim3(ceil_div(N * V, block)), dim3(block), 0, dlogits, targets,
         N, V);
}

void crossentropy_v2(float* losses, float* dlogits, const float* logits, const int* targets, int N, int V) {
  if (N <= 0 || V <= 0) return;
  const int block = 256;
  launch("ce_fused_kernel", ce_fused_kernel, dim3(N), dim3(block), 0, losses, dlogits, logits, targets, N, V);
}

void add_crossentropy(Kernels& k) {
  k.crossentropy = {
      {1, "unfused", "softmax, loss, backward as three kernels: probabilities round-trip memory, 20 B/element",
        crossentropy_v1, {NNLAB_SM_MAXWELL}},
      {2, "fused", "one block per row: online max/sum, log-sum-exp loss, one dlogits pass: 12 B/element",
        crossentropy_v2, {NNLAB_SM_MAXWELL}},
  };
}

}  // namespace kernels::cuda::NNLAB_CUDA_NS
