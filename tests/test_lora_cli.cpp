// tests/test_lora_cli.cpp: LoRA as a user runs it (gpt/lora.h): `nnlab gpt finetune` with
// adapters and with full fine-tuning, `nnlab gpt merge` (and its refusal of another base), and
// lesson 12's `--part lora --quick` run with its JSON record (the fields lora_part.h lists).
// Also the adapters on the cuda backend (through the CUDA emulator) against the cpu backend.
// Not in the core subset: it runs the programs and the cuda backend.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <algorithm>
#include <cmath>

#include "gpt/backend_cuda.h"
#include "gpt/lora.h"
#include "kernels/cuda/device.h"
#include "nn/rng.h"
#include "tests/cli_helpers.h"
#include "tests/test_util.h"

namespace {

std::string q(const std::string& s) { return "'" + s + "'"; }

std::string write_text(const testing::TempDir& dir, const std::string& name, const std::string& line) {
  std::string text;
  for (int i = 0; i < 80; ++i) text += line;
  const std::string path = dir.file(name);
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("lora cli: finetune (LoRA and full), merge, and the refusal of another base", "[gpt][lora][cli]") {
  testing::TempDir dir("lora-cli");
  const std::string old_text = write_text(dir, "old.txt", "To be, or not to be, that is the question:\nWhether 'tis nobler\n");
  // the new domain: a character (the digit) the base never saw is dropped
  const std::string new_text = write_text(dir, "new.txt", "the licensee shall not be liable, whether in tort 3 or not\n");
  const std::string out = dir.file("base");
  auto r = testing::run_program("nnlab", "gpt train --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 "
                                         "--max-iters 4 --eval-iters 2 --eval-interval 4 --data " + q(old_text) +
                                             " --out-dir " + q(out));
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string base = (std::filesystem::path(out) / "last.safetensors").string();
  const std::string ad = dir.file("ad.safetensors"), merged = dir.file("merged.safetensors"), full = dir.file("full.safetensors");
  r = testing::run_program("nnlab", "gpt finetune --init " + q(base) + " --data " + q(new_text) + " --old-data " +
                                        q(old_text) + " --lora-rank 2 --lora-alpha 4 --lora-targets qkv,fc --iters 3 "
                                        "--batch-size 2 --eval-iters 2 --out " + q(ad));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("LoRA rank 2 on qkv,fc") && Catch::Contains("old domain") &&
                           Catch::Contains("outside the base's vocabulary"));
  REQUIRE(std::filesystem::exists(ad));
  r = testing::run_program("nnlab", "gpt merge --checkpoint " + q(base) + " --adapter " + q(ad) + " --out " + q(merged));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("rank 2"));
  r = testing::run_program("nnlab", "gpt eval --checkpoint " + q(merged) + " --data " + q(old_text) + " --eval-iters 2");
  CHECK(r.status == 0);
  r = testing::run_program("nnlab", "gpt finetune --init " + q(base) + " --data " + q(new_text) +
                                        " --lora-rank 0 --iters 2 --batch-size 2 --eval-iters 2 --out " + q(full));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("full fine-tuning"));
  // an adapter made for another base shape is refused
  const std::string out2 = dir.file("base2");
  r = testing::run_program("nnlab", "gpt train --n-layer 1 --n-head 2 --n-embd 32 --block-size 16 --batch-size 4 "
                                    "--max-iters 1 --eval-iters 1 --eval-interval 1 --data " + q(old_text) +
                                        " --out-dir " + q(out2));
  REQUIRE(r.status == 0);
  r = testing::run_program("nnlab", "gpt merge --checkpoint " + q((std::filesystem::path(out2) / "last.safetensors").string()) +
                                        " --adapter " + q(ad) + " --out " + q(dir.file("bad.safetensors")));
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Catch::Contains("n_embd"));
  r = testing::run_program("nnlab", "gpt finetune --init " + q(base) + " --data " + q(new_text) + " --lora-targets mlp");
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Catch::Contains("unknown target 'mlp'"));
}

TEST_CASE("lora lesson12 --part lora --quick: the table and the JSON record's fields", "[gpt][lora][lesson12]") {
  testing::TempDir dir("lora-lesson");
  const std::string json = dir.file("l12.json");
  auto r = testing::run_program("lesson12", "--part lora --quick --threads 1 --json " + q(json));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("| full |") && Catch::Contains("| LoRA r=1 |") && Catch::Contains("| LoRA r=4 |"));
  const std::string js = testing::read_text(json);
  for (const char* key : {"\"corpus_old\"", "\"corpus_new\"", "\"dropped_fraction\"", "\"base\"", "\"settings\"",
                          "\"runs\"", "\"trainable_params\"", "\"optimizer_bytes\"", "\"gradient_bytes\"",
                          "\"file_bytes\"", "\"ms_per_step\"", "\"val_new_before\"", "\"val_new_after\"",
                          "\"val_old_before\"", "\"val_old_after\"", "\"loadavg_start\""}) {
    INFO(key);
    CHECK_THAT(js, Catch::Contains(key));
  }
}

TEST_CASE("lora on the cuda backend (emulator): adapter gradients and steps agree with cpu, the base stays frozen",
          "[gpt][lora][cuda]") {
  for (gpt::Arch arch : {gpt::Arch::gpt2, gpt::Arch::llama}) {
    INFO(gpt::arch_name(arch));
    gpt::GPTConfig c;
    c.arch = arch;
    c.vocab_size = 11;
    c.block_size = 8;
    c.n_layer = 2;
    c.n_head = 2;
    c.n_embd = 32;
    if (arch == gpt::Arch::llama) {
      c.bias = false;
      c.n_kv_head = 1;
      c.ffn_hidden = 32;
    }
    auto cpu = gpt::make_backend("cpu");
    auto cuda = gpt::make_cuda_backend(kernels::cuda::emulator(), "fp32");
    gpt::GPT a = gpt::gpt_create(c);
    gpt::gpt_init_weights(a, 5);
    gpt::GPT b = gpt::gpt_move_to(a, cuda->memory());
    gpt::LoraConfig lc;
    lc.rank = 4;
    gpt::LoraAdapters ha = gpt::lora_create(c, lc);
    gpt::lora_init(ha, 3);
    nn::Rng rng(4);
    for (const gpt::LoraSite& s : ha.sites) {
      for (int64_t i = 0; i < 4LL * s.out; ++i) ha.params[static_cast<size_t>(s.b + i)] = rng.normal(0.0f, 0.2f);
    }
    gpt::LoraAdapters da = gpt::lora_create(c, lc, cuda->memory());
    da.params.upload(ha.params.to_vector().data(), static_cast<size_t>(ha.num_params));
    gpt::lora_attach(a, &ha);
    gpt::lora_attach(b, &da);
    const int B = 2, T = 8;
    std::vector<int32_t> x(B * T), y(B * T);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<int32_t>(rng.below(11));
      y[i] = static_cast<int32_t>(rng.below(11));
    }
    auto rel = [](const std::vector<float>& p, const std::vector<float>& q) {
      double err = 0.0, scale = 0.0;
      for (size_t i = 0; i < q.size(); ++i) {
        err = std::max(err, static_cast<double>(std::fabs(p[i] - q[i])));
        scale = std::max(scale, static_cast<double>(std::fabs(q[i])));
      }
      return scale > 0 ? err / scale : err;
    };
    ha.grads.zero();
    da.grads.zero();
    gpt::gpt_forward(a, *cpu, x.data(), y.data(), B, T);
    gpt::gpt_backward(a, *cpu);
    gpt::gpt_forward(b, *cuda, x.data(), y.data(), B, T);
    gpt::gpt_backward(b, *cuda);
    CHECK(std::fabs(a.mean_loss - b.mean_loss) <= 1e-5f * std::fabs(a.mean_loss));
    CHECK(rel(da.grads.to_vector(), ha.grads.to_vector()) <= 1e-4);
    const std::vector<float> base_before = b.params_memory.to_vector();
    gpt::StepOptions so;
    for (int step = 0; step < 3; ++step) {
      gpt::lora_train_step(a, *cpu, {{x.data(), y.data(), 0}}, B, T, so);
      gpt::lora_train_step(b, *cuda, {{x.data(), y.data(), 0}}, B, T, so);
    }
    CHECK(rel(da.params.to_vector(), ha.params.to_vector()) <= 1e-4);
    CHECK(b.params_memory.to_vector() == base_before);
  }
}
