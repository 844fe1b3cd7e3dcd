// Lesson 10, parts kv, law and quant: each runs with --quick into a temporary --json-dir and
// --out-dir, and its JSON has the schema's keys (inference_lesson.h) with sane values. The
// target model of part quant is trained on first use on a small text this test writes.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "lessons/10-inference/inference_lesson.h"
#include "nn/rng.h"
#include "tests/lesson10_test_util.h"
#include "tests/test_util.h"

namespace {

using testing::numbers_of;
using testing::strings_of;

lesson10::Options quick_options(const testing::TempDir& dir, const std::string& part) {
  lesson10::Options o;
  o.part = part;
  o.quick = true;
  o.threads = 2;
  o.data = testing::write_lesson10_corpus(dir, 8000);
  o.out_dir = dir.file("out");
  o.json_dir = dir.file("json");
  return o;
}

void check_header(const std::string& json, const std::string& part) {
  CHECK_THAT(json, Catch::Contains("\"schema\": \"nnlab-lesson10/1\""));
  CHECK_THAT(json, Catch::Contains("\"part\": \"" + part + "\""));
  CHECK_THAT(json, Catch::Contains("\"machine\": {"));
  CHECK_THAT(json, Catch::Contains("\"quick\": true"));
}

}  // namespace

TEST_CASE("lesson10 kv: ms per token with and without the cache, the same logits", "[lesson10]") {
  testing::TempDir dir("lesson10-kv");
  const lesson10::Options o = quick_options(dir, "kv");
  REQUIRE(lesson10::run(o) == 0);
  const std::string json = testing::read_text(dir.file("json/lesson10-kv.json"));
  check_header(json, "kv");
  const auto ctx = numbers_of(json, "context");
  const auto cache = numbers_of(json, "ms_per_token_cache");
  const auto nocache = numbers_of(json, "ms_per_token_nocache");
  REQUIRE(ctx.size() >= 3);
  CHECK(ctx.front() == 32);
  CHECK(ctx.back() == 256);  // --quick: context up to 256
  REQUIRE(cache.size() == ctx.size());
  REQUIRE(nocache.size() == ctx.size());
  for (size_t i = 0; i < ctx.size(); ++i) {
    CHECK(cache[i] > 0.0);
    CHECK(nocache[i] > 0.0);
  }
  const auto diff = numbers_of(json, "max_logit_diff");
  REQUIRE(diff.size() == 1);
  CHECK(std::isfinite(diff[0]));
  CHECK(diff[0] < 1e-3);  // the same logits, to float rounding
}

TEST_CASE("lesson10 law: bytes per token, tokens per s and the law's line for every format", "[lesson10]") {
  testing::TempDir dir("lesson10-law");
  const lesson10::Options o = quick_options(dir, "law");
  REQUIRE(lesson10::run(o) == 0);
  const std::string json = testing::read_text(dir.file("json/lesson10-law.json"));
  check_header(json, "law");
  const auto bw = numbers_of(json, "bandwidth_gbs"), bw1 = numbers_of(json, "bandwidth_1t_gbs");
  REQUIRE(bw.size() == 1);
  REQUIRE(bw1.size() == 1);
  CHECK(bw[0] > 0.0);
  CHECK(bw1[0] > 0.0);
  const auto formats = strings_of(json, "format");
  const auto bytes = numbers_of(json, "bytes_per_token");
  const auto tps = numbers_of(json, "tokens_per_s");
  const auto law = numbers_of(json, "law_tokens_per_s");
  const auto frac = numbers_of(json, "fraction_of_law");
  const auto params = numbers_of(json, "params");
  const size_t n = bytes.size();
  REQUIRE(n == 12);  // 3 models x fp32, bf16, int8, int4
  REQUIRE(law.size() == n);
  REQUIRE(frac.size() == n);
  REQUIRE(params.size() == n);
  for (size_t i = 0; i < n; ++i) {
    INFO("row " << i << " " << formats[i]);
    CHECK(tps[i] > 0.0);
    CHECK(law[i] > 0.0);
    CHECK(std::fabs(law[i] - bw[0] * 1e9 / bytes[i]) <= 1e-3 * law[i]);  // the law's line
    CHECK(std::fabs(frac[i] - tps[i] / law[i]) <= 1e-3 * frac[i]);
  }
  // per model, in the order fp32, bf16, int8, int4: each reads fewer bytes than the last
  for (size_t m = 0; m < n; m += 4) {
    CHECK(formats[m] == "fp32");
    CHECK(formats[m + 3] == "int4");
    CHECK(bytes[m + 1] < bytes[m]);
    CHECK(bytes[m + 2] < bytes[m + 1]);
    CHECK(bytes[m + 3] < bytes[m + 2]);
    if (m > 0) CHECK(params[m] > params[m - 4]);  // models of growing size
  }
  // the batch rows: batches 1..16 for fp32 and int8; tokens/s = batch x steps/s
  const auto batch = numbers_of(json, "batch"), sps = numbers_of(json, "steps_per_s");
  REQUIRE(batch.size() == 10);
  REQUIRE(sps.size() == 10);
  REQUIRE(tps.size() == n + 10);
  for (size_t i = 0; i < batch.size(); ++i) {
    CHECK(sps[i] > 0.0);
    CHECK(std::fabs(tps[n + i] - batch[i] * sps[i]) <= 1e-3 * tps[n + i]);
  }
}

TEST_CASE("lesson10 quant: bytes, tokens per s and val loss of each format of the trained target",
          "[lesson10][slow]") {
  testing::TempDir dir("lesson10-quant");
  const lesson10::Options o = quick_options(dir, "quant");
  REQUIRE(lesson10::run(o) == 0);
  const std::string json = testing::read_text(dir.file("json/lesson10-quant.json"));
  check_header(json, "quant");
  const auto formats = strings_of(json, "format");
  REQUIRE(formats == std::vector<std::string>{"fp32", "bf16", "int8", "int4", "sparse24"});
  const auto bytes = numbers_of(json, "bytes"), per_token = numbers_of(json, "bytes_per_token");
  const auto tps = numbers_of(json, "tokens_per_s"), loss = numbers_of(json, "val_loss");
  const auto change = numbers_of(json, "val_loss_change");
  REQUIRE(bytes.size() == 5);
  REQUIRE(per_token.size() == 5);
  REQUIRE(tps.size() == 5);
  REQUIRE(loss.size() == 5);
  REQUIRE(change.size() == 5);
  CHECK(per_token[1] < per_token[0]);  // bf16 < fp32
  CHECK(per_token[2] < per_token[1]);  // int8 < bf16
  CHECK(per_token[3] < per_token[2]);  // int4 < int8
  CHECK(bytes[2] < bytes[0]);
  for (size_t i = 0; i < 5; ++i) {
    INFO(formats[i]);
    CHECK(tps[i] > 0.0);
    CHECK(std::isfinite(loss[i]));
    CHECK(loss[i] > 0.0);
    CHECK(loss[i] < 5.0);  // trained: below ln(V) of a uniform guess over a few dozen characters
    CHECK(std::fabs(change[i] - (loss[i] - loss[0])) < 1e-4);
    CHECK(bytes[i] > per_token[i]);  // the whole embedding tables vs one row of each
  }
  CHECK(change[0] == 0.0);
  CHECK(std::fabs(change[1]) < 0.05);  // bf16 rounding costs next to nothing
  // the trained model was saved for the next run
  CHECK(std::filesystem::exists(dir.file("out/target/best.safetensors")));
}
