// gpt/backend_cpu.cpp: the fast CPU backend, `--backend cpu` (gpt/backend.h).
//
// A table over the kernels/ ladders: each op runs a named rung, the one the ladder's
// header, its tests (validated against v1, the naive backend's loop) and `nnlab bench
// <op>` describe. Step into any call to read the kernel:
//   encoder            kernels/encoder.h       v2  rows across threads; dwte by token id
//   layernorm          kernels/layernorm.h     v4  SIMD rows across threads; backward v2
//   matmul             kernels/linear.h        v2  kernels::sgemm (lesson 03's ladder)
//   attention          kernels/attention.h     v2  a thread per (b, h), SIMD scores
//   gelu               kernels/gelu.h          v2  SIMD with poly_exp
//   residual, dropout  kernels/residual.h, dropout.h   v2  threads
//   cross-entropy      kernels/crossentropy.h  v2  SIMD rows with poly_exp
//   optimizer          kernels/adamw.h         v2  SIMD AdamW, chunked sum of squares
//   fused              residual_layernorm v2, linear_gelu v2
//   inference          kernels/decode.h        the fastest matvec and attention_decode
//
// Determinism (gpt/backend.h): every rung computes each output element on ONE thread in a
// fixed order that does not depend on the thread count (kernels/parallel.h says how).
//
// Sizes as in gpt/backend.h: N = B * T rows, C channels, OC output channels, V vocabulary,
// NH heads.
#include <memory>
#include <string>

#include "gpt/backend.h"
#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/crossentropy.h"
#include "kernels/decode.h"
#include "kernels/dropout.h"
#include "kernels/encoder.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/linear.h"
#include "kernels/residual.h"
#include "nn/attention.h"
#include "nn/ops.h"
#include "nn/transformer.h"

namespace gpt {

namespace {

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  // The block's last residual add and the next LayerNorm in one pass (residual_layernorm
  // v2): the same values as the pair, one read of the stream fewer (gpt/model.h, Fusion).
  bool fuses_residual_layernorm() const override { return true; }

  void encoder_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T,
                       int C, int V) override {
    nn::check_token_ids(inp, B, T, V);  // every id, before any thread reads a row
    kernels::encoder_forward_v2(out, inp, wte, wpe, B, T, C);
  }
  void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T,
                        int C, int /*V*/) override {
    kernels::encoder_backward_v2(dwte, dwpe, dout, inp, B, T, C);
  }

  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                         const float* bias, int N, int C) override {
    kernels::layernorm_forward_v4(out, mean, rstd, inp, weight, bias, N, C);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* weight, const float* mean, const float* rstd, int N,
                          int C) override {
    kernels::layernorm_backward_v2(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }

  void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                      int OC) override {
    kernels::linear_forward_v2(out, inp, weight, bias, N, C, OC);
  }
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                       const float* weight, int N, int C, int OC) override {
    kernels::linear_backward_v2(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  }

  void attention_forward(float* out, float* preatt, float* att, const float* qkv, int B, int T, int C,
                         int NH) override {
    nn::check_attention_sizes(B, T, C, NH);
    kernels::attention_forward_v2(out, preatt, att, qkv, B, T, C, NH);
  }
  void attention_backward(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                          const float* att, int B, int T, int C, int NH) override {
    nn::check_attention_sizes(B, T, C, NH);
    kernels::attention_backward_v2(dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH);
  }

  void gelu_forward(float* out, const float* inp, int64_t n) override { kernels::gelu_forward_v2(out, inp, n); }
  void gelu_backward(float* dinp, const float* dout, const float* inp, int64_t n) override {
    kernels::gelu_backward_v2(dinp, dout, inp, n);
  }

  void residual_forward(float* out, const float* a, const float* b, int64_t n) override {
    kernels::residual_forward_v2(out, a, b, n);
  }

  void dropout_forward(float* out, float* mask, const float* inp, int64_t n, float p,
                       uint64_t seed) override {
    nn::check_dropout_p(p);
    kernels::dropout_forward_v2(out, mask, inp, n, p, seed);
  }
  void dropout_backward(float* dinp, const float* dout, const float* mask, int64_t n) override {
    kernels::dropout_backward_v2(dinp, dout, mask, n);
  }

  float crossentropy_forward(float* probs, float* losses, const float* logits, const int32_t* targets, int N,
                             int V) override {
    nn::check_targets(targets, N, V);
    return kernels::crossentropy_forward_v2(probs, losses, logits, targets, N, V);
  }
  void crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets, int N, int V,
                             float dloss) override {
    kernels::crossentropy_backward_v2(dlogits, probs, targets, N, V, dloss);
  }

  void residual_layernorm_forward(float* residual_out, float* ln_out, float* mean, float* rstd, const float* a,
                                  const float* b, const float* weight, const float* bias, int N,
                                  int C) override {
    kernels::residual_layernorm_forward_v2(residual_out, ln_out, mean, rstd, a, b, weight, bias, N, C);
  }
  void matmul_gelu_forward(float* pre, float* out, const float* inp, const float* weight, const float* bias,
                           int N, int C, int OC) override {
    kernels::linear_gelu_forward_v2(pre, out, inp, weight, bias, N, C, OC);
  }

  // inference (lesson 10): the fastest versions of kernels/decode.h
  void matvec_forward(float* out, const float* inp, const kernels::WeightsView& w, const float* bias,
                      int N) override {
    kernels::matvec(out, inp, w, bias, N);
  }
  void attention_decode(float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C,
                        int NH, int maxT) override {
    kernels::attention_decode(out, kcache, vcache, qkv, B, n, pos, C, NH, maxT);
  }

  double sum_squares(const float* g, int64_t n) override { return kernels::sum_squares_v2(g, n); }
  void scale(float* x, float s, int64_t n) override { kernels::scale_v2(x, s, n); }
  void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                    float eps, float weight_decay, int64_t t) override {
    kernels::adamw_update_v2(p, g, m, v, n, lr, beta1, beta2, eps, weight_decay, t);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace gpt
