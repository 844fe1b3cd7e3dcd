// Lesson 02: backprop and gradient descent. See lessons/02-backprop/README.md.
//
// Three parts, each a step closer to how real frameworks work:
//   autograd  a tiny scalar autograd: values that remember their parents (autograd.h)
//   loops     the same small MLP with its backward pass written as loops (loops.cpp)
//   train     the nn/ library in matrix form, trained on Fashion-MNIST (train.cpp)
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace lesson02 {

struct Options {
  std::string part = "all";  // autograd | loops | train | all
  bool trace = false;        // autograd/loops: print every node's value and gradient

  // ---- part "train": the Fashion-MNIST MLP ----
  std::string dataset = "fashion-mnist";  // or "mnist"
  std::string data_dir;                   // default: searched (see nn::find_dataset_dir)
  std::vector<int> hidden = {256, 128};   // hidden layer widths
  std::string activation = "relu";
  std::string optimizer = "adam";         // adam | sgd
  int epochs = 15;
  int batch_size = 128;
  float lr = 1e-3f;                       // peak learning rate
  float lr_min_frac = 0.05f;              // cosine decay down to lr * lr_min_frac
  float momentum = 0.9f;                  // sgd only
  float weight_decay = 0.0f;
  uint64_t seed = 42;
  int threads = 0;                        // 0 = OpenMP's default
  int64_t limit_train = 0;                // use only the first N training images (0 = all)
  int64_t limit_test = 0;
  std::string out_dir = "out/lesson02";   // log, checkpoint, predictions go here
};

void add_options(CLI::App& app, Options& opts);
int run(const Options& opts);

// The parts, callable one by one (tests and the exercises use them).
int run_autograd_part(const Options& opts);
int run_loops_part(const Options& opts);
int run_train_part(const Options& opts);

}  // namespace lesson02
