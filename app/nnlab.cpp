// app/nnlab.cpp: the course's front door.
//
//   nnlab lesson01 [--trace]          a neuron and an MLP in plain loops
//   nnlab lesson02 [--part train]     backprop; train an MLP on Fashion-MNIST
//   nnlab lesson03 [--part ladder]    matmul from loops to SIMD and threads, measured
//   nnlab lesson04 [--part train]     convolutional networks; train a CNN on Fashion-MNIST
//   nnlab lesson05 [--part chars]     recurrent networks: a char model and a plant, BPTT
//   nnlab lesson06 [--part compare]   LSTM: the same tasks, RNN vs LSTM
//   nnlab lesson07 [--part loops]     attention: loops, scale, softmax numerics, heads, gradients
//   nnlab lesson08 [--part train]     the GPT: shapes, memory, FLOPs; train and sample
//   nnlab lesson09 [--part ladder]    CUDA: the matmul ladder, fusion, the emulator catching bugs
//   nnlab lesson10 [--part law]       inference: KV cache, the bandwidth law, quantization, speculative decoding, pruning
//   nnlab gpt <train|sample|eval|bench|dump|diff>  the GPT trainer and sampler (lessons 07-08)
//   nnlab check                       check your exercises, first failure first
//   nnlab bench [op...]               validate, then time, every version of a kernel
//   nnlab cuda <info|bench|goals>     the CUDA kernels: the device, their benchmark, the goals
//   nnlab info                        what this build can do (SIMD, threads, CUDA)
//
// Each subcommand is the same code as the lesson's stand-alone program (lessons/NN-*/main.cpp).
#include <CLI/CLI.hpp>
#include <omp.h>

#include <iostream>
#include <string>

#include "app/bench.h"
#include "app/check.h"
#include "app/cuda.h"
#include "app/info.h"
#include "gpt/cli.h"
#include "lessons/01-neuron/neuron.h"
#include "lessons/02-backprop/backprop.h"
#include "lessons/03-matmul/matmul_lesson.h"
#include "lessons/04-cnn/cnn.h"
#include "lessons/05-rnn/rnn_lesson.h"
#include "lessons/06-lstm/lstm_lesson.h"
#include "lessons/07-attention/attention_lesson.h"
#include "lessons/08-gpt/gpt_lesson.h"
#include "lessons/09-cuda/cuda_lesson.h"
#include "lessons/10-inference/inference_lesson.h"
#include "lessons/common/cli.h"

int main(int argc, char** argv) {
  CLI::App app{"nnlab: neural networks from scratch, from loops to a GPT on hand-written kernels.\n"
               "Start with `nnlab lesson01`, read lessons/01-neuron/README.md beside it.",
               "nnlab"};
  app.require_subcommand(1);

  lesson01::Options lesson01_opts;
  CLI::App* lesson01_cmd = app.add_subcommand("lesson01", "Lesson 01: a neuron and an MLP in plain loops");
  lesson01::add_options(*lesson01_cmd, lesson01_opts);

  lesson02::Options lesson02_opts;
  CLI::App* lesson02_cmd =
      app.add_subcommand("lesson02", "Lesson 02: backprop and gradient descent; train on Fashion-MNIST");
  lesson02::add_options(*lesson02_cmd, lesson02_opts);

  lesson03::Options lesson03_opts;
  CLI::App* lesson03_cmd =
      app.add_subcommand("lesson03", "Lesson 03: matmul from loops to SIMD and threads, measured here");
  lesson03::add_options(*lesson03_cmd, lesson03_opts);

  lesson04::Options lesson04_opts;
  CLI::App* lesson04_cmd =
      app.add_subcommand("lesson04", "Lesson 04: convolutional networks; train a CNN on Fashion-MNIST");
  lesson04::add_options(*lesson04_cmd, lesson04_opts);

  lesson05::Options lesson05_opts;
  CLI::App* lesson05_cmd = app.add_subcommand(
      "lesson05", "Lesson 05: recurrent networks; a character model and a simulated plant");
  lesson05::add_options(*lesson05_cmd, lesson05_opts);

  lesson06::Options lesson06_opts;
  CLI::App* lesson06_cmd =
      app.add_subcommand("lesson06", "Lesson 06: LSTM; the same tasks, RNN vs LSTM side by side");
  lesson06::add_options(*lesson06_cmd, lesson06_opts);

  lesson07::Options lesson07_opts;
  CLI::App* lesson07_cmd = app.add_subcommand(
      "lesson07", "Lesson 07: attention; causal self-attention in loops, scaled, multi-head, checked");
  lesson07::add_options(*lesson07_cmd, lesson07_opts);

  lesson08::Options lesson08_opts;
  CLI::App* lesson08_cmd = app.add_subcommand(
      "lesson08", "Lesson 08: the GPT; every shape, the memory, the FLOPs; train and sample");
  lesson08::add_options(*lesson08_cmd, lesson08_opts);

  lesson09::Options lesson09_opts;
  CLI::App* lesson09_cmd = app.add_subcommand(
      "lesson09", "Lesson 09: CUDA; the matmul ladder, kernel fusion, the emulator catching bugs");
  lesson09::add_options(*lesson09_cmd, lesson09_opts);

  lesson10::Options lesson10_opts;
  CLI::App* lesson10_cmd = app.add_subcommand(
      "lesson10", "Lesson 10: inference; KV cache, the bandwidth law, quantization, speculative decoding, pruning");
  lesson10::add_options(*lesson10_cmd, lesson10_opts);

  gpt::CliOptions gpt_opts;
  CLI::App* gpt_cmd = gpt::add_gpt_command(app, gpt_opts);

  app::CheckOptions check_opts;
  CLI::App* check_cmd = app.add_subcommand("check", "Check your exercises (exercises/), first failure first");
  app::add_check_options(*check_cmd, check_opts);

  app::BenchOptions bench_opts;
  CLI::App* bench_cmd = app.add_subcommand(
      "bench", "Benchmark kernels: validate every version, then time it, against measured ceilings");
  app::add_bench_options(*bench_cmd, bench_opts);

  app::CudaOptions cuda_opts;
  CLI::App* cuda_cmd = app::add_cuda_command(app, cuda_opts);

  CLI::App* info_cmd = app.add_subcommand("info", "Show what this build can do: compiler, SIMD, threads, CUDA");

  // CLI11 reports an unknown first word only as "a subcommand is required"; name it.
  bool known = argc <= 1 || argv[1][0] == '-';
  if (!known) {
    try {
      known = app.get_subcommand(argv[1]) != nullptr;
    } catch (const CLI::OptionNotFound&) {
      known = false;
    }
  }
  if (!known) {
    std::cerr << "nnlab: unknown command '" << argv[1] << "'. Commands: lesson01, lesson02, lesson03, lesson04, lesson05, lesson06, lesson07, lesson08, lesson09, lesson10, gpt, check, bench, cuda, info.\n"
              << "Run with --help for more information.\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  return lessons::run_guarded([&] {
    if (*lesson01_cmd) return lesson01::run(lesson01_opts);
    if (*lesson02_cmd) return lesson02::run(lesson02_opts);
    if (*lesson03_cmd) return lesson03::run(lesson03_opts);
    if (*lesson04_cmd) return lesson04::run(lesson04_opts);
    if (*lesson05_cmd) return lesson05::run(lesson05_opts);
    if (*lesson06_cmd) return lesson06::run(lesson06_opts);
    if (*lesson07_cmd) return lesson07::run(lesson07_opts);
    if (*lesson08_cmd) return lesson08::run(lesson08_opts);
    if (*lesson09_cmd) return lesson09::run(lesson09_opts);
    if (*lesson10_cmd) return lesson10::run(lesson10_opts);
    if (*gpt_cmd) return gpt::run_gpt_command(*gpt_cmd, gpt_opts);
    if (*check_cmd) return app::run_check(check_opts);
    if (*bench_cmd) return app::run_bench(bench_opts);
    if (*cuda_cmd) return app::run_cuda_command(*cuda_cmd, cuda_opts);
    if (*info_cmd) return app::run_info();
    return 2;  // unreachable: require_subcommand(1)
  });
}
