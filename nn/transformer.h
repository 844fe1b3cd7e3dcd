// nn/transformer.h: the op pairs a GPT needs besides attention (nn/attention.h) and
// softmax + cross-entropy (nn/ops.h): token + position embedding, layer normalisation,
// the linear layer in plain loops, GELU, the residual add and dropout.
//
// Plain loops, templated on the scalar type F (float for the naive GPT backend, double for
// the finite-difference checks). These are THE reference: each checks its arguments and
// calls the v1 rung of its kernels/ ladder (kernels/layernorm.h, encoder.h, linear.h,
// gelu.h, residual.h, dropout.h), the loop the naive GPT backend runs and every faster
// rung (the cpu backend's) is validated against.
//
// Sizes: N rows (N = B * T positions), C channels, OC output channels, V vocabulary.
// The gradient rule is nn/ops.h's: parameter gradients ACCUMULATE, activation gradients
// are ASSIGNED, except layernorm_backward's dinp, which ACCUMULATES: a pre-LN block reads
// the residual stream x through LN(x) and passes x on unchanged, so dL/dx is the sum of
// the gradient flowing down the stream and the one coming back through the LN.
#pragma once

#include <cstdint>

#include "kernels/dropout.h"
#include "kernels/layernorm.h"
#include "nn/rng.h"

namespace nn {

// nn::Error naming the first (b, t) whose token id is outside [0, V): what every encoder
// (loops, threads, GPU) needs checked before it reads a row of wte.
void check_token_ids(const int32_t* inp, int B, int T, int V);
// nn::Error unless p is in [0, 1) (dropout's probability of dropping an element).
void check_dropout_p(float p);

// ---- token + position embedding ---------------------------------------------------------
// inp (B, T) token ids in [0, V), wte (V, C), wpe (>= T, C) -> out (B, T, C):
//   out[b, t, :] = wte[inp[b, t], :] + wpe[t, :]
// nn::Error on a token id outside [0, V).
template <typename F>
void encoder_forward(F* out, const int32_t* inp, const F* wte, const F* wpe, int B, int T, int C, int V);
// dout (B, T, C) -> dwte (V, C), dwpe (>= T, C) ACCUMULATED (rows of tokens not in the
// batch stay untouched).
template <typename F>
void encoder_backward(F* dwte, F* dwpe, const F* dout, const int32_t* inp, int B, int T, int C);

// ---- layer normalisation over the last axis ----------------------------------------------
// inp (N, C), weight, bias (C; nullptr: no bias, nanoGPT's bias=False) -> out (N, C), mean (N), rstd (N):
//   mean = sum(x) / C, var = sum((x - mean)^2) / C (biased, as PyTorch), rstd = 1 / sqrt(var + eps)
//   out = (x - mean) * rstd * weight + bias,  eps = 1e-5 (PyTorch's default)
inline constexpr double kLayernormEps = kernels::kLayernormEps;
template <typename F>
void layernorm_forward(F* out, F* mean, F* rstd, const F* inp, const F* weight, const F* bias, int N, int C);
// dout (N, C) -> dinp (N, C) ACCUMULATED (the residual stream, see above),
// dweight, dbias (C) accumulated (dbias skipped if nullptr). With xhat = (x - mean) * rstd, g = dout * weight:
//   dinp += rstd * (g - mean(g) - xhat * mean(g * xhat))
template <typename F>
void layernorm_backward(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight,
                        const F* mean, const F* rstd, int N, int C);

// ---- linear layer in plain loops ---------------------------------------------------------
// inp (N, C), weight (OC, C) (PyTorch's nn.Linear layout), bias (OC) or nullptr -> out (N, OC):
//   out = inp weight^T + bias
// nn::linear_forward (nn/ops.h) is the same op with float routed to kernels::sgemm; these
// are the loops for every F, what the naive backend runs.
template <typename F>
void linear_forward_loops(F* out, const F* inp, const F* weight, const F* bias, int N, int C, int OC);
// dout (N, OC) -> dinp (N, C) ASSIGNED (skipped if nullptr), dweight (OC, C) and dbias (OC)
// (skipped if nullptr) accumulated.
template <typename F>
void linear_backward_loops(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight,
                           int N, int C, int OC);

// ---- GELU, the tanh approximation (GPT-2's, PyTorch's approximate='tanh') ---------------
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
template <typename F>
void gelu_forward(F* out, const F* inp, int64_t n);
// dinp = dout * gelu'(inp), ASSIGNED
template <typename F>
void gelu_backward(F* dinp, const F* dout, const F* inp, int64_t n);

// ---- residual add -------------------------------------------------------------------------
// out = a + b (n elements). The backward is the identity into both inputs: callers pass the
// same gradient buffer on (see gpt/model.cpp), so there is no residual_backward.
template <typename F>
void residual_forward(F* out, const F* a, const F* b, int64_t n);

// ---- dropout (inverted) -------------------------------------------------------------------
// The keep/drop decision for element i is a pure function of (seed, i), so any backend
// (loops, SIMD, CUDA) draws the same mask for the same seed without sharing an RNG:
//   u_i = dropout_uniform(seed, i) in [0, 1);  mask_i = u_i < p ? 0 : 1 / (1 - p)
//   out_i = inp_i * mask_i
// p in [0, 1) (nn::Error otherwise); p = 0 gives mask 1 everywhere and out == inp exactly.
// out may alias inp. mask (n) is saved for the backward.
//
// dropout_uniform, bit for bit (all arithmetic on uint64_t, wrapping mod 2^64): output
// number i of SplitMix64 started at state `seed`, i.e.
//   z  = seed + (i + 1) * 0x9E3779B97F4A7C15
//   z  = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
//   z  = (z ^ (z >> 27)) * 0x94D049BB133111EB
//   z  = z ^ (z >> 31)
//   u  = (float)(uint32_t)(z >> 40) * 0x1p-24f      the top 24 bits: exact, in [0, 1)
// The comparison u < p is done in float; the kept scale is F(1) / (F(1) - F(p)) in the
// op's type F.
// One definition for every backend's loop: kernels/dropout.h (SplitMix64: kernels/splitmix64.h).
using kernels::dropout_uniform;
template <typename F>
void dropout_forward(F* out, F* mask, const F* inp, int64_t n, float p, uint64_t seed);
// dinp = dout * mask, ASSIGNED (dinp may alias dout)
template <typename F>
void dropout_backward(F* dinp, const F* dout, const F* mask, int64_t n);

}  // namespace nn
