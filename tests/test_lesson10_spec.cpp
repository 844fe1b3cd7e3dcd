// Lesson 10, parts speculative and prune, end to end in quick mode on a small corpus: the
// models train into a temporary --out-dir, each part writes its JSON, and the JSON's fields
// agree with the formulas and with each other (gpt/speculative.h, gpt/prune.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "gpt/speculative.h"
#include "lessons/10-inference/inference_lesson.h"
#include "nn/rng.h"
#include "tests/lesson10_test_util.h"
#include "tests/test_util.h"

using testing::numbers_of;
using testing::strings_of;

TEST_CASE("lesson10: parts speculative and prune run in quick mode and write their JSON", "[lesson10][slow]") {
  testing::TempDir dir("lesson10-spec");
  lesson10::Options o;
  o.quick = true;
  o.backend = "cpu";
  o.data = testing::write_lesson10_corpus(dir, 30000);
  o.out_dir = dir.file("out");
  o.json_dir = dir.file("json");

  o.part = "speculative";
  REQUIRE(lesson10::run(o) == 0);
  const std::string spec = testing::read_text(dir.file("json/lesson10-speculative.json"));
  INFO(spec);
  CHECK(strings_of(spec, "schema") == std::vector<std::string>{"nnlab-lesson10/1"});
  CHECK(strings_of(spec, "part") == std::vector<std::string>{"speculative"});
  CHECK(strings_of(spec, "draft") == std::vector<std::string>{"draft-s", "draft-s", "draft-m", "draft-m"});
  CHECK(spec.find("\"target\": {\"params\": ") != std::string::npos);
  const std::vector<double> k = numbers_of(spec, "k"), acc = numbers_of(spec, "acceptance"),
                            tpr = numbers_of(spec, "tokens_per_round"),
                            etpr = numbers_of(spec, "expected_tokens_per_round"), c = numbers_of(spec, "cost_ratio"),
                            sp = numbers_of(spec, "speedup"), esp = numbers_of(spec, "expected_speedup"),
                            rounds = numbers_of(spec, "rounds"), emitted = numbers_of(spec, "emitted"),
                            drafted = numbers_of(spec, "drafted"), judged = numbers_of(spec, "judged"),
                            accepted = numbers_of(spec, "accepted");
  REQUIRE(k == std::vector<double>{1, 4, 1, 4});
  REQUIRE(acc.size() == 4);
  REQUIRE(tpr.size() == 4);
  REQUIRE(etpr.size() == 4);
  REQUIRE(c.size() == 4);
  REQUIRE(sp.size() == 4);
  REQUIRE(esp.size() == 4);
  REQUIRE(rounds.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    INFO("row " << i);
    CHECK(acc[i] >= 0.0);
    CHECK(acc[i] <= 1.0);
    CHECK(acc[i] == Approx(accepted[i] / judged[i]).epsilon(1e-5));
    CHECK(judged[i] <= drafted[i]);
    CHECK(judged[i] - accepted[i] <= rounds[i]);  // at most one reject per round
    CHECK(tpr[i] >= 1.0);
    CHECK(tpr[i] <= k[i] + 1.0);
    CHECK(tpr[i] == Approx(emitted[i] / rounds[i]).epsilon(1e-5));
    CHECK(etpr[i] == Approx(gpt::expected_tokens_per_round(acc[i], static_cast<int>(k[i]))).epsilon(1e-4));
    CHECK(c[i] > 0.0);
    CHECK(sp[i] > 0.0);
    CHECK(esp[i] == Approx(gpt::expected_speedup(acc[i], static_cast<int>(k[i]), c[i])).epsilon(1e-4));
  }
  // the same runs and tokens for every row: as many tokens emitted in each
  CHECK(emitted[0] == emitted[1]);
  CHECK(emitted[0] == emitted[3]);
  REQUIRE(numbers_of(spec, "baseline_tokens_per_s").size() == 1);
  CHECK(numbers_of(spec, "baseline_tokens_per_s")[0] > 0.0);

  o.part = "prune";  // the target trained above is reused
  REQUIRE(lesson10::run(o) == 0);
  const std::string pr = testing::read_text(dir.file("json/lesson10-prune.json"));
  INFO(pr);
  CHECK(strings_of(pr, "part") == std::vector<std::string>{"prune"});
  CHECK(strings_of(pr, "kind") ==
        std::vector<std::string>{"magnitude", "magnitude", "magnitude", "magnitude", "magnitude", "2:4"});
  const std::vector<double> s = numbers_of(pr, "sparsity"), ms = numbers_of(pr, "measured_sparsity"),
                            vp = numbers_of(pr, "val_loss_pruned"), vf = numbers_of(pr, "val_loss_finetuned");
  REQUIRE(s == std::vector<double>{0.0, 0.25, 0.5, 0.75, 0.9, 0.5});  // 0: the fine-tuned dense control
  REQUIRE(ms.size() == 6);
  REQUIRE(vp.size() == 6);
  REQUIRE(vf.size() == 6);
  const double dense = numbers_of(pr, "val_loss_dense").at(0);
  CHECK(vp[0] == Approx(dense).epsilon(1e-6));  // nothing pruned yet
  for (size_t i = 0; i < 6; ++i) {
    INFO("row " << i);
    CHECK(ms[i] == Approx(s[i]).margin(0.01));
    CHECK(std::isfinite(vp[i]));
    CHECK(std::isfinite(vf[i]));
    CHECK(vp[i] > 0.0);
  }
  CHECK(vp[4] > dense);   // 90% of the weights gone: worse than the dense model
  CHECK(vp[4] > vp[1]);   // and worse than 25%
  CHECK(strings_of(pr, "what") ==
        std::vector<std::string>{"dense fp32", "magnitude 0.5, fp32", "2:4, fp32", "2:4, sparse24"});
  const std::vector<double> bytes = numbers_of(pr, "bytes_per_token"), tps = numbers_of(pr, "tokens_per_s");
  REQUIRE(bytes.size() == 4);
  REQUIRE(tps.size() == 4);
  CHECK(bytes[1] == bytes[0]);  // zeros in fp32 are bytes like any other
  CHECK(bytes[2] == bytes[0]);
  CHECK(bytes[3] < bytes[0]);   // sparse24 stores half the values and 2-bit positions
  for (const double t : tps) CHECK(t > 0.0);
  const std::vector<double> speed_val = numbers_of(pr, "val_loss");
  REQUIRE(speed_val.size() == 4);
  CHECK(speed_val[0] == Approx(dense).epsilon(1e-5));
  CHECK(speed_val[2] == Approx(vf[5]).epsilon(1e-5));  // the fine-tuned 2:4 model, in fp32
  // as sparse24: the same weights (2:4 packs a 2:4 matrix losslessly, the head stays fp32)
  CHECK(speed_val[3] == Approx(speed_val[2]).epsilon(1e-5));
}
