// nn/ops.h: every op as a pair of free functions, op_forward / op_backward, over plain
// buffers with the sizes as named arguments.
//
// THE GRADIENT RULE (stated once, kept everywhere in nn/):
//   - parameter gradients ACCUMULATE:  dweight += ..., dbias += ...
//     (so gradient accumulation over micro-batches is free; zero them before a step)
//   - activation gradients are ASSIGNED: dinp = ...
//     (except where a residual stream sums two paths; such ops say so)
//
// Each op is a template over the scalar type T. `float` is what training runs;
// `double` is what the finite-difference gradient checker (nn/gradcheck.h) runs, so a
// wrong backward cannot hide behind float rounding. For T = float the linear layer calls
// kernels::sgemm (the fastest validated matmul); for T = double it runs plain loops.
// Tests check the float path against the double path too.
#pragma once

#include <cstdint>

namespace nn {

// ---- linear: out = inp W^T + b ------------------------------------------------
// inp (B, C), weight (OC, C), bias (OC) or nullptr, out (B, OC)
template <typename T>
void linear_forward(T* out, const T* inp, const T* weight, const T* bias, int B, int C, int OC);
// dout (B, OC) -> dinp (B, C) assigned (skipped if nullptr), dweight (OC, C) and dbias (OC) accumulated
template <typename T>
void linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                     int B, int C, int OC);

// ---- element-wise activations, N elements -------------------------------------
// relu(x) = max(0, x);  d/dx = 1 if x > 0 else 0 (we pick 0 at x = 0)
template <typename T> void relu_forward(T* out, const T* inp, int64_t N);
template <typename T> void relu_backward(T* dinp, const T* dout, const T* inp, int64_t N);
// tanh(x);  d/dx = 1 - tanh(x)^2, computed from the saved output
template <typename T> void tanh_forward(T* out, const T* inp, int64_t N);
template <typename T> void tanh_backward(T* dinp, const T* dout, const T* out, int64_t N);
// sigmoid(x) = 1 / (1 + exp(-x));  d/dx = s (1 - s), from the saved output
template <typename T> void sigmoid_forward(T* out, const T* inp, int64_t N);
template <typename T> void sigmoid_backward(T* dinp, const T* dout, const T* out, int64_t N);

// ---- softmax over the last axis -----------------------------------------------
// logits (B, V) -> probs (B, V).  softmax(x)_i = exp(x_i - max) / sum_j exp(x_j - max)
template <typename T> void softmax_forward(T* probs, const T* logits, int B, int V);

// ---- softmax + cross-entropy, fused because the backward collapses -------------
// nn::Error naming the first row whose target is outside [0, V).
void check_targets(const int32_t* targets, int B, int V);
// The loops are kernels/crossentropy.h's v1 (checked here first).
// logits (B, V), targets (B) in [0, V) -> probs (B, V), losses (B); returns mean loss.
// loss_b = -log softmax(logits_b)[target_b] = logsumexp(logits_b) - logits_b[target_b]
template <typename T>
T softmax_cross_entropy_forward(T* probs, T* losses, const T* logits, const int32_t* targets, int B,
                                int V);
// d(mean loss)/d logits = (probs - onehot(target)) / B, scaled by dloss (usually 1). Assigned.
template <typename T>
void softmax_cross_entropy_backward(T* dlogits, const T* probs, const int32_t* targets, int B, int V,
                                    T dloss = T(1));

// ---- mean-squared error ---------------------------------------------------------
// pred (N), target (N); returns mean (pred - target)^2
template <typename T> T mse_forward(const T* pred, const T* target, int64_t N);
// d/dpred = 2 (pred - target) / N, scaled by dloss. Assigned.
template <typename T>
void mse_backward(T* dpred, const T* pred, const T* target, int64_t N, T dloss = T(1));

// ---- helpers used by training loops -----------------------------------------------
// Index of the largest value in each row: the predicted class. logits (B, V) -> pred (B).
void argmax_rows(int32_t* pred, const float* logits, int B, int V);

}  // namespace nn
