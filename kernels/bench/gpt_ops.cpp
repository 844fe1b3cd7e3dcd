// kernels/bench/gpt_ops.cpp: the GPT training ops' ladders (kernels/encoder.h, layernorm.h's
// backward and fused residual, linear.h, attention.h, gelu.h, residual.h, dropout.h,
// crossentropy.h, adamw.h) for the harness: every rung validated against v1, the plain
// loops the naive backend runs, then timed. (The layernorm forward ladder has its own
// bench, kernels/bench/layernorm.cpp, against a float64 reference.)
//
// One problem class serves them all (kernels/bench/ladder.h, shared with kernels/bench/llama_ops.cpp): a problem owns its inputs (random, never all-zero, in
// misaligned guarded buffers) and outputs; before each validation every output is reset
// (assigned outputs to NaN, accumulated or in-place ones to their random start), and v1's
// outputs on the same start are the reference.
//
// Sizes: rows x channels "NxC" (element-wise ops: "n"), "NxCxOC" for the linear layer,
// "BxTxCxNH" for attention, "NxV" for cross-entropy.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/bench/ladder.h"
#include "kernels/bench/ops.h"
#include "kernels/crossentropy.h"
#include "kernels/dropout.h"
#include "kernels/encoder.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/linear.h"
#include "kernels/residual.h"

namespace kernels::bench {

using harness::Check;
using harness::GuardedBuffer;
using harness::Tolerance;

namespace {

using namespace kit;  // LadderProblem, ladder, problem, dims_shape, f (kernels/bench/ladder.h)

const std::vector<const char*> kRows = {"N", "C"};
const std::vector<const char*> kElems = {"n"};
const char* kRowsHelp = "NxC, e.g. 768x128";
const char* kElemsHelp = "n, e.g. 1M";

}  // namespace

// ---- encoder ------------------------------------------------------------------------------------
harness::OpBench encoder_bench() {
  return ladder("encoder", "token + position embedding forward: loops vs threads", {"B", "T", "C", "V"},
                "BxTxCxV, e.g. 12x64x128x65", {"12x64x128x65", "8x1024x768x50257"}, {"3x7x37x11"},
                encoder_versions(), [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int B = static_cast<int>(d[0]), T = static_cast<int>(d[1]), C = static_cast<int>(d[2]),
                            V = static_cast<int>(d[3]);
                  const size_t n = d[0] * d[1] * d[2];
                  const int32_t* inp = p->ids(d[0] * d[1], V);
                  const float* wte = p->input(d[3] * d[2]);
                  const float* wpe = p->input(d[1] * d[2]);
                  float* out = p->output("out", n, {0.0, 0.0});
                  p->finish(dims_shape({"B", "T", "C", "V"}, d), f(n), {12.0 * f(n)}, [=](size_t v) {
                    encoder_versions()[v].fn(out, inp, wte, wpe, B, T, C);
                  });
                  return p;
                });
}

harness::OpBench encoder_backward_bench() {
  return ladder("encoder_backward", "embedding backward: loops vs a thread per position and per token id",
                {"B", "T", "C", "V"}, "BxTxCxV, e.g. 12x64x128x65", {"12x64x128x65"}, {"3x7x37x11"},
                encoder_backward_versions(), [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int B = static_cast<int>(d[0]), T = static_cast<int>(d[1]), C = static_cast<int>(d[2]),
                            V = static_cast<int>(d[3]);
                  const size_t n = d[0] * d[1] * d[2];
                  const int32_t* inp = p->ids(d[0] * d[1], V);
                  const float* dout = p->input(n);
                  float* dwte = p->inout("dwte", d[3] * d[2], {1e-6, 1e-6});
                  float* dwpe = p->inout("dwpe", d[1] * d[2], {1e-6, 1e-6});
                  p->finish(dims_shape({"B", "T", "C", "V"}, d), 2.0 * f(n), {20.0 * f(n)}, [=](size_t v) {
                    encoder_backward_versions()[v].fn(dwte, dwpe, dout, inp, B, T, C);
                  });
                  return p;
                });
}

// ---- layernorm backward, residual + layernorm --------------------------------------------------
harness::OpBench layernorm_backward_bench() {
  return ladder("layernorm_backward", "layernorm backward: loops vs SIMD rows in fixed chunks across threads", kRows,
                kRowsHelp, {"768x128", "8192x768"}, {"7x33", "45x77"}, layernorm_backward_versions(),
                [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int N = static_cast<int>(d[0]), C = static_cast<int>(d[1]);
                  const size_t n = d[0] * d[1];
                  const float* dout = p->input(n);
                  const float* inp = p->input(n);
                  const float* weight = p->input(d[1], 0.5f, 1.5f);
                  // mean and rstd as the forward (v1) gives them for inp
                  float* mean = p->input(d[0]);
                  float* rstd = p->input(d[0]);
                  std::vector<float> scratch(n);
                  layernorm_forward_v1(scratch.data(), mean, rstd, inp, weight, static_cast<const float*>(nullptr), N, C);
                  float* dinp = p->inout("dinp", n, {5e-5, 1e-5});
                  float* dweight = p->inout("dweight", d[1], {1e-4, 1e-5});
                  float* dbias = p->inout("dbias", d[1], {1e-4, 1e-5});
                  p->finish(dims_shape(kRows, d), 10.0 * f(n), {16.0 * f(n)}, [=](size_t v) {
                    layernorm_backward_versions()[v].fn(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
                  });
                  return p;
                });
}

harness::OpBench residual_layernorm_bench() {
  return ladder("residual_layernorm", "residual add + layernorm: two ops vs one pass per row", kRows, kRowsHelp,
                {"768x128", "8192x768"}, {"7x33", "45x77"}, residual_layernorm_versions(),
                [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int N = static_cast<int>(d[0]), C = static_cast<int>(d[1]);
                  const size_t n = d[0] * d[1];
                  const float* a = p->input(n);
                  const float* b = p->input(n);
                  const float* weight = p->input(d[1], 0.5f, 1.5f);
                  const float* bias = p->input(d[1]);
                  float* res = p->output("residual", n, {0.0, 0.0});
                  float* ln = p->output("ln", n, {2e-5, 1e-5});
                  float* mean = p->output("mean", d[0], {1e-6, 1e-5});
                  float* rstd = p->output("rstd", d[0], {1e-6, 1e-5});
                  // v1: 12 B/element for the add, 16 for the three-pass layernorm; v2: 16.
                  p->finish(dims_shape(kRows, d), 9.0 * f(n), {28.0 * f(n), 16.0 * f(n)}, [=](size_t v) {
                    residual_layernorm_versions()[v].fn(res, ln, mean, rstd, a, b, weight, bias, N, C);
                  });
                  return p;
                });
}

// ---- linear -------------------------------------------------------------------------------------
namespace {
const std::vector<const char*> kLinear = {"N", "C", "OC"};
const char* kLinearHelp = "NxCxOC, e.g. 768x128x512";
}  // namespace

harness::OpBench linear_bench() {
  return ladder("linear", "linear layer forward (x W^T + b): loops vs kernels::sgemm", kLinear, kLinearHelp,
                {"768x128x384", "768x128x512", "768x512x128", "768x128x65"}, {"13x20x60", "7x33x5"},
                linear_versions(), [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int N = static_cast<int>(d[0]), C = static_cast<int>(d[1]), OC = static_cast<int>(d[2]);
                  const float* inp = p->input(d[0] * d[1]);
                  const float* weight = p->input(d[2] * d[1]);
                  const float* bias = p->input(d[2]);
                  float* out = p->output("out", d[0] * d[2], {1e-5 * f(d[1]) / 16, 1e-5});
                  p->finish(dims_shape(kLinear, d), 2.0 * f(d[0]) * f(d[1]) * f(d[2]),
                            {4.0 * (f(d[0]) * f(d[1]) + f(d[2]) * f(d[1]) + f(d[0]) * f(d[2]))},
                            [=](size_t v) { linear_versions()[v].fn(out, inp, weight, bias, N, C, OC); });
                  return p;
                });
}

harness::OpBench linear_backward_bench() {
  return ladder("linear_backward", "linear layer backward: loops vs two sgemms and column sums", kLinear,
                kLinearHelp, {"768x128x384", "768x128x512", "768x512x128", "768x128x65"}, {"13x20x60", "7x33x5"},
                linear_backward_versions(), [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int N = static_cast<int>(d[0]), C = static_cast<int>(d[1]), OC = static_cast<int>(d[2]);
                  const float* dout = p->input(d[0] * d[2]);
                  const float* inp = p->input(d[0] * d[1]);
                  const float* weight = p->input(d[2] * d[1]);
                  float* dinp = p->output("dinp", d[0] * d[1], {1e-5 * f(d[2]) / 16, 1e-5});
                  float* dweight = p->inout("dweight", d[2] * d[1], {1e-5 * f(d[0]) / 16, 1e-5});
                  float* dbias = p->inout("dbias", d[2], {1e-5 * f(d[0]) / 16, 1e-5});
                  p->finish(dims_shape(kLinear, d), 4.0 * f(d[0]) * f(d[1]) * f(d[2]),
                            {4.0 * (2.0 * f(d[0]) * f(d[2]) + f(d[0]) * f(d[1]) * 2 + f(d[2]) * f(d[1]) * 3)},
                            [=](size_t v) {
                              linear_backward_versions()[v].fn(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
                            });
                  return p;
                });
}

harness::OpBench linear_gelu_bench() {
  return ladder("linear_gelu", "linear + GELU (the MLP's first half): two ops vs sgemm + epilogue", kLinear,
                kLinearHelp, {"768x128x512"}, {"13x20x60", "7x33x5"}, linear_gelu_versions(),
                [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int N = static_cast<int>(d[0]), C = static_cast<int>(d[1]), OC = static_cast<int>(d[2]);
                  const float* inp = p->input(d[0] * d[1]);
                  const float* weight = p->input(d[2] * d[1]);
                  const float* bias = p->input(d[2]);
                  float* pre = p->output("pre", d[0] * d[2], {1e-5 * f(d[1]) / 16, 1e-5});
                  float* out = p->output("out", d[0] * d[2], {1e-5 * f(d[1]) / 16 + 2e-6, 1e-5});
                  p->finish(dims_shape(kLinear, d), 2.0 * f(d[0]) * f(d[1]) * f(d[2]),
                            {4.0 * (f(d[0]) * f(d[1]) + f(d[2]) * f(d[1]) + 2.0 * f(d[0]) * f(d[2]))},
                            [=](size_t v) { linear_gelu_versions()[v].fn(pre, out, inp, weight, bias, N, C, OC); });
                  return p;
                });
}

// ---- attention ----------------------------------------------------------------------------------
namespace {
const std::vector<const char*> kAtt = {"B", "T", "C", "NH"};
const char* kAttHelp = "BxTxCxNH, e.g. 12x64x128x4 (C divisible by NH)";
void check_heads(const std::vector<size_t>& d) {
  if (d[2] % d[3] != 0) throw std::invalid_argument("attention size: C must be divisible by NH; write " + std::string(kAttHelp));
}
double att_bytes(const std::vector<size_t>& d) {
  return 4.0 * (4.0 * f(d[0]) * f(d[1]) * f(d[2]) + 2.0 * f(d[0]) * f(d[3]) * f(d[1]) * f(d[1]));
}
}  // namespace

harness::OpBench attention_bench() {
  return ladder("attention", "causal attention forward: loops vs a thread per head with SIMD rows", kAtt, kAttHelp,
                {"12x64x128x4", "4x256x384x6"}, {"2x7x20x2", "3x13x20x4", "1x33x24x3"}, attention_versions(),
                [](const std::vector<size_t>& d, uint64_t seed) {
                  check_heads(d);
                  auto p = problem(seed);
                  const int B = static_cast<int>(d[0]), T = static_cast<int>(d[1]), C = static_cast<int>(d[2]),
                            NH = static_cast<int>(d[3]);
                  const float* qkv = p->input(d[0] * d[1] * 3 * d[2]);
                  const size_t natt = d[0] * d[3] * d[1] * d[1];
                  float* out = p->output("out", d[0] * d[1] * d[2], {1e-5, 1e-5});
                  float* preatt = p->output("preatt", natt, {1e-5, 1e-5});
                  float* att = p->output("att", natt, {1e-6, 1e-5});
                  // q.k and att.v over the causal half: 2 products x B T^2 / 2 x C x 2 FLOPs
                  p->finish(dims_shape(kAtt, d), 2.0 * f(d[0]) * f(d[1]) * f(d[1]) * f(d[2]), {att_bytes(d)},
                            [=](size_t v) { attention_versions()[v].fn(out, preatt, att, qkv, B, T, C, NH); });
                  return p;
                });
}

harness::OpBench attention_backward_bench() {
  return ladder("attention_backward", "causal attention backward: loops vs a thread per head", kAtt, kAttHelp,
                {"12x64x128x4", "4x256x384x6"}, {"2x7x20x2", "3x13x20x4", "1x33x24x3"},
                attention_backward_versions(), [](const std::vector<size_t>& d, uint64_t seed) {
                  check_heads(d);
                  auto p = problem(seed);
                  const int B = static_cast<int>(d[0]), T = static_cast<int>(d[1]), C = static_cast<int>(d[2]),
                            NH = static_cast<int>(d[3]);
                  const size_t nqkv = d[0] * d[1] * 3 * d[2];
                  const size_t natt = d[0] * d[3] * d[1] * d[1];
                  const float* qkv = p->input(nqkv);
                  const float* dout = p->input(d[0] * d[1] * d[2]);
                  // att as the forward (v1) gives it for qkv
                  float* att = p->input(natt);
                  std::vector<float> o(d[0] * d[1] * d[2]), pre(natt);
                  attention_forward_v1(o.data(), pre.data(), att, qkv, B, T, C, NH);
                  float* dqkv = p->output("dqkv", nqkv, {2e-5, 1e-5});
                  float* dpreatt = p->output("dpreatt", natt, {1e-5, 1e-5});
                  float* datt = p->output("datt", natt, {2e-5, 1e-5});
                  p->finish(dims_shape(kAtt, d), 4.0 * f(d[0]) * f(d[1]) * f(d[1]) * f(d[2]), {2.0 * att_bytes(d)},
                            [=](size_t v) {
                              attention_backward_versions()[v].fn(dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH);
                            });
                  return p;
                });
}

// ---- element-wise: GELU, residual, dropout -------------------------------------------------------
harness::OpBench gelu_bench() {
  return ladder("gelu", "tanh-GELU forward: std::tanh loop vs SIMD poly_exp", kElems, kElemsHelp, {"384K", "16M"},
                {"1003", "77"}, gelu_versions(), [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int64_t n = static_cast<int64_t>(d[0]);
                  const float* inp = p->input(d[0], -6.0f, 6.0f);
                  float* out = p->output("out", d[0], {2e-6, 1e-5});
                  p->finish(dims_shape(kElems, d), 0.0, {8.0 * f(d[0])},
                            [=](size_t v) { gelu_versions()[v].fn(out, inp, n); });
                  return p;
                });
}

harness::OpBench gelu_backward_bench() {
  return ladder("gelu_backward", "tanh-GELU backward: std::tanh loop vs SIMD poly_exp", kElems, kElemsHelp,
                {"384K", "16M"}, {"1003", "77"}, gelu_backward_versions(),
                [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int64_t n = static_cast<int64_t>(d[0]);
                  const float* dout = p->input(d[0]);
                  const float* inp = p->input(d[0], -6.0f, 6.0f);
                  float* dinp = p->output("dinp", d[0], {5e-6, 1e-5});
                  p->finish(dims_shape(kElems, d), 0.0, {12.0 * f(d[0])},
                            [=](size_t v) { gelu_backward_versions()[v].fn(dinp, dout, inp, n); });
                  return p;
                });
}

harness::OpBench residual_bench() {
  return ladder("residual", "residual add: the loop vs threads", kElems, kElemsHelp, {"96K", "16M"}, {"1003", "77"},
                residual_versions(), [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int64_t n = static_cast<int64_t>(d[0]);
                  const float* a = p->input(d[0]);
                  const float* b = p->input(d[0]);
                  float* out = p->output("out", d[0], {0.0, 0.0});
                  p->finish(dims_shape(kElems, d), f(d[0]), {12.0 * f(d[0])},
                            [=](size_t v) { residual_versions()[v].fn(out, a, b, n); });
                  return p;
                });
}

harness::OpBench dropout_bench() {
  return ladder("dropout", "inverted dropout forward (p = 0.2): the loop vs threads", kElems, kElemsHelp,
                {"96K", "16M"}, {"1003", "77"}, dropout_versions(), [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int64_t n = static_cast<int64_t>(d[0]);
                  const float* inp = p->input(d[0]);
                  float* out = p->output("out", d[0], {0.0, 0.0});
                  float* mask = p->output("mask", d[0], {0.0, 0.0});
                  const uint64_t dseed = seed + 99;
                  p->finish(dims_shape(kElems, d), 0.0, {12.0 * f(d[0])},
                            [=](size_t v) { dropout_versions()[v].fn(out, mask, inp, n, 0.2f, dseed); });
                  return p;
                });
}

harness::OpBench dropout_backward_bench() {
  return ladder("dropout_backward", "dropout backward: the loop vs threads", kElems, kElemsHelp, {"96K", "16M"},
                {"1003", "77"}, dropout_backward_versions(), [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int64_t n = static_cast<int64_t>(d[0]);
                  const float* dout = p->input(d[0]);
                  const float* mask = p->input(d[0], 0.0f, 1.25f);
                  float* dinp = p->output("dinp", d[0], {0.0, 0.0});
                  p->finish(dims_shape(kElems, d), f(d[0]), {12.0 * f(d[0])},
                            [=](size_t v) { dropout_backward_versions()[v].fn(dinp, dout, mask, n); });
                  return p;
                });
}

// ---- cross-entropy --------------------------------------------------------------------------------
namespace {
const std::vector<const char*> kCe = {"N", "V"};
const char* kCeHelp = "NxV, e.g. 768x65";
}  // namespace

harness::OpBench crossentropy_bench() {
  return ladder("crossentropy", "softmax + cross-entropy forward: loops with std::exp vs SIMD rows", kCe, kCeHelp,
                {"768x65", "1024x50257"}, {"13x65", "5x1003"}, crossentropy_versions(),
                [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int N = static_cast<int>(d[0]), V = static_cast<int>(d[1]);
                  const size_t n = d[0] * d[1];
                  const float* logits = p->input(n, -4.0f, 4.0f);
                  const int32_t* targets = p->ids(d[0], V);
                  float* probs = p->output("probs", n, {1e-6, 1e-5});
                  float* losses = p->output("losses", d[0], {1e-5, 1e-5});
                  float* mean = p->output("mean loss", 1, {1e-5, 1e-5});
                  p->finish(dims_shape(kCe, d), 0.0, {8.0 * f(n)}, [=](size_t v) {
                    mean[0] = crossentropy_versions()[v].fn(probs, losses, logits, targets, N, V);
                  });
                  return p;
                });
}

harness::OpBench crossentropy_backward_bench() {
  return ladder("crossentropy_backward", "softmax + cross-entropy backward: loops vs rows across threads", kCe,
                kCeHelp, {"768x65", "1024x50257"}, {"13x65", "5x1003"}, crossentropy_backward_versions(),
                [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int N = static_cast<int>(d[0]), V = static_cast<int>(d[1]);
                  const size_t n = d[0] * d[1];
                  const float* probs = p->input(n, 0.0f, 1.0f);
                  const int32_t* targets = p->ids(d[0], V);
                  float* dlogits = p->output("dlogits", n, {1e-7, 1e-5});
                  p->finish(dims_shape(kCe, d), 0.0, {8.0 * f(n)}, [=](size_t v) {
                    crossentropy_backward_versions()[v].fn(dlogits, probs, targets, N, V, 1.0f);
                  });
                  return p;
                });
}

// ---- the optimizer ---------------------------------------------------------------------------------
harness::OpBench adamw_bench() {
  return ladder("adamw", "AdamW over a flat buffer: the loop vs SIMD blocks across threads", kElems, kElemsHelp,
                {"800K", "16M"}, {"1003", "77"}, adamw_versions(), [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int64_t n = static_cast<int64_t>(d[0]);
                  const float* g = p->input(d[0]);
                  float* param = p->inout("p", d[0], {1e-6, 1e-5});
                  float* m = p->inout("m", d[0], {1e-7, 1e-5}, -0.1f, 0.1f);
                  float* vv = p->inout("v", d[0], {1e-9, 1e-5}, 0.0f, 0.01f);
                  p->finish(dims_shape(kElems, d), 0.0, {28.0 * f(d[0])}, [=](size_t v) {
                    adamw_versions()[v].fn(param, g, m, vv, n, 1e-3f, 0.9f, 0.99f, 1e-8f, 0.1f, 3);
                  });
                  return p;
                });
}

harness::OpBench sum_squares_bench() {
  return ladder("sum_squares", "sum of squares (gradient norm): one double sum vs fixed chunks across threads",
                kElems, kElemsHelp, {"800K", "16M"}, {"1003", "77", "40000"}, sum_squares_versions(),
                [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int64_t n = static_cast<int64_t>(d[0]);
                  const float* g = p->input(d[0]);
                  float* s = p->output("sum", 1, {0.0, 1e-6});
                  p->finish(dims_shape(kElems, d), 2.0 * f(d[0]), {4.0 * f(d[0])}, [=](size_t v) {
                    s[0] = static_cast<float>(sum_squares_versions()[v].fn(g, n));
                  });
                  return p;
                });
}

harness::OpBench scale_bench() {
  return ladder("scale", "x *= s (gradient clipping): the loop vs threads", kElems, kElemsHelp, {"800K", "16M"},
                {"1003", "77"}, scale_versions(), [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int64_t n = static_cast<int64_t>(d[0]);
                  float* x = p->inout("x", d[0], {0.0, 0.0});
                  p->finish(dims_shape(kElems, d), f(d[0]), {8.0 * f(d[0])},
                            [=](size_t v) { scale_versions()[v].fn(x, 0.75f, n); });
                  return p;
                });
}

}  // namespace kernels::bench
