// tests/test_lora_cli.cpp: LoRA as a user runs it (gpt/lora.h): `nnlab gpt finetune` with
// adapters and with full fine-tuning, `nnlab gpt merge` (and its refusal of another base), and
// lesson 12's `--part lora --quick` run with its JSON record (the fields lora_part.h lists).
// Not in the core subset: it runs the programs.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

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
