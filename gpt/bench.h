// gpt/bench.h: the GPT training step, timed: `nnlab gpt bench` and lesson 08's part flops.
//
//   time_train_step   the median ms of one step (forward, backward, clip, AdamW) at the options'
//                     sizes on random tokens: lesson 08 divides it into the step's FLOPs
//   run_bench         `nnlab gpt bench`: that time for each backend, tokens/s and MFU against
//                     the peak measured now, and PyTorch on the same model in the same run
//                     (scripts/gpt_torch.py, run as a subprocess with the Python that
//                     cmake/torch_python.cmake found)
#pragma once

#include <string>
#include <vector>

#include "gpt/backend.h"
#include "gpt/train.h"

namespace gpt {

struct BenchOptions {
  int iters = 30, warmup = 5;
  // Alternating rounds (CPU peer): ours, then PyTorch at every thread setting, `rounds`
  // times; each side's figure is its median over the rounds, and each round's ratio printed
  int rounds = 1;
  // ours: "naive", "cpu", "cuda" (at --precision) or "cuda:fp32" / "cuda:tf32" / "cuda:bf16"
  std::vector<std::string> backends = {"cpu"};
  bool naive = false;      // also time the naive backend (slow)
  bool profile = false;    // also a per-op time table of each backend (gpt/profile.h)
  bool torch = true;       // run the PyTorch reference in the same run
  std::string torch_settings = "all";   // CPU: the thread settings to try
  std::string torch_modes = "eager,compile";  // GPU: eager and/or torch.compile
  std::string json;        // write the results here
  std::string markdown;    // and a table here
};

// Timing of one training step (forward, backward, clip, AdamW) at the options' sizes on
// random tokens: median ms over `iters` after `warmup`, on a new backend (with the options'
// precision) or on `be`.
double time_train_step(const TrainOptions& o, const std::string& backend, int iters, int warmup);
double time_train_step(const TrainOptions& o, Backend& be, int iters, int warmup);

// The Python that imports torch: $NNLAB_TORCH_PYTHON when set, else the one
// cmake/torch_python.cmake found when this library was built; and scripts/gpt_torch.py of the tree this program runs from (nn::find_in_repo:
// above the executable first, then the tree it was built from); "" when there is none (the
// PyTorch reference is skipped, saying why).
std::string torch_python();
std::string torch_script();
// scripts/llama_torch.py, found the same way: the llama-style model's reference, written as
// Hugging Face's Llama (tests/test_llama_parity.cpp)
std::string llama_torch_script();

// `nnlab gpt bench` at the model and batch of `o`: prints the table (and writes b.json,
// b.markdown when given); exit status.
int run_bench(const TrainOptions& o, const BenchOptions& b);

}  // namespace gpt
