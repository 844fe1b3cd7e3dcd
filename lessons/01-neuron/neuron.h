// Lesson 01: a neuron and an MLP in plain loops. See lessons/01-neuron/README.md.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace lesson01 {

struct Options {
  std::string part = "all";  // which part to run: inference | nudge | gradient | all
  bool trace = false;        // print every intermediate value for one input
  uint64_t seed = 1;         // random nudges are reproducible
  int steps = 2000;          // nudge-training steps
  std::string csv;           // if set, write the training curve here (the notebook reads it)
};

void add_options(CLI::App& app, Options& opts);
int run(const Options& opts);

}  // namespace lesson01
