// Lesson 08: the lesson's tables agree with gpt/ (memory, FLOPs), the shapes part lists every
// parameter and activation, and train -> sample works end to end on a tiny model.
#include <catch2/catch.hpp>

#include <cctype>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "gpt/model.h"
#include "lessons/08-gpt/gpt_lesson.h"
#include "nn/rng.h"
#include "io/text.h"
#include "tests/test_util.h"

namespace {

// A small corpus and options for a model that trains in well under a second.
std::string write_corpus(const testing::TempDir& dir) {
  std::string text;
  nn::Rng rng(8);
  const char* words[] = {"ROMEO: ", "speak ", "love, ", "night.\n", "JULIET: "};
  while (text.size() < 6000) text += words[rng.below(5)];
  const std::string path = dir.file("corpus.txt");
  std::ofstream(path) << text;
  return path;
}

lesson08::Options tiny_options(const testing::TempDir& dir) {
  lesson08::Options o;
  o.train.data = write_corpus(dir);
  o.train.n_layer = 2;
  o.train.n_head = 2;
  o.train.n_embd = 16;
  o.train.block_size = 16;
  o.train.batch_size = 4;
  o.train.max_iters = 6;
  o.train.warmup_iters = 2;
  o.train.eval_interval = 3;
  o.train.eval_iters = 2;
  o.train.sample_tokens = 20;
  o.train.prompt = "ROMEO";
  o.train.out_dir = dir.file("out");
  o.train.quiet = true;
  o.flops_iters = 1;
  return o;
}

}  // namespace

TEST_CASE("lesson08: the memory table sums to memory_breakdown total", "[lesson08]") {
  gpt::GPTConfig cpu;  // nanoGPT's CPU config with V = 65
  const gpt::GPTConfig gpu = lesson08::nanogpt_gpu_config();
  gpt::GPTConfig with_dropout = cpu;
  with_dropout.dropout = 0.1f;
  struct Case {
    gpt::GPTConfig c;
    int B, T;
  };
  for (const Case& k : {Case{cpu, 12, 64}, Case{gpu, 64, 256}, Case{with_dropout, 3, 17}, Case{cpu, 1, 1}}) {
    const auto rows = lesson08::memory_table(k.c, k.B, k.T);
    int64_t sum = 0;
    for (const auto& r : rows) {
      REQUIRE(r.bytes > 0);
      sum += r.bytes;
    }
    INFO("B=" << k.B << " T=" << k.T << " C=" << k.c.n_embd);
    REQUIRE(sum == gpt::memory_breakdown(k.c, k.B, k.T).total());
  }
  // the lesson's numbers for the running example: 809,856 parameters, 4 copies of them
  REQUIRE(gpt::num_parameters(cpu) == 809856);
  REQUIRE(lesson08::memory_table(cpu, 12, 64)[0].bytes == 809856 * 4);
  // attention maps: 2 L B NH T^2 floats, so doubling T quadruples them
  REQUIRE(lesson08::attention_map_floats(cpu, 12, 128) == 4 * lesson08::attention_map_floats(cpu, 12, 64));
  REQUIRE(lesson08::attention_map_floats(cpu, 24, 64) == 2 * lesson08::attention_map_floats(cpu, 12, 64));
}

// At the flags' largest sizes (L 1024, NH 1024, C 65536, T 65536, B 65536) the byte counts
// passed 2^63 and printed as "0 B" and negative MiB. Now a size is checked in double first:
// memory_table refuses it, the growth table marks its rows, and nothing wraps.
TEST_CASE("lesson08: memory sizes beyond 64-bit byte counts are refused, not wrapped", "[lesson08]") {
  gpt::GPTConfig huge;
  huge.vocab_size = 65;
  huge.n_layer = 1024;
  huge.n_head = 1024;
  huge.n_embd = 65536;
  huge.block_size = 65536;
  REQUIRE_FALSE(lesson08::memory_countable(huge, 65536, 65536));
  REQUIRE_THAT(testing::error_of([&] { lesson08::memory_table(huge, 65536, 65536); }),
               Catch::Contains("B=65536 T=65536") && Catch::Contains("64-bit") && Catch::Contains("--batch-size"));

  // GPT-3 sized: large, countable, every row positive and the bound above the exact total
  gpt::GPTConfig gpt3;
  gpt3.vocab_size = 50257;
  gpt3.n_layer = 96;
  gpt3.n_head = 96;
  gpt3.n_embd = 12288;
  gpt3.block_size = 2048;
  REQUIRE(lesson08::memory_countable(gpt3, 64, 2048));
  int64_t sum = 0;
  for (const auto& r : lesson08::memory_table(gpt3, 64, 2048)) {
    REQUIRE(r.bytes > 0);
    sum += r.bytes;
  }
  REQUIRE(sum == gpt::memory_breakdown(gpt3, 64, 2048).total());
  const double bound = lesson08::memory_bytes_upper_bound(gpt3, 64, 2048);
  REQUIRE(bound >= static_cast<double>(sum));
  REQUIRE(bound <= 1.05 * static_cast<double>(sum));

  testing::TempDir dir("lesson08-huge");
  lesson08::Options o = tiny_options(dir);
  SECTION("the part refuses the flags' largest sizes with a message") {
    o.train.n_layer = 1024, o.train.n_head = 1024, o.train.n_embd = 65536, o.train.block_size = 65536;
    o.train.batch_size = 65536;
    testing::CaptureCout capture;
    REQUIRE_THAT(testing::error_of([&] { lesson08::run_memory_part(o); }), Catch::Contains("64-bit"));
    REQUIRE_THAT(capture.text(), !Catch::Contains(" 0 B"));
  }
  SECTION("rows of the growth table that would wrap say so; the rest are counted") {
    // the attention maps, 2 L B NH T^2 x 4 bytes, are 2^58 at (B, T), 2^61 at (2B, 2T) and
    // 2^62 at (B, 4T): the last row is past what the table counts
    o.train.n_layer = 1024, o.train.n_head = 1024, o.train.n_embd = 1024, o.train.block_size = 4096;
    o.train.batch_size = 2048;
    testing::CaptureCout capture;
    REQUIRE(lesson08::run_memory_part(o) == 0);
    const std::string text = capture.text();
    INFO(text);
    REQUIRE_THAT(text, Catch::Contains("beyond 64-bit byte counts"));
    REQUIRE_THAT(text, !Catch::Contains(" -"));  // no wrapped, negative count
    REQUIRE_THAT(text, !Catch::Contains(" 0 B"));
  }
}

TEST_CASE("lesson08: the FLOPs split adds up to flops_per_token", "[lesson08]") {
  const gpt::GPTConfig c;
  const auto f = lesson08::flops_breakdown(c, 64);
  REQUIRE(f.n_params == gpt::num_parameters(c) - 64 * 128);  // all but wpe
  REQUIRE(f.dense == 6.0 * static_cast<double>(f.n_params));
  REQUIRE(f.attention == 12.0 * 4 * 4 * 32 * 64);
  REQUIRE(std::fabs(f.total() - gpt::flops_per_token(c, 64)) < 1e-6 * f.total());
}

TEST_CASE("lesson08: symbolic shapes match the real shapes of every parameter", "[lesson08]") {
  gpt::GPTConfig c;
  c.vocab_size = 7;
  c.block_size = 5;
  c.n_layer = 2;
  c.n_head = 3;
  c.n_embd = 6;
  // substitute the letters and compare with the slice's shape
  auto eval = [&](const std::string& sym) {
    std::vector<int64_t> out;
    std::string part;
    for (char ch : sym.substr(1, sym.size() - 2) + ",") {
      if (ch == ' ') continue;
      if (ch != ',') {
        part += ch;
        continue;
      }
      int64_t mult = 1;
      std::string letter = part;
      if (!part.empty() && std::isdigit(static_cast<unsigned char>(part[0]))) {
        mult = part[0] - '0';
        letter = part.substr(1);
      }
      const int64_t v = letter == "V" ? c.vocab_size : letter == "maxT" ? c.block_size : letter == "C" ? c.n_embd : -1;
      out.push_back(mult * v);
      part.clear();
    }
    return out;
  };
  for (const auto& s : gpt::param_slices(c)) {
    INFO(s.name << " " << lesson08::symbolic_shape(s.name));
    REQUIRE(eval(lesson08::symbolic_shape(s.name)) == s.shape);
  }
}

TEST_CASE("lesson08 part shapes: every parameter and every activation is listed", "[lesson08]") {
  testing::TempDir dir("lesson08-shapes");
  const lesson08::Options o = tiny_options(dir);
  std::string text;
  {
    testing::CaptureCout capture;
    REQUIRE(lesson08::run_shapes_part(o) == 0);
    text = capture.text();
  }
  INFO(text);
  // the same model and batch, to know what must be there
  const nn::TextCorpus corpus = nn::load_corpus(o.train.data, o.train.val_fraction);
  const gpt::GPTConfig cfg = gpt::config_from(o.train, corpus.vocab.size());
  for (const auto& s : gpt::param_slices(cfg)) REQUIRE_THAT(text, Catch::Contains("  " + s.name + " "));
  gpt::GPT model = gpt::gpt_create(cfg);
  gpt::gpt_init_weights(model, 1);
  std::vector<int32_t> x(static_cast<size_t>(o.train.batch_size * cfg.block_size), 0);
  gpt::gpt_forward(model, *gpt::make_backend("naive"), x.data(), x.data(), o.train.batch_size, cfg.block_size);
  const auto views = gpt::activation_views(model);
  REQUIRE(views.size() == static_cast<size_t>(1 + 11 * cfg.n_layer + 4));
  size_t last = 0;
  for (const auto& v : views) {
    const size_t at = text.find("  " + v.name + " ", last);
    INFO(v.name);
    REQUIRE(at != std::string::npos);  // present, and after the one before it (forward order)
    last = at;
  }
  REQUIRE_THAT(text, Catch::Contains("(B, NH, T, T)"));
  REQUIRE_THAT(text, Catch::Contains("loss = "));
}

TEST_CASE("lesson08 parts memory and flops print their tables", "[lesson08]") {
  testing::TempDir dir("lesson08-memory");
  const lesson08::Options o = tiny_options(dir);
  testing::CaptureCout capture;
  REQUIRE(lesson08::run_memory_part(o) == 0);
  REQUIRE(lesson08::run_flops_part(o) == 0);
  const std::string text = capture.text();
  INFO(text);
  for (const char* s : {"AdamW m", "attention maps", "nanoGPT's GPU config", "QUADRUPLES", "6N", "12 L H Q T", "MFU",
                        "100% MFU"}) {
    REQUIRE_THAT(text, Catch::Contains(s));
  }
}

TEST_CASE("lesson08: train a tiny model and sample from its checkpoint (a missing one is a clear error)", "[lesson08]") {
  testing::TempDir dir("lesson08-train");
  lesson08::Options o = tiny_options(dir);
  o.checkpoint = dir.file("missing.safetensors");
  const std::string err = testing::error_of([&] { lesson08::run_sample_part(o); });
  REQUIRE_THAT(err, Catch::Contains("run `nnlab lesson08 --part train` first"));
  REQUIRE_THAT(err, Catch::Contains("missing.safetensors"));

  o.checkpoint.clear();  // <out-dir>/best.safetensors
  testing::CaptureCout capture;
  REQUIRE(lesson08::run_train_part(o) == 0);
  REQUIRE(lesson08::run_sample_part(o) == 0);
  const std::string text = capture.text();
  INFO(text);
  for (const char* s : {"temperature 0.5", "temperature 0.8", "temperature 1.0", "top-k 10"}) {
    REQUIRE_THAT(text, Catch::Contains(s));
  }
}

TEST_CASE("lesson08 parts shapes and sample run on the cuda backend (emulated): the model goes where it runs",
          "[lesson08][cuda]") {
  // Both parts made or loaded the model on the host and handed it to the backend as it was:
  // the cuda backend refused ("the model is in host memory"). They move it to the backend's
  // memory now, as the trainer does.
  testing::ScopedEnv device("NNLAB_DEVICE", std::string("emu"));
  testing::TempDir dir("lesson08-cuda");
  lesson08::Options o = tiny_options(dir);
  REQUIRE(lesson08::run_train_part(o) == 0);  // on the default backend, into the out-dir
  o.train.backend = "cuda";
  o.train.sample_tokens = 8;
  testing::CaptureCout capture;
  REQUIRE(lesson08::run_shapes_part(o) == 0);
  REQUIRE(lesson08::run_sample_part(o) == 0);
  const std::string text = capture.text();
  INFO(text);
  REQUIRE_THAT(text, Catch::Contains("cuda"));
  REQUIRE_THAT(text, Catch::Contains("loss = "));
  REQUIRE_THAT(text, Catch::Contains("temperature 0.5"));
  REQUIRE_THAT(text, !Catch::Contains("(B, NH, T, T) per layer"));  // the cuda attention keeps no preatt
}
