// nn/transformer.cpp: the op pairs of nn/transformer.h (embedding, layernorm, linear in
// loops, GELU, residual, dropout).
//
// The plain loops themselves are the v1 rungs of the kernels' ladders (kernels/encoder.cpp,
// layernorm.cpp, linear.cpp, gelu.cpp, residual.cpp, dropout.cpp): one copy of each loop,
// which the naive GPT backend runs, the fast rungs are validated against, and these nn/
// functions check their arguments for (nn::Error with a hint) and then call. Step into the
// call to read the loop.
#include "nn/transformer.h"

#include "kernels/dropout.h"
#include "kernels/encoder.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/linear.h"
#include "kernels/residual.h"
#include "nn/check.h"

namespace nn {

// ---- argument checks (shared with gpt/'s backends) -----------------------------------------
void check_token_ids(const int32_t* inp, int B, int T, int V) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const int32_t id = inp[static_cast<int64_t>(b) * T + t];
      // A bad id would read a row outside wte: checked before any kernel touches memory.
      NN_CHECK(0 <= id && id < V, "encoder: token id " << id << " at position (b=" << b
                                                       << ", t=" << t << ") is outside [0, " << V
                                                       << "): the data and the model's "
                                                          "vocabulary size disagree");
    }
  }
}

void check_dropout_p(float p) {
  NN_CHECK(p >= 0.0f && p < 1.0f, "dropout: p = " << p
                                                  << " is outside [0, 1): it is the probability "
                                                     "of dropping an element");
}

// ---- token + position embedding ---------------------------------------------------------
template <typename F>
void encoder_forward(F* out, const int32_t* inp, const F* wte, const F* wpe, int B, int T, int C,
                     int V) {
  check_token_ids(inp, B, T, V);
  kernels::encoder_forward_v1(out, inp, wte, wpe, B, T, C);
}

template <typename F>
void encoder_backward(F* dwte, F* dwpe, const F* dout, const int32_t* inp, int B, int T, int C) {
  kernels::encoder_backward_v1(dwte, dwpe, dout, inp, B, T, C);
}

// ---- layer normalisation ----------------------------------------------------------------
template <typename F>
void layernorm_forward(F* out, F* mean, F* rstd, const F* inp, const F* weight, const F* bias,
                       int N, int C) {
  kernels::layernorm_forward_v1(out, mean, rstd, inp, weight, bias, N, C);
}

template <typename F>
void layernorm_backward(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight,
                        const F* mean, const F* rstd, int N, int C) {
  kernels::layernorm_backward_v1(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

// ---- linear layer in plain loops --------------------------------------------------------
template <typename F>
void linear_forward_loops(F* out, const F* inp, const F* weight, const F* bias, int N, int C,
                          int OC) {
  kernels::linear_forward_v1(out, inp, weight, bias, N, C, OC);
}

template <typename F>
void linear_backward_loops(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp,
                           const F* weight, int N, int C, int OC) {
  kernels::linear_backward_v1(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

// ---- GELU (tanh approximation) ----------------------------------------------------------
template <typename F>
void gelu_forward(F* out, const F* inp, int64_t n) {
  kernels::gelu_forward_v1(out, inp, n);
}

template <typename F>
void gelu_backward(F* dinp, const F* dout, const F* inp, int64_t n) {
  kernels::gelu_backward_v1(dinp, dout, inp, n);
}

// ---- residual add -------------------------------------------------------------------------
template <typename F>
void residual_forward(F* out, const F* a, const F* b, int64_t n) {
  kernels::residual_forward_v1(out, a, b, n);
}

// ---- dropout --------------------------------------------------------------------------------
template <typename F>
void dropout_forward(F* out, F* mask, const F* inp, int64_t n, float p, uint64_t seed) {
  check_dropout_p(p);
  kernels::dropout_forward_v1(out, mask, inp, n, p, seed);
}

template <typename F>
void dropout_backward(F* dinp, const F* dout, const F* mask, int64_t n) {
  kernels::dropout_backward_v1(dinp, dout, mask, n);
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
