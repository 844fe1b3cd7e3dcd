// Lesson 06: the gates part checks the LSTM backward; the comparison runs both cells on
// both tasks and writes what the notebook reads.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "lessons/06-lstm/lstm_lesson.h"
#include "nn/rng.h"
#include "tests/seq_test_util.h"
#include "tests/test_util.h"

TEST_CASE("lesson 06 part gates: every gate printed, all six gradients agree", "[lesson06]") {
  testing::CaptureCout capture;
  lesson06::Options o;
  REQUIRE(lesson06::run_gates_part(o) == 0);
  const std::string text = capture.text();
  INFO(text);
  for (const char* g : {"input gate", "forget gate", "candidate", "output gate", "c = f * c_prev + i * g"}) {
    REQUIRE_THAT(text, Catch::Contains(g));
  }
  size_t oks = 0;
  for (size_t p = text.find("  ok"); p != std::string::npos; p = text.find("  ok", p + 1)) ++oks;
  REQUIRE(oks == 6);
}

TEST_CASE("lesson 06: the LSTM keeps gradients alive longer than the RNN at the default init", "[lesson06]") {
  const auto rnn = seqlab::gradient_vs_distance(nn::CellType::RNN, 64, 8, 60, {1.0}, 42);
  const auto lstm = seqlab::gradient_vs_distance(nn::CellType::LSTM, 64, 8, 60, {1.0}, 42);
  auto at = [](const std::vector<seqlab::GradientRow>& rows, int d) {
    for (const auto& r : rows)
      if (r.distance == d) return r.norm;
    return -1.0;
  };
  INFO("rnn d=20 " << at(rnn, 20) << ", lstm d=20 " << at(lstm, 20));
  REQUIRE(at(lstm, 20) > 10.0 * at(rnn, 20));
}

TEST_CASE("lesson 06 part compare (quick): both cells, both tasks, the files the notebook reads", "[lesson06]") {
  testing::TempDir dir("lesson06-compare");
  {
    std::string text;
    nn::Rng rng(3);
    const char* words[] = {"alpha ", "beta ", "gamma ", "delta\n"};
    while (text.size() < 12000) text += words[rng.below(4)];
    std::ofstream(dir.file("corpus.txt")) << text;
  }
  testing::CaptureCout capture;
  lesson06::Options o;
  o.flags.quick = true;
  o.flags.corpus = dir.file("corpus.txt");
  o.flags.prompt = "alpha";
  o.flags.out_dir = dir.file("out");
  o.dead_times = {2, 20};
  REQUIRE(lesson06::run_compare_part(o) == 0);
  const std::string chars = testing::read_text(dir.file("out/compare_chars.csv"));
  REQUIRE_THAT(chars, Catch::Contains("rnn,") && Catch::Contains("lstm,"));
  const std::string plant = testing::read_text(dir.file("out/compare_plant.csv"));
  // 2 dead times x 2 cells x 4 models + the header
  REQUIRE(std::count(plant.begin(), plant.end(), '\n') == 17);
  for (const char* f : {"char_rnn.jsonl", "char_lstm.jsonl", "plant_lstm_d20_val.csv", "plant_rnn_d2.json"}) {
    REQUIRE(std::filesystem::exists(dir.path / "out" / f));
  }
}

TEST_CASE("lesson 06's README quotes what part gradients prints, and names its exercise", "[lesson06][docs]") {
  const std::string readme = std::string(NNLAB_SOURCE_DIR) + "/lessons/06-lstm/README.md";
  testing::check_quoted_gradients(readme, {{nn::CellType::RNN, 1.0}, {nn::CellType::RNN, 2.0}, {nn::CellType::LSTM, 1.0},
                                  {nn::CellType::LSTM, 2.0}});
  REQUIRE_THAT(testing::read_text(readme), Catch::Contains("exercises/11_lstm_cell_forward"));
}
