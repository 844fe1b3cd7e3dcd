// Lesson 15's model compression (gpt/compress.h): the evaluation path equals gpt::evaluate when
// nothing is compressed; SmoothQuant leaves the fp32 model's logits unchanged and lowers W8A8's
// error on an outlier channel; W8A8 and the int8 KV cache stay near fp32 without equalling it;
// GPTQ's single-column update matches a hand computation, its layer error is at most RTN's, its
// int3 levels are in [-3, 3]; BitNet's ternary rounding of a known matrix; one STE step applies
// the ternary model's gradient to the latents; ternary training lowers the loss. BitNet's int8
// activations (W1.58A8): the hooked forward equals one whose Linears quantise their inputs with
// quantize_rows_int8 explicitly (gpt2 and llama, every fusion, recomputation), its gradient is
// the straight-through estimator's (central differences of the surrogate x + fixed (x_q - x)),
// training lowers the loss, and a --ternary-a8 run resumes exactly and refuses a mismatch.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gpt/backend.h"
#include "gpt/compress.h"
#include "gpt/infer.h"
#include "gpt/model.h"
#include "gpt/train.h"
#include "io/text.h"
#include "kernels/int8_gemm.h"
#include "kernels/weight_format.h"
#include "nn/rng.h"
#include "tests/gpt_test_options.h"
#include "tests/test_util.h"

namespace {

gpt::GPT tiny_model(uint64_t seed, int C = 32) {
  gpt::GPTConfig c;
  c.vocab_size = 13;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = C;
  gpt::GPT m = gpt::gpt_create(c);
  gpt::gpt_init_weights(m, seed);
  // LayerNorms 1/0 and biases 0 at initialisation: make them random, so smoothing's division
  // of the norm's weight and bias is a real check
  nn::Rng rng(seed + 1);
  for (const gpt::ParamSlice& s : m.slices) {
    if (s.shape.size() == 1) {
      const bool norm_w = s.name.find("ln_") != std::string::npos && s.name.find("weight") != std::string::npos;
      for (int64_t i = 0; i < s.numel; ++i) m.params_memory.data()[s.offset + i] = (norm_w ? 1.0f : 0.0f) + rng.normal(0.0f, 0.2f);
    }
  }
  return m;
}

std::vector<int32_t> token_stream(int n, int V, uint64_t seed) {
  nn::Rng rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng.next_u32() % static_cast<uint32_t>(V));
  return t;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0.0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, static_cast<double>(std::fabs(a[i] - b[i])));
  return d;
}
double max_abs(const std::vector<float>& a) {
  double d = 0.0;
  for (float x : a) d = std::max(d, static_cast<double>(std::fabs(x)));
  return d;
}

std::vector<float> fp32_logits(gpt::GPT& m, gpt::Backend& be, const std::vector<int32_t>& in, int B, int T) {
  gpt::gpt_forward(m, be, in.data(), nullptr, B, T);
  const size_t n = static_cast<size_t>(B) * T * m.config.vocab_size;
  return std::vector<float>(m.acts.logits, m.acts.logits + n);
}

// ||X W^T - X Q^T||_F^2 for X (n, cols)
double layer_error(const std::vector<float>& X, int n, const std::vector<float>& W, const std::vector<float>& Q, int rows,
                   int cols) {
  double e = 0.0;
  for (int i = 0; i < n; ++i) {
    for (int r = 0; r < rows; ++r) {
      double d = 0.0;
      for (int j = 0; j < cols; ++j) d += static_cast<double>(X[i * cols + j]) * (W[r * cols + j] - Q[r * cols + j]);
      e += d * d;
    }
  }
  return e;
}

}  // namespace

TEST_CASE("compress: evaluate_compressed with nothing compressed is gpt::evaluate's loss", "[compress]") {
  auto be = gpt::make_cpu_backend();
  gpt::GPT m = tiny_model(3);
  const std::vector<int32_t> toks = token_stream(400, m.config.vocab_size, 5);
  const float ref = gpt::evaluate(m, *be, toks, 3, 16, 4, 11, 3);
  const float got = gpt::evaluate_compressed(m, *be, toks, 3, 16, 4, 11, 3, {});
  CHECK(got == Approx(ref).epsilon(1e-6));
}

TEST_CASE("compress: calibration statistics are those of the Linear inputs", "[compress]") {
  auto be = gpt::make_cpu_backend();
  gpt::GPT m = tiny_model(4);
  const std::vector<int32_t> toks = token_stream(300, m.config.vocab_size, 6);
  const gpt::Calibration cal = gpt::calibrate(m, *be, toks, 2, 16, 1, 9);
  REQUIRE(cal.layers.size() == 8);
  // the same batch through gpt_forward: h.1's fc input is ln2, its fcproj input fch_gelu
  std::vector<int32_t> x, y;
  gpt::get_batch(toks, 2, 16, 9, 7, 0, x, y);
  gpt::gpt_forward(m, *be, x.data(), nullptr, 2, 16);
  const int C = m.config.n_embd, H = 4 * C, N = 32;
  const float* ln2 = m.acts.ln2 + static_cast<int64_t>(1) * N * C;
  const float* gelu = m.acts.fch_gelu + static_cast<int64_t>(1) * N * H;
  const gpt::LinearStats& fc = cal.at(gpt::Linear::fc, 1);
  const gpt::LinearStats& proj = cal.at(gpt::Linear::fcproj, 1);
  CHECK(fc.rows == N);
  CHECK(proj.in == H);
  for (int j = 0; j < C; j += 7) {
    float amax = 0.0f;
    double g = 0.0;
    for (int n = 0; n < N; ++n) {
      amax = std::max(amax, std::fabs(ln2[n * C + j]));
      g += static_cast<double>(ln2[n * C + j]) * ln2[n * C + 3];
    }
    CHECK(fc.absmax[static_cast<size_t>(j)] == Approx(amax).epsilon(1e-5));
    CHECK(fc.gram[static_cast<size_t>(j) * C + 3] == Approx(g / N).epsilon(1e-4).margin(1e-6));
  }
  float amax = 0.0f;
  for (int n = 0; n < N; ++n) amax = std::max(amax, std::fabs(gelu[n * H + 100]));
  CHECK(proj.absmax[100] == Approx(amax).epsilon(1e-5));
  const gpt::OutlierStats o = gpt::outlier_stats(fc);
  CHECK(o.max_over_median >= 1.0);
  CHECK(o.kurtosis > 0.0);
}

TEST_CASE("compress: SmoothQuant keeps the fp32 logits and lowers W8A8's error on an outlier channel", "[compress]") {
  auto be = gpt::make_cpu_backend();
  gpt::GPT m = tiny_model(7, 64);
  // an outlier channel: LN1 and LN2 of every layer scale channel 5 by 40 (what trained
  // transformers grow, Dettmers et al. 2022)
  for (int l = 0; l < m.config.n_layer; ++l) {
    gpt::ParameterTensors p = gpt::layer_params(m.params, m.config, l);
    p.ln1w[5] *= 40.0f;
    p.ln2w[5] *= 40.0f;
  }
  const std::vector<int32_t> toks = token_stream(600, m.config.vocab_size, 8);
  std::vector<int32_t> in(toks.begin(), toks.begin() + 2 * 16);
  const std::vector<float> ref = fp32_logits(m, *be, in, 2, 16);
  const std::vector<float> w8_plain = gpt::compressed_logits(m, *be, in.data(), 2, 16, {true, false});
  const gpt::Calibration cal = gpt::calibrate(m, *be, toks, 4, 16, 4, 1, /*gram=*/false);
  gpt::GPT s = m;
  gpt::smooth_model(s, cal, 0.5f);
  const std::vector<float> smoothed = fp32_logits(s, *be, in, 2, 16);
  CHECK(max_abs_diff(smoothed, ref) <= 1e-4 * std::max(1.0, max_abs(ref)));
  // the weights did change (a real transformation)
  CHECK(gpt::layer_params(s.params, s.config, 0).ln1w[5] != gpt::layer_params(m.params, m.config, 0).ln1w[5]);
  const std::vector<float> w8_smooth = gpt::compressed_logits(s, *be, in.data(), 2, 16, {true, false});
  const double e_plain = max_abs_diff(w8_plain, ref), e_smooth = max_abs_diff(w8_smooth, ref);
  INFO("W8A8 max logit error: plain " << e_plain << ", smoothed " << e_smooth);
  CHECK(e_plain > 0.0);  // integers, not the fp32 path
  CHECK(e_smooth < e_plain);
}

TEST_CASE("compress: W8A8 and the int8 KV cache stay near fp32", "[compress]") {
  auto be = gpt::make_cpu_backend();
  gpt::GPT m = tiny_model(9);
  const std::vector<int32_t> in = token_stream(48, m.config.vocab_size, 2);
  const std::vector<float> ref = fp32_logits(m, *be, in, 3, 16);
  for (const gpt::CompressedEval e : {gpt::CompressedEval{true, false}, gpt::CompressedEval{false, true}}) {
    const std::vector<float> got = gpt::compressed_logits(m, *be, in.data(), 3, 16, e);
    const double d = max_abs_diff(got, ref);
    INFO("w8a8 " << e.w8a8 << " kv_int8 " << e.kv_int8 << ": max |logit diff| " << d << " of max " << max_abs(ref));
    CHECK(d > 0.0);
    CHECK(d < 0.05 * max_abs(ref));
  }
}

TEST_CASE("compress: int8 KV round trip per head and the cache's bytes per token", "[compress]") {
  std::vector<float> x = {1.0f, -0.5f, 0.25f, 0.0f, 10.0f, 3.0f, -10.0f, 0.1f};
  const std::vector<float> orig = x;
  gpt::quantize_dequantize_heads_int8(x.data(), 2, 4);
  // head 0: scale 1/127: -0.5 -> round(-63.5) = -64 (ties to even) -> -64/127
  CHECK(x[0] == Approx(1.0f));
  CHECK(x[1] == Approx(-64.0f / 127.0f));
  CHECK(x[2] == Approx(32.0f / 127.0f));
  CHECK(x[3] == 0.0f);
  // head 1: its own scale 10/127
  CHECK(x[4] == Approx(10.0f));
  CHECK(x[5] == Approx(38.0f * 10.0f / 127.0f));
  for (size_t i = 0; i < x.size(); ++i) CHECK(std::fabs(x[i] - orig[i]) <= (i < 4 ? 0.5f / 127.0f : 5.0f / 127.0f) + 1e-6f);
  gpt::GPTConfig c;  // 4 layers, 4 heads, 128 wide
  CHECK(gpt::kv_bytes_per_token(c, false) == 2 * 4 * 128 * 4);
  CHECK(gpt::kv_bytes_per_token(c, true) == 2 * 4 * (128 + 4 * 4));
}

TEST_CASE("compress: GPTQ's one-column update matches the hand computation", "[compress]") {
  // W (1, 2), H = [[a, b], [b, c]], no dampening, 3 bits, one scale per row s = 1.4 / 3.
  // Column 0: q0 = round(0.52 / s) = 1; the optimal change of column 1 given column 0's
  // error e0 = w0 - q0 s minimises [e0, d] H [e0, d]^T: d = -b e0 / c, so w1' = w1 + b e0 / c.
  const float w0 = 0.52f, w1 = 1.4f;
  const double a = 100.0, b = -7.0, c = 1.0;
  std::vector<float> W = {w0, w1};
  const std::vector<double> H = {a, b, b, c};
  gpt::GptqOptions o;
  o.bits = 3;
  o.group = 0;
  o.damp = 0.0;
  std::vector<int8_t> q(2);
  std::vector<float> sc(1);
  gpt::gptq_quantize(W.data(), 1, 2, H.data(), o, q.data(), sc.data());
  const float s = 1.4f / 3.0f;
  CHECK(sc[0] == Approx(s));
  const double e0 = w0 - 1.0 * s;
  const double w1p = w1 + b * e0 / c;  // 1.0267
  const int q1 = static_cast<int>(std::nearbyint(w1p / s));  // 2 (RTN: 3)
  CHECK(q1 == 2);
  CHECK(q[0] == 1);
  CHECK(q[1] == q1);
  CHECK(W[0] == Approx(s));
  CHECK(W[1] == Approx(static_cast<float>(q1) * s));
  std::vector<float> R = {w0, w1};
  o.gptq = false;
  gpt::gptq_quantize(R.data(), 1, 2, nullptr, o);
  CHECK(R[1] == Approx(3 * s));
}

TEST_CASE("compress: GPTQ's layer output error is at most RTN's and its levels are in range", "[compress]") {
  const int rows = 24, cols = 64, n = 256;
  nn::Rng rng(42);
  // correlated inputs with a few large channels: where error compensation pays
  std::vector<float> X(static_cast<size_t>(n) * cols), W(static_cast<size_t>(rows) * cols);
  for (int i = 0; i < n; ++i) {
    const float shared = rng.normal();
    for (int j = 0; j < cols; ++j) X[static_cast<size_t>(i) * cols + j] = (j % 9 == 0 ? 4.0f : 1.0f) * (0.7f * shared + rng.normal());
  }
  for (auto& w : W) w = rng.normal(0.0f, 0.1f);
  std::vector<double> H(static_cast<size_t>(cols) * cols, 0.0);
  for (int i = 0; i < n; ++i)
    for (int p = 0; p < cols; ++p)
      for (int r = 0; r < cols; ++r) H[static_cast<size_t>(p) * cols + r] += static_cast<double>(X[i * cols + p]) * X[i * cols + r] / n;
  struct Case {
    int bits, group;
  };
  for (const Case k : {Case{4, 32}, Case{3, 32}, Case{4, 0}, Case{3, 0}}) {
    gpt::GptqOptions o;
    o.bits = k.bits;
    o.group = k.group;
    std::vector<float> G = W, R = W;
    std::vector<int8_t> q(W.size());
    const int ng = k.group > 0 ? cols / k.group : 1;
    std::vector<float> sc(static_cast<size_t>(rows) * ng);
    gpt::gptq_quantize(G.data(), rows, cols, H.data(), o, q.data(), sc.data());
    o.gptq = false;
    gpt::gptq_quantize(R.data(), rows, cols, nullptr, o);
    const double eg = layer_error(X, n, W, G, rows, cols), er = layer_error(X, n, W, R, rows, cols);
    INFO("bits " << k.bits << " group " << k.group << ": GPTQ " << eg << " RTN " << er);
    CHECK(eg <= er);
    const int qmax = (1 << (k.bits - 1)) - 1;
    for (size_t i = 0; i < q.size(); ++i) {
      CHECK(std::abs(static_cast<int>(q[i])) <= qmax);
      const size_t r = i / cols, j = i % cols;
      const float s = sc[r * static_cast<size_t>(ng) + (k.group > 0 ? j / static_cast<size_t>(k.group) : 0)];
      CHECK(G[i] == s * q[i]);  // every weight on the grid: s * q
    }
  }
}

TEST_CASE("compress: ternary absmean rounding of a known matrix", "[compress]") {
  const std::vector<float> W = {0.1f, -0.5f, 0.05f, 1.0f, -0.3f, 0.0f};
  std::vector<float> out(W.size());
  const float gamma = gpt::ternarize(out.data(), W.data(), static_cast<int64_t>(W.size()));
  // mean |W| = 1.95 / 6 = 0.325; W / gamma = 0.31, -1.54, 0.15, 3.08, -0.92, 0
  CHECK(gamma == Approx(0.325f));
  const std::vector<float> want = {0.0f, -gamma, 0.0f, gamma, -gamma, 0.0f};
  for (size_t i = 0; i < W.size(); ++i) CHECK(out[i] == want[i]);
  std::vector<float> zeros(4, 0.0f), z(4, 1.0f);
  CHECK(gpt::ternarize(z.data(), zeros.data(), 4) == 0.0f);
  for (float v : z) CHECK(v == 0.0f);
}

TEST_CASE("compress: one STE step applies the ternary model's gradient to the latents", "[compress]") {
  auto be = gpt::make_cpu_backend();
  gpt::GPT m = tiny_model(12);
  const std::vector<int32_t> toks = token_stream(200, m.config.vocab_size, 3);
  std::vector<int32_t> x, y;
  gpt::get_batch(toks, 2, 16, 1, 0, 0, x, y);
  // by hand: the ternary model's gradient
  gpt::GPT t = gpt::ternary_copy(m);
  gpt::gpt_zero_grad(t);
  gpt::gpt_forward(t, *be, x.data(), y.data(), 2, 16, false);
  gpt::gpt_backward(t, *be);
  const std::vector<float> g = t.grads_memory.to_vector();
  const std::vector<float> latent0 = m.params_memory.to_vector();
  gpt::StepOptions o;
  o.lr = 1e-2f;
  o.grad_clip = 0.0f;
  o.adamw.weight_decay = 0.0f;
  o.train = false;
  const gpt::StepResult r = gpt::ternary_train_step(m, *be, {{x.data(), y.data(), 0}}, 2, 16, o);
  CHECK(r.loss == Approx(t.mean_loss).epsilon(1e-6));
  const std::vector<float> g_step = m.grads_memory.to_vector();
  const std::vector<float> latent1 = m.params_memory.to_vector();
  int checked = 0;
  for (const gpt::ParamSlice& s : m.slices) {
    for (int64_t i = s.offset; i < s.offset + s.numel; ++i) {
      REQUIRE(g_step[static_cast<size_t>(i)] == Approx(g[static_cast<size_t>(i)]).margin(1e-7));
      // AdamW's first step: m = (1-b1) g, v = (1-b2) g^2, bias-corrected: lr g / (|g| + eps)
      const double gi = g[static_cast<size_t>(i)];
      const double mh = (1 - o.adamw.beta1) * gi / (1 - o.adamw.beta1);
      const double vh = (1 - o.adamw.beta2) * gi * gi / (1 - o.adamw.beta2);
      const double want = latent0[static_cast<size_t>(i)] - o.lr * mh / (std::sqrt(vh) + o.adamw.eps);
      REQUIRE(latent1[static_cast<size_t>(i)] == Approx(want).margin(1e-5));
      ++checked;
    }
  }
  CHECK(checked == m.num_params);
  // the latents stay fp32 (not ternary): the first qkv matrix has more than 3 distinct values
  const gpt::ParamSlice* qkv = nullptr;
  for (const auto& s : m.slices)
    if (s.name == "h.0.attn.c_attn.weight") qkv = &s;
  REQUIRE(qkv != nullptr);
  std::vector<float> vals(latent1.begin() + qkv->offset, latent1.begin() + qkv->offset + qkv->numel);
  std::sort(vals.begin(), vals.end());
  CHECK(std::unique(vals.begin(), vals.end()) - vals.begin() > 3);
}

TEST_CASE("compress: ternary (BitNet b1.58) training lowers the loss of a tiny model", "[compress]") {
  auto be = gpt::make_cpu_backend();
  gpt::GPT m = tiny_model(21);
  // a learnable text: a repeating pattern
  std::vector<int32_t> toks;
  for (int i = 0; i < 400; ++i) toks.push_back(static_cast<int32_t>((i * 5 + i / 7) % m.config.vocab_size));
  gpt::StepOptions o;
  o.lr = 3e-3f;
  std::vector<int32_t> x, y;
  gpt::get_batch(toks, 4, 16, 1, 9, 0, x, y);
  gpt::GPT t0 = gpt::ternary_copy(m);
  const float before = gpt::evaluate(t0, *be, toks, 4, 16, 2, 5, 1);
  for (int step = 0; step < 40; ++step) {
    gpt::get_batch(toks, 4, 16, 1, 0, static_cast<uint64_t>(step), x, y);
    gpt::ternary_train_step(m, *be, {{x.data(), y.data(), 0}}, 4, 16, o);
  }
  gpt::GPT t = gpt::ternary_copy(m);
  const float after = gpt::evaluate(t, *be, toks, 4, 16, 2, 5, 1);
  INFO("ternary model loss " << before << " -> " << after);
  CHECK(after < before - 0.3f);
}

TEST_CASE("compress: a --ternary run saves its latents and flag, and resumes exactly", "[compress]") {
  testing::TempDir dir("compress-ternary");
  const std::string corpus = testing::repeated_corpus(dir);
  gpt::TrainOptions o = testing::tiny_train_options(dir, corpus);
  o.ternary = true;
  o.out_dir = dir.file("full");
  std::ostringstream sink;
  const gpt::TrainResult full = gpt::train(o, sink);
  REQUIRE(full.step_losses.size() == 8);
  gpt::TrainOptions plain = o;
  plain.ternary = false;
  plain.out_dir = dir.file("plain");
  const gpt::TrainResult fp = gpt::train(plain, sink);
  CHECK(fp.step_losses[1] != full.step_losses[1]);  // the flag changes what is trained
  // interrupted at step 4, resumed to 8: the same losses (latents and AdamW state saved)
  const gpt::TrainOptions resumed = testing::check_resume_exact(o, full, dir, sink);
  CHECK(gpt::load_checkpoint(resumed.resume).state.ternary);
  gpt::TrainOptions wrong = resumed;
  wrong.ternary = false;
  wrong.out_dir = dir.file("wrong");
  CHECK_THAT(testing::error_of([&] { gpt::train(wrong, sink); }), Catch::Contains("--ternary"));
  // an fp32 checkpoint says it is not ternary
  CHECK_FALSE(gpt::load_checkpoint((std::filesystem::path(plain.out_dir) / "last.safetensors").string()).state.ternary);
}

// ---- BitNet b1.58's int8 activations (W1.58A8) -------------------------------------------------

namespace {

// A host model in another arch: llama with full attention (int8 activations refuse flash).
gpt::GPT tiny_llama(uint64_t seed) {
  gpt::GPTConfig c;
  c.vocab_size = 13;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  c.arch = gpt::Arch::llama;
  c.bias = false;
  c.attention = gpt::AttentionKind::full;
  gpt::GPT m = gpt::gpt_create(c);
  gpt::gpt_init_weights(m, seed);
  return m;
}

// The reference forward: the model's own block (transformer_forward) with kernels whose Linear
// quantises its input EXPLICITLY with kernels::quantize_rows_int8 and multiplies in plain loops
// (double sums): y[n][o] = b[o] + s_n sum_i q[n][i] W[o][i]. No hook involved.
class ExplicitInt8Kernels final : public gpt::BlockKernels {
 public:
  ExplicitInt8Kernels(gpt::Backend& be, const gpt::GPT& m, int B, int T) : be_(be), m_(m), B_(B), T_(T) {}
  void linear(float* out, const float* inp, const gpt::LinearLayer& w, int N) override {
    std::vector<int8_t> q(static_cast<size_t>(N) * w.in);
    std::vector<float> s(static_cast<size_t>(N));
    kernels::quantize_rows_int8(inp, N, w.in, q.data(), s.data());
    for (int n = 0; n < N; ++n) {
      for (int o = 0; o < w.out; ++o) {
        double acc = 0.0;
        for (int i = 0; i < w.in; ++i) {
          const size_t xi = static_cast<size_t>(n) * w.in + i, wi = static_cast<size_t>(o) * w.in + i;
          acc += static_cast<double>(q[xi]) * w.weight[wi];
        }
        out[static_cast<size_t>(n) * w.out + o] =
            static_cast<float>(acc * s[static_cast<size_t>(n)] + (w.bias != nullptr ? w.bias[o] : 0.0f));
      }
    }
  }
  void linear_gelu(float* pre, float* out, const float* inp, const gpt::LinearLayer& w, int N) override {
    linear(pre, inp, w, N);
    be_.gelu_forward(out, pre, static_cast<int64_t>(N) * w.out);
  }
  void attention(float* out, float* preatt, float* att, float* /*lse*/, const float* qkv, int /*layer*/) override {
    be_.attention_forward(out, preatt, att, qkv, B_, T_, m_.config.n_embd, m_.config.n_head);
  }
  void rope(float* qkv) override { gpt::apply_rope(be_, m_, qkv, B_, T_, 0, false); }

 private:
  gpt::Backend& be_;
  const gpt::GPT& m_;
  int B_, T_;
};

std::vector<float> explicit_int8_logits(const gpt::GPT& m, gpt::Backend& be, const std::vector<int32_t>& in, int B,
                                        int T) {
  const gpt::GPTConfig& c = m.config;
  gpt::ActivationLayout l;
  l.B = B;
  l.T = T;
  l.stacked = false;
  l.preatt = true;
  l.att = true;
  l.masks = false;
  l.loss = true;
  l = gpt::with_config(l, c);
  std::vector<float> acts(static_cast<size_t>(gpt::activation_floats(c, l)), 0.0f);
  const gpt::ActivationTensors A = gpt::activation_tensors(acts.data(), c, l);
  const gpt::ParameterTensors& P = m.params;
  const int N = B * T;
  be.encoder_forward(A.encoded, in.data(), P.wte, P.wpe, B, T, c.n_embd, c.vocab_size);
  ExplicitInt8Kernels k(be, m, B, T);
  gpt::transformer_forward(be, k, c, P, A, l, A.encoded, N, gpt::Dropout{}, /*fuse=*/false);
  std::vector<float> logits(static_cast<size_t>(N) * c.vocab_size);
  be.matmul_forward(logits.data(), A.lnf, gpt::head_weight(P), nullptr, N, c.n_embd, c.vocab_size);
  return logits;
}

// The surrogate whose exact gradient the straight-through estimator is: each Linear input x
// replaced by x + c, c = x_q - x recorded at the base point and then held fixed (so the rounding
// is there in value, and the identity in the derivative). A hook of the same type as
// set_int8_activations', recording or replaying the offsets in call order.
struct Surrogate {
  bool record = true;
  size_t next = 0;
  std::vector<std::vector<float>> offsets;
};
Surrogate g_surrogate;
void surrogate_hook(gpt::Memory& /*memory*/, float* x, int rows, int cols) {
  const size_t n = static_cast<size_t>(rows) * cols;
  if (g_surrogate.record) {
    std::vector<float> q(x, x + n);
    gpt::fake_quantize_rows_int8(q.data(), rows, cols);
    std::vector<float> c(n);
    for (size_t i = 0; i < n; ++i) c[i] = q[i] - x[i];
    g_surrogate.offsets.push_back(std::move(c));
  }
  const std::vector<float>& c = g_surrogate.offsets.at(g_surrogate.next++);
  for (size_t i = 0; i < n; ++i) x[i] += c[i];
}
float surrogate_loss(gpt::GPT& m, gpt::Backend& be, const std::vector<int32_t>& x, const std::vector<int32_t>& y, int B,
                     int T) {
  g_surrogate.next = 0;
  gpt::gpt_forward(m, be, x.data(), y.data(), B, T);
  g_surrogate.record = false;
  return m.mean_loss;
}

}  // namespace

TEST_CASE("compress: fake_quantize_rows_int8 is quantize_rows_int8 then q times s", "[compress]") {
  nn::Rng rng(5);
  const int rows = 3, cols = 37;
  std::vector<float> x(static_cast<size_t>(rows) * cols);
  for (float& v : x) v = rng.normal(0.0f, 1.0f);
  x[5] = 9.0f;          // an outlier: row 0's scale is 9 / 127
  for (int c = 0; c < cols; ++c) x[static_cast<size_t>(2 * cols + c)] = 0.0f;  // an all-zero row stays 0
  std::vector<float> got = x;
  gpt::fake_quantize_rows_int8(got.data(), rows, cols);
  for (int r = 0; r < rows; ++r) {
    float amax = 0.0f;
    for (int c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(x[static_cast<size_t>(r * cols + c)]));
    const float s = amax / 127.0f;
    for (int c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      const float want = s > 0.0f ? std::clamp(std::nearbyint(x[i] / s), -127.0f, 127.0f) * s : 0.0f;
      INFO("row " << r << " col " << c);
      CHECK(got[i] == Approx(want).margin(1e-6));
      CHECK(std::fabs(got[i] - x[i]) <= s / 2 * 1.0001f);  // within half a step
    }
  }
  CHECK(max_abs_diff(got, x) > 1e-3);  // it did round
}

TEST_CASE("compress: int8 activations make each Linear see its input rounded by quantize_rows_int8",
          "[compress]") {
  auto naive = gpt::make_naive_backend();
  auto cpu = gpt::make_cpu_backend();
  for (int arch = 0; arch < 2; ++arch) {
    gpt::GPT m = arch == 0 ? tiny_model(31) : tiny_llama(31);
    // every parameter x 4: logits of order 1, not 0.01, so the rounding's effect is far above
    // the tolerance of the comparisons below
    std::vector<float> p = m.params_memory.to_vector();
    for (float& v : p) v *= 4.0f;
    m.params_memory.upload(p.data(), p.size());
    const int B = 2, T = 16;
    const std::vector<int32_t> in = token_stream(B * T, m.config.vocab_size, 4);
    const std::vector<float> fp = fp32_logits(m, *cpu, in, B, T);
    const std::vector<float> ref = explicit_int8_logits(m, *naive, in, B, T);
    gpt::set_int8_activations(m, true);
    REQUIRE(gpt::has_int8_activations(m));
    const double tol = 1e-5 * (1.0 + max_abs(ref));
    INFO("arch " << gpt::arch_name(m.config.arch) << ": logits up to " << max_abs(ref) << ", fp32 against int8 inputs "
                 << max_abs_diff(fp, ref));
    CHECK(max_abs_diff(fp, ref) > 100 * tol);  // the rounding shows in the logits
    // every forward path: naive and cpu backends, fused and unfused residual + LayerNorm,
    // activation recomputation
    for (gpt::Backend* be : {naive.get(), cpu.get()}) {
      for (gpt::Fusion f : {gpt::Fusion::unfused, gpt::Fusion::fused}) {
        if (arch == 1 && f == gpt::Fusion::fused) continue;  // llama has no fused residual + RMSNorm
        gpt::gpt_forward(m, *be, in.data(), nullptr, B, T, false, 0, f);
        const std::vector<float> got(m.acts.logits, m.acts.logits + ref.size());
        INFO(be->name() << " fusion " << static_cast<int>(f));
        CHECK(max_abs_diff(got, ref) < tol);
      }
    }
    gpt::GPT r = m;
    gpt::gpt_set_recompute(r, true);
    gpt::gpt_forward(r, *cpu, in.data(), nullptr, B, T);
    CHECK(max_abs_diff(std::vector<float>(r.acts.logits, r.acts.logits + ref.size()), ref) < tol);
    // the copies a --ternary-a8 run evaluates keep the rounding; off is fp32 again
    gpt::GPT t = gpt::ternary_copy(m);
    CHECK(gpt::has_int8_activations(t));
    gpt::set_int8_activations(m, false);
    CHECK(max_abs_diff(fp32_logits(m, *cpu, in, B, T), fp) == 0.0);
    // evaluate_compressed runs the model's hook too: its number is gpt::evaluate's
    gpt::set_int8_activations(m, true);
    const std::vector<int32_t> toks = token_stream(300, m.config.vocab_size, 8);
    const float ev = gpt::evaluate(m, *cpu, toks, B, T, 2, 3, 1);
    CHECK(gpt::evaluate_compressed(m, *cpu, toks, B, T, 2, 3, 1, {}) == Approx(ev).epsilon(1e-5));
  }
  // flash attention's backward reads the attention output: refused
  gpt::GPT f = tiny_llama(1);
  f.config.attention = gpt::AttentionKind::flash;
  CHECK_THAT(testing::error_of([&] { gpt::set_int8_activations(f, true); }), Catch::Contains("full attention"));
}

TEST_CASE("compress: the int8-activation gradient is the straight-through estimator's", "[compress]") {
  // The STE gradient (gpt_backward after a hooked forward) against central differences of the
  // surrogate loss (x + c with c = x_q - x fixed: the rounding's value, the identity's
  // derivative), along random +-1 directions over each parameter tensor. The surrogate is smooth,
  // so the differences converge; a backward that read a rounded buffer to differentiate the op
  // before it, or a missing rounding in the forward, would not match.
  auto be = gpt::make_cpu_backend();
  for (int arch = 0; arch < 2; ++arch) {
    gpt::GPT m = arch == 0 ? tiny_model(41) : tiny_llama(41);
    const int B = 2, T = 16;
    const std::vector<int32_t> toks = token_stream(200, m.config.vocab_size, 6);
    std::vector<int32_t> x, y;
    gpt::get_batch(toks, B, T, 1, 0, 0, x, y);
    gpt::GPT q = gpt::ternary_copy(m);  // the weights W1.58A8 trains through, ternary
    gpt::set_int8_activations(q, true);
    gpt::gpt_zero_grad(q);
    gpt::gpt_forward(q, *be, x.data(), y.data(), B, T);
    const float loss_q = q.mean_loss;
    gpt::gpt_backward(q, *be);
    const std::vector<float> g = q.grads_memory.to_vector();
    // the same model with the surrogate hook: the same loss at the base point
    gpt::GPT s = q;
    s.linear_input = surrogate_hook;
    g_surrogate = Surrogate{};
    CHECK(surrogate_loss(s, *be, x, y, B, T) == Approx(loss_q).epsilon(1e-6));
    // and an fp32-activation model's gradient, to show the check can tell them apart
    gpt::GPT plain = q;
    gpt::set_int8_activations(plain, false);
    gpt::gpt_zero_grad(plain);
    gpt::gpt_forward(plain, *be, x.data(), y.data(), B, T);
    gpt::gpt_backward(plain, *be);
    const std::vector<float> g_fp = plain.grads_memory.to_vector();
    const std::vector<float> base = s.params_memory.to_vector();
    nn::Rng rng(77);
    int checked = 0;
    double worst_fp_rel = 0.0;
    for (const gpt::ParamSlice& sl : s.slices) {
      std::vector<float> v(static_cast<size_t>(sl.numel));
      for (float& e : v) e = (rng.next_u32() & 1u) != 0 ? 1.0f : -1.0f;
      double dot = 0.0, dot_fp = 0.0;
      for (int64_t i = 0; i < sl.numel; ++i) {
        dot += static_cast<double>(g[static_cast<size_t>(sl.offset + i)]) * v[static_cast<size_t>(i)];
        dot_fp += static_cast<double>(g_fp[static_cast<size_t>(sl.offset + i)]) * v[static_cast<size_t>(i)];
      }
      const float h = 2e-3f;
      auto at = [&](float sign) {
        std::vector<float> p = base;
        for (int64_t i = 0; i < sl.numel; ++i) {
          p[static_cast<size_t>(sl.offset + i)] += sign * h * v[static_cast<size_t>(i)];
        }
        s.params_memory.upload(p.data(), p.size());
        return static_cast<double>(surrogate_loss(s, *be, x, y, B, T));
      };
      const double fd = (at(1.0f) - at(-1.0f)) / (2.0 * h);
      INFO(gpt::arch_name(m.config.arch) << " " << sl.name << ": STE " << dot << ", differences " << fd << ", fp32 "
                                         << dot_fp);
      // (the differences resolve the loss to its float ulp / 2h, about 6e-5)
      CHECK(std::fabs(dot - fd) <= 2e-4 + 1e-2 * std::fabs(fd));
      worst_fp_rel = std::max(worst_fp_rel, std::fabs(dot - dot_fp) / (std::fabs(dot) + 1e-3));
      ++checked;
    }
    s.params_memory.upload(base.data(), base.size());
    CHECK(checked == static_cast<int>(s.slices.size()));
    CHECK(worst_fp_rel > 1e-3);  // the int8 rounding changes the gradient measurably
    // activation recomputation rounds the recomputed inputs the same way: the same gradients
    // as the stored unfused forward
    gpt::GPT r = q;
    gpt::gpt_zero_grad(q);
    gpt::gpt_forward(q, *be, x.data(), y.data(), B, T, false, 0, gpt::Fusion::unfused);
    gpt::gpt_backward(q, *be);
    gpt::gpt_set_recompute(r, true);
    gpt::gpt_zero_grad(r);
    gpt::gpt_forward(r, *be, x.data(), y.data(), B, T);
    gpt::gpt_backward(r, *be);
    CHECK(max_abs_diff(r.grads_memory.to_vector(), q.grads_memory.to_vector()) == 0.0);
  }
}

TEST_CASE("compress: one W1.58A8 step is the ternary step with rounded inputs", "[compress]") {
  // ternary_train_step on a hooked model: its gradient is the one of the ternary copy with
  // the hook (the test above checks that gradient), applied to the latents
  auto be = gpt::make_cpu_backend();
  gpt::GPT m = tiny_model(12);
  gpt::set_int8_activations(m, true);
  const std::vector<int32_t> toks = token_stream(200, m.config.vocab_size, 3);
  std::vector<int32_t> x, y;
  gpt::get_batch(toks, 2, 16, 1, 0, 0, x, y);
  gpt::GPT t = gpt::ternary_copy(m);
  gpt::gpt_zero_grad(t);
  gpt::gpt_forward(t, *be, x.data(), y.data(), 2, 16, false);
  gpt::gpt_backward(t, *be);
  gpt::GPT plain = gpt::ternary_copy(m);
  gpt::set_int8_activations(plain, false);
  gpt::gpt_forward(plain, *be, x.data(), y.data(), 2, 16, false);
  CHECK(plain.mean_loss != t.mean_loss);
  gpt::StepOptions o;
  o.grad_clip = 0.0f;
  o.train = false;
  const gpt::StepResult r = gpt::ternary_train_step(m, *be, {{x.data(), y.data(), 0}}, 2, 16, o);
  CHECK(r.loss == Approx(t.mean_loss).epsilon(1e-6));
  CHECK(max_abs_diff(m.grads_memory.to_vector(), t.grads_memory.to_vector()) <= 1e-7);
  CHECK(gpt::has_int8_activations(m));
}

TEST_CASE("compress: W1.58A8 training lowers the loss of a tiny model", "[compress]") {
  auto be = gpt::make_cpu_backend();
  gpt::GPT m = tiny_model(21);
  gpt::set_int8_activations(m, true);
  std::vector<int32_t> toks;
  for (int i = 0; i < 400; ++i) toks.push_back(static_cast<int32_t>((i * 5 + i / 7) % m.config.vocab_size));
  gpt::StepOptions o;
  o.lr = 3e-3f;
  std::vector<int32_t> x, y;
  gpt::GPT t0 = gpt::ternary_copy(m);
  const float before = gpt::evaluate(t0, *be, toks, 4, 16, 2, 5, 1);
  for (int step = 0; step < 40; ++step) {
    gpt::get_batch(toks, 4, 16, 1, 0, static_cast<uint64_t>(step), x, y);
    gpt::ternary_train_step(m, *be, {{x.data(), y.data(), 0}}, 4, 16, o);
  }
  gpt::GPT t = gpt::ternary_copy(m);
  REQUIRE(gpt::has_int8_activations(t));
  const float after = gpt::evaluate(t, *be, toks, 4, 16, 2, 5, 1);
  INFO("W1.58A8 model loss " << before << " -> " << after);
  CHECK(after < before - 0.3f);
}

TEST_CASE("compress: a --ternary-a8 run saves its activations key, resumes exactly and refuses a mismatch",
          "[compress]") {
  testing::TempDir dir("compress-ternary-a8");
  const std::string corpus = testing::repeated_corpus(dir);
  gpt::TrainOptions o = testing::tiny_train_options(dir, corpus);
  o.ternary_a8 = true;  // implies ternary weights (o.ternary stays false)
  o.out_dir = dir.file("full");
  std::ostringstream sink;
  const gpt::TrainResult full = gpt::train(o, sink);
  REQUIRE(full.step_losses.size() == 8);
  gpt::TrainOptions tern = o;
  tern.ternary_a8 = false;
  tern.ternary = true;
  tern.out_dir = dir.file("ternary");
  const gpt::TrainResult tr = gpt::train(tern, sink);
  CHECK(tr.step_losses[0] != full.step_losses[0]);  // the rounding changes the first forward already
  // the final val loss is the W1.58A8 model's: evaluate a ternary copy with the hook of the checkpoint
  const std::string full_last = (std::filesystem::path(o.out_dir) / "last.safetensors").string();
  gpt::LoadedCheckpoint fl = gpt::load_checkpoint(full_last);
  CHECK(fl.state.ternary);
  CHECK(fl.state.int8_activations);
  {
    auto be = gpt::make_backend(o.backend);
    const nn::TextCorpus c = nn::load_corpus(corpus, o.val_fraction);
    gpt::GPT w = gpt::ternary_copy(fl.model);
    gpt::set_int8_activations(w, true);
    // the same forward as the trainer's evaluation: the same bits
    const float with = gpt::evaluate(w, *be, c.val, o.batch_size, o.block_size, o.eval_iters, o.seed, 3);
    CHECK(with == full.final_val_loss);
    gpt::set_int8_activations(w, false);
    const float without = gpt::evaluate(w, *be, c.val, o.batch_size, o.block_size, o.eval_iters, o.seed, 3);
    INFO("W1.58A8 val loss " << with << ", the same weights with fp32 activations " << without);
    CHECK(without != with);
    // as_trained (what `nnlab gpt eval` and `sample` run): the same model from the checkpoint alone
    gpt::LoadedCheckpoint again = gpt::load_checkpoint(full_last);
    gpt::as_trained(again);
    CHECK(gpt::has_int8_activations(again.model));
    CHECK(gpt::evaluate(again.model, *be, c.val, o.batch_size, o.block_size, o.eval_iters, o.seed, 3) == with);
    // a --ternary checkpoint: ternary weights, fp32 activations; not the latents
    gpt::LoadedCheckpoint tl = gpt::load_checkpoint((std::filesystem::path(tern.out_dir) / "last.safetensors").string());
    const std::vector<float> latents = tl.model.params_memory.to_vector();
    gpt::as_trained(tl);
    CHECK_FALSE(gpt::has_int8_activations(tl.model));
    CHECK(tl.model.params_memory.to_vector() == gpt::ternary_copy(gpt::load_checkpoint(
                                                     (std::filesystem::path(tern.out_dir) / "last.safetensors").string())
                                                     .model)
                                                     .params_memory.to_vector());
    CHECK(tl.model.params_memory.to_vector() != latents);
  }
  // interrupted at step 4, resumed to 8: the same losses
  const gpt::TrainOptions resumed = testing::check_resume_exact(o, full, dir, sink);
  // a mismatched resume is refused, both ways
  gpt::TrainOptions wrong = resumed;
  wrong.ternary_a8 = false;
  wrong.ternary = true;
  wrong.out_dir = dir.file("wrong");
  CHECK_THAT(testing::error_of([&] { gpt::train(wrong, sink); }), Catch::Contains("--ternary-a8"));
  gpt::TrainOptions wrong2 = o;
  wrong2.resume = (std::filesystem::path(tern.out_dir) / "last.safetensors").string();
  wrong2.max_iters = 9;
  wrong2.out_dir = dir.file("wrong2");
  CHECK_THAT(testing::error_of([&] { gpt::train(wrong2, sink); }), Catch::Contains("without --ternary-a8"));
  CHECK_FALSE(gpt::load_checkpoint(wrong2.resume).state.int8_activations);
  // contradictory options are refused before anything runs
  gpt::TrainOptions contra = o;
  contra.given.insert("ternary");
  contra.ternary = false;
  contra.out_dir = dir.file("contra");
  CHECK_THAT(testing::error_of([&] { gpt::train(contra, sink); }), Catch::Contains("--ternary=false"));
  gpt::TrainOptions flash = o;
  flash.arch = "llama";
  flash.out_dir = dir.file("flash");
  CHECK_THAT(testing::error_of([&] { gpt::train(flash, sink); }), Catch::Contains("--attention full"));
}

// Not a test: the measurements of the report (hidden; run by hand on a trained checkpoint):
//   NNLAB_COMPRESS_CKPT=out/gpt/best.safetensors build/release/bin/nnlab_tests "[compress_report]"
// Prints the validation losses of W8A8 (with and without SmoothQuant), GPTQ vs RTN, and the
// int8 KV cache at several contexts. Skips (and says so) without the variable.
TEST_CASE("compress: report on a trained checkpoint", "[.][compress_report]") {
  const char* path = std::getenv("NNLAB_COMPRESS_CKPT");
  if (path == nullptr) {
    std::printf("SKIPPED: set NNLAB_COMPRESS_CKPT to a checkpoint\n");
    return;
  }
  auto be = gpt::make_cpu_backend();
  gpt::LoadedCheckpoint ck = gpt::load_checkpoint(path);
  gpt::GPT& m = ck.model;
  const nn::TextCorpus corpus = nn::load_corpus("", 0.1);
  REQUIRE(corpus.vocab.size() == m.config.vocab_size);
  const int T = m.config.block_size, B = 8, iters = 8;
  auto val = [&](gpt::GPT& g, const gpt::CompressedEval& e, int t = 0) {
    return gpt::evaluate_compressed(g, *be, corpus.val, B, t > 0 ? t : T, iters, 1337, 3, e);
  };
  const float fp32 = val(m, {});
  gpt::GPT wo8 = gpt::dequantized_copy(m, kernels::WeightFormat::int8);
  const float w8only = gpt::evaluate(wo8, *be, corpus.val, B, T, iters, 1337, 3);
  std::printf("model: %d layers, C %d, context %d; val loss over %d batches of %d x %d\n", m.config.n_layer,
              m.config.n_embd, T, iters, B, T);
  std::printf("fp32                      %.4f\nint8 weight-only (lesson 10, head int8 too) %.4f (%+.4f)\n", fp32, w8only,
              w8only - fp32);
  const gpt::Calibration cal = gpt::calibrate(m, *be, corpus.train, B, T, 4, 1337);
  const char* names[] = {"qkv", "attproj", "fc", "fcproj"};
  for (const gpt::LinearStats& s : cal.layers) {
    const gpt::OutlierStats o = gpt::outlier_stats(s);
    std::printf("  h.%d %-8s in %4d  max/median %6.2f  kurtosis %7.2f  channels > 6 sigma %.3f\n", s.layer,
                names[static_cast<int>(s.which)], s.in, o.max_over_median, o.kurtosis, o.frac_6sigma);
  }
  const float w8a8 = val(m, {true, false});
  std::printf("W8A8 no smoothing         %.4f (%+.4f)\n", w8a8, w8a8 - fp32);
  for (float alpha : {0.0f, 0.25f, 0.5f, 0.65f, 0.8f, 1.0f}) {
    gpt::GPT s = m;
    gpt::smooth_model(s, cal, alpha);
    const float f = val(s, {}), q = val(s, {true, false});
    std::printf("W8A8 SmoothQuant a=%.2f   %.4f (%+.4f)   smoothed fp32 %.5f\n", alpha, q, q - fp32, f);
  }
  struct G {
    int bits, group;
  };
  for (const G g : {G{4, 32}, G{3, 32}, G{4, 0}, G{3, 0}}) {
    for (bool gptq : {false, true}) {
      gpt::GPT q = m;
      gpt::GptqOptions o;
      o.bits = g.bits;
      o.group = g.group;
      o.gptq = gptq;
      const double secs = gpt::gptq_model(q, cal, o);
      const float l = val(q, {});
      std::printf("%s int%d %s  %.4f (%+.4f)  %.2f s\n", gptq ? "GPTQ" : "RTN ", g.bits,
                  g.group > 0 ? "g32   " : "perrow", l, l - fp32, secs);
    }
  }
  gpt::GPT i4 = gpt::dequantized_copy(m, kernels::WeightFormat::int4);
  const float l4 = gpt::evaluate(i4, *be, corpus.val, B, T, iters, 1337, 3);
  std::printf("lesson 10 int4 (head int4 too) %.4f (%+.4f)\n", l4, l4 - fp32);
  gpt::GPT tern = gpt::ternary_copy(m);
  const float lt = val(tern, {});
  std::printf("ternary after training (no STE training)  %.4f (%+.4f)\n", lt, lt - fp32);
  std::printf("KV cache bytes/token: fp32 %lld, int8 %lld\n", static_cast<long long>(gpt::kv_bytes_per_token(m.config, false)),
              static_cast<long long>(gpt::kv_bytes_per_token(m.config, true)));
  for (int t = 32; t <= T; t *= 2) {
    const float a = val(m, {}, t), b = val(m, {false, true}, t);
    std::printf("context %4d: fp32 %.4f  int8 KV %.4f (%+.5f)\n", t, a, b, b - a);
  }
}
