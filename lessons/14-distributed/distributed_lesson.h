// Lesson 14: beyond one machine. See lessons/14-distributed/README.md. Its parts:
//
//   link       the all-reduce between 2 ranks timed at 256 floats .. 4M floats, over shared
//              memory and over TCP (Open MPI's vader and tcp transports), and the latency and
//              bandwidth of the model t = 2 (N-1)/N bytes / bandwidth + 2 (N-1) latency fitted
//              to each (gpt/plan.h: fit_link), with how far each point is from the fit; and over
//              TCP in a network namespace whose loopback tc holds to --slow-link-gbit (root only)
//   scaling    nnlab gpt train on nanoGPT's CPU configuration as 1 rank x 1 thread, 1 rank x 2
//              threads, and 2 ranks x 1 thread (MPI_Allreduce, the ring, ZeRO-1): tokens/s,
//              ms per step, time in the all-reduce, bytes sent, and the goal (2 ranks of
//              1 thread >= 85% of 1 rank of 2 threads); the link model's prediction of the
//              all-reduce time against the time measured inside the trainer
//   predict    the model extrapolated: step time, speed-up and MFU for N = 1 .. 1024 ranks on
//              NVLink, InfiniBand and Ethernet, for the step lesson 09 measured on an H100 and
//              for the CPU step measured here
//   zero       ZeRO stage 1: the AdamW moments each rank holds for N = 1 .. 8 ranks, measured
//              (the arrays gpt_shard_optimizer leaves) against the plan's 8 P / N bytes
//   recompute  activation recomputation: activation bytes and ms per training step, stored
//              against recomputed, at 4 and 8 layers
//   all        every part, in that order
//
// The multi-rank runs start `mpirun -np 2` on the nnlab program and nnlab_mpi_check beside this
// program; without Open MPI they are skipped and the part says how to get it.
// --json PATH writes what the parts measured (schema "nnlab-lesson14/1"); --quick: small sizes.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "lessons/common/parts.h"

namespace lesson14 {

struct Options {
  std::string part = "all";
  bool quick = false;
  int threads = 0;      // OpenMP threads of the in-process parts (0: the default)
  std::string json;     // write every part's numbers here; empty: none
  std::string out_dir = "out/lesson14";
  std::string data;     // --data for the training runs (empty: the trainer's default search)
  int steps = 60;       // scaling: steps per run (the first 10 are not timed)
  int repeats = 3;      // scaling: runs of each configuration, interleaved
  double slow_link_gbit = 1.0;  // link: the rate-limited loopback's rate (0: none; needs root and
                                // iproute2; not under --quick)
  std::string gpu_record = "docs/benchmarks/gpt-cuda-nvidia-h100-80gb-hbm3.json";  // predict's GPU step
};

void add_options(CLI::App& app, Options& opts);
int run(const Options& opts);

int run_link_part(const Options& opts);       // scaling_part.cpp
int run_scaling_part(const Options& opts);    // scaling_part.cpp
int run_predict_part(const Options& opts);    // scaling_part.cpp
int run_zero_part(const Options& opts);       // memory_part.cpp
int run_recompute_part(const Options& opts);  // memory_part.cpp

// ---- shared by the parts (distributed_lesson.cpp) -------------------------------------------
// A JSON number (null when not finite).
std::string jnum(double v);
// The program `name` beside this one (build/release/bin/nnlab, nnlab_mpi_check), or "".
std::string sibling_program(const std::string& name);
// Open MPI's launcher, or "" (the parts that need it say so and skip).
std::string mpirun_path();
// Runs a shell command, its output to `log`; returns the exit status.
int run_command(const std::string& cmd, const std::string& log);
// What the parts measured and the link part fitted, for the parts after it in one run.
struct Shared {
  bool have_link = false;
  double latency_s = 0, bandwidth_Bps = 0;  // the shared-memory link, fitted
  bool have_scaling = false;
  double cpu_step_s = 0;        // 1 rank x 1 thread, median
  double cpu_grad_bytes = 0;    // the gradients all-reduced per step
  double cpu_flops_per_step = 0;
};
Shared& shared();

}  // namespace lesson14
