// kernels/cuda/device.h: the CUDA kernels seen from plain C++ (no CUDA types; C++17, as
// nvcc compiles it too), so the
// tests, the bench, lesson 09 and the GPT trainer drive the GPU and the emulator with the
// same code:
//
//   Device& dev = kernels::cuda::default_device();   // the GPU if there is one, else the emulator
//   Array<float> a(dev, n);  a.upload(host);          // cudaMalloc + cudaMemcpy (kernels/memory.h)
//   dev.kernels().matmul[2].fn(c, a, b, M, N, K, {});  // version v3 of the matmul ladder
//
// Every op has numbered versions (v1 naive ... vN fused/tiled), each with what it changes
// and the compute capability it needs; the .cu file of the op lists them in its header
// comment. All pointers are device pointers; all matrices row-major; every launcher runs on
// the default stream and returns without waiting (Device::synchronize waits).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/memory.h"
#include "kernels/versions.h"
#include "kernels/weight_format.h"

namespace kernels::cuda {

// Every CUDA failure we report: the message says what was being done and why it failed
// (a kernel misusing the emulator: which kernel, block and thread, and what it did).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---- the ops: one launcher signature each ---------------------------------------------

// C (M,N) = op(A) . op(B) (+ bias[col] when bias is not null), or C += that (accumulate).
// op(A) = A stored (M,K), or with trans_a A stored (K,M) and read transposed; op(B) = B
// stored (K,N), or with trans_b B stored (N,K). Lesson 09's product is the plain one,
// C (M,N) = A (M,K) . B (K,N) (MatmulArgs{}); the GPT's linear layer uses three forms:
//   forward   out (N,OC)  = inp (N,C) . W (OC,C)^T + b     M=N, N=OC, K=C   trans_b
//   dinp      dinp (N,C)  = dout (N,OC) . W (OC,C)         M=N, N=C, K=OC   plain
//   dweight   dW (OC,C)  += dout (N,OC)^T . inp (N,C)      M=OC, N=C, K=N   trans_a, accumulate
// A version marked Requirements::plain_only computes the plain form alone and throws Error for
// the others. Every version gives the same result run after run (no atomics across K).
struct MatmulArgs {
  bool trans_a = false;
  bool trans_b = false;
  bool accumulate = false;      // C += result (bias included) instead of C = result
  const float* bias = nullptr;  // (N), added to every row
};
using MatmulFn = void (*)(float* C, const float* A, const float* B, int M, int N, int K, MatmulArgs args);
// dbias (OC) += the column sums of dout (N,OC), summed in a fixed order (deterministic): the
// bias gradient of the linear layer (kernels/cuda/matmul.cu).
using BiasBackwardFn = void (*)(float* dbias, const float* dout, int N, int OC);
// out = cos(cos(in)), n floats: the fusion demo (two kernels vs one).
using Cos2Fn = void (*)(float* out, const float* in, int n);
// out (rows, cols) = softmax of each row of in.
using SoftmaxFn = void (*)(float* out, const float* in, int rows, int cols);
// out (N,C) = (inp - mean) * rstd * weight + bias over each row; mean, rstd (N) are saved
// for the backward pass.
using LayerNormForwardFn = void (*)(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                                    const float* bias, int N, int C);
// dinp (N,C), dweight (C), dbias (C) += the gradients (all three accumulate, as llm.c).
using LayerNormBackwardFn = void (*)(float* dinp, float* dweight, float* dbias, const float* dout,
                                     const float* inp, const float* weight, const float* mean, const float* rstd,
                                     int N, int C);
// residual (N,C) = a + b; out, mean, rstd = layernorm(residual) (the transformer block's
// residual add followed by the next layernorm).
using ResidualLayerNormFn = void (*)(float* residual, float* out, float* mean, float* rstd, const float* a,
                                     const float* b, const float* weight, const float* bias, int N, int C);
// out = gelu(inp) (tanh approximation), n floats.
using GeluFn = void (*)(float* out, const float* inp, int n);
// out (rows, cols) = gelu(inp + bias[col]).
using BiasGeluFn = void (*)(float* out, const float* inp, const float* bias, int rows, int cols);
// Per row n of logits (N,V): losses[n] = -log softmax(logits[n])[targets[n]], and
// dlogits (N,V) = (softmax(logits[n]) - onehot(targets[n])) / N (the gradient of the mean loss).
using CrossEntropyFn = void (*)(float* losses, float* dlogits, const float* logits, const int* targets, int N, int V);
// One AdamW step over n parameters (PyTorch's formula; t counts from 1):
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr (m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + wd p)
struct AdamWArgs {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  int t = 1;
};
using AdamWFn = void (*)(float* params, float* m, float* v, const float* grads, size_t n, AdamWArgs args);
// Causal self-attention forward: qkv (B,T,3C) holds q, k, v side by side (as the GPT's
// qkv projection writes them), NH heads of C/NH; out (B,T,C). workspace: the bytes
// OpVersion::workspace says (the unfused versions v1, v2 leave the softmax probabilities there,
// row (b,h,t) at ((b*NH+h)*T+t)*T, entries t2 <= t: what AttentionBackwardFn reads as att;
// the fused one needs none: that is the O(T^2) vs O(T) memory).
using AttentionFn = void (*)(float* out, float* workspace, const float* qkv, int B, int T, int C, int NH);
using WorkspaceFn = size_t (*)(int B, int T, int C, int NH);
// ---- the GPT's ops (what gpt/backend_cuda.cpp calls; issue 7) -----------------------------
// Causal self-attention backward (nn::attention_backward): from dout (B,T,C), qkv (B,T,3C)
// and att (B,NH,T,T), the probabilities the unfused forward versions (attention v1, v2)
// leave in their workspace (entries t2 <= t; the rest is never read), writes dqkv (B,T,3C)
// (assigned). workspace: the bytes OpVersion::workspace says (dpreatt / datt scratch).
using AttentionBackwardFn = void (*)(float* dqkv, float* workspace, const float* dout, const float* qkv,
                                     const float* att, int B, int T, int C, int NH);
// Causal self-attention with grouped-query heads, the flash way (kernels/flash_attention.h
// states the maths and the layout; kernels/cuda/flash_attention.cu the kernels): qkv
// (B,T,C+2*NKV*hs) = [q | k | v] per position (with NKV == NH, attention's (B,T,3C)), NH query
// heads of hs = C/NH, query head h reading KV head h / (NH/NKV); out (B,T,C) and lse (B,NH,T),
// the log-sum-exp of each query's scores: all the backward needs besides q, k, v and out. No
// workspace: no (T,T) matrix anywhere. The backward's dqkv (qkv's layout) is assigned.
using FlashAttentionFn = void (*)(float* out, float* lse, const float* qkv, int B, int T, int C, int NH, int NKV);
using FlashAttentionBackwardFn = void (*)(float* dqkv, const float* dout, const float* qkv, const float* out,
                                          const float* lse, int B, int T, int C, int NH, int NKV);
// out (B,T,C) = wte[inp[b,t]] + wpe[t]   (nn::encoder_forward; ids already checked < V)
using EncoderForwardFn = void (*)(float* out, const int* inp, const float* wte, const float* wpe, int B, int T,
                                  int C);
// dwte (V,C) += for each token id, the sum of dout over the positions holding it;
// dwpe (T,C) += the sum of dout over the batch. Fixed summation order (deterministic).
using EncoderBackwardFn = void (*)(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T,
                                   int C, int V);
// dinp = dout * gelu'(inp) (tanh approximation; nn::gelu_backward), n floats, assigned.
using GeluBackwardFn = void (*)(float* dinp, const float* dout, const float* inp, size_t n);
// out = inp * mask with mask_i = nn::dropout_uniform(seed, i) < p ? 0 : 1 / (1 - p): bit for
// bit the mask of nn::dropout_forward (nn/transformer.h); out may alias inp.
using DropoutForwardFn = void (*)(float* out, float* mask, const float* inp, size_t n, float p, uint64_t seed);
// out = a * b elementwise (the dropout backward: dinp = dout * mask).
using MultiplyFn = void (*)(float* out, const float* a, const float* b, size_t n);
// out = a + b (the residual add; out may alias a or b).
using AddFn = void (*)(float* out, const float* a, const float* b, size_t n);
// losses (N) = -log probs[n, targets[n]], from the probabilities a softmax version wrote.
using CrossEntropyLossFn = void (*)(float* losses, const float* probs, const int* targets, int N, int V);
// dlogits (N,V) = (probs - onehot(targets)) * scale, assigned (scale = dloss / N).
using CrossEntropyBackwardFn = void (*)(float* dlogits, const float* probs, const int* targets, int N, int V,
                                        float scale);
// *out = sum of x[i] (or of x[i]^2 with squares), accumulated in double in a fixed order
// whatever the GPU (deterministic). workspace: at least kSumWorkspaceDoubles doubles.
inline constexpr size_t kSumWorkspaceDoubles = 1024;
using SumFn = void (*)(double* out, double* workspace, const float* x, size_t n, bool squares);
// x *= s, n floats.
using ScaleFn = void (*)(float* x, float s, size_t n);

// ---- the modern (Llama) block's ops (issue 21): the host versions are kernels/rmsnorm.h,
// rope.h, swiglu.h, with the same meanings and layouts ------------------------------------
// out (N,C) = inp * rstd * weight, rstd (N) = 1 / sqrt(mean(inp^2) + eps), per row.
using RmsnormForwardFn = void (*)(float* out, float* rstd, const float* inp, const float* weight, int N, int C,
                                  float eps);
// dinp (N,C) += rstd (g - xhat mean(g xhat)), g = dout * weight, xhat = inp * rstd;
// dweight (C) += sum over rows of dout * xhat, rows in order (deterministic). Both accumulate.
using RmsnormBackwardFn = void (*)(float* dinp, float* dweight, const float* dout, const float* inp,
                                   const float* weight, const float* rstd, int N, int C);
// The rotation of each head's pairs (i, i + hs/2) by (pos0 + t) freq_i (forward), or by its
// negation (backward: dinp from dout); B*T token rows `stride` floats apart, NH heads of hs from
// each row's start; cos, sin (>= pos0 + T, hs/2) device tables from kernels::rope_tables. out may
// be inp. Assigned.
using RopeFn = void (*)(float* out, const float* inp, const float* cos, const float* sin, int B, int T, int NH, int hs,
                        int stride, int pos0);
// out (rows,H) = silu(gate) * up, gate and up rows of H floats `ld` apart (ld = 2H: the halves
// of one fused gate_up projection).
using SwigluForwardFn = void (*)(float* out, const float* gate, const float* up, int rows, int H, int ld);
// dgate = dout * up * silu'(gate), dup = dout * silu(gate), rows `ld` apart, assigned.
using SwigluBackwardFn = void (*)(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                  int rows, int H, int ld);

// ---- inference (lesson 10, issue 8): the host versions are kernels/decode.h ------------
// y (n, w.rows) = x (n, w.cols) W^T + bias (may be null), W packed (kernels/weight_format.h)
// and dequantised on the fly; w's pointers are device pointers. y assigned.
using MatvecFn = void (*)(float* y, const float* x, const kernels::WeightsView& w, const float* bias, int n);
// Attention of n new positions over a KV cache (kernels::attention_decode's meaning, same
// layouts, grouped-query heads: KV = NKV * hs): writes k, v of qkv (B, n, C + 2 KV) into
// kcache, vcache (B, maxT, KV) at [pos, pos+n), then out (B, n, C) = each new query's causal
// attention over positions 0 .. pos+i, query head h reading KV head h / (NH / NKV).
using AttentionDecodeFn = void (*)(float* out, float* kcache, float* vcache, const float* qkv, int B, int n,
                                   int pos, int C, int NH, int NKV, int maxT);
// Not an op: the FP32 FLOP ceiling (kernels/cuda/ceilings.cu). `blocks` x `threads` threads
// each run `iters` rounds of independent FMA chains and write one float to out; returns the
// FLOPs launched.
using FmaPeakFn = double (*)(float* out, int blocks, int threads, int iters);

// ---- integer inference (lesson 15, issue 25): the host versions are kernels/int8_gemm.h ----
// C (M,N) int32 = A (M,K) int8 . B (N,K)^T int8, both row-major with K contiguous (the GPT's
// "NT" product: activations times a Linear weight as stored). Exact: every version gives
// kernels::int8_gemm_v1's int32s bit for bit. C assigned.
using Int8GemmFn = void (*)(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K);

// ---- the versions of an op ---------------------------------------------------------------

// The oldest GPU a version runs on, as a compute capability (10 * major + minor), set by the
// newest hardware feature it uses. Requirements::min_sm (kernels/versions.h) holds one of these, and a .cu file
// guards code that needs more than NNLAB_SM_MAXWELL with the same name
// (`#if NNLAB_CUDA_SM_AT_LEAST(NNLAB_SM_AMPERE)`, kernels/cuda/cuda.h): the version's stated
// minimum and what is compiled out for older GPUs are written with one name.
// scripts/check_old_gpus.py compiles every kernel for compute capability 5.0, 5.2 and 5.3
// with CUDA 12, and fails where a guard compiles out code for a GPU its name says can run it.
// (Macros, not constants: the guards are preprocessor conditions.)
#define NNLAB_SM_MAXWELL 50  // the oldest CUDA 12 compiles for (CUDA 13: 7.5). fp32 arithmetic, shared
                             // memory, __syncthreads, the _sync shuffles and ballots (3.0 hardware),
                             // float atomicAdd (2.0): everything the fp32 versions use
#define NNLAB_SM_PASCAL 61   // __dp4a: a 4-way int8 dot product into int32 per instruction (GTX 10x0: 6.1)
#define NNLAB_SM_XAVIER 72   // int8 tensor cores through wmma m16n16k16 (Jetson AGX Xavier 7.2, Turing 7.5 on)
#define NNLAB_SM_AMPERE 80   // tensor cores through wmma with TF32 (m16n16k8) or BF16 (m16n16k16) inputs

// A version of a CUDA op is a kernels::OpVersion<Fn> (kernels/versions.h), the type the CPU
// ladders use: number, name, summary, the function, then Requirements{min_sm, plain_only}
// (min_sm one of the NNLAB_SM_* above, never 0 here) and, for attention, the workspace
// function. Its id "v3" comes from the number.

// Every op's ladder, in lesson order. One table per build (GPU, emulator).
struct Kernels {
  std::vector<OpVersion<MatmulFn>> matmul;
  std::vector<OpVersion<Cos2Fn>> cos2;
  std::vector<OpVersion<SoftmaxFn>> softmax;
  std::vector<OpVersion<LayerNormForwardFn>> layernorm_forward;
  std::vector<OpVersion<LayerNormBackwardFn>> layernorm_backward;
  std::vector<OpVersion<ResidualLayerNormFn>> residual_layernorm;
  std::vector<OpVersion<GeluFn>> gelu;
  std::vector<OpVersion<BiasGeluFn>> bias_gelu;
  std::vector<OpVersion<CrossEntropyFn>> crossentropy;
  std::vector<OpVersion<AdamWFn>> adamw;
  std::vector<OpVersion<AttentionFn, WorkspaceFn>> attention;
  std::vector<OpVersion<BiasBackwardFn>> bias_backward;  // matmul.cu: the linear layer's dbias
  // the GPT's ops (issue 7)
  std::vector<OpVersion<AttentionBackwardFn, WorkspaceFn>> attention_backward;
  std::vector<OpVersion<FlashAttentionFn>> flash_attention;  // flash_attention.cu (issue 21)
  std::vector<OpVersion<FlashAttentionBackwardFn>> flash_attention_backward;
  std::vector<OpVersion<EncoderForwardFn>> encoder_forward;
  std::vector<OpVersion<EncoderBackwardFn>> encoder_backward;
  std::vector<OpVersion<GeluBackwardFn>> gelu_backward;
  std::vector<OpVersion<DropoutForwardFn>> dropout_forward;
  std::vector<OpVersion<MultiplyFn>> multiply;
  std::vector<OpVersion<AddFn>> add;
  std::vector<OpVersion<CrossEntropyLossFn>> crossentropy_loss;
  std::vector<OpVersion<CrossEntropyBackwardFn>> crossentropy_backward;
  std::vector<OpVersion<SumFn>> sum;
  std::vector<OpVersion<ScaleFn>> scale;
  // the modern (Llama) block (issue 21)
  std::vector<OpVersion<RmsnormForwardFn>> rmsnorm_forward;
  std::vector<OpVersion<RmsnormBackwardFn>> rmsnorm_backward;
  std::vector<OpVersion<RopeFn>> rope_forward;
  std::vector<OpVersion<RopeFn>> rope_backward;
  std::vector<OpVersion<SwigluForwardFn>> swiglu_forward;
  std::vector<OpVersion<SwigluBackwardFn>> swiglu_backward;
  // inference (lesson 10)
  std::vector<OpVersion<MatvecFn>> matvec;
  std::vector<OpVersion<AttentionDecodeFn>> attention_decode;
  // integer inference (lesson 15): int8.cu
  std::vector<OpVersion<Int8GemmFn>> int8_gemm;
  FmaPeakFn fma_peak = nullptr;  // the GPU harness's FLOP ceiling (kernels/cuda/bench/run.h)
};

// ---- a device: the GPU or the emulator ----------------------------------------------------

struct DeviceInfo {
  std::string name;      // "NVIDIA H100 80GB HBM3" or "nnlab CUDA emulator (on the CPU)"
  bool emulated = false;
  int sm = 0;            // compute capability, 10 * major + minor
  int multiprocessors = 0;
  size_t memory_bytes = 0;
  size_t l2_bytes = 0;
  size_t smem_per_block_optin = 0;
  std::string runtime;   // "CUDA runtime 12.4, driver 12.6" or "emulator"
};

// A device is a kernels::Memory (allocate, release, to_host, from_host, copy, fill), so
// kernels::Array<T>(dev, n) is a device buffer and the GPT trainer keeps its model in it.
// allocate throws Error (an OutOfMemory: kernels/cuda/cuda.h) with the request and the free
// memory when out of memory; fresh memory is the GPU's garbage or, in the emulator, NaN bytes.
class Device : public kernels::Memory {
 public:
  virtual const DeviceInfo& info() const = 0;
  virtual const Kernels& kernels() const = 0;
  bool is_host() const override { return false; }
  std::string where() const override { return "the device memory of " + info().name; }
  // Waits for everything launched so far; throws Error if a kernel failed.
  virtual void synchronize() = 0;
  // Milliseconds `work` takes on the device, between two events around it.
  virtual double time_ms(const std::function<void()>& work) = 0;
  // Evicts the L2 cache (writes a buffer twice its size), so the next run starts from DRAM.
  virtual void flush_l2() = 0;
  // Device memory in use right now (cudaMemGetInfo on a GPU: every process's; the
  // emulator: its own allocations).
  virtual size_t memory_in_use() const = 0;
};

// The emulator: always available.
Device& emulator();
// The first GPU, or nullptr with the reason in *why_not ("built without nvcc", "no CUDA
// device: ...").
Device* gpu(std::string* why_not = nullptr);
// NNLAB_DEVICE=emu or =gpu chooses; otherwise the GPU when there is one, else the emulator.
// NNLAB_DEVICE=gpu without a GPU throws Error saying why.
Device& default_device();

}  // namespace kernels::cuda
