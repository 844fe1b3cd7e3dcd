// nn/transformer.cpp: the op pairs of nn/transformer.h (embedding, layernorm, linear in
// loops, GELU, residual, dropout), in plain loops.
//
// This is the reference a student steps through and the one the naive GPT backend runs, so
// every loop is the math written out, and every sum runs in one fixed order (index 0
// upward, in the scalar type F): the same inputs give the same bits on every run, and a
// faster version is compared with these numbers, not the other way round.
#include "nn/transformer.h"

#include <cmath>
#include <cstddef>
#include <numbers>

#include "nn/check.h"

namespace nn {

using std::ptrdiff_t;

// ---- token + position embedding ---------------------------------------------------------
template <typename F>
void encoder_forward(F* out, const int32_t* inp, const F* wte, const F* wpe, int B, int T, int C,
                     int V) {
  // inp (B,T), wte (V,C), wpe (>=T,C) -> out (B,T,C)
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const int32_t id = inp[static_cast<ptrdiff_t>(b) * T + t];
      // A bad id would read a row outside wte: check it before touching memory.
      NN_CHECK(0 <= id && id < V, "encoder: token id " << id << " at position (b=" << b
                                                       << ", t=" << t << ") is outside [0, " << V
                                                       << "): the data and the model's "
                                                          "vocabulary size disagree");
      F* o = out + (static_cast<ptrdiff_t>(b) * T + t) * C;
      const F* tok = wte + static_cast<ptrdiff_t>(id) * C;  // the token's row
      const F* pos = wpe + static_cast<ptrdiff_t>(t) * C;   // the position's row
      for (int c = 0; c < C; ++c) {
        o[c] = tok[c] + pos[c];  // out[b,t,:] = wte[id,:] + wpe[t,:]
      }
    }
  }
}

template <typename F>
void encoder_backward(F* dwte, F* dwpe, const F* dout, const int32_t* inp, int B, int T, int C) {
  // dout (B,T,C) -> dwte (V,C) +=, dwpe (>=T,C) +=
  // The forward copied row id of wte and row t of wpe into out[b,t,:] (slope 1), so each
  // gets dout[b,t,:] back; a token seen twice in the batch gets both contributions.
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const int32_t id = inp[static_cast<ptrdiff_t>(b) * T + t];
      const F* d = dout + (static_cast<ptrdiff_t>(b) * T + t) * C;
      F* dtok = dwte + static_cast<ptrdiff_t>(id) * C;
      F* dpos = dwpe + static_cast<ptrdiff_t>(t) * C;
      for (int c = 0; c < C; ++c) {
        dtok[c] += d[c];
        dpos[c] += d[c];
      }
    }
  }
}

// ---- layer normalisation ----------------------------------------------------------------
template <typename F>
void layernorm_forward(F* out, F* mean, F* rstd, const F* inp, const F* weight, const F* bias,
                       int N, int C) {
  // inp (N,C), weight (C), bias (C) -> out (N,C), mean (N), rstd (N)
  const F eps = static_cast<F>(kLayernormEps);
  for (int n = 0; n < N; ++n) {
    const F* x = inp + static_cast<ptrdiff_t>(n) * C;
    // mean = sum(x) / C
    F m = 0;
    for (int c = 0; c < C; ++c) {
      m += x[c];
    }
    m /= static_cast<F>(C);
    // var = sum((x - mean)^2) / C: two passes (not E[x^2] - mean^2, which cancels
    // catastrophically when the mean is large compared with the spread)
    F v = 0;
    for (int c = 0; c < C; ++c) {
      const F xshift = x[c] - m;
      v += xshift * xshift;
    }
    v /= static_cast<F>(C);
    const F s = F(1) / std::sqrt(v + eps);  // eps keeps a constant row finite
    // out = (x - mean) * rstd * weight + bias
    F* o = out + static_cast<ptrdiff_t>(n) * C;
    for (int c = 0; c < C; ++c) {
      const F xhat = (x[c] - m) * s;  // normalised: mean 0, variance ~1 over the row
      o[c] = xhat * weight[c] + (bias != nullptr ? bias[c] : F(0));
    }
    mean[n] = m;
    rstd[n] = s;
  }
}

template <typename F>
void layernorm_backward(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight,
                        const F* mean, const F* rstd, int N, int C) {
  // dout (N,C), inp (N,C), weight (C), mean (N), rstd (N)
  // -> dinp (N,C) += (the residual stream), dweight (C) +=, dbias (C) +=
  for (int n = 0; n < N; ++n) {
    const F* dy = dout + static_cast<ptrdiff_t>(n) * C;
    const F* x = inp + static_cast<ptrdiff_t>(n) * C;
    F* dx = dinp + static_cast<ptrdiff_t>(n) * C;
    const F m = mean[n];
    const F s = rstd[n];

    // Two reductions over the row: every xhat_c depends on every x_j through the mean and
    // the variance, and these two sums are all of that coupling.
    //   mean(g) and mean(g * xhat), with g = dout * weight = dL/dxhat
    F g_mean = 0;
    F gxhat_mean = 0;
    for (int c = 0; c < C; ++c) {
      const F xhat = (x[c] - m) * s;
      const F g = dy[c] * weight[c];
      g_mean += g;
      gxhat_mean += g * xhat;
    }
    g_mean /= static_cast<F>(C);
    gxhat_mean /= static_cast<F>(C);

    for (int c = 0; c < C; ++c) {
      const F xhat = (x[c] - m) * s;
      const F g = dy[c] * weight[c];
      // out = xhat * weight + bias: the parameters see dout directly
      if (dbias != nullptr) dbias[c] += dy[c];
      dweight[c] += dy[c] * xhat;
      // dL/dx = rstd * (g - mean(g) - xhat * mean(g xhat)):
      //   the direct path, minus what flows back through the mean, minus through the variance
      dx[c] += s * (g - g_mean - xhat * gxhat_mean);
    }
  }
}

// ---- linear layer in plain loops --------------------------------------------------------
template <typename F>
void linear_forward_loops(F* out, const F* inp, const F* weight, const F* bias, int N, int C,
                          int OC) {
  // inp (N,C), weight (OC,C), bias (OC) or nullptr -> out (N,OC)
  for (int n = 0; n < N; ++n) {
    const F* x = inp + static_cast<ptrdiff_t>(n) * C;
    for (int o = 0; o < OC; ++o) {
      const F* w = weight + static_cast<ptrdiff_t>(o) * C;  // row o of W: output o's weights
      F sum = bias != nullptr ? bias[o] : F(0);             // y_o = b_o + sum_c x_c w_oc
      for (int c = 0; c < C; ++c) {
        sum += x[c] * w[c];
      }
      out[static_cast<ptrdiff_t>(n) * OC + o] = sum;
    }
  }
}

template <typename F>
void linear_backward_loops(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp,
                           const F* weight, int N, int C, int OC) {
  // dout (N,OC), inp (N,C), weight (OC,C) -> dinp (N,C) =, dweight (OC,C) +=, dbias (OC) +=
  for (int n = 0; n < N; ++n) {
    const F* dy = dout + static_cast<ptrdiff_t>(n) * OC;
    const F* x = inp + static_cast<ptrdiff_t>(n) * C;
    if (dinp != nullptr) {
      F* dx = dinp + static_cast<ptrdiff_t>(n) * C;
      for (int c = 0; c < C; ++c) {  // dL/dx_c = sum_o dL/dy_o * w_oc
        F sum = 0;
        for (int o = 0; o < OC; ++o) {
          sum += dy[o] * weight[static_cast<ptrdiff_t>(o) * C + c];
        }
        dx[c] = sum;
      }
    }
    for (int o = 0; o < OC; ++o) {  // dL/dw_oc += dL/dy_o * x_c
      F* dw = dweight + static_cast<ptrdiff_t>(o) * C;
      for (int c = 0; c < C; ++c) {
        dw[c] += dy[o] * x[c];
      }
    }
  }
  if (dbias != nullptr) {  // dL/db_o += sum_n dL/dy_no
    for (int n = 0; n < N; ++n) {
      for (int o = 0; o < OC; ++o) {
        dbias[o] += dout[static_cast<ptrdiff_t>(n) * OC + o];
      }
    }
  }
}

// ---- GELU (tanh approximation) ----------------------------------------------------------
namespace {
// sqrt(2 / pi), computed in double and rounded once to F
template <typename F>
F gelu_scale() {
  return static_cast<F>(std::sqrt(2.0 / std::numbers::pi));
}
constexpr double kGeluCubic = 0.044715;
}  // namespace

template <typename F>
void gelu_forward(F* out, const F* inp, int64_t n) {
  const F s = gelu_scale<F>();
  const F k = static_cast<F>(kGeluCubic);
  for (int64_t i = 0; i < n; ++i) {
    const F x = inp[i];
    // gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
    const F u = s * (x + k * x * x * x);
    out[i] = F(0.5) * x * (F(1) + std::tanh(u));
  }
}

template <typename F>
void gelu_backward(F* dinp, const F* dout, const F* inp, int64_t n) {
  const F s = gelu_scale<F>();
  const F k = static_cast<F>(kGeluCubic);
  for (int64_t i = 0; i < n; ++i) {
    const F x = inp[i];
    const F u = s * (x + k * x * x * x);
    const F th = std::tanh(u);
    // product rule on 0.5 x (1 + tanh(u)):
    //   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) du/dx,
    //   du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
    const F du = s * (F(1) + F(3) * k * x * x);
    const F grad = F(0.5) * (F(1) + th) + F(0.5) * x * (F(1) - th * th) * du;
    dinp[i] = dout[i] * grad;
  }
}

// ---- residual add -------------------------------------------------------------------------
template <typename F>
void residual_forward(F* out, const F* a, const F* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = a[i] + b[i];
  }
}

// ---- dropout --------------------------------------------------------------------------------
template <typename F>
void dropout_forward(F* out, F* mask, const F* inp, int64_t n, float p, uint64_t seed) {
  NN_CHECK(p >= 0.0f && p < 1.0f, "dropout: p = " << p
                                                  << " is outside [0, 1): it is the probability "
                                                     "of dropping an element");
  // Inverted dropout: scale the kept elements by 1 / (1 - p) at training time, so the
  // expected value of out_i is inp_i and evaluation needs no rescaling at all.
  const F scale = F(1) / (F(1) - static_cast<F>(p));  // exactly 1 when p = 0
  for (int64_t i = 0; i < n; ++i) {
    const float u = dropout_uniform(seed, static_cast<uint64_t>(i));
    const F m = u < p ? F(0) : scale;  // never true for p = 0: u >= 0
    const F x = inp[i];                // read before writing: out may alias inp
    mask[i] = m;
    out[i] = x * m;
  }
}

template <typename F>
void dropout_backward(F* dinp, const F* dout, const F* mask, int64_t n) {
  // out_i = inp_i * mask_i, so dL/dinp_i = dL/dout_i * mask_i
  for (int64_t i = 0; i < n; ++i) {
    dinp[i] = dout[i] * mask[i];
  }
}

// ---- explicit instantiations: float (the naive backend), double (gradient checks) ---------
#define NN_INSTANTIATE_TRANSFORMER(F)                                                              \
  template void encoder_forward<F>(F*, const int32_t*, const F*, const F*, int, int, int, int);    \
  template void encoder_backward<F>(F*, F*, const F*, const int32_t*, int, int, int);              \
  template void layernorm_forward<F>(F*, F*, F*, const F*, const F*, const F*, int, int);          \
  template void layernorm_backward<F>(F*, F*, F*, const F*, const F*, const F*, const F*,          \
                                      const F*, int, int);                                         \
  template void linear_forward_loops<F>(F*, const F*, const F*, const F*, int, int, int);          \
  template void linear_backward_loops<F>(F*, F*, F*, const F*, const F*, const F*, int, int, int); \
  template void gelu_forward<F>(F*, const F*, int64_t);                                            \
  template void gelu_backward<F>(F*, const F*, const F*, int64_t);                                 \
  template void residual_forward<F>(F*, const F*, const F*, int64_t);                              \
  template void dropout_forward<F>(F*, F*, const F*, int64_t, float, uint64_t);                    \
  template void dropout_backward<F>(F*, const F*, const F*, int64_t);
NN_INSTANTIATE_TRANSFORMER(float)
NN_INSTANTIATE_TRANSFORMER(double)
#undef NN_INSTANTIATE_TRANSFORMER

}  // namespace nn
