// kernels/dropout.h: inverted dropout, forward and backward.
//
// The keep/drop decision for element i is a pure function of (seed, i), so any version
// (loops, threads, CUDA: kernels/cuda/gpt_ops.cu) draws the same mask for the same seed
// without sharing an RNG:
//   u_i = dropout_uniform(seed, i) in [0, 1);  mask_i = u_i < p ? 0 : 1 / (1 - p)
//   out_i = inp_i * mask_i;   backward: dinp_i = dout_i * mask_i (ASSIGNED)
// p in [0, 1) (the caller checks: nn::dropout_forward, the backends); p = 0 gives mask 1
// everywhere and out == inp exactly. out may alias inp; dinp may alias dout.
//
// dropout_uniform, bit for bit (all arithmetic on uint64_t, wrapping mod 2^64): output
// number i of SplitMix64 started at state `seed` (kernels/splitmix64.h), then
//   u  = (float)(uint32_t)(z >> 40) * 0x1p-24f      the top 24 bits: exact, in [0, 1)
// The comparison u < p is done in float; the kept scale is F(1) / (F(1) - F(p)) in the
// op's type F.
//
// Versions (code in kernels/dropout.cpp; forward 12 B/element: read inp, write mask and out):
//   v1  the plain loops. The reference (nn::dropout_forward / dropout_backward, the naive
//       GPT backend).
//   v2  the same loops across OpenMP threads (each element's mask depends on i alone, so
//       any split gives the same bits).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/splitmix64.h"
#include "kernels/versions.h"

namespace kernels {

inline float dropout_uniform(uint64_t seed, uint64_t i) {
  // the top 24 bits, an integer in [0, 2^24), times 2^-24: exact in float, always < 1
  return static_cast<float>(static_cast<uint32_t>(splitmix64(seed, i) >> 40)) * 0x1.0p-24f;
}

// out, mask, inp (n)
using DropoutFn = void (*)(float* out, float* mask, const float* inp, int64_t n, float p, uint64_t seed);
// dinp, dout, mask (n)
using DropoutBackwardFn = void (*)(float* dinp, const float* dout, const float* mask, int64_t n);

template <typename F>
void dropout_forward_v1(F* out, F* mask, const F* inp, int64_t n, float p, uint64_t seed);
void dropout_forward_v2(float* out, float* mask, const float* inp, int64_t n, float p, uint64_t seed);
template <typename F>
void dropout_backward_v1(F* dinp, const F* dout, const F* mask, int64_t n);
void dropout_backward_v2(float* dinp, const float* dout, const float* mask, int64_t n);

const std::vector<OpVersion<DropoutFn>>& dropout_versions();
const OpVersion<DropoutFn>& dropout_version(const std::string& number_or_name);
const std::vector<OpVersion<DropoutBackwardFn>>& dropout_backward_versions();
const OpVersion<DropoutBackwardFn>& dropout_backward_version(const std::string& number_or_name);

}  // namespace kernels
