// Lesson 05 (and the sequence tasks lesson 06 shares): the parts run, the models learn
// on data the tests make, runs repeat from a seed, and bad input ends in clear errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "lessons/05-rnn/rnn_lesson.h"
#include "lessons/05-rnn/seq_tasks.h"
#include "nn/checkpoint.h"
#include "nn/rng.h"
#include "tests/cli_helpers.h"
#include "tests/seq_test_util.h"
#include "tests/test_util.h"

namespace {

// ~20k characters of a tiny language: sentences drawn at random from a few templates, so
// there is structure to learn (words, spaces, full stops) but no way to memorise one order.
std::string make_corpus(const std::string& path) {
  const char* subjects[] = {"the cat", "a dog", "the old man", "my friend", "the river"};
  const char* verbs[] = {" sees ", " likes ", " follows ", " waits for "};
  const char* objects[] = {"the moon.", "a bird.", "the sea.", "his shadow.", "the red door."};
  nn::Rng rng(7);
  std::string text;
  while (text.size() < 20000) {
    text += subjects[rng.below(5)];
    text += verbs[rng.below(4)];
    text += objects[rng.below(5)];
    text += rng.below(3) == 0 ? "\n" : " ";
  }
  std::ofstream(path) << text;
  return text;
}

seqlab::CharOptions quick_chars(const std::string& corpus, const std::string& out, const std::string& cell) {
  lesson05::SeqFlags f;
  f.quick = true;
  f.corpus = corpus;
  f.out_dir = out;
  f.prompt = "the ";
  return lesson05::char_options(f, cell);
}

}  // namespace

TEST_CASE("lesson 05 part cell: one step printed, BPTT agrees with finite differences", "[lesson05]") {
  testing::CaptureCout capture;
  lesson05::Options o;
  REQUIRE(lesson05::run_cell_part(o) == 0);
  const std::string text = capture.text();
  INFO(text);
  REQUIRE_THAT(text, Catch::Contains("h_2 = tanh("));
  // four gradients checked (Wx, Wh, b, x), all ok
  size_t oks = 0;
  for (size_t p = text.find("  ok"); p != std::string::npos; p = text.find("  ok", p + 1)) ++oks;
  REQUIRE(oks == 4);
  REQUIRE_THAT(text, !Catch::Contains("MISMATCH"));
}

TEST_CASE("gradient vs distance: a tanh RNN's gradient vanishes with small Wh, not with large", "[lesson05]") {
  const auto rows = seqlab::gradient_vs_distance(nn::CellType::RNN, 32, 4, 40, {0.5, 4.0}, 3);
  REQUIRE(rows.size() == 80);
  auto norm_at = [&](double scale, int d) {
    for (const auto& r : rows)
      if (r.scale == scale && r.distance == d) return r.norm;
    FAIL("no row for scale " << scale << " distance " << d);
    return 0.0;
  };
  REQUIRE(norm_at(0.5, 0) == Approx(1.0));
  // small recurrent weights: each step back multiplies by ||Wh|| * tanh' < 1
  REQUIRE(norm_at(0.5, 20) < 1e-3 * norm_at(0.5, 1));
  // large ones keep (or grow) it far longer
  REQUIRE(norm_at(4.0, 20) > 100.0 * norm_at(0.5, 20));
  for (const auto& r : rows) REQUIRE(std::isfinite(r.norm));
}

TEST_CASE("the character model learns a small corpus and samples from a prompt", "[lesson05]") {
  testing::TempDir dir("lesson05-chars");
  make_corpus(dir.file("corpus.txt"));
  std::ostringstream log;
  const auto o = quick_chars(dir.file("corpus.txt"), dir.file("out"), "rnn");
  const seqlab::CharResult r = seqlab::run_char_task(o, log);
  INFO(log.str());
  REQUIRE(r.iters == o.iters);
  REQUIRE(r.curve.size() >= 2);
  // from ~log(V) = 3.3 nats at the start to clearly better: it learned something
  REQUIRE(r.curve.back().val_loss < r.curve.front().val_loss);
  REQUIRE(r.val_loss < 2.5);
  REQUIRE(r.sample.rfind("the ", 0) == 0);
  REQUIRE(r.sample.size() == 4 + static_cast<size_t>(o.sample_len));
  for (const char* f : {"char_rnn.jsonl", "char_rnn.safetensors", "char_rnn_sample.txt"}) {
    REQUIRE(std::filesystem::exists(dir.path / "out" / f));
  }
}

TEST_CASE("the character model repeats from its seed and loads its checkpoint", "[lesson05]") {
  testing::TempDir dir("lesson05-seed");
  make_corpus(dir.file("corpus.txt"));
  std::ostringstream log;
  auto o = quick_chars(dir.file("corpus.txt"), dir.file("a"), "rnn");
  o.iters = 20;
  const auto a = seqlab::run_char_task(o, log);
  o.out_dir = dir.file("b");
  const auto b = seqlab::run_char_task(o, log);
  REQUIRE(a.val_loss == b.val_loss);
  REQUIRE(a.sample == b.sample);
  o.seed = 43;
  o.out_dir = dir.file("c");
  const auto c = seqlab::run_char_task(o, log);
  REQUIRE(c.val_loss != a.val_loss);

  // Loading a's weights with no training reproduces a's validation loss and sample.
  auto l = quick_chars(dir.file("corpus.txt"), dir.file("d"), "rnn");
  l.iters = 0;
  l.load = dir.file("a") + "/char_rnn.safetensors";
  const auto d = seqlab::run_char_task(l, log);
  REQUIRE(d.val_loss == Approx(a.val_loss).epsilon(1e-6));
  REQUIRE(d.sample == a.sample);
}

// A prompt with a character the text never has failed only after training (and after the
// checkpoint was written); with the default prompt, every text without "ROMEO:"'s letters did.
// Now a prompt given is refused before anything is built, and the default one gives way.
TEST_CASE("lesson 05: a prompt the text cannot encode is refused before training", "[lesson05]") {
  testing::TempDir dir("lesson05-prompt");
  make_corpus(dir.file("corpus.txt"));  // lower case only: no 'R', 'Z', ':'
  std::ostringstream log;
  auto o = quick_chars(dir.file("corpus.txt"), dir.file("out"), "rnn");
  o.prompt = "the Zebra";
  o.prompt_given = true;
  REQUIRE_THAT(testing::error_of([&] { seqlab::run_char_task(o, log); }),
               Catch::Contains("--prompt \"the Zebra\"") && Catch::Contains("character 4") &&
                   Catch::Contains(dir.file("corpus.txt")));
  REQUIRE_FALSE(std::filesystem::exists(dir.path / "out" / "char_rnn.safetensors"));

  lesson05::SeqFlags f;  // the default prompt, not given on the command line
  f.quick = true;
  f.corpus = dir.file("corpus.txt");
  f.out_dir = dir.file("default");
  seqlab::CharOptions d = lesson05::char_options(f, "rnn");
  d.iters = 2;
  REQUIRE(d.prompt == "ROMEO:");
  std::ostringstream printed;
  const seqlab::CharResult r = seqlab::run_char_task(d, printed);
  INFO(printed.str());
  REQUIRE_THAT(printed.str(), Catch::Contains("the default prompt \"ROMEO:\" has characters this text never has"));
  REQUIRE(r.sample.size() == static_cast<size_t>(d.sample_len) + 1);  // a newline, then the sample
}

// Adam's update comes after the loss check: weights it blew up were validated (NaN or inf)
// and saved as the checkpoint. And a checkpoint holding NaN loaded without a word.
TEST_CASE("lesson 05: non-finite weights are never saved, nor loaded", "[lesson05]") {
  testing::TempDir dir("lesson05-nan");
  make_corpus(dir.file("corpus.txt"));
  std::ostringstream log;
  auto o = quick_chars(dir.file("corpus.txt"), dir.file("out"), "rnn");
  o.iters = 1;
  o.eval_every = 1;
  o.clip = 0.0f;
  o.lr = 3e38f;  // finite, absurd: one Adam step moves every weight by ~3e38
  REQUIRE_THAT(testing::error_of([&] { seqlab::run_char_task(o, log); }),
               Catch::Contains("at iteration 1 (not saved") && Catch::Contains(dir.file("out")));
  REQUIRE_FALSE(std::filesystem::exists(dir.path / "out" / "char_rnn.safetensors"));

  // a good checkpoint, then a copy with one NaN weight: loading it is refused
  auto good = quick_chars(dir.file("corpus.txt"), dir.file("good"), "rnn");
  good.iters = 5;
  seqlab::run_char_task(good, log);
  const std::string path = dir.file("good") + "/char_rnn.safetensors";
  nn::Checkpoint ck = nn::load_safetensors(path);
  ck.metadata.erase("nnlab.checksum");
  std::vector<nn::TensorRef> refs;
  std::string first;
  for (auto& [name, t] : ck.tensors) {
    if (first.empty()) {
      first = name;
      t.data()[2] = std::nanf("");
    }
    refs.push_back({name, t.shape(), t.data()});
  }
  const std::string bad = dir.file("nan.safetensors");
  std::map<std::string, std::string> meta = ck.metadata;
  meta.erase("nnlab.checksum");  // the writer computes both checksums anew (nn/checkpoint.h)
  meta.erase("nnlab.header_checksum");
  nn::save_safetensors(bad, refs, meta, nn::NonFinite::Allow);  // a damaged file on purpose
  auto l = quick_chars(dir.file("corpus.txt"), dir.file("l"), "rnn");
  l.iters = 0;
  l.load = bad;
  REQUIRE_THAT(testing::error_of([&] { seqlab::run_char_task(l, log); }),
               Catch::Contains(bad) && Catch::Contains("'" + first + "'") && Catch::Contains("index 2"));
}

TEST_CASE("the plant task trains and scores every model on the same rows", "[lesson05]") {
  testing::TempDir dir("lesson05-plant");
  lesson05::SeqFlags f;
  f.quick = true;
  f.out_dir = dir.file("out");
  std::ostringstream log;
  const auto r = seqlab::run_plant_task(lesson05::plant_options(f, "rnn"), log);
  INFO(log.str());
  REQUIRE(r.scores.size() == 4);
  REQUIRE(r.scores[0].model == "persistence");
  REQUIRE(r.scores[3].model == "rnn");
  for (const auto& s : r.scores) {
    REQUIRE(std::isfinite(s.level_rmse));
    REQUIRE(s.level_rmse > 0.0);
  }
  // the training loss went down
  REQUIRE(r.curve.back().val_loss < r.curve.front().val_loss);
  for (const char* file : {"plant_rnn_d20.json", "plant_rnn_d20.jsonl", "plant_rnn_d20_val.csv"}) {
    REQUIRE(std::filesystem::exists(dir.path / "out" / file));
  }
}

TEST_CASE("lesson 05: bad input is a clear error, never a crash", "[lesson05][cli]") {
  testing::TempDir dir("lesson05-errors");
  make_corpus(dir.file("corpus.txt"));
  std::ofstream(dir.file("short.txt")) << "too short to train on\n";
  const std::string out = " --out-dir " + dir.file("out");
  struct Case {
    std::string args;
    std::string expect;
  };
  const Case cases[] = {
      {"--part chars --quick --corpus " + dir.file("missing.txt"), "missing.txt"},
      {"--part chars --quick --corpus " + dir.file("short.txt"), "characters"},
      {"--part chars --quick --corpus " + dir.file("corpus.txt") + " --prompt Zebra", "Z"},
      {"--part chars --quick --corpus " + dir.file("corpus.txt") + " --load " + dir.file("missing.safetensors"),
       "missing.safetensors"},
      {"--part plant --quick --train-steps 200 --batch-size 16 --seq-len 64", "--train-steps"},
  };
  for (const Case& c : cases) {
    const auto r = testing::run_program("lesson05", c.args + out);
    INFO(c.args << " -> " << r.status << "\n" << r.output);
    REQUIRE(r.status == 1);
    REQUIRE_THAT(r.output, Catch::Contains("error:") && Catch::Contains(c.expect));
  }
}

TEST_CASE("lesson 05: a checkpoint of another model is refused", "[lesson05][cli]") {
  testing::TempDir dir("lesson05-wrong-ckpt");
  make_corpus(dir.file("corpus.txt"));
  const auto plant = testing::run_program("lesson05", "--part plant --quick --iters 5 --out-dir " + dir.file("p"));
  INFO(plant.output);
  REQUIRE(plant.status == 0);
  const auto r = testing::run_program("lesson05", "--part chars --quick --iters 0 --corpus " + dir.file("corpus.txt") +
                                                      " --load " + dir.file("p") + "/plant_rnn_d20.safetensors" +
                                                      " --out-dir " + dir.file("c"));
  INFO(r.output);
  REQUIRE(r.status == 1);
  REQUIRE_THAT(r.output, Catch::Contains("different model"));
}

TEST_CASE("lesson 05's README quotes what part gradients prints, and names its exercise", "[lesson05][docs]") {
  const std::string readme = std::string(NNLAB_SOURCE_DIR) + "/lessons/05-rnn/README.md";
  testing::check_quoted_gradients(readme, {{nn::CellType::RNN, 0.5}, {nn::CellType::RNN, 1.0}, {nn::CellType::RNN, 2.0},
                                  {nn::CellType::RNN, 4.0}});
  REQUIRE_THAT(testing::read_text(readme), Catch::Contains("exercises/10_rnn_step_backward"));
}
