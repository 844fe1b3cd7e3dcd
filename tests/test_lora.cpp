// tests/test_lora.cpp: LoRA adapters (gpt/lora.h) on both archs: one adapted Linear layer's
// dx, dA, dB against finite differences; the whole model's dA and dB at several sites against
// finite differences; B = 0 at the start gives the base model's logits bit for bit; the base
// stays frozen (no base weight gradient computed, weights unchanged after steps); the merged
// model equals the adapted one; the adapter file round-trips and refuses what it must; naive
// and cpu agree; 1 and 2 threads give the same bits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <omp.h>

#include "gpt/backend.h"
#include "gpt/lora.h"
#include "gpt/model.h"
#include "io/safetensors.h"
#include "nn/check.h"
#include "nn/rng.h"
#include "tests/gradcheck_test_util.h"

namespace {

gpt::GPTConfig small_config(gpt::Arch arch) {
  gpt::GPTConfig c;
  c.arch = arch;
  c.vocab_size = 11;
  c.block_size = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  if (arch == gpt::Arch::llama) {
    c.bias = false;
    c.n_kv_head = 1;  // grouped-query: the qkv adapter's out is C + 2 hs
    c.ffn_hidden = 24;
    c.tie_embeddings = false;
  }
  return c;
}

std::vector<int32_t> random_ids(size_t n, int V, uint64_t seed) {
  nn::Rng rng(seed);
  std::vector<int32_t> v(n);
  for (auto& t : v) t = static_cast<int32_t>(rng.below(static_cast<uint32_t>(V)));
  return v;
}

gpt::GPT base_model(const gpt::GPTConfig& c, uint64_t seed) {
  gpt::GPT m = gpt::gpt_create(c);
  gpt::gpt_init_weights(m, seed);
  nn::Rng rng(seed + 7);
  for (float& p : m.params_memory) p += rng.normal(0.0f, 0.1f);  // visible gradients everywhere
  return m;
}

// adapters with B drawn too (B = 0 would give dA = 0: nothing to check)
gpt::LoraAdapters random_adapters(const gpt::GPTConfig& c, int rank, uint64_t seed) {
  gpt::LoraConfig lc;
  lc.rank = rank;
  lc.alpha = 2.0f * static_cast<float>(rank);
  gpt::LoraAdapters ad = gpt::lora_create(c, lc);
  gpt::lora_init(ad, seed);
  nn::Rng rng(seed + 1);
  for (const gpt::LoraSite& s : ad.sites) {
    for (int64_t i = 0; i < static_cast<int64_t>(s.out) * rank; ++i) ad.params[static_cast<size_t>(s.b + i)] = rng.normal(0.0f, 0.3f);
  }
  return ad;
}

const gpt::Arch kArchs[] = {gpt::Arch::gpt2, gpt::Arch::llama};

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("nnlab_test_lora_" + name)).string();
}

}  // namespace

TEST_CASE("lora: one adapted Linear layer's dx, dA and dB match finite differences", "[gpt][lora]") {
  for (const char* backend : {"naive", "cpu"}) {
    INFO(backend);
    auto be = gpt::make_backend(backend);
    const gpt::GPTConfig c = small_config(gpt::Arch::gpt2);
    gpt::LoraAdapters ad = random_adapters(c, 3, 5);
    const gpt::LoraSite& s = *ad.site(gpt::Linear::fc, 1);  // (4C, C) = (64, 16)
    const int N = 5;
    nn::Rng rng(9);
    std::vector<float> x(static_cast<size_t>(N) * s.in), w(static_cast<size_t>(s.out) * s.in), dout(static_cast<size_t>(N) * s.out);
    for (float& v : x) v = rng.normal();
    for (float& v : w) v = rng.normal(0.0f, 0.2f);
    for (float& v : dout) v = rng.normal();
    // f = sum(dout * y), y = x W^T + adapter: df/dx, df/dA, df/dB
    auto f = [&]() {
      std::vector<float> y(static_cast<size_t>(N) * s.out);
      be->matmul_forward(y.data(), x.data(), w.data(), nullptr, N, s.in, s.out);
      gpt::lora_linear_forward(ad, *be, y.data(), x.data(), {s.which, s.layer, w.data(), nullptr, s.in, s.out}, N);
      double sum = 0.0;
      for (size_t i = 0; i < y.size(); ++i) sum += static_cast<double>(y[i]) * dout[i];
      return sum;
    };
    f();
    std::vector<float> dx(x.size());
    be->matmul_backward(dx.data(), nullptr, nullptr, dout.data(), x.data(), w.data(), N, s.in, s.out);
    ad.grads.zero();
    gpt::lora_linear_backward(ad, *be, dx.data(), dout.data(), x.data(), s.which, s.layer, N);
    const std::vector<float> g = ad.grads.to_vector();
    auto check = [&](float& p, double analytic, const char* what, int64_t i) {
      const double numeric = testing::central_difference(p, 1e-2f, f);
      INFO(what << "[" << i << "] analytic " << analytic << " numeric " << numeric);
      CHECK(std::fabs(analytic - numeric) <= 2e-3 + 1e-3 * std::fabs(numeric));
      return std::fabs(analytic);
    };
    double mag = 0.0;
    for (int64_t i = 0; i < static_cast<int64_t>(x.size()); i += 7) mag += check(x[static_cast<size_t>(i)], dx[static_cast<size_t>(i)], "dx", i);
    for (int64_t i = 0; i < 3 * s.in; i += 5) mag += check(ad.params[static_cast<size_t>(s.a + i)], g[static_cast<size_t>(s.a + i)], "dA", i);
    for (int64_t i = 0; i < 3 * s.out; i += 11) mag += check(ad.params[static_cast<size_t>(s.b + i)], g[static_cast<size_t>(s.b + i)], "dB", i);
    CHECK(mag > 1.0);  // not passing on zeros
  }
}

TEST_CASE("lora: the whole model's dA and dB at every site match finite differences, both archs", "[gpt][lora]") {
  for (gpt::Arch arch : kArchs) {
    INFO(gpt::arch_name(arch));
    const gpt::GPTConfig c = small_config(arch);
    gpt::GPT m = base_model(c, 3);
    gpt::LoraAdapters ad = random_adapters(c, 2, 4);
    gpt::lora_attach(m, &ad);
    auto be = gpt::make_backend("naive");
    const int B = 2, T = 6;
    const auto x = random_ids(B * T, c.vocab_size, 11), y = random_ids(B * T, c.vocab_size, 12);
    ad.grads.zero();
    gpt::gpt_forward(m, *be, x.data(), y.data(), B, T);
    gpt::gpt_backward(m, *be);
    const std::vector<float> g = ad.grads.to_vector();
    nn::Rng rng(5);
    int checked = 0;
    double mag = 0.0;
    for (const gpt::LoraSite& s : ad.sites) {
      for (int64_t start : {s.a, s.b}) {
        const int64_t n = start == s.a ? 2LL * s.in : 2LL * s.out;
        for (int k = 0; k < 3; ++k) {
          const int64_t i = start + static_cast<int64_t>(rng.below(static_cast<uint32_t>(n)));
          const double numeric = testing::central_difference(ad.params[static_cast<size_t>(i)], 1e-2f, [&] {
            gpt::gpt_forward(m, *be, x.data(), y.data(), B, T);
            return static_cast<double>(m.mean_loss);
          });
          const double analytic = g[static_cast<size_t>(i)];
          INFO("layer " << s.layer << " " << gpt::linear_name(s.which) << (start == s.a ? " A" : " B") << "["
                        << i - start << "] analytic " << analytic << " numeric " << numeric);
          CHECK(std::fabs(analytic - numeric) <= 2e-3 + 0.05 * std::fabs(numeric));
          mag += std::fabs(analytic);
          ++checked;
        }
      }
    }
    CHECK(checked == 6 * static_cast<int>(ad.sites.size()));
    CHECK(ad.sites.size() == 8);  // 2 layers x 4 targets
    CHECK(mag > 1e-2);
  }
}

TEST_CASE("lora: B = 0 at the start gives the base model's logits and loss bit for bit", "[gpt][lora]") {
  for (gpt::Arch arch : kArchs) {
    for (const char* backend : {"naive", "cpu"}) {
      INFO(gpt::arch_name(arch) << " " << backend);
      const gpt::GPTConfig c = small_config(arch);
      auto be = gpt::make_backend(backend);
      gpt::GPT m = base_model(c, 3);
      const int B = 2, T = 8;
      const auto x = random_ids(B * T, c.vocab_size, 1), y = random_ids(B * T, c.vocab_size, 2);
      gpt::gpt_forward(m, *be, x.data(), y.data(), B, T);
      const std::vector<float> base_logits(m.acts.logits, m.acts.logits + B * T * c.vocab_size);
      const float base_loss = m.mean_loss;
      gpt::LoraConfig lc;
      lc.rank = 4;
      gpt::LoraAdapters ad = gpt::lora_create(c, lc);
      gpt::lora_init(ad, 8);
      gpt::lora_attach(m, &ad);
      gpt::gpt_forward(m, *be, x.data(), y.data(), B, T);
      const std::vector<float> logits(m.acts.logits, m.acts.logits + B * T * c.vocab_size);
      CHECK(logits == base_logits);
      CHECK(m.mean_loss == base_loss);
    }
  }
}

TEST_CASE("lora: the base is frozen: no base weight gradient computed, weights unchanged after steps", "[gpt][lora]") {
  for (gpt::Arch arch : kArchs) {
    INFO(gpt::arch_name(arch));
    const gpt::GPTConfig c = small_config(arch);
    auto be = gpt::make_backend("cpu");
    gpt::GPT m = base_model(c, 3);
    const std::vector<float> before = m.params_memory.to_vector();
    gpt::LoraConfig lc;
    lc.rank = 2;
    gpt::LoraAdapters ad = gpt::lora_create(c, lc);
    gpt::lora_init(ad, 8);
    const std::vector<float> ad_before = ad.params.to_vector();
    gpt::lora_attach(m, &ad);
    const int B = 2, T = 8;
    const auto x = random_ids(B * T, c.vocab_size, 1), y = random_ids(B * T, c.vocab_size, 2);
    gpt::gpt_zero_grad(m);
    gpt::StepOptions so;
    so.lr = 1e-2f;
    std::vector<double> losses;
    for (int step = 0; step < 5; ++step) losses.push_back(gpt::lora_train_step(m, *be, {{x.data(), y.data(), 0}}, B, T, so).loss);
    CHECK(m.params_memory.to_vector() == before);
    CHECK(ad.params.to_vector() != ad_before);
    CHECK(losses.back() < losses.front());
    // the skipped products: every matrix's and embedding's gradient is still exactly zero
    // (the norms' weight gradients are computed with their dx, and unused)
    const std::vector<float> g = m.grads_memory.to_vector();
    for (const gpt::ParamSlice& s : m.slices) {
      if (!s.decay) continue;  // norms and biases are not matrices (biases are skipped too, see below)
      INFO(s.name);
      CHECK(std::all_of(g.begin() + s.offset, g.begin() + s.offset + s.numel, [](float v) { return v == 0.0f; }));
    }
    // computing the base's weight gradients (the measurement's variant) changes nothing the
    // adapters see: the same adapter gradients, bit for bit, and now non-zero base ones
    ad.grads.zero();
    gpt::gpt_forward(m, *be, x.data(), y.data(), B, T);
    gpt::gpt_backward(m, *be);
    const std::vector<float> skipped = ad.grads.to_vector();
    ad.grads.zero();
    ad.compute_base_grads = true;
    gpt::gpt_forward(m, *be, x.data(), y.data(), B, T);
    gpt::gpt_backward(m, *be);
    ad.compute_base_grads = false;
    CHECK(ad.grads.to_vector() == skipped);
    const std::vector<float> g2 = m.grads_memory.to_vector();
    CHECK(std::any_of(g2.begin() + m.slices[0].offset, g2.begin() + m.slices[0].offset + m.slices[0].numel,
                      [](float v) { return v != 0.0f; }));  // wte's gradient, computed this time
    if (c.bias) {
      const gpt::ParamSlice& qb = *std::find_if(m.slices.begin(), m.slices.end(),
                                                [](const gpt::ParamSlice& s) { return s.name == "h.0.attn.c_attn.bias"; });
      CHECK(std::all_of(g.begin() + qb.offset, g.begin() + qb.offset + qb.numel, [](float v) { return v == 0.0f; }));
    }
  }
}

TEST_CASE("lora: the merged model's logits equal the adapted model's", "[gpt][lora]") {
  for (gpt::Arch arch : kArchs) {
    INFO(gpt::arch_name(arch));
    const gpt::GPTConfig c = small_config(arch);
    auto be = gpt::make_backend("cpu");
    gpt::GPT m = base_model(c, 3);
    gpt::LoraAdapters ad = random_adapters(c, 4, 6);
    const int B = 2, T = 8;
    const auto x = random_ids(B * T, c.vocab_size, 1);
    gpt::GPT merged = m;
    gpt::lora_merge(merged, ad);
    gpt::lora_attach(m, &ad);
    gpt::gpt_forward(m, *be, x.data(), nullptr, B, T);
    gpt::gpt_forward(merged, *be, x.data(), nullptr, B, T);
    double err = 0.0, scale = 0.0, moved = 0.0;
    gpt::GPT base = m;
    gpt::lora_attach(base, nullptr);
    gpt::gpt_forward(base, *be, x.data(), nullptr, B, T);
    for (int64_t i = 0; i < B * T * c.vocab_size; ++i) {
      err = std::max(err, static_cast<double>(std::fabs(m.acts.logits[i] - merged.acts.logits[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(m.acts.logits[i])));
      moved = std::max(moved, static_cast<double>(std::fabs(m.acts.logits[i] - base.acts.logits[i])));
    }
    CAPTURE(err, scale, moved);
    CHECK(err <= 1e-5 * scale);
    CHECK(moved > 1e-2 * scale);  // the adapters change the model: the comparison means something
    gpt::GPT twice = merged;
    gpt::lora_attach(twice, &ad);
    CHECK_THROWS_WITH(gpt::lora_merge(twice, ad), Catch::Contains("detach"));
  }
}

TEST_CASE("lora: the adapter file round-trips and refuses another base, a wrong rank, a NaN", "[gpt][lora]") {
  const gpt::GPTConfig c = small_config(gpt::Arch::llama);
  gpt::LoraConfig lc;
  lc.rank = 3;
  lc.alpha = 5.0f;
  gpt::parse_lora_targets("qkv,fcproj", lc.targets);
  gpt::LoraAdapters ad = gpt::lora_create(c, lc);
  gpt::lora_init(ad, 2);
  for (float& p : ad.params) p += 0.25f;
  const std::string path = temp_path("round.safetensors");
  gpt::save_lora(path, ad);
  const gpt::LoraAdapters back = gpt::load_lora(path, c);
  CHECK(back.params.to_vector() == ad.params.to_vector());
  CHECK(back.config.rank == 3);
  CHECK(back.config.alpha == 5.0f);
  CHECK(gpt::lora_targets_string(back.config.targets) == "qkv,fcproj");
  CHECK(back.sites.size() == 4);
  // small: r (in + out) floats per site, no base weights
  CHECK(std::filesystem::file_size(path) < 4 * static_cast<uintmax_t>(ad.num_params) + 4096);

  gpt::GPTConfig wider = c;
  wider.n_embd = 32;
  CHECK_THROWS_WITH(gpt::load_lora(path, wider), Catch::Contains("n_embd"));
  gpt::GPTConfig gpt2 = small_config(gpt::Arch::gpt2);
  CHECK_THROWS_WITH(gpt::load_lora(path, gpt2), Catch::Contains("arch"));

  // a wrong rank: the metadata says 2, the tensors are rank 3
  nn::SafetensorsFile f = nn::read_safetensors(path);
  std::map<std::string, std::string> meta = f.metadata;
  meta.erase("nnlab.checksum");
  meta.erase("nnlab.header_checksum");
  auto rewrite = [&](const std::string& p, const std::map<std::string, std::string>& md, nn::NonFinite nf) {
    std::vector<nn::TensorRef> refs;
    for (const auto& [name, t] : f.tensors) refs.push_back({name, t.shape, t.data.data()});
    nn::save_safetensors(p, refs, md, nf);
  };
  std::map<std::string, std::string> bad_rank = meta;
  bad_rank["lora.rank"] = "2";
  rewrite(temp_path("rank.safetensors"), bad_rank, nn::NonFinite::Refuse);
  CHECK_THROWS_WITH(gpt::load_lora(temp_path("rank.safetensors"), c), Catch::Contains("wrong rank"));
  // a NaN
  f.tensors.begin()->second.data[1] = std::nanf("");
  rewrite(temp_path("nan.safetensors"), meta, nn::NonFinite::Allow);
  CHECK_THROWS_WITH(gpt::load_lora(temp_path("nan.safetensors"), c), Catch::Contains(f.tensors.begin()->first));
  // a model checkpoint is not an adapter file
  std::map<std::string, std::string> none = meta;
  none.erase("format");
  f.tensors.begin()->second.data[1] = 0.0f;
  rewrite(temp_path("none.safetensors"), none, nn::NonFinite::Refuse);
  CHECK_THROWS_WITH(gpt::load_lora(temp_path("none.safetensors"), c), Catch::Contains("not a LoRA adapter file"));
  CHECK_THROWS_WITH(gpt::parse_lora_targets("qkv,mlp", lc.targets), Catch::Contains("mlp"));
  for (const char* n : {"round", "rank", "nan", "none"}) std::filesystem::remove(temp_path(std::string(n) + ".safetensors"));
}

TEST_CASE("lora: naive and cpu agree on the adapters' gradients, and 1 and 2 threads give the same bits", "[gpt][lora]") {
  for (gpt::Arch arch : kArchs) {
    INFO(gpt::arch_name(arch));
    gpt::GPTConfig c = small_config(arch);
    c.n_embd = 32;
    const int B = 3, T = 8;
    const auto x = random_ids(B * T, c.vocab_size, 1), y = random_ids(B * T, c.vocab_size, 2);
    std::vector<std::vector<float>> grads;
    for (const char* backend : {"naive", "cpu"}) {
      auto be = gpt::make_backend(backend);
      gpt::GPT m = base_model(c, 3);
      gpt::LoraAdapters ad = random_adapters(c, 4, 6);
      gpt::lora_attach(m, &ad);
      ad.grads.zero();
      gpt::gpt_forward(m, *be, x.data(), y.data(), B, T);
      gpt::gpt_backward(m, *be);
      grads.push_back(ad.grads.to_vector());
    }
    double err = 0.0, scale = 0.0;
    for (size_t i = 0; i < grads[0].size(); ++i) {
      err = std::max(err, static_cast<double>(std::fabs(grads[0][i] - grads[1][i])));
      scale = std::max(scale, static_cast<double>(std::fabs(grads[0][i])));
    }
    CAPTURE(err, scale);
    CHECK(scale > 0.0);
    CHECK(err <= 1e-4 * scale);

    auto cpu = gpt::make_backend("cpu");
    std::vector<std::vector<float>> after;
    const int saved = omp_get_max_threads();
    for (int threads : {1, 2, 2}) {
      omp_set_num_threads(threads);
      gpt::GPT m = base_model(c, 3);
      gpt::LoraAdapters ad = random_adapters(c, 4, 6);
      gpt::lora_attach(m, &ad);
      gpt::StepOptions so;
      for (int step = 0; step < 3; ++step) gpt::lora_train_step(m, *cpu, {{x.data(), y.data(), 0}}, B, T, so);
      after.push_back(ad.params.to_vector());
    }
    omp_set_num_threads(saved);
    CHECK(after[0] == after[1]);
    CHECK(after[1] == after[2]);
  }
}
