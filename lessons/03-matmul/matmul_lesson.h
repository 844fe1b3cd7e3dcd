// Lesson 03: matmul from loops to SIMD and threads. See lessons/03-matmul/README.md.
//
// The program measures, on the student's own machine, everything the lesson text explains:
//   ceilings  the two roofs: peak FP32 FLOP/s (an FMA loop) and memory bandwidth (a triad)
//   stride    cache lines: reading every s-th float costs the same until s passes a line
//   ladder    the sgemm ladder v1..v6 (kernels/matmul.cpp), validated then timed by the
//             same harness `nnlab bench` uses, against OpenBLAS; a Python loop for scale
//   fusion    the same op as two passes or one, in cache and out of it (kernels/elementwise)
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace lesson03 {

struct Options {
  std::string part = "all";  // ceilings | stride | ladder | fusion | all
  int size = 1024;           // ladder: M = N = K
  std::vector<int> threads;  // ladder, fusion: thread counts (default: 1 and all)
  int repeats = 3;           // timed runs per case (the median is shown)
  bool python = true;        // ladder: also time a pure-Python triple loop, if python3 runs
  bool quick = false;        // small sizes, short measurements (what the tests run)
  std::string out_dir = "out/lesson03";  // ladder.json/.md and fusion.json/.md (the notebook reads them)
};

void add_options(CLI::App& app, Options& opts);
int run(const Options& opts);

// One part at a time (the tests call them).
int run_ceilings_part(const Options& opts);
int run_stride_part(const Options& opts);
int run_ladder_part(const Options& opts);
int run_fusion_part(const Options& opts);

// The pure-Python i-j-k loop at n x n x n, in GFLOP/s; 0 when python3 cannot be run.
double measure_python_gflops(int n);

}  // namespace lesson03
