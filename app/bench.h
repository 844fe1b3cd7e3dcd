// app/bench.h: `nnlab bench`, the kernels' benchmark: for any op, every version at
// chosen sizes and thread counts, validated first, then timed, with the napkin math and
// the roofline against ceilings measured in the same run. Writes JSON and a markdown table.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace app {

struct BenchOptions {
  std::vector<std::string> ops;       // "matmul", ..., or "all"; empty: list the ops
  std::vector<std::string> variants;  // ids or names; empty: all
  std::vector<std::string> sizes;     // empty: each op's defaults
  std::vector<int> threads;           // empty: 1 and all
  int repeats = 5;
  int warmup = 1;
  double max_seconds = 3.0;
  bool no_flush = false;
  bool quick = false;            // each op's small sizes, 1 repeat: a smoke test
  bool list = false;
  std::string out_dir = "out/bench";  // <op>.json and <op>.md (or all.json / all.md)
  std::string name;              // file stem instead of the op name
  uint64_t seed = 1;
};

void add_bench_options(CLI::App& app, BenchOptions& opts);
int run_bench(const BenchOptions& opts);

}  // namespace app
