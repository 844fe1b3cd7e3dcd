// tests/test_gpt_llama.cpp: arch = llama (lesson 11) through the whole GPT stack: the tables
// (parameter counts by formula), the model's gradients against finite differences, the naive,
// cpu and cuda (emulated) backends against each other, full vs flash attention, the KV-cache
// decoder against the full forward, checkpoints, resume and the trainer (the cuda backend:
// tests/test_gpt_cuda.cpp). The ops themselves
// are checked one by one in double in tests/test_kernels_llama_ops.cpp and
// tests/test_flash_attention.cpp; PyTorch (Hugging Face Llama's formulas) in
// tests/test_llama_parity.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <omp.h>

#include "gpt/backend.h"
#include "gpt/infer.h"
#include "gpt/model.h"
#include "gpt/train.h"
#include "nn/checkpoint.h"
#include "nn/rng.h"
#include "tests/gradcheck_test_util.h"
#include "tests/gpt_test_options.h"
#include "tests/test_util.h"

namespace {

// A small llama; NKV key/value heads (0: n_head), tied or untied head.
gpt::GPTConfig llama_config(int n_kv_head, bool tied, int n_embd = 16, int n_head = 4) {
  gpt::GPTConfig c;
  c.arch = gpt::Arch::llama;
  c.bias = false;
  c.vocab_size = 13;
  c.block_size = 9;
  c.n_layer = 2;
  c.n_head = n_head;
  c.n_embd = n_embd;
  c.n_kv_head = n_kv_head;
  c.ffn_hidden = 24;
  c.tie_embeddings = tied;
  c.rope_theta = 500.0f;  // a smaller base than 10000: the angles turn visibly at T = 9
  return c;
}

std::vector<int32_t> random_ids(size_t n, int V, uint64_t seed) {
  nn::Rng rng(seed);
  std::vector<int32_t> v(n);
  for (auto& t : v) t = static_cast<int32_t>(rng.below(static_cast<uint32_t>(V)));
  return v;
}

// max |a - b| / max |b| over n floats
double rel_err(const float* a, const float* b, int64_t n) {
  double err = 0.0, scale = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    err = std::max(err, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return scale > 0 ? err / scale : err;
}

gpt::GPT random_llama(const gpt::GPTConfig& c, uint64_t seed, float extra = 0.0f) {
  gpt::GPT m = gpt::gpt_create(c);
  gpt::gpt_init_weights(m, seed);
  if (extra > 0.0f) {
    // larger weights than the init (and norm weights away from 1) so every path carries a
    // visible gradient
    nn::Rng rng(seed + 1);
    for (float& p : m.params_memory) p += rng.normal(0.0f, extra);
  }
  return m;
}

struct Variant {
  const char* what;
  int n_kv_head;
  bool tied;
};
const Variant kVariants[] = {{"multi-head, tied", 0, true}, {"grouped-query (4 heads, 2 KV), untied", 2, false},
                             {"multi-query (1 KV head), tied", 1, true}};

}  // namespace

TEST_CASE("gpt llama: the tables hold exactly llama's tensors, with their sizes", "[gpt][llama]") {
  for (const Variant& v : kVariants) {
    INFO(v.what);
    const gpt::GPTConfig c = llama_config(v.n_kv_head, v.tied);
    const int64_t V = c.vocab_size, C = c.n_embd, L = c.n_layer, H = c.ffn_hidden;
    const int64_t KV = gpt::kv_heads(c) * (C / c.n_head);
    // per layer: two RMSNorm weights, q/k/v, o, gate+up, down; then the final norm and the head
    const int64_t per_layer = 2 * C + (C + 2 * KV) * C + C * C + 2 * H * C + C * H;
    const int64_t expect = V * C + L * per_layer + C + (v.tied ? 0 : V * C);
    CHECK(gpt::num_parameters(c) == expect);
    CHECK(gpt::num_parameters_non_embedding(c) == expect);  // no position table to leave out
    gpt::GPT m = gpt::gpt_create(c);
    CHECK(m.params.wpe == nullptr);
    CHECK(m.params.ln1b == nullptr);
    CHECK(m.params.qkvb == nullptr);
    CHECK((m.params.lm_head == nullptr) == v.tied);
    CHECK(m.slices.size() == static_cast<size_t>(1 + 6 * L + 1 + (v.tied ? 0 : 1)));
    CHECK(m.rope_cos.size() == static_cast<size_t>(c.block_size * (C / c.n_head) / 2));
    // the slices tile the flat buffer
    int64_t covered = 0;
    for (const auto& s : m.slices) covered += s.numel;
    CHECK(covered == m.num_params);
    // the activations: no LayerNorm means, no GELU output, no T x T maps with flash
    std::vector<int32_t> x = random_ids(2 * 5, c.vocab_size, 1);
    auto be = gpt::make_backend("cpu");
    gpt::gpt_forward(m, *be, x.data(), x.data(), 2, 5);
    CHECK(m.acts.ln1_mean == nullptr);
    CHECK(m.acts.fch_gelu == nullptr);
    CHECK(m.acts.fch_swiglu != nullptr);
    CHECK(m.acts.att == nullptr);
    CHECK(m.acts.preatt == nullptr);
    CHECK(m.acts.lse != nullptr);
    CHECK(m.scratch.dpreatt == nullptr);
  }
}

TEST_CASE("gpt llama: bad configs are refused with a reason", "[gpt][llama]") {
  gpt::GPTConfig c = llama_config(3, true);  // 3 does not divide 4 heads
  CHECK_THAT(testing::error_of([&] { gpt::validate(c); }), Catch::Contains("must divide n_head"));
  c = llama_config(2, true);
  c.bias = true;
  CHECK_THAT(testing::error_of([&] { gpt::validate(c); }), Catch::Contains("no biases"));
  c = llama_config(2, true);
  c.attention = gpt::AttentionKind::full;
  CHECK_THAT(testing::error_of([&] { gpt::validate(c); }), Catch::Contains("multi-head only"));
  c = llama_config(0, true, 12, 4);  // head size 3: RoPE needs pairs
  CHECK_THAT(testing::error_of([&] { gpt::validate(c); }), Catch::Contains("must be even"));
  gpt::GPTConfig g;
  g.n_kv_head = 2;
  CHECK_THAT(testing::error_of([&] { gpt::validate(g); }), Catch::Contains("arch=gpt2 has multi-head"));
  g = gpt::GPTConfig{};
  g.tie_embeddings = false;
  CHECK_THAT(testing::error_of([&] { gpt::validate(g); }), Catch::Contains("ties its head"));
  CHECK_THAT(testing::error_of([&] { gpt::parse_arch("mistral"); }), Catch::Contains("gpt2 or llama"));
}

TEST_CASE("gpt llama: backward matches finite differences of the whole model (float, spot checks)", "[gpt][llama]") {
  for (const Variant& v : kVariants) {
    INFO(v.what);
    gpt::GPT m = random_llama(llama_config(v.n_kv_head, v.tied), 3, 0.2f);
    auto be = gpt::make_backend("naive");
    const int B = 3, T = 7;
    const auto x = random_ids(B * T, m.config.vocab_size, 11), y = random_ids(B * T, m.config.vocab_size, 12);
    gpt::gpt_zero_grad(m);
    gpt::gpt_forward(m, *be, x.data(), y.data(), B, T);
    gpt::gpt_backward(m, *be);
    const std::vector<float> grads = m.grads_memory.to_vector();
    nn::Rng rng(5);
    int checked = 0;
    for (const auto& s : m.slices) {
      for (int k = 0; k < 3; ++k) {
        const int64_t i = s.offset + static_cast<int64_t>(rng.below(static_cast<uint32_t>(s.numel)));
        const double numeric = testing::central_difference(m.params_memory[static_cast<size_t>(i)], 1e-2f, [&] {
          gpt::gpt_forward(m, *be, x.data(), y.data(), B, T);
          return static_cast<double>(m.mean_loss);
        });
        INFO(s.name << "[" << i - s.offset << "] analytic " << grads[static_cast<size_t>(i)] << " numeric " << numeric);
        CHECK(std::fabs(grads[static_cast<size_t>(i)] - numeric) <= 2e-3 + 0.05 * std::fabs(numeric));
        ++checked;
      }
    }
    CHECK(checked == 3 * static_cast<int>(m.slices.size()));
  }
}

TEST_CASE("gpt llama: naive and cpu backends agree on logits, loss, every gradient and the AdamW step",
          "[gpt][llama][backend]") {
  for (const Variant& v : kVariants) {
    for (float dropout : {0.0f, 0.2f}) {
      INFO(v.what << ", dropout " << dropout);
      gpt::GPTConfig c = llama_config(v.n_kv_head, v.tied, 40, 4);  // head size 10: not a SIMD width
      c.dropout = dropout;
      gpt::GPT a = random_llama(c, 9);
      gpt::GPT b = a;
      auto naive = gpt::make_backend("naive");
      auto cpu = gpt::make_backend("cpu");
      const int B = 4, T = 9;
      const auto x = random_ids(B * T, c.vocab_size, 21), y = random_ids(B * T, c.vocab_size, 22);
      std::vector<float> grads[2];
      gpt::StepResult steps[2];
      for (int i = 0; i < 2; ++i) {
        gpt::GPT& m = i == 0 ? a : b;
        gpt::StepOptions so;
        so.after_backward = [&](int) { grads[i] = m.grads_memory.to_vector(); };
        steps[i] = gpt::train_step(m, i == 0 ? *naive : *cpu, {{x.data(), y.data(), 77}}, B, T, so);
      }
      CHECK(steps[1].loss == Approx(steps[0].loss).epsilon(1e-5));
      CHECK(steps[1].grad_norm == Approx(steps[0].grad_norm).epsilon(1e-5));
      CHECK(rel_err(b.acts.logits, a.acts.logits, static_cast<int64_t>(B) * T * c.vocab_size) < 1e-5);
      for (const auto& s : a.slices) {
        INFO(s.name);
        CHECK(rel_err(grads[1].data() + s.offset, grads[0].data() + s.offset, s.numel) < 1e-4);
      }
      CHECK(rel_err(b.params_memory.data(), a.params_memory.data(), a.num_params) < 1e-5);
    }
  }
}

TEST_CASE("gpt llama: full and flash attention give the same loss and gradients (multi-head)", "[gpt][llama]") {
  gpt::GPTConfig c = llama_config(0, true);
  gpt::GPT flash = random_llama(c, 4, 0.1f);
  c.attention = gpt::AttentionKind::full;
  gpt::GPT full = gpt::gpt_create(c);
  full.params_memory = flash.params_memory;
  full.repoint();
  auto cpu = gpt::make_backend("cpu");
  const int B = 2, T = 9;
  const auto x = random_ids(B * T, c.vocab_size, 31), y = random_ids(B * T, c.vocab_size, 32);
  for (gpt::GPT* m : {&flash, &full}) {
    gpt::gpt_zero_grad(*m);
    gpt::gpt_forward(*m, *cpu, x.data(), y.data(), B, T);
    gpt::gpt_backward(*m, *cpu);
  }
  CHECK(full.acts.att != nullptr);
  CHECK(flash.acts.att == nullptr);
  CHECK(full.mean_loss == Approx(flash.mean_loss).epsilon(1e-6));
  for (const auto& s : full.slices) {
    INFO(s.name);
    CHECK(rel_err(full.grads_memory.data() + s.offset, flash.grads_memory.data() + s.offset, s.numel) < 1e-5);
  }
}

TEST_CASE("gpt llama: the same bits for 1 and 2 threads, run after run", "[gpt][llama][backend]") {
  const gpt::GPTConfig c = llama_config(2, false, 32, 4);
  auto cpu = gpt::make_backend("cpu");
  const int B = 3, T = 9;
  const auto x = random_ids(B * T, c.vocab_size, 41), y = random_ids(B * T, c.vocab_size, 42);
  std::vector<std::vector<float>> params;
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 2}) {
    omp_set_num_threads(threads);
    gpt::GPT m = random_llama(c, 6);
    gpt::StepOptions so;
    for (int step = 0; step < 3; ++step) gpt::train_step(m, *cpu, {{x.data(), y.data(), 5}}, B, T, so);
    params.push_back(m.params_memory.to_vector());
  }
  omp_set_num_threads(saved);
  CHECK(params[0] == params[1]);
  CHECK(params[1] == params[2]);
}

TEST_CASE("gpt llama: the KV-cache decoder's logits equal gpt_forward's at every position", "[gpt][llama][infer]") {
  for (const Variant& v : kVariants) {
    const gpt::GPTConfig c = llama_config(v.n_kv_head, v.tied);
    INFO(v.what);
    gpt::GPT model = random_llama(c, 12, 0.05f);
    for (const std::string name : {"naive", "cpu"}) {
      auto be = gpt::make_backend(name);
      const int T = c.block_size, V = c.vocab_size;
      const auto ids = random_ids(static_cast<size_t>(T), V, 3);
      gpt::gpt_forward(model, *be, ids.data(), nullptr, 1, T);
      const std::vector<float> ref(model.acts.logits, model.acts.logits + static_cast<int64_t>(T) * V);
      const gpt::InferenceModel im = gpt::pack_model(model, kernels::WeightFormat::f32);
      gpt::Decoder dec(im, *be);
      INFO(name);
      // a prefill of 4 (RoPE at positions 0..3), then one token at a time (position t alone)
      const std::vector<float>& pre = dec.step(ids.data(), 1, 4);
      CHECK(rel_err(pre.data(), ref.data(), 4 * V) < 1e-5);
      for (int t = 4; t < T; ++t) {
        INFO("position " << t);
        const std::vector<float>& got = dec.step(&ids[static_cast<size_t>(t)], 1, 1);
        CHECK(rel_err(got.data(), ref.data() + static_cast<size_t>(t) * V, V) < 1e-5);
      }
      CHECK(dec.kv_cache_bytes() == 2LL * c.n_layer * c.block_size * gpt::kv_channels(c) * 4);
    }
  }
}

TEST_CASE("gpt llama: checkpoints round-trip the arch and its options, and older files load as gpt2", "[gpt][llama][checkpoint]") {
  testing::TempDir dir("gpt-llama-ckpt");
  gpt::GPTConfig c = llama_config(2, false);
  c.norm_eps = 1e-6f;
  gpt::GPT m = random_llama(c, 8);
  m.adam_t = 3;
  const nn::CharVocab vocab = nn::build_vocab("abcdefghijkl\n");
  const std::string path = dir.file("llama.safetensors");
  gpt::save_checkpoint(path, m, vocab, {3, 2.0f, "corpus"});
  const gpt::LoadedCheckpoint ck = gpt::load_checkpoint(path);
  const gpt::GPTConfig& l = ck.model.config;
  CHECK(l.arch == gpt::Arch::llama);
  CHECK(gpt::kv_heads(l) == 2);
  CHECK(gpt::mlp_hidden(l) == 24);
  CHECK(l.rope_theta == 500.0f);
  CHECK(l.norm_eps == 1e-6f);
  CHECK_FALSE(l.tie_embeddings);
  CHECK_FALSE(l.bias);
  CHECK(ck.model.params_memory == m.params_memory);
  CHECK(ck.model.rope_cos == m.rope_cos);
  // the names lesson 12's loader and scripts/llama_torch.py read
  const nn::Checkpoint raw = nn::load_safetensors(path);
  CHECK(raw.tensors.count("lm_head.weight") == 1);
  CHECK(raw.tensors.count("wpe") == 0);
  CHECK(raw.tensors.at("h.1.attn.c_attn.weight").shape() == nn::Shape({16 + 2 * 8, 16}));
  CHECK(raw.tensors.at("h.0.mlp.c_fc.weight").shape() == nn::Shape({48, 16}));
  CHECK(raw.metadata.at("arch") == "llama");

  // a gpt2 checkpoint from before lesson 11 (no arch keys) loads as the gpt2 it is
  gpt::GPTConfig g;
  g.vocab_size = 13;
  gpt::GPT old = gpt::gpt_create(g);
  gpt::gpt_init_weights(old, 2);
  const std::string gpath = dir.file("gpt2.safetensors");
  gpt::save_checkpoint(gpath, old, vocab, {}, /*with_optimizer=*/false);
  nn::Checkpoint file = nn::load_safetensors(gpath);
  for (const char* key : {"arch", "n_kv_head", "ffn_hidden", "rope_theta", "norm_eps", "tie_embeddings", "attention"}) {
    REQUIRE(file.metadata.erase(key) == 1);
  }
  for (auto it = file.metadata.begin(); it != file.metadata.end();) {  // the checksums: rewritten
    it = it->first.rfind("nnlab.", 0) == 0 ? file.metadata.erase(it) : std::next(it);
  }
  std::vector<nn::TensorRef> refs;
  for (const auto& [name, t] : file.tensors) refs.push_back({name, t.shape(), t.data()});
  nn::save_safetensors(dir.file("before.safetensors"), refs, file.metadata);
  const gpt::LoadedCheckpoint before = gpt::load_checkpoint(dir.file("before.safetensors"));
  CHECK(before.model.config.arch == gpt::Arch::gpt2);
  CHECK(before.model.params_memory == old.params_memory);
  // and a damaged arch key is refused by name
  file.metadata["arch"] = "gpt3";
  nn::save_safetensors(dir.file("gpt3.safetensors"), refs, file.metadata);
  CHECK_THAT(testing::error_of([&] { gpt::load_checkpoint(dir.file("gpt3.safetensors")); }),
             Catch::Contains("metadata 'arch'"));
}

TEST_CASE("gpt llama: the trainer trains it, resumes it exactly and refuses a contradicting --arch", "[gpt][llama][train]") {
  testing::TempDir dir("gpt-llama-train");
  const std::string corpus = testing::repeated_corpus(dir);
  gpt::TrainOptions o = testing::tiny_train_options(dir, corpus);
  o.arch = "llama";
  o.n_kv_head = 1;
  o.lr = 1e-2f;
  std::ostringstream sink;
  const gpt::TrainResult full = gpt::train(o, sink);
  REQUIRE(full.step_losses.size() == 8);
  CHECK(full.step_losses.back() < full.step_losses.front());

  const gpt::TrainOptions resumed = testing::check_resume_exact(o, full, dir, sink);

  gpt::TrainOptions wrong = resumed;
  wrong.out_dir = dir.file("wrong");
  wrong.arch = "gpt2";
  wrong.given.insert("arch");
  CHECK_THAT(testing::error_of([&] { gpt::train(wrong, sink); }), Catch::Contains("--arch gpt2 contradicts"));

  // sampling from the trained llama (the sampler runs gpt_forward on the growing context)
  const gpt::LoadedCheckpoint ck = gpt::load_checkpoint((std::filesystem::path(o.out_dir) / "last.safetensors").string());
  gpt::GPT model = ck.model;
  auto cpu = gpt::make_backend("cpu");
  gpt::SampleOptions so;
  so.prompt = "First";
  so.tokens = 20;
  const std::string s = gpt::sample(model, *cpu, ck.vocab, so);
  CHECK(s.size() == 20);
}
