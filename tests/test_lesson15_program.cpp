// Lesson 15 as a student runs it: every part at --quick from the program, one record with all of
// them, the conclusions the parts print computed from what they measured (present whichever way
// they come out), and what bad flags do (a clear message, a non-zero exit, no record).
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "tests/cli_helpers.h"
#include "tests/test_util.h"

using Catch::Contains;

TEST_CASE("lesson15 --quick: every part runs from the program and fills one record", "[lesson15][cli]") {
  testing::TempDir tmp("lesson15-all");
  const std::string json = tmp.file("l15.json");
  const auto r = testing::run_program("lesson15", "--quick --json " + json + " --out-dir " + tmp.file("l10") +
                                                      " --bitnet-dir " + tmp.file("bitnet"));
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string j = testing::read_text(json);
  REQUIRE_THAT(j, Contains("\"schema\": \"nnlab-lesson15/1\"") && Contains("\"quick\": true"));
  // int8: the peaks, every rung of the ladder (validated before timing), the sgemm beside it
  REQUIRE_THAT(j, Contains("\"int8\": {") && Contains("\"int8_all\": ") && Contains("\"op\": \"int8_gemm\"") &&
                      Contains("\"op\": \"sgemm\""));
  CHECK_THAT(r.output, Contains("outputs equal v1's") && Contains("of the bandwidth law"));
  // the ternary rungs: fp32 activations (v3) and int8 activations (v5), each validated first
  CHECK_THAT(j, Contains("\"format\": \"ternary\"") && Contains("\"format\": \"ternary-a8\""));
  // w8a8: outliers, the losses (SmoothQuant among them), decoding in int8 and w8a8
  REQUIRE_THAT(j, Contains("\"w8a8\": {") && Contains("\"max_over_median\": ") &&
                      Contains("SmoothQuant alpha 0.50") && Contains("\"format\": \"w8a8\""));
  CHECK_THAT(r.output, Contains("W8A8 decodes at ") && Contains("weight-only int8's tokens/s"));
  // gptq: RTN and GPTQ at 4 and 3 bits, each with a verdict
  REQUIRE_THAT(j, Contains("\"gptq\": {") && Contains("{\"bits\": 3, \"method\": \"gptq\""));
  CHECK_THAT(r.output, Contains("int3: GPTQ's loss change"));
  // GPTQ's int4 packed as it chose it, checked against the GPTQ model, then decoded
  CHECK_THAT(j, Contains("\"packed\": {\"weights_checked\": ") && Contains("\"int4_gptq\": "));
  // bitnet: four runs with loss curves, W1.58A8 (int8 activations) among them
  REQUIRE_THAT(j, Contains("\"bitnet\": {") && Contains("\"name\": \"ternary\", \"n_embd\": 64, \"ternary\": true") &&
                      Contains("\"curve\": ["));
  CHECK_THAT(j, Contains("\"name\": \"W1.58A8\", \"n_embd\": 64, \"ternary\": true, \"int8_activations\": true"));
  CHECK_THAT(r.output, Contains("against fp32 at the same bytes"));
  // kv: bytes for three models, the loss by context length
  REQUIRE_THAT(j, Contains("\"kv\": {") && Contains("\"model\": \"GPT-2 124M\"") && Contains("{\"T\": 16, "));
  // the real int8 cache: its measured bytes, and the long-context model's losses and decoding
  CHECK_THAT(j, Contains("\"measured_bytes_per_token\": ") && Contains("\"long\": {"));
  // energy: the probe, and joules per token either measured or marked as an estimate
  REQUIRE_THAT(j, Contains("\"energy\": {\"probe\": ") && Contains("\"joules_kind\": "));
  CHECK_THAT(r.output, Contains("J/token (measured)") || Contains("J/token (estimate)"));
}

TEST_CASE("lesson15: bad flags are refused by name, and no record is written", "[lesson15][cli]") {
  testing::TempDir tmp("lesson15-bad");
  const std::string json = tmp.file("l15.json");
  struct Case {
    const char* args;
    const char* says;
  };
  const Case cases[] = {
      {"--part nosuchpart", "nosuchpart"},
      {"--part bitnet --bitnet-steps 3", "--bitnet-steps"},
      {"--part int8 --threads -2", "--threads"},
      {"--part w8a8 --data /nonexistent/corpus.txt", "/nonexistent/corpus.txt"},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    const auto r = testing::run_program("lesson15", std::string(c.args) + " --quick --json " + json + " --out-dir " +
                                                        tmp.file("o") + " --bitnet-dir " + tmp.file("b"));
    INFO(r.output);
    CHECK(r.status != 0);
    CHECK_THAT(r.output, Contains(c.says));
    CHECK_FALSE(std::filesystem::exists(json));
  }
}
