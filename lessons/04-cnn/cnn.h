// Lesson 04: convolutional networks. See lessons/04-cnn/README.md.
//
// Four parts:
//   conv   a 3x3 filter on a hand-made 8x8 image, stepped through: the plain loops, then
//          im2col + matmul giving the same numbers, then max-pooling and the backward
//   bench  the convolution ladder (kernels/conv.h v1..v4) on this lesson's two conv layers,
//          every rung validated against v1, then timed (writes bench.json for the notebook)
//   train  a small CNN on Fashion-MNIST: progress bar, log, checkpoint, test evaluation,
//          confusion matrix, filters and feature maps for the notebook
//   eval   load a checkpoint and evaluate it on the test set
//   speed  training and inference images/s on real batches (not in "all"): what
//          scripts/bench_lesson04.sh compares with the PyTorch twin (scripts/cnn_torch.py)
//   grads  one forward + backward on a checkpoint, written out for the twin's parity test
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace lesson04 {

struct Options {
  std::string part = "all";  // conv | bench | train | eval | speed | grads | all (= conv, bench, train)
  bool trace = false;        // conv: print every term of one output's sum

  // ---- part "train" (and "eval"): the Fashion-MNIST CNN ----
  std::string dataset = "fashion-mnist";  // or "mnist"
  std::string data_dir;                   // default: searched (see nn::find_dataset_dir)
  std::vector<int> channels = {32, 64};   // output channels of each conv3x3-relu-maxpool block
  int hidden = 128;                       // width of the fully connected layer
  float dropout = 0.25f;                  // on the fully connected layer, training only
  int shift = 0;                          // augmentation: random shifts of up to N pixels
  bool flip = false;                      // augmentation: random horizontal flips
  int epochs = 6;
  int batch_size = 64;
  float lr = 1e-3f;                       // Adam's peak learning rate
  float lr_min_frac = 0.02f;              // cosine decay down to lr * lr_min_frac
  float weight_decay = 0.0f;
  uint64_t seed = 42;
  int threads = 0;                        // 0 = OpenMP's default
  int64_t limit_train = 0;                // use only the first N training images (0 = all)
  int64_t limit_test = 0;
  std::string out_dir = "out/lesson04";   // log, checkpoint, predictions, confusion, features
  std::string checkpoint;                 // eval: default <out-dir>/cnn.safetensors

  // ---- part "bench" ----
  int bench_batch = 16;                   // images per timed call
  int repeats = 5;                        // timed runs per variant (median reported)
  // ---- part "speed" ----
  int speed_steps = 50;                   // training steps (and inference batches) per round
};

void add_options(CLI::App& app, Options& opts);
int run(const Options& opts);

// The parts, callable one by one (tests use them).
int run_conv_part(const Options& opts);
int run_bench_part(const Options& opts);
int run_train_part(const Options& opts);
int run_eval_part(const Options& opts);
int run_speed_part(const Options& opts);
int run_grads_part(const Options& opts);

}  // namespace lesson04
