// tests/test_gpt.cpp: the GPT model, its backends, the trainer's pieces (schedule, batches,
// checkpoints, resume, NaN stop, sampling) and the dump/diff tools.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <typeinfo>

#include "gpt/backend.h"
#include "gpt/model.h"
#include "gpt/profile.h"
#include "gpt/train.h"
#include "nn/checkpoint.h"
#include "nn/rng.h"
#include "tests/gpt_test_options.h"
#include "tests/gradcheck_test_util.h"
#include "tests/test_util.h"

namespace {

gpt::GPTConfig tiny_config(float dropout = 0.0f) {
  gpt::GPTConfig c;
  c.vocab_size = 11;
  c.block_size = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 12;
  c.dropout = dropout;
  return c;
}

void random_tokens(std::vector<int32_t>& v, size_t n, int V, uint64_t seed) {
  nn::Rng rng(seed);
  v.resize(n);
  for (auto& t : v) t = static_cast<int32_t>(rng.below(static_cast<uint32_t>(V)));
}

// max |a - b| / max |b|
double rel_err(const float* a, const float* b, int64_t n) {
  double err = 0.0, scale = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    err = std::max(err, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return scale > 0 ? err / scale : err;
}

// A small text corpus file with a few dozen distinct characters.
std::string write_corpus(const testing::TempDir& dir) {
  std::string text;
  const char* lines[] = {"First Citizen:\nBefore we proceed any further, hear me speak.\n",
                         "All:\nSpeak, speak.\n", "First Citizen:\nYou are all resolved rather to die than to famish?\n"};
  for (int i = 0; i < 40; ++i) text += lines[i % 3];
  const std::string path = dir.file("corpus.txt");
  std::ofstream(path) << text;
  return path;
}

using testing::tiny_train_options;

}  // namespace

TEST_CASE("gpt: parameter slices tile the flat buffer exactly once", "[gpt]") {
  const gpt::GPTConfig c = tiny_config();
  const auto slices = gpt::param_slices(c);
  const int64_t n = gpt::num_parameters(c);
  std::vector<int> covered(static_cast<size_t>(n), 0);
  for (const auto& s : slices) {
    int64_t numel = 1;
    for (int64_t d : s.shape) numel *= d;
    REQUIRE(numel == s.numel);
    for (int64_t i = 0; i < s.numel; ++i) covered[static_cast<size_t>(s.offset + i)] += 1;
  }
  REQUIRE(std::all_of(covered.begin(), covered.end(), [](int k) { return k == 1; }));
  // V C + T C + L (12 C^2 + 13 C) + 2 C  (C = 12: 4 LN vectors, qkv, proj, fc, fcproj)
  const int64_t C = c.n_embd, L = c.n_layer;
  CHECK(n == c.vocab_size * C + c.block_size * C + L * (12 * C * C + 13 * C) + 2 * C);
  CHECK(slices.size() == 2 + 12 * static_cast<size_t>(L) + 2);
  CHECK(slices[2].name == "h.0.ln_1.weight");
  CHECK_FALSE(slices[2].decay);
  CHECK(slices[4].name == "h.0.attn.c_attn.weight");
  CHECK(slices[4].decay);
}

TEST_CASE("gpt: bad configs are refused with a reason", "[gpt]") {
  gpt::GPTConfig c = tiny_config();
  c.n_head = 5;
  CHECK_THAT(testing::error_of([&] { gpt::validate(c); }), Catch::Contains("not divisible by n_head"));
  c = tiny_config();
  c.dropout = 1.0f;
  CHECK_THAT(testing::error_of([&] { gpt::validate(c); }), Catch::Contains("dropout"));
  gpt::GPT m = gpt::gpt_create(tiny_config());
  auto be = gpt::make_backend("naive");
  std::vector<int32_t> x(9 * 1, 0);
  CHECK_THAT(testing::error_of([&] { gpt::gpt_forward(m, *be, x.data(), nullptr, 1, 9); }),
             Catch::Contains("exceeds the model's block_size"));
  CHECK_THAT(testing::error_of([&] { gpt::make_backend("gpu"); }), Catch::Contains("choose naive"));
}

TEST_CASE("gpt: the loss of a fresh model is about log(V)", "[gpt]") {
  gpt::GPT m = gpt::gpt_create(tiny_config());
  gpt::gpt_init_weights(m, 7);
  auto be = gpt::make_backend("naive");
  std::vector<int32_t> x, y;
  random_tokens(x, 4 * 8, 11, 1);
  random_tokens(y, 4 * 8, 11, 2);
  gpt::gpt_forward(m, *be, x.data(), y.data(), 4, 8);
  CHECK(m.mean_loss == Approx(std::log(11.0)).epsilon(0.05));
}

TEST_CASE("gpt: backward matches finite differences of the whole model (float, spot checks)", "[gpt]") {
  // The ops are checked one by one in double (tests/test_kernels_gpt_ops.cpp, test_ops.cpp,
  // test_attention.cpp);
  // this checks that model.cpp wires them together right: every parameter kind, both layers,
  // with the forward in the diagram's order and with residual + LayerNorm fused.
  const gpt::Fusion fusion = GENERATE(gpt::Fusion::unfused, gpt::Fusion::fused);
  INFO("fused " << (fusion == gpt::Fusion::fused));
  gpt::GPT m = gpt::gpt_create(tiny_config());
  gpt::gpt_init_weights(m, 3);
  // larger weights than GPT-2's init so every path carries a visible gradient
  nn::Rng rng(5);
  for (float& p : m.params_memory) p += rng.normal(0.0f, 0.2f);
  auto be = gpt::make_backend("naive");
  std::vector<int32_t> x, y;
  random_tokens(x, 3 * 6, 11, 11);
  random_tokens(y, 3 * 6, 11, 12);
  gpt::gpt_zero_grad(m);
  gpt::gpt_forward(m, *be, x.data(), y.data(), 3, 6, false, 0, fusion);
  gpt::gpt_backward(m, *be);
  const std::vector<float> grads = m.grads_memory.to_vector();
  int checked = 0;
  for (const auto& s : m.slices) {
    for (int k = 0; k < 2; ++k) {
      const int64_t i = s.offset + static_cast<int64_t>(rng.below(static_cast<uint32_t>(s.numel)));
      const double numeric = testing::central_difference(m.params_memory[static_cast<size_t>(i)], 1e-2f, [&] {
        gpt::gpt_forward(m, *be, x.data(), y.data(), 3, 6, false, 0, fusion);
        return static_cast<double>(m.mean_loss);
      });
      INFO(s.name << "[" << i - s.offset << "] analytic " << grads[static_cast<size_t>(i)] << " numeric " << numeric);
      CHECK(std::fabs(grads[static_cast<size_t>(i)] - numeric) <= 2e-3 + 0.05 * std::fabs(numeric));
      ++checked;
    }
  }
  CHECK(checked == 2 * static_cast<int>(m.slices.size()));
}

TEST_CASE("gpt: naive and cpu backends agree on logits, loss and every gradient", "[gpt][backend]") {
  for (const auto& [dropout, bias] : {std::pair{0.0f, true}, std::pair{0.2f, true}, std::pair{0.0f, false}}) {
    gpt::GPTConfig c = tiny_config(dropout);
    c.bias = bias;
    c.n_embd = 20;  // not a multiple of the SIMD width
    c.block_size = 7;
    gpt::GPT a = gpt::gpt_create(c);
    gpt::gpt_init_weights(a, 9);
    gpt::GPT b = a;
    auto naive = gpt::make_backend("naive");
    auto cpu = gpt::make_backend("cpu");
    std::vector<int32_t> x, y;
    random_tokens(x, 5 * 7, c.vocab_size, 21);
    random_tokens(y, 5 * 7, c.vocab_size, 22);
    // one training step each (gpt::train_step), the gradients copied out before the clip
    std::vector<float> grads[2];
    gpt::StepResult steps[2];
    for (gpt::GPT* m : {&a, &b}) {
      gpt::Backend& be = m == &a ? *naive : *cpu;
      const int i = m == &a ? 0 : 1;
      gpt::StepOptions so;  // clip 1, lr 1e-3, default AdamW
      so.after_backward = [&](int) { grads[i] = m->grads_memory.to_vector(); };
      steps[i] = gpt::train_step(*m, be, {{x.data(), y.data(), 77}}, 5, 7, so);
    }
    INFO("dropout " << dropout << " bias " << bias);
    CHECK(static_cast<int64_t>(a.slices.size()) == 2 + 12 * c.n_layer + 2 - (bias ? 0 : 6 * c.n_layer + 1));
    CHECK(b.mean_loss == Approx(a.mean_loss).epsilon(1e-5));
    CHECK(steps[1].loss == Approx(steps[0].loss).epsilon(1e-5));
    CHECK(steps[1].grad_norm == Approx(steps[0].grad_norm).epsilon(1e-5));
    const int64_t NV = 5 * 7 * c.vocab_size;
    CHECK(rel_err(b.acts.logits, a.acts.logits, NV) < 1e-5);
    for (const auto& s : a.slices) {
      INFO(s.name);
      CHECK(rel_err(grads[1].data() + s.offset, grads[0].data() + s.offset, s.numel) < 1e-4);
    }
    // and the AdamW step moved both the same way
    CHECK(rel_err(b.params_memory.data(), a.params_memory.data(), a.num_params) < 1e-5);
  }
}

TEST_CASE("gpt: fused residual + LayerNorm gives the diagram's forward and gradients bit for bit", "[gpt][backend]") {
  // Fusion moves where a LayerNorm is computed (LN1 of block l + 1 at the end of block l), not
  // what: the residual add is one exact float add either way and the LayerNorm the same
  // function of the same row, so logits, loss, every activation and every gradient are equal.
  for (const std::string name : {"naive", "cpu"}) {
    for (const auto& [dropout, bias] : {std::pair{0.0f, true}, std::pair{0.3f, false}}) {
      gpt::GPTConfig c = tiny_config(dropout);
      c.bias = bias;
      c.n_layer = 3;
      gpt::GPT ref = gpt::gpt_create(c);
      gpt::gpt_init_weights(ref, 12);
      gpt::GPT fused = ref;
      auto be = gpt::make_backend(name);
      std::vector<int32_t> x, y;
      random_tokens(x, 3 * 8, c.vocab_size, 31);
      random_tokens(y, 3 * 8, c.vocab_size, 32);
      for (gpt::GPT* m : {&ref, &fused}) {
        gpt::gpt_zero_grad(*m);
        gpt::gpt_forward(*m, *be, x.data(), y.data(), 3, 8, /*train=*/true, 5,
                         m == &ref ? gpt::Fusion::unfused : gpt::Fusion::fused);
        gpt::gpt_backward(*m, *be);
      }
      INFO(name << " dropout " << dropout << " bias " << bias);
      CHECK(fused.mean_loss == ref.mean_loss);
      const auto va = gpt::activation_views(ref), vb = gpt::activation_views(fused);
      REQUIRE(va.size() == vb.size());
      for (size_t i = 0; i < va.size(); ++i) {
        INFO(va[i].name);
        int64_t n = 1;
        for (int64_t d : va[i].shape) n *= d;
        CHECK(std::equal(va[i].data, va[i].data + n, vb[i].data));
      }
      CHECK(fused.grads_memory == ref.grads_memory);
    }
  }
}

TEST_CASE("gpt: naive and cpu are complete tables, and fill_defaults fills and names what is missing", "[gpt][backend]") {
  for (const std::string name : {"naive", "cpu"}) {
    const gpt::Backend be = name == "naive" ? gpt::naive_backend() : gpt::cpu_backend();
    CHECK(be.name() == name);
    CHECK(be.precision() == "fp32");
    CHECK(&be.memory() == &gpt::host_memory());
    int ops = 0;
    gpt::for_each_op(be, [&](const char* op, const auto& fn) {
      INFO(name << " " << op);
      CHECK(static_cast<bool>(fn));
      ++ops;
    });
    CHECK(ops == 31);  // every op of gpt/backend.h, once
  }
  // A table with its fused and inference ops left empty: fill_defaults makes the fused ops
  // the table's own pair (bit for bit what the pair computes) and the inference ops errors.
  gpt::Backend t = gpt::cpu_backend();
  t.name = [] { return std::string("partial"); };
  t.residual_layernorm_forward = nullptr;
  t.matmul_gelu_forward = nullptr;
  t.matvec_forward = nullptr;
  t.attention_decode = nullptr;
  gpt::fill_defaults(t);
  const int N = 5, C = 19, OC = 7;
  nn::Rng rng(3);
  std::vector<float> a(N * C), b(N * C), w(C), bias(C), mw(OC * C), mb(OC);
  for (auto* v : {&a, &b, &w, &bias, &mw, &mb}) {
    for (float& x : *v) x = rng.normal(0.0f, 1.0f);
  }
  std::vector<float> res1(N * C), ln1(N * C), mean1(N), rstd1(N), res2(N * C), ln2(N * C), mean2(N), rstd2(N);
  t.residual_layernorm_forward(res1.data(), ln1.data(), mean1.data(), rstd1.data(), a.data(), b.data(), w.data(),
                               bias.data(), N, C);
  t.residual_forward(res2.data(), a.data(), b.data(), N * C);
  t.layernorm_forward(ln2.data(), mean2.data(), rstd2.data(), res2.data(), w.data(), bias.data(), N, C);
  CHECK(res1 == res2);
  CHECK(ln1 == ln2);
  CHECK(rstd1 == rstd2);
  std::vector<float> pre1(N * OC), out1(N * OC), pre2(N * OC), out2(N * OC);
  t.matmul_gelu_forward(pre1.data(), out1.data(), a.data(), mw.data(), mb.data(), N, C, OC);
  t.matmul_forward(pre2.data(), a.data(), mw.data(), mb.data(), N, C, OC);
  t.gelu_forward(out2.data(), pre2.data(), N * OC);
  CHECK(pre1 == pre2);
  CHECK(out1 == out2);
  CHECK_THAT(testing::error_of([&] { t.matvec_forward(nullptr, nullptr, kernels::WeightsView{}, nullptr, 1); }),
             Catch::Contains("the partial backend has no inference ops (matvec_forward)"));
  CHECK_THAT(testing::error_of([&] { t.attention_decode(nullptr, nullptr, nullptr, nullptr, 1, 1, 0, 4, 1, 1, 4); }),
             Catch::Contains("the partial backend has no inference ops (attention_decode)"));
  // an op no default can stand for is named
  gpt::Backend u = gpt::naive_backend();
  u.gelu_backward = nullptr;
  CHECK_THAT(testing::error_of([&] { gpt::fill_defaults(u); }), Catch::Contains("leaves gelu_backward empty"));
}

TEST_CASE("gpt: profiled() wraps every op of any table, counts them, and changes no number", "[gpt][backend]") {
  for (const std::string name : {"naive", "cpu"}) {
    INFO(name);
    auto be = gpt::make_backend(name);
    gpt::Profile prof;
    const gpt::Backend timed = gpt::profiled(*be, prof);
    CHECK(timed.name() == name + " (profiled)");
    CHECK(&timed.memory() == &be->memory());
    CHECK(timed.fuses_residual_layernorm() == be->fuses_residual_layernorm());
    CHECK(timed.keeps_preatt() == be->keeps_preatt());
    // every op of the copy is a new callable (the timing wrapper), none the inner one
    std::vector<const std::type_info*> inner, outer;
    gpt::for_each_op(*be, [&](const char*, const auto& fn) { inner.push_back(&fn.target_type()); });
    gpt::for_each_op(timed, [&](const char*, const auto& fn) { outer.push_back(&fn.target_type()); });
    REQUIRE(inner.size() == outer.size());
    for (size_t i = 0; i < inner.size(); ++i) CHECK(*inner[i] != *outer[i]);

    // one training step on each, same weights and batch: bit-identical loss and weights
    gpt::GPTConfig c = tiny_config(0.1f);
    gpt::GPT m1 = gpt::gpt_create(c);
    gpt::gpt_init_weights(m1, 4);
    gpt::GPT m2 = m1;
    std::vector<int32_t> x, y;
    random_tokens(x, 2 * 8, c.vocab_size, 41);
    random_tokens(y, 2 * 8, c.vocab_size, 42);
    gpt::Backend plain = *be;
    gpt::Backend profiled_copy = timed;
    const gpt::StepResult r1 = gpt::train_step(m1, plain, {{x.data(), y.data(), 5}}, 2, 8, gpt::StepOptions{});
    const gpt::StepResult r2 = gpt::train_step(m2, profiled_copy, {{x.data(), y.data(), 5}}, 2, 8, gpt::StepOptions{});
    CHECK(r1.loss == r2.loss);
    CHECK(r1.grad_norm == r2.grad_norm);
    CHECK(m1.params_memory == m2.params_memory);
    // the rows: the ops the step ran, each counted
    const std::vector<gpt::ProfileRow> rows = prof.rows();
    auto calls = [&](const std::string& op) -> int64_t {
      for (const auto& r : rows) {
        if (r.op == op) return r.calls;
      }
      return 0;
    };
    CHECK(calls("encoder_forward") == 1);
    CHECK(calls("encoder_backward") == 1);
    CHECK(calls("crossentropy_forward") == 1);
    CHECK(calls("attention_forward") == c.n_layer);
    CHECK(calls("adamw_update") >= 1);
    CHECK(calls("matvec_forward") == 0);
    for (const auto& r : rows) CHECK(r.ms >= 0.0);
    prof.reset();
    CHECK(prof.rows().empty());
  }
}

TEST_CASE("gpt: the parameter and activation tables give every pointer, slice and size", "[gpt]") {
  gpt::GPTConfig c = tiny_config(0.1f);
  gpt::GPT m = gpt::gpt_create(c);
  // each row of kParams: its pointer at its first slice, its decay flag on every slice
  for (const gpt::ParamSlice& s : m.slices) {
    REQUIRE(s.spec != nullptr);
    INFO(s.name);
    CHECK(s.decay == s.spec->decay);
    CHECK(s.shape == gpt::shape_of(s.spec->shape, c));
    if (s.layer <= 0) CHECK(m.params.*(s.spec->field) == m.params_memory.data() + s.offset);
    if (s.layer > 0) CHECK(gpt::layer_params(m.params, c, s.layer).*(s.spec->field) == m.params_memory.data() + s.offset);
  }
  CHECK(gpt::letters_of(gpt::kParams[4].shape) == "(3C, C)");
  CHECK(gpt::letters_of(gpt::kActivations[6].shape) == "(B, NH, T, T)");
  CHECK(gpt::letters_of(gpt::kParams[4].shape, gpt::Arch::llama) == "(QKV, C)");
  CHECK(gpt::letters_of(gpt::kParams[10].shape, gpt::Arch::llama) == "(2H, C)");
  CHECK(gpt::letters_of(gpt::kParams[12].shape) == "(C, 4C)");
  // without biases the bias rows have no pointer and no slice
  c.bias = false;
  std::vector<float> flat(static_cast<size_t>(gpt::num_parameters(c)));
  const gpt::ParameterTensors p = gpt::param_tensors(flat.data(), c);
  CHECK(p.qkvb == nullptr);
  CHECK(p.lnfb == nullptr);
  // activations: every held row has a pointer, the rest nullptr; the buffer is exactly used
  std::vector<int32_t> x;
  random_tokens(x, 2 * 8, 11, 1);
  auto be = gpt::make_backend("naive");
  gpt::gpt_forward(m, *be, x.data(), x.data(), 2, 8, /*train=*/true, 3);
  const gpt::ActivationLayout all{2, 8, true, true, true, true, true};
  CHECK(static_cast<int64_t>(m.acts_memory.size()) == gpt::activation_floats(m.config, all));
  CHECK(gpt::memory_breakdown(m.config, 2, 8).activations == gpt::activation_floats(m.config, all) * 4);
  // every row but the other arch's and flash attention's (tests/test_gpt_llama.cpp: llama's)
  for (const auto& row : gpt::kActivations) {
    INFO(row.name);
    const bool other = row.held == gpt::Held::swiglu || row.held == gpt::Held::lse;
    CHECK((m.acts.*(row.field) != nullptr) == !other);
  }
  gpt::ActivationLayout decode = all;
  decode.att = decode.preatt = decode.masks = decode.loss = false;
  const gpt::ActivationTensors d = gpt::activation_tensors(m.acts_memory.data(), m.config, decode);
  CHECK(d.att == nullptr);
  CHECK(d.encoded_mask == nullptr);
  CHECK(d.probs == nullptr);
  CHECK(d.logits != nullptr);
}

TEST_CASE("gpt: dropout is off in eval mode and changes the loss in train mode", "[gpt]") {
  gpt::GPT m = gpt::gpt_create(tiny_config(0.5f));
  gpt::gpt_init_weights(m, 1);
  auto be = gpt::make_backend("naive");
  std::vector<int32_t> x, y;
  random_tokens(x, 16, 11, 3);
  random_tokens(y, 16, 11, 4);
  gpt::gpt_forward(m, *be, x.data(), y.data(), 2, 8, false);
  const float eval1 = m.mean_loss;
  gpt::gpt_forward(m, *be, x.data(), y.data(), 2, 8, false);
  CHECK(m.mean_loss == eval1);
  gpt::gpt_forward(m, *be, x.data(), y.data(), 2, 8, true, 1);
  const float train1 = m.mean_loss;
  gpt::gpt_forward(m, *be, x.data(), y.data(), 2, 8, true, 2);
  CHECK(train1 != eval1);
  CHECK(m.mean_loss != train1);
}

TEST_CASE("gpt: two accumulated half batches give the gradient of the whole batch", "[gpt]") {
  gpt::GPT whole = gpt::gpt_create(tiny_config());
  gpt::gpt_init_weights(whole, 4);
  gpt::GPT halves = whole;
  auto be = gpt::make_backend("cpu");
  std::vector<int32_t> x, y;
  random_tokens(x, 4 * 8, 11, 5);
  random_tokens(y, 4 * 8, 11, 6);
  gpt::gpt_zero_grad(whole);
  gpt::gpt_forward(whole, *be, x.data(), y.data(), 4, 8);
  gpt::gpt_backward(whole, *be);
  gpt::gpt_zero_grad(halves);
  for (int h = 0; h < 2; ++h) {
    gpt::gpt_forward(halves, *be, x.data() + h * 16, y.data() + h * 16, 2, 8);
    gpt::gpt_backward(halves, *be, 0.5f);
  }
  CHECK(rel_err(halves.grads_memory.data(), whole.grads_memory.data(), whole.num_params) < 1e-5);
}

TEST_CASE("gpt: learning-rate schedule: warm-up, cosine, floor", "[gpt]") {
  gpt::TrainOptions o;
  o.lr = 1e-3f;
  o.min_lr = 1e-4f;
  o.warmup_iters = 10;
  o.max_iters = 110;
  CHECK(gpt::learning_rate(o, 0) == Approx(1e-4));
  CHECK(gpt::learning_rate(o, 9) == Approx(1e-3));
  CHECK(gpt::learning_rate(o, 10) == Approx(1e-3));
  CHECK(gpt::learning_rate(o, 60) == Approx(5.5e-4));  // halfway down the cosine
  CHECK(gpt::learning_rate(o, 110) == Approx(1e-4));
  CHECK(gpt::learning_rate(o, 500) == Approx(1e-4));
}

TEST_CASE("gpt: batches are seeded, shifted by one, and independent of history", "[gpt]") {
  std::vector<int32_t> tokens(100);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i);
  std::vector<int32_t> x1, y1, x2, y2;
  gpt::get_batch(tokens, 3, 10, 42, 1, 5, x1, y1);
  gpt::get_batch(tokens, 3, 10, 42, 1, 6, x2, y2);  // another batch in between changes nothing
  gpt::get_batch(tokens, 3, 10, 42, 1, 5, x2, y2);
  CHECK(x1 == x2);
  for (size_t i = 0; i < x1.size(); ++i) CHECK(y1[i] == x1[i] + 1);
  gpt::get_batch(tokens, 3, 10, 43, 1, 5, x2, y2);
  CHECK(x1 != x2);
  CHECK_THAT(testing::error_of([&] { gpt::get_batch(std::vector<int32_t>(5), 1, 10, 1, 1, 0, x1, y1); }),
             Catch::Contains("needs at least 11"));
}

TEST_CASE("gpt: checkpoints round-trip and refuse truncated, corrupt and foreign files", "[gpt][checkpoint]") {
  testing::TempDir dir("gpt-ckpt");
  gpt::GPT m = gpt::gpt_create(tiny_config());
  gpt::gpt_init_weights(m, 8);
  m.m_memory[3] = 0.5f;
  m.adam_t = 42;  // one AdamW step per training step (load_checkpoint checks)
  const nn::CharVocab vocab = nn::build_vocab("abcdefghij\n");
  gpt::TrainState st{42, 1.25f, "corpus.txt"};
  const std::string path = dir.file("c.safetensors");
  gpt::save_checkpoint(path, m, vocab, st);
  const gpt::LoadedCheckpoint ck = gpt::load_checkpoint(path);
  CHECK(ck.model.params_memory == m.params_memory);
  CHECK(ck.model.m_memory == m.m_memory);
  CHECK(ck.model.adam_t == 42);
  CHECK(ck.state.step == 42);
  CHECK(ck.vocab.chars == vocab.chars);
  CHECK(ck.has_optimizer);
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  gpt::GPTConfig nb = tiny_config();
  nb.bias = false;
  gpt::GPT m2 = gpt::gpt_create(nb);
  gpt::gpt_init_weights(m2, 8);
  m2.adam_t = 42;
  gpt::save_checkpoint(dir.file("nobias.safetensors"), m2, vocab, st);
  const gpt::LoadedCheckpoint ck2 = gpt::load_checkpoint(dir.file("nobias.safetensors"));
  CHECK_FALSE(ck2.model.config.bias);
  CHECK(ck2.model.params_memory == m2.params_memory);
  CHECK(ck2.model.num_params == m.num_params - (nb.n_layer * 11 * nb.n_embd + nb.n_embd));  // 11C biases a layer + ln_f's

  auto bytes = testing::read_bytes(path);
  testing::write_bytes(dir.file("trunc.safetensors"), std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(bytes.size() / 2)));
  CHECK_THAT(testing::error_of([&] { gpt::load_checkpoint(dir.file("trunc.safetensors")); }), Catch::Contains("trunc.safetensors"));
  auto corrupt = bytes;
  corrupt[corrupt.size() - 5] ^= 0x40;
  testing::write_bytes(dir.file("corrupt.safetensors"), corrupt);
  CHECK_THAT(testing::error_of([&] { gpt::load_checkpoint(dir.file("corrupt.safetensors")); }), Catch::Contains("checksum"));
  // a safetensors file that is not a GPT checkpoint
  std::vector<nn::Param> params;
  std::vector<float> w(4, 1.0f);
  params.push_back({"w", {4}, w.data(), nullptr});
  nn::save_params(dir.file("other.safetensors"), params);
  CHECK_THAT(testing::error_of([&] { gpt::load_checkpoint(dir.file("other.safetensors")); }), Catch::Contains("not a GPT checkpoint"));
  CHECK_THAT(testing::error_of([&] { gpt::load_checkpoint(dir.file("missing.safetensors")); }), Catch::Contains("missing.safetensors"));
}

TEST_CASE("gpt: a resumed run repeats the uninterrupted run's losses exactly", "[gpt][train]") {
  testing::TempDir dir("gpt-resume");
  const std::string corpus = write_corpus(dir);
  gpt::TrainOptions o = tiny_train_options(dir, corpus);
  std::ostringstream sink;
  const gpt::TrainResult full = gpt::train(o, sink);
  REQUIRE(full.step_losses.size() == 8);

  testing::check_resume_exact(o, full, dir, sink);  // cut after step 4, resumed: the same losses, bit for bit
}

TEST_CASE("gpt: a run that diverges to NaN stops, saves no NaN, and names a checkpoint that is good", "[gpt][train]") {
  testing::TempDir dir("gpt-nan");
  const std::string corpus = write_corpus(dir);
  gpt::TrainOptions o = tiny_train_options(dir, corpus);
  o.max_iters = 4;
  std::ostringstream sink;
  gpt::train(o, sink);
  const std::string best = (std::filesystem::path(o.out_dir) / "best.safetensors").string();
  const std::string last = (std::filesystem::path(o.out_dir) / "last.safetensors").string();
  const auto best_before = testing::read_bytes(best);
  // resumed with settings that diverge within a few steps (measured: the loss is NaN at
  // step 3 of a fresh run): AdamW with beta2 = 0 divides by |g| + 1e-30, no clipping, lr 10;
  // a checkpoint at every step, so the NaN arrives right after a save
  gpt::TrainOptions r = o;
  r.resume = last;
  r.max_iters = 200;
  r.eval_interval = 1;
  r.lr = 10.0f;
  r.min_lr = 1.0f;
  r.warmup_iters = 0;
  r.grad_clip = 0.0f;
  r.beta2 = 0.0f;
  r.eps = 1e-30f;
  const std::string err = testing::error_of([&] { gpt::train(r, sink); });
  INFO(err);
  REQUIRE_THAT(err, Catch::Contains("nan") && Catch::Contains("stopped") && Catch::Contains("The last good checkpoint is " + last + " (step "));
  // what it names is true: last.safetensors holds finite weights, at the step named
  gpt::LoadedCheckpoint good = gpt::load_checkpoint(last);
  for (float w : good.model.params_memory) REQUIRE(std::isfinite(w));
  for (float v : good.model.v_memory) REQUIRE(std::isfinite(v));
  CHECK_THAT(err, Catch::Contains("(step " + std::to_string(good.state.step) + ")"));
  CHECK(good.state.step > 4);
  // and it is good: a finite validation loss (a model whose weights are finite but whose
  // logits overflow would not be)
  const nn::TextCorpus text = nn::load_corpus(corpus, r.val_fraction);
  auto cpu = gpt::make_backend("cpu");
  const float vl = gpt::evaluate(good.model, *cpu, text.val, r.batch_size, good.model.config.block_size, r.eval_iters, r.seed, 3);
  CHECK(std::isfinite(vl));
  // best.safetensors stays a finite model too (replaced, if at all, by a better one)
  gpt::LoadedCheckpoint b = gpt::load_checkpoint(best);
  for (float w : b.model.params_memory) REQUIRE(std::isfinite(w));
  CHECK((testing::read_bytes(best) == best_before || b.state.best_val_loss < 1e9f));
}

TEST_CASE("gpt: sampling is seeded: top-k 1 is greedy: unknown prompt characters are refused", "[gpt]") {
  gpt::GPT m = gpt::gpt_create(tiny_config());
  gpt::gpt_init_weights(m, 2);
  auto be = gpt::make_backend("cpu");
  const nn::CharVocab vocab = nn::build_vocab("abcdefghij\n");
  gpt::SampleOptions o;
  o.prompt = "abc";
  o.tokens = 20;  // longer than block_size: the context window slides
  const std::string s1 = gpt::sample(m, *be, vocab, o);
  CHECK(s1.size() == 20);
  CHECK(gpt::sample(m, *be, vocab, o) == s1);
  o.top_k = 1;
  const std::string topk1 = gpt::sample(m, *be, vocab, o);
  o.top_k = 0;
  o.temperature = 0.0f;
  CHECK(gpt::sample(m, *be, vocab, o) == topk1);
  o.prompt = "abz";
  CHECK_THAT(testing::error_of([&] { gpt::sample(m, *be, vocab, o); }), Catch::Contains("'z'"));
}

TEST_CASE("gpt: dump and diff: identical dumps differ by 0, a changed tensor is named", "[gpt]") {
  testing::TempDir dir("gpt-dump");
  gpt::GPT m = gpt::gpt_create(tiny_config());
  gpt::gpt_init_weights(m, 2);
  auto be = gpt::make_backend("naive");
  std::vector<int32_t> x, y;
  random_tokens(x, 16, 11, 1);
  random_tokens(y, 16, 11, 2);
  gpt::gpt_zero_grad(m);
  gpt::gpt_forward(m, *be, x.data(), y.data(), 2, 8);
  gpt::gpt_backward(m, *be);
  gpt::write_dump(dir.file("a.safetensors"), m);
  m.grads_memory[static_cast<size_t>(m.slices[4].offset)] += 1.0f;
  gpt::write_dump(dir.file("b.safetensors"), m);
  const auto same = gpt::diff_dumps(dir.file("a.safetensors"), dir.file("a.safetensors"));
  REQUIRE(same.size() > 20);
  for (const auto& r : same) CHECK(r.max_rel_err == 0.0);
  const auto rows = gpt::diff_dumps(dir.file("a.safetensors"), dir.file("b.safetensors"));
  for (const auto& r : rows) {
    INFO(r.name);
    CHECK((r.max_rel_err > 0.0) == (r.name == "grad." + m.slices[4].name));
  }
}
