// tests/gpt_test_options.h: the trainer's options for a tiny, quick run (2 layers, C 16,
// context 16, 8 steps, evaluated at step 4 and 8, no log, quiet), shared by the tests that
// train through gpt::train on a small corpus file of their own; the corpus they write and the
// check that a run cut at step 4 and resumed gives the same losses.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>

#include "gpt/train.h"
#include "tests/test_util.h"

namespace testing {

inline gpt::TrainOptions tiny_train_options(const TempDir& dir, const std::string& corpus) {
  gpt::TrainOptions o;
  o.n_layer = 2;
  o.n_head = 2;
  o.n_embd = 16;
  o.block_size = 16;
  o.batch_size = 4;
  o.max_iters = 8;
  o.warmup_iters = 2;
  o.eval_interval = 4;
  o.eval_iters = 2;
  o.data = corpus;
  o.out_dir = dir.file("out");
  o.log = "none";
  o.quiet = true;
  return o;
}

// A corpus file in dir: one passage, 60 times (the trainer tests' text).
inline std::string repeated_corpus(const TempDir& dir) {
  std::string text;
  for (int i = 0; i < 60; ++i) text += "First Citizen:\nBefore we proceed any further, hear me speak.\n";
  const std::string corpus = dir.file("corpus.txt");
  std::ofstream(corpus) << text;
  return corpus;
}

// o (8 steps; `full` its run) interrupted at step 4 and resumed to 8: the cut run's losses
// are full's first four, the resumed run's its last four and the same final val loss, bit for
// bit. Returns the resumed run's options (resume: the step-4 checkpoint).
inline gpt::TrainOptions check_resume_exact(const gpt::TrainOptions& o, const gpt::TrainResult& full, const TempDir& dir,
                                            std::ostream& sink) {
  // the same run cut after step 4 (the evaluation there writes last.safetensors), then
  // resumed from that checkpoint up to step 8; the schedule must stay the 8-step one
  REQUIRE(full.step_losses.size() == 8);
  gpt::TrainOptions cut = o;
  cut.out_dir = dir.file("cut");
  cut.max_iters = 4;
  cut.lr_decay_iters = 8;
  const gpt::TrainResult part = gpt::train(cut, sink);
  REQUIRE(part.step_losses.size() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(part.step_losses[i] == full.step_losses[i]);
  gpt::TrainOptions resumed = o;
  resumed.out_dir = dir.file("resumed");
  resumed.resume = (std::filesystem::path(cut.out_dir) / "last.safetensors").string();
  resumed.lr_decay_iters = 8;
  const gpt::TrainResult rest = gpt::train(resumed, sink);
  REQUIRE(rest.step_losses.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    INFO("step " << i + 5);
    CHECK(rest.step_losses[i] == full.step_losses[i + 4]);
  }
  CHECK(rest.final_val_loss == full.final_val_loss);
  return resumed;
}


}  // namespace testing
