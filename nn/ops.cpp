// nn/ops.cpp: the forward/backward pairs declared in nn/ops.h.
// Read each pair top to bottom: the forward's math is in the comment above its loop,
// the backward is that math differentiated, written as loops over the same indices.
#include "nn/ops.h"

#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>

#include "kernels/crossentropy.h"
#include "kernels/matmul.h"
#include "nn/check.h"
#include "nn/transformer.h"

namespace nn {

using std::ptrdiff_t;

// ---- linear ---------------------------------------------------------------------
template <typename T>
void linear_forward(T* out, const T* inp, const T* weight, const T* bias, int B, int C, int OC) {
  // inp (B,C), weight (OC,C), bias (OC), out (B,OC)
  if constexpr (std::is_same_v<T, float>) {
    // out = inp * weight^T, by the matmul the kernels harness validates and times
    kernels::sgemm(kernels::Trans::No, kernels::Trans::Yes, B, OC, C, 1.0f, inp, C, weight, C, 0.0f,
                   out, OC);
    if (bias != nullptr) {
      for (int b = 0; b < B; ++b) {
        for (int o = 0; o < OC; ++o) {
          out[static_cast<ptrdiff_t>(b) * OC + o] += bias[o];
        }
      }
    }
  } else {
    // the plain loops, one copy for nn/ and gpt/'s naive backend (nn/transformer.h)
    linear_forward_loops(out, inp, weight, bias, B, C, OC);
  }
}

template <typename T>
void linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                     int B, int C, int OC) {
  // dout (B,OC), inp (B,C), weight (OC,C) -> dinp (B,C) =, dweight (OC,C) +=, dbias (OC) +=
  if constexpr (std::is_same_v<T, float>) {
    using kernels::Trans;
    if (dinp != nullptr) {  // dinp = dout * weight
      kernels::sgemm(Trans::No, Trans::No, B, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C);
    }
    // dweight += dout^T * inp
    kernels::sgemm(Trans::Yes, Trans::No, OC, C, B, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    if (dbias != nullptr) {  // dL/db_o += sum_b dL/dy_bo
      for (int b = 0; b < B; ++b) {
        for (int o = 0; o < OC; ++o) {
          dbias[o] += dout[static_cast<ptrdiff_t>(b) * OC + o];
        }
      }
    }
  } else {
    // the plain loops (dbias included), one copy for nn/ and gpt/'s naive backend
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
template <typename T>
void softmax_forward(T* probs, const T* logits, int B, int V) {
  for (int b = 0; b < B; ++b) {
    const T* x = logits + static_cast<ptrdiff_t>(b) * V;
    T* p = probs + static_cast<ptrdiff_t>(b) * V;
    // Subtracting the max changes nothing mathematically (it cancels in the ratio) but
    // keeps every exp() argument <= 0, so exp never overflows to inf.
    T maxval = -std::numeric_limits<T>::infinity();
    for (int v = 0; v < V; ++v) {
      maxval = x[v] > maxval ? x[v] : maxval;
    }
    T sum = 0;
    for (int v = 0; v < V; ++v) {
      p[v] = std::exp(x[v] - maxval);
      sum += p[v];
    }
    for (int v = 0; v < V; ++v) {
      p[v] /= sum;
    }
  }
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
