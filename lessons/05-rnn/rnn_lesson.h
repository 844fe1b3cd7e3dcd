// Lesson 05: recurrent networks. See lessons/05-rnn/README.md.
//
//   cell       one tanh RNN step with every number printed, then BPTT over a few steps
//              checked against finite differences
//   gradients  how the gradient reaching h_t shrinks or grows with its distance from the
//              loss, for several sizes of the recurrent weights (the vanishing/exploding plot)
//   chars      a character-level language model on Tiny Shakespeare (or a Debian text),
//              sampled from a prompt at a temperature
//   plant      one-step-ahead prediction of a simulated tank under PI control, against
//              persistence and ARX baselines
// The training code is shared with lesson 06 (seq_tasks.h): only the cell differs.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "lessons/05-rnn/seq_tasks.h"

namespace lesson05 {

// Flags shared by lessons 05 and 06. Sizes left at 0 take the part's own default (the
// character model is larger than the plant model).
struct SeqFlags {
  int hidden = 0;          // 0: 256 for chars, 32 for plant
  int seq_len = 0;         // 0: 64
  int batch_size = 0;      // 0: 32 for chars, 16 for plant
  float lr = 0.0f;         // 0: 3e-3 for chars, 1e-2 for plant
  int64_t iters = -1;      // -1: the part's default
  double budget_s = 0.0;   // stop training after this many seconds too (0: no limit)
  float clip = 1.0f;
  int eval_every = 0;      // 0: the part's default
  int eval_chunks = -1;    // chars: validation chunks per pass (-1: the part's default, 0: all)
  uint64_t seed = 42;
  std::string load;        // checkpoint to start from
  // chars
  std::string corpus;
  std::string prompt = "ROMEO:";
  bool prompt_given = false;  // set when --prompt is on the command line
  float temperature = 0.8f;
  int sample_len = 500;
  // plant
  int dead_time = 20;
  int train_steps = 20000;
  int val_steps = 5000;
  // everything
  bool quick = false;      // tiny budgets: what the tests and notebooks run
  std::string out_dir;
};

// Adds the flags above to a (sub)command.
void add_seq_flags(CLI::App& app, SeqFlags& f, const std::string& default_out_dir);
// The task options for a cell, from the flags (and --quick).
seqlab::CharOptions char_options(const SeqFlags& f, const std::string& cell);
seqlab::PlantOptions plant_options(const SeqFlags& f, const std::string& cell);

struct Options {
  std::string part = "all";  // cell | gradients | chars | plant | all
  SeqFlags flags;
};

void add_options(CLI::App& app, Options& opts);
int run(const Options& opts);

int run_cell_part(const Options& opts);
int run_gradients_part(const Options& opts);
int run_chars_part(const Options& opts);
int run_plant_part(const Options& opts);

}  // namespace lesson05
