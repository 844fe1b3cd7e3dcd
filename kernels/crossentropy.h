// kernels/crossentropy.h: softmax + cross-entropy over a batch of rows, forward and backward.
//
//   logits (N,V), targets (N) in [0, V) -> probs (N,V) = softmax(logits), losses (N):
//     loss_n = -log p[n, target_n] = logsumexp(logits_n) - logits[n, target_n]
//   returns the mean loss (summed in double, rows in order).
//   backward: dlogits = (probs - onehot(target)) * dloss / N, ASSIGNED
// The loss is computed from the logits, not from log(p): a probability that underflows to
// 0 gives a large finite loss instead of inf. Targets must be in [0, V): the callers check
// them (nn::check_targets) before a version reads a row.
//
// Versions (code in kernels/crossentropy.cpp):
//   v1  plain loops: the softmax (max, exp with std::exp, sum in F, divide), then the
//       logsumexp again for the loss. The reference (nn::softmax_cross_entropy_forward,
//       the naive GPT backend).
//   v2  SIMD rows with poly_exp: max, then exp stored into probs and summed, then one
//       multiply by 1 / sum; the loss from the same max and sum (one exp per element, not
//       v1's two); rows across OpenMP threads.
//   backward v1  plain loops.   backward v2  rows across threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/versions.h"

namespace kernels {

using CrossentropyFn = float (*)(float* probs, float* losses, const float* logits, const int32_t* targets, int N,
                                 int V);
using CrossentropyBackwardFn = void (*)(float* dlogits, const float* probs, const int32_t* targets, int N, int V,
                                        float dloss);

template <typename F>
F crossentropy_forward_v1(F* probs, F* losses, const F* logits, const int32_t* targets, int N, int V);
float crossentropy_forward_v2(float* probs, float* losses, const float* logits, const int32_t* targets, int N,
                              int V);
template <typename F>
void crossentropy_backward_v1(F* dlogits, const F* probs, const int32_t* targets, int N, int V, F dloss);
void crossentropy_backward_v2(float* dlogits, const float* probs, const int32_t* targets, int N, int V,
                              float dloss);

const std::vector<OpVersion<CrossentropyFn>>& crossentropy_versions();
const OpVersion<CrossentropyFn>& crossentropy_version(const std::string& number_or_name);
const std::vector<OpVersion<CrossentropyBackwardFn>>& crossentropy_backward_versions();
const OpVersion<CrossentropyBackwardFn>& crossentropy_backward_version(const std::string& number_or_name);

}  // namespace kernels
