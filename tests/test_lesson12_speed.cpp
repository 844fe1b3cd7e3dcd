// Lesson 12, part speed (lessons/12-real-models/speed_part.h): the named shapes have the
// parameter counts of the real models, the perplexity of a packed model is exp(the training
// forward's loss) at fp32, and --quick runs every measurement with a JSON record of the
// documented fields.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "gpt/backend.h"
#include "gpt/infer.h"
#include "gpt/model.h"
#include "lessons/12-real-models/real_lesson.h"
#include "lessons/12-real-models/speed_part.h"
#include "nn/rng.h"
#include "tests/lesson10_test_util.h"
#include "tests/test_util.h"

TEST_CASE("lesson12 speed: the named shapes are the real models' (parameter counts)", "[lesson12]") {
  // transformers' num_parameters() of GPT2LMHeadModel gpt2 / gpt2-medium and of SmolLM-135M
  // (tied heads counted once), as their model cards and configs give them
  CHECK(gpt::num_parameters(lesson12::named_shape("gpt2-124m")) == 124439808);
  CHECK(gpt::num_parameters(lesson12::named_shape("gpt2-355m")) == 354823168);
  CHECK(gpt::num_parameters(lesson12::named_shape("smollm-135m")) == 134515008);
  CHECK_THROWS_WITH(lesson12::named_shape("gpt5"), Catch::Contains("gpt2-124m"));
}

TEST_CASE("lesson12 speed: perplexity of the packed fp32 model = exp(gpt_forward's loss)", "[lesson12]") {
  for (const char* shape : {"tiny-gpt2", "tiny-llama"}) {
    const gpt::GPTConfig c = lesson12::named_shape(shape);
    gpt::GPT model = gpt::gpt_create(c);
    gpt::gpt_init_weights(model, 3);
    auto be = gpt::make_backend("cpu", "fp32");
    const int T = 48;
    std::vector<int32_t> ids(static_cast<size_t>(T));
    nn::Rng rng(4);
    for (auto& t : ids) t = static_cast<int32_t>(rng.below(static_cast<uint32_t>(c.vocab_size)));
    // the training forward: inputs ids[0..T-2], targets ids[1..T-1]
    gpt::gpt_forward(model, *be, ids.data(), ids.data() + 1, 1, T - 1);
    const double want = std::exp(static_cast<double>(model.mean_loss));
    const gpt::InferenceModel im = gpt::pack_model(model, kernels::WeightFormat::f32, be->memory());
    const double got = lesson12::packed_perplexity(im, *be, ids, T);
    INFO(shape << ": packed " << got << ", training forward " << want);
    CHECK(std::abs(got - want) <= 1e-4 * want);
    // windows: two halves score T - 2 positions, each window's first token context only
    const double halves = lesson12::packed_perplexity(im, *be, ids, T / 2);
    CHECK(std::isfinite(halves));
    CHECK(halves > 1.0);
    std::vector<int32_t> bad = ids;
    bad[3] = c.vocab_size;
    CHECK_THROWS_WITH(lesson12::packed_perplexity(im, *be, bad, T), Catch::Contains("vocabulary"));
  }
}

TEST_CASE("lesson12 speed --quick: every format, the law, perplexity, speculative, the JSON record", "[lesson12]") {
  testing::TempDir dir("lesson12-speed");
  lesson12::Options o;
  o.part = "speed";
  o.quick = true;
  o.threads = 2;
  o.data = testing::write_lesson10_corpus(dir, 8000);
  o.json = dir.file("lesson12.json");
  REQUIRE(lesson12::run(o) == 0);
  const std::string json = testing::read_text(o.json);
  CHECK_THAT(json, Catch::Contains("\"schema\": \"nnlab-lesson12/1\""));
  CHECK_THAT(json, Catch::Contains("\"speed\": {"));
  // three tiny shapes x four formats
  const std::vector<std::string> formats = testing::strings_of(json, "format");
  REQUIRE(formats.size() == 12);
  CHECK(formats[0] == "fp32");
  CHECK(formats[3] == "int4");
  for (const char* key : {"tokens_per_s", "law_tokens_per_s", "fraction_of_law", "perplexity", "bytes_per_token"}) {
    for (double v : testing::numbers_of(json, key)) {
      INFO(key);
      CHECK(std::isfinite(v));
      CHECK(v > 0.0);
    }
  }
  // the formats read fewer bytes in order; a random model's perplexity is about V = 512
  const std::vector<double> bytes = testing::numbers_of(json, "bytes_per_token");
  CHECK(bytes[0] > bytes[1]);
  CHECK(bytes[1] > bytes[2]);
  CHECK(bytes[2] > bytes[3]);
  for (double p : testing::numbers_of(json, "perplexity")) {
    CHECK(p > 300.0);
    CHECK(p < 900.0);
  }
  // speculative: the draft shape and the target's own int4 copy
  CHECK(testing::strings_of(json, "draft").size() == 2);
  for (double a : testing::numbers_of(json, "acceptance")) {
    CHECK(a >= 0.0);
    CHECK(a <= 1.0);
  }
  // --speed-models naming a directory that is not there: the loader's error names it
  lesson12::Options m = o;
  m.json.clear();
  m.speed.models = dir.file("no-such-model");
  CHECK_THROWS_WITH(lesson12::run(m), Catch::Contains("no-such-model"));
}
