// Lesson 06: LSTM. See lessons/06-lstm/README.md.
//
//   gates      one LSTM step with every gate printed, then its backward pass checked
//              against finite differences
//   gradients  gradient vs distance in time: the RNN of lesson 05 next to the LSTM
//   chars      the character model of lesson 05 with an LSTM cell
//   plant      the plant task of lesson 05 with an LSTM cell
//   compare    RNN vs LSTM on both tasks: the same data and time budget for the characters,
//              and the plant at several dead times (where memory matters)
// Everything but the cell is lesson 05's code (lessons/05-rnn/seq_tasks.h).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "lessons/05-rnn/rnn_lesson.h"

namespace lesson06 {

struct Options {
  std::string part = "all";  // gates | gradients | chars | plant | compare | all
  lesson05::SeqFlags flags;
  double compare_budget_s = 120.0;               // compare: seconds of training per character model
  std::vector<int> dead_times = {2, 20, 40};     // compare: the plant at these dead times
};

void add_options(CLI::App& app, Options& opts);
int run(const Options& opts);

int run_gates_part(const Options& opts);
int run_gradients_part(const Options& opts);
int run_chars_part(const Options& opts);
int run_plant_part(const Options& opts);
int run_compare_part(const Options& opts);

}  // namespace lesson06
