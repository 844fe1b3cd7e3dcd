// gpt/backend.cpp: the naive backend (every op is the v1 rung of its kernels/ ladder: the
// plain loops nn/ forwards to, argument checks first) and the default fused ops.
// make_backend, which knows every backend, is gpt/backend_factory.cpp.
#include "gpt/backend.h"

#include <cmath>

#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/ceilings.h"
#include "kernels/crossentropy.h"
#include "kernels/decode.h"
#include "kernels/dropout.h"
#include "kernels/encoder.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/linear.h"
#include "kernels/residual.h"

#include "nn/attention.h"
#include "nn/check.h"
#include "nn/ops.h"
#include "nn/transformer.h"

namespace gpt {

void Backend::residual_layernorm_forward(float* residual_out, float* ln_out, float* mean, float* rstd,
                                         const float* a, const float* b, const float* weight,
                                         const float* bias, int N, int C) {
  residual_forward(residual_out, a, b, static_cast<int64_t>(N) * C);
  layernorm_forward(ln_out, mean, rstd, residual_out, weight, bias, N, C);
}

void Backend::matmul_gelu_forward(float* pre, float* out, const float* inp, const float* weight,
                                  const float* bias, int N, int C, int OC) {
  matmul_forward(pre, inp, weight, bias, N, C, OC);
  gelu_forward(out, pre, static_cast<int64_t>(N) * OC);
}

void Backend::matvec_forward(float* out, const float* inp, const kernels::WeightsView& w, const float* bias,
                             int N) {
  (void)out, (void)inp, (void)w, (void)bias, (void)N;
  NN_CHECK(false, "the " << name() << " backend has no inference ops (matvec_forward)");
}

void Backend::attention_decode(float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos,
                               int C, int NH, int maxT) {
  (void)out, (void)kcache, (void)vcache, (void)qkv, (void)B, (void)n, (void)pos, (void)C, (void)NH, (void)maxT;
  NN_CHECK(false, "the " << name() << " backend has no inference ops (attention_decode)");
}

namespace {

class NaiveBackend final : public Backend {
 public:
  std::string name() const override { return "naive"; }

  void encoder_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T,
                       int C, int V) override {
    nn::check_token_ids(inp, B, T, V);
    kernels::encoder_forward_v1(out, inp, wte, wpe, B, T, C);
  }
  void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T,
                        int C, int /*V*/) override {
    kernels::encoder_backward_v1(dwte, dwpe, dout, inp, B, T, C);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                         const float* bias, int N, int C) override {
    kernels::layernorm_forward_v1(out, mean, rstd, inp, weight, bias, N, C);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* weight, const float* mean, const float* rstd, int N,
                          int C) override {
    kernels::layernorm_backward_v1(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }
  void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                      int OC) override {
    kernels::linear_forward_v1(out, inp, weight, bias, N, C, OC);
  }
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                       const float* weight, int N, int C, int OC) override {
    kernels::linear_backward_v1(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  }
  void attention_forward(float* out, float* preatt, float* att, const float* qkv, int B, int T, int C,
                         int NH) override {
    nn::check_attention_sizes(B, T, C, NH);
    kernels::attention_forward_v1(out, preatt, att, qkv, B, T, C, NH);
  }
  void attention_backward(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                          const float* att, int B, int T, int C, int NH) override {
    nn::check_attention_sizes(B, T, C, NH);
    kernels::attention_backward_v1(dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH);
  }
  void gelu_forward(float* out, const float* inp, int64_t n) override { kernels::gelu_forward_v1(out, inp, n); }
  void gelu_backward(float* dinp, const float* dout, const float* inp, int64_t n) override {
    kernels::gelu_backward_v1(dinp, dout, inp, n);
  }
  void residual_forward(float* out, const float* a, const float* b, int64_t n) override {
    kernels::residual_forward_v1(out, a, b, n);
  }
  // inference: the plain-loop references of kernels/decode.h
  void matvec_forward(float* out, const float* inp, const kernels::WeightsView& w, const float* bias,
                      int N) override {
    kernels::matvec_v1(out, inp, w, bias, N);
  }
  void attention_decode(float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C,
                        int NH, int maxT) override {
    kernels::attention_decode_v1(out, kcache, vcache, qkv, B, n, pos, C, NH, maxT);
  }
  void dropout_forward(float* out, float* mask, const float* inp, int64_t n, float p,
                       uint64_t seed) override {
    nn::check_dropout_p(p);
    kernels::dropout_forward_v1(out, mask, inp, n, p, seed);
  }
  void dropout_backward(float* dinp, const float* dout, const float* mask, int64_t n) override {
    kernels::dropout_backward_v1(dinp, dout, mask, n);
  }
  float crossentropy_forward(float* probs, float* losses, const float* logits, const int32_t* targets,
                             int N, int V) override {
    nn::check_targets(targets, N, V);
    return kernels::crossentropy_forward_v1(probs, losses, logits, targets, N, V);
  }
  void crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets, int N, int V,
                             float dloss) override {
    kernels::crossentropy_backward_v1(dlogits, probs, targets, N, V, dloss);
  }
  double sum_squares(const float* g, int64_t n) override { return kernels::sum_squares_v1(g, n); }
  void scale(float* x, float s, int64_t n) override { kernels::scale_v1(x, s, n); }
  void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                    float beta2, float eps, float weight_decay, int64_t t) override {
    kernels::adamw_update_v1(p, g, m, v, n, lr, beta1, beta2, eps, weight_decay, t);
  }
};

}  // namespace

std::unique_ptr<Backend> make_naive_backend() { return std::make_unique<NaiveBackend>(); }

double Backend::measure_peak_flops(int threads, std::string* what) {
  if (what) *what = "FMA loop on " + std::to_string(threads) + " thread" + (threads == 1 ? "" : "s") + ", measured now";
  return kernels::measure_fma_peak(threads, 0.2);
}

}  // namespace gpt
