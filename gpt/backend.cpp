// gpt/backend.cpp: the naive backend's table (every op is the v1 rung of its kernels/ ladder:
// the plain loops nn/ forwards to, argument checks first) and fill_defaults (the default
// fused and inference ops, and the check that a table is complete).
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
#include "kernels/flash_attention.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/linear.h"
#include "kernels/residual.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"

#include "nn/attention.h"
#include "nn/check.h"
#include "nn/ops.h"
#include "nn/transformer.h"

namespace gpt {

// ---- the defaults and the completeness check ----------------------------------------------

void fill_defaults(Backend& be) {
  NN_CHECK(be.name, "a backend table without a name (gpt/backend.h: fill every field)");
  const std::string name = be.name();
  // The fused ops default to the pair they fuse: the table's own ops, copied now, so that
  // the default runs exactly what the backend's two ops run (and a profile, which wraps the
  // table later, counts it as one op, as it is one to the model).
  if (!be.residual_layernorm_forward) {
    auto residual = be.residual_forward;
    auto layernorm = be.layernorm_forward;
    be.residual_layernorm_forward = [residual, layernorm](float* residual_out, float* ln_out, float* mean,
                                                          float* rstd, const float* a, const float* b,
                                                          const float* weight, const float* bias, int N, int C) {
      residual(residual_out, a, b, static_cast<int64_t>(N) * C);
      layernorm(ln_out, mean, rstd, residual_out, weight, bias, N, C);
    };
  }
  if (!be.matmul_gelu_forward) {
    auto matmul = be.matmul_forward;
    auto gelu = be.gelu_forward;
    be.matmul_gelu_forward = [matmul, gelu](float* pre, float* out, const float* inp, const float* weight,
                                            const float* bias, int N, int C, int OC) {
      matmul(pre, inp, weight, bias, N, C, OC);
      gelu(out, pre, static_cast<int64_t>(N) * OC);
    };
  }
  // The inference ops default to a clear error: a backend without them says so.
  if (!be.matvec_forward) {
    be.matvec_forward = [name](float*, const float*, const kernels::WeightsView&, const float*, int) {
      NN_CHECK(false, "the " << name << " backend has no inference ops (matvec_forward)");
    };
  }
  if (!be.attention_decode) {
    be.attention_decode = [name](float*, float*, float*, const float*, int, int, int, int, int, int, int) {
      NN_CHECK(false, "the " << name << " backend has no inference ops (attention_decode)");
    };
  }
  if (!be.attention_decode_int8) {
    be.attention_decode_int8 = [name](float*, int8_t*, int8_t*, float*, float*, const float*, int, int, int, int, int,
                                      int, int) { NN_CHECK(false, "int8 KV cache: not on backend " << name); };
  }
  for_each_op(be, [&](const char* op, const auto& fn) {
    NN_CHECK(fn, "the " << name << " backend's table leaves " << op << " empty (gpt/backend.h)");
  });
  NN_CHECK(be.precision && be.memory && be.synchronize && be.measure_peak_flops && be.keeps_preatt &&
               be.fuses_residual_layernorm && be.check_capacity,
           "the " << name << " backend's table leaves a non-op field empty (gpt/backend.h)");
}

// ---- naive: the v1 rung of every ladder, the plain loops -----------------------------------
// The reference every other backend is tested against. The op is the kernel itself where
// the signatures agree; a lambda where the backend checks its input first (the checks the
// nn/ references make) or drops an argument the kernel does not take.

Backend naive_backend() {
  Backend be;
  be.name = [] { return std::string("naive"); };
  be.encoder_forward = [](float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T, int C,
                          int V) {
    nn::check_token_ids(inp, B, T, V);
    kernels::encoder_forward_v1(out, inp, wte, wpe, B, T, C);
  };
  be.encoder_backward = [](float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T, int C,
                           int /*V*/) { kernels::encoder_backward_v1(dwte, dwpe, dout, inp, B, T, C); };
  be.layernorm_forward = kernels::layernorm_forward_v1<float>;
  be.layernorm_backward = kernels::layernorm_backward_v1<float>;
  be.matmul_forward = kernels::linear_forward_v1<float>;
  be.matmul_backward = kernels::linear_backward_v1<float>;
  be.attention_forward = [](float* out, float* preatt, float* att, const float* qkv, int B, int T, int C, int NH) {
    nn::check_attention_sizes(B, T, C, NH);
    kernels::attention_forward_v1(out, preatt, att, qkv, B, T, C, NH);
  };
  be.attention_backward = [](float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                             const float* att, int B, int T, int C, int NH) {
    nn::check_attention_sizes(B, T, C, NH);
    kernels::attention_backward_v1(dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH);
  };
  be.gelu_forward = kernels::gelu_forward_v1<float>;
  be.gelu_backward = kernels::gelu_backward_v1<float>;
  be.residual_forward = kernels::residual_forward_v1<float>;
  be.dropout_forward = [](float* out, float* mask, const float* inp, int64_t n, float p, uint64_t seed) {
    nn::check_dropout_p(p);
    kernels::dropout_forward_v1(out, mask, inp, n, p, seed);
  };
  be.dropout_backward = kernels::dropout_backward_v1<float>;
  be.crossentropy_forward = [](float* probs, float* losses, const float* logits, const int32_t* targets, int N,
                               int V) {
    nn::check_targets(targets, N, V);
    return kernels::crossentropy_forward_v1(probs, losses, logits, targets, N, V);
  };
  be.crossentropy_backward = kernels::crossentropy_backward_v1<float>;
  be.rmsnorm_forward = kernels::rmsnorm_forward_v1<float>;
  be.rmsnorm_backward = kernels::rmsnorm_backward_v1<float>;
  be.rope_forward = kernels::rope_forward_v1<float>;
  be.rope_backward = kernels::rope_backward_v1<float>;
  be.swiglu_forward = kernels::swiglu_forward_v1<float>;
  be.swiglu_backward = kernels::swiglu_backward_v1<float>;
  // v1 materialises each head's (T, T) probabilities: the reference loops
  be.flash_attention_forward = kernels::flash_attention_forward_v1<float>;
  be.flash_attention_backward = kernels::flash_attention_backward_v1<float>;
  // the fused ops: left to fill_defaults, the pair (the diagram's order)
  // inference: the plain-loop references of kernels/decode.h
  be.matvec_forward = kernels::matvec_v1;
  be.attention_decode = kernels::attention_decode_v1;
  be.attention_decode_int8 = kernels::attention_decode_int8_v1;
  be.sum_squares = kernels::sum_squares_v1;
  be.scale = kernels::scale_v1;
  be.adamw_update = kernels::adamw_update_v1;
  fill_defaults(be);
  return be;
}

std::unique_ptr<Backend> make_naive_backend() { return std::make_unique<Backend>(naive_backend()); }

double host_peak_flops(int threads, std::string* what) {
  if (what) *what = "FMA loop on " + std::to_string(threads) + " thread" + (threads == 1 ? "" : "s") + ", measured now";
  return kernels::measure_fma_peak(threads, 0.2);
}

}  // namespace gpt
