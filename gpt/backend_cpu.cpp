// gpt/backend_cpu.cpp: the fast CPU backend, `--backend cpu` (gpt/backend.h).
//
// A table over the kernels/ ladders (cpu_backend() fills a gpt::Backend): each op is a named rung, the one the ladder's
// header, its tests (validated against v1, the naive backend's loop) and `nnlab bench
// <op>` describe. Step into any call to read the kernel:
//   encoder            kernels/encoder.h       v2  rows across threads; dwte by token id
//   layernorm          kernels/layernorm.h     v4  SIMD rows across threads; backward v2
//   matmul             kernels/linear.h        v2  kernels::sgemm (lesson 03's ladder), bias in its write-back
//   attention          kernels/attention.h     v4  a thread per (b, h), 4-row register tiles, SIMD softmax
//                                              rows; backward v5 (whole-register softmax-backward rows);
//                                              neither writes the maps nothing reads (preatt, dpreatt,
//                                              datt: keeps_preatt false, nullptr to the backward)
//   gelu               kernels/gelu.h          v2  SIMD with poly_exp
//   residual, dropout  kernels/residual.h, dropout.h   v2  threads
//   cross-entropy      kernels/crossentropy.h  v2  SIMD rows with poly_exp
//   optimizer          kernels/adamw.h         v2  SIMD AdamW, chunked sum of squares
//   llama (lesson 11)  kernels/rmsnorm.h, rope.h, swiglu.h  v2  SIMD rows across threads;
//                      kernels/flash_attention.h  v3  SIMD tiles across threads
//   fused              residual_layernorm v2, linear_gelu v2
//   inference          kernels/decode.h        the fastest matvec, attention_decode and
//                                              attention_decode_int8 (lesson 15's int8 KV cache)
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
#include "kernels/flash_attention.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/linear.h"
#include "kernels/residual.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "nn/attention.h"
#include "nn/ops.h"
#include "nn/transformer.h"

namespace gpt {

Backend cpu_backend() {
  Backend be;
  be.name = [] { return std::string("cpu"); };
  // The block's last residual add and the next LayerNorm in one pass (residual_layernorm
  // v2): the same values as the pair, one read of the stream fewer (gpt/model.h, Fusion).
  be.fuses_residual_layernorm = [] { return true; };

  be.encoder_forward = [](float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T, int C,
                          int V) {
    nn::check_token_ids(inp, B, T, V);  // every id, before any thread reads a row
    kernels::encoder_forward_v2(out, inp, wte, wpe, B, T, C);
  };
  be.encoder_backward = [](float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T, int C,
                           int /*V*/) { kernels::encoder_backward_v2(dwte, dwpe, dout, inp, B, T, C); };

  be.layernorm_forward = kernels::layernorm_forward_v4;
  be.layernorm_backward = kernels::layernorm_backward_v2;

  be.matmul_forward = kernels::linear_forward_v2;
  be.matmul_backward = kernels::linear_backward_v2;

  be.attention_forward = [](float* out, float* preatt, float* att, const float* qkv, int B, int T, int C, int NH) {
    nn::check_attention_sizes(B, T, C, NH);
    kernels::attention_forward_v4(out, preatt, att, qkv, B, T, C, NH);
  };
  // No preatt (the backward reads att only; a forward given one still writes it), and the
  // backward's dpreatt and datt scratch left untouched: v5 keeps its coefficients itself.
  be.keeps_preatt = [] { return false; };
  be.attention_backward = [](float* dqkv, float* /*dpreatt*/, float* /*datt*/, const float* dout, const float* qkv,
                             const float* att, int B, int T, int C, int NH) {
    nn::check_attention_sizes(B, T, C, NH);
    kernels::attention_backward_v5(dqkv, nullptr, nullptr, dout, qkv, att, B, T, C, NH);
  };

  be.gelu_forward = kernels::gelu_forward_v2;
  be.gelu_backward = kernels::gelu_backward_v2;

  be.residual_forward = kernels::residual_forward_v2;

  be.dropout_forward = [](float* out, float* mask, const float* inp, int64_t n, float p, uint64_t seed) {
    nn::check_dropout_p(p);
    kernels::dropout_forward_v2(out, mask, inp, n, p, seed);
  };
  be.dropout_backward = kernels::dropout_backward_v2;

  be.crossentropy_forward = [](float* probs, float* losses, const float* logits, const int32_t* targets, int N,
                               int V) {
    nn::check_targets(targets, N, V);
    return kernels::crossentropy_forward_v2(probs, losses, logits, targets, N, V);
  };
  be.crossentropy_backward = kernels::crossentropy_backward_v2;

  be.rmsnorm_forward = kernels::rmsnorm_forward_v2;
  be.rmsnorm_backward = kernels::rmsnorm_backward_v2;
  be.rope_forward = kernels::rope_forward_v2;
  be.rope_backward = kernels::rope_backward_v2;
  be.swiglu_forward = kernels::swiglu_forward_v2;
  be.swiglu_backward = kernels::swiglu_backward_v2;
  be.flash_attention_forward = kernels::flash_attention_forward_v3;
  be.flash_attention_backward = kernels::flash_attention_backward_v3;

  be.residual_layernorm_forward = kernels::residual_layernorm_forward_v2;
  be.matmul_gelu_forward = kernels::linear_gelu_forward_v2;

  // inference (lesson 10): the fastest versions of kernels/decode.h
  be.matvec_forward = kernels::matvec;
  be.attention_decode = kernels::attention_decode;
  be.attention_decode_int8 = kernels::attention_decode_int8;

  be.sum_squares = kernels::sum_squares_v2;
  be.scale = kernels::scale_v2;
  be.adamw_update = kernels::adamw_update_v2;
  fill_defaults(be);
  return be;
}

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<Backend>(cpu_backend()); }

}  // namespace gpt
