// kernels/linear.h: the linear layer of a GPT (PyTorch's nn.Linear), forward and backward,
// and the forward fused with the GELU that follows it in the MLP.
//
//   inp (N,C), weight (OC,C), bias (OC) or nullptr -> out (N,OC) = inp weight^T + bias
//   backward: dinp (N,C) = dout weight, ASSIGNED (skipped if nullptr);
//             dweight (OC,C) += dout^T inp, dbias (OC) += column sums of dout (skipped if
//             nullptr): parameter gradients accumulate.
//   linear_gelu: pre = inp weight^T + bias (kept for the backward), out = gelu(pre).
// The products are kernels/matmul.h's sgemm ladder (lesson 03); this file is how the GPT
// trainer calls it.
//
// Versions (code in kernels/linear.cpp):
//   v1  plain loops, one dot product per output (nn::linear_forward_loops /
//       linear_backward_loops, the naive GPT backend). The reference.
//   v2  kernels::sgemm (packed panels, SIMD micro-kernel, OpenMP over rows of C): the
//       forward adds the bias in the sgemm's write-back (sgemm_bias: the bits of writing the
//       bias into out first and the sgemm adding onto it with beta = 1, one pass fewer); the
//       backward, on two threads, runs its two products side by side, one per thread (each
//       element computed by the same micro-kernel sequence either way: the same bits), and
//       sums dbias by columns (on the dinp product's thread), each column in row order.
//   linear_gelu v1  linear_forward_v1, then gelu_forward_v1: two ops.
//   linear_gelu v2  the sgemm (bias in its write-back, sgemm_bias), then GELU (gelu_tanh) in
//                   one pass over each row.
#pragma once

#include <string>
#include <vector>

#include "kernels/versions.h"

namespace kernels {

using LinearFn = void (*)(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                          int OC);
using LinearBackwardFn = void (*)(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                  const float* weight, int N, int C, int OC);
using LinearGeluFn = void (*)(float* pre, float* out, const float* inp, const float* weight, const float* bias,
                              int N, int C, int OC);

template <typename F>
void linear_forward_v1(F* out, const F* inp, const F* weight, const F* bias, int N, int C, int OC);
void linear_forward_v2(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                       int OC);
template <typename F>
void linear_backward_v1(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight, int N, int C,
                        int OC);
void linear_backward_v2(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, int N, int C, int OC);
void linear_gelu_forward_v1(float* pre, float* out, const float* inp, const float* weight, const float* bias,
                            int N, int C, int OC);
void linear_gelu_forward_v2(float* pre, float* out, const float* inp, const float* weight, const float* bias,
                            int N, int C, int OC);

const std::vector<OpVersion<LinearFn>>& linear_versions();
const OpVersion<LinearFn>& linear_version(const std::string& number_or_name);
const std::vector<OpVersion<LinearBackwardFn>>& linear_backward_versions();
const OpVersion<LinearBackwardFn>& linear_backward_version(const std::string& number_or_name);
const std::vector<OpVersion<LinearGeluFn>>& linear_gelu_versions();
const OpVersion<LinearGeluFn>& linear_gelu_version(const std::string& number_or_name);

}  // namespace kernels
