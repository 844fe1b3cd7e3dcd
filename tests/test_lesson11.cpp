// Lesson 11's parts (lessons/11-modern): the program runs every part with --quick on a small
// corpus this test writes, and its --json record has each part's keys with the values the
// part's checks guarantee (the gradient checks passed, v2 agrees with v1, RoPE's equal
// offsets give equal dot products, flash agrees with full attention and needs less memory
// once T is large). The bpe part's own CLI test is in test_bpe.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "tests/cli_helpers.h"
#include "tests/lesson10_test_util.h"
#include "tests/test_util.h"

using Catch::Contains;
using testing::numbers_of;

TEST_CASE("lesson11 --part all --quick: every part runs and its JSON holds what it measured", "[lesson11][cli]") {
  testing::TempDir dir("lesson11-all");
  const std::string corpus = testing::write_lesson10_corpus(dir, 6000);
  const std::string json_path = dir.file("out/lesson11.json");
  const auto r = testing::run_program("lesson11", "--quick --threads 2 --data " + corpus +
                                                      " --vocab-size 300 --repeats 1 --bpe-sweep 0,10,43 --flash-T 16,64,192"
                                                      " --json " + json_path);
  INFO(r.output);
  REQUIRE(r.status == 0);
  for (const char* part : {"== part bpe", "== part norm", "== part rope", "== part swiglu", "== part flash"}) {
    CHECK_THAT(r.output, Contains(part));
  }
  CHECK_THAT(r.output, Contains("decode(encode(corpus)) == corpus: yes"));
  const std::string json = testing::read_text(json_path);
  CHECK_THAT(json, Contains("\"schema\": \"nnlab-lesson11/1\""));
  CHECK_THAT(json, Contains("\"quick\": true"));
  for (const char* part : {"\"bpe\": {", "\"norm\": {", "\"rope\": {", "\"swiglu\": {", "\"flash\": {"}) {
    CHECK_THAT(json, Contains(part));
  }

  // bpe: the sweep starts at the bytes alone (1 byte per token) and merges only shorten the text.
  const auto bpt = numbers_of(json, "bytes_per_token");  // the part's own figure, then the sweep's
  REQUIRE(bpt.size() == 4);
  CHECK(bpt[1] == 1.0);
  CHECK(bpt[2] > bpt[1]);
  CHECK(bpt[3] > bpt[2]);
  CHECK(bpt[3] == Approx(bpt[0]));  // 43 merges = the whole 300-token vocabulary

  // Every gradient check passed (the part stops otherwise) with a small error.
  const auto grad = numbers_of(json, "gradcheck_max_rel_err");
  REQUIRE(grad.size() == 3);  // norm, rope, swiglu
  for (double e : grad) CHECK(e < 1e-5);

  // norm: LayerNorm centres each row, RMSNorm keeps the rows' mean (0.5 / sqrt(1.25) ~ 0.447).
  CHECK(std::fabs(numbers_of(json, "layernorm_out_mean").at(0)) < 1e-5);
  CHECK(numbers_of(json, "rmsnorm_out_mean").at(0) > 0.3);
  CHECK(numbers_of(json, "rmsnorm_out_rms").at(0) == Approx(1.0).epsilon(1e-3));
  CHECK(numbers_of(json, "ms").size() >= 4);  // rmsnorm v1, v2 and their backward, timed

  // rope: equal p - p' give equal q . k.
  CHECK(numbers_of(json, "max_spread_equal_diff").at(0) < 1e-9);
  const auto dots = numbers_of(json, "dot");
  const auto diffs = numbers_of(json, "diff");
  REQUIRE(dots.size() == diffs.size());
  REQUIRE(dots.size() >= 6);

  // swiglu: at C = 64, H = 8C/3 rounded up to 32 = 192; 3HC vs 8C^2 + 5C.
  CHECK(numbers_of(json, "H").at(0) == 192);
  CHECK(numbers_of(json, "swiglu_mlp_params").at(0) == 3 * 192 * 64);
  CHECK(numbers_of(json, "gelu_mlp_params").at(0) == 8 * 64 * 64 + 5 * 64);

  // flash: one row per T; full's maps are 4 (B,NH,T,T) floats; flash agrees with full.
  const auto T = numbers_of(json, "T");
  const auto full = numbers_of(json, "full_bytes");
  const auto flash = numbers_of(json, "flash_bytes");
  REQUIRE(T == std::vector<double>{16, 64, 192});
  REQUIRE(full.size() == 3);
  REQUIRE(flash.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(full[i] == 4.0 * 2 * T[i] * T[i] * 4);  // --quick: 2 heads
  CHECK(flash[2] < full[2]);
  for (double d : numbers_of(json, "max_rel_diff_out")) CHECK(d < 1e-5);
  for (double d : numbers_of(json, "max_rel_diff_dqkv")) CHECK(d < 1e-5);
  for (double ms : numbers_of(json, "flash_ms")) CHECK(ms > 0.0);
}

TEST_CASE("lesson11: a part that does not exist, and --bpe-sweep with a loaded tokenizer, fail clearly", "[lesson11][cli]") {
  auto r = testing::run_program("lesson11", "--part gpt5");
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Contains("--part"));
  testing::TempDir dir("lesson11-bad");
  const std::string corpus = testing::write_lesson10_corpus(dir, 2000);
  r = testing::run_program("lesson11", "--part bpe --data " + corpus + " --vocab-size 280 --repeats 1 --save-tokenizer " +
                                           dir.file("tok.json"));
  REQUIRE(r.status == 0);
  r = testing::run_program("lesson11", "--part bpe --data " + corpus + " --load-tokenizer " + dir.file("tok.json") +
                                           " --bpe-sweep 5");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("--bpe-sweep needs a trained tokenizer"));
}
