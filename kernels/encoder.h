// kernels/encoder.h: a GPT's token + position embedding, forward and backward.
//
//   inp (B,T) token ids in [0, V), wte (V,C), wpe (>= T,C) -> out (B,T,C):
//     out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]
//   backward: dwte (V,C), dwpe (>= T,C) ACCUMULATED (parameter gradients); rows of tokens
//   not in the batch stay untouched.
// wpe (and dwpe) may be nullptr: a model without a position table (RoPE rotates q and k
// instead: lesson 11's llama), out = wte[inp] alone.
// The ids must be in [0, V): the callers check them (nn::check_token_ids) before a
// version reads a row.
//
// Versions (code in kernels/encoder.cpp):
//   v1  plain loops over (b, t). The reference (nn::encoder_forward / encoder_backward,
//       the naive GPT backend).
//   v2  OpenMP over rows; the backward sums dwpe per position (one thread per t) and dwte
//       per token id after a stable counting sort of the positions by id (one thread per
//       id, its positions in order): v1's order of adds, without shared writes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/versions.h"

namespace kernels {

using EncoderFn = void (*)(float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T,
                           int C);
using EncoderBackwardFn = void (*)(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B,
                                   int T, int C);

template <typename F>
void encoder_forward_v1(F* out, const int32_t* inp, const F* wte, const F* wpe, int B, int T, int C);
void encoder_forward_v2(float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T,
                        int C);
template <typename F>
void encoder_backward_v1(F* dwte, F* dwpe, const F* dout, const int32_t* inp, int B, int T, int C);
void encoder_backward_v2(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T, int C);

const std::vector<OpVersion<EncoderFn>>& encoder_versions();
const OpVersion<EncoderFn>& encoder_version(const std::string& number_or_name);
const std::vector<OpVersion<EncoderBackwardFn>>& encoder_backward_versions();
const OpVersion<EncoderBackwardFn>& encoder_backward_version(const std::string& number_or_name);

}  // namespace kernels
