// Lesson 09: CUDA. See lessons/09-cuda/README.md.
//
//   info      which device the lesson runs on: "on the GPU: <name>", or "EMULATED on the
//             CPU: <why there is no GPU>", and what that means for the numbers; which
//             versions need a newer GPU than the oldest the course supports (5.0)
//   ladder    the matmul ladder, v1 naive ... vN, validated then timed (kernels/cuda/bench/
//             run.h) at a size that suits the device (4096 on a GPU, 128 emulated): each
//             version's line, its speed-up over the previous rung and its ratio to cuBLAS
//   fusion    unfused vs fused: cos2, bias + gelu, residual + layernorm, cross-entropy,
//             attention; the bytes each moves and the time ratio
//   emulator  kernels with the classic bugs (an early return before __syncthreads, an
//             off-by-one, uninitialised shared memory), each caught by the emulator
//   all       every part, in that order
// The kernels are kernels/cuda/*.cu; the ops' descriptions (sizes, references) are
// kernels/cuda/bench/*.cpp; this lesson only walks them.
#pragma once

#include <CLI/CLI.hpp>

#include <iosfwd>
#include <string>
#include <vector>

#include "kernels/cuda/bench/run.h"

namespace lesson09 {

struct Options {
  std::string part = "all";  // info | ladder | fusion | emulator | all
  std::string device;        // gpu | emu; empty: NNLAB_DEVICE, else the GPU if there is one
  bool quick = false;        // the smallest sizes, one timed run: seconds on the emulator
  std::string json;          // save the runner's record of ladder/fusion here (the notebook reads it)
  std::string size;          // part ladder: the matmul size (default: 4096 on a GPU, 128 emulated)
};

void add_options(CLI::App& app, Options& opts);
int run(const Options& opts);

// The ops part fusion compares, in order; each ladder's first version is the unfused one,
// its last the fused one.
const std::vector<std::string>& fusion_ops();

// "on the GPU: NVIDIA H100 ..." or "EMULATED on the CPU: <why>".
std::string device_line(const kernels::cuda::Device& dev, const std::string& why_no_gpu);

// The versions, of every op, that need a newer GPU than compute capability `sm` (10 * major +
// minor), as "matmul v8 (8.0)", from each version's needs.min_sm: what a card of that
// capability cannot run. versions_needing_more_than(dev, 53): a Jetson Nano's list.
std::vector<std::string> versions_needing_more_than(kernels::cuda::Device& dev, int sm);

// Speed-up of each timed non-peer version over the previous timed one (the rung below):
// previous time / this time; 0 for the first rung and for untimed versions.
std::vector<double> rung_speedups(const std::vector<kernels::cuda::bench::Result>& results);

}  // namespace lesson09
