// nn/ops.cpp: the forward/backward pairs declared in nn/ops.h.
// Read each pair top to bottom: the forward's math is in the comment above its loop,
// the backward is that math differentiated, written as loops over the same indices.
#include "nn/ops.h"

#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>

#include "kernels/crossentropy.h"
#include "kernels/linear.h"
#include "kernels/softmax.h"
#include "nn/check.h"
#include "nn/transformer.h"

namespace nn {

using std::ptrdiff_t;

// ---- linear ---------------------------------------------------------------------
// float: the fast CPU backend's rung (kernels/linear.h v2: kernels::sgemm, the matmul lesson 03
// builds and the harness validates and times); double (the gradient checks): the plain
// loops (v1, also the naive GPT backend's).
template <typename T>
void linear_forward(T* out, const T* inp, const T* weight, const T* bias, int B, int C, int OC) {
  // inp (B,C), weight (OC,C), bias (OC), out (B,OC)
  if constexpr (std::is_same_v<T, float>) {
    kernels::linear_forward_v2(out, inp, weight, bias, B, C, OC);
  } else {
    linear_forward_loops(out, inp, weight, bias, B, C, OC);
  }
}

template <typename T>
void linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                     int B, int C, int OC) {
  // dout (B,OC), inp (B,C), weight (OC,C) -> dinp (B,C) =, dweight (OC,C) +=, dbias (OC) +=
  if constexpr (std::is_same_v<T, float>) {
    kernels::linear_backward_v2(dinp, dweight, dbias, dout, inp, weight, B, C, OC);
  } else {
    linear_backward_loops(dinp, dweight, dbias, dout, inp, weight, B, C, OC);
  }
}

// ---- activations ----------------------------------------------------------------
template <typename T>
void relu_forward(T* out, const T* inp, int64_t N) {
  for (int64_t i = 0; i < N; ++i) {
    out[i] = inp[i] > T(0) ? inp[i] : T(0);
  }
}
template <typename T>
void relu_backward(T* dinp, const T* dout, const T* inp, int64_t N) {
  for (int64_t i = 0; i < N; ++i) {
    dinp[i] = inp[i] > T(0) ? dout[i] : T(0);
  }
}

template <typename T>
void tanh_forward(T* out, const T* inp, int64_t N) {
  for (int64_t i = 0; i < N; ++i) {
    out[i] = std::tanh(inp[i]);
  }
}
template <typename T>
void tanh_backward(T* dinp, const T* dout, const T* out, int64_t N) {
  for (int64_t i = 0; i < N; ++i) {
    dinp[i] = dout[i] * (T(1) - out[i] * out[i]);  // d tanh(x)/dx = 1 - tanh(x)^2
  }
}

template <typename T>
void sigmoid_forward(T* out, const T* inp, int64_t N) {
  for (int64_t i = 0; i < N; ++i) {
    // Two branches so exp never overflows: for x < 0 use e^x / (1 + e^x).
    const T x = inp[i];
    if (x >= T(0)) {
      out[i] = T(1) / (T(1) + std::exp(-x));
    } else {
      const T e = std::exp(x);
      out[i] = e / (T(1) + e);
    }
  }
}
template <typename T>
void sigmoid_backward(T* dinp, const T* dout, const T* out, int64_t N) {
  for (int64_t i = 0; i < N; ++i) {
    dinp[i] = dout[i] * out[i] * (T(1) - out[i]);  // s'(x) = s(x) (1 - s(x))
  }
}

// ---- softmax --------------------------------------------------------------------
// The stable softmax: subtracting the row's max changes nothing mathematically (it cancels
// in the ratio) but keeps every exp() argument <= 0, so exp never overflows to inf. The
// loops are kernels/softmax.h's softmax_loops, in T (the gradient checks run in double).
template <typename T>
void softmax_forward(T* probs, const T* logits, int B, int V) {
  kernels::softmax_loops(probs, logits, B, V);
}

void check_targets(const int32_t* targets, int B, int V) {
  for (int b = 0; b < B; ++b) {
    const int32_t t = targets[b];
    NN_CHECK(0 <= t && t < V, "cross-entropy target " << t << " at row " << b
                                  << " is outside [0, " << V << "): labels and model disagree");
  }
}

// The loops are kernels/crossentropy.cpp's v1: the softmax, then the loss from the logits
// (logsumexp - x_t, so a probability that underflows gives a large finite loss, not inf).
template <typename T>
T softmax_cross_entropy_forward(T* probs, T* losses, const T* logits, const int32_t* targets, int B,
                                int V) {
  check_targets(targets, B, V);
  return kernels::crossentropy_forward_v1(probs, losses, logits, targets, B, V);
}

template <typename T>
void softmax_cross_entropy_backward(T* dlogits, const T* probs, const int32_t* targets, int B, int V,
                                    T dloss) {
  // d(mean_b loss_b)/d x_bv = (p_bv - [v == t_b]) / B
  kernels::crossentropy_backward_v1(dlogits, probs, targets, B, V, dloss);
}

// ---- mean-squared error -------------------------------------------------------------
template <typename T>
T mse_forward(const T* pred, const T* target, int64_t N) {
  double sum = 0.0;
  for (int64_t i = 0; i < N; ++i) {
    const double d = static_cast<double>(pred[i]) - static_cast<double>(target[i]);
    sum += d * d;
  }
  return static_cast<T>(sum / static_cast<double>(N));
}
template <typename T>
void mse_backward(T* dpred, const T* pred, const T* target, int64_t N, T dloss) {
  const T scale = T(2) * dloss / static_cast<T>(N);  // d/dp_i mean (p - t)^2 = 2 (p_i - t_i) / N
  for (int64_t i = 0; i < N; ++i) {
    dpred[i] = scale * (pred[i] - target[i]);
  }
}

void argmax_rows(int32_t* pred, const float* logits, int B, int V) {
  for (int b = 0; b < B; ++b) {
    const float* x = logits + static_cast<ptrdiff_t>(b) * V;
    int32_t best = 0;
    for (int v = 1; v < V; ++v) {
      best = x[v] > x[best] ? v : best;
    }
    pred[b] = best;
  }
}

// ---- explicit instantiations: float (training) and double (gradient checks) -------
#define NN_INSTANTIATE_OPS(T)                                                                      \
  template void linear_forward<T>(T*, const T*, const T*, const T*, int, int, int);                \
  template void linear_backward<T>(T*, T*, T*, const T*, const T*, const T*, int, int, int);       \
  template void relu_forward<T>(T*, const T*, int64_t);                                            \
  template void relu_backward<T>(T*, const T*, const T*, int64_t);                                 \
  template void tanh_forward<T>(T*, const T*, int64_t);                                            \
  template void tanh_backward<T>(T*, const T*, const T*, int64_t);                                 \
  template void sigmoid_forward<T>(T*, const T*, int64_t);                                         \
  template void sigmoid_backward<T>(T*, const T*, const T*, int64_t);                              \
  template void softmax_forward<T>(T*, const T*, int, int);                                        \
  template T softmax_cross_entropy_forward<T>(T*, T*, const T*, const int32_t*, int, int);         \
  template void softmax_cross_entropy_backward<T>(T*, const T*, const int32_t*, int, int, T);      \
  template T mse_forward<T>(const T*, const T*, int64_t);                                          \
  template void mse_backward<T>(T*, const T*, const T*, int64_t, T);
NN_INSTANTIATE_OPS(float)
NN_INSTANTIATE_OPS(double)
#undef NN_INSTANTIATE_OPS

}  // namespace nn
