// Lesson 10: what the parts conclude is computed from what they measured. Each conclusion
// function gets numbers both ways (the recorded figures of docs/benchmarks/lesson10-inference.md,
// and made-up figures where the opposite holds) and must say the opposite things. Before,
// part law printed "steps/s falls little from B = 1 to 16" and "can beat the DRAM law
// (fraction > 1)" whatever it measured, next to 218.8 -> 62.5 steps/s and no point above 0.71;
// part speculative printed "at most -12 fit".
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "lessons/10-inference/inference_lesson.h"
#include "tests/test_util.h"

using Catch::Contains;

namespace {

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

// The recorded law table of docs/benchmarks/lesson10-inference.md, three of its models
// (C128-L4 and C256-L6 fit the 32 MiB L3; C1536-L12 does not), and its batch rows.
std::vector<lesson10::LawPoint> recorded_points() {
  return {
      {"C128-L4", "fp32", 809856, 3207680, 5196.0, 0.63, true},
      {"C128-L4", "bf16", 809856, 1618176, 4721.7, 0.29, true},
      {"C128-L4", "int8", 809856, 842116, 5627.8, 0.18, true},
      {"C128-L4", "int4", 809856, 525392, 4130.4, 0.08, true},
      {"C256-L6", "fp32", 4772096, 19024896, 856.1, 0.62, true},
      {"C256-L6", "bf16", 4772096, 9554432, 1943.7, 0.71, true},
      {"C1536-L12", "fp32", 340179456, 1360336896, 16.9, 0.88, false},
      {"C1536-L12", "bf16", 340179456, 680659968, 31.3, 0.81, false},
      {"C1536-L12", "int8", 340179456, 341485316, 45.5, 0.59, false},
      {"C1536-L12", "int4", 340179456, 213382080, 22.2, 0.18, false},
  };
}

std::vector<lesson10::BatchPoint> recorded_batch() {
  return {{"fp32", 1, 218.8}, {"fp32", 2, 221.6}, {"fp32", 4, 171.8}, {"fp32", 8, 116.2}, {"fp32", 16, 62.5},
          {"int8", 1, 472.5}, {"int8", 2, 395.7}, {"int8", 4, 269.9}, {"int8", 8, 159.3}, {"int8", 16, 78.9}};
}

constexpr double kL3 = 32.0 * 1024 * 1024;

}  // namespace

TEST_CASE("lesson10 law: the recorded figures give the recorded conclusions", "[lesson10]") {
  const std::string text = joined(lesson10::law_conclusions(recorded_points(), recorded_batch(), kL3));
  INFO(text);
  // nothing in the cache beat the DRAM line: the highest in-cache fraction was 0.71
  CHECK_THAT(text, Contains("did NOT beat the DRAM law here") && Contains("0.71 (C256-L6 bf16)"));
  CHECK_THAT(text, !Contains("beat the DRAM law: up to"));
  // steps/s fell: 218.8 -> 62.5 in fp32, 472.5 -> 78.9 in int8
  CHECK_THAT(text, Contains("steps/s falls from 218.8 to 62.5 (to 29%) from B = 1 to 16") &&
                       Contains("tokens/s grows only 4.6x for 16x"));
  CHECK_THAT(text, Contains("steps/s falls from 472.5 to 78.9"));
  CHECK_THAT(text, !Contains("falls little"));
  // beyond the cache: the range and the largest model's formats; int4 limited by unpacking
  CHECK_THAT(text, Contains("4 points at 0.18 to 0.88 of the law") &&
                       Contains("C1536-L12: fp32 0.88, bf16 0.81, int8 0.59, int4 0.18"));
  CHECK_THAT(text, Contains("int4 read 6.4x fewer bytes than fp32 there but ran only 1.3x as fast"));
  // the smallest model: 6.1x fewer bytes in int4, no faster: overhead-bound
  CHECK_THAT(text, Contains("the smallest model, C128-L4") && Contains("overhead-bound"));
}

TEST_CASE("lesson10 law: figures where the law holds give the opposite conclusions", "[lesson10]") {
  // made up: an in-cache point above the line, steps/s nearly flat with B, int4 keeping up,
  // and a smallest model whose speed follows its bytes
  const std::vector<lesson10::LawPoint> points = {
      {"S", "fp32", 1e6, 4e6, 1000.0, 1.40, true},  {"S", "int4", 1e6, 0.6e6, 6000.0, 1.25, true},
      {"L", "fp32", 1e8, 4e8, 60.0, 0.92, false},   {"L", "int4", 1e8, 0.6e8, 380.0, 0.87, false},
  };
  const std::vector<lesson10::BatchPoint> batch = {{"fp32", 1, 200.0}, {"fp32", 4, 190.0}, {"fp32", 16, 180.0}};
  const std::string text = joined(lesson10::law_conclusions(points, batch, kL3));
  INFO(text);
  CHECK_THAT(text, Contains("beat the DRAM law: up to 1.40 of it (S fp32)"));
  CHECK_THAT(text, !Contains("did NOT beat"));
  CHECK_THAT(text, Contains("steps/s falls little from B = 1 to 16 (200.0 -> 180.0) while tokens/s grows 14x (ideal 16x)"));
  CHECK_THAT(text, Contains("it keeps up with the bytes it saves"));
  CHECK_THAT(text, Contains("its speed still follows its bytes"));
  CHECK_THAT(text, !Contains("overhead-bound"));

  // steps/s that rises with B is not "falls little": it is a measurement to distrust
  const std::vector<lesson10::BatchPoint> noisy = {{"int8", 1, 4.2}, {"int8", 16, 47.2}};
  const std::string rose = joined(lesson10::law_conclusions(points, noisy, kL3));
  INFO(rose);
  CHECK_THAT(rose, Contains("steps/s ROSE from B = 1 to 16 (4.2 -> 47.2)") && Contains("timing noise"));
  CHECK_THAT(rose, !Contains("falls little"));

  // no model beyond the cache: the DRAM law is not claimed tested
  const std::vector<lesson10::LawPoint> small = {points[0], points[1]};
  CHECK_THAT(joined(lesson10::law_conclusions(small, {}, kL3)), Contains("the DRAM law was not tested"));
}

TEST_CASE("lesson10 kv: the conclusion follows the measured growth of both columns", "[lesson10]") {
  // recorded: 0.811 -> 2.960 ms with the cache, 6.954 -> 543.335 without, T = 32 to 1024
  const std::string recorded = joined(lesson10::kv_conclusions({{32, 0.811, 6.954}, {1024, 2.960, 543.335}}));
  INFO(recorded);
  CHECK_THAT(recorded, Contains("from T = 32 to T = 1024 (32x the context): ms/token grew 3.6x with the cache and 78x without"));
  CHECK_THAT(recorded, Contains("grows far more slowly") && Contains("the cache is 184x faster"));
  // made up: both columns grew alike
  const std::string alike = joined(lesson10::kv_conclusions({{32, 1.0, 2.0}, {1024, 3.0, 5.0}}));
  INFO(alike);
  CHECK_THAT(alike, Contains("the two columns grew alike here"));
  CHECK_THAT(alike, !Contains("far more slowly"));
  CHECK(lesson10::kv_conclusions({{32, 1.0, 2.0}}).empty());  // one point: nothing to compare
}

TEST_CASE("lesson10 speculative: the tokens that fit, and a clear error when none do", "[lesson10]") {
  CHECK(lesson10::speculative_tokens(128, 16, 8, 0) == 104);  // as many as fit
  CHECK(lesson10::speculative_tokens(128, 16, 8, 50) == 50);
  CHECK(lesson10::speculative_tokens(25, 16, 8, 0) == 1);
  // a model of context 12 used to print "at most -12 fit"
  const std::string none = testing::error_of([] { lesson10::speculative_tokens(12, 16, 8, 0); });
  CHECK_THAT(none, Contains("context holds 12 positions") && Contains("need 25") && Contains("--block-size") &&
                       !Contains("-12"));
  const std::string too_many = testing::error_of([] { lesson10::speculative_tokens(128, 16, 8, 200); });
  CHECK_THAT(too_many, Contains("--tokens 200: at most 104 fit"));
  CHECK_THAT(testing::error_of([] { lesson10::speculative_tokens(128, 16, 8, -3); }), Contains("--tokens -3"));
}
