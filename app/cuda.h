// app/cuda.h: `nnlab cuda`, the CUDA kernels from the command line:
//
//   nnlab cuda info                   the device that would be used (the GPU, or the emulator
//                                     and why there is no GPU) and every op's versions on it
//   nnlab cuda bench [OP...]          validate, then time, every version of the ops (all when
//                                     none named) with CUDA events, against the copy bandwidth
//                                     and FLOP ceilings measured in the same run; --json/--md
//                                     save the record (kernels/cuda/bench/run.h)
//   nnlab cuda goals --json FILE      the goals, PASS or FAIL, from a saved record
//
// scripts/gpu_bench.sh runs all three on a GPU and writes docs/benchmarks/cuda-<gpu>.*.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace app {

struct CudaOptions {
  // bench
  std::vector<std::string> ops;       // empty: every op
  std::string device;                 // "gpu", "emu"; empty: NNLAB_DEVICE, else the GPU if any
  std::vector<std::string> sizes;     // empty: the ops' GPU sizes (their test sizes emulated)
  std::vector<std::string> variants;  // ids or names; empty: all
  bool quick = false;                 // the ops' test sizes, one timed run: checks it all runs
  int repeats = 10;
  int warmup = 2;
  double max_seconds = 2.0;
  bool no_flush = false;
  bool list = false;
  std::string json, md;               // where to save the record (none by default)
  uint64_t seed = 1;
  // goals
  std::string goals_json;
};

// Adds the subcommands of `nnlab cuda` (info, bench, goals) to `cmd`, the front door's
// `cuda` command (app/nnlab.cpp).
void add_cuda_subcommands(CLI::App& cmd, CudaOptions& opts);
int run_cuda_command(CLI::App& cuda_cmd, const CudaOptions& opts);

}  // namespace app
